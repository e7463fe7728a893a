"""The rows of one generate call that are still being sampled, and everything indexed by them.

``ActiveBatch`` is the single owner of per-row state shared by the plain and the speculative sampler:

- every row's sequence (prompt + generated), logprobs, budget, stop tokens, finish reason and draft
  counters, by original row id; ``rows`` lists the ids still active, in batch order;
- the active rows' warping parameters as tensors ``[B]`` (temperature, top-k, top-p; see
  :mod:`trajkit.engine.warp`) and their random streams (:mod:`trajkit.engine.rng`);
- ``last: [B]``, each active row's last token on the device (what the target is fed next);
- its *followers*: objects indexed by batch position that must lose the same rows (the target's
  ``KVState``, the drafter), each with ``retain(keep: [B'])``.

Samplers hand it the tokens each active row produced in a step; ``emit`` cuts them at the row's budget or
first stop token and records the finish reason; ``drop`` then removes the finished rows from every
batch-indexed thing at once: its own tensors, ``last`` and every follower.
"""
from __future__ import annotations

from typing import Callable, Protocol, Sequence

import torch

from trajkit.engine.host import to_device
from trajkit.engine.params import SamplingParams
from trajkit.engine.rng import RowStreams
from trajkit.engine.stoptext import Decode, StopText
from trajkit.engine.types import Completion
from trajkit.engine.warp import row_params, warp_probs
from trajkit.errors import ConfigError, ModelError


class Follower(Protocol):
    """Anything indexed by batch position that drops rows with the batch (``KVState``, a ``Drafter``)."""

    def retain(self, keep: torch.Tensor) -> None:
        """Keep only batch positions ``keep: [B']``."""


