"""The Docker sandbox: the same interface over the ``docker`` CLI, used only when a daemon answers.

``start`` runs the task's image (``[environment] docker_image``, else ``docker build`` of ``environment/``)
detached with ``sleep infinity`` under the task's limits (``--memory``, ``--cpus``, ``--pids-limit``,
``--network none`` unless the task has the network); ``exec`` is ``docker exec`` (killed at its time limit
together with the processes it started: ``timeout -s KILL`` inside), ``stop`` is ``docker rm -f`` (and removes
the image it built). No file operation resolves a container path on the host: ``upload`` streams a tar made
on the host (only files, folders and links, never dereferenced) to ``tar -x`` run inside the container (a
link in it can reach only the container's files), and ``download`` is ``head -c`` of a regular file inside
(``docker cp`` out would hand the host a link or a folder the container chose). Not run here (no daemon).
"""
from __future__ import annotations

import io
import os
import shlex
import stat
import subprocess
import tarfile
import time
import uuid
from pathlib import Path

from trajkit.envs.sandbox.base import MAX_DOWNLOAD, MAX_OUTPUT, ExecResult, SandboxError, SandboxSpec
from trajkit.envs.sandbox.beneath import MAX_DEPTH, MAX_ENTRIES

DEFAULT_IMAGE = "python:3.11-slim"


