"""Run results as the seed audit reads them: one :class:`SeedRun` (a series of evaluations) per run seed.

Two sources, as trajkit writes them:

- a **run folder** of ``trajkit train`` (:class:`trajkit.rl.logs.RunLogger`): ``metrics.jsonl``, one JSON
  object per step (``{"step": 10, "eval/reward": 0.41, ...}``; step 0 is the evaluation before training),
  and ``config.yaml``, the whole config (``seed``, ``eval.num_prompts``, ``eval.samples``);
- a **bench result** of ``trajkit bench train`` (``--out``, default ``bench-out/train.json``) named as
  ``FILE.json:ARM``: ``{"runs": [{ARM: {"eval": [[step, reward], ...], "steps": [{metric: value}]}}]}``,
  one entry of ``runs`` per seed 0..N-1.

A run's score is the mean of its last ``k`` evaluations after step 0 (not its best checkpoint: picking
the best of a noisy series is selection on the noise).
"""
from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass
from pathlib import Path

from trajkit.errors import InputError

METRICS_FILE, CONFIG_FILE = "metrics.jsonl", "config.yaml"  # trajkit.rl.reporters / trajkit.rl.logs


@dataclass
class SeedRun:
    """One seed's evaluations ``[(step, value)]`` of the audited metric; ``eval_items``: prompts x samples
    of one evaluation when the config says (None otherwise)."""

    name: str
    seed: int | None
    evals: list[tuple[int, float]]
    eval_items: int | None = None

    def score(self, last_k: int) -> float:
        """Mean of the last ``last_k`` evaluations after step 0 (step 0 alone when it is the only one)."""
        trained = [v for s, v in self.evals if s > 0] or [v for _, v in self.evals]
        tail = trained[-last_k:]
        return sum(tail) / len(tail)


def _finite(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def read_metrics(folder: str) -> list[dict]:
    """The rows of a run folder's ``metrics.jsonl``; :class:`InputError` names a bad line."""
    path = os.path.join(folder, METRICS_FILE)
    if not os.path.isfile(path):
        raise InputError(f"no {METRICS_FILE} here", path=folder,
                         hint="name a run folder of trajkit train (log.out_dir) or a bench result FILE.json:ARM")
    rows = []
    for lineno, row in jsonl_rows(path):
        if not isinstance(row, dict) or not isinstance(row.get("step"), int):
            raise InputError("expected an object with an integer step", path=path, row=lineno, field="step")
        rows.append(row)
    return rows


def jsonl_rows(path: str):
    """``(line number, value)`` of each non-blank line of a JSONL file a run wrote; a line that is not JSON
    is an :class:`InputError` naming the file and line."""
    with open(path, encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                yield lineno, json.loads(line)
            except json.JSONDecodeError as exc:
                raise InputError(f"not JSON ({exc.msg})", path=path, row=lineno) from None


def _read_config(folder: str) -> dict:
    path = os.path.join(folder, CONFIG_FILE)
    if not os.path.isfile(path):
        return {}
    import yaml

    try:
        data = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        raise InputError(f"not YAML ({' '.join(str(exc).split())})", path=path) from None
    return data if isinstance(data, dict) else {}


def load_folder(folder: str, metric: str) -> SeedRun:
    rows = read_metrics(folder)
    evals = sorted((r["step"], float(r[metric])) for r in rows if _finite(r.get(metric)))
    keys = {k for r in rows for k in r}
    if not evals:
        shown = ", ".join(sorted(k for k in keys if k != "step")[:12])
        raise InputError(f"no finite {metric!r} in any row (keys: {shown})", path=os.path.join(folder, METRICS_FILE),
                         hint="set eval.every for held-out evaluations, or choose --metric")
    cfg = _read_config(folder)
    ev = cfg.get("eval") if isinstance(cfg.get("eval"), dict) else {}
    items = ev.get("num_prompts", 0) * ev.get("samples", 1) if _finite(ev.get("num_prompts")) else None
    seed = cfg.get("seed") if isinstance(cfg.get("seed"), int) else None
    return SeedRun(folder, seed, evals, items or None)


def load_bench(spec: str, metric: str) -> list[SeedRun]:
    """``FILE.json:ARM`` -> one :class:`SeedRun` per seed of that arm."""
    path, _, arm = spec.rpartition(":")
    runs = _read_bench(path)
    if any(arm not in r for r in runs):
        raise InputError(f"no arm {arm!r} in every seed (arms: {', '.join(runs[0])})", path=path, field="runs")
    out = []
    for seed, record in enumerate(runs):
        if metric == "eval/reward":
            evals = [(int(s), float(v)) for s, v in record[arm].get("eval", []) if _finite(v)]
        else:
            evals = [(i + 1, float(m[metric])) for i, m in enumerate(record[arm].get("steps", []))
                     if _finite(m.get(metric))]
        if not evals:
            raise InputError(f"arm {arm} seed {seed}: no finite {metric!r}", path=path,
                             hint="bench train records eval/reward when eval.every is set")
        out.append(SeedRun(f"{path}:{arm}:seed{seed}", seed, evals))
    return out


def _read_bench(path: str) -> list[dict]:
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise InputError(f"cannot read a bench result ({exc})", path=path) from None
    runs = data.get("runs") if isinstance(data, dict) else None
    if not isinstance(runs, list) or not runs or not all(isinstance(r, dict) for r in runs):
        raise InputError("no runs list", path=path, field="runs", hint="a trajkit bench train --out file")
    return runs


def metric_rows(spec: str) -> list[tuple[str, list[dict]]]:
    """``[(name, metrics rows)]`` of a run folder (its ``metrics.jsonl``) or of each seed of a bench result
    ``FILE.json:ARM`` (step ``i + 1``'s metrics from ``steps[i]``, ``eval/reward`` from ``eval``), the rows
    ``trajkit audit run`` reads."""
    if os.path.isdir(spec):
        return [(spec, read_metrics(spec))]
    path, _, arm = spec.rpartition(":")
    if not (path and os.path.isfile(path)):
        raise InputError("neither a run folder nor FILE.json:ARM", path=spec,
                         hint="e.g. runs/seed0 or bench-out/train.json:spec")
    out = []
    for seed, record in enumerate(_read_bench(path)):
        if arm not in record:
            raise InputError(f"no arm {arm!r} in seed {seed} (arms: {', '.join(record)})", path=path, field="runs")
        rows = {i + 1: {"step": i + 1, **m} for i, m in enumerate(record[arm].get("steps", []))}
        for step, value in record[arm].get("eval", []):
            rows.setdefault(int(step), {"step": int(step)})["eval/reward"] = value
        out.append((f"{path}:{arm}:seed{seed}", [rows[k] for k in sorted(rows)]))
    return out


def load_runs(specs: list[str], metric: str) -> list[SeedRun]:
    """Run folders and ``FILE.json:ARM`` bench results, in order."""
    runs = []
    for spec in specs:
        if os.path.isdir(spec):
            runs.append(load_folder(spec, metric))
        elif ":" in spec and os.path.isfile(spec.rpartition(":")[0]):
            runs.extend(load_bench(spec, metric))
        else:
            raise InputError("neither a run folder nor FILE.json:ARM", path=spec,
                             hint="e.g. runs/seed0 or bench-out/train.json:spec")
    return runs
