"""What a task folder may hold, checked before anything of it is read or copied.

A task's parts are copied into a sandbox (``environment/`` by ``COPY``, ``solution/`` and ``tests/`` by
uploads) and read on the host (``task.toml``, ``instruction.md``, the Dockerfile). So a task folder holds only:

- regular files, real folders, and symbolic links that stay inside the part they are in *after copying*: a
  relative target that, read from the link's own folder, never climbs out of the part (``environment/``,
  ``solution/``, ``tests/``), and whose real path on the host stays inside it too (a chain of links through
  ``..`` cannot reach farther than each link alone);
- no device node, FIFO or socket (reading a FIFO blocks forever; a device is the host's), no absolute link, no
  part that is itself a link, no tree deeper than ``MAX_DEPTH`` or larger than ``MAX_ENTRIES`` entries.

The walk is iterative over ``os.scandir`` with ``lstat`` (nothing is followed, nothing is opened but folders),
so a 1,500-deep folder is one :class:`TaskError`, not a ``RecursionError``. Text files are read through
:func:`read_bounded`: at most ``MAX_TEXT_BYTES``, opened non-blocking, and only if a regular file. Parsed TOML
is at most ``MAX_TOML_DEPTH`` tables or arrays deep, and every time limit finite and within
``[MIN_TIMEOUT_S, MAX_TIMEOUT_S]``.
"""
from __future__ import annotations

import os
import stat
import sys
from pathlib import Path
from typing import Any

from trajkit.envs.sandbox.beneath import MAX_DEPTH, MAX_ENTRIES
from trajkit.errors import InputError

MAX_TEXT_BYTES = 1 << 20  # task.toml, instruction.md, the Dockerfile, solve.sh
MAX_TOML_DEPTH = 32
MAX_TIMEOUT_S = 24 * 3600.0
MIN_TIMEOUT_S = 1e-3  # 5e-324 is > 0, yet 0.0 (not a limit) once scaled by a timeout_multiplier < 1
COPIED = ("environment", "solution", "tests")
KINDS = {stat.S_IFIFO: "a FIFO (named pipe)", stat.S_IFSOCK: "a socket", stat.S_IFCHR: "a character device",
         stat.S_IFBLK: "a block device"}


class TaskError(InputError):
    """A task folder cannot be used: the message names the file and the field; ``task_dir`` is the task's
    folder once :func:`~trajkit.envs.harbor.task.load_tasks` knows it."""

    task_dir: Path | None = None


def _error(message: str, path: str, hint: str | None = None, field: str | None = None) -> TaskError:
    return TaskError(message, path=path, hint=hint, field=field)


def check_folder(task: Path) -> None:
    """Raise :class:`TaskError` (naming the file, what it is and what to do) unless every part of the
    task folder ``task`` holds only what the module docstring allows."""
    root = os.path.realpath(task)
    for part in ("task.toml", "instruction.md", *COPIED):
        top = os.path.join(task, part)
        if not os.path.lexists(top):
            continue
        real = os.path.realpath(top)
        if real != root and not real.startswith(root + os.sep):
            raise _error(f"{part} is a symbolic link to {real}, outside the task folder", top,
                         "copy what it points to into the task folder")
        if part in COPIED:
            if os.path.islink(top):
                raise _error(f"{part} is a symbolic link; make it a real folder", top)
            if os.path.isdir(top):
                _walk(task, part)


def _walk(task: Path, part: str) -> None:
    base = os.path.join(task, part)
    real_base, count, stack = os.path.realpath(base), 0, [(base, 0)]
    while stack:
        folder, depth = stack.pop()
        with os.scandir(folder) as entries:
            for entry in entries:
                count += 1
                rel = os.path.relpath(entry.path, task)
                if count > MAX_ENTRIES or depth >= MAX_DEPTH:
                    raise _error(f"{part}/ holds more than {MAX_ENTRIES} entries or is more than {MAX_DEPTH} "
                                 f"levels deep (at {rel})", entry.path, "keep a task's folders small and shallow")
                mode = entry.stat(follow_symlinks=False).st_mode
                if stat.S_ISDIR(mode):
                    stack.append((entry.path, depth + 1))
                elif stat.S_ISLNK(mode):
                    _check_link(task, part, real_base, entry.path, rel)
                elif not stat.S_ISREG(mode):
                    raise _error(f"{rel} is {KINDS.get(stat.S_IFMT(mode), 'not a regular file')}; a task holds "
                                 "only files, folders and links inside it", entry.path, f"remove {rel}")


