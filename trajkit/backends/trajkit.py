"""trajkit's own engine as a backend: the exact reference and the default.

:class:`TrajkitBackend` is :class:`trajkit.engine.Engine` behind the backend protocol. Its log-probs are
the engine's (post-temperature, float32 on CPU: equal to a full forward up to float rounding) and a
seeded row's tokens depend only on its own seed, prompt and index (:mod:`trajkit.engine.rng`). It also
passes through what only an in-process engine has: ``session()`` for the gateway's continuous batching,
``token_logprobs`` and the model itself.
"""
from __future__ import annotations

from typing import Sequence

from trajkit.backends.base import Guarantees
from trajkit.engine.engine import Engine
from trajkit.engine.params import SamplingParams
from trajkit.engine.types import Completions, GenerationStats


class TrajkitBackend:
    """``Engine`` as a :class:`~trajkit.backends.base.Backend` (build it from an engine or a model)."""

    name = "trajkit"
    guarantees = Guarantees(exact_logprobs=True, deterministic=True, logprob_atol=1e-4, sessions=True,
                            prefix_reuse="exact")

    def __init__(self, engine: Engine):
        self.engine = engine
        self.model = engine.model
        self.vocab_size = engine.vocab_size
        self.num_params = engine.num_params
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
