"""The daemon-less sandbox: Linux namespaces, an overlay over the host's ``/``, and ``chroot``.

Needs root and util-linux (``unshare``, ``setpriv``, ``prlimit``, ``mount``, ``chroot``), ``ip`` for the loopback
interface; no daemon, no cgroups. One sandbox is a folder ``/tmp/trajkit-sbx-*`` holding a tmpfs (``storage_mb``:
the disk quota of everything the trial writes) with the overlay's upper and work dirs. Each ``exec`` is:

1. ``unshare --mount --pid --ipc --uts --net --fork --kill-child`` (no ``--net`` when the task has the
   network): a private mount table, its own process tree and a network with only ``lo``;
2. in there, ``mount -t overlay`` (lower = the host's ``/``, upper = the trial's tmpfs), a fresh ``/proc``, a
   tmpfs ``/dev`` holding only null, zero, full, random, urandom and tty, an empty ``/sys``; ``lo`` up;
3. the process becomes the sandbox's own host uid (``200000`` + a random offset, one per sandbox) with no
   capabilities, under ``prlimit`` (address space = ``memory_mb``, file size, process count = ``nproc``: root
   is exempt from ``RLIMIT_NPROC``, this uid is not), enters a user namespace where that uid is root, and
   ``chroot``s into the overlay, keeping of its capabilities only Docker's default set less ``sys_chroot`` and
   ``mknod`` (so no second ``chroot``, no mounts, no devices); they act only on the sandbox's own files;
4. ``sh -c COMMAND`` in the working directory. At the time limit the outer ``unshare`` is killed; with it goes
   the namespace's init and so every process of the command (a pid namespace dies with its init).

The upper dir hides the host: every top-level entry of ``/`` except ``bin sbin lib* usr etc var`` is an empty
opaque directory (``/root``, ``/home``, ``/tmp``, ``/work``, ...) or a whiteout. The host's ``/usr``, ``/etc``,
``/var`` are visible read-only (owned by a uid outside the user namespace); writes go to the workdir,
``/logs``, ``/tests``, ``/solution``, ``/tmp`` and ``/root``. Nothing is written outside the sandbox folder,
which ``stop`` unmounts and deletes. Not enforced: ``cpus`` (no cgroups), total memory across processes
(``RLIMIT_AS`` is per process), seccomp filtering; see docs/envs.md.
"""
from __future__ import annotations

import os
import secrets
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from pathlib import Path, PurePosixPath

from trajkit.envs.sandbox import MAX_OUTPUT, ExecResult, SandboxError, SandboxSpec

VISIBLE = ("bin", "sbin", "lib", "lib32", "lib64", "libx32", "usr", "etc", "var")
MOUNTED = ("proc", "dev", "sys")
WRITABLE = ("tmp", "root", "logs", "logs/verifier", "logs/agent", "tests", "solution")
DEVICES = ("null", "zero", "full", "random", "urandom", "tty")
PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
TOOLS = ("unshare", "setpriv", "prlimit", "chroot", "mount", "ip")
UID_BASE, UID_SPAN = 200000, 100000
# Docker's default capability set without sys_chroot and mknod (and, inside the user namespace, they act only
# on files the sandbox owns): what a task's root needs to chown, chmod and delete its own files
CAPS = ",".join(f"+{c}" for c in ("chown", "dac_override", "fowner", "fsetid", "kill", "setgid", "setuid",
                                   "setpcap", "net_bind_service", "net_raw", "audit_write", "setfcap"))

INNER = """set -e
mount -t overlay overlay -o "lowerdir=/,upperdir=$SBX/disk/upper,workdir=$SBX/disk/work" "$SBX/merged"
mount -t proc proc "$SBX/merged/proc"
mount -t tmpfs -o mode=755,size=64k tmpfs "$SBX/merged/dev"
for n in DEVICES; do : > "$SBX/merged/dev/$n"; mount --bind "/dev/$n" "$SBX/merged/dev/$n"; done
mount -t tmpfs -o ro,size=4k tmpfs "$SBX/merged/sys"
ip link set lo up
if [ -d "$SBX/gw" ]; then mount --bind "$SBX/gw" "$SBX/merged/run/trajkit"; fi
exec "$@"
""".replace("DEVICES", " ".join(DEVICES))


