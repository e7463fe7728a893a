"""Rewards -> shaped rewards -> group advantages, with the raw reward kept beside the shaped one."""
from __future__ import annotations

import json
import math

import torch

from trajkit.rl.advantages import group_advantages
from trajkit.rl.config import TrainConfig
from trajkit.envs.sample import Sample
from trajkit.rl.shaping import group_length_penalty, overlong_penalty


def shape_rewards(raw: torch.Tensor, lengths: torch.Tensor, cfg: TrainConfig) -> torch.Tensor:
    """``raw, lengths: [N*G]`` (rows grouped consecutively) -> shaped rewards ``[N*G]``."""
    g = cfg.rollout.group_size
    shaped = raw.clone()
    if cfg.shaping.overlong_buffer > 0:
        shaped += overlong_penalty(lengths, cfg.rollout.max_new_tokens, cfg.shaping.overlong_buffer)
    if cfg.shaping.length_penalty > 0:
        correct = (raw >= cfg.shaping.correct_threshold).view(-1, g)
        shaped += group_length_penalty(lengths.view(-1, g), correct, cfg.shaping.length_penalty).flatten()
    return shaped


def score(samples: list[Sample], rewards: list[float], cfg: TrainConfig) -> tuple[torch.Tensor, dict]:
    """Shape the task's ``rewards`` (one per sample; NaN = unscorable) and compute advantages ``[N*G]``;
    sets each sample's raw_reward/reward/advantage (None for an unscorable sample's rewards)."""
    raw = torch.tensor(rewards, dtype=torch.float32)
    lengths = torch.tensor([s.num_model_tokens for s in samples])
    shaped = shape_rewards(raw, lengths, cfg)
    adv = group_advantages(shaped.view(-1, cfg.rollout.group_size), cfg.loss.scale_rewards).flatten()
    for s, r, sh, a in zip(samples, raw.tolist(), shaped.tolist(), adv.tolist()):
        s.raw_reward, s.reward, s.advantage = _finite(r), _finite(sh), a
    solved = (raw.view(-1, cfg.rollout.group_size) >= cfg.shaping.correct_threshold).float()
    scored = ~torch.isnan(raw)
    metrics = {"reward/raw": float(raw[scored].mean()) if scored.any() else math.nan,
               "reward/shaped": float(shaped[scored].mean()) if scored.any() else math.nan,
               "reward/unscorable": float((~scored).float().mean()),
               "env/infra_failed": sum(map(_infra_failed, samples)) / len(samples),
               "reward/accuracy": float(solved.mean()),
               "reward/groups_all_same": float((solved.std(1) == 0).float().mean()) if solved.shape[1] > 1 else 0.0,
               "length/model_tokens": float(lengths.float().mean()),
               "length/truncated": sum(s.metadata.get("finish_reason") == "length" for s in samples) / len(samples)}
    return adv, metrics


def _infra_failed(sample: Sample) -> bool:
    """Whether the sample's harness record (JSON in ``columns["harness_output"]``, e.g. a Harbor trial's) says
    the run failed for want of infrastructure (``"cause": "infra"``: masked, not the policy's doing)."""
    text = sample.metadata.get("columns", {}).get("harness_output")
    if not text or '"infra"' not in text:
        return False
    try:
        record = json.loads(text)
    except ValueError:
        return False
    return isinstance(record, dict) and record.get("cause") == "infra"


def _finite(x: float) -> float | None:
    return None if math.isnan(x) else x
