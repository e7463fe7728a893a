"""Benchmark: how long the ``trajkit`` command takes to start, beside a bare Python start, in one run.

Every path runs as a fresh process (``--repeat`` times, interleaved so that machine noise falls on all of
them alike); the table gives the median wall and CPU seconds and the ratio to ``python -c pass``, the floor
no command can beat. ``import torch`` is a row of its own: the price a command pays when something on its
path imports torch (``trajkit --version`` once took 4.7 s that way; ``tests/test_cli_imports.py`` pins the
imports, this benchmark the time).
"""
from __future__ import annotations

import os
import shutil
import statistics
import sys
from pathlib import Path

from trajkit.bench.child import run_timed
from trajkit.bench.output import emit

DESCRIPTION = "start-up time of trajkit --version/--help/traces commands vs a bare python start"
EXAMPLE = "trajkit bench cli --repeat 7 --out bench-out/bench_cli.json"
GOAL = 5.0  # trajkit --version within this many bare Python starts
FLOOR = "python -c pass"


def add_arguments(parser) -> None:
    parser.add_argument("--repeat", type=int, default=7, help="runs of each command; medians are kept "
                                                              "(default: 7)")
    parser.add_argument("--no-torch", action="store_true", help="skip the 'import torch' reference row")
    parser.add_argument("--out", default="bench-out/bench_cli.json", help="where to write the results (JSON)")
    parser.add_argument("--json", action="store_true", help="print the results as JSON instead of the table")


def _trajkit() -> list[str]:
    """The installed console script beside this interpreter, else ``python -m trajkit.cli.main``."""
    script = Path(sys.executable).with_name("trajkit")
    if script.exists():
        return [str(script)]
    found = shutil.which("trajkit")
    return [found] if found else [sys.executable, "-m", "trajkit.cli.main"]


def commands(no_torch: bool) -> dict[str, list[str]]:
    sample = Path(__file__).resolve().parents[1] / "data" / "sample" / "glm-5.1.jsonl.xz"
    tk = _trajkit()
    rows = {FLOOR: [sys.executable, "-c", "pass"],
            "trajkit --version": [*tk, "--version"],
            "trajkit --help": [*tk, "--help"],
            "trajkit traces --help": [*tk, "traces", "--help"],
            "trajkit train --help": [*tk, "train", "--help"],
            "trajkit traces stats SAMPLE": [*tk, "traces", "stats", str(sample), "--json"]}
    if not no_torch:
        rows["python -c 'import torch'"] = [sys.executable, "-c", "import torch"]
    return rows


def measure(rows: dict[str, list[str]], repeat: int) -> dict[str, dict[str, float]]:
    """Median wall and CPU seconds per row, the rows interleaved run by run."""
    walls: dict[str, list[float]] = {name: [] for name in rows}
    cpus: dict[str, list[float]] = {name: [] for name in rows}
    for _ in range(repeat):
        for name, argv in rows.items():
            _, wall, cpu = run_timed(argv)
            walls[name].append(wall)
            cpus[name].append(cpu)
    floor = statistics.median(walls[FLOOR])
    return {name: {"wall_s": statistics.median(walls[name]), "cpu_s": statistics.median(cpus[name]),
                   "x_floor": statistics.median(walls[name]) / floor} for name in rows}


def run(args) -> int:
    if args.repeat < 1:
        from trajkit.errors import ConfigError

        raise ConfigError(f"--repeat must be at least 1, got {args.repeat}")
    rows = measure(commands(args.no_torch), args.repeat)
    version = rows["trajkit --version"]["x_floor"]
    results = {"machine": f"{os.cpu_count()} CPU cores", "python": sys.version.split()[0],
               "repeat": args.repeat, "rows": rows,
               "goal": {"what": f"trajkit --version within {GOAL:g}x '{FLOOR}'", "x_floor": version,
                        "met": version <= GOAL}}
    emit(args, results, _print_table)
    return 0


def _print_table(results: dict) -> None:
    print(f"{results['machine']}, Python {results['python']}, median of {results['repeat']} runs each")
    print(f"{'command':34}{'wall s':>9}{'CPU s':>9}{'x ' + FLOOR:>20}")
    for name, r in results["rows"].items():
        print(f"{name:34}{r['wall_s']:>9.3f}{r['cpu_s']:>9.3f}{r['x_floor']:>20.1f}")
    goal = results["goal"]
    print(f"goal: {goal['what']}: {goal['x_floor']:.1f}x ({'met' if goal['met'] else 'NOT met'})")
