"""Run logs: ``metrics.jsonl`` (one object per step), TensorBoard scalars, and per-step sample dumps.

Layout under ``log.out_dir``: ``config.yaml``, ``metrics.jsonl``, ``tensorboard/``,
``samples/step_000001.jsonl`` (decoded prompt/completion, raw and shaped reward, advantage, lengths;
for tool-use episodes also ``samples/step_000001.hermes.jsonl``, Hermes rows ``trajkit traces`` reads),
``checkpoints/step_000010/``.
"""
from __future__ import annotations

import json
import os

import yaml

from trajkit.rl.sample import Sample
from trajkit.traces.atomic import write_atomic


class RunLogger:
    def __init__(self, out_dir: str, config: dict, tensorboard: bool, dump_samples: int):
        self.out_dir = out_dir
        os.makedirs(os.path.join(out_dir, "samples"), exist_ok=True)
        write_atomic(os.path.join(out_dir, "config.yaml"), yaml.safe_dump(config, sort_keys=False))
        self.metrics_path = os.path.join(out_dir, "metrics.jsonl")
        self.dump_samples = dump_samples
        self.writer = None
        if tensorboard:
            try:
                from torch.utils.tensorboard import SummaryWriter
            except ImportError as exc:
                from trajkit.errors import ConfigError

                raise ConfigError("log.tensorboard needs the tensorboard package (pip install tensorboard), "
                                  "or set log.tensorboard=false") from exc
            self.writer = SummaryWriter(os.path.join(out_dir, "tensorboard"))

    def log(self, step: int, metrics: dict) -> None:
        row = {"step": step, **metrics}
        with open(self.metrics_path, "a", encoding="utf-8") as fh:
            fh.write(json.dumps(row) + "\n")
        if self.writer is not None:
            for key, value in metrics.items():
                if isinstance(value, (int, float)) and not isinstance(value, bool):
                    self.writer.add_scalar(key, value, step)
            self.writer.flush()

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
            from trajkit.rl.toolenv import save_episodes

            save_episodes(samples[:self.dump_samples], path.replace(".jsonl", ".hermes.jsonl"), f"step{step}")

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
