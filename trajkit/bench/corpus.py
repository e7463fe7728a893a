"""The synthetic corpus the trace benchmarks read: generated once per (style, rows) and kept."""
from __future__ import annotations

import sys
from pathlib import Path


def add_corpus_arguments(parser, rows: int, rows_help: str) -> None:
    parser.add_argument("--rows", type=int, default=rows, help=rows_help)
    parser.add_argument("--style", default="kimi", choices=["kimi", "glm-5.1"], help="generator style")
    parser.add_argument("--corpus", help="use this JSONL file instead of generating one")
    parser.add_argument("--cache-dir", default="bench-out", help="where generated corpora are kept")


def corpus_path(args) -> Path:
    """``--corpus``, or the generated ``corpus-STYLE-ROWS.jsonl`` under ``--cache-dir`` (made once)."""
    if args.corpus:
        return Path(args.corpus)
    from trajkit.synth import SynthConfig, write_corpus

    path = Path(args.cache_dir) / f"corpus-{args.style}-{args.rows}.jsonl"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        print(f"generating {args.rows:,} {args.style}-style rows -> {path}", file=sys.stderr)
        write_corpus(str(path), SynthConfig(rows=args.rows, style=args.style, seed=0))  # written atomically
    return path
