"""Stitching a session's calls into trainable token sequences, by token-prefix matching only.

Calls are taken in order. For each choice of a call with prompt ``P`` and sampled ids ``S``, the open chain
whose token sequence ``T`` (its prompt, then everything appended) is the LONGEST prefix of ``P`` is extended
by ``P[len(T):]`` as *forced* tokens (loss mask 0, logprob 0.0: template glue, tool results, user turns),
then ``S`` as *sampled* tokens (mask 1, the engine's logprobs). When no chain's sequence is a prefix of
``P`` (the first call, a harness that edited or summarised its history, a template that rewrites earlier
turns such as a Qwen3-style one dropping old reasoning), a NEW chain starts with prompt ``P``: the chain
forks instead of guessing an alignment. A chain that a call extends is replaced by its extension (one per
choice when ``n > 1``), so a chain never survives beside its own continuation.

Worked example (byte-free ids for brevity)::

    call 0: P=[1, 2]          S=[7, 8]      -> chain A: prompt [1, 2], completion [7, 8], mask [1, 1]
    call 1: P=[1, 2, 7, 8, 3] S=[9]         -> chain A: completion [7, 8, 3, 9], mask [1, 1, 0, 1]
    call 2: P=[1, 5]          S=[6]         -> [1, 2, 7, 8, 3, 9] is not a prefix of P: chain B, prompt [1, 5]

Each sampled token keeps the ``policy_version`` of its call (``Chain.versions_of_tokens``, -1 on forced
tokens): had call 0 run under version 3 and call 1 under 4 (an asynchronous trainer's push between two
turns), chain A's tokens carry ``[3, 3, -1, 4]``, what the agent environment records as
``Sample.token_versions``.

Nothing is decoded or re-tokenised: the only input is ids. ``fork_at`` on a chain that began while another
existed records the call, the token where its prompt first differs from the closest existing chain, and a
``reason``: the ``history_not_reproducible`` diagnostic the gateway gave that chain's last reply when it
knew the reply would not render back (:mod:`~trajkit.gateway.parse`), else a generic one.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from trajkit.gateway.sessions import CallRecord


@dataclass
class Chain:
    """One stitched trajectory. ``calls``: (call index, choice index) per sampled span, in order."""

    prompt_ids: list[int]
    completion_ids: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    loss_mask: list[int] = field(default_factory=list)
    calls: list[tuple[int, int]] = field(default_factory=list)
    policy_versions: list[int] = field(default_factory=list)
    fork_at: dict[str, int] | None = None
    token_versions: list[int] | None = None  # per completion token: its call's version, -1 forced (None: all one)

    def versions_of_tokens(self) -> list[int]:
        """The version that sampled each completion token (-1: forced), as ``Sample.token_versions``."""
        if self.token_versions is not None:
            return list(self.token_versions)
        return [self.policy_versions[0] if m else -1 for m in self.loss_mask]

    @property
    def ids(self) -> list[int]:
        return self.prompt_ids + self.completion_ids

    @property
    def policy_version(self) -> int:
        """The one version that sampled every span, else -1 (the spans' versions are in ``policy_versions``)."""
        return self.policy_versions[0] if len(set(self.policy_versions)) == 1 else -1

    def extended(self, forced: list[int], sampled: list[int], logprobs: list[float], call: tuple[int, int],
                 version: int) -> Chain:
        return Chain(self.prompt_ids, self.completion_ids + forced + sampled,
                     self.logprobs + [0.0] * len(forced) + list(logprobs),
                     self.loss_mask + [0] * len(forced) + [1] * len(sampled),
                     self.calls + [call], self.policy_versions + [version], self.fork_at,
                     self.versions_of_tokens() + [-1] * len(forced) + [version] * len(sampled))

    def as_sample_dict(self, session: str) -> dict[str, Any]:
        """The fields of :class:`trajkit.envs.sample.Sample` (``metadata`` holds the provenance)."""
        return {"prompt_ids": self.prompt_ids, "completion_ids": self.completion_ids, "logprobs": self.logprobs,
                "loss_mask": self.loss_mask, "policy_version": self.policy_version,
                "metadata": {"session": session, "calls": [list(c) for c in self.calls],
                             "policy_versions": self.policy_versions, "fork_at": self.fork_at}}


def _is_prefix(a: list[int], b: list[int]) -> bool:
    return len(a) <= len(b) and b[:len(a)] == a


def _common(a: list[int], b: list[int]) -> int:
    n = min(len(a), len(b))
    return next((i for i in range(n) if a[i] != b[i]), n)


def _fork(chains: list[Chain], prompt: list[int], call: int, records: dict[int, CallRecord]) -> dict[str, Any]:
    """Where a new chain leaves the closest one, and why when the gateway knew at the time: the
    ``history_not_reproducible`` diagnostic of that chain's last reply (:mod:`~trajkit.gateway.parse`)."""
    closest = max(chains, key=lambda c: _common(c.ids, prompt))
    out: dict[str, Any] = {"call": call, "token": _common(closest.ids, prompt)}
    last, k = closest.calls[-1]
    message = records[last].choices[k].message if last in records else None
    reasons = [d["detail"] for d in (message or {}).get("trajkit_diagnostics", [])
               if d.get("code") == "history_not_reproducible"]
    out["reason"] = reasons[0] if reasons else ("the prompt does not extend the chain's tokens (the harness "
                                                "changed its history, or the template rendered it otherwise)")
    return out


def stitch(records: list[CallRecord]) -> list[Chain]:
    """The session's chains (see the module docstring), in the order they were started."""
    chains: list[Chain] = []
    by_index = {r.index: r for r in records}
    for rec in records:
        prompt = rec.prompt_ids
        base = max((c for c in chains if _is_prefix(c.ids, prompt)), key=lambda c: len(c.ids), default=None)
        new = []
        for k, choice in enumerate(rec.choices):
            if base is not None:
                new.append(base.extended(prompt[len(base.ids):], choice.token_ids, choice.logprobs,
                                         (rec.index, k), rec.policy_version))
            else:
                fork = _fork(chains, prompt, rec.index, by_index) if chains else None
                new.append(Chain(list(prompt), list(choice.token_ids), list(choice.logprobs),
                                 [1] * len(choice.token_ids), [(rec.index, k)], [rec.policy_version], fork))
        if base is not None:
            at = next(i for i, c in enumerate(chains) if c is base)
            chains[at:at + 1] = new
        else:
            chains.extend(new)
    return chains
