"""``trajkit traces synth``: write a seeded synthetic Hermes-format corpus."""
from __future__ import annotations

from trajkit.config import add_arguments, from_args


def cmd_synth(args) -> int:
    from trajkit.synth import SynthConfig, write_corpus

    cfg = from_args(SynthConfig, args)
    write_corpus(args.out, cfg)
    print(f"wrote {cfg.rows:,} {cfg.style}-style rows (seed {cfg.seed}) -> {args.out}")
    return 0


def register(tsub, _add_common) -> None:
    from trajkit.synth import SynthConfig

    p = tsub.add_parser("synth", help="generate a seeded synthetic corpus with every real-data quirk",
                        description="Generate synthetic Hermes-agent traces (kimi or glm-5.1 style).",
                        epilog="Example: trajkit traces synth --rows 14701 --style kimi --seed 0 --out kimi.jsonl")
    p.add_argument("--out", required=True, help="output file: .jsonl, .jsonl.gz or .parquet")
    add_arguments(p, SynthConfig)
    p.set_defaults(handler=cmd_synth)
