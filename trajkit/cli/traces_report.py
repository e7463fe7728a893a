"""``trajkit traces report``: charts and one self-contained HTML page (thin wrapper over
:func:`trajkit.traces.report.write_report`)."""
from __future__ import annotations

from trajkit.config import add_arguments, from_args
from trajkit.traces.report import ReportConfig

EPILOG = """Examples:
  trajkit traces report kimi.jsonl glm.jsonl --out report/
  trajkit traces report hf:lambda/hermes-agent-reasoning-traces:kimi --out report/ --max-traces 500
  trajkit audit data --train sft.jsonl --eval eval.jsonl --json > audit.json
  trajkit traces report sft.jsonl --out report/ --audit audit.json

Writes DIR/report.html (charts, tables and a searchable trace viewer; no external resources, trace text
escaped), DIR/stats.json (as `trajkit traces stats --json`) and DIR/charts/*.png. --audit: the verdict
tables of trajkit audit ... --json files, at the top of the page."""


def cmd_report(args) -> int:
    from trajkit.cli.traces import show_progress, warn_skipped
    from trajkit.traces.report import write_report

    config = from_args(ReportConfig, args)
    path = write_report(args.paths, args.out, config=config, strict=args.strict, on_error=warn_skipped,
                        progress=show_progress(args), require_rows=True, audit=args.audit)
    size = path.stat().st_size / 1e6
    print(f"trajkit: report written to {path} ({size:.1f} MB); charts in {path.parent / 'charts'}")
    return 0


def register(tsub, add_common) -> None:
    import argparse

    p = tsub.add_parser("report", help="PNG charts and one self-contained HTML report with a trace viewer",
                        description="Stream the sources once and write charts, tables and a searchable trace "
                                    "viewer into one self-contained HTML file.",
                        epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_common(p)
    p.add_argument("--out", required=True, metavar="DIR", help="output folder (created if missing)")
    p.add_argument("--audit", nargs="+", metavar="FILE", help="trajkit audit ... --json files: their verdict "
                                                              "tables head the page")
    add_arguments(p, ReportConfig)
    p.set_defaults(handler=cmd_report)
