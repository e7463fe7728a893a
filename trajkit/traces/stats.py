"""Corpus statistics: stream sources once into a :class:`~trajkit.traces.aggregate.CorpusStats`
(sequentially, or split across processes by :mod:`trajkit.traces.parallel`) and format them as a table.
"""
from __future__ import annotations

import os
from typing import Any

from trajkit.progress import progress_bar
from trajkit.traces.aggregate import Aggregate, CorpusStats, Histogram
from trajkit.errors import InputError
from trajkit.traces.load import iter_lines, iter_traces, source_kind, source_label
from trajkit.traces.metrics import trace_metrics
from trajkit.traces.safe_text import printable
from trajkit.traces.scan import fold_line

__all__ = ["Aggregate", "CorpusStats", "Histogram", "compute_stats", "format_table"]


def compute_stats(specs: list[str], *, strict: bool = False, on_error=None, count_tokens=None,
                  progress: bool = True, workers: int | None = None, on_trace=None,
                  desc: str = "traces") -> CorpusStats:
    """Stream every source once and fold each trace into a :class:`CorpusStats`.

    ``on_trace(trace, metrics)`` sees every trace in order (e.g. the report's viewer). Plain
    (uncompressed) JSONL files are split across ``workers`` processes (default: all CPU cores) unless
    ``strict``, ``count_tokens`` or ``on_trace`` needs the sequential path; other sources stream in-process.
    JSON Lines rows go through the fast path of :mod:`trajkit.traces.scan` unless one of those three needs the
    trace model.
    """
    workers = workers or os.cpu_count() or 1
    stats = CorpusStats()

    def skipped(exc) -> None:
        stats.skipped_rows += 1
        if on_error is not None:
            on_error(exc)

    sequential = strict or count_tokens is not None or on_trace is not None
    with progress_bar(desc=desc, unit=" rows", enabled=progress) as bar:
        for spec in specs:
            if workers > 1 and not sequential and _splittable(spec):
                from trajkit.traces.parallel import parallel_file_stats  # (multiprocessing: large files only)

                parallel_file_stats(spec, source_label(spec), stats, workers=workers, on_error=on_error,
                                    on_rows=bar.update)
                continue
            if not sequential and source_kind(spec) == "jsonl":
                _fold_lines(spec, stats, skipped, bar.update)
                continue
            for trace in iter_traces([spec], strict=strict, on_error=skipped, on_row=lambda _: bar.update()):
                tm = trace_metrics(trace, count_tokens)
                stats.add(trace, tm)
                if on_trace is not None:
                    on_trace(trace, tm)
    return stats


def _fold_lines(spec: str, stats: CorpusStats, skipped, on_row) -> None:
    """Every row of one JSON Lines source through the fast path (:mod:`trajkit.traces.scan`)."""
    label = source_label(spec)
    for lineno, line in iter_lines(spec):
        on_row()
        try:
            fold_line(stats, spec, lineno, line, label)
        except InputError as exc:
            skipped(exc)


def _splittable(spec: str) -> bool:
    return (not spec.startswith("hf:") and spec.endswith(".jsonl") and os.path.isfile(spec)
            and os.path.getsize(spec) > 4 << 20)


_TABLE_ROWS = (
    ("traces", "traces"), ("assistant turns", "assistant_turns"), ("tool calls", "tool_calls"),
    ("  malformed", "malformed_tool_calls"), ("  unknown tool", "unknown_tool_calls"),
    ("  invalid arguments", "invalid_argument_calls"), ("  unanswered", "unanswered_tool_calls"),
    ("parallel turns", "parallel_turns"), ("tool responses", "tool_responses"),
    ("  failed (harness rule)", "failed_tool_responses"), ("  non-zero exit", "nonzero_exit_responses"),
    ("  truncated", "truncated_responses"), ("  orphan", "orphan_tool_responses"),
    ("recoveries", "recoveries"), ("retry loops", "retry_loops"), ("think words", "think_words"),
)


def format_table(data: dict[str, Any], by: str = "source") -> str:
    """A plain-text table: the whole corpus beside each value of ``by`` (e.g. two sources); names are made
    :func:`~trajkit.traces.safe_text.printable`."""
    columns = [("all", data)]
    groups = data.get("by", {}).get(by, {})
    columns += [(printable(name), values) for name, values in groups.items()] if len(groups) > 1 else []
    names = [c[0] for c in columns]
    width = max(24, *(len(n) + 2 for n in names))
    lines = ["".ljust(26) + "".join(n.rjust(width) for n in names)]
    for label, key in _TABLE_ROWS:
        lines.append(label.ljust(26) + "".join(str(c[1][key]).rjust(width) for c in columns))
    for label, key in (("failure / response", "failure_per_response"), ("failure / turn", "failure_per_turn"),
                       ("failure / trajectory", "failure_per_trajectory"),
                       ("recovery / failure", "recovery_per_failure"), ("malformed / call", "malformed_per_call")):
        lines.append(label.ljust(26) + "".join(f"{c[1]['rates'][key]:.3f}".rjust(width) for c in columns))
    for label, key in (("turns / trace", "turns"), ("think words / trace", "think_words"),
                       ("think words / turn", "think_words_per_turn"), ("parallel width", "parallel_width")):
        lines.append(label.ljust(26) + "".join(
            f"{d['mean']:.1f} p50 {d['p50']:.0f} p95 {d['p95']:.0f}".rjust(width)
            for d in (c[1]["distributions"][key] for c in columns)))
    lines.append(f"skipped rows: {data.get('skipped_rows', 0)}")
    return "\n".join(lines)
