"""Benchmark: SmolLM2's per-token loss on SFT examples longer than its 8,192-position window, with YaRN
against truncation.

The bundled sample (:func:`trajkit.synth.sample_paths`, 100 kimi + 100 glm-5.1 conversations) is exported
with SmolLM2's tokenizer and chat template (``--max-length`` large enough that nothing is windowed, so each
conversation is one example); the ``--examples`` longest examples past the window (the longest from each
source in turn) are scored, no training. The loss is the mean next-token cross-entropy (nats) over an
example's trained tokens (label != -100, the assistant turns), split into ``head`` (positions < W, the
window W = 8,192) and ``tail`` (positions >= W). Arms:

- ``truncate``: the example cut at W tokens, as a trainer that truncates sees it; it has a head only (its
  tail tokens are not trained at all: the ``tail dropped`` column counts them);
- ``truncate+window``: the tail scored with the last W tokens as context (a left-truncated second window,
  what a windowing trainer would see), plain RoPE;
- ``rope``: the whole example with plain RoPE past W (extrapolation, the model as it is);
- ``yarn xF``: the whole example with YaRN factor F (:mod:`trajkit.models.rope`), no fine-tuning.

Causality makes ``truncate``'s head the ``rope`` arm's head (the same logits, positions < W), so both come
from one forward. Per-token losses are summed over all scored examples (token-weighted means). Memory and
time are not the point; one forward of ~10k tokens takes 1-2 minutes on 2 CPU cores.
"""
from __future__ import annotations

import math
import tempfile
import time
from pathlib import Path

DESCRIPTION = "per-token loss of SmolLM2 on exported examples past its 8k window: YaRN x2/x4 vs truncation"
EXAMPLE = "trajkit bench long-context --examples 6 --factors 2,4 --out bench-out/long_context.json"
IGNORE = -100


def add_arguments(p) -> None:
    p.add_argument("--examples", type=int, default=6, help="examples past the window to score (longest first, "
                   "alternating sources)")
    p.add_argument("--factors", default="2,4", help="comma-separated YaRN factors")
    p.add_argument("--export-max-length", type=int, default=65536, help="export --max-length (nothing windowed)")
    p.add_argument("--chunk", type=int, default=1024, help="output layer applied this many positions at a time")
    p.add_argument("--threads", type=int, default=0, help="torch threads (0 = torch's default)")
    p.add_argument("--out", default="bench-out/long_context.json", help="where to write the results (JSON)")
    p.add_argument("--json", action="store_true", help="print the results as JSON instead of the table")


def long_examples(tokenizer_dir: str, window: int, count: int, max_length: int) -> list[dict]:
    """The bundled sample exported with the tokenizer; the ``count`` longest examples over ``window``
    tokens, taking the longest remaining of each source in turn."""
    import json

    from trajkit.synth import sample_paths
    from trajkit.traces.load import iter_traces
    from trajkit.traces.export.token_export import export_trace_tokens
    from trajkit.traces.export.tokenize import TokenizeConfig

    by_source: dict[str, list[dict]] = {}
    for path in sample_paths():
        with tempfile.TemporaryDirectory() as tmp:
            out = Path(tmp) / "tokens.jsonl"
            export_trace_tokens(iter_traces([str(path)]), tokenizer_dir, TokenizeConfig(max_length=max_length),
                                str(out), malformed="as_text", progress=False)
            rows = [json.loads(line) for line in out.read_text().splitlines()]
        source = path.name.split(".jsonl")[0]
        long = sorted((r for r in rows if len(r["input_ids"]) > window), key=lambda r: -len(r["input_ids"]))
        by_source[source] = [{"source": source, "conversation": r["conversation"], "input_ids": r["input_ids"],
                              "labels": r["labels"]} for r in long]
    picked: list[dict] = []
    while len(picked) < count and any(by_source.values()):
        for rows in by_source.values():
            if rows and len(picked) < count:
                picked.append(rows.pop(0))
    return picked


def token_losses(model, ids: list[int], chunk: int):
    """``-log p(ids[t] | ids[:t])`` for t = 1..len-1 -> float32 ``[len-1]`` (no gradient)."""
    import torch

    from trajkit.models.logprobs import chunked_logprobs

    with torch.no_grad():
        return -chunked_logprobs(model, torch.tensor([ids]), None, 1.0, chunk)[0]


