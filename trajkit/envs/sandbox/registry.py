"""The sandbox backends by name: ``namespace`` (the default, no daemon) and ``docker`` (a running daemon)."""
from __future__ import annotations

from trajkit.envs.sandbox.base import Sandbox, SandboxSpec
from trajkit.errors import ConfigError

BACKENDS = ("namespace", "docker")


def make_sandbox(kind: str, spec: SandboxSpec) -> Sandbox:
    """A not yet started sandbox of backend ``kind`` for ``spec``."""
    if kind == "namespace":
        from trajkit.envs.sandbox.namespace import NamespaceSandbox

        return NamespaceSandbox(spec)
    if kind == "docker":
        from trajkit.envs.sandbox.docker import DockerSandbox

        return DockerSandbox(spec)
    raise ConfigError(f"sandbox must be one of {list(BACKENDS)}, got {kind!r}")