def available() -> str | None:
    """None when this machine can run the sandbox, else why not."""
    if os.geteuid() != 0:
        return "the namespace sandbox needs root (it mounts an overlay in a private mount namespace)"
    missing = [t for t in TOOLS if shutil.which(t) is None]
    return f"missing tools: {', '.join(missing)} (util-linux, iproute2)" if missing else None


class NamespaceSandbox:
    """See the module docstring. ``exec`` calls are serialized (one overlay mount at a time)."""

    def __init__(self, spec: SandboxSpec):
        self.spec = spec
        self.root: Path | None = None
        self.uid = UID_BASE + secrets.randbelow(UID_SPAN)
        self._lock = threading.Lock()
        self._proc: subprocess.Popen | None = None
        self._relay = None  # (host listener, inside port) once expose() was called
        self.build_log: list[ExecResult] = []

    # -- lifecycle ------------------------------------------------------------------------------------------
    def start(self) -> None:
        why = available()
        if why:
            raise SandboxError(f"namespace sandbox: {why}")
        self.root = Path(tempfile.mkdtemp(prefix="trajkit-sbx-"))
        os.chmod(self.root, 0o711)  # the sandbox uid must traverse it to reach merged/
        try:
            disk = self.root / "disk"
            disk.mkdir()
            _run(["mount", "-t", "tmpfs", "-o", f"size={self.spec.limits.storage_mb}m,mode=711", "tmpfs", str(disk)])
            (disk / "upper").mkdir()
            (disk / "work").mkdir()
            (self.root / "merged").mkdir()
            (self.root / "inner.sh").write_text(INNER)
            self._layout(disk / "upper")
            self._build()
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        if self._relay is not None:
            self._relay[0].close()
            self._relay = None
        proc = self._proc
        if proc is not None and proc.poll() is None:
            _kill(proc)
            self._wait_gone()
        if self.root is None:
            return
        disk = self.root / "disk"
        if os.path.ismount(disk):
            _run(["umount", "-l", str(disk)])
        shutil.rmtree(self.root, ignore_errors=True)
        self.root = None

    def __enter__(self):
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    # -- layout and build -----------------------------------------------------------------------------------
    def _layout(self, upper: Path) -> None:
        """Hide every top-level host entry but the userland; make the writable dirs, owned by the sandbox."""
        for entry in os.listdir("/"):
            if entry in VISIBLE:
                continue
            target = upper / entry
            if entry in MOUNTED or os.path.isdir(os.path.join("/", entry)) and not os.path.islink("/" + entry):
                target.mkdir()
                os.setxattr(target, "trusted.overlay.opaque", b"y")
            else:
                os.mknod(target, 0o600 | 0o020000, os.makedev(0, 0))  # a whiteout: the entry is gone
        for rel in (*WRITABLE, self.spec.workdir.strip("/")):
            self._own_dir(upper / rel)
        os.chmod(upper / "tmp", 0o1777)

    def _own_dir(self, path: Path) -> None:
        """Make the upper-dir folder ``path`` and its parents: a folder the host also has keeps the host's
        owner and mode; a new one, and ``path`` itself, belong to the sandbox's root."""
        upper = self.root / "disk" / "upper"
        parts = path.relative_to(upper).parts
        for i in range(1, len(parts) + 1):
            p, host = upper.joinpath(*parts[:i]), "/" + "/".join(parts[:i])
            if not os.path.lexists(p):
                p.mkdir()
                if os.path.isdir(host) and not os.path.islink(host):
                    os.chmod(p, os.stat(host).st_mode & 0o7777)
                else:
                    os.chown(p, self.uid, self.uid)
        os.chown(path, self.uid, self.uid)

    def _build(self) -> None:
        for kind, sources, dest in self.spec.steps:
            if kind == "mkdir":
                self._own_dir(self._upper(dest))
            elif kind == "copy":
                for src in sources:  # Docker's rules: a folder's contents go to dest; a file to dest/ or dest
                    path = _inside(self.spec.context, src)
                    many = dest.endswith("/") or len(sources) > 1
                    self.upload(path, f"{dest.rstrip('/')}/{path.name}" if path.is_file() and many else dest)
            else:
                result = self.exec(sources, timeout_s=600.0)
                self.build_log.append(result)
                if not result.ok:
                    raise SandboxError(f"build step RUN {sources!r} failed (exit {result.exit_code}): "
                                       f"{result.stderr[-500:]}")

    # -- files ----------------------------------------------------------------------------------------------
    def _upper(self, path: str) -> Path:
        """The upper-dir path of the sandbox path ``path``; refuses a path through a symlink (in the upper dir
        or the host's lower layer), which a host-side copy would follow out of the sandbox."""
        if self.root is None:
            raise SandboxError("the sandbox is not started")
        parts = PurePosixPath("/", path).parts[1:]
        if ".." in parts or not parts:
            raise SandboxError(f"{path!r}: give an absolute path without '..'")
        upper = self.root / "disk" / "upper"
        for i in range(1, len(parts)):
            rel = os.path.join(*parts[:i])
            if os.path.islink(upper / rel) or (not os.path.lexists(upper / rel) and os.path.islink("/" + rel)):
                raise SandboxError(f"{path!r}: /{rel} is a symbolic link; give the real path")
        return upper.joinpath(*parts)

    def upload(self, source: Path, dest: str) -> None:
        source, target = Path(source), self._upper(dest)
        if os.path.islink(target):
            target.unlink()
        self._own_dir(target.parent)
        if source.is_dir():
            shutil.copytree(source, target, dirs_exist_ok=True, symlinks=True)
        else:
            shutil.copy2(source, target)
        for p in [target, *(target.rglob("*") if target.is_dir() else [])]:
            os.lchown(p, self.uid, self.uid)

    def download(self, source: str, dest: Path) -> None:
        path = self._upper(source)
        if path.is_symlink() or not path.is_file():
            raise FileNotFoundError(f"{source}: no such file written in the sandbox")
        shutil.copyfile(path, dest)

    # -- the one way out ------------------------------------------------------------------------------------
    def expose(self, port: int) -> str:
        """Make the host's ``127.0.0.1:port`` (the gateway) reachable from the next commands as
        ``127.0.0.1:port`` inside, without a network: a Unix socket in ``/run/trajkit`` (bind-mounted) and a
        relay started beside each command (:mod:`trajkit.envs.relay`). Returns the ``host:port`` to use inside."""
        from trajkit.envs import relay

        if self.spec.limits.network:  # the host's loopback is the sandbox's: nothing to relay
            return f"127.0.0.1:{port}"
        gw = self.root / "gw"
        gw.mkdir(mode=0o755, exist_ok=True)
        shutil.copy(relay.__file__, gw / "relay.py")
        self._own_dir(self._upper("/run/trajkit"))
        if self._relay is None:
            self._relay = (relay.unix_to_tcp(str(gw / "gateway.sock"), port), port)
        return f"127.0.0.1:{port}"

    def _with_relay(self, command: str) -> str:
        if self._relay is None:
            return command
        ready = f"/tmp/.trajkit-relay-{self._relay[1]}"
        return (f"python3 /run/trajkit/relay.py {self._relay[1]} /run/trajkit/gateway.sock {ready} & "
                f"n=0; while [ ! -e {ready} ] && [ $n -lt 1000 ]; do sleep 0.01; n=$((n+1)); done; "
                f"rm -f {ready}; {command}")

    # -- commands -------------------------------------------------------------------------------------------
    def _argv(self, command: str, user: str | None, env: dict[str, str], cwd: str) -> list[str]:
        lim = self.spec.limits
        outer = ["unshare", "--mount", "--pid", "--ipc", "--uts", "--fork", "--kill-child"]
        if not lim.network:
            outer.append("--net")
        merged = str(self.root / "merged")
        limits = ["prlimit", f"--nproc={lim.nproc}", f"--as={lim.memory_mb << 20}", f"--fsize={lim.file_mb << 20}",
                  f"--nofile={lim.nofile}", "--core=0", "--"]
        drop = ["setpriv", f"--bounding-set=-all,{CAPS}", "--inh-caps=-all", "--no-new-privs"]
        shell = ["env", "-i", *[f"{k}={v}" for k, v in env.items()], "sh", "-c",
                 'cd "$1" || exit 126; shift; exec sh -c "$1"', "sh", cwd, command]
        if user in (None, "root", "0"):
            become = ["setpriv", f"--reuid={self.uid}", f"--regid={self.uid}", "--clear-groups", *limits,
                      "unshare", "--user", "--map-root-user", "chroot", merged, *drop]
        else:  # another user of the sandbox's /etc/passwd: chroot as host root, then drop to that user
            uid, gid = self._lookup(user)
            become = ["chroot", merged, *limits, *drop[:1], f"--reuid={uid}", f"--regid={gid}", "--clear-groups",
                      *drop[1:]]
        return [*outer, "sh", str(self.root / "inner.sh"), *become, *shell]

    def _wait_gone(self, timeout_s: float = 10.0) -> None:
        """Wait until the killed namespace's processes (the sandbox uid's) have been reaped by the kernel."""
        deadline = time.monotonic() + timeout_s
        while _processes_of(self.uid):
            if time.monotonic() > deadline:
                raise SandboxError(f"processes of sandbox uid {self.uid} outlived their namespace: "
                                   f"{_processes_of(self.uid)}")
            time.sleep(0.01)

    def _lookup(self, user: str) -> tuple[int, int]:
        """(uid, gid) of ``user`` (a name or number) in the sandbox's /etc/passwd."""
        upper = self.root / "disk" / "upper" / "etc" / "passwd"
        passwd = (upper if upper.is_file() else Path("/etc/passwd")).read_text(encoding="utf-8", errors="replace")
        for line in passwd.splitlines():
            fields = line.split(":")
            if len(fields) > 3 and user in (fields[0], fields[2]):
                return int(fields[2]), int(fields[3])
        raise SandboxError(f"user {user!r} is not in the sandbox's /etc/passwd")

    def exec(self, command: str, timeout_s: float, user: str | None = None, env: dict[str, str] | None = None,
             cwd: str | None = None) -> ExecResult:
        if self.root is None:
            raise SandboxError("the sandbox is not started (call start first)")
        base = {"PATH": PATH, "HOME": "/root", "LANG": "C.UTF-8", "TERM": "dumb", **self.spec.env, **(env or {})}
        argv = self._argv(self._with_relay(command), user, base, cwd or self.spec.workdir)
        with self._lock, tempfile.TemporaryFile(dir=self.root) as out, tempfile.TemporaryFile(dir=self.root) as err:
            t0 = time.perf_counter()
            self._proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=err,
                                          env={"SBX": str(self.root), "PATH": PATH}, start_new_session=True)
            try:
                code, timed_out = self._proc.wait(timeout=timeout_s), False
            except subprocess.TimeoutExpired:
                _kill(self._proc)
                self._wait_gone()
                code, timed_out = None, True
            seconds = time.perf_counter() - t0
            self._proc = None
            return ExecResult(code, _tail(out), _tail(err), seconds, timed_out)


def _processes_of(uid: int) -> list[int]:
    """Host pids whose real uid is ``uid``."""
    out = []
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                if os.stat(f"/proc/{pid}").st_uid == uid:
                    out.append(int(pid))
            except FileNotFoundError:
                continue
    return out


def _tail(fh) -> str:
    size = fh.seek(0, os.SEEK_END)
    fh.seek(max(0, size - MAX_OUTPUT))
    return fh.read().decode("utf-8", errors="replace")


def _kill(proc: subprocess.Popen) -> None:
    """SIGKILL the outer ``unshare`` (its child, the namespace's init, follows by ``--kill-child``, and every
    process of the namespace with it) and its process group."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()


def _run(argv: list[str]) -> None:
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SandboxError(f"{' '.join(argv)} failed: {done.stderr.strip()}")


def _inside(context: Path | None, source: str) -> Path:
    """A COPY source inside the build context (never outside it)."""
    if context is None:
        raise SandboxError(f"COPY {source}: the task has no environment/ folder to copy from")
    path = (context / source).resolve()
    if not path.is_relative_to(context.resolve()) or not path.exists():
        raise SandboxError(f"COPY {source}: not a file or folder inside {context}")
    return path
