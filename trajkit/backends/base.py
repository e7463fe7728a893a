"""The backend protocol: token ids in; token ids, log-probs under the sampling distribution, finish reason
and the weight version out.

A backend generates with the weights it was last given (``update_weights``, which returns the new
``policy_version``); every :class:`~trajkit.engine.types.Completions` it returns carries the version that
sampled it. ``Completion.logprobs[i]`` is ``log p(token_ids[i])`` under the distribution the token was
drawn from (temperature applied), the quantity the trainer's mismatch metrics and TIS compare with the
policy's recomputed log-probs. Stop tokens end a row and are its last token; nothing else stops a row
(not the model's own EOS unless it is a stop id), so backends given the same ids and params agree on
where rows end.

Each backend declares what it guarantees (:class:`Guarantees`); the conformance suite
(tests/backends/) holds it to exactly that. An approximate backend (vLLM: another kernel stack, batch-
dependent numerics) is kept honest in training by ``mismatch/*`` and ``loss.tis``.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, Sequence, runtime_checkable

from trajkit.engine.params import SamplingParams
from trajkit.engine.types import Completions


@dataclass(frozen=True)
class Guarantees:
    """What a backend promises about its outputs.

    ``exact_logprobs``: log-probs equal an independent float32 forward at the sampling temperature to
    ``logprob_atol`` (float rounding only) on the tokens it sampled. ``deterministic``: the same weights,
    prompts and seeded params give the same tokens, whatever else shares the batch. ``logprob_atol``: the
    largest |backend logp - fp32 forward logp| the conformance suite accepts on any token.
    ``sessions``: the backend has ``session()``, a step-wise batch that rows join and leave between decode
    steps (the gateway's continuous batching of its sessions' requests, :mod:`trajkit.gateway.scheduler`).
    Without it the gateway batches whole ``generate`` calls instead (a request that arrives during a call
    waits for it) and says so (``Gateway.degraded``). ``prefix_reuse``: how repeated prompt prefixes are
    served: ``exact`` (trajkit's prefix cache: the same KV states, the same tokens), ``backend`` (the
    backend's own cache, e.g. vLLM's automatic prefix caching) or ``none``."""

    exact_logprobs: bool
    deterministic: bool
    logprob_atol: float
    sessions: bool = False
    prefix_reuse: str = "none"


@runtime_checkable
class Backend(Protocol):
    name: str
    guarantees: Guarantees
    vocab_size: int
    num_params: int  # the model's parameter count (the trainer's prefill-FLOPs metric)

    @property
    def policy_version(self) -> int:
        """The version of the weights the next ``generate`` samples from (0 = as built)."""

    def generate(self, prompt_ids: list[list[int]],
                 params: SamplingParams | Sequence[SamplingParams] | None = None) -> Completions:
        """One completion per prompt (one ``SamplingParams`` for all rows, or one per row)."""

    def update_weights(self, state_dict: dict) -> int:
        """Load new policy weights (HF parameter names); the new ``policy_version``."""

    def stats(self) -> dict:
        """Counters since the backend was built (calls, tokens, seconds, weight updates)."""

    def close(self) -> None:
        """Release the backend's workers (a no-op for in-process backends)."""
