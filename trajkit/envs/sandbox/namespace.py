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
``/tmp`` and ``/root``. The host's own file operations on that tree (build ``COPY``, ``upload``,
``download``, ``reset_dir``) follow no link and never leave the upper dir (:mod:`trajkit.envs.sandbox.beneath`);
a command's output comes back through pipes (the last ``MAX_OUTPUT`` bytes of each), never a host file; the
tmpfs bounds bytes (``storage_mb``) and files (``inodes``). Nothing is written outside the sandbox folder,
which ``stop`` unmounts and deletes; a
folder whose owner died (a killed trainer) is removed by the next ``start`` or ``trajkit envs clean``. Not
enforced: ``cpus`` (no cgroups), total memory across processes (``RLIMIT_AS`` is per process), seccomp
filtering; see docs/envs.md (the threat model).
"""
from __future__ import annotations

import os
import shutil
import signal
import stat
import subprocess
import threading
import time
from contextlib import contextmanager
from pathlib import Path, PurePosixPath

from trajkit.envs.sandbox.launcher import launcher
from trajkit.envs.sandbox.pipes import collect
from trajkit.envs.sandbox.netns import SLIRP_DNS, attach_network, network_available
from trajkit.envs.sandbox.base import MAX_DOWNLOAD, SYSTEM_PATH, ExecResult, SandboxError, SandboxSpec, bad_variable
from trajkit.envs.sandbox.beneath import (DIR_FLAGS, copy_in, links_below, lstat_at, open_dir, read_regular,
                                          remove_at)
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
            lim = self.spec.limits
            run(["mount", "-t", "tmpfs", "-o", f"size={lim.storage_mb}m,nr_inodes={lim.inodes},mode=711", "tmpfs",
                 str(disk)])
            (disk / "upper").mkdir(mode=0o755)
            (disk / "work").mkdir()
            (self.root / "merged").mkdir()
            (self.root / "inner.sh").write_text(INNER)
            self._layout()
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
    def _layout(self) -> None:
        """Hide every top-level host entry but the userland; make the writable dirs, owned by the sandbox."""
        with self._tree() as upper:
            for entry in os.listdir("/"):
                if entry not in VISIBLE:
                    _hide(upper, entry)
        for rel in (*WRITABLE, self.spec.workdir):
            self._own_dir(self._parts(rel))
        upper = self.root / "disk" / "upper"  # nothing of the sandbox has run yet: these paths are the host's own
        os.chmod(upper / "tmp", 0o1777)
        if self.spec.limits.network:  # the host's resolver may be its own loopback: use slirp4netns' DNS
            self._own_dir(("etc",))
            (upper / "etc" / "resolv.conf").write_text(f"nameserver {SLIRP_DNS}\n")

    def _sandbox_owns(self, parts: tuple[str, ...]) -> bool:
        """Whether what the host makes at the sandbox path ``/parts...`` (a folder, or a file a build step or an
        upload copies) belongs to the sandbox's root. Everywhere but the host's userland (``VISIBLE``) it does;
        in the userland only the working directory and what lies below it do: a checker the image put in
        ``/usr/local/lib`` or a config in ``/etc/app`` stays the host's, readable and never changeable by the
        agent, so a verifier that runs it runs what the task shipped."""
        if parts[0] not in VISIBLE:
            return True
        work = PurePosixPath("/", self.spec.workdir).parts[1:]
        return tuple(parts[:len(work)]) == work

    def _system(self, parts: tuple[str, ...]) -> bool:
        """Whether the sandbox folder ``/parts...`` is a folder of the host's userland (``/usr/...``)."""
        host = "/" + "/".join(parts)
        return parts[0] in VISIBLE and os.path.isdir(host) and not os.path.islink(host)

    def _own_dir(self, parts: tuple[str, ...]) -> None:
        """Make the sandbox folder ``/parts...`` and its parents in the upper dir, following no link. A folder
        the host's userland also has (``/usr/...``, ``/etc/...``) keeps the host's owner and mode; every other
        folder made here, and the folder itself unless it is one of those, belongs to the sandbox's root. ``/``
        is never the sandbox's: with it, the sandbox could replace ``/lib64`` or ``/usr`` for every later
        command."""
        def made(fd: int, sub: tuple[str, ...]) -> None:
            if self._system(sub):
                os.fchmod(fd, os.stat("/" + "/".join(sub)).st_mode & 0o7777)
            elif self._sandbox_owns(sub):
                os.fchown(fd, self.uid, self.uid)
        with self._tree() as upper:
            fd = open_dir(upper, parts, made)
            try:
                if parts and not self._system(parts) and self._sandbox_owns(parts):
                    os.fchown(fd, self.uid, self.uid)
            finally:
                os.close(fd)

    def _build(self) -> None:
        for kind, sources, dest in self.spec.steps:
            if kind == "mkdir":
                self._own_dir(self._parts(dest))
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

    # -- files: every one a dir_fd walk from the upper dir (trajkit.envs.sandbox.beneath) ---------------------
    @contextmanager
    def _tree(self):
        """A descriptor of the upper dir (the sandbox's writable tree), closed after the block."""
        if self.root is None:
            raise SandboxError("the sandbox is not started")
        fd = os.open(self.root / "disk" / "upper", DIR_FLAGS)
        try:
            yield fd
        finally:
            os.close(fd)

    def _parts(self, path: str) -> tuple[str, ...]:
        """The components of the sandbox path ``path``; refuses a relative path, ``..``, ``/`` itself and a
        path through a link of the host's lower layer that the upper dir does not cover (``/lib`` ->
        ``usr/lib``): making it a folder would hide the link. Links in the upper dir are refused by the walk."""
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
        return parts

    def upload(self, source: Path, dest: str) -> None:
        """Copy the host's ``source`` to ``dest`` (a folder's contents into it), link-free on both sides
        (:func:`~trajkit.envs.sandbox.beneath.copy_in`); a file aimed at an existing folder goes into it."""
        with self._lock:
            source, parts = Path(source), self._parts(dest)
            self._own_dir(parts[:-1])
            with self._tree() as upper:
                fd = open_dir(upper, parts[:-1])
                try:
                    old = lstat_at(fd, parts[-1])
                    if old is not None and stat.S_ISDIR(old.st_mode) and stat.S_ISREG(os.lstat(source).st_mode):
                        fd, parent = open_dir(fd, parts[-1:]), fd
                        os.close(parent)
                        parts = (*parts, source.name)
                    copy_in(source, fd, parts[-1], self.uid if self._sandbox_owns(parts) else 0, dest)
                finally:
                    os.close(fd)

    def download(self, source: str, dest: Path, max_bytes: int = MAX_DOWNLOAD) -> None:
        """The sandbox's regular file ``source`` (at most ``max_bytes``) to the host file ``dest``; a link, FIFO,
        device or folder at ``source`` or on its way is ``FileNotFoundError``, never followed, never a hang."""
        with self._lock:
            parts = self._parts(source)
            with self._tree() as upper:
                try:
                    fd = open_dir(upper, parts[:-1])
                except (FileNotFoundError, SandboxError):
                    raise FileNotFoundError(f"{source}: no such file written in the sandbox") from None
                try:
                    data = read_regular(fd, parts[-1], max_bytes, source)
                finally:
                    os.close(fd)
            Path(dest).write_bytes(data)

    def reset_dir(self, path: str) -> None:
        """Make the sandbox folder ``path`` empty, from the host: whatever the sandbox left there or in place of
        a parent folder (files, a symlink, a folder of any depth it cannot enter) is removed, following no link,
        and fresh folders owned as :meth:`_own_dir` says are made. The verifier's ``/tests`` and
        ``/logs/verifier`` start so."""
        with self._lock:
            parts = self._parts_any(path)
            with self._tree() as upper:
                fd = os.dup(upper)
                try:
                    for i, name in enumerate(parts):
                        st = lstat_at(fd, name)
                        if st is None:
                            break
                        if i == len(parts) - 1 or not stat.S_ISDIR(st.st_mode):
                            remove_at(fd, name)
                            if i == 0 and os.path.lexists("/" + name):
                                _hide(fd, name)  # a fresh top-level folder still hides the host's
                            break
                        fd, parent = os.open(name, DIR_FLAGS, dir_fd=fd), fd
                        os.close(parent)
                finally:
                    os.close(fd)
            self._own_dir(parts)

    def written_links(self) -> list[str]:
        """The sandbox path of every symbolic link the sandbox's commands (and its build) wrote: the upper dir
        holds exactly what changed, so nothing of the host's userland is listed and nothing is missed."""
        with self._lock, self._tree() as upper:
            return ["/" + "/".join(parts) for parts in links_below(upper, 4 * self.spec.limits.inodes)]

    def _parts_any(self, path: str) -> tuple[str, ...]:
        """:meth:`_parts` without refusing links of the upper dir on the way (reset_dir removes them)."""
        parts = PurePosixPath("/", path).parts[1:]
        if ".." in parts or not parts or "\0" in path:
            raise SandboxError(f"{path!r}: give an absolute path below / without '..'")
        return parts

    # -- the one way out ------------------------------------------------------------------------------------
    def expose(self, port: int) -> str:
        """Make the host's ``127.0.0.1:port`` (the gateway) reachable from the next commands as
        ``127.0.0.1:port`` inside, without a network: a Unix socket in ``/run/trajkit`` (bind-mounted) and a
        relay started beside each command (:mod:`trajkit.envs.sandbox.relay`). Returns the ``host:port`` to use inside."""
        from trajkit.envs.sandbox import relay

        gw = self.root / "gw"
        gw.mkdir(mode=0o755, exist_ok=True)
        shutil.copy(relay.__file__, gw / "relay.py")
        self._own_dir(self._parts("/run/trajkit"))
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
        for line in self._passwd().splitlines():
            fields = line.split(":")
            if len(fields) > 3 and user in (fields[0], fields[2]) and fields[2].isdigit() and fields[3].isdigit():
                uid, gid = int(fields[2]), int(fields[3])
                if uid < UID_SPAN and gid < UID_SPAN:
                    return uid, gid
                raise SandboxError(f"user {user!r} has uid {uid}, gid {gid}: the sandbox maps only 0..{UID_SPAN - 1}")
        raise SandboxError(f"user {user!r} is not in the sandbox's /etc/passwd")

    def _passwd(self) -> str:
        """The sandbox's ``/etc/passwd``: its own (a regular file of at most 1 MiB, read without following a
        link) when it wrote one, else the host's."""
        with self._tree() as upper:
            try:
                fd = open_dir(upper, ("etc",))
            except FileNotFoundError:
                return Path("/etc/passwd").read_text(encoding="utf-8", errors="replace")
            try:
                data = read_regular(fd, "passwd", 1 << 20, "/etc/passwd")
            except FileNotFoundError:
                data = Path("/etc/passwd").read_bytes()
            finally:
                os.close(fd)
        return data.decode("utf-8", errors="replace")

    def exec(self, command: str, timeout_s: float, user: str | None = None, env: dict[str, str] | None = None,
             cwd: str | None = None) -> ExecResult:
        if self.root is None:
            raise SandboxError("the sandbox is not started (call start first)")
        if not timeout_s > 0:  # NaN too
            raise SandboxError(f"timeout_s must be a positive number of seconds, got {timeout_s!r}")
        base = {"PATH": PATH, "HOME": "/root", "LANG": "C.UTF-8", "TERM": "dumb", **self.spec.env, **(env or {})}
        bad = bad_variable(base)
        if bad is not None:
            raise SandboxError(f"environment variable {bad!r}: a name needs no '=' or NUL, a value no NUL")
        argv = self._argv(self._with_relay(command), user, base, cwd or self.spec.workdir)
        ready = self.root / "net.ready"
        outer_env = {"SBX": str(self.root), "PATH": PATH, **({"NETWAIT": str(ready)} if self.spec.limits.network else {})}
        with self._lock:
            t0 = time.perf_counter()
            self._proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                          stderr=subprocess.PIPE, env=outer_env, start_new_session=True)
            try:
                net = attach_network(self._proc, ready) if self.spec.limits.network else None
            except BaseException:
                _kill(self._proc)
                self._proc = None
                kill_range(self.uid)
                raise
            try:
                (out, err), timed_out = collect(self._proc, timeout_s, _kill, lambda: kill_range(self.uid))
            finally:
                if net is not None:
                    net.close()
                ready.unlink(missing_ok=True)
            kill_range(self.uid)
            code = None if timed_out else self._proc.returncode
            self._proc = None
            return ExecResult(code, _text(out), _text(err), time.perf_counter() - t0, timed_out)


def _hide(upper: int, entry: str) -> None:
    """Hide the host's top-level ``entry`` in the upper dir (the descriptor ``upper``): an empty opaque folder,
    or a whiteout."""
    if entry in MOUNTED or os.path.isdir(os.path.join("/", entry)) and not os.path.islink("/" + entry):
        os.mkdir(entry, 0o755, dir_fd=upper)
        fd = os.open(entry, DIR_FLAGS, dir_fd=upper)
        try:
            os.setxattr(fd, "trusted.overlay.opaque", b"y")
        finally:
            os.close(fd)
    else:
        os.mknod(entry, 0o600 | 0o020000, os.makedev(0, 0), dir_fd=upper)  # a whiteout: the entry is gone


def _text(data: bytes) -> str:
    return data.decode("utf-8", errors="replace")


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
