"""``DraftModel``: a smaller causal LM as drafter (the classic two-model speculative decoding).

It must share the target's tokenizer (same vocabulary size, checked by the engine). It keeps the tokens it
has in its own KV cache, rolls each row back to the longest prefix that still matches the sequence the
engine hands it, feeds the rest, then samples ``k`` tokens from its warped distribution.
"""
from __future__ import annotations

import torch

from trajkit.engine.drafters.base import Proposal, Warp, sample_chain
from trajkit.engine.kvstate import KVState, left_pad


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
        full = getattr(self.model, "full_vocab_size", None)  # a shortlist draft (trajkit.models.shortlist)
        return int(full) if full is not None else int(self.model.get_output_embeddings().weight.shape[0])

    def begin(self, prompts: list[list[int]]) -> None:
        self._before = (self.calls, self.seconds)
        self.state = KVState(self.model)
        self.cached = [list(p[:-1]) for p in prompts]  # the last token is fed with the first proposal
        self.state.prefill(self.cached)
        self._account()

    def admit(self, prompts: list[list[int]]) -> None:
        """Add rows after the active ones between rounds (continuous batching): their prompts but the
        last token are prefilled on their own and merged under the running cache."""
        assert self.state is not None
        fresh = KVState(self.model)
        cached = [list(p[:-1]) for p in prompts]
        fresh.prefill(cached)
        self.state.admit(fresh)  # also adds the fresh state's forward counters
        self.cached += cached
        self._account()

    def propose(self, seqs: list[list[int]], k: int, warp: Warp, u: torch.Tensor) -> Proposal:
        assert self.state is not None and len(seqs) == len(self.cached) and u.shape == (len(seqs), k)
        pending = self._rollback(seqs)
        tokens, valid = left_pad(pending, 0, self.state.device)
        logits = self.state.extend(tokens, None if bool(valid.all()) else valid, keep_last=1)[:, 0]
        drafts_t, probs = sample_chain(logits, k, warp, u,
                                       lambda d: self.state.extend(d.unsqueeze(1), keep_last=1)[:, 0])
        fed = drafts_t[:, :k - 1].tolist()
        for row, p, f in zip(self.cached, pending, fed):
            row.extend(p)
            row.extend(f)
        self._account()
        lengths = torch.full((len(seqs),), k, dtype=torch.long, device=drafts_t.device)
        return Proposal(drafts_t, probs, lengths)

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
