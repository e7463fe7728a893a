"""The daemon-less sandbox: Linux namespaces, an overlay over the host's ``/``, ``chroot`` and a launcher.

Needs root and util-linux (``unshare``, ``setpriv``, ``mount``), ``ip`` for the loopback interface; no daemon,
no cgroups. One sandbox is a folder ``/tmp/trajkit-sbx-N`` (``N`` its slot: the sandbox owns the host uids
``UID_BASE + N * UID_SPAN ..`` and ``UID_SPAN`` after it) holding a tmpfs (``storage_mb``: the disk quota of
everything the trial writes) with the overlay's upper and work dirs, and an ``owner`` file (pid and start
time of the process that made it). Each ``exec`` is:

1. ``setpriv --pdeathsig KILL unshare --mount --pid --ipc --uts --net --fork --kill-child``: a private mount
   table, its own process tree and its own network namespace (only ``lo``); if the calling process dies, the
   namespace dies with it. A task with the network gets a user-mode stack in it (``slirp4netns``, Harbor's
   private network with outbound access): ``tap0`` at 10.0.2.100, DNS at 10.0.2.3, and no way to the host's
   loopback (``--disable-host-loopback``), its Unix sockets or its interfaces;
2. in there, ``mount -t overlay`` (lower = the host's ``/``, upper = the trial's tmpfs), a fresh ``/proc``, a
   tmpfs ``/dev`` holding only null, zero, full, random, urandom and tty, an empty ``/sys``; ``lo`` up;
3. the launcher (``launch.c``, built once with the host's C compiler into trajkit's cache; else the same steps
   in :mod:`trajkit.envs.sandbox.launch` on the host's Python) as the namespace's pid 1 (host root, which no sandbox
   process can signal or trace): its child enters a user namespace mapping uids ``0 .. UID_SPAN-1`` to the
   sandbox's host uids, sets the limits (address space = ``memory_mb``, file size, process count = ``nproc``,
   open files), ``chroot``s, keeps of its capabilities only Docker's default set less ``sys_chroot`` and
   ``mknod`` (none for another user) with ``no_new_privs``, and only then runs the first program of the
   sandbox's tree: ``sh -c COMMAND`` in the working directory;
4. at the end (or at the time limit, when the outer ``unshare`` is killed) pid 1 exits, and with it every
   process of the namespace; any process of the sandbox's uids still alive is then killed (SIGKILL).

The upper dir hides the host: every top-level entry of ``/`` except ``bin sbin lib* usr etc var`` is an empty
opaque directory (``/root``, ``/home``, ``/tmp``, ``/work``, ...) or a whiteout. ``/`` itself and the host's
``/usr``, ``/etc``, ``/var`` keep the host's owner, a uid outside the user namespace: the sandbox can neither
write them nor replace a top-level entry. Writes go to the workdir, ``/logs``, ``/tests``, ``/solution``,
``/tmp`` and ``/root``. Nothing is written outside the sandbox folder, which ``stop`` unmounts and deletes; a
folder whose owner died (a killed trainer) is removed by the next ``start`` or ``trajkit envs clean``. Not
enforced: ``cpus`` (no cgroups), total memory across processes (``RLIMIT_AS`` is per process), seccomp
filtering; see docs/envs.md (the threat model).
"""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from pathlib import Path, PurePosixPath

from trajkit.envs.sandbox.launcher import launcher
from trajkit.envs.sandbox.netns import SLIRP_DNS, attach_network, network_available
from trajkit.envs.sandbox.base import MAX_OUTPUT, SYSTEM_PATH, ExecResult, SandboxError, SandboxSpec, bad_variable
from trajkit.envs.sandbox.slots import UID_SPAN, claim_slot, uid_base, clean_stale, kill_range, remove, run

