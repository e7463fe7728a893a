"""Benchmark: trajkit's engine (plain, speculative with the draft model, with n-gram lookup and, on
SmolLM2, with its EAGLE-style head; auto k) against Hugging Face ``generate`` and HF assisted generation,
side by side in one run on the shipped tiny pair (:mod:`trajkit.recipes.tiny_pair`, built first if
missing) or SmolLM2-135M-Instruct (``--pair smollm2``; ``--drafters`` picks the arms).

Protocol: torch threads fixed (``--threads``, default 1: on this 2-core machine a second OpenMP thread
made the tiny models slower, see docs/engine.md); every method gets one warm-up call per batch size that
is not timed; then for each seed every method runs once in turn (interleaved, so background load hits
all methods alike); tokens/s = all new tokens / all seconds over the seeds; ``speedup`` is the ratio of those to ours plain,
``paired`` the median over seeds of the ratio to the plain run made just before (less sensitive to slow
drifts in background load). Goals are judged on ``speedup``. Each row generates exactly
``--new-tokens`` tokens (no stop token), from held-out prompts that end with an assistant header.

Measured costs: ``c`` (drafter time per draft token / target time per one-token step) and ``v(k)``
(target time to score k+1 tokens / one) come from ``trajkit.engine.choose_k.measure_costs`` at each batch
size; ``alpha`` is the run's own ``1 - TV(p, q)`` estimate. The predicted speedup is
``S = (1 - alpha^(k+1)) / ((1 - alpha)(k c + v(k)))``; measured speedup is tokens/s over ours plain.
"""
from __future__ import annotations

import json
import statistics
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # torch and the engine load when the benchmark runs, not when the CLI starts
    from trajkit.bench.generate_methods import Method

DESCRIPTION = ("generation: ours plain / speculative (draft model, n-gram, auto k) vs HF generate and HF "
               "assisted generation on the shipped tiny pair (tokens/s, alpha, c, v(k), predicted speedup); "
               "example: trajkit bench generate --seeds 5 --out bench-out/gen.json")


def add_arguments(parser) -> None:
    parser.add_argument("--batch-sizes", default="1,8", help="comma-separated batch sizes (default: 1,8)")
    parser.add_argument("--ks", default="1,2,3,4", help="draft lengths k to run (default: 1,2,3,4)")
    parser.add_argument("--seeds", type=int, default=3, help="timed runs per method and batch size")
    parser.add_argument("--new-tokens", type=int, default=128, help="tokens generated per row")
    parser.add_argument("--temperature", type=float, default=1.0, help="sampling temperature (0 = greedy)")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (fixed for the whole run)")
    parser.add_argument("--out", default="bench-out/bench_generate.json",
                        help="where to write the results (JSON; a PNG plot is written beside it)")
    parser.add_argument("--json", action="store_true", help="print the results as JSON instead of the table")
    parser.add_argument("--cache-dir", default=None, help="tiny-pair cache (default: $TRAJKIT_CACHE or "
                        "~/.cache/trajkit)")
    parser.add_argument("--pair", choices=("tiny", "smollm2"), default="tiny",
                        help="tiny: the shipped byte-level pair; smollm2: SmolLM2-135M-Instruct and its distilled "
                             "shortlist draft (prepared offline and cached; HF assisted generation is skipped: "
                             "it cannot use a shortlist draft)")
    parser.add_argument("--vllm", action="store_true",
                        help="with --pair smollm2: add vLLM plain and vLLM n-gram (k = --vllm-k) at batch 1, vLLM's "
                             "offline engine in its venv (make vllm-venv) behind Ray")
    parser.add_argument("--vllm-k", type=int, default=3, help="vLLM n-gram's draft tokens (default: 3)")
    parser.add_argument("--drafters", default=None,
                        help="comma-separated drafter arms from draft,ngram,eagle (default: draft,ngram for the "
                             "tiny pair, draft,ngram,eagle for smollm2; eagle needs --pair smollm2)")


