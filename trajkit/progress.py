"""What trajkit shows on the console while it works: one way to make a progress bar, one way to quiet
``transformers``.

A bar is drawn on stderr only when stderr is a terminal: piped or redirected (``trajkit train cfg.yaml 2>&1 |
cat``, CI logs) it would print one line per refresh, so :func:`progress_bar` returns a bar that draws nothing.
Example::

    >>> with progress_bar(total=3, desc="work", unit="row") as bar:
    ...     for _ in range(3):
    ...         bar.update()
"""
from __future__ import annotations

import sys
from typing import Any


class NoBar:
    """The bar :func:`progress_bar` returns when nothing may be drawn: counts, draws nothing. Like
    ``tqdm.write``, :meth:`write` prints its line to stdout."""

    def __init__(self, total: int | None = None) -> None:
        self.total = total
        self.n = 0

    def update(self, n: int = 1) -> None:
        self.n += n

    def set_postfix(self, *_args: Any, **_kwargs: Any) -> None:
        return None

    def refresh(self) -> None:
        return None

    def close(self) -> None:
        return None

    def write(self, text: str) -> None:
        print(text, flush=True)

    def __enter__(self) -> "NoBar":
        return self

    def __exit__(self, *_exc: Any) -> None:
        self.close()


def stderr_is_terminal() -> bool:
    stream = sys.stderr
    try:
        return stream is not None and stream.isatty()
    except (AttributeError, ValueError):  # no isatty, or a closed stream
        return False


def progress_bar(total: int | None = None, desc: str | None = None, unit: str = "it", enabled: bool = True):
    """A ``tqdm`` bar on stderr, or a :class:`NoBar` when ``enabled`` is false or stderr is not a terminal.

    ``total`` None draws a counter without a percentage. Both kinds support ``update``, ``set_postfix``,
    ``refresh``, ``write``, ``close``, the ``n`` count and ``with``.
    """
    if not enabled or not stderr_is_terminal():
        return NoBar(total)
    from tqdm import tqdm

    return tqdm(total=total, desc=desc, unit=unit, mininterval=0.5, file=sys.stderr)


def quiet_transformers() -> None:
    """Silence ``transformers``: errors only in its log, and none of its own progress bars (weights, files)."""
    import transformers

    transformers.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()
