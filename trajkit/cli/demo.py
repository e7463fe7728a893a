"""``trajkit demo``: the whole pipeline on bundled data (what ``make demo`` runs)."""
from __future__ import annotations

from trajkit.cli.commands import COMMANDS


def cmd_demo(args) -> int:
    from trajkit.demo import run_demo

    run_demo(args.out, args.stage)
    return 0


def register(sub) -> None:
    from trajkit.demo import STAGES

    p = sub.add_parser("demo", help=COMMANDS["demo"],
                       description="Run the end-to-end demo on bundled data; nothing is downloaded.",
                       epilog="Example: trajkit demo --out trajkit-demo --stage traces")
    p.add_argument("--out", default="trajkit-demo", help="output folder (default: trajkit-demo)")
    p.add_argument("--stage", action="append", choices=list(STAGES), help="run only this stage (repeatable)")
    p.set_defaults(handler=cmd_demo)
