"""Per-row bookkeeping shared by the plain and speculative samplers.

``RowBook`` holds each row's full sequence (prompt + generated), its logprobs, its remaining budget and
stop tokens, and the order of the rows still in the batch. Samplers hand it the tokens each active row
produced in a step; it cuts them at the row's budget or first stop token, records the finish reason, and
tells the sampler which batch positions to keep.
"""
from __future__ import annotations

import torch

from trajkit.engine.params import SamplingParams
from trajkit.engine.types import Completion


class RowBook:
    """State of every row of one generate call; ``active`` lists original row ids in batch order."""

    def __init__(self, prompts: list[list[int]], params: list[SamplingParams]):
        self.seqs = [list(p) for p in prompts]
        self.generated: list[list[int]] = [[] for _ in prompts]
        self.logprobs: list[list[float]] = [[] for _ in prompts]
        self.budget = [p.max_new_tokens for p in params]
        self.stops = [frozenset(p.stop_token_ids) for p in params]
        self.finish: list[str | None] = [None] * len(prompts)
        self.proposed = [0] * len(prompts)
        self.accepted = [0] * len(prompts)
        self.active = list(range(len(prompts)))

    def remaining(self) -> list[int]:
        """Tokens each active row may still generate, in batch order."""
        return [self.budget[r] - len(self.generated[r]) for r in self.active]

    def emit(self, tokens: list[list[int]], logprobs: list[list[float]]) -> list[bool]:
        """Append each active row's new tokens (batch order); returns which rows finished."""
        assert len(tokens) == len(logprobs) == len(self.active)
        done = []
        for r, toks, lps in zip(self.active, tokens, logprobs):
            room = self.budget[r] - len(self.generated[r])
            toks, lps = toks[:room], lps[:room]
            stop_at = next((i for i, t in enumerate(toks) if t in self.stops[r]), None)
            if stop_at is not None:
                toks, lps = toks[:stop_at + 1], lps[:stop_at + 1]
                self.finish[r] = "stop"
            elif len(self.generated[r]) + len(toks) >= self.budget[r]:
                self.finish[r] = "length"
            self.generated[r].extend(toks)
            self.seqs[r].extend(toks)
            self.logprobs[r].extend(lps)
            done.append(self.finish[r] is not None)
        return done

    def drop(self, done: list[bool], device) -> torch.Tensor | None:
        """Remove finished rows from ``active``; returns the kept batch positions, or None if all stay."""
        if not any(done):
            return None
        keep = [i for i, d in enumerate(done) if not d]
        self.active = [self.active[i] for i in keep]
        return torch.tensor(keep, dtype=torch.long, device=device)

    def active_seqs(self) -> list[list[int]]:
        return [self.seqs[r] for r in self.active]

    def completions(self) -> list[Completion]:
        return [Completion(token_ids=g, logprobs=lp, finish_reason=f or "length",
                           draft_proposed=p, draft_accepted=a)
                for g, lp, f, p, a in zip(self.generated, self.logprobs, self.finish, self.proposed,
                                          self.accepted)]