def run(args) -> int:
    import torch

    from trajkit.bench.generate_methods import build_methods, load_smollm2_pair
    from trajkit.recipes.tiny_pair import load_tiny_pair
    from trajkit.atomic import AtomicFile, write_atomic

    ks, batch_sizes = _ints(args.ks, "--ks"), _ints(args.batch_sizes, "--batch-sizes")
    drafters = _drafters(args.drafters, args.pair)
    _check_vllm(args, batch_sizes)
    torch.set_num_threads(args.threads)
    pair = load_tiny_pair(cache=args.cache_dir) if args.pair == "tiny" else load_smollm2_pair(drafters)
    methods = build_methods(pair.target, pair.draft, ks, args.temperature, pad_id=pair.pad_id,
                            assisted=args.pair == "tiny", eagle=getattr(pair, "eagle", None), drafters=drafters)
    backends = _vllm_arms(args, methods)
    results = {"protocol": _protocol(args, pair), "costs": {}, "rows": []}
    try:
        for batch in batch_sizes:
            prompts = _prompt_sets(pair.prompts, batch, args.seeds + 1)
            _say(f"batch {batch}: measuring c and v(k) for k <= {max(ks)}")
            costs = _costs(pair, prompts[0], max(ks))
            results["costs"][str(batch)] = costs
            rows = _measure([m for m in methods if batch in m.batch_sizes], prompts, args.new_tokens, batch)
            results["rows"].extend(_summarise(rows, batch, costs))
    finally:
        for b in reversed(backends):  # the first one started the local Ray and shuts it down: last
            b.close()
    results["goals"] = goals(results["rows"])
    out = Path(args.out)
    write_atomic(out, json.dumps(results, indent=1))
    with AtomicFile(out.with_suffix(".png"), "plot") as tmp:
        plot(results, tmp)
    if args.json:
        print(json.dumps(results, indent=1))
    else:
        _print(results)
        print(f"\nwrote {out} and {out.with_suffix('.png')}")
    return 0


def _vllm_arms(args, methods: list) -> list:
    """``--vllm``: vLLM's arms appended to ``methods`` (SmolLM2 only) -> the backends to close."""
    if not args.vllm:
        return []
    from trajkit.bench.generate_methods import vllm_methods
    from trajkit.recipes.prepared import PREPARE
    from trajkit.recipes.smollm2 import NAME

    _say("starting vLLM (plain and n-gram), each in its own actor")
    extra, backends = vllm_methods(str(PREPARE[NAME]()), args.vllm_k, args.temperature)
    methods.extend(extra)
    return backends


def _check_vllm(args, batch_sizes: list[int]) -> None:
    from trajkit.errors import ConfigError

    if not args.vllm:
        return
    if args.pair != "smollm2":
        raise ConfigError("--vllm needs --pair smollm2 (vLLM reads the model's own tokenizer; the tiny pair's "
                          "is trajkit's byte tokenizer)")
    if args.vllm_k < 1:
        raise ConfigError(f"--vllm-k must be >= 1, got {args.vllm_k}")
    if 1 not in batch_sizes:
        raise ConfigError(f"--vllm runs at batch 1; --batch-sizes {args.batch_sizes} has no 1")


def _ints(text: str, flag: str) -> list[int]:
    from trajkit.errors import ConfigError

    try:
        values = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        values = []
    if not values or min(values) < 1:
        raise ConfigError(f"{flag} takes comma-separated integers >= 1, got {text!r}")
    return values


def _drafters(text: str | None, pair: str) -> tuple[str, ...]:
    from trajkit.bench.generate_methods import DRAFTERS
    from trajkit.errors import ConfigError

    if text is None:
        return DRAFTERS if pair == "smollm2" else ("draft", "ngram")
    names = tuple(x.strip() for x in text.split(",") if x.strip())
    bad = [n for n in names if n not in DRAFTERS]
    if bad or not names:
        raise ConfigError(f"--drafters takes names from {','.join(DRAFTERS)}, got {text!r}")
    if "eagle" in names and pair != "smollm2":
        raise ConfigError("--drafters eagle: the tiny pair has no EAGLE head; use --pair smollm2")
    return names


def _say(text: str) -> None:
    """A progress line on stderr (the run takes minutes; stdout keeps the table or the JSON)."""
    import sys

    print(f"bench generate: {text}", file=sys.stderr, flush=True)


def _protocol(args, pair) -> dict:
    import os
    import platform

    import torch
    import transformers

    return {"load_average_1m": round(os.getloadavg()[0], 2), "threads": args.threads, "seeds": args.seeds, "new_tokens": args.new_tokens,
            "temperature": args.temperature, "torch": torch.__version__, "transformers": transformers.__version__,
            "cpu": platform.processor() or platform.machine(), "pair": str(pair.path),
            "target_parameters": pair.meta["target_parameters"], "draft_parameters": pair.meta["draft_parameters"],
            "eagle_parameters": pair.meta.get("eagle_parameters")}