def available() -> str | None:
    """None when a Docker daemon answers, else why not."""
    try:
        done = subprocess.run(["docker", "info", "--format", "{{.ServerVersion}}"], capture_output=True,
                              text=True, timeout=10, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"no docker client or daemon ({exc})"
    return None if done.returncode == 0 else f"no Docker daemon answers: {done.stderr.strip()[:200]}"


class DockerSandbox:
    def __init__(self, spec: SandboxSpec, image: str | None = None):
        self.spec, self.image, self.built = spec, image, None
        self.name: str | None = None

    def _docker(self, *args: str, timeout: float = 600.0) -> subprocess.CompletedProcess:
        done = subprocess.run(["docker", *args], capture_output=True, text=True, timeout=timeout, check=False)
        if done.returncode != 0:
            raise SandboxError(f"docker {args[0]} failed: {done.stderr.strip()[-500:]}")
        return done

    def start(self) -> None:
        why = available()
        if why:
            raise SandboxError(f"docker sandbox: {why}")
        image = self.image
        if image is None and self.spec.context is not None and (self.spec.context / "Dockerfile").is_file():
            self.built = image = f"trajkit-env-{uuid.uuid4().hex[:12]}"
            self._docker("build", "-q", "-t", image, str(self.spec.context))
        lim, self.name = self.spec.limits, f"trajkit-sbx-{uuid.uuid4().hex[:12]}"
        args = ["run", "-d", "--name", self.name, f"--memory={lim.memory_mb}m", f"--cpus={lim.cpus}",
                f"--pids-limit={lim.nproc}", "-w", self.spec.workdir]
        if not lim.network:
            args.append("--network=none")
        args += [a for k, v in self.spec.env.items() for a in ("-e", f"{k}={v}")]
        self._docker(*args, image or DEFAULT_IMAGE, "sleep", "infinity")
        self.exec(f"mkdir -p {shlex.quote(self.spec.workdir)} /logs/verifier /logs/agent /tests", 60.0, cwd="/")
        if self.built is None:
            for kind, sources, dest in self.spec.steps:
                if kind == "copy":
                    for src in sources:
                        self.upload(self.spec.context / src, dest)

    def exec(self, command: str, timeout_s: float, user: str | None = None, env: dict[str, str] | None = None,
             cwd: str | None = None) -> ExecResult:
        if self.name is None:
            raise SandboxError("the sandbox is not started (call start first)")
        args = ["docker", "exec", "-w", cwd or self.spec.workdir]
        if user:
            args += ["-u", user]
        args += [a for k, v in (env or {}).items() for a in ("-e", f"{k}={v}")]
        args += [self.name, "timeout", "-s", "KILL", f"{timeout_s:g}", "sh", "-c", command]
        t0 = time.perf_counter()
        try:
            done = subprocess.run(args, capture_output=True, timeout=timeout_s + 30, check=False)
        except subprocess.TimeoutExpired:
            return ExecResult(None, "", "", time.perf_counter() - t0, True)
        timed_out = done.returncode == 137 and time.perf_counter() - t0 >= timeout_s
        return ExecResult(None if timed_out else done.returncode,
                          done.stdout[-MAX_OUTPUT:].decode("utf-8", "replace"),
                          done.stderr[-MAX_OUTPUT:].decode("utf-8", "replace"), time.perf_counter() - t0, timed_out)

    def upload(self, source: Path, dest: str) -> None:
        source, into, dest = Path(source), dest.endswith("/"), dest.rstrip("/") or "/"
        if stat.S_ISDIR(os.lstat(source).st_mode):
            folder, name = dest, None  # a folder's contents go into dest
        else:
            folder, name = (dest, source.name) if into else (os.path.dirname(dest), os.path.basename(dest))
        archive = _tar(source, name)
        done = subprocess.run(["docker", "exec", "-i", self.name, "sh", "-c",
                               'mkdir -p "$1" && tar -x -f - -C "$1" --no-same-owner', "sh", folder],
                              input=archive, capture_output=True, timeout=600, check=False)
        if done.returncode != 0:
            raise SandboxError(f"upload to {dest} failed: {done.stderr.decode('utf-8', 'replace')[-500:]}")

    def reset_dir(self, path: str) -> None:
        """An empty folder at ``path`` (whatever was there, a symlink included, is removed first)."""
        quoted = shlex.quote(path)
        result = self.exec(f"rm -rf {quoted} && mkdir -p {quoted}", 60.0, cwd="/")
        if not result.ok:
            raise SandboxError(f"could not empty {path}: {result.stderr[-500:]}")

    def written_links(self) -> list[str]:
        """The links among the paths ``docker diff`` lists as added or changed (the container's writable layer),
        tested inside the container (``[ -L ]``, NUL-separated names in and out)."""
        done = subprocess.run(["docker", "diff", self.name], capture_output=True, text=True, timeout=120, check=False)
        if done.returncode != 0:
            raise SandboxError(f"docker diff {self.name} failed: {done.stderr[-500:]}")
        paths = [line[2:] for line in done.stdout.splitlines() if line[:2] in ("A ", "C ")]
        if not paths:
            return []
        script = 'xargs -0 -r sh -c \'for p; do [ -L "$p" ] && printf "%s\\0" "$p"; done; true\' sh'
        found = subprocess.run(["docker", "exec", "-i", self.name, "sh", "-c", script],
                               input="".join(p + "\0" for p in paths).encode(), capture_output=True, timeout=120,
                               check=False)
        return [p for p in found.stdout.decode("utf-8", errors="surrogateescape").split("\0") if p]

    def download(self, source: str, dest: Path, max_bytes: int = MAX_DOWNLOAD) -> None:
        done = subprocess.run(["docker", "exec", self.name, "sh", "-c", '[ -f "$1" ] && [ ! -L "$1" ] && '
                               'head -c "$2" "$1"', "sh", source, str(max_bytes + 1)],
                              capture_output=True, timeout=60, check=False)
        if done.returncode != 0:
            raise FileNotFoundError(f"{source}: no such file written in the sandbox")
        if len(done.stdout) > max_bytes:
            raise SandboxError(f"{source} is larger than {max_bytes} bytes; it is not read")
        Path(dest).write_bytes(done.stdout)

    def stop(self) -> None:
        if self.name is not None:
            subprocess.run(["docker", "rm", "-f", self.name], capture_output=True, check=False)
            self.name = None
        if self.built is not None:
            subprocess.run(["docker", "rmi", "-f", self.built], capture_output=True, check=False)
            self.built = None


def _tar(source: Path, name: str | None) -> bytes:
    """A tar of the host's ``source``: the file as ``name``, or a folder's contents; made by an iterative
    ``lstat`` walk (at most ``MAX_ENTRIES`` entries, ``MAX_DEPTH`` deep) holding only regular files, folders
    and links (as links), so nothing outside ``source`` is read."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        if name is not None:
            tar.add(source, arcname=name, recursive=False)
            return buf.getvalue()
        stack, count = [(source, "", 0)], 0
        while stack:
            folder, prefix, depth = stack.pop()
            for entry in os.scandir(folder):
                count += 1
                if count > MAX_ENTRIES or depth >= MAX_DEPTH:
                    raise SandboxError(f"{source}: more than {MAX_ENTRIES} entries or {MAX_DEPTH} levels")
                mode, arc = entry.stat(follow_symlinks=False).st_mode, prefix + entry.name
                if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode) or stat.S_ISLNK(mode)):
                    raise SandboxError(f"{entry.path}: only files, folders and links are copied into the sandbox")
                tar.add(entry.path, arcname=arc, recursive=False)
                if stat.S_ISDIR(mode):
                    stack.append((Path(entry.path), arc + "/", depth + 1))
    return buf.getvalue()