VISIBLE = ("bin", "sbin", "lib", "lib32", "lib64", "libx32", "usr", "etc", "var")
MOUNTED = ("proc", "dev", "sys")
WRITABLE = ("tmp", "root", "logs", "logs/verifier", "logs/agent", "tests", "solution")
DEVICES = ("null", "zero", "full", "random", "urandom", "tty")
PATH = SYSTEM_PATH
TOOLS = ("unshare", "setpriv", "mount", "umount", "ip")
# Docker's default capability set without sys_chroot and mknod; inside the user namespace they act only on
# files the sandbox owns: what a task's root needs to chown, chmod and delete its own files
CAPS = {"chown": 0, "dac_override": 1, "fowner": 3, "fsetid": 4, "kill": 5, "setgid": 6, "setuid": 7,
        "setpcap": 8, "net_bind_service": 10, "net_raw": 13, "audit_write": 29, "setfcap": 31}

INNER = """set -e
mount -t overlay overlay -o "lowerdir=/,upperdir=$SBX/disk/upper,workdir=$SBX/disk/work" "$SBX/merged"
mount -t proc proc "$SBX/merged/proc"
mount -t tmpfs -o mode=755,size=64k tmpfs "$SBX/merged/dev"
for n in DEVICES; do : > "$SBX/merged/dev/$n"; mount --bind "/dev/$n" "$SBX/merged/dev/$n"; done
mount -t tmpfs -o ro,size=4k tmpfs "$SBX/merged/sys"
ip link set lo up
if [ -n "$NETWAIT" ]; then n=0; while [ ! -e "$NETWAIT" ]; do n=$((n+1)); [ $n -lt 2000 ] || exit 125; sleep 0.005; done; fi
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
    """See the module docstring. ``exec``, ``upload`` and ``download`` are serialized: no process of the
    sandbox runs while the host touches its files. ``uid`` is the host uid of the sandbox's root; its other
    users are ``uid + 1 .. uid + UID_SPAN - 1``."""

    def __init__(self, spec: SandboxSpec):
        self.spec = spec
        self.root: Path | None = None
        self.uid: int | None = None
        self._lock = threading.Lock()
        self._proc: subprocess.Popen | None = None
        self._relay = None  # (host listener, inside port) once expose() was called
        self.build_log: list[ExecResult] = []

    # -- lifecycle ------------------------------------------------------------------------------------------
    def start(self) -> None:
        why = available() or (network_available() if self.spec.limits.network else None)
        if why:
            raise SandboxError(f"namespace sandbox: {why}")
        clean_stale()
        self.root, slot = claim_slot()
        self.uid = uid_base(slot)
        try:
            disk = self.root / "disk"
            disk.mkdir()
            run(["mount", "-t", "tmpfs", "-o", f"size={self.spec.limits.storage_mb}m,mode=711", "tmpfs", str(disk)])
            (disk / "upper").mkdir(mode=0o755)
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
        if self.root is None:
            return
        kill_range(self.uid)
        remove(self.root)
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
            if entry not in VISIBLE:
                _hide(upper, entry)
        for rel in (*WRITABLE, self.spec.workdir):
            self._own_dir(self._upper(rel))
        os.chmod(upper / "tmp", 0o1777)
        if self.spec.limits.network:  # the host's resolver may be its own loopback: use slirp4netns' DNS
            self._own_dir(upper / "etc")
            (upper / "etc" / "resolv.conf").write_text(f"nameserver {SLIRP_DNS}\n")

    def _own_dir(self, path: Path) -> None:
        """Make the upper-dir folder ``path`` and its parents. A folder the host's userland also has
        (``/usr/...``, ``/etc/...``) keeps the host's owner and mode; every other folder made here, and
        ``path`` itself unless it is one of those, belongs to the sandbox's root. ``/`` is never the sandbox's:
        with it, the sandbox could replace ``/lib64`` or ``/usr`` for every later command."""
        upper = self.root / "disk" / "upper"
        parts = path.relative_to(upper).parts
        for i in range(1, len(parts) + 1):
            p, host = upper.joinpath(*parts[:i]), "/" + "/".join(parts[:i])
            system = parts[0] in VISIBLE and os.path.isdir(host) and not os.path.islink(host)
            if not os.path.lexists(p):
                p.mkdir()
                if system:
                    os.chmod(p, os.stat(host).st_mode & 0o7777)
                    continue
            elif system or i < len(parts):
                continue
            os.lchown(p, self.uid, self.uid)

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
        """The upper-dir path of the sandbox path ``path``; refuses a relative path, ``..``, ``/`` itself and a
        path through a symlink (in the upper dir or the host's lower layer), which a host-side copy would
        follow out of the sandbox."""
        if self.root is None:
            raise SandboxError("the sandbox is not started")
        parts = PurePosixPath("/", path).parts[1:]
        if ".." in parts or not parts or "\0" in path:
            raise SandboxError(f"{path!r}: give an absolute path below / without '..'")
        upper = self.root / "disk" / "upper"
        for i in range(1, len(parts)):
            rel = os.path.join(*parts[:i])
            if os.path.islink(upper / rel) or (not os.path.lexists(upper / rel) and os.path.islink("/" + rel)):
                raise SandboxError(f"{path!r}: /{rel} is a symbolic link; give the real path")
        return upper.joinpath(*parts)

    def upload(self, source: Path, dest: str) -> None:
        with self._lock:
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
        with self._lock:
            path = self._upper(source)
            if path.is_symlink() or not path.is_file():
                raise FileNotFoundError(f"{source}: no such file written in the sandbox")
            shutil.copyfile(path, dest)

    def reset_dir(self, path: str) -> None:
        """Make the sandbox folder ``path`` empty, from the host: whatever the sandbox left there or in place of
        a parent folder (files, a symlink, a folder it cannot enter) is removed, and fresh folders owned as
        :meth:`_own_dir` says are made. The verifier's ``/tests`` and ``/logs/verifier`` start so."""
        with self._lock:
            if self.root is None:
                raise SandboxError("the sandbox is not started")
            upper = self.root / "disk" / "upper"
            parts = PurePosixPath("/", path).parts[1:]
            for i in range(1, len(parts) + 1):
                p = upper.joinpath(*parts[:i])
                if os.path.lexists(p) and (p.is_symlink() or not p.is_dir() or i == len(parts)):
                    shutil.rmtree(p) if p.is_dir() and not p.is_symlink() else p.unlink()
                    if i == 1 and os.path.lexists("/" + parts[0]):
                        _hide(upper, parts[0])  # a fresh top-level folder still hides the host's
            self._own_dir(self._upper(path))

    # -- the one way out ------------------------------------------------------------------------------------
    def expose(self, port: int) -> str:
        """Make the host's ``127.0.0.1:port`` (the gateway) reachable from the next commands as
        ``127.0.0.1:port`` inside, without a network: a Unix socket in ``/run/trajkit`` (bind-mounted) and a
        relay started beside each command (:mod:`trajkit.envs.sandbox.relay`). Returns the ``host:port`` to use inside."""
        from trajkit.envs.sandbox import relay

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
        outer = ["setpriv", "--pdeathsig", "KILL", "unshare", "--mount", "--pid", "--ipc", "--uts", "--net",
                 "--fork", "--kill-child"]
        uid, gid = (0, 0) if user in (None, "root", "0") else self._lookup(user)
        limits = {"NPROC": lim.nproc, "AS": lim.memory_mb << 20, "FSIZE": lim.file_mb << 20, "NOFILE": lim.nofile,
                  "CORE": 0}
        return [*outer, "sh", str(self.root / "inner.sh"), *launcher(), str(self.root / "merged"), cwd,
                str(uid), str(gid), str(self.uid), str(UID_SPAN), ",".join(map(str, sorted(CAPS.values()))), ",".join(f"{k}={v}" for k, v in limits.items()),
                command, *(f"{k}={v}" for k, v in env.items())]

    def _lookup(self, user: str) -> tuple[int, int]:
        """(uid, gid) inside the sandbox of ``user`` (a name or number) in the sandbox's /etc/passwd."""
        upper = self.root / "disk" / "upper" / "etc" / "passwd"
        passwd = (upper if upper.is_file() and not upper.is_symlink() else Path("/etc/passwd"))
        for line in passwd.read_text(encoding="utf-8", errors="replace").splitlines():
            fields = line.split(":")
            if len(fields) > 3 and user in (fields[0], fields[2]) and fields[2].isdigit() and fields[3].isdigit():
                uid, gid = int(fields[2]), int(fields[3])
                if uid < UID_SPAN and gid < UID_SPAN:
                    return uid, gid
                raise SandboxError(f"user {user!r} has uid {uid}, gid {gid}: the sandbox maps only 0..{UID_SPAN - 1}")
        raise SandboxError(f"user {user!r} is not in the sandbox's /etc/passwd")

    def exec(self, command: str, timeout_s: float, user: str | None = None, env: dict[str, str] | None = None,
             cwd: str | None = None) -> ExecResult:
        if self.root is None:
            raise SandboxError("the sandbox is not started (call start first)")
        base = {"PATH": PATH, "HOME": "/root", "LANG": "C.UTF-8", "TERM": "dumb", **self.spec.env, **(env or {})}
        bad = bad_variable(base)
        if bad is not None:
            raise SandboxError(f"environment variable {bad!r}: a name needs no '=' or NUL, a value no NUL")
        argv = self._argv(self._with_relay(command), user, base, cwd or self.spec.workdir)
        ready = self.root / "net.ready"
        outer_env = {"SBX": str(self.root), "PATH": PATH, **({"NETWAIT": str(ready)} if self.spec.limits.network else {})}
        with self._lock, tempfile.TemporaryFile(dir=self.root) as out, tempfile.TemporaryFile(dir=self.root) as err:
            t0 = time.perf_counter()
            self._proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=err, env=outer_env,
                                          start_new_session=True)
            try:
                net = attach_network(self._proc, ready) if self.spec.limits.network else None
            except BaseException:
                _kill(self._proc)
                self._proc = None
                kill_range(self.uid)
                raise
            try:
                code, timed_out = self._proc.wait(timeout=timeout_s), False
            except subprocess.TimeoutExpired:
                _kill(self._proc)
                code, timed_out = None, True
            finally:
                if net is not None:
                    net.close()
                ready.unlink(missing_ok=True)
            kill_range(self.uid)
            seconds = time.perf_counter() - t0
            self._proc = None
            return ExecResult(code, _tail(out), _tail(err), seconds, timed_out)


