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

With a drafter, :class:`SpeculativeSession` does the same with speculative rounds
(:mod:`trajkit.engine.speculative`): ``step`` is one round (the drafter proposes up to ``k`` tokens per
row, one target forward verifies them all, each row keeps its accepted drafts plus one token), so a row
gets 1 to ``k + 1`` tokens per step. ``admit`` prefills the new prompts but their last token (scored with
the row's first drafts, as in ``Engine.generate``), merges them under the running target cache and hands
them to the drafter (``Drafter.admit``). Each row draws ``2k + 1`` uniforms per round from its own stream,
so a row that joins a running batch samples what ``Engine.generate([prompt], params)`` samples alone with
the same drafter and ``k`` (tested, greedy and seeded), and its tokens follow the target's distribution
exactly, whatever the drafter proposes.
"""
from __future__ import annotations

import time
from dataclasses import dataclass

import torch

from trajkit.engine.active import ActiveBatch
from trajkit.engine.features import feature_layers, observe_prefill
from trajkit.engine.host import to_device, to_host
from trajkit.engine.kvstate import KVState
from trajkit.engine.prefix import Reuse
from trajkit.engine.params import SamplingParams
from trajkit.engine.types import Completion, GenerationStats
from trajkit.engine.speculative import Drafts, RoundUniforms, commit, draft, verify
from trajkit.engine.warp import nonfinite_rows, one_position, sample, token_logprobs, top_logprobs


_REUSE_COUNTS = ("prompt_tokens", "prefix_hit_tokens", "shared_prompt_tokens", "prefill_tokens")


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

    def __init__(self, model, sync_timing: bool = False, check=None, reuse: Reuse = Reuse(), decode=None):
        self.model, self.sync_timing = model, sync_timing
        self._check, self.reuse = check, reuse
        self.device = next(model.parameters()).device
        self.state = KVState(model, sync_timing)
        self.batch = ActiveBatch([], [], False, self.device, followers=[self.state], decode=decode)
        reuse.attach(self.batch, lambda: self.state)
        self.last_admit = GenerationStats()  # the reuse counters of the latest admit alone
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
        self.last_admit = GenerationStats()
        logits, hits = self.reuse.prefill(fresh, prompts, 1, self.last_admit)  # [B', 1, V]
        for name in _REUSE_COUNTS:
            setattr(self.stats, name, getattr(self.stats, name) + getattr(self.last_admit, name))
        if not self.batch.rows:  # an idle session starts over with the new rows' state
            self.state, self.logits = fresh, logits
            self.batch.followers = [fresh]
        else:
            self.state.admit(fresh)
            self.logits = torch.cat([self.logits, logits], dim=0)
        new = self.batch.admit(prompts, params)
        for r, n in zip(new, hits):
            self.batch.cached[r] = n
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
        k = batch.top_count()
        tokens, logprobs, bad, *top = to_host(batch.last, token_logprobs(probs, batch.last),
                                              nonfinite_rows(self.logits[:, 0]), *(top_logprobs(probs, k) if k else ()))
        batch.check_finite(bad)
        rows = list(batch.rows)
        done = batch.emit([[t] for t in tokens], [[x] for x in logprobs], one_position(top))
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


class SpeculativeSession:
    """A running batch decoded in speculative rounds (module docstring). ``k``: drafts per round, or a
    callable ``k(prompts, params)`` asked whenever rows are admitted into an idle session (the engine's
    ``"auto"`` choice for that batch; 0 = rounds without drafts, i.e. plain decoding steps). ``on_idle``:
    called with a busy period's ``GenerationStats`` and the number of rows it started with (the batch size
    its k was chosen for) when its last row finishes.

    Use through :meth:`trajkit.engine.Engine.session`."""

    def __init__(self, model, drafter, k, sync_timing: bool = False, check=None, on_idle=None,
                 reuse: Reuse = Reuse(), decode=None):
        self.model, self.drafter, self.sync_timing = model, drafter, sync_timing
        self._k, self._check, self._on_idle, self.reuse = k, check, on_idle, reuse
        self.k = k if isinstance(k, int) else 0
        self.device = next(model.parameters()).device
        self.capture = feature_layers(drafter)
        self.state = KVState(model, sync_timing, capture=self.capture)
        self.batch = ActiveBatch([], [], False, self.device, followers=[self.state, drafter], decode=decode)
        reuse.attach(self.batch, lambda: self.state)
        self.last_admit = GenerationStats()  # the reuse counters of the latest admit alone
        self.period = GenerationStats()  # the busy period running now (idle admission -> last row done)
        self._finished = GenerationStats()  # every earlier busy period, merged
        self.stats = GenerationStats()  # the whole session: _finished + period, updated in place
        self._draft_totals = (drafter.calls, drafter.seconds)
        self.period_batch = 0

    @property
    def rows(self) -> list[int]:
        """Ids of the active rows, in batch order."""
        return list(self.batch.rows)

    @torch.inference_mode()
    def admit(self, prompts: list[list[int]], params: list[SamplingParams]) -> list[int]:
        """Prefill ``prompts`` (all but their last token) and add them to the batch; their row ids."""
        if self._check is not None:
            prompts, params = self._check(prompts, params)
        start = time.perf_counter()
        lasts = to_device([p[-1] for p in prompts], self.device)
        fresh = KVState(self.model, self.sync_timing, capture=self.capture)
        self.last_admit = GenerationStats()
        _, hits = self.reuse.prefill(fresh, [p[:-1] for p in prompts], 0, self.last_admit)
        if not self.batch.rows:  # an idle session starts over: k, fresh state, drafter
            if not isinstance(self._k, int):
                self.k = int(self._k(prompts, params))
            self.period_batch = len(prompts)  # the batch size k was chosen for (auto k's guard checks it)
            self.period = GenerationStats(num_draft_tokens=self.k, position_tried=[0] * self.k,
                                          position_accepted=[0] * self.k)
            self._draft_totals = (self.drafter.calls, self.drafter.seconds)
            self.state = fresh
            self.batch.followers = [fresh, self.drafter]
            self.drafter.begin(prompts)
            observe_prefill(self.drafter, fresh, [p[:-1] for p in prompts])
            last = lasts
        else:
            running = len(self.batch.rows)
            self.state.admit(fresh)
            self.drafter.admit(prompts)
            observe_prefill(self.drafter, fresh, [p[:-1] for p in prompts],
                            list(range(running, running + len(prompts))))
            last = torch.cat([self.batch.last, lasts])
        new = self.batch.admit(prompts, params)
        for r, n in zip(new, hits):
            self.batch.cached[r] = n
        self.batch.last = last
        self._count(fresh.calls, fresh.seconds, time.perf_counter() - start, rows=len(prompts))
        return new

    @torch.inference_mode()
    def step(self) -> list[RowUpdate]:
        """One speculative round for every active row (batch order): each gets 1 to k + 1 tokens; finished
        rows leave. [] when no row is active."""
        batch = self.batch
        if not batch.rows:
            return []
        start, calls, seconds = time.perf_counter(), self.state.calls, self.state.seconds
        rows = list(batch.rows)
        before = [len(batch.generated[r]) for r in rows]
        u = RoundUniforms.draw(batch, self.k)
        if self.k:
            drafts = draft(self.drafter, batch, self.k, u.draft)
        else:
            none = torch.zeros(len(rows), 0, dtype=torch.long, device=self.device)
            drafts = Drafts(none, None, torch.zeros(len(rows), dtype=torch.long, device=self.device), [0] * len(rows))
        done = commit(self.state, batch, drafts, verify(self.state, batch, drafts, u), self.period, self.drafter)
        updates = [RowUpdate(r, batch.generated[r][n:], batch.logprobs[r][n:], batch.completion(r) if d else None)
                   for r, n, d in zip(rows, before, done)]
        for update in updates:
            if update.done is not None:
                batch.release(update.row)
        self._count(self.state.calls - calls, self.state.seconds - seconds, time.perf_counter() - start,
                    tokens=sum(len(update.token_ids) for update in updates))
        if not batch.rows:
            self._finished = GenerationStats.merge(self._finished, self.period)
            self._sync_stats()
            if self._on_idle is not None:
                self._on_idle(self.period, self.period_batch)
        return updates

    def _sync_stats(self) -> None:
        """``stats`` (one object for the session's life: callers may hold it) = earlier periods + this one."""
        merged = GenerationStats.merge(self._finished, self.period) if self.batch.rows else self._finished
        self.stats.__dict__.update(GenerationStats.merge(merged).__dict__)

    def _count(self, calls: int, target_seconds: float, seconds: float, rows: int = 0, tokens: int = 0) -> None:
        p = self.period
        p.target_calls += calls
        p.target_seconds += target_seconds
        p.draft_calls = self.drafter.calls - self._draft_totals[0]
        p.draft_seconds = self.drafter.seconds - self._draft_totals[1]
        p.seconds += seconds
        p.rows += rows
        p.new_tokens += tokens
        if rows:
            for name in _REUSE_COUNTS:
                setattr(p, name, getattr(p, name) + getattr(self.last_admit, name))
        self._sync_stats()
