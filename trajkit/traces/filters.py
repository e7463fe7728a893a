"""Row filters with readable predicates and a per-predicate removal count.

Predicates run in a fixed order; a row is charged to the first predicate that rejects it, so the
removal counts add up to ``read - kept``. Kept rows are written back *as read*: into a JSONL output
(plain, ``.gz`` or ``.xz``) from a JSONL source, the original bytes of the line (escapes, number spellings
and key order included); otherwise the original row object with every field.

Example::

    trajkit traces filter kimi.jsonl --min-think-words 50 --drop-malformed --max-failure-rate 0.5 \\
        --dedup --out clean.jsonl
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any, Callable

from trajkit.errors import ConfigError
from trajkit.traces.metrics import TraceMetrics, trace_metrics
from trajkit.traces.model import Trace


@dataclass
class FilterConfig:
    """Which rows to keep. Unset predicates (None / False / empty) are off."""

    min_think_words: int | None = None
    max_think_words: int | None = None
    min_turns: int | None = None
    max_turns: int | None = None
    drop_malformed: bool = False
    drop_unanswered: bool = False
    max_failure_rate: float | None = None
    categories: list[str] = field(default_factory=list)
    exclude_categories: list[str] = field(default_factory=list)
    dedup: bool = False

    __field_docs__ = {
        "min_think_words": "keep traces with at least this many think words in total",
        "max_think_words": "keep traces with at most this many think words in total",
        "min_turns": "keep traces with at least this many assistant turns",
        "max_turns": "keep traces with at most this many assistant turns",
        "drop_malformed": "drop traces with any malformed tool call",
        "drop_unanswered": "drop traces with unanswered calls or orphan responses",
        "max_failure_rate": "keep traces whose failed/total tool responses is at most this (0..1)",
        "dedup": "drop exact duplicates (hash of all message texts)",
    }

    def __post_init__(self) -> None:
        if self.max_failure_rate is not None and not 0 <= self.max_failure_rate <= 1:
            raise ConfigError(f"max_failure_rate must be in [0, 1], got {self.max_failure_rate}")
        for name in ("min_think_words", "max_think_words", "min_turns", "max_turns"):
            value = getattr(self, name)
            if value is not None and value < 0:
                raise ConfigError(f"{name} must be >= 0, got {value}")


Predicate = Callable[[Trace, TraceMetrics, FilterConfig], bool]


def _think(lo: bool) -> Predicate:
    def keep(_t, m, cfg):
        bound = cfg.min_think_words if lo else cfg.max_think_words
        return bound is None or (m.counts["think_words"] >= bound if lo else m.counts["think_words"] <= bound)
    return keep


def _turns(lo: bool) -> Predicate:
    def keep(_t, m, cfg):
        bound = cfg.min_turns if lo else cfg.max_turns
        return bound is None or (m.counts["assistant_turns"] >= bound if lo else m.counts["assistant_turns"] <= bound)
    return keep


def _failure_rate(_t, m, cfg) -> bool:
    if cfg.max_failure_rate is None or not m.counts["tool_responses"]:
        return True
    return m.counts["failed_tool_responses"] / m.counts["tool_responses"] <= cfg.max_failure_rate


def _category(t, _m, cfg) -> bool:
    if cfg.categories and t.category not in cfg.categories:
        return False
    return t.category not in cfg.exclude_categories


PREDICATES: dict[str, Predicate] = {
    "category": _category,
    "min_think_words": _think(lo=True),
    "max_think_words": _think(lo=False),
    "min_turns": _turns(lo=True),
    "max_turns": _turns(lo=False),
    "malformed": lambda _t, m, cfg: not cfg.drop_malformed or m.counts["malformed_tool_calls"] == 0,
    "unanswered": lambda _t, m, cfg: not cfg.drop_unanswered or (
        m.counts["unanswered_tool_calls"] == 0 and m.counts["orphan_tool_responses"] == 0),
    "max_failure_rate": _failure_rate,
}


def content_hash(trace: Trace) -> str:
    h = hashlib.blake2b(digest_size=16)
    for msg in trace.messages:
        h.update(msg.role.encode())
        h.update(b"\0")
        h.update(msg.text.encode())
        h.update(b"\1")
    return h.hexdigest()


@dataclass
class FilterReport:
    read: int = 0
    kept: int = 0
    skipped_rows: int = 0
    removed_by: dict[str, int] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {"read": self.read, "kept": self.kept, "skipped_rows": self.skipped_rows,
                "removed_by": self.removed_by}


class RowFilter:
    """Stateful (for dedup) filter: ``keep(trace)`` says yes or no and charges the removal."""

    def __init__(self, cfg: FilterConfig) -> None:
        self.cfg = cfg
        self.report = FilterReport(removed_by={name: 0 for name in PREDICATES} | {"dedup": 0})
        self._seen: set[str] = set()

    def keep(self, trace: Trace) -> bool:
        self.report.read += 1
        m = trace_metrics(trace)
        for name, pred in PREDICATES.items():
            if not pred(trace, m, self.cfg):
                self.report.removed_by[name] += 1
                return False
        if self.cfg.dedup:
            digest = content_hash(trace)
            if digest in self._seen:
                self.report.removed_by["dedup"] += 1
                return False
            self._seen.add(digest)
        self.report.kept += 1
        return True


def filter_corpus(specs: list[str], cfg: FilterConfig, out: str, *, strict: bool = False,
                  on_error=None, progress: bool = True) -> FilterReport:
    """Stream ``specs``, write the rows ``cfg`` keeps to ``out`` (JSONL, .jsonl.gz or Parquet; ``-``: stdout).
    Sources without a readable row raise :class:`InputError` and leave ``out`` as it was."""
    from trajkit.progress import progress_bar
    from trajkit.atomic import refuse_same_file
    from trajkit.traces.load import no_rows_error
    from trajkit.traces.write import RowWriter

    refuse_same_file([out], specs)
    row_filter = RowFilter(cfg)
    with RowWriter(out) as writer, progress_bar(desc="filter", unit=" rows", enabled=progress) as bar:
        _filter_rows(specs, row_filter, writer, bar, strict, on_error)
        if not row_filter.report.read:  # raised inside: the output is not replaced
            raise no_rows_error(specs, row_filter.report.skipped_rows)
    return row_filter.report


def _filter_rows(specs, row_filter: RowFilter, writer, bar, strict: bool, on_error) -> None:
    from trajkit.errors import InputError
    from trajkit.traces.jsonvalue import has_exact
    from trajkit.traces.load import iter_raw, parse_raw, source_label

    copy_lines = writer.kind != ".parquet"
    for spec in specs:
        label = source_label(spec)
        for raw in iter_raw(spec):
            bar.update()
            try:
                trace = parse_raw(raw, label)
            except InputError as exc:
                if strict:
                    raise
                row_filter.report.skipped_rows += 1
                if on_error is not None:
                    on_error(exc)
                continue
            if row_filter.keep(trace):
                if copy_lines and raw.line is not None:
                    writer.write_line(raw.line)
                elif has_exact(raw.value):
                    raise ConfigError(f"{raw.path}:{raw.row}: the row holds a number Parquet cannot store "
                                      "exactly (beyond 64-bit integers or doubles); write .jsonl to keep rows "
                                      "exactly as read")
                else:
                    writer.write(raw.value)
