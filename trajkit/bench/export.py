"""Benchmark: the token SFT export against the tokenizer's own batch encode of the same text, in one run.

One synthetic corpus (the generator's kimi style, 2,000 rows unless told otherwise), one tokenizer (the
tiny BPE test tokenizer built on the fly, or ``--tokenizer DIR``), three arms timed in the same process,
interleaved (``export, render + encode, encode`` per repeat; the best of ``--repeat`` runs is kept):

- ``export``: :func:`trajkit.traces.export.token_export.export_trace_tokens` from the JSONL to a Parquet file
  (load the tokenizer, probe its template, read and render every trace, prefix-render and label every
  assistant turn, check every example's mask and source, write). Everything ``trajkit traces export``
  does for a token export except the CLI.
- ``render + encode`` (the baseline): load the tokenizer, probe and choose the rendering as the export
  does, read and render every trace the same way (:func:`~trajkit.traces.export.sft_render.render_trace`, then
  ``apply_chat_template(messages, tools=tools, tokenize=False)``), then ``tokenizer(texts,
  add_special_tokens=False)`` in batches of 64. The minimum work that gives the same token ids.
- ``encode only``: the batch encode alone, of the texts the baseline rendered.

The headline ratio is export seconds / baseline seconds (the export must render too); export / encode
only is reported beside it. Cross-check: the baseline's token count must equal the export's
``summary.tokens`` (true whenever the template renders history verbatim, ``split=all``, and nothing is
windowed or dropped; the JSON says when it is not). The tokenizer's own threads are left as they are
(``TOKENIZERS_PARALLELISM``, recorded in the JSON): its batch encode may use every core, while the
export encodes one conversation at a time, so each arm's process CPU seconds (all threads) are reported
beside the wall seconds the goal is judged on.
"""
from __future__ import annotations

import gc
import os
import shutil
import tempfile
import time
from pathlib import Path

from trajkit.bench.corpus import add_corpus_arguments, corpus_path
from trajkit.bench.output import emit

DESCRIPTION = "token SFT export vs the tokenizer's batch encode of the same rendered text (conv/s, tokens/s)"
EXAMPLE = "trajkit bench export --rows 2000 --repeat 2 --out bench-out/bench_export.json"
GOAL = 1.5  # export seconds / (render + encode) seconds
BATCH = 64
ARMS = {"export": "trajkit export", "baseline": "render + batch encode", "encode_only": "batch encode only"}


def add_arguments(parser) -> None:
    add_corpus_arguments(parser, 2000, "corpus rows (default: 2000)")
    parser.add_argument("--tokenizer", help="a local tokenizer folder with a chat template (default: the tiny "
                        "BPE test tokenizer, built on the fly); e.g. the folder `trajkit models prepare "
                        "smollm2-135m-instruct --tokenizer-only` prints")
    parser.add_argument("--max-length", type=int, default=32768, help="export max_length (default: 32768)")
    parser.add_argument("--repeat", type=int, default=1, help="runs per arm, interleaved; the best is kept")
    parser.add_argument("--out", default="bench-out/bench_export.json", help="JSON output path")
    parser.add_argument("--json", action="store_true", help="print the JSON results instead of the table")


def _export_arm(corpus: Path, tokenizer: str, max_length: int, out_path: Path) -> dict:
    from trajkit.traces.load import iter_traces
    from trajkit.traces.export.token_export import export_trace_tokens
    from trajkit.traces.export.token_records import TokenizeConfig

    c0, t0 = time.process_time(), time.perf_counter()
    summary, counts = export_trace_tokens(iter_traces([str(corpus)]), tokenizer, TokenizeConfig(max_length=max_length),
                                          out_path, malformed="as_text", progress=False)
    seconds, cpu = time.perf_counter() - t0, time.process_time() - c0
    return {"seconds": seconds, "cpu_seconds": cpu, "conversations": summary.conversations, "tokens": summary.tokens,
            "rows": counts.traces, "examples": summary.examples,
            "skipped_conversations": summary.skipped_conversations, "skipped_malformed": counts.skipped_malformed,
            "windowed_conversations": summary.windowed_conversations, "dropped_turns": summary.dropped_turns,
            "rendering": summary.template.get("rendering", {})}


def _encode(tok, texts: list[str]) -> int:
    tokens = 0
    for i in range(0, len(texts), BATCH):
        tokens += sum(len(ids) for ids in tok(texts[i:i + BATCH], add_special_tokens=False)["input_ids"])
    return tokens


def _baseline_arm(corpus: Path, tokenizer: str) -> tuple[dict, list[str]]:
    from trajkit.traces.load import iter_traces
    from trajkit.traces.export.sft_render import render_trace
    from trajkit.traces.export.template_probe import choose_rendering, probe_template
    from trajkit.traces.export.token_export import load_tokenizer

    c0, t0 = time.process_time(), time.perf_counter()
    tok = load_tokenizer(tokenizer)
    rendering = choose_rendering(probe_template(tok))
    texts = []
    for trace in iter_traces([str(corpus)]):
        conv = render_trace(trace, rendering, malformed="as_text")
        texts.append(tok.apply_chat_template(conv.messages, tools=conv.tools, tokenize=False))
    t1 = time.perf_counter()
    tokens = _encode(tok, texts)
    t2, c2 = time.perf_counter(), time.process_time()
    return {"seconds": t2 - t0, "cpu_seconds": c2 - c0, "render_seconds": t1 - t0, "encode_seconds": t2 - t1,
            "conversations": len(texts), "tokens": tokens}, texts


