"""Rewards -> shaped rewards -> group advantages, with the raw reward kept beside the shaped one; and the
step's episodes that failed for the environment's reason, counted (``env/failed``) and, past
``rollout.max_env_failed`` of the step, an error that stops the run (:func:`check_env_failures`)."""
from __future__ import annotations

import json
import math

import torch

from trajkit.rl.advantages import group_advantages
from trajkit.errors import TrajkitError
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
               "env/failed": sum(env_failure(s) is not None for s in samples) / len(samples),
               "reward/accuracy": float(solved.mean()),
               "reward/groups_all_same": float((solved.std(1) == 0).float().mean()) if solved.shape[1] > 1 else 0.0,
               "length/model_tokens": float(lengths.float().mean()),
               "length/truncated": sum(s.metadata.get("finish_reason") == "length" for s in samples) / len(samples)}
    return adv, metrics


class EnvironmentFailed(TrajkitError, RuntimeError):
    """More of a step's episodes failed for the environment's reason than ``rollout.max_env_failed`` allows
    (the message names how many, the first cause and the fix)."""


ENV_CAUSES = ("infra", "env")  # a harness record's causes that are not the policy's doing


def env_failure(sample: Sample) -> str | None:
    """Why ``sample``'s episode failed for the environment's reason, else None. Its harness record (JSON in
    ``columns["harness_output"]``: a Harbor trial, an OpenEnv episode) decides when it names a ``cause``:
    ``"infra"`` (the sandbox could not start, the host failed) or ``"env"`` (the environment raised, refused
    or its server went away) is the environment's, anything else (the agent's time limit, a wrong answer) is
    not; without one, a harness that failed itself (``metadata["harness_error"]``: raised, exited non-zero,
    timed out, made no call) is."""
    text = sample.metadata.get("columns", {}).get("harness_output")
    record = None
    if text and '"cause"' in text:
        try:
            record = json.loads(text)
        except ValueError:
            record = None
    if isinstance(record, dict) and record.get("cause") is not None:
        return str(record.get("error") or record["cause"]) if record["cause"] in ENV_CAUSES else None
    return sample.metadata.get("harness_error")


def check_env_failures(samples: list[Sample], cfg: TrainConfig, step: int) -> None:
    """Raise :class:`EnvironmentFailed` when more than ``rollout.max_env_failed`` of the step's ``samples``
    failed for the environment's reason: such a step trains on what is left of its groups, and a run of them
    is an environment that is down, whose rewards would read as a policy learning nothing."""
    failed = [why for why in map(env_failure, samples) if why is not None]
    share = cfg.rollout.max_env_failed
    if samples and len(failed) > share * len(samples):
        raise EnvironmentFailed(
            f"step {step}: {len(failed)} of {len(samples)} episodes failed for the environment's reason, more than "
            f"rollout.max_env_failed = {share:g} of them; the first: {failed[0][:2000]} (fix the environment, or "
            "set rollout.max_env_failed=1 to train on whatever the others give)")


def _finite(x: float) -> float | None:
    return None if math.isnan(x) else x
