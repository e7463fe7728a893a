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
  counters), for calls made through ``generate`` and through a session;
- ``round``: the number of the next round an environment that numbers its rounds (the gateway environments)
  runs through this client, when the trainer reserved it (an asynchronous trainer does, in step order:
  :mod:`trajkit.rl.producer`); None: the environment's own next number.

Nothing else of the trainer is visible: no rollout, no config.

>>> from trajkit.engine.types import Completion, Completions, GenerationStats
>>> class Echo:  # a stand-in for a backend (trajkit.backends.base.Backend): returns the prompt's last id
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

from trajkit.backends.base import Capabilities, is_backend
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
    round: int | None = None

    def __call__(self, prompt_ids: list[list[int]], params):
        with self.lock:
            out = self.backend.generate(prompt_ids, params)
        self.count(out)
        return out

    def count(self, out) -> None:
        """Count one backend call's output (its stats and version) as this client's."""
        self.record(out.stats)
        self.versions.append(out.policy_version)

    @property
    def sessions(self) -> bool:
        """Whether the backend batches step-wise (``session()``; :class:`trajkit.backends.base.Capabilities`)."""
        return self.backend.capabilities.sessions

    def served(self) -> "ServedBackend":
        """The backend as a gateway's scheduler sees it (its calls counted in ``record``)."""
        return ServedBackend(self)


class ServedBackend:
    """A :class:`GenerationClient`'s backend for :class:`trajkit.gateway.Gateway`: ``generate`` holds the
    client's lock; it declares what a gateway uses of the backend's capabilities (sessions, the prefix cache)
    plus ``serves``, so ``session()`` is there only where the backend has sessions (else the gateway batches
    whole calls); weight syncs other than ``update_weights`` stay the trainer's; the facts (``policy_version``, ``vocab_size``, the window, the prefix
    cache, ...) are the backend's.

    Counting: every engine call is counted (its stats recorded, a whole call's version appended) in the
    clients of the tags it serves (:meth:`route`; the scheduler tells :meth:`serves` whose rows it computes,
    :mod:`trajkit.gateway.scheduler`): a whole ``generate`` call in every routed client with a row in it, a
    step-wise session (recorded by reference, once per client: its counters grow as it steps) in every routed
    client with a row admitted to it. A call that serves two tags (two rounds' requests in one batch) counts
    whole in each of them. Rows of no routed tag count in every routed client, or in the client the backend
    was made from when none is routed. With one tag routed at a time, every call counts in that client
    exactly once, as through the client itself."""

    def __init__(self, client: GenerationClient):
        self._client = client
        b = client.backend
        self.name, self.guarantees, self.engine = b.name, b.guarantees, b.engine
        self.capabilities = Capabilities(sessions=b.capabilities.sessions, prefix_cache=b.capabilities.prefix_cache,
                                         serves=True)
        self.vocab_size, self.num_params = b.vocab_size, b.num_params
        self.context_window, self.generation_config = b.context_window, b.generation_config
        self._routes: dict[object, GenerationClient] = {}
        self._mutex = threading.Lock()  # routes change on the rounds' threads; the scheduler's reads them
        self._tags: list = []  # whose rows the next whole call computes
        self._open = None  # the step-wise session in progress: its stats and the clients told of it
        self._told: set[int] = set()

    def route(self, tag, client: GenerationClient) -> None:
        """Count the calls that serve ``tag``'s requests in ``client``."""
        with self._mutex:
            self._routes[tag] = client

    def unroute(self, tag) -> None:
        with self._mutex:
            self._routes.pop(tag, None)

    def _targets(self, tags) -> list[GenerationClient]:
        with self._mutex:
            out = {id(c): c for c in (self._routes.get(t) for t in tags) if c is not None}
            if any(t not in self._routes for t in tags):
                out.update((id(c), c) for c in self._routes.values())
            return list(out.values()) or [self._client]

    def serves(self, tags) -> None:
        """The scheduler's next whole call, or its rows just admitted to the open session, serve ``tags``."""
        self._tags = list(tags)
        if self._open is not None:
            for c in self._targets(self._tags):
                if id(c) not in self._told:
                    self._told.add(id(c))
                    c.record(self._open)

    def generate(self, prompt_ids, params=None):
        with self._client.lock:
            out = self._client.backend.generate(prompt_ids, params)
        for c in self._targets(self._tags):
            c.count(out)
        return out

    @property
    def policy_version(self) -> int:
        return self._client.backend.policy_version

    @property
    def prefix_cache(self):
        return self._client.backend.prefix_cache

    def set_prefix_cache(self, budget_tokens: int):
        return self._client.backend.set_prefix_cache(budget_tokens)

    def update_weights(self, state_dict: dict) -> int:
        return self._client.backend.update_weights(state_dict)

    def stats(self) -> dict:
        return self._client.backend.stats()

    def close(self) -> None:
        """Nothing: the backend is the client's owner's to close."""

    def session(self):
        if not self.capabilities.sessions:
            raise ConfigError(f"backend {self.name!r} has no step-wise sessions (Capabilities.sessions)")
        return self._session()

    def _session(self):
        session = self._client.backend.session()
        self._open, self._told = session.stats, set()  # recorded by reference when rows join (serves)
        return session


def as_client(generate) -> GenerationClient:
    """``generate`` as a :class:`GenerationClient` (it is one already, or a backend); an environment that serves
    generation needs a backend, not a bare function, and says so."""
    if isinstance(generate, GenerationClient):
        return generate
    if is_backend(generate):
        return GenerationClient(generate)
    raise ConfigError("this environment serves generation to outside programs and needs a backend: pass a "
                      "trajkit.envs.client.GenerationClient(backend, lock, record) (trajkit.rl.Rollout.client "
                      f"does), not {type(generate).__name__}")