def _encode_arm(tok, texts: list[str]) -> dict:
    c0, t0 = time.process_time(), time.perf_counter()
    tokens = _encode(tok, texts)
    return {"seconds": time.perf_counter() - t0, "cpu_seconds": time.process_time() - c0,
            "conversations": len(texts), "tokens": tokens}


def run(args) -> int:
    from trajkit.traces.export.token_export import load_tokenizer

    if args.repeat < 1:
        raise SystemExit("--repeat must be >= 1")
    corpus = corpus_path(args)
    work = Path(tempfile.mkdtemp(prefix=".bench-export-", dir=corpus.parent))
    try:
        if args.tokenizer:
            tokenizer, tokenizer_name = args.tokenizer, args.tokenizer
        else:
            from trajkit.models.tokenizer import build_tokenizer

            tokenizer, tokenizer_name = build_tokenizer(work / "tokenizer"), "tiny BPE (trajkit.models.tokenizer)"
        encoder = load_tokenizer(tokenizer)
        runs: dict[str, list[dict]] = {name: [] for name in ARMS}
        for _ in range(args.repeat):
            gc.collect()
            runs["export"].append(_export_arm(corpus, tokenizer, args.max_length, work / "tokens.parquet"))
            gc.collect()
            base, texts = _baseline_arm(corpus, tokenizer)
            runs["baseline"].append(base)
            gc.collect()
            runs["encode_only"].append(_encode_arm(encoder, texts))
            del texts
    finally:
        shutil.rmtree(work, ignore_errors=True)
    emit(args, _results(args, corpus, tokenizer_name, runs), _print_table)
    return 0


def _results(args, corpus: Path, tokenizer_name: str, runs: dict[str, list[dict]]) -> dict:
    arms = {}
    for name, label in ARMS.items():
        best = dict(min(runs[name], key=lambda r: r["seconds"]), name=label,
                    all_seconds=[round(r["seconds"], 3) for r in runs[name]])
        best["conversations_per_s"] = best["conversations"] / best["seconds"]
        best["tokens_per_s"] = best["tokens"] / best["seconds"]
        arms[name] = best
    export, base, enc = arms["export"], arms["baseline"], arms["encode_only"]
    ratio = export["seconds"] / base["seconds"]
    same = export["tokens"] == base["tokens"]
    why = "" if same else (f"export {export['tokens']:,} tokens in {export['examples']:,} examples "
                           f"(split={export['rendering'].get('split')}, {export['windowed_conversations']} windowed, "
                           f"{export['skipped_conversations']} skipped, {export['dropped_turns']} turns dropped) vs "
                           f"baseline {base['tokens']:,} tokens of whole conversations")
    return {"corpus": str(corpus), "corpus_mb": round(corpus.stat().st_size / 2**20, 1), "rows": export["rows"],
            "tokenizer": tokenizer_name, "rendering": export["rendering"], "max_length": args.max_length,
            "repeat": args.repeat, "machine": f"{os.cpu_count()} CPU cores",
            "tokenizers_parallelism": os.environ.get("TOKENIZERS_PARALLELISM", "(unset: on)"),
            "arms": arms, "export_seconds": export["seconds"], "baseline_seconds": base["seconds"],
            "encode_only_seconds": enc["seconds"], "ratio": ratio,
            "ratio_encode_only": export["seconds"] / enc["seconds"],
            "cpu_ratio": export["cpu_seconds"] / base["cpu_seconds"],
            "cpu_ratio_encode_only": export["cpu_seconds"] / enc["cpu_seconds"],
            "tokens_equal": same, "tokens_note": why, "goal": GOAL, "goal_met": ratio <= GOAL}


def _print_table(results: dict) -> None:
    rendering = results["rendering"]
    print(f"corpus: {results['corpus']} ({results['rows']:,} rows, {results['corpus_mb']:.1f} MB), "
          f"{results['machine']}, best of {results['repeat']}")
    print(f"tokenizer: {results['tokenizer']} ({rendering.get('mode')} rendering, split={rendering.get('split')})")
    print(f"{'arm':24}{'seconds':>9}{'conv/s':>9}{'tokens/s':>11}{'tokens':>12}{'export ÷ arm':>14}"
          f"{'CPU s':>9}{'CPU ÷':>8}")
    for arm in results["arms"].values():
        ratio = results["export_seconds"] / arm["seconds"]
        print(f"{arm['name']:24}{arm['seconds']:>9.2f}{arm['conversations_per_s']:>9.1f}{arm['tokens_per_s']:>11,.0f}"
              f"{arm['tokens']:>12,}{ratio:>13.2f}x{arm['cpu_seconds']:>9.2f}"
              f"{results['arms']['export']['cpu_seconds'] / arm['cpu_seconds']:>7.2f}x")
    base = results["arms"]["baseline"]
    print(f"baseline split: render {base['render_seconds']:.2f} s + encode {base['encode_seconds']:.2f} s")
    print("token cross-check: " + ("export tokens == baseline tokens" if results["tokens_equal"]
                                    else "DIFFER: " + results["tokens_note"]))
    print(f"goal export ÷ (render + encode) <= {results['goal']}x: "
          f"{'met' if results['goal_met'] else 'NOT met'} ({results['ratio']:.2f}x; "
          f"vs encode only {results['ratio_encode_only']:.2f}x)")