def _prompt_sets(prompts: list[list[int]], batch: int, count: int) -> list[list[list[int]]]:
    """``count`` batches of ``batch`` prompts (the first is the warm-up), cycling through the prompts."""
    return [[prompts[(i * batch + j) % len(prompts)] for j in range(batch)] for i in range(count)]


def _costs(pair, prompts: list[list[int]], k_max: int) -> dict:
    """``t1``, ``c`` of each drafter and ``v(k)`` (the median over the drafters' measurements of the plain
    target; ``v_eagle``: measured while capturing the head's hidden states, as its verification runs)."""
    from trajkit.engine import DraftModel, NgramDrafter
    from trajkit.engine.choose_k import measure_costs
    from trajkit.engine.drafters.eagle import EagleDrafter

    ngram = measure_costs(pair.target, NgramDrafter(), prompts, k_max, repeats=9)
    plain = [ngram]
    out = {"t1_ms": ngram.t1 * 1e3, "c_ngram": ngram.c}
    if pair.draft is not None:
        draft = measure_costs(pair.target, DraftModel(pair.draft), prompts, k_max, repeats=9)
        plain.append(draft)
        out["c_draft"] = draft.c
    out["v"] = {str(k): statistics.median([p.v[k] for p in plain]) for k in ngram.v}
    if getattr(pair, "eagle", None) is not None:
        eagle = measure_costs(pair.target, EagleDrafter(pair.eagle), prompts, k_max, repeats=9)
        out.update(c_eagle=eagle.c, v_eagle={str(k): x for k, x in eagle.v.items()}, t1_eagle_ms=eagle.t1 * 1e3)
    return out


def _measure(methods: list[Method], prompt_sets, new_tokens: int, batch: int = 0) -> dict[str, list]:
    """Warm up each method once, then run every method once per seed, interleaved."""
    from trajkit.progress import progress_bar

    runs: dict[str, list] = {m.name: [] for m in methods}
    total = len(methods) * len(prompt_sets)
    _say(f"batch {batch}: {len(methods)} methods x ({len(prompt_sets) - 1} seeds + 1 warm-up) = {total} runs")
    with progress_bar(total=total, desc=f"B={batch}", unit="run") as bar:
        for m in methods:
            m.run(prompt_sets[0], 10_000, new_tokens)
            bar.update()
        for seed, prompts in enumerate(prompt_sets[1:]):
            for m in methods:
                bar.set_postfix(method=m.name, refresh=False)
                runs[m.name].append((m, m.run(prompts, seed, new_tokens)))
                bar.update()
            _say(f"batch {batch}: seed {seed + 1}/{len(prompt_sets) - 1} done")
    return runs


def _summarise(runs: dict[str, list], batch: int, costs: dict) -> list[dict]:
    rows = []
    for name, items in runs.items():
        m = items[0][0]
        tokens = sum(r.new_tokens for _, r in items)
        seconds = sum(r.seconds for _, r in items)
        per_seed = [r.new_tokens / r.seconds for _, r in items]
        row = {"method": name, "family": m.family, "batch": batch, "k": m.k, "tokens_per_s": tokens / seconds,
               "tokens_per_s_min": min(per_seed), "tokens_per_s_max": max(per_seed)}
        stats = [r.stats for _, r in items if r.stats]
        if stats and "new_tokens" in stats[0]:
            row.update(_engine_stats(stats, m, costs))
        elif stats and "vllm_proposed" in stats[0]:  # vLLM: its own draft counters (no per-step counts)
            proposed = sum(s["vllm_proposed"] for s in stats)
            row["acceptance_rate"] = sum(s["vllm_accepted"] for s in stats) / proposed if proposed else None
        elif stats:  # HF: target forward calls counted by a hook
            row["target_calls_per_token"] = sum(s["target_calls"] for s in stats) / tokens
        rows.append(row)
    plain = next(r["tokens_per_s"] for r in rows if r["family"] == "ours-plain")
    plain_runs = next(items for items in runs.values() if items[0][0].family == "ours-plain")
    for r, items in zip(rows, runs.values()):
        r["speedup"] = r["tokens_per_s"] / plain
        # seed by seed against the plain run made just before: cancels slow drifts of background load
        r["speedup_paired_median"] = statistics.median(
            (a.new_tokens / a.seconds) / (b.new_tokens / b.seconds) for (_, a), (_, b) in zip(items, plain_runs))
        if r.get("predicted_speedup"):
            r["measured_over_predicted"] = r["speedup"] / r["predicted_speedup"]
    return rows


