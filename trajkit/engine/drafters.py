"""Drafters: who proposes the k tokens the target verifies.

A drafter is anything with the ``Drafter`` protocol below; the engine drives it. ``DraftModel`` is a
smaller causal LM sharing the target's tokenizer (the classic two-model speculative decoding); the
n-gram / prompt-lookup drafter lives in :mod:`trajkit.engine.ngram`. An EAGLE-style head would be a third
implementation reading the target's hidden states (not built yet).

A drafter is told the full current sequence of every active row at each round, so it never has to know
what the target accepted: ``DraftModel`` keeps the tokens it has in its own cache, rolls each row back to
the longest prefix that still matches the sequence, feeds the rest, then samples ``k`` tokens.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Protocol, runtime_checkable

import torch

from trajkit.engine.kvstate import KVState, left_pad
from trajkit.engine.warp import sample
from trajkit.errors import ConfigError

Warp = Callable[[torch.Tensor], torch.Tensor]  # logits [B, V] -> post-warping probs [B, V], per-row params


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


class DraftModel:
    """A small causal LM as drafter; it must share the target's tokenizer (same vocabulary size)."""

    def __init__(self, model):
        self.model = model.eval()
        self.calls = 0
        self.seconds = 0.0
        self._before = (0, 0.0)  # totals of earlier batches (each batch has a fresh KVState)
        self.state: KVState | None = None
        self.cached: list[list[int]] = []  # tokens in the draft cache, per active row

    def vocab_size(self) -> int | None:
        return int(self.model.get_output_embeddings().weight.shape[0])

    def begin(self, prompts: list[list[int]]) -> None:
        self._before = (self.calls, self.seconds)
        self.state = KVState(self.model)
        self.cached = [list(p[:-1]) for p in prompts]  # the last token is fed with the first proposal
        self.state.prefill(self.cached)
        self._account()

    def propose(self, seqs: list[list[int]], k: int, warp: Warp, u: torch.Tensor) -> Proposal:
        assert self.state is not None and len(seqs) == len(self.cached) and u.shape == (len(seqs), k)
        pending = self._rollback(seqs)
        tokens, valid = left_pad(pending, 0, self.state.device)
        logits = self.state.extend(tokens, None if bool(valid.all()) else valid, keep_last=1)[:, 0]
        drafts, probs = [], []
        for i in range(k):
            q = warp(logits)  # [B, V]
            d = sample(q, u[:, i])  # [B]
            drafts.append(d)
            probs.append(q)
            if i + 1 < k:
                logits = self.state.extend(d.unsqueeze(1), keep_last=1)[:, 0]
        drafts_t = torch.stack(drafts, dim=1)  # [B, k]
        fed = drafts_t[:, :k - 1].tolist()
        for row, p, f in zip(self.cached, pending, fed):
            row.extend(p)
            row.extend(f)
        self._account()
        lengths = torch.full((len(seqs),), k, dtype=torch.long, device=drafts_t.device)
        return Proposal(drafts_t, torch.stack(probs, dim=1), lengths)

    def retain(self, keep: torch.Tensor) -> None:
        self.state.retain(keep)
        self.cached = [self.cached[i] for i in keep.tolist()]

    def _rollback(self, seqs: list[list[int]]) -> list[list[int]]:
        """Roll each row back to its longest cached prefix of ``seqs``; return the tokens to feed."""
        keep = []
        for cached, seq in zip(self.cached, seqs):
            n = _common_prefix(cached, seq, limit=len(seq) - 1)  # feed at least one token
            del cached[n:]
            keep.append(n)
        self.state.truncate(torch.tensor(keep, dtype=torch.long, device=self.state.device))
        return [seq[n:] for seq, n in zip(seqs, keep)]

    def _account(self) -> None:
        self.calls = self._before[0] + self.state.calls
        self.seconds = self._before[1] + self.state.seconds


def _common_prefix(a: list[int], b: list[int], limit: int) -> int:
    """Length of the common prefix of ``a`` and ``b``, at most ``limit`` (binary search on C-level
    list comparisons, so a long shared history costs microseconds)."""
    hi = min(len(a), len(b), limit)
    if a[:hi] == b[:hi]:
        return hi
    lo = 0  # invariant: a[:lo] == b[:lo] and a[:hi] != b[:hi]
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if a[:mid] == b[:mid]:
            lo = mid
        else:
            hi = mid
    return lo


def check_vocab(drafter: Drafter, target_vocab: int) -> None:
    """ConfigError when the drafter's logit width differs from the target's."""
    size = drafter.vocab_size()
    if size is not None and size != target_vocab:
        raise ConfigError(f"drafter: the draft model's vocabulary has {size} entries but the target's has "
                          f"{target_vocab}; use a draft that shares the target's tokenizer")
