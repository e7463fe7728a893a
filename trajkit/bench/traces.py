"""Benchmark: ``trajkit traces stats`` against the tutorial's approach, side by side in one run.

The baseline reimplements the tutorial ("A Coding Implementation to Parsing, Analyzing, Visualizing,
and Fine-Tuning Agent Reasoning Traces…"): load the whole file with pandas, then for every message run
its three regexes (``<think>``, ``<tool_call>``, ``<tool_response>``) and ``json.loads`` every block.
Each side runs in its own child process so its peak RSS is its own (for trajkit, the largest of its
parent and worker processes); the corpus is the synthetic
generator's kimi style at the size of both dataset configs together (14,701 rows) unless told otherwise.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from trajkit.bench.corpus import add_corpus_arguments, corpus_path
from trajkit.bench.output import emit

DESCRIPTION = "traces stats vs the tutorial's pandas+regex approach (rows/s, MB/s, peak RSS)"
EXAMPLE = "trajkit bench traces --rows 14701 --out bench-out/bench_traces.json"

BASELINE = r'''
import json, re, resource, sys, time
import pandas as pd
THINK = re.compile(r"<think>(.*?)</think>", re.DOTALL)
CALL = re.compile(r"<tool_call>(.*?)</tool_call>", re.DOTALL)
RESP = re.compile(r"<tool_response>(.*?)</tool_response>", re.DOTALL)
t0 = time.perf_counter()
df = pd.read_json(sys.argv[1], lines=True)
tools, calls, errors, think_words = {}, 0, 0, 0
for conv in df["conversations"]:
    for msg in conv:
        text = msg["value"]
        for t in THINK.findall(text):
            think_words += len(t.split())
        for block in CALL.findall(text):
            calls += 1
            try:
                name = json.loads(block)["name"]
                tools[name] = tools.get(name, 0) + 1
            except Exception:
                pass
        for block in RESP.findall(text):
            try:
                json.loads(block)
            except Exception:
                pass
            errors += "error" in block.lower()
elapsed = time.perf_counter() - t0
print(json.dumps({"rows": len(df), "seconds": elapsed, "tool_calls": calls, "think_words": think_words,
                  "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
'''

OURS = r'''
import json, resource, sys, time
from trajkit.traces.stats import compute_stats
t0 = time.perf_counter()
stats = compute_stats([sys.argv[1]], progress=False).to_dict()
elapsed = time.perf_counter() - t0
print(json.dumps({"rows": stats["traces"], "seconds": elapsed, "tool_calls": stats["tool_calls"],
                  "think_words": stats["think_words"],
                  "peak_rss_mb": max(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
                                     resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss) / 1024}))
'''


def add_arguments(parser) -> None:
    add_corpus_arguments(parser, 14_701, "corpus rows (default: 14,701 = kimi + glm-5.1)")
    parser.add_argument("--repeat", type=int, default=1, help="runs per side; the best time is kept")
    parser.add_argument("--out", default="bench-out/bench_traces.json", help="where to write the results (JSON)")
    parser.add_argument("--json", action="store_true", help="print the results as JSON instead of the table")


def _run_child(code: str, path: Path) -> dict:
    env = dict(os.environ, OMP_NUM_THREADS="1")
    out = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True, env=env)
    if out.returncode != 0:
        raise RuntimeError(f"benchmark child failed:\n{out.stderr[-2000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def _best(code: str, path: Path, repeat: int) -> dict:
    runs = [_run_child(code, path) for _ in range(repeat)]
    return min(runs, key=lambda r: r["seconds"])


def run(args) -> int:
    import importlib.util

    from trajkit.errors import ConfigError

    if importlib.util.find_spec("pandas") is None:
        raise ConfigError("trajkit bench traces times the pandas tutorial beside trajkit, and pandas is not "
                          "installed: pip install 'trajkit[bench]'")
    path = corpus_path(args)
    size_mb = path.stat().st_size / 2**20
    results = {"corpus": str(path), "corpus_mb": round(size_mb, 1), "machine": f"{os.cpu_count()} CPU cores"}
    for name, code in (("tutorial (pandas + 3 regexes)", BASELINE), ("trajkit traces stats", OURS)):
        r = _best(code, path, args.repeat)
        r["rows_per_s"] = r["rows"] / r["seconds"]
        r["mb_per_s"] = size_mb / r["seconds"]
        results[name] = r
    base, ours = results["tutorial (pandas + 3 regexes)"], results["trajkit traces stats"]
    results["speedup"] = base["seconds"] / ours["seconds"]
    results["rss_ratio"] = base["peak_rss_mb"] / ours["peak_rss_mb"]
    emit(args, results, _print_table)
    return 0


def _print_table(results: dict) -> None:
    print(f"corpus: {results['corpus']} ({results['corpus_mb']:.1f} MB), {results['machine']}")
    print(f"{'approach':32}{'rows':>8}{'seconds':>10}{'rows/s':>10}{'MB/s':>9}{'peak RSS MB':>13}")
    for name in ("tutorial (pandas + 3 regexes)", "trajkit traces stats"):
        r = results[name]
        print(f"{name:32}{r['rows']:>8}{r['seconds']:>10.2f}{r['rows_per_s']:>10.0f}{r['mb_per_s']:>9.1f}"
              f"{r['peak_rss_mb']:>13.0f}")
    print(f"speedup: {results['speedup']:.2f}x   peak-RSS ratio (tutorial/ours): {results['rss_ratio']:.1f}x")
