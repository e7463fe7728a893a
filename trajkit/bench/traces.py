"""Benchmark: ``trajkit traces stats`` against the tutorial's approach and the JSON parse floor, side by side.

Four sides run on the same file, each in its own child process: the **floor** (orjson parses every line and
nothing else, read through the same buffer as trajkit's: no reader of this file can be faster in Python),
**floor + blocks decoded** (the floor, then every think block of an assistant message split into words and
every tool-call and tool-response body decoded with orjson, a response's JSON ``content`` too, and nothing
counted or checked: the part of trajkit's work that no exact reader of these metrics can skip), the
**tutorial**, and **trajkit**. Each side reports wall seconds and CPU seconds (its own plus its worker
processes'); the goals are trajkit within 2x the floor's CPU seconds and at least 5x faster than the
tutorial (wall).

The tutorial baseline reimplements the tutorial ("A Coding Implementation to Parsing, Analyzing, Visualizing,
and Fine-Tuning Agent Reasoning Traces…"): load the whole file with pandas, then for every message run
its three regexes (``<think>``, ``<tool_call>``, ``<tool_response>``) and ``json.loads`` every block.
Each side runs in its own child process so its peak RSS is its own (for trajkit, the largest of its
parent and worker processes); the corpus is the synthetic
generator's kimi style at the size of both dataset configs together (14,701 rows) unless told otherwise.
"""
from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from trajkit.bench.child import run_timed
from trajkit.bench.corpus import add_corpus_arguments, corpus_path
from trajkit.bench.output import emit
from trajkit.traces.load import READ_BUFFER

DESCRIPTION = "traces stats vs the tutorial's pandas+regex approach and the orjson parse floor (wall, CPU, RSS)"
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

FLOOR = r'''
import json, resource, sys, time
import orjson
t0 = time.perf_counter()
rows = 0
with open(sys.argv[1], "rb", buffering=READ_BUFFER) as fh:  # the reader trajkit's stats use
    for line in fh:
        if line.strip():
            orjson.loads(line)
            rows += 1
elapsed = time.perf_counter() - t0
print(json.dumps({"rows": rows, "seconds": elapsed, "tool_calls": None, "think_words": None,
                  "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
'''
BLOCKS = r'''
import json, resource, sys, time
import orjson
def blocks(text, opening, closing):
    pos = text.find(opening)
    while pos >= 0:
        end = text.find(closing, pos)
        if end < 0:
            return
        yield text[pos + len(opening):end]
        pos = text.find(opening, end)
def decode(body):
    try:
        value = orjson.loads(body)
    except orjson.JSONDecodeError:
        return
    content = value.get("content") if type(value) is dict else None
    if type(content) is str and content[:1] in ("{", "["):
        try:
            orjson.loads(content)
        except orjson.JSONDecodeError:
            pass
t0 = time.perf_counter()
rows = calls = words = 0
with open(sys.argv[1], "rb", buffering=READ_BUFFER) as fh:
    for line in fh:
        if not line.strip():
            continue
        rows += 1
        for message in orjson.loads(line)["conversations"]:
            role, text = message["from"], message["value"]
            if role == "gpt":
                for think in blocks(text, "<think>", "</think>"):
                    words += len(think.split())
                for body in blocks(text, "<tool_call>", "</tool_call>"):
                    calls += 1
                    decode(body)
            elif role == "tool":
                for body in blocks(text, "<tool_response>", "</tool_response>"):
                    decode(body)
elapsed = time.perf_counter() - t0
print(json.dumps({"rows": rows, "seconds": elapsed, "tool_calls": calls, "think_words": words,
                  "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
'''
FLOOR, BLOCKS = (code.replace("READ_BUFFER", str(READ_BUFFER)) for code in (FLOOR, BLOCKS))
SIDES = (("floor (orjson parse only)", FLOOR), ("floor + blocks decoded", BLOCKS),
         ("tutorial (pandas + 3 regexes)", BASELINE), ("trajkit traces stats", OURS))


def add_arguments(parser) -> None:
    add_corpus_arguments(parser, 14_701, "corpus rows (default: 14,701 = kimi + glm-5.1)")
    parser.add_argument("--repeat", type=int, default=1, help="runs per side; the best time is kept")
    parser.add_argument("--out", default="bench-out/bench_traces.json", help="where to write the results (JSON)")
    parser.add_argument("--json", action="store_true", help="print the results as JSON instead of the table")


def _run_child(code: str, path: Path) -> dict:
    """One side's own report, plus the CPU seconds of the child and everything it started."""
    stdout, _, cpu = run_timed([sys.executable, "-c", code, str(path)], env=dict(os.environ, OMP_NUM_THREADS="1"))
    return {**json.loads(stdout.strip().splitlines()[-1]), "cpu_s": cpu}


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
    for name, code in SIDES:
        r = _best(code, path, args.repeat)
        r["rows_per_s"] = r["rows"] / r["seconds"]
        r["mb_per_s"] = size_mb / r["seconds"]
        results[name] = r
    floor, blocks, base, ours = (results[name] for name, _ in SIDES)
    results["speedup"] = base["seconds"] / ours["seconds"]
    results["rss_ratio"] = base["peak_rss_mb"] / ours["peak_rss_mb"]
    results["cpu_x_floor"] = ours["cpu_s"] / floor["cpu_s"]
    results["blocks_cpu_x_floor"] = blocks["cpu_s"] / floor["cpu_s"]
    results["goals"] = {"cpu within 2x the floor": results["cpu_x_floor"] <= 2.0,
                        "5x faster than the tutorial": results["speedup"] >= 5.0}
    emit(args, results, _print_table)
    return 0


def _print_table(results: dict) -> None:
    print(f"corpus: {results['corpus']} ({results['corpus_mb']:.1f} MB), {results['machine']}")
    print(f"{'approach':32}{'rows':>8}{'wall s':>9}{'CPU s':>8}{'rows/s':>9}{'MB/s':>8}{'peak RSS MB':>13}")
    for name, _ in SIDES:
        r = results[name]
        print(f"{name:32}{r['rows']:>8}{r['seconds']:>9.2f}{r['cpu_s']:>8.2f}{r['rows_per_s']:>9.0f}"
              f"{r['mb_per_s']:>8.1f}{r['peak_rss_mb']:>13.0f}")
    print(f"speedup over the tutorial (wall): {results['speedup']:.2f}x (goal >= 5x)   CPU vs the floor: "
          f"{results['cpu_x_floor']:.2f}x (goal <= 2x)   peak-RSS ratio (tutorial/ours): {results['rss_ratio']:.1f}x")
    print(f"floor + blocks decoded (no counting, no argument checks): {results['blocks_cpu_x_floor']:.2f}x the floor's CPU")
