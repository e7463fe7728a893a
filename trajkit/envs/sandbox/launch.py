"""The namespace sandbox's launcher: the last trusted program of every ``exec``, run by the host's Python.

Run as ``python3 -I -S launch.py ROOT CWD UID GID BASE SPAN CAPS LIMITS COMMAND [NAME=VALUE ...]`` (stdlib
only, no site, no trajkit import, no json: each import is paid on every ``exec``) by the sandbox's mount and
pid namespace as host root, after the overlay is mounted. It is the namespace's pid 1 and stays host root:
no process of the sandbox can signal or ptrace it, and when it exits the kernel kills every process of the
namespace. It forks one child, which:

1. enters a new user namespace whose uids and gids ``0 .. span-1`` are the host's ``base .. base+span-1``
   (the map is written by pid 1, which is privileged; a sandbox's processes are exactly that host range);
2. becomes uid 0 there, sets the resource limits, ``chroot``s into the overlay and changes to ``/``;
3. drops from its capability bounding set every capability but ``caps`` (none for a non-root ``uid``), clears
   the ambient set, sets ``no_new_privs`` and, for a non-root ``uid``, changes to it (the kernel then clears
   every capability);
4. changes to the working directory (exit 126 when it cannot) and ``execve``s ``/bin/sh -c COMMAND``.

Nothing from the sandbox's own tree runs before step 4: the launcher's interpreter and libraries were loaded
from the host before the ``chroot``, and the steps after it are system calls. The first program of the
sandbox's tree to run is the shell, already without the capabilities it must not have (``sys_chroot``,
``sys_admin``, ``sys_ptrace``, ``mknod``, ...). A failure before ``execve`` exits 125 with the reason on
stderr.

``CAPS`` is a comma-separated list of capability numbers, ``LIMITS`` of ``NAME=VALUE`` (``resource.RLIMIT_*``
names: ``NPROC=256,AS=536870912``), and the rest is the command's environment.
"""
import ctypes
import os
import resource
import sys

CLONE_NEWUSER = 0x10000000
PR_CAPBSET_DROP = 24
PR_SET_NO_NEW_PRIVS = 38
PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL = 47, 4


def parse(argv: list[str]) -> dict:
    """The launcher's arguments -> its spec.

    >>> parse(["/m", "/app", "0", "0", "1048576", "65536", "0,1", "NPROC=8", "true", "A=b=c"])["env"]
    {'A': 'b=c'}
    """
    root, cwd, uid, gid, base, span, caps, limits, command, *env = argv
    return {"root": root, "cwd": cwd, "uid": int(uid), "gid": int(gid), "base": int(base), "span": int(span),
            "caps": [int(c) for c in caps.split(",") if c], "command": command,
            "limits": {k: int(v) for k, v in (item.split("=") for item in limits.split(",") if item)},
            "env": dict(item.split("=", 1) for item in env)}


def main() -> int:
    spec = parse(sys.argv[1:])
    libc = ctypes.CDLL(None, use_errno=True)
    last_cap = int(open("/proc/sys/kernel/cap_last_cap").read())
    ready_r, ready_w = os.pipe()
    go_r, go_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(ready_r)
        os.close(go_w)
        _child(spec, libc, last_cap, ready_w, go_r)  # never returns
    os.close(ready_w)
    os.close(go_r)
    if os.read(ready_r, 1) == b"u":
        for name in ("uid_map", "gid_map"):
            with open(f"{spec['root']}/proc/{pid}/{name}", "w") as f:  # the namespace's own /proc
                f.write(f"0 {spec['base']} {spec['span']}\n")
        os.write(go_w, b"g")
    os.close(go_w)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status) if os.WIFEXITED(status) else 128 + os.WTERMSIG(status)


def _child(spec: dict, libc, last_cap: int, ready_w: int, go_r: int) -> None:
    try:
        if libc.unshare(CLONE_NEWUSER) != 0:
            raise OSError(ctypes.get_errno(), "unshare(CLONE_NEWUSER)")
        os.write(ready_w, b"u")
        if os.read(go_r, 1) != b"g":
            raise OSError("the uid map was not written")
        os.setresgid(0, 0, 0)
        os.setgroups([])
        os.setresuid(0, 0, 0)
        for name, value in spec["limits"].items():
            resource.setrlimit(getattr(resource, f"RLIMIT_{name}"), (value, value))
        os.chroot(spec["root"])
        os.chdir("/")
        keep = set(spec["caps"]) if spec["uid"] == 0 else set()
        for cap in range(last_cap + 1):
            if cap not in keep and libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0:
                raise OSError(ctypes.get_errno(), f"prctl(PR_CAPBSET_DROP, {cap})")
        libc.prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)
        if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS)")
        if spec["uid"] != 0:
            os.setresgid(spec["gid"], spec["gid"], spec["gid"])
            os.setresuid(spec["uid"], spec["uid"], spec["uid"])
    except BaseException as exc:  # noqa: BLE001 - anything: report it, never run the command
        os.write(2, f"trajkit sandbox launcher: {exc}\n".encode())
        os._exit(125)
    try:
        os.chdir(spec["cwd"])
    except OSError as exc:
        os.write(2, f"sh: cd: {spec['cwd']}: {exc.strerror}\n".encode())
        os._exit(126)
    try:
        os.execve("/bin/sh", ["sh", "-c", spec["command"]], spec["env"])
    except OSError as exc:
        os.write(2, f"trajkit sandbox launcher: /bin/sh: {exc}\n".encode())
        os._exit(127)


if __name__ == "__main__":
    sys.exit(main())
