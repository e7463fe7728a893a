"""Group-relative advantages (GRPO, Shao et al. 2024, "DeepSeekMath"; Dr.GRPO, Liu et al. 2025).

Each prompt is answered G times; a completion's advantage is its reward minus the mean reward of its
group, optionally divided by the group's standard deviation::

    A[n, g] = (r[n, g] - mean_g r[n, :]) / (std_g r[n, :] + eps)      (scale_std=True, GRPO)
    A[n, g] =  r[n, g] - mean_g r[n, :]                               (scale_std=False, Dr.GRPO)

``std`` is the unbiased (Bessel-corrected) sample standard deviation, as in DeepSeekMath's and TRL's
implementations; Dr.GRPO argues the division biases updates toward too-easy and too-hard prompts and
drops it. A group whose rewards are all equal gets advantage 0 for every member either way.

>>> import torch
>>> group_advantages(torch.tensor([[1.0, 0.0, 0.0, 1.0]]), scale_std=False)
tensor([[ 0.5000, -0.5000, -0.5000,  0.5000]])
"""
from __future__ import annotations

import torch


def group_advantages(rewards: torch.Tensor, scale_std: bool, eps: float = 1e-6) -> torch.Tensor:
    """``rewards: [N, G]`` (N prompts, G completions each) -> advantages ``[N, G]``.

    NaN marks an *unscorable* completion (no reward function applied to it, TRL's ``None``): it is left
    out of its group's mean and std and gets advantage 0; a group with fewer than two scored members
    gets 0 throughout.

    >>> group_advantages(torch.tensor([[1.0, float("nan"), 0.0]]), scale_std=False)
    tensor([[ 0.5000,  0.0000, -0.5000]])
    """
    assert rewards.dim() == 2 and rewards.shape[1] >= 2, f"rewards must be [N, G>=2], got {tuple(rewards.shape)}"
    rewards = rewards.to(torch.float32)
    scored = ~torch.isnan(rewards)
    count = scored.sum(dim=1, keepdim=True)
    filled = torch.where(scored, rewards, torch.zeros_like(rewards))
    mean = filled.sum(dim=1, keepdim=True) / count.clamp(min=1)
    centered = torch.where(scored, rewards - mean, torch.zeros_like(rewards))
    centered = torch.where(count >= 2, centered, torch.zeros_like(centered))
    if not scale_std:
        return centered
    std = (centered.pow(2).sum(dim=1, keepdim=True) / (count - 1).clamp(min=1)).sqrt()
    return centered / (std + eps)