def _engine_stats(stats: list[dict], m: Method, costs: dict) -> dict:
    from trajkit.engine.choose_k import predicted_speedup
    new = sum(s["new_tokens"] for s in stats)
    tried = sum(sum(s["position_tried"]) for s in stats)
    row = {"target_calls_per_token": sum(s["target_calls"] for s in stats) / new,
           "acceptance_length": sum(s["step_tokens"] for s in stats) / max(1, sum(s["row_steps"] for s in stats)),
           "acceptance_rate": sum(s["accepted"] for s in stats) / max(1, sum(s["proposed"] for s in stats)),
           "alpha": sum(s["overlap_sum"] for s in stats) / tried if tried else None}
    k = m.k if m.k >= 0 else stats[-1]["num_draft_tokens"]
    row["k_used"] = k
    if k >= 1 and row["alpha"] is not None:
        eagle = m.family.startswith("ours-eagle")
        c = costs["c_ngram"] if m.family == "ours-ngram" else costs["c_eagle"] if eagle else costs["c_draft"]
        v_k = (costs["v_eagle"] if eagle else costs["v"])[str(k)]
        row.update(c=c, v_k=v_k, predicted_speedup=predicted_speedup(row["alpha"], k, c, v_k))
    return row


def goals(rows: list[dict]) -> list[dict]:
    """The benchmark's performance goals (docs/engine.md), each with the numbers it is judged on."""
    def best(family, batch):
        cands = [r for r in rows if r["family"] == family and r["batch"] == batch]
        return max(cands, key=lambda r: r["tokens_per_s"]) if cands else None

    out = []
    for batch in sorted({r["batch"] for r in rows}):
        plain, hf = best("ours-plain", batch), best("hf-plain", batch)
        draft = best("ours-draft", batch)
        if plain and hf:
            out.append(_goal(f"B={batch}: ours plain >= HF generate", plain["tokens_per_s"] >= hf["tokens_per_s"],
                             f"{plain['tokens_per_s']:.1f} vs {hf['tokens_per_s']:.1f} tok/s"))
        if draft and batch == 1:
            out.append(_goal("B=1: speculative >= 1.5x ours plain", draft["speedup"] >= 1.5,
                             f"{draft['method']}: {draft['speedup']:.2f}x"))
            if draft.get("predicted_speedup"):
                out.append(_goal("B=1: measured >= 0.9x predicted", draft["measured_over_predicted"] >= 0.9,
                                 f"{draft['speedup']:.2f}x measured / {draft['predicted_speedup']:.2f}x predicted"))
            assisted = best("hf-assisted", batch)
            if assisted:
                out.append(_goal("B=1: speculative faster than HF assisted",
                                 draft["tokens_per_s"] > assisted["tokens_per_s"],
                                 f"{draft['tokens_per_s']:.1f} vs {assisted['method']} {assisted['tokens_per_s']:.1f}"))
        if draft and batch > 1:
            out.append(_goal(f"B={batch}: speculative faster than plain", draft["speedup"] > 1.0,
                             f"{draft['method']}: {draft['speedup']:.2f}x"))
        eagle, auto = best("ours-eagle", batch), best("ours-eagle-auto", batch)
        if eagle and batch == 1:
            out.append(_goal("B=1: eagle >= 1.6x ours plain", eagle["speedup"] >= 1.6,
                             f"{eagle['method']}: {eagle['speedup']:.2f}x, acceptance length "
                             f"{eagle['acceptance_length']:.2f}, alpha {eagle['alpha']:.3f}"))
        if auto and batch > 1:
            out.append(_goal(f"B={batch}: eagle k=auto >= 1.0x ours plain", auto["speedup"] >= 1.0,
                             f"{auto['speedup']:.2f}x (k={auto['k_used']})"))
    return out


def _goal(name: str, ok: bool, detail: str) -> dict:
    return {"goal": name, "met": bool(ok), "detail": detail}