def _hide(upper: Path, entry: str) -> None:
    """Hide the host's top-level ``entry`` in the upper dir: an empty opaque folder, or a whiteout."""
    target = upper / entry
    if entry in MOUNTED or os.path.isdir(os.path.join("/", entry)) and not os.path.islink("/" + entry):
        target.mkdir()
        os.setxattr(target, "trusted.overlay.opaque", b"y")
    else:
        os.mknod(target, 0o600 | 0o020000, os.makedev(0, 0))  # a whiteout: the entry is gone


def _tail(fh) -> str:
    size = fh.seek(0, os.SEEK_END)
    fh.seek(max(0, size - MAX_OUTPUT))
    return fh.read().decode("utf-8", errors="replace")


def _kill(proc: subprocess.Popen) -> None:
    """SIGKILL the outer ``unshare`` (its child, the namespace's pid 1, follows by ``--kill-child``, and every
    process of the namespace with it) and its process group."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()


def _inside(context: Path | None, source: str) -> Path:
    """A COPY source inside the build context (never outside it, nor through a symlinked context)."""
    if context is None:
        raise SandboxError(f"COPY {source}: the task has no environment/ folder to copy from")
    if context.is_symlink():
        raise SandboxError(f"COPY {source}: {context} is a symbolic link; the build context must be a real folder")
    path = (context / source).resolve()
    if not path.is_relative_to(context.resolve()) or not path.exists():
        raise SandboxError(f"COPY {source}: not a file or folder inside {context}")
    return path
