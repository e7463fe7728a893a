"""Backends by name: ``rollout.backend`` in the RL config, ``--backend`` on ``trajkit serve`` and ``trajkit
generate``; the one list of names (:data:`BACKEND_NAMES`, the config's ``Literal`` :data:`BackendName`, the
CLI's choices).

Each entry says how its backend is made: ``make(**options)`` from its own constructor's arguments
(``make_backend("trajkit", engine=Engine(model))``; ``make_backend("vllm", model_dir=..., python=...)``) and
``build(spec, target, draft)`` from a :class:`~trajkit.backends.build.BackendSpec` (what every entry point
uses, :func:`trajkit.backends.build.build_backend`). This module imports neither torch nor a backend: the
parsers read the names from here.

Dispatching on the name: building goes through the entry, and what a caller uses of a backend beyond the
protocol it reads from ``backend.capabilities`` (:class:`~trajkit.backends.base.Capabilities`), never from
the name. What does compare the name: the RL config's rules of what vLLM 0.32 cannot do in training
(:mod:`trajkit.rl.config_rules`: NCCL weight transfer only with ``vllm``; no LoRA on the output layer and no
drafter on ``vllm``), refused before anything is built; a given backend is checked to be the one ``rollout.backend`` names, and
only ``rollout.backend=trajkit`` gets an inference copy of the draft for its in-process drafter
(:class:`trajkit.rl.rollout.Rollout`); ``--api tinker`` refuses another backend than trajkit's engine.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Literal

from trajkit.errors import ConfigError


def _make_trajkit(*, engine, **_unused):
    from trajkit.backends.trajkit import TrajkitBackend

    return TrajkitBackend(engine)


def _make_vllm(*, model_dir: str, python: str, **options):
    from trajkit.backends.vllm import VllmBackend

    return VllmBackend(model_dir, python=python, **options)


def _build_trajkit(spec, target=None, draft=None):
    from trajkit.backends.trajkit import from_spec

    return from_spec(spec, target, draft)


def _build_vllm(spec, target=None, draft=None):
    from trajkit.backends.vllm import from_spec

    return from_spec(spec, target, draft)


@dataclass(frozen=True)
class BackendEntry:
    """How one backend is made: ``make(**options)`` (its constructor's arguments) and ``build(spec, target,
    draft)`` (from a :class:`~trajkit.backends.build.BackendSpec`)."""

    make: Callable
    build: Callable


BACKENDS: dict[str, BackendEntry] = {"trajkit": BackendEntry(_make_trajkit, _build_trajkit),
                                     "vllm": BackendEntry(_make_vllm, _build_vllm)}
BACKEND_NAMES: tuple[str, ...] = tuple(BACKENDS)
BackendName = Literal[BACKEND_NAMES]  # the config's type of a backend name: Literal["trajkit", "vllm"]


def check_backend(name: str, where: str = "backend") -> str:
    if name not in BACKENDS:
        raise ConfigError(f"{where}: unknown backend {name!r}; use one of {', '.join(BACKENDS)}")
    return name


def make_backend(name: str, **kwargs):
    """The backend ``name`` made from its constructor's arguments (``engine`` for trajkit; ``model_dir``,
    ``python`` and :class:`~trajkit.backends.vllm.VllmBackend`'s options for vllm). From a spec:
    :func:`trajkit.backends.build.build_backend`."""
    return BACKENDS[check_backend(name)].make(**kwargs)


def as_backend(obj):
    """``obj`` as a backend: itself when it declares :class:`~trajkit.backends.base.Capabilities`, trajkit's engine wrapped in
    :class:`~trajkit.backends.trajkit.TrajkitBackend`; anything else is refused with what to declare."""
    from trajkit.backends.base import is_backend

    if is_backend(obj):
        return obj
    from trajkit.engine.engine import Engine

    if isinstance(obj, Engine):
        return _make_trajkit(engine=obj)
    raise ConfigError(f"{type(obj).__name__} is not a generation backend: pass a trajkit Engine, a backend "
                      "(trajkit.backends.build_backend) or an object declaring the Backend protocol's members, "
                      "capabilities (trajkit.backends.base.Capabilities) among them")
