"""``trajkit traces …``: stats, report, export, template-info, filter, synth."""
from __future__ import annotations

import argparse
import json
import sys

from trajkit.cli.commands import COMMANDS
from trajkit.errors import InputError


def warn_skipped(exc: InputError) -> None:
    print(f"trajkit: warning: skipped {exc}", file=sys.stderr)


def show_progress(args) -> bool:
    return not getattr(args, "quiet", False)


def cmd_stats(args) -> int:
    from trajkit.traces.load import no_rows_error
    from trajkit.traces.stats import compute_stats, format_table

    count_tokens = None
    if args.tokenizer:
        from trajkit.models.load import load_tokenizer, local_folder

        tok = load_tokenizer(local_folder(args.tokenizer), what="--tokenizer")
        count_tokens = lambda text: len(tok(text, add_special_tokens=False)["input_ids"])  # noqa: E731
    stats = compute_stats(args.paths, strict=args.strict, on_error=warn_skipped, count_tokens=count_tokens,
                          progress=show_progress(args) and not args.json)
    if not stats.total.traces:
        raise no_rows_error(args.paths, stats.skipped_rows)
    data = stats.to_dict()
    if args.json:
        json.dump(data, sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        print(format_table(data, by=args.by))
    return 0


def summary_stream(args):
    """Where a command's summary goes: stderr when its rows go to stdout (``--out -``)."""
    return sys.stderr if getattr(args, "out", None) == "-" else sys.stdout


def _add_common(p: argparse.ArgumentParser) -> None:
    p.add_argument("paths", nargs="+", metavar="PATH",
                   help="JSONL/JSON/Parquet files (optionally .gz), - for JSON Lines on stdin, or "
                        "hf:NAME[:CONFIG[:SPLIT]]")
    p.add_argument("--strict", action="store_true", help="stop at the first unreadable row (exit 2)")
    p.add_argument("--quiet", "-q", action="store_true", help="no progress bar")


def register(sub) -> None:
    p = sub.add_parser("traces", help=COMMANDS["traces"],
                       description="Work with agent reasoning traces (Hermes ShareGPT or OpenAI messages).")
    tsub = p.add_subparsers(dest="traces_command", metavar="COMMAND")

    s = tsub.add_parser("stats", help="corpus metrics (table, or JSON with --json)",
                        description="Compute trace metrics over one or more sources.",
                        epilog="Example: trajkit traces stats kimi.jsonl glm.jsonl --json > stats.json")
    _add_common(s)
    s.add_argument("--json", action="store_true", help="print one JSON object instead of the table")
    s.add_argument("--by", default="source", choices=["source", "category", "subcategory"],
                   help="columns of the table beside the whole corpus (default: source)")
    s.add_argument("--tokenizer", help="local tokenizer folder: also count think tokens")
    s.set_defaults(handler=cmd_stats)

    for name in ("report", "export", "filter", "synth"):
        module = __import__(f"trajkit.cli.traces_{name}", fromlist=["register"])
        module.register(tsub, _add_common)