def _check_link(task: Path, part: str, real_base: str, path: str, rel: str) -> None:
    target = os.readlink(path)
    real, root = os.path.realpath(path), os.path.realpath(task)
    if real != root and not real.startswith(root + os.sep):
        raise _error(f"{rel} is a symbolic link to {real}, outside the task folder", path,
                     "copy what it points to into the task folder")
    if os.path.isabs(target):
        raise _error(f"{rel} is an absolute symbolic link (to {target}); once copied it points elsewhere", path,
                     f"make it relative, to a file inside {part}/")
    lexical = os.path.normpath(os.path.join(os.path.dirname(os.path.relpath(path, os.path.join(task, part))),
                                            target))
    if lexical == ".." or lexical.startswith(".." + os.sep) or not (real == real_base or
                                                                     real.startswith(real_base + os.sep)):
        raise _error(f"{rel} is a symbolic link to {target}, which leaves {part}/ once copied", path,
                     f"point it at a file inside {part}/, or copy the file there")


def read_bounded(path: Path, limit: int = MAX_TEXT_BYTES) -> bytes:
    """The bytes of the task file ``path``: a regular file (opened without blocking, so a FIFO is an error,
    not a hang) of at most ``limit`` bytes, else :class:`TaskError` naming the file and the limit."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    except OSError as exc:
        raise _error(f"cannot be read: {exc.strerror}", str(path)) from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise _error("is not a regular file", str(path), "make it a plain text file")
        chunks, size = [], 0
        while size <= limit and (chunk := os.read(fd, min(1 << 20, limit + 1 - size))):
            chunks.append(chunk)
            size += len(chunk)
    finally:
        os.close(fd)
    if size > limit:
        raise _error(f"is larger than {limit} bytes, the most a task file may be", str(path), "make it shorter")
    return b"".join(chunks)


def check_depth(data: Any, where: Path) -> None:
    """The loader's ``TaskError`` when the parsed TOML ``data`` nests tables or arrays more than
    ``MAX_TOML_DEPTH`` deep (iterative: any depth is checked without recursion)."""
    stack = [(data, 1)]
    while stack:
        value, depth = stack.pop()
        if depth > MAX_TOML_DEPTH:
            raise _error(f"nests tables or arrays more than {MAX_TOML_DEPTH} deep", str(where))
        children = value.values() if isinstance(value, dict) else value if isinstance(value, list) else ()
        stack.extend((child, depth + 1) for child in children if isinstance(child, (dict, list)))


def check_limit(key: str, value: float, where: Path, name: str) -> None:
    """A number of ``task.toml`` must be finite, and a time limit at most ``MAX_TIMEOUT_S`` (24 h): ``inf`` or
    ``1e12`` would mean no limit; and at least ``MIN_TIMEOUT_S`` (1 ms): a subnormal such as ``5e-324`` scaled
    by a ``timeout_multiplier`` below 1 is 0.0, which no sandbox takes (an infra failure, masked, instead of
    the agent's timeout)."""
    if not abs(value) <= sys.float_info.max:  # inf, nan, and a TOML integer such as 10**400 (float() overflows)
        raise _error(f"must be a finite number, got {value!r}", str(where), field=name)
    if key.endswith("timeout_sec") and value > MAX_TIMEOUT_S:
        raise _error(f"must be at most {MAX_TIMEOUT_S:g} seconds (24 h), got {value!r}", str(where), field=name)
    if key.endswith("timeout_sec") and value < MIN_TIMEOUT_S:
        raise _error(f"must be at least {MIN_TIMEOUT_S:g} seconds, got {value!r}", str(where), field=name)
