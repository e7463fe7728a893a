"""The ``Drafter`` protocol: who proposes the k tokens the target verifies.

A drafter is anything with the protocol below; the engine drives it. A drafter is told the full current
sequence of every active row at each round, so it never has to know what the target accepted.
Implementations: :class:`~trajkit.engine.drafters.model.DraftModel` (a smaller causal LM),
:class:`~trajkit.engine.drafters.ngram.NgramDrafter` (prompt lookup) and
:class:`~trajkit.engine.drafters.window.WindowDrafter` (an MLP over a token window); the registry of draft
kinds (:mod:`~trajkit.engine.drafters.registry`) builds, saves and loads them by name.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Protocol, runtime_checkable

import torch

from trajkit.errors import ConfigError

Warp = Callable[[torch.Tensor], torch.Tensor]  # logits [B, V] -> post-warping probs [B, V], per-row params


def sample_chain(logits: torch.Tensor, k: int, warp: Warp, u: torch.Tensor,
                 step: Callable[[torch.Tensor], torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
    """``k`` draft tokens, one after another: token ``i`` is sampled from ``warp(logits)`` with the uniforms
    ``u[:, i]``, then ``logits = step(token)`` (the drafter's next forward) gives the next one's logits.
    ``logits: [B, V]``, ``u: [B, k]`` -> (drafts ``[B, k]``, their distributions ``[B, k, V]``)."""
    from trajkit.engine.warp import sample

    drafts, probs = [], []
    for i in range(k):
        q = warp(logits)  # [B, V]
        d = sample(q, u[:, i])  # [B]
        drafts.append(d)
        probs.append(q)
        if i + 1 < k:
            logits = step(d)
    return torch.stack(drafts, dim=1), torch.stack(probs, dim=1)


@dataclass
class Proposal:
    """``tokens: [B, k]`` long; ``probs: [B, k, V]`` the (post-warping) distributions the tokens were
    drawn from, or None for one-hot proposals; ``lengths: [B]`` real drafts per row (<= k)."""

    tokens: torch.Tensor
    probs: torch.Tensor | None
    lengths: torch.Tensor


@runtime_checkable
class Drafter(Protocol):
    """What the speculative sampler needs from a drafter."""

    calls: int  # forward passes run so far (0 for model-free drafters)
    seconds: float  # time spent proposing so far

    def vocab_size(self) -> int | None:
        """Logit width of the proposals (None: any vocabulary, e.g. n-gram lookup)."""

    def begin(self, prompts: list[list[int]]) -> None:
        """Start a batch; row ``b``'s sequence starts with ``prompts[b]``."""

    def propose(self, seqs: list[list[int]], k: int, warp: Warp, u: torch.Tensor) -> Proposal:
        """Propose ``k`` tokens after each of ``seqs`` (active rows, batch order) using the uniforms
        ``u: [B, k]`` and warping drafter logits with ``warp``."""

    def retain(self, keep: torch.Tensor) -> None:
        """Keep only batch positions ``keep: [B']``."""


def can_admit(drafter) -> bool:
    """Whether ``drafter`` also has ``admit(prompts)``: add rows after the active ones between rounds (what
    a continuous-batching session needs; optional, so drafters written before it keep working)."""
    return callable(getattr(drafter, "admit", None))


def check_vocab(drafter: Drafter, target_vocab: int) -> None:
    """ConfigError when the drafter's logit width differs from the target's."""
    size = drafter.vocab_size()
    if size is not None and size != target_vocab:
        raise ConfigError(f"drafter: the draft model's vocabulary has {size} entries but the target's has "
                          f"{target_vocab}; use a draft that shares the target's tokenizer")