def _print(results: dict) -> None:
    print("\n" + " ".join(f"{k}={v}" for k, v in results["protocol"].items()))
    for batch, c in results["costs"].items():
        v = " ".join(f"v({k})={x:.2f}" for k, x in c["v"].items())
        extra = f", c(eagle)={c['c_eagle']:.3f}, with features: " + " ".join(
            f"v({k})={x:.2f}" for k, x in c["v_eagle"].items()) if "c_eagle" in c else ""
        print(f"B={batch}: one-token target step {c['t1_ms']:.2f} ms, c(draft)={_f(c.get('c_draft'), 1, 3).strip()}, "
              f"c(n-gram)={c['c_ngram']:.4f}, {v}{extra}")
    head = f"{'method':<24}{'B':>3}{'tok/s':>9}{'range':>12}{'speedup':>9}{'paired':>8}{'calls/tok':>10}" \
           f"{'alpha':>7}{'acc.len':>8}{'c':>7}{'v(k)':>6}{'pred.S':>8}{'meas/pred':>10}"
    print("\n" + head + "\n" + "-" * len(head))
    for r in results["rows"]:
        rng = f"{r['tokens_per_s_min']:.0f}-{r['tokens_per_s_max']:.0f}"
        name = r["method"] + (f" (k={r['k_used']})" if r["family"].endswith("auto") else "")
        print(f"{name:<24}{r['batch']:>3}{r['tokens_per_s']:>9.1f}{rng:>12}{r['speedup']:>8.2f}x"
              f"{r['speedup_paired_median']:>7.2f}x"
              f"{_f(r.get('target_calls_per_token'), 10, 3)}{_f(r.get('alpha'), 7, 3)}"
              f"{_f(r.get('acceptance_length'), 8, 2)}{_f(r.get('c'), 7, 3)}{_f(r.get('v_k'), 6, 2)}"
              f"{_f(r.get('predicted_speedup'), 8, 2)}{_f(r.get('measured_over_predicted'), 10, 2)}")
    vllm_plain = next((r for r in results["rows"] if r["family"] == "vllm-plain"), None)
    for r in results["rows"]:
        if r["family"] == "vllm-ngram" and vllm_plain:
            rate = _f(r.get("acceptance_rate"), 1, 3).strip()
            print(f"{r['method']}: {r['tokens_per_s'] / vllm_plain['tokens_per_s']:.2f}x vLLM plain, acceptance "
                  f"rate {rate} (vLLM's counters)")
    print()
    for g in results["goals"]:
        print(f"[{'met' if g['met'] else 'NOT met'}] {g['goal']}: {g['detail']}")


def _f(x, width: int, digits: int) -> str:
    return f"{x:>{width}.{digits}f}" if isinstance(x, (int, float)) else " " * (width - 1) + "-"


def plot(results: dict, path: Path) -> None:
    """Tokens/s per method (one panel per batch size) and measured vs predicted speedup."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    batches = sorted({r["batch"] for r in results["rows"]})
    fig, axes = plt.subplots(1, len(batches) + 1, figsize=(6 * len(batches) + 5, 5))
    colors = {"ours-plain": "#444", "hf-plain": "#bbb", "ours-draft": "#1f77b4", "ours-ngram": "#2ca02c",
              "hf-assisted": "#ff7f0e", "ours-auto": "#9467bd", "ours-eagle": "#d62728",
              "ours-eagle-auto": "#8c564b", "vllm-plain": "#17becf", "vllm-ngram": "#bcbd22"}
    for ax, batch in zip(axes, batches):
        rows = [r for r in results["rows"] if r["batch"] == batch]
        ax.barh([r["method"] for r in rows], [r["tokens_per_s"] for r in rows],
                color=[colors[r["family"]] for r in rows])
        ax.invert_yaxis()
        ax.set_xlabel("tokens / s")
        ax.set_title(f"batch {batch}")
    ax = axes[-1]
    for r in results["rows"]:
        if r.get("predicted_speedup"):
            ax.scatter(r["predicted_speedup"], r["speedup"], color=colors[r["family"]],
                       marker="o" if r["batch"] == 1 else "s")
    lim = max([1.0] + [max(r.get("predicted_speedup") or 0, r["speedup"]) for r in results["rows"]]) * 1.1
    ax.plot([0, lim], [0, lim], "k--", lw=0.8)
    ax.set_xlabel("predicted speedup")
    ax.set_ylabel("measured speedup (o: B=1, s: B>1)")
    ax.set_title("speculative: measured vs predicted")
    fig.tight_layout()
    fig.savefig(path, dpi=110, format="png")
    plt.close(fig)
