"""The namespace sandbox's host side: slots (a folder and a range of host uids each), owners, stale folders.

A sandbox is the folder ``$TMPDIR/trajkit-sbx-N``, made atomically, so slot ``N`` is its alone; the slot owns the
host uids ``UID_BASE + N * UID_SPAN`` .. ``+ UID_SPAN - 1`` (one user namespace's worth). Its ``owner`` file
names the pid and kernel start time of the process that made it; a folder whose owner is gone (a trainer
killed with SIGKILL) is stale: :func:`clean_stale` kills what runs under its uids, unmounts it and deletes it.
"""
from __future__ import annotations

import os
import secrets
import signal
import subprocess
import tempfile
import threading
import time
from pathlib import Path

from trajkit.envs.sandbox.base import SandboxError
from trajkit.envs.sandbox.beneath import DIR_FLAGS, remove_at

UID_BASE, UID_SPAN, SLOTS = 1 << 20, 1 << 16, 4096
PREFIX = "trajkit-sbx-"


def uid_base(slot: int) -> int:
    """The first host uid of slot ``slot`` (its namespace's root)."""
    return UID_BASE + slot * UID_SPAN


def claim_slot() -> tuple[Path, int]:
    """A fresh sandbox folder ``/tmp/trajkit-sbx-N`` (made atomically: N is this sandbox's alone) with the
    ``owner`` file naming this process."""
    for _ in range(64):
        slot = secrets.randbelow(SLOTS)
        root = Path(tempfile.gettempdir()) / f"{PREFIX}{slot}"
        try:
            root.mkdir(mode=0o711)
        except FileExistsError:
            continue
        os.chmod(root, 0o711)  # the sandbox's uids must traverse it to reach merged/
        (root / "owner").write_text(f"{os.getpid()} {_start_time(os.getpid())}\n")
        return root, slot
    raise SandboxError(f"no free sandbox slot in {tempfile.gettempdir()} after 64 tries; "
                       "run `trajkit envs clean` to remove stale sandboxes")


def _start_time(pid: int) -> str | None:
    """The kernel's start time of ``pid`` (field 22 of /proc/PID/stat), None when it is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat[stat.rindex(")") + 2:].split()[19]


def _owner_alive(root: Path) -> bool:
    try:
        pid, start = (root / "owner").read_text().split()
    except (OSError, ValueError):  # no owner yet (being made) or an old folder: stale once a minute old
        try:
            return time.time() - root.stat().st_mtime < 60
        except OSError:
            return True
    return _start_time(int(pid)) == start


def stale_sandboxes() -> list[Path]:
    """Sandbox folders in the temp dir whose owning process is gone (a killed trainer)."""
    found = []
    for root in sorted(Path(tempfile.gettempdir()).glob(f"{PREFIX}*")):
        if root.is_dir() and not root.is_symlink() and not _owner_alive(root):
            found.append(root)
    return found


_CLEANING = threading.Lock()


def clean_stale() -> list[str]:
    """Remove every stale sandbox: kill its processes, unmount its disk, delete its folder. -> their paths.
    Two processes cleaning at once both succeed (a folder already gone is skipped)."""
    removed = []
    with _CLEANING:
        for root in stale_sandboxes():
            slot = root.name[len(PREFIX):]
            if slot.isdigit() and int(slot) < SLOTS:
                kill_range(uid_base(int(slot)))
            remove(root, missing_ok=True)
            removed.append(str(root))
    return removed


def remove(root: Path, missing_ok: bool = False) -> None:
    """Unmount the sandbox's tmpfs (then nothing the sandbox wrote is left to walk) and delete its folder with
    the flat, link-free walk of :func:`~trajkit.envs.sandbox.beneath.remove_at` (any depth, never a recursion)."""
    disk = root / "disk"
    if os.path.ismount(disk):
        try:
            run(["umount", "-l", str(disk)])
        except SandboxError:
            if not missing_ok or os.path.ismount(disk):
                raise
    try:
        parent = os.open(root.parent, DIR_FLAGS)
    except OSError:
        return
    try:
        remove_at(parent, root.name)
    except OSError:  # another process removed it first, or a file of it cannot be removed: left for `envs clean`
        pass
    finally:
        os.close(parent)


def processes_of(base: int) -> list[int]:
    """Host pids whose real uid is one of the sandbox's (``base .. base + UID_SPAN - 1``)."""
    out = []
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                if base <= os.stat(f"/proc/{pid}").st_uid < base + UID_SPAN:
                    out.append(int(pid))
            except FileNotFoundError:
                continue
    return out


def kill_range(base: int | None, timeout_s: float = 10.0) -> None:
    """SIGKILL every process of the sandbox's uids until none is left (raises if one outlives ``timeout_s``)."""
    if base is None:
        return
    deadline = time.monotonic() + timeout_s
    while pids := processes_of(base):
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        if time.monotonic() > deadline:
            raise SandboxError(f"processes of sandbox uid {base} survived SIGKILL: {pids}")
        time.sleep(0.005)


def run(argv: list[str]) -> None:
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SandboxError(f"{' '.join(argv)} failed: {done.stderr.strip()}")


