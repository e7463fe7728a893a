"""``DecodeSession``: step-wise plain decoding whose batch admits new rows and retires finished ones.

Continuous batching (Yu et al. 2022, "Orca", iteration-level scheduling): instead of one call that runs a
fixed batch to its end, the caller alternates ``admit`` (between steps) and ``step``. ``admit`` prefills
the new rows on their own (left-padded among themselves) and appends their KV state under the running
batch's (:meth:`trajkit.engine.kvstate.KVState.admit`: both right-aligned, holes on the left, each row
keeping its own position ids). ``step`` samples one token for every active row, reports each row's new
token (and, for a row that finished, its :class:`~trajkit.engine.types.Completion`), drops the finished
rows from the batch and the cache, and runs the next forward.

A row's tokens are a pure function of its prompt and its ``SamplingParams``: each admitted row is its own
request (stream index 0 of its seed, :mod:`trajkit.engine.rng`), consumes one uniform per step, and sees
exactly its own tokens through the attention mask. So a row that joins a running batch samples what
``Engine.generate([prompt], params)`` samples alone (tested token for token, greedy and seeded), up to
the floating-point differences between batched and unbatched matmuls that the engine has everywhere.

Deviation: the session decodes plainly (one target forward per token) even when the engine has a
drafter; speculative rounds over a batch whose rows join at different times are not implemented.
"""
from __future__ import annotations

import time
from dataclasses import dataclass

import torch

from trajkit.engine.active import ActiveBatch
from trajkit.engine.host import to_host
from trajkit.engine.kvstate import KVState
from trajkit.engine.params import SamplingParams
from trajkit.engine.types import Completion, GenerationStats
from trajkit.engine.warp import nonfinite_rows, sample, token_logprobs


@dataclass
class RowUpdate:
    """What one step gave row ``row``: its new ``token_ids`` / ``logprobs``, and ``done`` (its whole
    completion) when it finished at this step."""

    row: int
    token_ids: list[int]
    logprobs: list[float]
    done: Completion | None = None


class DecodeSession:
    """A running batch over ``model``; rows are numbered in admission order from 0 (see module docstring).

    Use through :meth:`trajkit.engine.Engine.session`, which validates prompts and parameters."""

    def __init__(self, model, sync_timing: bool = False, check=None):
        self.model, self.sync_timing = model, sync_timing
        self._check = check
        self.device = next(model.parameters()).device
        self.state = KVState(model, sync_timing)
        self.batch = ActiveBatch([], [], False, self.device, followers=[self.state])
        self.logits: torch.Tensor | None = None  # [B, 1, V]: the next token's logits of every active row
        self.stats = GenerationStats()

    @property
    def rows(self) -> list[int]:
        """Ids of the active rows, in batch order."""
        return list(self.batch.rows)

    @torch.inference_mode()
    def admit(self, prompts: list[list[int]], params: list[SamplingParams]) -> list[int]:
        """Prefill ``prompts`` (one ``SamplingParams`` each) and add them to the batch; their row ids.
        They sample their first token at the next :meth:`step`."""
        if self._check is not None:
            prompts, params = self._check(prompts, params)
        start = time.perf_counter()
        fresh = KVState(self.model, self.sync_timing)
        logits = fresh.prefill(prompts)  # [B', 1, V]
        if not self.batch.rows:  # an idle session starts over with the new rows' state
            self.state, self.logits = fresh, logits
            self.batch.followers = [fresh]
        else:
            self.state.admit(fresh)
            self.logits = torch.cat([self.logits, logits], dim=0)
        new = self.batch.admit(prompts, params)
        self._count(fresh.calls, fresh.seconds, time.perf_counter() - start, rows=len(prompts))
        return new

    @torch.inference_mode()
    def step(self) -> list[RowUpdate]:
        """One token for every active row (batch order); finished rows leave. [] when no row is active."""
        batch = self.batch
        if not batch.rows:
            return []
        start, calls, seconds = time.perf_counter(), self.state.calls, self.state.seconds
        probs = batch.probs(self.logits)[:, 0]  # [B, V]
        batch.last = sample(probs, batch.uniforms(1)[:, 0])  # [B]
        tokens, logprobs, bad = to_host(batch.last, token_logprobs(probs, batch.last),
                                        nonfinite_rows(self.logits[:, 0]))
        batch.check_finite(bad)
        rows = list(batch.rows)
        done = batch.emit([[t] for t in tokens], [[x] for x in logprobs])
        updates = [RowUpdate(r, [t], [x], batch.completion(r) if d else None)
                   for r, t, x, d in zip(rows, tokens, logprobs, done)]
        batch.drop(done)
        for u in updates:
            if u.done is not None:
                batch.release(u.row)
        if batch.rows:
            self.stats.row_steps += len(batch.rows)
            self.stats.step_tokens += len(batch.rows)
            self.logits = self.state.extend(batch.last.unsqueeze(1))  # [B, 1, V]
        else:
            self.logits = None
        self.stats.new_tokens += len(rows)
        self._count(self.state.calls - calls, self.state.seconds - seconds, time.perf_counter() - start)
        return updates

    def _count(self, calls: int, target_seconds: float, seconds: float, rows: int = 0) -> None:
        self.stats.rows += rows
        self.stats.target_calls += calls
        self.stats.target_seconds += target_seconds
        self.stats.seconds += seconds
