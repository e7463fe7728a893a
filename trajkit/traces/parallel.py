"""Parallel streaming stats for large JSONL files.

The file is cut into byte ranges aligned to line starts. The parent folds the first ~:data:`WARM_BYTES`
itself, then starts the workers (forked, so they inherit its caches); each worker opens the file once,
takes ranges from one queue (a faster worker takes more; small ranges keep the last one short), reads
each line by line and folds the rows into one partial :class:`CorpusStats` (through the fast path of
:mod:`trajkit.traces.scan`, which hands any row it cannot take to the reference); each range's row count
comes back for the progress bar, and the partial once, at the end, for the parent to merge. No row text
crosses a process boundary, memory per worker is one line at a time plus its counters, and the result
equals the sequential path exactly (tested).

Rows that cannot be read come back as (byte offset, error fields); the parent turns offsets into line
numbers in one extra pass only when there are such rows, and reports them in file order. A worker that
raises or dies fails the call with its traceback or exit code, naming the file.
"""
from __future__ import annotations

import multiprocessing as mp
import os
import queue
import traceback
from typing import Callable

from trajkit.errors import InputError
from trajkit.traces.aggregate import CorpusStats
from trajkit.traces.load import HEAD_BYTES, check_text_head, open_bytes
from trajkit.traces.scan import fold_line

CHUNK_BYTES = 4 << 20  # small: the last chunk leaves one worker alone; a chunk costs ~50 us of queue traffic
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


Errors = list[tuple[int, str, str | None, str | None]]  # (byte offset, message, field, hint) per unreadable row


def _fold_range(fh, path: str, label: str, start: int, end: int, stats: CorpusStats, errors: Errors) -> int:
    """Fold the rows of bytes [start, end) of the open file into ``stats``; the rows read."""
    fh.seek(start)
    pos, rows = start, 0
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
    return rows


def _worker(path: str, label: str, tasks, results) -> None:
    """One worker process: byte ranges from ``tasks`` until a None, each folded into one partial, which goes
    back once, at the end (a partial per range cost ~3 ms each to build, send and merge); the rows of each
    range go back as they are done, for the progress bar."""
    try:
        stats, errors = CorpusStats(), []
        with open_bytes(path) as fh:
            for start, end in iter(tasks.get, None):
                results.put(("rows", _fold_range(fh, path, label, start, end, stats, errors)))
        stats.skipped_rows = len(errors)
        results.put(("done", stats, errors))
    except BaseException:  # noqa: BLE001 - the parent raises it with its traceback
        results.put(("failed", traceback.format_exc()))


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
    ctx = mp.get_context("fork" if "fork" in mp.get_all_start_methods() else "spawn")
    all_errors: Errors = []
    with open_bytes(path) as fh:
        rows = _fold_range(fh, path, label, *chunks[0], stats, all_errors)
    stats.skipped_rows += len(all_errors)
    if on_rows is not None:
        on_rows(rows)
    if len(chunks) > 1:
        _run_workers(ctx, path, label, chunks[1:], min(workers, len(chunks) - 1), stats, all_errors, on_rows)
    if all_errors:
        lines = _line_numbers(path, [e[0] for e in all_errors])
        for offset, message, field, hint in sorted(all_errors):
            if on_error is not None:
                on_error(InputError(message, path=path, row=lines[offset], field=field, hint=hint))


def _run_workers(ctx, path: str, label: str, chunks: list[tuple[int, int]], workers: int, stats: CorpusStats,
                 all_errors: Errors, on_rows: Callable[[int], None] | None) -> None:
    """``workers`` processes take the chunks from one queue (the faster takes more) and each sends back one
    partial, merged here; a worker that fails or dies fails the call, never hangs it."""
    tasks, results = ctx.Queue(), ctx.Queue()
    for chunk in chunks:
        tasks.put(chunk)
    for _ in range(workers):
        tasks.put(None)
    procs = [ctx.Process(target=_worker, args=(path, label, tasks, results), daemon=True) for _ in range(workers)]
    for proc in procs:
        proc.start()
    try:
        done = 0
        while done < workers:
            try:
                message = results.get(timeout=1.0)
            except queue.Empty:
                dead = [p.exitcode for p in procs if p.exitcode not in (None, 0)]
                if dead:
                    raise RuntimeError(f"traces stats: a worker process died (exit code {dead[0]}) on {path}") from None
                continue
            if message[0] == "rows":
                if on_rows is not None:
                    on_rows(message[1])
            elif message[0] == "done":
                stats.merge(message[1])
                all_errors.extend(message[2])
                done += 1
            else:
                raise RuntimeError(f"traces stats: a worker process failed on {path}:\n{message[1]}")
    finally:
        for proc in procs:
            if proc.exitcode is None and done < workers:
                proc.terminate()
            proc.join()
