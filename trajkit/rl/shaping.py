"""Length shaping of rewards; lengths count only model-sampled tokens (``loss_mask`` 1), never forced ones.

- **Soft overlong punishment** (DAPO, Yu et al. 2025, eq. 13): with budget ``L_max`` and buffer
  ``L_cache``, a completion of ``L`` model tokens gets ``0`` when ``L <= L_max - L_cache``,
  ``((L_max - L_cache) - L) / L_cache`` inside the buffer, and ``-1`` beyond ``L_max``.
- **Group length penalty among correct answers** (after Kimi k1.5, Team et al. 2025): within one prompt's
  group, each *correct* completion gets ``weight * (0.5 - (L - L_min) / (L_max - L_min))`` where the min
  and max run over the group's correct completions only; wrong answers get 0, and a group with fewer
  than two distinct correct lengths gets 0. Deviation: Kimi also penalises wrong answers (``min(0, λ)``)
  and takes min/max over every answer; trajkit restricts both to correct answers (a wrong answer's
  length is not shaped: its reward is already the lowest).

- **Random-reward control** (``shaping.control=random``, Shao et al. 2025, "Spurious rewards: rethinking
  training signals in RLVR"): every training reward replaced by a Bernoulli(0.5) draw independent of the
  completion, seeded by the step's round seed. A gain such a run also shows is not the reward's doing;
  ``trajkit bench train --control random`` runs it as an arm and ``trajkit audit seeds --control`` uses it.

The raw reward is kept beside the shaped one (``Sample.raw_reward`` and ``Sample.reward``).

>>> import torch
>>> overlong_penalty(torch.tensor([10, 14, 17]), max_len=16, buffer=4)
tensor([ 0.0000, -0.5000, -1.0000])
"""
from __future__ import annotations

import torch


def overlong_penalty(lengths: torch.Tensor, max_len: int, buffer: int) -> torch.Tensor:
    """``lengths: [B]`` model tokens -> penalty ``[B]`` in [-1, 0]."""
    assert lengths.dim() == 1 and 0 < buffer <= max_len, (tuple(lengths.shape), max_len, buffer)
    lengths = lengths.to(torch.float32)
    start = max_len - buffer
    inside = (start - lengths) / buffer
    out = torch.where(lengths <= start, torch.zeros_like(lengths), inside)
    return torch.where(lengths > max_len, torch.full_like(lengths, -1.0), out)


def group_length_penalty(lengths: torch.Tensor, correct: torch.Tensor, weight: float) -> torch.Tensor:
    """``lengths: [N, G]`` model tokens, ``correct: [N, G]`` bool -> bonus ``[N, G]`` (0 for wrong answers)."""
    assert lengths.shape == correct.shape and lengths.dim() == 2
    lengths = lengths.to(torch.float32)
    big = torch.finfo(torch.float32).max
    lo = torch.where(correct, lengths, torch.full_like(lengths, big)).min(dim=1, keepdim=True).values
    hi = torch.where(correct, lengths, torch.full_like(lengths, -big)).max(dim=1, keepdim=True).values
    span = hi - lo
    usable = correct & (span > 0)
    lam = 0.5 - (lengths - lo) / torch.where(span > 0, span, torch.ones_like(span))
    return torch.where(usable, weight * lam, torch.zeros_like(lengths))


def random_rewards(n: int, seed: int, p: float = 0.5) -> list[float]:
    """``n`` Bernoulli(``p``) rewards (1.0 / 0.0) from a generator seeded by ``seed``: the same for the same
    seed, independent of every completion."""
    gen = torch.Generator().manual_seed(seed)
    return (torch.rand(n, generator=gen) < p).float().tolist()
