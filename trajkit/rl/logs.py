"""Run logs: the step metrics through the reporters of ``log.report_to`` (:mod:`trajkit.rl.reporters`:
``metrics.jsonl`` always, TensorBoard, Weights & Biases), and per-step sample dumps.

Layout under ``log.out_dir``: ``config.yaml``, ``metrics.jsonl``, ``tensorboard/``, ``wandb/``,
``eval_items.jsonl`` (each eval item's scores per evaluation, :mod:`trajkit.rl.evalitems`),
``samples/step_000001.jsonl`` (decoded prompt/completion, raw and shaped reward, advantage, lengths;
for tool-use episodes also ``samples/step_000001.hermes.jsonl``, Hermes rows ``trajkit traces`` reads),
``checkpoints/step_000010/`` (:mod:`trajkit.rl.checkpoint`).
"""
from __future__ import annotations

import json
import os

import yaml

from trajkit.rl.reporters import make_reporters
from trajkit.envs.sample import Sample
from trajkit.atomic import write_atomic


class RunLogger:
    """``log`` is the run's ``LogConfig`` (out_dir, report_to, wandb_project, dump_samples); ``config`` the
    whole config as a dict, written to ``config.yaml`` and given to the reporters."""

    def __init__(self, log, config: dict):
        self.out_dir = log.out_dir
        os.makedirs(os.path.join(self.out_dir, "samples"), exist_ok=True)
        write_atomic(os.path.join(self.out_dir, "config.yaml"), yaml.safe_dump(config, sort_keys=False))
        self.dump_samples = log.dump_samples
        self.reporters = make_reporters(self.out_dir, config, log)

    def log(self, step: int, metrics: dict) -> None:
        for reporter in self.reporters:
            reporter.log(step, metrics)

    def samples(self, step: int, samples: list[Sample], tokenizer) -> None:
        if self.dump_samples <= 0:
            return
        path = os.path.join(self.out_dir, "samples", f"step_{step:06d}.jsonl")
        lines = []
        for s in samples[:self.dump_samples]:
            meta = {k: v for k, v in s.metadata.items() if k != "messages"}
            lines.append(json.dumps({"prompt": tokenizer.decode(s.prompt_ids),
                                     "completion": tokenizer.decode(s.completion_ids),
                                     "model_tokens": s.num_model_tokens, "group": s.group,
                                     "policy_version": s.policy_version, "raw_reward": s.raw_reward,
                                     "reward": s.reward, "advantage": s.advantage, **meta}) + "\n")
        write_atomic(path, "".join(lines))
        if any("messages" in s.metadata for s in samples):
            from trajkit.envs.toolenv import save_episodes

            save_episodes(samples[:self.dump_samples], path.replace(".jsonl", ".hermes.jsonl"), f"step{step}")

    def close(self) -> None:
        for reporter in self.reporters:
            reporter.close()
