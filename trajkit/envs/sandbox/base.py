"""The sandbox seam: one small interface (Harbor's ``BaseEnvironment`` shape) and its records.

A sandbox is started once per trial, runs commands (``exec``, each under its own time limit, as a user, with
extra environment variables), takes files in (``upload``) and gives files back (``download``), and is
stopped, after which nothing of it remains on the host. Implementations: :class:`~trajkit.envs.sandbox.namespace.
NamespaceSandbox` (no daemon: namespaces, overlayfs, chroot), :class:`~trajkit.envs.sandbox.docker.DockerSandbox`
(when a Docker daemon answers). :func:`trajkit.envs.sandbox.registry.make_sandbox` picks one by name.
"""
from __future__ import annotations

import posixpath
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from trajkit.errors import TrajkitError


SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"  # every command's, the verifier's


def inside_root(path: str, base: str = "/") -> str:
    """``path`` (absolute, or relative to ``base``) normalised inside ``/``: ``..`` never leaves the root, as in
    a container.

    >>> inside_root("/../../tmp/y/"), inside_root("../../../../etc/x", "/app")
    ('/tmp/y', '/etc/x')
    """
    return posixpath.normpath(posixpath.join("/", base, path)).replace("//", "/", 1)


def bad_variable(env: dict[str, str]) -> str | None:
    """The first name of ``env`` a process cannot be given (empty, with ``=`` or NUL, or a value with NUL)."""
    return next((k for k, v in env.items() if not k or "=" in k or "\0" in k or "\0" in v), None)


class SandboxError(TrajkitError, RuntimeError):
    """A sandbox could not be started, used or stopped (the message says which step and why)."""


@dataclass
class Limits:
    """What a sandbox may use. ``memory_mb`` is enforced as the address-space limit of every process
    (``RLIMIT_AS``), ``file_mb`` as the largest file a process may write (``RLIMIT_FSIZE``), ``nproc`` as the
    number of processes of the sandbox's user (``RLIMIT_NPROC``), ``storage_mb`` as the size of the tmpfs
    that holds everything the trial writes (and each command's captured output), ``inodes`` as the number of
    files, folders and links on it (``nr_inodes``: an empty file costs no storage but ~2 KiB of unswappable
    kernel memory, so 65,536 of them bound that at ~128 MiB a sandbox whatever ``storage_mb`` is; a large
    ``pip install`` makes ~20,000); ``network`` False leaves only a loopback interface."""

    memory_mb: int = 2048
    storage_mb: int = 1024
    file_mb: int = 256
    nproc: int = 256
    nofile: int = 1024
    inodes: int = 65_536
    network: bool = False
    cpus: float = 1.0  # recorded, not enforced (no cgroups here); docs/envs.md

    def __post_init__(self):
        for name in ("memory_mb", "storage_mb", "file_mb", "nproc", "nofile", "inodes", "cpus"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
                raise SandboxError(f"Limits.{name} must be a positive number, got {value!r} (0 is not 'no limit')")


@dataclass
class ExecResult:
    """One command's outcome: ``exit_code`` (None when it was killed at its time limit), its output (the
    last ``MAX_OUTPUT`` bytes of each stream, decoded), and its wall time."""

    exit_code: int | None
    stdout: str
    stderr: str
    seconds: float
    timed_out: bool = False

    @property
    def ok(self) -> bool:
        return self.exit_code == 0


@dataclass
class SandboxSpec:
    """How to make a trial's sandbox: its limits, working directory, base environment variables, and the
    build plan of the task's Dockerfile (files to copy, commands to run) or its plain ``environment/`` files."""

    limits: Limits = field(default_factory=Limits)
    workdir: str = "/app"
    env: dict[str, str] = field(default_factory=dict)
    context: Path | None = None  # the build context (the task's environment/ folder)
    steps: list[tuple] = field(default_factory=list)  # ("mkdir", [], dest) | ("copy", [src...], dest) | ("run", cmd, None)


class Sandbox(Protocol):
    def start(self) -> None:
        """Create the sandbox (and apply its build steps)."""

    def exec(self, command: str, timeout_s: float, user: str | None = None, env: dict[str, str] | None = None,
             cwd: str | None = None) -> ExecResult:
        """Run ``command`` with ``sh -c`` inside; the whole process tree is killed at ``timeout_s``."""

    def upload(self, source: Path, dest: str) -> None:
        """Copy the host file or folder ``source`` to the sandbox path ``dest`` (a folder's contents go under it)."""

    def download(self, source: str, dest: Path, max_bytes: int = ...) -> None:
        """Copy the sandbox's regular file ``source`` (at most ``max_bytes``, default ``MAX_DOWNLOAD``; more is a
        :class:`SandboxError`) to the host path ``dest``; anything else there (a link, a FIFO, a folder) is
        ``FileNotFoundError``, never followed and never waited on."""

    def reset_dir(self, path: str) -> None:
        """Make ``path`` an empty folder owned by the sandbox's root, whatever the sandbox left there (files,
        a symlink in its place); run while no command of the sandbox runs."""

    def written_links(self) -> list[str]:
        """The sandbox path of every symbolic link its commands (and its build) made: what the verifier's
        clean-up checks (:mod:`trajkit.envs.harbor.verifier`); run while no command of the sandbox runs."""

    def stop(self) -> None:
        """End every process and remove everything the sandbox wrote."""


MAX_OUTPUT = 1 << 20
MAX_DOWNLOAD = 1 << 20  # a reward file
