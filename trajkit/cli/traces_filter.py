"""``trajkit traces filter``: keep rows that pass readable predicates; report what each removed."""
from __future__ import annotations

import json

from trajkit.config import add_arguments, from_args


def cmd_filter(args) -> int:
    from trajkit.cli.traces import summary_stream, warn_skipped
    from trajkit.traces.filters import FilterConfig, filter_corpus

    cfg = from_args(FilterConfig, args, categories=args.category or [],
                    exclude_categories=args.exclude_category or [])
    report = filter_corpus(args.paths, cfg, args.out, strict=args.strict, on_error=warn_skipped, progress=not args.quiet)
    out = summary_stream(args)
    if args.json:
        print(json.dumps(report.as_dict(), indent=2), file=out)
        return 0
    print(f"read {report.read} rows, kept {report.kept}, skipped {report.skipped_rows} unreadable -> {args.out}",
          file=out)
    for name, n in report.removed_by.items():
        if n:
            print(f"  removed by {name}: {n}", file=out)
    return 0


def register(tsub, add_common) -> None:
    from trajkit.traces.filters import FilterConfig

    p = tsub.add_parser("filter", help="keep rows passing predicates (think depth, malformed calls, ...)",
                        description="Filter traces; kept rows are written unchanged.",
                        epilog="Example: trajkit traces filter kimi.jsonl --min-think-words 50 "
                               "--drop-malformed --max-failure-rate 0.5 --dedup --out clean.jsonl")
    add_common(p)
    p.add_argument("--out", required=True, help="output file: .jsonl, .jsonl.gz, .jsonl.xz or .parquet; - for "
                                                "JSON Lines on stdout (the summary then goes to stderr)")
    add_arguments(p, FilterConfig)
    p.add_argument("--category", action="append", help="keep only this category (repeatable)")
    p.add_argument("--exclude-category", action="append", help="drop this category (repeatable)")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.set_defaults(handler=cmd_filter)
