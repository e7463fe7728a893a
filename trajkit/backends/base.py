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

Each backend also declares which optional parts it has (:class:`Capabilities`), and the facts a server over
it needs (``context_window``, ``generation_config``, ``engine``). Callers read the declaration
(``backend.capabilities.sessions``) and call a guarded method only where it is declared; none probes for a
method with ``getattr``/``hasattr`` (``tests/backends/test_capabilities.py`` scans the package for such
probes outside this seam). A wrapper (a counting client's view, a test's stand-in) declares what it has,
usually its inner backend's capabilities with some switched off (:func:`dataclasses.replace`).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol, Sequence, runtime_checkable

from trajkit.engine.params import SamplingParams
from trajkit.engine.types import Completions
from trajkit.errors import ConfigError


@dataclass(frozen=True)
class Guarantees:
    """What a backend promises about its outputs.

    ``exact_logprobs``: log-probs equal an independent float32 forward at the sampling temperature to
    ``logprob_atol`` (float rounding only) on the tokens it sampled. ``deterministic``: the same weights,
    prompts and seeded params give the same tokens, whatever else shares the batch. ``logprob_atol``: the
    largest |backend logp - fp32 forward logp| the conformance suite accepts on any token.
    ``prefix_reuse``: how repeated prompt prefixes are served: ``exact`` (trajkit's prefix cache: the same
    KV states, the same tokens), ``backend`` (the backend's own cache, e.g. vLLM's automatic prefix caching)
    or ``none``."""

    exact_logprobs: bool
    deterministic: bool
    logprob_atol: float
    prefix_reuse: str = "none"


@dataclass(frozen=True)
class Capabilities:
    """The optional parts of a backend, each a flag that guards the methods it names; a caller reads the flag
    and calls the methods only where it is set.

    ``sessions``: ``session()``, a step-wise batch that rows join and leave between decode steps (the
    gateway's continuous batching, :mod:`trajkit.gateway.scheduler`); without it the gateway batches whole
    ``generate`` calls (a request that arrives during a call waits for it) and says so (``Gateway.degraded``).
    ``prefix_cache``: trajkit's exact prefix cache, ``set_prefix_cache(budget_tokens)`` (-> the cache or None)
    and the ``prefix_cache`` attribute (the gateway's ``/metrics``). ``adapters``: ``update_adapter(adapter)``,
    an adapter-only weight sync (a LoRA policy). ``draft``: ``update_draft(state_dict)``, a trained draft's
    weights into the backend's own drafter (vLLM's ``draft_model``). ``token_logprobs``:
    ``token_logprobs(prompt_ids, completion_ids, params)``, scoring given tokens. ``episodes``:
    ``episodes(rows, params, round_no, timeout_s)`` and ``set_task(task)``: the backend runs an environment
    that serves generation where it generates (Ray rollout workers, :mod:`trajkit.cluster.split`).
    ``serves``: ``serves(tags)``, told whose rows the next call computes (a counting view,
    :class:`trajkit.envs.client.ServedBackend`). ``actor``: the model runs in a Ray actor, ``actor`` (its
    handle) and ``weights_arrived()`` (a sync that reached it by vLLM's own transfer, NCCL).

    >>> Capabilities(sessions=True).sessions, Capabilities().adapters
    (True, False)
    """

    sessions: bool = False
    prefix_cache: bool = False
    adapters: bool = False
    draft: bool = False
    token_logprobs: bool = False
    episodes: bool = False
    serves: bool = False
    actor: bool = False


# each capability -> the members it guards (what a caller may use only where the flag is set)
GUARDED: dict[str, tuple[str, ...]] = {
    "sessions": ("session",), "prefix_cache": ("set_prefix_cache", "prefix_cache"), "adapters": ("update_adapter",),
    "draft": ("update_draft",), "token_logprobs": ("token_logprobs",), "episodes": ("episodes", "set_task"),
    "serves": ("serves",), "actor": ("actor", "weights_arrived"),
}


@runtime_checkable
class Backend(Protocol):
    name: str
    guarantees: Guarantees
    capabilities: Capabilities
    vocab_size: int
    num_params: int  # the model's parameter count (the trainer's prefill-FLOPs metric)
    context_window: int | None  # prompt + completion tokens the model takes (None: not known)
    generation_config: Any  # the model's HF GenerationConfig (its EOS ids: the gateway's stop plan), or None
    engine: Any  # trajkit's in-process Engine when the backend is one, else None

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


def is_backend(obj) -> bool:
    """Whether ``obj`` declares itself a backend (it carries :class:`Capabilities`)."""
    return isinstance(getattr(obj, "capabilities", None), Capabilities)
