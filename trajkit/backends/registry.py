"""Backends by name (``rollout.backend`` in the RL config, ``--backend`` on ``trajkit serve``).

``make_backend("trajkit", engine=Engine(model))`` wraps an engine; ``make_backend("vllm", model_dir=...,
python=...)`` starts vLLM in its venv's python. Each entry is a plain function, so no caller dispatches on
the name.
"""
from __future__ import annotations

from typing import Callable

from trajkit.errors import ConfigError


def _trajkit(*, engine, **_unused):
    from trajkit.backends.trajkit import TrajkitBackend

    return TrajkitBackend(engine)


def _vllm(*, model_dir: str, python: str, **options):
    from trajkit.backends.vllm import VllmBackend

    return VllmBackend(model_dir, python=python, **options)


BACKENDS: dict[str, Callable] = {"trajkit": _trajkit, "vllm": _vllm}


def check_backend(name: str, where: str = "backend") -> str:
    if name not in BACKENDS:
        raise ConfigError(f"{where}: unknown backend {name!r}; use one of {', '.join(BACKENDS)}")
    return name


def make_backend(name: str, **kwargs):
    """The backend ``name`` built from ``kwargs`` (``engine`` for trajkit; ``model_dir``, ``python`` and
    :class:`~trajkit.backends.vllm.VllmBackend`'s options for vllm)."""
    return BACKENDS[check_backend(name)](**kwargs)
