"""Lazy package exports (PEP 562): ``import trajkit.engine`` stays cheap; torch loads on first use. And modules
that moved: importing an old path fails with one message naming the new one (:func:`moved_modules`)."""
from __future__ import annotations

import importlib
import sys
from typing import Any, Callable


def lazy_getattr(package: str, exports: dict[str, str]) -> Callable[[str], Any]:
    """A module ``__getattr__`` that imports ``exports[name]`` (a module path) on first access."""

    def __getattr__(name: str) -> Any:
        if name in exports:
            return getattr(importlib.import_module(exports[name]), name)
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    return __getattr__


class _Moved:
    """A meta path finder (duck-typed: ``importlib.abc`` costs 8 ms of start-up) that answers an import of a moved module with :class:`ModuleNotFoundError` naming its new home."""

    def __init__(self):
        self.moves: dict[str, str] = {}

    def find_spec(self, name, path=None, target=None):
        new = self.moves.get(name)
        if new is not None:
            raise ModuleNotFoundError(f"{name} moved to {new}: import {new} instead (docs/architecture.md, "
                                      "'Where things moved')", name=name)
        return None


_MOVED = _Moved()


def moved_modules(moves: dict[str, str]) -> None:
    """Register ``{old module path: new module path}``: ``import old`` then raises, naming ``new``.

    >>> moved_modules({"trajkit.example_old": "trajkit.atomic"})
    >>> import trajkit.example_old
    Traceback (most recent call last):
    ...
    ModuleNotFoundError: trajkit.example_old moved to trajkit.atomic: import trajkit.atomic instead (docs/architecture.md, 'Where things moved')
    """
    _MOVED.moves.update(moves)
    if _MOVED not in sys.meta_path:
        sys.meta_path.insert(0, _MOVED)