class ActiveBatch:
    """Rows, sampling parameters, streams and budgets of one generate call; see the module docstring.

    ``shared``: one ``SamplingParams`` for the whole call (rows are numbered 0..B-1 in the streams) rather
    than one per row (each row its own request, index 0). ``decode``: the tokenizer's, for rows with
    ``stop_strings`` (:mod:`trajkit.engine.stoptext`)."""

    def __init__(self, prompts: list[list[int]], params: list[SamplingParams], shared: bool, device,
                 followers: Sequence[Follower] = (), decode: Decode | None = None):
        assert len(prompts) == len(params)
        self.decode = decode
        self.params = list(params)
        self.seqs = [list(p) for p in prompts]
        self.generated: list[list[int]] = [[] for _ in prompts]
        self.logprobs: list[list[float]] = [[] for _ in prompts]
        self.tops: list[list[list[tuple[int, float]]]] = [[] for _ in prompts]  # rows with top_logprobs > 0
        self.budget = [p.max_new_tokens for p in params]
        self.stops = [frozenset(p.stop_token_ids) for p in params]
        self.texts = [self._stop_text(p) for p in params]
        self.finish: list[str | None] = [None] * len(prompts)
        self.proposed = [0] * len(prompts)
        self.accepted = [0] * len(prompts)
        self.cached = [0] * len(prompts)  # prompt tokens served by the prefix cache, per row
        self.rows = list(range(len(prompts)))
        self.device = device
        self._set_warping(self.params)
        indices = list(range(len(params))) if shared else [0] * len(params)
        self.streams = RowStreams([p.seed for p in params], indices, device)
        self.last: torch.Tensor | None = None  # [B] long, set by the sampler
        self.followers = list(followers)
        # told the batch positions of the rows about to leave, before anything is removed (the prefix
        # cache stores their states: trajkit.engine.prefix.Reuse.attach)
        self.on_finish: Callable[[list[int]], None] | None = None

    def admit(self, prompts: list[list[int]], params: list[SamplingParams]) -> list[int]:
        """Add rows (each its own request: stream index 0) after the active ones; returns their row ids.
        The caller merges their state into every follower (:meth:`trajkit.engine.kvstate.KVState.admit`)."""
        assert len(prompts) == len(params)
        new = list(range(len(self.seqs), len(self.seqs) + len(prompts)))
        self.params += params
        self.seqs += [list(p) for p in prompts]
        self.generated += [[] for _ in prompts]
        self.logprobs += [[] for _ in prompts]
        self.tops += [[] for _ in prompts]
        self.budget += [p.max_new_tokens for p in params]
        self.stops += [frozenset(p.stop_token_ids) for p in params]
        self.texts += [self._stop_text(p) for p in params]
        self.finish += [None] * len(prompts)
        self.proposed += [0] * len(prompts)
        self.accepted += [0] * len(prompts)
        self.cached += [0] * len(prompts)
        self.streams.add([p.seed for p in params], [0] * len(params))
        self.rows += new
        self._set_warping([self.params[r] for r in self.rows])
        self.last = None
        return new

    def _stop_text(self, p: SamplingParams) -> StopText | None:
        if not p.stop_strings:
            return None
        if self.decode is None:
            raise ConfigError("stop_strings need the tokenizer's decode: build the Engine with decode=tokenizer.decode")
        return StopText(p.stop_strings, self.decode)

    def _set_warping(self, active: list[SamplingParams]) -> None:
        """The warping tensors ``[B]`` and flags of the active rows' parameters (batch order)."""
        self.temperature, self.top_k, self.top_p = row_params(
            [p.temperature for p in active], [p.top_k for p in active], [p.top_p for p in active], self.device)
        self.filtered = any(p.top_k > 0 or p.top_p < 1.0 for p in active)
        self.any_greedy = any(p.greedy for p in active)
        self._repeated: dict[int, tuple] = {}  # t -> warping parameters repeated t times (cache)

    def completion(self, r: int) -> Completion:
        """Row ``r``'s record so far (``finish_reason`` "length" while it is unfinished)."""
        return Completion(token_ids=self.generated[r], logprobs=self.logprobs[r],
                          finish_reason=self.finish[r] or "length", draft_proposed=self.proposed[r],
                          draft_accepted=self.accepted[r], cached_tokens=self.cached[r],
                          top_logprobs=self.tops[r] if self.params[r].top_logprobs else None)

    def release(self, r: int) -> None:
        """Forget finished row ``r``'s sequences (a long-lived session keeps only its active rows' data)."""
        assert r not in self.rows, r
        self.seqs[r], self.generated[r], self.logprobs[r], self.tops[r] = [], [], [], []
        self.streams.generators[r] = None

    # --- per-step inputs -------------------------------------------------------------------------
    def active_seqs(self) -> list[list[int]]:
        return [self.seqs[r] for r in self.rows]

    def remaining(self) -> list[int]:
        """Tokens each active row may still generate, in batch order."""
        return [self.budget[r] - len(self.generated[r]) for r in self.rows]

    def top_count(self) -> int:
        """The largest ``top_logprobs`` among the active rows (0: nobody asked; skip the top-k)."""
        return max((self.params[r].top_logprobs for r in self.rows), default=0)

    def uniforms(self, n: int) -> torch.Tensor:
        """``[B, n]`` float64 uniforms, ``n`` from each active row's own stream."""
        return self.streams.uniform(self.rows, n)

    def probs(self, logits: torch.Tensor) -> torch.Tensor:
        """``logits: [B, T, V]`` -> post-warping ``probs: [B, T, V]`` (row b's parameters on all T)."""
        b, t, v = logits.shape
        assert b == self.temperature.shape[0], (logits.shape, self.temperature.shape)
        if t == 1:
            return warp_probs(logits[:, 0], self.temperature, self.top_k, self.top_p,
                              filtered=self.filtered, any_greedy=self.any_greedy).unsqueeze(1)
        if t not in self._repeated:
            self._repeated[t] = tuple(x.repeat_interleave(t) for x in (self.temperature, self.top_k, self.top_p))
        flat = warp_probs(logits.reshape(b * t, v), *self._repeated[t], filtered=self.filtered,
                          any_greedy=self.any_greedy)
        return flat.view(b, t, v)

    def warp(self, logits: torch.Tensor) -> torch.Tensor:
        """Drafter logits ``[B, V]`` -> probs ``[B, V]`` with each active row's own parameters."""
        return self.probs(logits.unsqueeze(1))[:, 0]

    # --- per-step outputs ------------------------------------------------------------------------
    def count_drafts(self, proposed: list[int], accepted: list[int]) -> None:
        """Add one round's drafts sent / accepted per active row (batch order) to the rows' counters."""
        for r, n, m in zip(self.rows, proposed, accepted):
            self.proposed[r] += n
            self.accepted[r] += m

    def emit(self, tokens: list[list[int]], logprobs: list[list[float]],
             tops: tuple[list, list] | None = None) -> list[bool]:
        """Append each active row's new tokens (batch order); returns which rows finished. ``tops``: per row
        and new token, the top-k (log p, id) lists of :meth:`top_count` entries (when it is > 0)."""
        assert len(tokens) == len(logprobs) == len(self.rows)
        done = []
        for b, (r, toks, lps) in enumerate(zip(self.rows, tokens, logprobs)):
            room = self.budget[r] - len(self.generated[r])
            toks, lps = toks[:room], lps[:room]
            stop_at = next((j for j, t in enumerate(toks) if t in self.stops[r]), None)
            if self.texts[r] is not None:  # a stop string completed before the stop id wins
                text_at = self.texts[r].first_stop(self.generated[r], toks[:len(toks) if stop_at is None else stop_at])
                stop_at = text_at if text_at is not None else stop_at
            if stop_at is not None:
                toks, lps = toks[:stop_at + 1], lps[:stop_at + 1]
                self.finish[r] = "stop"
            elif len(self.generated[r]) + len(toks) >= self.budget[r]:
                self.finish[r] = "length"
            self.generated[r].extend(toks)
            self.seqs[r].extend(toks)
            self.logprobs[r].extend(lps)
            if tops is not None and self.params[r].top_logprobs:
                k = self.params[r].top_logprobs
                self.tops[r].extend([(t, v) for t, v in zip(ids[:k], vals[:k]) if v != float("-inf")]
                                    for vals, ids in zip(tops[0][b][:len(toks)], tops[1][b][:len(toks)]))
            done.append(self.finish[r] is not None)
        return done

    def check_finite(self, bad: list, usable: list[int] | None = None) -> None:
        """Raise :class:`ModelError` for the first active row whose logits were not finite. ``bad``: per
        row, a flag or one flag per scored position; ``usable``: positions counted per row (all if None)."""
        for i, (r, flags) in enumerate(zip(self.rows, bad)):
            flags = flags if isinstance(flags, list) else [flags]
            upto = len(flags) if usable is None else usable[i]
            hit = next((j for j, f in enumerate(flags[:upto]) if f), None)
            if hit is not None:
                raise ModelError(f"the model produced NaN/inf logits at row {r}, step {len(self.generated[r]) + hit}"
                                 " (check its weights and dtype)")

    def drop(self, done: list[bool]) -> None:
        """Remove the finished rows from the batch, its tensors, ``last`` and every follower. Once no row
        is left the call is over, and followers are left as they are."""
        assert len(done) == len(self.rows)
        if not any(done):
            return
        if self.on_finish is not None:
            self.on_finish([i for i, d in enumerate(done) if d])
        keep_list = [i for i, d in enumerate(done) if not d]
        self.rows = [self.rows[i] for i in keep_list]
        if not self.rows:
            return
        keep = to_device(keep_list, self.device)
        self.temperature, self.top_k, self.top_p = self.temperature[keep], self.top_k[keep], self.top_p[keep]
        self._repeated = {}
        if self.last is not None:
            self.last = self.last[keep]
        for follower in self.followers:
            follower.retain(keep)

    def completions(self) -> list[Completion]:
        return [self.completion(r) for r in range(len(self.seqs))]

    @property
    def new_tokens(self) -> int:
        return sum(map(len, self.generated))
