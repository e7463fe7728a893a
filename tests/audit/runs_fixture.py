"""Run folders written the way ``trajkit train`` writes them (the trainer's own JSONL reporter and its
config dict), with a chosen eval/reward series per seed."""
from __future__ import annotations

import json
import os

import yaml

from trajkit.rl.config import TrainConfig, to_dict
from trajkit.rl.reporters import JsonlReporter


def write_run(folder, seed: int, final: float, *, start: float = 0.3, steps: int = 10, every: int = 2,
              num_prompts: int = 500) -> str:
    """A run whose eval/reward rises linearly from ``start`` (step 0) to ``final`` (last 3 evaluations)."""
    os.makedirs(folder, exist_ok=True)
    cfg = TrainConfig(seed=seed, steps=steps)
    cfg.eval.every, cfg.eval.num_prompts = every, num_prompts
    with open(os.path.join(folder, "config.yaml"), "w") as fh:
        fh.write(yaml.safe_dump(to_dict(cfg), sort_keys=False))
    reporter = JsonlReporter(str(folder), {}, cfg.log)
    reporter.log(0, {"eval/reward": start})
    evals = list(range(every, steps + 1, every))
    for step in range(1, steps + 1):
        metrics = {"loss": 0.1, "reward/mean": final}
        if step in evals:
            k = evals.index(step)
            metrics["eval/reward"] = final if k >= len(evals) - 3 else start + (final - start) * (k + 1) / len(evals)
        reporter.log(step, metrics)
    return str(folder)


def write_arm(root, name: str, finals: list[float], **kw) -> list[str]:
    return [write_run(os.path.join(root, f"{name}{i}"), i, f, **kw) for i, f in enumerate(finals)]


def write_bench(path, arms: dict[str, list[float]]) -> str:
    """A ``trajkit bench train --out`` file: per seed, per arm, eval [[step, reward]] and step metrics."""
    seeds = len(next(iter(arms.values())))
    runs = [{arm: {"steps": [{"loss": 0.1}, {"loss": 0.1}], "eval": [[0, 0.3], [1, 0.3], [2, finals[s]]]}
             for arm, finals in arms.items()} for s in range(seeds)]
    path.write_text(json.dumps({"summary": {"seeds": seeds}, "runs": runs}))
    return str(path)
