"""Parallel streaming stats for large JSONL files.

The file is cut into byte ranges aligned to line starts; each worker process opens the file itself,
reads only its range line by line, and folds the rows into a partial :class:`CorpusStats` (through the fast
path of :mod:`trajkit.traces.scan`, which hands any row it cannot take to the reference); the
parent merges the partials. No row text crosses a process boundary, memory per worker is one line
at a time plus its counters, and the result equals the sequential path exactly (tested).

Rows that cannot be read come back as (byte offset, error fields); the parent turns offsets into line
numbers in one extra pass only when there are such rows, and reports them in file order.
"""
from __future__ import annotations

import multiprocessing as mp
import os
from typing import Callable

from trajkit.errors import InputError
from trajkit.traces.aggregate import CorpusStats
from trajkit.traces.load import HEAD_BYTES, check_text_head, open_bytes
from trajkit.traces.scan import fold_line

CHUNK_BYTES = 16 << 20
WARM_BYTES = 1 << 20


def plan_chunks(path: str, chunk_bytes: int = CHUNK_BYTES, limit: int | None = None) -> list[tuple[int, int]]:
    """Byte ranges [start, end) covering the file, each starting at the beginning of a line (the first
    ``limit`` of them only, when given)."""
    size = os.path.getsize(path)
    bounds = [0]
    with open(path, "rb") as fh:
        while bounds[-1] + chunk_bytes < size and (limit is None or len(bounds) <= limit):
            fh.seek(bounds[-1] + chunk_bytes)
            fh.readline()  # finish the line the cut landed in
            pos = fh.tell()
            if pos >= size:
                break
            bounds.append(pos)
    bounds.append(size)
    return list(zip(bounds[:-1], bounds[1:]))


def _stats_chunk(task: tuple[str, str, int, int]) -> tuple[CorpusStats, list[tuple[int, str, str | None, str | None]], int]:
    path, label, start, end = task
    stats = CorpusStats()
    errors = []
    rows = 0
    with open_bytes(path) as fh:
        fh.seek(start)
        pos = start
        while pos < end:
            line = fh.readline()
            if not line:
                break
            offset, pos = pos, pos + len(line)
            if line.isspace():
                continue
            rows += 1
            try:
                fold_line(stats, path, 0, line, label)
            except InputError as exc:
                errors.append((offset, exc.message, exc.field, exc.hint))
    stats.skipped_rows = len(errors)
    return stats, errors, rows


def _line_numbers(path: str, offsets: list[int]) -> dict[int, int]:
    """1-based line number of each byte offset (one pass over the file)."""
    wanted = sorted(set(offsets))
    out, line, pos, i = {}, 1, 0, 0
    with open_bytes(path) as fh:
        for raw in fh:
            while i < len(wanted) and wanted[i] < pos + len(raw):
                out[wanted[i]] = line
                i += 1
            if i == len(wanted):
                break
            pos += len(raw)
            line += 1
    return out


def parallel_file_stats(path: str, label: str, stats: CorpusStats, *, workers: int,
                        on_error: Callable[[InputError], None] | None = None,
                        on_rows: Callable[[int], None] | None = None, chunk_bytes: int = CHUNK_BYTES) -> None:
    """Fold every row of a plain JSONL file into ``stats`` using ``workers`` processes.

    The parent folds the file's first ~:data:`WARM_BYTES` itself before it forks, so the workers inherit its
    caches (tool tables, compiled validators) instead of each building them again."""
    with open(path, "rb") as fh:
        check_text_head(path, fh.read(HEAD_BYTES))
    chunks = plan_chunks(path, chunk_bytes)
    head = plan_chunks(path, WARM_BYTES, limit=1)[0]
    if head[1] < chunks[0][1]:
        chunks = [head, (head[1], chunks[0][1]), *chunks[1:]]
    tasks = [(path, label, s, e) for s, e in chunks]
    ctx = mp.get_context("fork" if "fork" in mp.get_all_start_methods() else "spawn")
    all_errors = []

    def fold(part, errors, rows):
        stats.merge(part)
        all_errors.extend(errors)
        if on_rows is not None:
            on_rows(rows)

    fold(*_stats_chunk(tasks[0]))
    if len(tasks) > 1:
        with ctx.Pool(workers) as pool:
            for result in pool.imap_unordered(_stats_chunk, tasks[1:]):
                fold(*result)
    if all_errors:
        lines = _line_numbers(path, [e[0] for e in all_errors])
        for offset, message, field, hint in sorted(all_errors):
            if on_error is not None:
                on_error(InputError(message, path=path, row=lines[offset], field=field, hint=hint))