class Tally:
    """Summed loss and token count per (arm, part)."""

    def __init__(self):
        self.sums: dict[tuple[str, str], list[float]] = {}

    def add(self, arm: str, part: str, losses, mask) -> None:
        entry = self.sums.setdefault((arm, part), [0.0, 0])
        entry[0] += float(losses[mask].double().sum())
        entry[1] += int(mask.sum())

    def mean(self, arm: str, part: str) -> float | None:
        total, n = self.sums.get((arm, part), (0.0, 0))
        return total / n if n else None

    def count(self, arm: str, part: str) -> int:
        return self.sums.get((arm, part), (0.0, 0))[1]


def score_example(models: dict, ex: dict, window: int, chunk: int, tally: Tally) -> dict:
    """All arms on one example -> its per-arm means; adds its tokens to ``tally``."""
    import torch

    ids, labels = ex["input_ids"], torch.tensor(ex["labels"][1:])  # labels[t] is the target of position t-1
    trained = labels != IGNORE
    pos = torch.arange(1, len(ids))  # the target token's position
    head, tail = trained & (pos < window), trained & (pos >= window)
    one = Tally()
    for name, model in models.items():
        losses = token_losses(model, ids, chunk)
        for t in (tally, one):
            t.add(name, "head", losses, head)
            t.add(name, "tail", losses, tail)
            if name == "rope":
                t.add("truncate", "head", losses, head)
    start = len(ids) - window  # the last `window` tokens as context for the tail
    losses = token_losses(models["rope"], ids[start:], chunk)
    for t in (tally, one):
        t.add("truncate+window", "tail", losses, tail[start:])
    arms = ["truncate", "truncate+window", *models]
    return {"source": ex["source"], "conversation": ex["conversation"], "tokens": len(ids),
            "head_tokens": int(head.sum()), "tail_tokens": int(tail.sum()),
            "loss": {a: {p: one.mean(a, p) for p in ("head", "tail")} for a in arms}}


def run(args) -> int:
    import torch

    from trajkit.bench.output import emit
    from trajkit.models.load import load_model
    from trajkit.models.rope import RopeScaling
    from trajkit.progress import quiet_transformers
    from trajkit.recipes.smollm2 import prepare_model

    quiet_transformers()
    factors = [float(f) for f in args.factors.split(",") if f.strip()]
    if args.examples < 1 or not factors or min(factors) <= 1:
        raise SystemExit("--examples must be >= 1 and every --factors value > 1")
    if args.threads:
        torch.set_num_threads(args.threads)
    folder = str(prepare_model())
    models = {"rope": load_model(folder)}
    window = models["rope"].config.max_position_embeddings
    for f in factors:
        models[f"yarn x{f:g}"] = load_model(folder, rope_scaling=RopeScaling(type="yarn", factor=f))
    longest = max(RopeScaling(type="yarn", factor=f).window(window) for f in factors)
    examples = long_examples(folder, window, args.examples, args.export_max_length)
    if any(len(e["input_ids"]) > longest for e in examples):
        raise SystemExit(f"an example is longer than the largest YaRN window ({longest}); raise --factors")
    tally, rows, start = Tally(), [], time.perf_counter()
    for i, ex in enumerate(examples):
        rows.append(score_example(models, ex, window, args.chunk, tally))
        print(f"example {i + 1}/{len(examples)}: {ex['source']} {len(ex['input_ids'])} tokens, "
              f"{time.perf_counter() - start:.0f} s", flush=True)
    arms = ["truncate", "truncate+window", *models]
    summary = {a: {"head": tally.mean(a, "head"), "tail": tally.mean(a, "tail"),
                   "head_tokens": tally.count(a, "head"), "tail_tokens": tally.count(a, "tail")} for a in arms}
    dropped = sum(r["tail_tokens"] for r in rows)
    results = {"model": "SmolLM2-135M-Instruct (float32)", "window": window, "factors": factors,
               "examples": len(rows), "tokens": [r["tokens"] for r in rows], "tail_dropped_by_truncation": dropped,
               "summary": summary, "per_example": rows, "wall_seconds": time.perf_counter() - start}
    emit(args, results, _print_table)
    return 0


def _print_table(res: dict) -> None:
    def fmt(x):
        return "-" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.3f}"
    print(f"{res['model']}, window {res['window']}: {res['examples']} exported examples of "
          f"{min(res['tokens'])}-{max(res['tokens'])} tokens; loss = mean nats per trained token")
    print(f"{'arm':<17} {'head (< W)':>11} {'tokens':>7} {'tail (>= W)':>12} {'tokens':>7}")
    for arm, s in res["summary"].items():
        print(f"{arm:<17} {fmt(s['head']):>11} {s['head_tokens']:>7} {fmt(s['tail']):>12} {s['tail_tokens']:>7}")
    print(f"truncation drops the {res['tail_dropped_by_truncation']} trained tail tokens from training")
