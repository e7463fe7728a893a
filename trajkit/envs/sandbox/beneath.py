"""File operations on a sandbox's tree from the host that never follow a link and never leave their root.

The host writes a sandbox's files as root, so a path it follows is a path the sandbox chose: a symbolic link
that a task copied in, or a command made, would carry a host-side write anywhere (``../../../..`` from the
upper dir is the host's ``/``). Here no operation takes a path string into the sandbox's tree. Each one starts
from the descriptor of the tree's root and opens every component relative to its parent's descriptor with
``O_NOFOLLOW | O_DIRECTORY`` (a link, a file or a missing folder on the way is an error, never followed); the
last component is made with ``O_CREAT | O_EXCL | O_NOFOLLOW`` after what stood there is unlinked, or read with
``O_NOFOLLOW | O_NONBLOCK`` and kept only if ``fstat`` says it is a regular file (a FIFO never blocks, a
device or a folder is "no such file"). Python has no ``openat2(RESOLVE_BENEATH)``: the ``dir_fd`` walk is the
same rule spelled one component at a time. ``..`` never occurs (callers pass normalised components).

Every walk is iterative and bounded: a copy from the host visits at most ``MAX_ENTRIES`` entries ``MAX_DEPTH``
deep; removing a tree the sandbox made (any depth, any width) moves each sub-folder up into the folder being
removed before emptying it, so it holds at most three descriptors and no recursion.
"""
from __future__ import annotations

import errno
import os
import stat
from pathlib import Path
from typing import Callable, Sequence

from trajkit.envs.sandbox.base import SandboxError

DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
MAX_DEPTH, MAX_ENTRIES = 64, 10_000  # a copy from the host (a task's part); task folders are held to the same
CHUNK = 1 << 20


def _where(parts: Sequence[str]) -> str:
    return "/" + "/".join(parts)


def open_dir(root_fd: int, parts: Sequence[str], made: Callable[[int, tuple[str, ...]], None] | None = None) -> int:
    """A new descriptor of the folder ``root/parts...``, each component opened without following a link.
    A missing folder is made (mode 755) when ``made`` is given, which is then called with its descriptor and
    its components (to set its owner); else ``FileNotFoundError``. A link or a file on the way is a
    :class:`SandboxError` naming it."""
    fd = os.dup(root_fd)
    try:
        for i, name in enumerate(parts):
            try:
                nxt = os.open(name, DIR_FLAGS, dir_fd=fd)
            except FileNotFoundError:
                if made is None:
                    raise
                os.mkdir(name, 0o755, dir_fd=fd)
                nxt = os.open(name, DIR_FLAGS, dir_fd=fd)
                made(nxt, tuple(parts[:i + 1]))
            except OSError as exc:
                if exc.errno not in (errno.ELOOP, errno.ENOTDIR):
                    raise
                raise SandboxError(f"{_where(parts)}: {_where(parts[:i + 1])} is a symbolic link or not a folder; "
                                   "give the real path") from None
            os.close(fd)
            fd = nxt
        return fd
    except BaseException:
        os.close(fd)
        raise


def lstat_at(dir_fd: int, name: str) -> os.stat_result | None:
    try:
        return os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return None


def read_regular(dir_fd: int, name: str, max_bytes: int, where: str) -> bytes:
    """The regular file ``name`` in ``dir_fd``, at most ``max_bytes`` (more is a :class:`SandboxError`); a link,
    FIFO, device, socket or folder there is ``FileNotFoundError`` ("no such file written")."""
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC, dir_fd=dir_fd)
    except OSError as exc:
        if exc.errno in (errno.ENOENT, errno.ELOOP, errno.ENXIO, errno.ENODEV, errno.EISDIR, errno.ENOTDIR):
            raise FileNotFoundError(f"{where}: no such file written in the sandbox") from None
        raise
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise FileNotFoundError(f"{where}: no such file written in the sandbox (not a regular file)")
        chunks, size = [], 0
        while size <= max_bytes and (chunk := os.read(fd, min(CHUNK, max_bytes + 1 - size))):
            chunks.append(chunk)
            size += len(chunk)
    finally:
        os.close(fd)
    if size > max_bytes:
        raise SandboxError(f"{where} is larger than {max_bytes} bytes; it is not read")
    return b"".join(chunks)


def remove_at(dir_fd: int, name: str) -> None:
    """Remove ``name`` from the folder ``dir_fd`` (a file, a link, or a folder tree of any depth), following no
    link: each sub-folder met is first moved up into the folder being removed, so the walk stays flat."""
    st = lstat_at(dir_fd, name)
    if st is None:
        return
    if not stat.S_ISDIR(st.st_mode):
        os.unlink(name, dir_fd=dir_fd)
        return
    top = os.open(name, DIR_FLAGS, dir_fd=dir_fd)
    try:
        serial = 0
        while entries := [(e.name, e.is_dir(follow_symlinks=False)) for e in os.scandir(top)]:
            for entry, is_dir in entries:
                if not is_dir:
                    os.unlink(entry, dir_fd=top)
                    continue
                sub = os.open(entry, DIR_FLAGS, dir_fd=top)
                try:
                    for inner in list(os.scandir(sub)):  # read whole before entries move out of it
                        if not inner.is_dir(follow_symlinks=False):
                            os.unlink(inner.name, dir_fd=sub)
                            continue
                        while lstat_at(top, f".rm{serial}") is not None:
                            serial += 1
                        os.rename(inner.name, f".rm{serial}", src_dir_fd=sub, dst_dir_fd=top)
                finally:
                    os.close(sub)
                os.rmdir(entry, dir_fd=top)
    finally:
        os.close(top)
    os.rmdir(name, dir_fd=dir_fd)


