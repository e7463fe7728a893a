"""What a generate call returns: one ``Completion`` per row, plus ``GenerationStats`` for the call.

Worked example (a row that stopped on token 257 after two sampled tokens)::

    >>> c = Completion(token_ids=[104, 257], logprobs=[-0.11, -2.3], finish_reason="stop")
    >>> validate_completion(c)

``logprobs[i]`` is ``log p(token_ids[i])`` under the *target's* post-warping distribution at that
position (temperature, top-k and top-p applied): exactly the distribution the plain sampler draws from,
and the marginal distribution of the speculative sampler's token (that is what lossless means). Under
greedy decoding that distribution is a point mass, so every logprob is 0.0; use
``Engine.token_logprobs`` for the raw model's logprobs.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Literal

from trajkit.errors import InputError

FinishReason = Literal["stop", "length"]


@dataclass
class Completion:
    """One row's generated tokens; the stop token, when there is one, is the last of ``token_ids``."""

    token_ids: list[int]
    logprobs: list[float]
    finish_reason: FinishReason
    draft_proposed: int = 0  # draft tokens verified for this row
    draft_accepted: int = 0  # of which accepted
    cached_tokens: int = 0  # prompt tokens whose states came from the prefix cache (not prefilled again)
    # SamplingParams.top_logprobs > 0: per token, the most likely (id, log p) of the distribution it was
    # sampled from, most likely first (tokens a top-k/top-p filter removed are left out)
    top_logprobs: list[list[tuple[int, float]]] | None = None


def validate_completion(c: Completion) -> None:
    """Raise InputError when ``c`` breaks the record's invariants."""
    if len(c.token_ids) != len(c.logprobs):
        raise InputError(f"{len(c.token_ids)} token ids but {len(c.logprobs)} logprobs", field="logprobs")
    if c.finish_reason not in ("stop", "length"):
        raise InputError(f"unknown finish_reason {c.finish_reason!r}", field="finish_reason")
    if any(not (lp <= 0.0) or math.isnan(lp) for lp in c.logprobs):
        raise InputError("logprobs must be <= 0", field="logprobs")
    if c.top_logprobs is not None and len(c.top_logprobs) != len(c.token_ids):
        raise InputError(f"{len(c.token_ids)} token ids but {len(c.top_logprobs)} top_logprobs entries",
                         field="top_logprobs")
    if not 0 <= c.draft_accepted <= c.draft_proposed:
        raise InputError("need 0 <= draft_accepted <= draft_proposed", field="draft_accepted")


@dataclass
class GenerationStats:
    """Counters of one generate call (or, after :meth:`merge`, of several); derived rates are properties
    (and in ``to_dict``), so they are always computed from the counters.

    ``target_seconds`` / ``draft_seconds`` are host time spent in forward passes. On a GPU that is launch
    time unless ``EngineConfig(sync_timing=True)`` makes each forward wait for the device."""

    num_draft_tokens: int = 0  # k used (0 = plain decoding)
    rows: int = 0
    new_tokens: int = 0
    target_calls: int = 0  # target forward passes, prefill included
    draft_calls: int = 0
    row_steps: int = 0  # (row, verification step) pairs
    step_tokens: int = 0  # tokens emitted by verification steps (all but each row's first token)
    proposed: int = 0  # draft tokens sent to the target (all k of a round, also those after a rejection)
    accepted: int = 0
    position_tried: list[int] = field(default_factory=list)  # [k]: drafts that reached position i
    position_accepted: list[int] = field(default_factory=list)  # [k]
    overlap_sum: float = 0.0  # sum over reached draft positions of sum_v min(p, q)
    seconds: float = 0.0
    target_seconds: float = 0.0
    draft_seconds: float = 0.0
    # prefill reuse (trajkit.engine.prefix): prompt tokens of the prefilled rows, of which served from the
    # prefix cache, copied from an identical prompt of the same batch, and actually computed
    prompt_tokens: int = 0
    prefix_hit_tokens: int = 0
    shared_prompt_tokens: int = 0
    prefill_tokens: int = 0

    @classmethod
    def merge(cls, *parts: GenerationStats) -> GenerationStats:
        """The stats of several calls as one: every counter summed, per-position lists summed position
        by position (a shorter list counts 0 past its end), ``num_draft_tokens`` the largest k used."""
        out = cls()
        for s in parts:
            out.num_draft_tokens = max(out.num_draft_tokens, s.num_draft_tokens)
            for name in _SUMMED:
                setattr(out, name, getattr(out, name) + getattr(s, name))
            out.position_tried = _add_lists(out.position_tried, s.position_tried)
            out.position_accepted = _add_lists(out.position_accepted, s.position_accepted)
        return out

    def add_round(self, lengths: list[int], accepted: list[int], overlap: list[list[float]]) -> None:
        """Count one verification round; per row: drafts sent, drafts accepted, and ``sum_v min(p, q)``
        per draft position. A draft position is *tried* when every earlier draft was accepted."""
        for length, n, row_overlap in zip(lengths, accepted, overlap):
            for i in range(min(length, n + 1)):
                self.position_tried[i] += 1
                self.overlap_sum += row_overlap[i]
            for i in range(n):
                self.position_accepted[i] += 1
            self.proposed += length
            self.accepted += n
            self.step_tokens += n + 1
            self.row_steps += 1

    @property
    def acceptance_rate(self) -> float:
        return self.accepted / self.proposed if self.proposed else 0.0

    @property
    def mean_acceptance_length(self) -> float:
        """Tokens emitted per row per target verification (1 + accepted drafts; 1 for plain decoding)."""
        return self.step_tokens / self.row_steps if self.row_steps else 0.0

    @property
    def per_position_acceptance(self) -> list[float]:
        """P(draft i accepted | drafts 1..i-1 accepted), i = 1..k."""
        return [a / t if t else 0.0 for a, t in zip(self.position_accepted, self.position_tried)]

    @property
    def alpha(self) -> float:
        """Expected acceptance per draft token, E[sum_v min(p, q)] = 1 - TV(p, q) (Leviathan et al.)."""
        tried = sum(self.position_tried)
        return self.overlap_sum / tried if tried else 0.0

    @property
    def tokens_per_second(self) -> float:
        return self.new_tokens / self.seconds if self.seconds else 0.0

    @property
    def target_calls_per_token(self) -> float:
        return self.target_calls / self.new_tokens if self.new_tokens else 0.0

    def to_dict(self) -> dict:
        out = asdict(self)
        for name in ("acceptance_rate", "mean_acceptance_length", "per_position_acceptance", "alpha",
                     "tokens_per_second", "target_calls_per_token"):
            out[name] = getattr(self, name)
        return out


_SUMMED = ("rows", "new_tokens", "target_calls", "draft_calls", "row_steps", "step_tokens", "proposed",
           "accepted", "overlap_sum", "seconds", "target_seconds", "draft_seconds", "prompt_tokens",
           "prefix_hit_tokens", "shared_prompt_tokens", "prefill_tokens")


def _add_lists(a: list, b: list) -> list:
    """Element-wise sum of two lists of possibly different lengths (missing entries count 0)."""
    n = max(len(a), len(b))
    return [(a[i] if i < len(a) else 0) + (b[i] if i < len(b) else 0) for i in range(n)]


class Completions(list):
    """``list[Completion]`` that also carries the call's ``stats: GenerationStats`` and the
    ``policy_version`` of the weights that sampled it (-1: unknown)."""

    def __init__(self, items, stats: GenerationStats, policy_version: int = -1):
        super().__init__(items)
        self.stats = stats
        self.policy_version = policy_version
