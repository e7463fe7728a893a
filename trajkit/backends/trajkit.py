"""trajkit's own engine as a backend: the exact reference and the default.

:class:`TrajkitBackend` is :class:`trajkit.engine.Engine` behind the backend protocol. Its log-probs are
the engine's (post-temperature, float32 on CPU: equal to a full forward up to float rounding) and a
seeded row's tokens depend only on its own seed, prompt and index (:mod:`trajkit.engine.rng`), up to the
floating-point differences that module names: which rows share a batch and which cached prefix a call
reuses (computed in another batch) depend on when the calls arrive and change a log-prob by ~1e-5, now and
then enough to flip a sampled token at a near-tie, so two runs of one config can sample differently; a gateway
serving every row alone without the cache (``task.KIND.gateway_max_batch=1 gateway_prefix_cache=false``)
gives the same bits whatever else runs (docs/rl_after_sft.md, rounds 14, 16 and 17). It declares every
in-process part (:class:`~trajkit.backends.base.Capabilities`): ``session()`` for the gateway's
continuous batching, the exact prefix cache, adapter-only syncs and ``token_logprobs``; ``engine`` and
``model`` are the engine and its model.
"""
from __future__ import annotations

from typing import Sequence

from trajkit.backends.base import Capabilities, Guarantees
from trajkit.engine.engine import Engine
from trajkit.engine.params import SamplingParams
from trajkit.engine.types import Completions, GenerationStats
from trajkit.errors import ConfigError


class TrajkitBackend:
    """``Engine`` as a :class:`~trajkit.backends.base.Backend` (build it from an engine or a model)."""

    name = "trajkit"
    guarantees = Guarantees(exact_logprobs=True, deterministic=True, logprob_atol=1e-4, prefix_reuse="exact")
    capabilities = Capabilities(sessions=True, prefix_cache=True, adapters=True, token_logprobs=True)

    def __init__(self, engine: Engine):
        self.engine = engine
        self.model = engine.model
        self.vocab_size = engine.vocab_size
        self.num_params = engine.num_params
        self.context_window = getattr(engine.model.config, "max_position_embeddings", None)
        self.generation_config = getattr(engine.model, "generation_config", None)
        self._stats = GenerationStats()
        self._calls = 0
        self._updates = 0

    @property
    def policy_version(self) -> int:
        return self.engine.policy_version

    def generate(self, prompt_ids: list[list[int]],
                 params: SamplingParams | Sequence[SamplingParams] | None = None) -> Completions:
        out = self.engine.generate(prompt_ids, params)
        self._stats = GenerationStats.merge(self._stats, out.stats)
        self._calls += 1
        return out

    def update_weights(self, state_dict: dict, strict: bool = True) -> int:
        self._updates += 1
        return self.engine.update_weights(state_dict, strict=strict)

    def update_adapter(self, adapter) -> int:
        """An adapter-only sync: merge a :class:`~trajkit.engine.adapters.LoraAdapter` into the engine's copy."""
        self._updates += 1
        return self.engine.update_adapter(adapter)

    def session(self):
        return self.engine.session()

    @property
    def prefix_cache(self):
        """The engine's :class:`~trajkit.engine.prefix.PrefixCache` (None while off)."""
        return self.engine.prefix_cache

    def set_prefix_cache(self, budget_tokens: int):
        """The engine's exact prefix cache (what a gateway over this backend reuses); see ``Engine``."""
        return self.engine.set_prefix_cache(budget_tokens)

    def check_request(self, prompt_ids, params):
        return self.engine.check_request(prompt_ids, params)

    def token_logprobs(self, prompt_ids, completion_ids, params=None):
        return self.engine.token_logprobs(prompt_ids, completion_ids, params)

    def stats(self) -> dict:
        s = self._stats
        return {"backend": self.name, "calls": self._calls, "weight_updates": self._updates,
                "policy_version": self.policy_version, "new_tokens": s.new_tokens, "seconds": s.seconds,
                "tokens_per_s": s.tokens_per_second, "acceptance_rate": s.acceptance_rate}

    def close(self) -> None:
        pass


def from_spec(spec, target=None, draft=None) -> TrajkitBackend:
    """The ``trajkit`` entry of :data:`~trajkit.backends.registry.BACKENDS`: a
    :class:`~trajkit.backends.build.BackendSpec` -> the engine over ``target`` (else ``spec.model`` loaded,
    with ``spec.rope_scaling``) and the drafter :func:`engine_drafter` makes, ``spec.k`` tokens per round."""
    if target is None:
        if spec.model is None:
            raise ConfigError("the trajkit backend needs a model: --model DIR (or a loaded target)")
        from trajkit.models.load import load_model

        target = load_model(spec.model, what="--model", rope_scaling=spec.rope_scaling)
    drafter = engine_drafter(spec, target, draft)
    if drafter is None:
        return TrajkitBackend(Engine(target))
    return TrajkitBackend(Engine(target, drafter=drafter, num_draft_tokens=spec.k))


def drafter_kind(spec, draft=None) -> str:
    """The draft kind ``spec`` asks for: ``spec.drafter``; else the kind ``spec.draft``'s files tell; else
    ``model`` when a loaded ``draft`` module is given; else ``none``."""
    from trajkit.engine.drafters.names import chosen_kind

    return chosen_kind(spec.drafter, spec.draft, "model" if draft is not None else "none")


def engine_drafter(spec, target, draft=None):
    """The engine's drafter for ``spec`` over ``target`` (None: plain decoding): the kind's own loader reads
    ``spec.draft``, else the loaded ``draft`` module is its net; a kind with weights and neither is refused."""
    from trajkit.engine.drafters.registry import draft_kind

    kind = draft_kind(drafter_kind(spec, draft))
    if kind is None:
        return None
    net = kind.load(spec.draft, target=target) if spec.draft else draft
    if kind.trainable and net is None:
        raise ConfigError(f"--drafter {kind.name} needs --draft DIR (draft.model in a config): the {kind.name} "
                          "drafter has weights")
    return kind.drafter(net)
