"""Atomic outputs: every file trajkit writes appears complete under its name, or not at all.

:class:`AtomicFile` is the one write path of every writer (``traces filter``/``export``/``report``, the
synthetic corpus, the benchmarks' JSON): the bytes go to a temporary file beside the target
(``.NAME.XXXX.tmp`` in the same folder, so the rename cannot cross file systems); ``commit()`` flushes it
to disk (fsync), renames it over the target and syncs the folder. On any error or interrupt before that,
``abort()`` removes the temporary file and an older file under the target name is left untouched.

:func:`refuse_same_file` stops a command whose output would replace one of its own inputs (by inode, so
also through a symlink or another spelling of the path).

``-`` as an output means standard output (:func:`is_stdout`); it is streamed, not atomic.
"""
from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Iterable

from trajkit.errors import ConfigError

STDIO = "-"


def is_stdout(path) -> bool:
    return str(path) == STDIO


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def fsync_path(path: str | Path, directory: bool = False) -> None:
    flags = os.O_RDONLY | (getattr(os, "O_DIRECTORY", 0) if directory else 0)
    try:
        fd = os.open(path, flags)
    except OSError:  # some file systems do not open folders; the data itself was synced already
        if directory:
            return
        raise
    try:
        os.fsync(fd)
    except OSError:
        if not directory:
            raise
    finally:
        os.close(fd)


def prepare_parent(path: str | Path, what: str = "output") -> Path:
    """Create the target's folder if missing; a clear :class:`ConfigError` when that is impossible or the
    target is a folder."""
    target = Path(path)
    if target.is_dir():
        raise ConfigError(f"{what} {str(target)!r} is a folder; give a file name")
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError):
        raise ConfigError(f"{what} {str(target)!r}: {str(target.parent)!r} exists and is not a folder") from None
    except OSError as exc:
        raise ConfigError(f"{what} {str(target)!r}: cannot create its folder ({exc.strerror})") from None
    return target


class AtomicFile:
    """A temporary file beside ``path`` that becomes ``path`` on :meth:`commit`.

    ``with AtomicFile(p) as tmp: write(tmp)`` commits when the block ends normally and aborts when it
    raises (``KeyboardInterrupt`` included). Writers that open and close themselves call
    :meth:`commit` / :meth:`abort` directly after closing their own handles.
    """

    def __init__(self, path: str | Path, what: str = "output") -> None:
        self.path = prepare_parent(path, what)
        try:
            fd, tmp = tempfile.mkstemp(prefix=f".{self.path.name}.", suffix=".tmp", dir=self.path.parent)
        except OSError as exc:
            raise ConfigError(f"{what} {str(self.path)!r}: cannot write in its folder ({exc.strerror})") from None
        os.close(fd)
        self.tmp = Path(tmp)
        self.done = False

    def commit(self) -> Path:
        """fsync the temporary file, rename it over the target, fsync the folder."""
        if self.done:
            return self.path
        os.chmod(self.tmp, 0o666 & ~_umask())  # mkstemp makes it private; give the usual mode
        fsync_path(self.tmp)
        os.replace(self.tmp, self.path)
        fsync_path(self.path.parent, directory=True)
        self.done = True
        return self.path

    def abort(self) -> None:
        """Remove the temporary file; the target keeps whatever it held before."""
        if not self.done:
            self.done = True
            try:
                os.remove(self.tmp)
            except FileNotFoundError:
                pass

    def __enter__(self) -> Path:
        return self.tmp

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is None:
            self.commit()
        else:
            self.abort()


def write_atomic(path: str | Path, data: bytes | str, what: str = "output") -> Path:
    """Write ``data`` (text as UTF-8) to ``path`` atomically; returns the path."""
    with AtomicFile(path, what) as tmp:
        Path(tmp).write_bytes(data.encode("utf-8") if isinstance(data, str) else data)
    return Path(path)


def _same(a: str | Path, b: str | Path) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def refuse_same_file(outputs: Iterable[str | Path], inputs: Iterable[str]) -> None:
    """Raise :class:`ConfigError` when an output names the same file as an input (inode comparison:
    symlinks and other spellings included). ``hf:`` sources and ``-`` are not files and never match."""
    files = [s for s in inputs if not str(s).startswith("hf:") and str(s) != STDIO]
    for out in outputs:
        if is_stdout(out):
            continue
        for src in files:
            if _same(out, src):
                raise ConfigError(f"output {str(out)!r} is the input {str(src)!r}: writing it would destroy the "
                                  "input; write to another file and rename it afterwards")
