"""Ray actors for backends: start Ray when nobody has, start an actor in a given python, call it.

A backend that lives in another virtualenv runs as a Ray actor whose ``runtime_env`` names that venv's
python (``py_executable``) and puts this source tree on its ``PYTHONPATH`` (so the actor's module imports;
that module must import nothing of trajkit beyond itself). Ray must be the same version in both venvs
(the Makefile pins it). :func:`call` waits on an actor's result and turns a failure inside the actor into
one :class:`BackendError` carrying the actor's own message, so a raising actor fails the caller, never
hangs it.
"""
from __future__ import annotations

import os
from pathlib import Path

from trajkit.errors import ConfigError, TrajkitError

SOURCE_ROOT = str(Path(__file__).resolve().parents[2])  # the folder that holds the trajkit package


class BackendError(TrajkitError, RuntimeError):
    """A backend's worker failed; the message is the worker's own (its exception and traceback)."""


def require_ray():
    try:
        import ray
    except ImportError:
        raise ConfigError("this needs Ray: pip install 'trajkit[ray]' (ray==2.60.0, the version the vLLM "
                          "venv has; `make setup` installs it)") from None
    return ray


def ensure_ray(num_cpus: int | None = None, address: str | None = None) -> bool:
    """Connect to ``address`` (else ``$RAY_ADDRESS``) or start a local Ray with ``num_cpus`` logical CPUs,
    unless Ray is already running here; True when this call started or joined it."""
    ray = require_ray()
    if ray.is_initialized():
        return False
    address = address or os.environ.get("RAY_ADDRESS")
    kwargs = {"address": address} if address else {"num_cpus": num_cpus}
    ray.init(include_dashboard=False, log_to_driver=False, **kwargs)
    return True


def start_actor(cls, args: tuple = (), *, python: str | None = None, env: dict | None = None,
                num_cpus: float = 1, resources: dict | None = None, **options):
    """``cls(*args)`` as a Ray actor, running ``python`` (a venv's interpreter; None: this one); ``options``:
    more of Ray's actor options (``num_gpus``, ``scheduling_strategy``)."""
    ray = require_ray()
    if python is not None and not os.access(python, os.X_OK):
        raise ConfigError(f"no python at {python}: build the venv first (make vllm-venv), or set "
                          "TRAJKIT_VLLM_PYTHON to a python that has vllm and ray==2.60.0")
    runtime_env = {"env_vars": {"PYTHONPATH": SOURCE_ROOT, **(env or {})}}
    if python is not None:
        runtime_env["py_executable"] = python
    remote = ray.remote(cls).options(num_cpus=num_cpus, resources=resources, runtime_env=runtime_env,
                                     max_concurrency=1, **options)
    return remote.remote(*args)


def _plain(exc: Exception) -> str:
    """Ray's message without the terminal colour codes it puts around the actor's name."""
    import re

    return re.sub(r"\x1b\[[0-9;]*m", "", str(exc))


def call(ref, what: str, timeout_s: float | None = None, error: type[TrajkitError] = BackendError):
    """``ray.get(ref)``, a failure in the actor raised here as ``error`` (:class:`BackendError`) naming ``what``."""
    ray = require_ray()
    from ray.exceptions import GetTimeoutError, RayActorError, RayError, RayTaskError

    try:
        return ray.get(ref, timeout=timeout_s)
    except RayTaskError as exc:
        raise error(f"{what} failed in its Ray actor: {_plain(exc)}") from None
    except RayActorError as exc:
        raise error(f"{what}: its Ray actor died: {_plain(exc)}") from None
    except GetTimeoutError:
        raise error(f"{what}: no answer from its Ray actor in {timeout_s:g} s") from None
    except RayError as exc:  # the object store, Ray's memory monitor, ...
        raise error(f"{what}: Ray failed: {exc}") from None
