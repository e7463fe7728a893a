"""Benchmark: the namespace sandbox's per-trial overhead (``start``, one ``exec``, ``stop``, a whole Oracle trial
of ``hello-file``), this tree beside a baseline checkout, in one run.

Each side runs in its own process (:mod:`trajkit.bench.sandbox_child`, with ``PYTHONPATH`` set to the side's
tree), ``--rounds`` rounds at a time, alternating ``--repeat`` times so that machine noise falls on both; the
table gives the median milliseconds of each phase and the ratio of this tree to the baseline. Without
``--baseline`` only this tree is timed. Needs root (the sandbox does).
"""
from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

from trajkit.bench.output import emit

DESCRIPTION = "namespace sandbox start / exec / stop / whole-trial milliseconds, this tree vs a baseline checkout"
EXAMPLE = "trajkit bench sandbox --baseline ../trajkit-old --rounds 10 --repeat 3"
PHASES = ("start_ms", "exec_ms", "stop_ms", "trial_ms")
CHILD = Path(__file__).with_name("sandbox_child.py")
TREE = Path(__file__).resolve().parents[2]


def add_arguments(parser) -> None:
    parser.add_argument("--baseline", help="another checkout of trajkit (its root folder) to time beside this one")
    parser.add_argument("--rounds", type=int, default=10, help="rounds per turn of each side (default: 10)")
    parser.add_argument("--repeat", type=int, default=3, help="turns of each side, alternating (default: 3)")
    parser.add_argument("--out", default="bench-out/bench_sandbox.json", help="where to write the results (JSON)")
    parser.add_argument("--json", action="store_true", help="print the results as JSON instead of the table")


def _turn(tree: Path, rounds: int) -> list[dict]:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    done = subprocess.run([sys.executable, str(CHILD), str(tree / "trajkit" / "envs" / "tasks"), str(rounds)],
                          capture_output=True, text=True, env=env, check=False)
    if done.returncode != 0:
        raise SystemExit(f"bench sandbox: the side {tree} failed: {done.stderr.strip()[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])["rounds"]


def run(args) -> int:
    from trajkit.envs.sandbox.namespace import available

    if available():
        print(f"bench sandbox: {available()}", file=sys.stderr)
        return 2
    sides = {"this tree": TREE, **({"baseline": Path(args.baseline).resolve()} if args.baseline else {})}
    rounds: dict[str, list[dict]] = {name: [] for name in sides}
    for _ in range(args.repeat):
        for name, tree in sides.items():
            rounds[name] += _turn(tree, args.rounds)
    results = {"rounds": args.rounds * args.repeat, "sides": {}}
    for name, tree in sides.items():
        results["sides"][name] = {"tree": str(tree), **{p: statistics.median(r[p] for r in rounds[name])
                                                         for p in PHASES}}
    if args.baseline:
        now, base = results["sides"]["this tree"], results["sides"]["baseline"]
        results["ratio"] = {p: now[p] / base[p] for p in PHASES}
    emit(args, results, _table)
    return 0


def _table(r: dict) -> None:
    print(f"namespace sandbox, median of {r['rounds']} rounds (ms)")
    print(f"{'side':<12} " + " ".join(f"{p[:-3]:>9}" for p in PHASES))
    for name, side in r["sides"].items():
        print(f"{name:<12} " + " ".join(f"{side[p]:>9.2f}" for p in PHASES))
    if "ratio" in r:
        print(f"{'ratio':<12} " + " ".join(f"{r['ratio'][p]:>8.2f}x" for p in PHASES))
