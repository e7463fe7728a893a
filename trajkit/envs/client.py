"""What an environment generates with, handed to it explicitly: :class:`GenerationClient`.

An environment's ``rollout(generate, prompts, params)`` gets a callable ``generate(prompt_ids, params)``. The
trainer passes a :class:`GenerationClient`: that callable, plus what an environment that serves generation to
outside programs (the agent env's gateway, :mod:`trajkit.envs.agent`) needs and may not reach for itself:

- ``backend``: the generation backend (:class:`trajkit.backends.base.Backend`: trajkit's engine or vLLM);
- ``lock``: the (reentrant) lock the trainer's weight sync holds; held around every call through the client
  and every engine call a server makes, so a sync waits for the running call and every record carries the
  version of the weights that sampled it;
- ``versions``: the ``policy_version`` of every call made through the client, in order (an asynchronous
  trainer's weights can change between two calls of one episode);
- ``record``: told the :class:`~trajkit.engine.types.GenerationStats` of every call (the step's ``gen/*``
  counters), for calls made through ``generate`` and through a session.

Nothing else of the trainer is visible: no rollout, no config.

>>> from trajkit.engine.types import Completion, Completions, GenerationStats
>>> class Echo:  # a stand-in backend: returns the prompt's last id
...     policy_version = 0
...     def generate(self, prompt_ids, params=None):
...         return Completions([Completion([p[-1]], [0.0], "length") for p in prompt_ids], GenerationStats())
>>> seen = []
>>> client = GenerationClient(Echo(), record=seen.append)
>>> [c.token_ids for c in client([[1, 2], [3]], None)], len(seen)
([[2], [3]], 1)
"""
from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from trajkit.errors import ConfigError


def _ignore(stats) -> None:
    return None


@dataclass(eq=False)
class GenerationClient:
    """A backend, the weight-sync lock and the counters, as one argument (module docstring)."""

    backend: Any
    lock: threading.RLock = field(default_factory=threading.RLock)
    record: Callable[[Any], None] = _ignore
    versions: list[int] = field(default_factory=list)

    def __call__(self, prompt_ids: list[list[int]], params):
        with self.lock:
            out = self.backend.generate(prompt_ids, params)
        self.record(out.stats)
        self.versions.append(getattr(out, "policy_version", -1))
        return out

    @property
    def sessions(self) -> bool:
        """Whether the backend batches step-wise (``session()``; :class:`trajkit.backends.base.Guarantees`)."""
        guarantees = getattr(self.backend, "guarantees", None)
        declared = getattr(guarantees, "sessions", None)
        has = callable(getattr(self.backend, "session", None))
        return has if declared is None else bool(declared) and has

    def engine(self) -> "ServedBackend":
        """The backend as a gateway's scheduler sees it (its calls counted in ``record``)."""
        return ServedBackend(self)


class ServedBackend:
    """A :class:`GenerationClient`'s backend for :class:`trajkit.gateway.Gateway`: ``generate`` goes through the
    client (counted); ``session()`` exists only where the backend has sessions (else the gateway batches whole
    calls); everything else (``policy_version``, ``vocab_size``, the prefix cache, ...) is the backend's."""

    def __init__(self, client: GenerationClient):
        self._client = client

    def generate(self, prompt_ids, params=None):
        return self._client(prompt_ids, params)

    def __getattr__(self, name: str):
        backend = self._client.backend
        if name == "session":
            if not self._client.sessions:
                raise AttributeError(f"backend {getattr(backend, 'name', type(backend).__name__)!r} has no sessions")
            return self._session
        return getattr(backend, name)

    def _session(self):
        session = self._client.backend.session()
        self._client.record(session.stats)  # the session's counters grow as it steps; recorded once, by reference
        return session


def as_client(generate) -> GenerationClient:
    """``generate`` as a :class:`GenerationClient` (it is one already, or a backend); an environment that serves
    generation needs a backend, not a bare function, and says so."""
    if isinstance(generate, GenerationClient):
        return generate
    if callable(getattr(generate, "generate", None)) and hasattr(generate, "policy_version"):
        return GenerationClient(generate)
    raise ConfigError("this environment serves generation to outside programs and needs a backend: pass a "
                      "trajkit.envs.client.GenerationClient(backend, lock, record) (trajkit.rl.Rollout.client "
                      f"does), not {type(generate).__name__}")
