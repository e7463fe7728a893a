"""DAPO dynamic sampling (Yu et al. 2025, "DAPO: an open-source LLM reinforcement learning system at
scale", section 3.2): a group whose G rewards are all equal has advantage 0 for every member, so it adds
nothing to the policy gradient but still dilutes the batch. Dynamic sampling drops such groups and draws
more prompts until the batch holds ``prompts_per_step`` groups with signal.

Rounds (:func:`collect_groups`):

    round 0   the step's P prompts (taken in the ``data`` stage) -> generate, reward, shape
    round r   keep the groups whose shaped rewards differ; while fewer than P are kept and
              r < max_refill_rounds, take P - kept more prompts from the stream and generate again

The stream's cursor advances by every prompt drawn, so a checkpoint's cursor resumes the stream exactly.
Round ``r``'s sampling seed is :func:`round_seed`, distinct for every (step, round).

Deviations from the paper: the test is on the *shaped* reward (the one advantages are computed from:
a group of equally correct answers with different lengths keeps its length-shaping signal), not on
accuracy; a refill round draws only the missing number of prompts (the paper over-samples a full batch);
and when the refill budget is spent the batch is topped up with the earliest dropped groups, so a step
always trains on P groups (those contribute no policy gradient, exactly as without dynamic sampling),
instead of stopping the run.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import torch

from trajkit.envs.sample import Sample
from trajkit.envs.base import Prompt

ROUND_STRIDE = 1 << 48  # refill round r of a step samples with seed step_seed + r * ROUND_STRIDE


def round_seed(step_seed: int, round_index: int) -> int:
    """The sampling seed of a step's generation round (round 0: the step's seed, unchanged)."""
    return step_seed + round_index * ROUND_STRIDE


def constant_groups(rewards: torch.Tensor) -> torch.Tensor:
    """``rewards: [N, G]`` -> ``[N]`` bool, True where all G rewards are equal (zero advantage).

    >>> constant_groups(torch.tensor([[1.0, 1.0], [0.0, 1.0], [0.5, 0.5]])).tolist()
    [True, False, True]
    """
    assert rewards.dim() == 2, f"rewards must be [N, G], got {tuple(rewards.shape)}"
    return (rewards == rewards[:, :1]).all(dim=1)


@dataclass
class Collected:
    """The batch's groups (``samples``/``rewards``, G rows per group, groups renumbered 0..) and every
    generated row (``seen_*``, for the reward metrics: the batch alone is biased toward mixed groups)."""

    samples: list[Sample]
    rewards: list[float]
    seen_samples: list[Sample] = field(default_factory=list)
    seen_rewards: list[float] = field(default_factory=list)
    metrics: dict = field(default_factory=dict)


RunRound = Callable[[list[Prompt], int], tuple[list[Sample], list[float]]]  # (prompts, round) -> rows, raw rewards
Shape = Callable[[list[Sample], list[float]], torch.Tensor]  # rows, raw rewards -> shaped rewards [rows]


def collect_groups(prompts: list[Prompt], group_size: int, run_round: RunRound, shape: Shape,
                   take: Callable[[int], list[Prompt]], max_refill_rounds: int) -> Collected:
    """Run round 0 on ``prompts`` and refill rounds from ``take`` until ``len(prompts)`` groups have
    signal or ``max_refill_rounds`` refills ran; see the module docstring."""
    want, g = len(prompts), group_size
    kept: list[tuple[list[Sample], list[float]]] = []
    dropped: list[tuple[list[Sample], list[float]]] = []
    out = Collected([], [])
    rounds = 0
    while True:
        samples, rewards = run_round(prompts, rounds)
        out.seen_samples += samples
        out.seen_rewards += list(rewards)
        constant = constant_groups(shape(samples, rewards).view(-1, g)).tolist()
        for i, is_constant in enumerate(constant):
            group = (samples[i * g:(i + 1) * g], list(rewards[i * g:(i + 1) * g]))
            (dropped if is_constant else kept).append(group)
        if len(kept) >= want or rounds == max_refill_rounds:
            break
        rounds += 1
        prompts = take(want - len(kept))
    topped_up = max(0, want - len(kept))
    groups = kept[:want] + dropped[:topped_up]
    for index, (samples, rewards) in enumerate(groups):
        for s in samples:
            s.group = index
        out.samples += samples
        out.rewards += rewards
    out.metrics = {"dynamic/groups_dropped": float(len(dropped)), "dynamic/refill_rounds": float(rounds),
                   "dynamic/groups_topped_up": float(topped_up),
                   "dynamic/prompts_drawn": float(len(out.seen_samples) // g)}
    return out
