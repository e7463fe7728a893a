"""``trajkit bench NAME``: run a benchmark from :mod:`trajkit.bench` (table on stdout, JSON on request).

Each benchmark module under ``trajkit/bench`` exposes ``DESCRIPTION``, ``add_arguments(parser)`` and
``run(args) -> int`` (a NAME with a dash lives in the module with an underscore);
``benchmarks/bench_NAME.py`` are thin scripts calling the same code.
"""
from __future__ import annotations

import argparse
import importlib

from trajkit.cli.commands import COMMANDS

BENCHMARKS = ("traces", "cli", "generate", "train", "export", "gateway", "optim", "long-context", "rollout",
              "prefix-cache", "cache", "suffix-reuse", "sandbox", "tinker")


def register(sub) -> None:
    p = sub.add_parser("bench", help=COMMANDS["bench"],
                       description="Run a benchmark. Example: trajkit bench traces --rows 2000 --out out.json")
    bsub = p.add_subparsers(dest="bench", metavar="NAME")
    for name in BENCHMARKS:
        module = importlib.import_module(f"trajkit.bench.{name.replace('-', '_')}")
        example = getattr(module, "EXAMPLE", f"trajkit bench {name}")
        bp = bsub.add_parser(name, help=module.DESCRIPTION, description=module.DESCRIPTION,
                             epilog=f"Example: {example}", formatter_class=argparse.RawDescriptionHelpFormatter)
        module.add_arguments(bp)
        bp.set_defaults(handler=module.run)
