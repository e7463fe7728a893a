"""N-gram / prompt-lookup drafter: no model, proposals copied from earlier in the row's own sequence.

Algorithm (Saxena 2023, "Prompt Lookup Decoding"; HF ``prompt_lookup_num_tokens``): take the last ``n``
tokens of the sequence, find their most recent earlier occurrence in the prompt or the generated text,
and propose the tokens that followed it, trying ``n = max_ngram`` down to ``min_ngram``. The proposal is
deterministic, so ``q`` is a point mass and the acceptance probability of a draft is ``p(draft)``.

Deviation from HF: the lookup uses an incremental hash index per row (``NgramIndex``: each new token adds
one entry per ``n``), so a round costs O(k) instead of a scan of the whole sequence. A row with no match
proposes nothing that round (``lengths[b] = 0``) and the sampler takes a plain step for it.
"""
from __future__ import annotations

import time
from dataclasses import dataclass

import torch

from trajkit.engine.drafters.base import Proposal, Warp
from trajkit.errors import ConfigError


class NgramIndex:
    """For one sequence: n-gram -> end position of its most recent occurrence that has a successor."""

    def __init__(self, min_n: int, max_n: int):
        self.sizes = range(max_n, min_n - 1, -1)
        self.tables: dict[int, dict[tuple, int]] = {n: {} for n in self.sizes}
        self.indexed = 0  # n-grams ending at positions < indexed are in the tables
        self.seen: list[int] = []

    def lookup(self, seq: list[int], k: int) -> list[int]:
        """Up to ``k`` tokens that followed the longest recent match of ``seq``'s suffix."""
        self._update(seq)
        for n in self.sizes:
            if len(seq) < n:
                continue
            end = self.tables[n].get(tuple(seq[-n:]))
            if end is not None:
                return seq[end:end + k]
        return []

    def _update(self, seq: list[int]) -> None:
        if self.seen != seq[:len(self.seen)]:  # the sequence changed under us: rebuild
            self.tables = {n: {} for n in self.sizes}
            self.indexed = 0
        # index n-grams ending at e (tokens seq[e-n:e]) for e < len(seq): each has a successor seq[e]
        for end in range(max(self.indexed, 1), len(seq)):
            for n in self.sizes:
                if end >= n:
                    self.tables[n][tuple(seq[end - n:end])] = end
        self.indexed = max(self.indexed, len(seq))
        self.seen = list(seq)


@dataclass
class NgramDrafter:
    """Prompt-lookup drafter; ``min_ngram <= max_ngram`` are the suffix lengths tried, longest first."""

    max_ngram: int = 3
    min_ngram: int = 1

    def __post_init__(self) -> None:
        if not (isinstance(self.min_ngram, int) and self.min_ngram >= 1):
            raise ConfigError(f"min_ngram must be an integer >= 1, got {self.min_ngram!r}")
        if not (isinstance(self.max_ngram, int) and self.max_ngram >= self.min_ngram):
            raise ConfigError(f"max_ngram must be an integer >= min_ngram ({self.min_ngram}), "
                              f"got {self.max_ngram!r}")
        self.calls = 0
        self.seconds = 0.0
        self.indexes: list[NgramIndex] = []

    def vocab_size(self) -> int | None:
        return None

    def begin(self, prompts: list[list[int]]) -> None:
        self.indexes = [NgramIndex(self.min_ngram, self.max_ngram) for _ in prompts]

    def admit(self, prompts: list[list[int]]) -> None:
        """Add rows after the active ones (continuous batching)."""
        self.indexes += [NgramIndex(self.min_ngram, self.max_ngram) for _ in prompts]

    def propose(self, seqs: list[list[int]], k: int, warp: Warp, u: torch.Tensor) -> Proposal:
        start = time.perf_counter()
        found = [index.lookup(seq, k) for index, seq in zip(self.indexes, seqs)]
        tokens = torch.zeros(len(seqs), k, dtype=torch.long)
        for i, row in enumerate(found):
            if row:
                tokens[i, :len(row)] = torch.tensor(row, dtype=torch.long)
        lengths = torch.tensor([len(r) for r in found], dtype=torch.long)
        self.seconds += time.perf_counter() - start
        return Proposal(tokens.to(u.device), None, lengths.to(u.device))

    def retain(self, keep: torch.Tensor) -> None:
        self.indexes = [self.indexes[i] for i in keep.tolist()]
