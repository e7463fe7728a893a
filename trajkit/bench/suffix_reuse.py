"""Benchmark: what approximate suffix reuse costs in distribution, on held-out edited turns of real traces.

Calls are replayed from ``TRACES`` as :mod:`trajkit.bench.cache` does, in its ``stripped`` variant (each call
sends the earlier turns without their reasoning, so the previous reply's think block is the edit). For each
call that follows an edit and keeps a surviving block of >= ``--min-block`` tokens after it, and whose prompt
plus continuation fits ``--max-tokens``: the old sequence (previous prompt + reply) is run exactly, the new
prompt is built from it by :func:`trajkit.engine.suffix.approximate_cache`, and the call's recorded reply
(its first ``--continuation`` tokens) is teacher-forced through both that cache and one exact forward.
Reported over all those tokens: KL(p_exact || p_approx) mean / p95 / max, top-1 agreement, the first greedy
divergence per turn, and the share of the new prompt's tokens that were copied rather than computed; and
whether the gate of issue 21 (mean KL <= 1e-3, p95 <= 1e-2) is met on this model.
"""
from __future__ import annotations

from trajkit.bench.output import emit

DESCRIPTION = "approximate suffix reuse on edited turns: KL to the exact path (mean/p95/max), top-1 agreement"
EXAMPLE = ("trajkit bench suffix-reuse trajkit/data/sample/glm-5.1.jsonl.xz --model ~/.cache/trajkit/"
           "smollm2-135m-instruct/model --turns 4 --out bench-out/bench_suffix_reuse.json")
GATE = (1e-3, 1e-2)  # mean, p95


def add_arguments(parser) -> None:
    parser.add_argument("traces", nargs="+", help="trace files (Hermes ShareGPT / OpenAI JSONL, .xz ok)")
    parser.add_argument("--model", required=True, help="local model folder (tokenizer beside it)")
    parser.add_argument("--chat-template", default=None, help="a Jinja chat template file used instead")
    parser.add_argument("--turns", type=int, default=4, help="edited turns to measure (default: 4)")
    parser.add_argument("--max-tokens", type=int, default=4096, help="longest prompt + continuation (default: 4096)")
    parser.add_argument("--continuation", type=int, default=64, help="reply tokens teacher-forced (default: 64)")
    parser.add_argument("--min-block", type=int, default=64, help="shortest reused block (default: 64)")
    parser.add_argument("--max-blocks", type=int, default=8, help="most blocks reused per call (default: 8)")
    parser.add_argument("--boundary", type=int, default=4, help="tokens recomputed at each block end (default: 4)")
    parser.add_argument("--threads", type=int, default=2, help="torch threads (default: 2)")
    parser.add_argument("--out", default="bench-out/bench_suffix_reuse.json", help="JSON output path")
    parser.add_argument("--json", action="store_true", help="print the JSON results instead of the table")


def edited_turns(convs, tokenizer, args):
    """(old, new, continuation) of calls after an edit that keep a surviving block, within the size limit."""
    from trajkit.bench.cache import common_prefix, conversation_calls
    from trajkit.engine.suffix import surviving_blocks

    for conv in convs:
        calls = conversation_calls(conv, tokenizer, strip=True)
        for (_, _, old), (_, new, after) in zip(calls, calls[1:]):
            cont = after[len(new):][:args.continuation]
            p = common_prefix(old, new)
            if not cont or p == len(old) or len(new) + len(cont) > args.max_tokens:
                continue
            if surviving_blocks(old, new, p, args.min_block, args.max_blocks):
                yield old, new, cont


def run(args) -> int:
    import torch

    from trajkit.engine.suffix import suffix_reuse_kl
    from trajkit.models.load import load_model, load_tokenizer
    from trajkit.traces.load import iter_traces
    from trajkit.traces.export.sft_render import render_trace
    from trajkit.traces.export.template_probe import choose_rendering, probe_template

    torch.set_num_threads(args.threads)
    tokenizer = load_tokenizer(args.model, what="--model")
    if args.chat_template:
        with open(args.chat_template, encoding="utf-8") as fh:
            tokenizer.chat_template = fh.read()
    rendering = choose_rendering(probe_template(tokenizer))
    model = load_model(args.model, what="--model").eval()
    convs = (render_trace(t, rendering, malformed="as_text") for t in iter_traces(args.traces, on_error=lambda e: None))
    turns = []
    for old, new, cont in edited_turns(convs, tokenizer, args):
        r = suffix_reuse_kl(model, old, new, cont, min_block=args.min_block, max_blocks=args.max_blocks,
                            boundary=args.boundary)
        turns.append({**r, "new_tokens": len(new), "continuation": len(cont)})
        if len(turns) >= args.turns:
            break
    kl = torch.tensor([x for t in turns for x in t["kl"]], dtype=torch.float64)
    tokens = sum(len(t["kl"]) for t in turns)
    summary = {"turns": len(turns), "tokens": tokens,
               "kl_mean": float(kl.mean()) if tokens else 0.0,
               "kl_p95": float(kl.quantile(0.95)) if tokens else 0.0, "kl_max": float(kl.max()) if tokens else 0.0,
               "top1_agreement": sum(t["top1_agreement"] * len(t["kl"]) for t in turns) / tokens if tokens else 0.0,
               "copied_share": sum(t["copied"] for t in turns) / max(1, sum(t["new_tokens"] for t in turns)),
               "first_divergence": [t["first_divergence"] for t in turns]}
    summary["gate_met"] = bool(tokens) and summary["kl_mean"] <= GATE[0] and summary["kl_p95"] <= GATE[1]
    for t in turns:
        t["kl_mean"] = sum(t.pop("kl")) / max(1, t["continuation"])
    results = {"traces": args.traces, "model": args.model, "chat_template": args.chat_template,
               "min_block": args.min_block, "boundary": args.boundary, "summary": summary, "per_turn": turns}
    emit(args, results, _table)
    return 0


def _table(r: dict) -> None:
    s = r["summary"]
    print(f"suffix reuse on {s['turns']} edited turns ({s['tokens']} teacher-forced tokens), {r['model']}, "
          f"blocks >= {r['min_block']}, boundary {r['boundary']}")
    print(f"{'turn':>4} {'prompt':>7} {'prefix':>7} {'copied':>7} {'computed':>8} {'KL mean':>10} {'top-1':>6} {'1st div':>7}")
    for i, t in enumerate(r["per_turn"]):
        print(f"{i + 1:>4} {t['new_tokens']:>7} {t['prefix']:>7} {t['copied']:>7} {t['computed']:>8} "
              f"{t['kl_mean']:>10.2e} {t['top1_agreement']:>6.3f} {t['first_divergence']:>7}")
    print(f"KL mean {s['kl_mean']:.2e}, p95 {s['kl_p95']:.2e}, max {s['kl_max']:.2e}; top-1 agreement "
          f"{s['top1_agreement']:.3f}; {100 * s['copied_share']:.1f}% of prompt tokens copied; gate (mean <= 1e-3, "
          f"p95 <= 1e-2) {'met' if s['gate_met'] else 'NOT met: keep suffix reuse off on this model'}")
