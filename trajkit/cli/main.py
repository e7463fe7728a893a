"""Entry point of the ``trajkit`` console script.

Each command group lives in its own module exposing ``register(subparsers)``; a command's handler
returns an exit code. The parser is built for the command being run: the other groups appear by name and
help line only (:data:`trajkit.cli.commands.COMMANDS`), so no command pays for another's imports and
``trajkit --version`` imports none of them (``tests/test_cli_imports.py`` pins both). Library errors
(:class:`trajkit.errors.TrajkitError`) become one line on stderr and exit code 2; Ctrl-C becomes one line
and exit code 130 (every output file is written atomically, so an interrupted command leaves the files it
was writing as they were before).
"""
from __future__ import annotations

import argparse
import importlib
import sys

from trajkit import version
from trajkit.cli.commands import COMMANDS
from trajkit.errors import TrajkitError


def build_parser(argv: list[str] | None = None) -> argparse.ArgumentParser:
    """The ``trajkit`` parser. Without ``argv`` every command group is registered in full (for tests and
    help tools); with it, only the group that ``argv`` names, the others as a name and a help line."""
    parser = argparse.ArgumentParser(
        prog="trajkit",
        description="Agentic RL post-training toolkit: traces, exact speculative rollouts, GRPO training.",
        epilog="Example: trajkit traces stats data.jsonl --json",
    )
    parser.add_argument("--version", action="version", version=f"trajkit {version()}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    chosen = None if argv is None else next((a for a in argv if not a.startswith("-")), "")
    for name, summary in COMMANDS.items():
        if chosen is None or chosen == name:
            importlib.import_module(f"trajkit.cli.{name}").register(sub)
        else:
            sub.add_parser(name, help=summary)
    return parser


def parse(parser: argparse.ArgumentParser, argv: list[str] | None) -> argparse.Namespace:
    """``parser.parse_args``, except that ``key=value`` overrides may come before or after options
    (``trajkit train cfg.yaml --no-progress steps=3``): argparse stops collecting them at the first option."""
    args, extra = parser.parse_known_args(argv)
    if extra and isinstance(getattr(args, "overrides", None), list) \
            and all("=" in item and not item.startswith("-") for item in extra):
        args.overrides.extend(extra)
    elif extra:
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    return args


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = build_parser(argv)
    args = parse(parser, argv)
    if not getattr(args, "handler", None):
        parser.print_help()
        return 0 if args.command is None else 2
    try:
        return int(args.handler(args) or 0)
    except TrajkitError as exc:
        print("trajkit: error: " + " ".join(str(exc).splitlines()), file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("trajkit: interrupted (files being written were discarded)", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
