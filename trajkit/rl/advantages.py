"""Group-relative advantages (GRPO, Shao et al. 2024, "DeepSeekMath"; Dr.GRPO, Liu et al. 2025).

Each prompt is answered G times; a completion's advantage is its reward minus the mean reward of its
group, divided by a standard deviation chosen by ``scale`` (TRL's ``scale_rewards``)::

    A[n, g] = (r[n, g] - mean_g r[n, :]) / (std_g r[n, :] + eps)      scale="group" (GRPO)
    A[n, g] = (r[n, g] - mean_g r[n, :]) / (std r[:, :] + eps)        scale="batch" (Hu et al. 2025, REINFORCE++)
    A[n, g] =  r[n, g] - mean_g r[n, :]                               scale="none"  (Dr.GRPO)

``std`` is the unbiased (Bessel-corrected) sample standard deviation and ``eps`` = 1e-4, as in
DeepSeekMath's and TRL's implementations (the same numbers to fp32 precision, ``tests/rl/test_trl_parity.py``);
Dr.GRPO argues the division biases updates toward too-easy and too-hard prompts and drops it. A group whose
rewards are all equal gets advantage 0 for every member in every mode.

>>> import torch
>>> group_advantages(torch.tensor([[1.0, 0.0, 0.0, 1.0]]), scale="none")
tensor([[ 0.5000, -0.5000, -0.5000,  0.5000]])
"""
from __future__ import annotations

from typing import Literal

import torch

Scale = Literal["group", "batch", "none"]
SCALES = ("group", "batch", "none")
EPS = 1e-4


def group_advantages(rewards: torch.Tensor, scale: Scale = "group", eps: float = EPS) -> torch.Tensor:
    """``rewards: [N, G]`` (N prompts, G completions each) -> advantages ``[N, G]``.

    NaN marks an *unscorable* completion (no reward function applied to it, TRL's ``None``): it is left
    out of its group's mean and of every std and gets advantage 0; a group with fewer than two scored
    members gets 0 throughout.

    >>> group_advantages(torch.tensor([[1.0, float("nan"), 0.0]]), scale="none")
    tensor([[ 0.5000,  0.0000, -0.5000]])
    """
    assert rewards.dim() == 2 and rewards.shape[1] >= 2, f"rewards must be [N, G>=2], got {tuple(rewards.shape)}"
    assert scale in SCALES, f"scale must be one of {SCALES}, got {scale!r}"
    rewards = rewards.to(torch.float32)
    scored = ~torch.isnan(rewards)
    count = scored.sum(dim=1, keepdim=True)
    filled = torch.where(scored, rewards, torch.zeros_like(rewards))
    mean = filled.sum(dim=1, keepdim=True) / count.clamp(min=1)
    centered = torch.where(scored, rewards - mean, torch.zeros_like(rewards))
    centered = torch.where(count >= 2, centered, torch.zeros_like(centered))
    if scale == "none":
        return centered
    if scale == "group":
        std = (centered.pow(2).sum(dim=1, keepdim=True) / (count - 1).clamp(min=1)).sqrt()
        return centered / (std + eps)
    total = scored.sum()
    batch_mean = filled.sum() / total.clamp(min=1)
    spread = torch.where(scored, rewards - batch_mean, torch.zeros_like(rewards))
    std = (spread.pow(2).sum() / (total - 1).clamp(min=1)).sqrt()
    return centered / (std + eps)