def _copy_file(src: str, dst_fd: int, name: str, uid: int, where: str) -> None:
    """The host's regular file ``src`` (opened without following a link) to a fresh ``name`` in ``dst_fd``,
    owned by ``uid``, with its permission bits (no set-id bits) and times."""
    fd_in = os.open(src, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        st = os.fstat(fd_in)
        if not stat.S_ISREG(st.st_mode):
            raise SandboxError(f"{src}: not a regular file; only files, folders and links are copied in")
        old = lstat_at(dst_fd, name)
        if old is not None and stat.S_ISDIR(old.st_mode):
            raise SandboxError(f"{where}: a folder stands where the file {src} goes")
        if old is not None:
            os.unlink(name, dir_fd=dst_fd)
        fd_out = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600,
                         dir_fd=dst_fd)
        try:
            offset = 0
            while sent := os.sendfile(fd_out, fd_in, offset, CHUNK):
                offset += sent
            os.fchown(fd_out, uid, uid)
            os.fchmod(fd_out, stat.S_IMODE(st.st_mode) & 0o777)
            os.utime(fd_out, ns=(st.st_atime_ns, st.st_mtime_ns))
        finally:
            os.close(fd_out)
    finally:
        os.close(fd_in)


def _child_dir(dst_fd: int, name: str, uid: int, mode: int) -> int:
    """A descriptor of the real folder ``name`` in ``dst_fd``; whatever else stands there is removed first."""
    old = lstat_at(dst_fd, name)
    if old is not None and not stat.S_ISDIR(old.st_mode):
        os.unlink(name, dir_fd=dst_fd)
        old = None
    if old is None:
        os.mkdir(name, 0o700, dir_fd=dst_fd)
    fd = os.open(name, DIR_FLAGS, dir_fd=dst_fd)
    os.fchown(fd, uid, uid)
    os.fchmod(fd, mode & 0o1777)
    return fd


def copy_in(src: Path, dst_fd: int, name: str, uid: int, where: str) -> None:
    """Copy the host's ``src`` to ``name`` in the sandbox folder ``dst_fd``: a file as the file ``name``, a
    folder's contents into the folder ``name`` (merged with what is there). Links are copied as links, never
    followed on either side; anything but files, folders and links is a :class:`SandboxError`, as is a tree
    deeper than ``MAX_DEPTH`` or larger than ``MAX_ENTRIES``. Everything written belongs to ``uid``. Folders
    still to copy are kept as components below ``name`` and reopened by :func:`open_dir` (two descriptors
    open, however wide the tree)."""
    st = os.lstat(src)
    if stat.S_ISREG(st.st_mode):
        return _copy_file(str(src), dst_fd, name, uid, where)
    if not stat.S_ISDIR(st.st_mode):
        raise SandboxError(f"{src}: only a file or a real folder can be copied into the sandbox")
    top = _child_dir(dst_fd, name, uid, st.st_mode)
    stack, count = [(str(src), ())], 0
    try:
        while stack:
            folder, parts = stack.pop()
            fd = open_dir(top, parts)
            try:
                with os.scandir(folder) as entries:
                    for entry in entries:
                        count += 1
                        if count > MAX_ENTRIES or len(parts) >= MAX_DEPTH:
                            raise SandboxError(f"{src}: more than {MAX_ENTRIES} entries or {MAX_DEPTH} levels")
                        if _copy_entry(entry, fd, uid, f"{where}/{'/'.join((*parts, entry.name))}"):
                            stack.append((entry.path, (*parts, entry.name)))
            finally:
                os.close(fd)
    finally:
        os.close(top)


def _copy_entry(entry: os.DirEntry, fd: int, uid: int, where: str) -> bool:
    """Copy one entry into ``fd``; True for a folder (made here, its contents still to copy)."""
    st = entry.stat(follow_symlinks=False)
    if stat.S_ISDIR(st.st_mode):
        os.close(_child_dir(fd, entry.name, uid, st.st_mode))
        return True
    if stat.S_ISLNK(st.st_mode):
        remove_at(fd, entry.name)
        os.symlink(os.readlink(entry.path), entry.name, dir_fd=fd)
        os.chown(entry.name, uid, uid, dir_fd=fd, follow_symlinks=False)
    else:
        _copy_file(entry.path, fd, entry.name, uid, where)
    return False


def links_below(root_fd: int, limit: int) -> list[tuple[str, ...]]:
    """The components of every symbolic link in the tree ``root_fd`` (an upper dir: exactly what the sandbox
    wrote), found by an iterative walk that follows no link and holds two descriptors; past ``limit`` entries a
    :class:`SandboxError` (the tree's inode limit bounds it first)."""
    found, stack, count = [], [()], 0
    while stack:
        parts = stack.pop()
        fd = open_dir(root_fd, parts)
        try:
            with os.scandir(fd) as entries:
                for entry in entries:
                    count += 1
                    if count > limit:
                        raise SandboxError(f"more than {limit} entries written in the sandbox")
                    if entry.is_symlink():
                        found.append((*parts, entry.name))
                    elif entry.is_dir(follow_symlinks=False):
                        stack.append((*parts, entry.name))
        finally:
            os.close(fd)
    return sorted(found)
