"""The rollout ``Sample``: what one episode hands the trainer, token-exact.

Worked example: a single-turn arithmetic prompt ``"2+3="`` (bytes 50 43 51 61 in the byte vocabulary)
answered ``"5"`` then the end-of-turn token 258, both sampled by the policy, in group 0 of a step whose
rollouts used policy version 3::

    >>> s = Sample(prompt_ids=[50, 43, 51, 61], completion_ids=[53, 258],
    ...            logprobs=[-0.22, -0.05], loss_mask=[1, 1], group=0, policy_version=3,
    ...            metadata={"answer": "5"})
    >>> validate_sample(s)
    >>> s.num_model_tokens
    2

A tool-use episode interleaves sampled and forced tokens in ``completion_ids``: the environment's
``<tool_response>`` text (and the chat-template glue around it) is *forced*, so its ``loss_mask`` is 0 and
its ``logprobs`` entry is 0.0 (not sampled; never used by a loss)::

    >>> s = Sample([1, 2], [7, 8, 9, 10], [-0.5, 0.0, 0.0, -0.1], [1, 0, 0, 1])
    >>> validate_sample(s); s.num_model_tokens
    2

``logprobs[i]`` is the engine's log-probability of ``completion_ids[i]`` under the distribution it was
sampled from (the rollout policy after temperature); the trainer recomputes the policy's own log-probs
and compares them (:mod:`trajkit.rl.mismatch`).

Provenance is typed: ``group`` (which prompt of the step; -1 before grouping), ``policy_version`` (the
engine weights that sampled it; -1 when unknown), and once scored ``raw_reward``, ``reward`` (after length
shaping) and ``advantage``. ``metadata`` keeps what a task adds (the expected ``answer``,
``finish_reason``, acceptance counters, a tool episode's messages). ``token_versions`` (optional): the
policy version that sampled each completion token (-1 for forced ones); an asynchronous run's episode can
span several (:attr:`Sample.version_span`)::

    >>> s = Sample([1], [7, 8, 9], [-0.5, 0.0, -0.1], [1, 0, 1], policy_version=4, token_versions=[4, -1, 5])
    >>> validate_sample(s); s.version_span
    (4, 5)
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from trajkit.errors import InputError


@dataclass
class Sample:
    """One rollout. ``loss_mask[i]``: 1 = sampled by the policy (trained), 0 = forced (tool output, glue)."""

    prompt_ids: list[int]
    completion_ids: list[int]
    logprobs: list[float]
    loss_mask: list[int]
    metadata: dict[str, Any] = field(default_factory=dict)
    group: int = -1
    policy_version: int = -1
    raw_reward: float | None = None
    reward: float | None = None
    advantage: float | None = None
    token_versions: list[int] | None = None

    @property
    def version_span(self) -> tuple[int, int]:
        """(oldest, newest) policy version among the sampled tokens (``policy_version`` twice when the
        per-token versions are unknown)."""
        sampled = [v for v, m in zip(self.token_versions or [], self.loss_mask) if m]
        return (min(sampled), max(sampled)) if sampled else (self.policy_version, self.policy_version)

    @property
    def num_model_tokens(self) -> int:
        """Tokens the policy sampled (the length that length shaping counts)."""
        return int(sum(self.loss_mask))

    @property
    def ids(self) -> list[int]:
        return self.prompt_ids + self.completion_ids


def validate_sample(s: Sample, index: int | None = None) -> None:
    """Raise :class:`InputError` (naming the field) when ``s`` breaks the record's invariants."""
    n = len(s.completion_ids)
    if not s.prompt_ids:
        raise InputError("empty prompt", row=index, field="prompt_ids")
    for name in ("logprobs", "loss_mask"):
        if len(getattr(s, name)) != n:
            raise InputError(f"{len(getattr(s, name))} entries for {n} completion tokens", row=index, field=name)
    if any(m not in (0, 1) for m in s.loss_mask):
        raise InputError("loss_mask entries must be 0 or 1", row=index, field="loss_mask")
    for lp, m in zip(s.logprobs, s.loss_mask):
        if math.isnan(lp) or lp > 0.0:
            raise InputError(f"logprob {lp} is not <= 0", row=index, field="logprobs")
        if m == 0 and lp != 0.0:
            raise InputError("forced tokens (loss_mask 0) must carry logprob 0.0", row=index, field="logprobs")
    if s.token_versions is not None:
        if len(s.token_versions) != n:
            raise InputError(f"{len(s.token_versions)} entries for {n} completion tokens", row=index,
                             field="token_versions")
        if any((v < 0) == bool(m) for v, m in zip(s.token_versions, s.loss_mask)):
            raise InputError("sampled tokens carry a version >= 0, forced ones -1", row=index, field="token_versions")
    if any(t < 0 for t in s.prompt_ids + s.completion_ids):
        raise InputError("token ids must be >= 0", row=index, field="completion_ids")
    for name in ("raw_reward", "reward", "advantage"):
        value = getattr(s, name)
        if value is not None and not math.isfinite(value):
            raise InputError(f"{name} {value} is not finite", row=index, field=name)
