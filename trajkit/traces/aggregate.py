"""Exact, bounded-memory aggregation of :class:`~trajkit.traces.metrics.TraceMetrics` over a corpus, split by group.

Memory is bounded whatever the corpus size: traces are folded in one at a time and dropped, and the
distributions are integer histograms (value -> count), from which percentiles are computed exactly (the
same numbers as ``numpy.percentile`` on the full list, tested). Partial results (one per worker process,
:mod:`trajkit.traces.parallel`) merge into one.
"""
from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from trajkit.traces.metrics import COUNT_KEYS, TraceMetrics
from trajkit.traces.model import Trace

if TYPE_CHECKING:
    import numpy as np

GROUP_FIELDS = ("category", "subcategory", "source")
GroupKey = tuple[str, str, str]  # a trace's values of GROUP_FIELDS, "(none)" for a missing one


def group_key(category: Any, subcategory: Any, source: Any) -> GroupKey:
    """The group names a trace is counted under, in :data:`GROUP_FIELDS` order."""
    return str(category or "(none)"), str(subcategory or "(none)"), str(source or "(none)")


DIST_KEYS = ("turns", "tool_calls", "think_words", "think_words_per_turn", "parallel_width", "messages")


class Histogram:
    """Exact distribution of non-negative integers as ``{value: count}``; merges by adding counts."""

    __slots__ = ("counts",)

    def __init__(self) -> None:
        self.counts: dict[int, int] = defaultdict(int)

    def add(self, value: int) -> None:
        self.counts[value] += 1

    def extend(self, values) -> None:
        counts = self.counts
        for value in values:
            counts[value] += 1

    def merge(self, other: "Histogram") -> None:
        for value, n in other.counts.items():
            self.counts[value] += n

    def __len__(self) -> int:
        return sum(self.counts.values())

    def expand(self) -> "np.ndarray":
        """All values as a float array (for plotting); size = number of observations."""
        import numpy as np  # (only plots need it: `traces stats` does not pay numpy's import)

        keys = sorted(self.counts)
        return np.repeat(np.asarray(keys, dtype=np.float64), [self.counts[k] for k in keys])

    def percentile(self, q: float) -> float:
        """``numpy.percentile(values, q)`` (linear interpolation) without materialising the values."""
        keys = sorted(self.counts)
        n = sum(self.counts.values())
        pos = (n - 1) * q / 100.0
        lo, frac = int(pos), pos - int(pos)
        below, v_lo, v_hi = 0, None, None
        for k in keys:
            below += self.counts[k]
            if v_lo is None and below > lo:
                v_lo = k
            if below > lo + 1 or (below > lo and frac == 0):
                v_hi = k
                break
        v_hi = v_lo if v_hi is None or frac == 0 else v_hi
        return float(v_lo + (v_hi - v_lo) * frac)

    def summary(self) -> dict[str, float]:
        """count, mean, p50, p95, max (zeros when empty)."""
        n = len(self)
        if not n:
            return {"count": 0, "mean": 0.0, "p50": 0.0, "p95": 0.0, "max": 0.0}
        total = sum(k * c for k, c in self.counts.items())
        return {"count": n, "mean": round(total / n, 3), "p50": self.percentile(50),
                "p95": self.percentile(95), "max": float(max(self.counts))}


def _ratio(num: float, den: float) -> float:
    return round(num / den, 6) if den else 0.0


@dataclass
class Aggregate:
    """Counters and per-trace value lists for one group of traces."""

    traces: int = 0
    counts: Counter = field(default_factory=Counter)
    tool_call_counts: Counter = field(default_factory=Counter)
    tool_failures: Counter = field(default_factory=Counter)
    failed_trajectories: int = 0
    context_summaries: int = 0
    think_tokens: int | None = None
    values: dict[str, Histogram] = field(default_factory=lambda: defaultdict(Histogram))

    def add(self, tm: TraceMetrics) -> None:
        self.traces += 1
        counts, c = self.counts, tm.counts
        for key, n in c.items():
            counts[key] += n
        for name, n in tm.tool_call_counts.items():  # (Counter.update's ABC checks cost more than this)
            self.tool_call_counts[name] += n
        for name, n in tm.tool_failures.items():
            self.tool_failures[name] += n
        self.failed_trajectories += c["failed_tool_responses"] > 0
        self.context_summaries += tm.context_summary
        if tm.think_tokens is not None:
            self.think_tokens = (self.think_tokens or 0) + tm.think_tokens
        v = self.values
        v["turns"].add(c["assistant_turns"])
        v["messages"].add(c["messages"])
        v["tool_calls"].add(c["tool_calls"])
        v["think_words"].add(c["think_words"])
        v["think_words_per_turn"].extend(tm.think_words_per_turn)
        v["parallel_width"].extend(tm.parallel_widths)

    def merge(self, other: "Aggregate") -> None:
        """Fold another aggregate in (used to combine per-process partial results)."""
        self.traces += other.traces
        self.counts.update(other.counts)
        self.tool_call_counts.update(other.tool_call_counts)
        self.tool_failures.update(other.tool_failures)
        self.failed_trajectories += other.failed_trajectories
        self.context_summaries += other.context_summaries
        if other.think_tokens is not None:
            self.think_tokens = (self.think_tokens or 0) + other.think_tokens
        for key, hist in other.values.items():
            self.values[key].merge(hist)

    def summary(self) -> dict[str, Any]:
        c = self.counts
        out: dict[str, Any] = {"traces": self.traces}
        out.update({k: int(c[k]) for k in COUNT_KEYS})
        out["tool_call_counts"] = _by_count(self.tool_call_counts)
        out["tool_failure_counts"] = _by_count(self.tool_failures)
        out["failed_trajectories"] = self.failed_trajectories
        out["context_summaries"] = self.context_summaries
        if self.think_tokens is not None:
            out["think_tokens"] = self.think_tokens
        out["rates"] = {
            "malformed_per_call": _ratio(c["malformed_tool_calls"], c["tool_calls"]),
            "failure_per_response": _ratio(c["failed_tool_responses"], c["tool_responses"]),
            "failure_per_turn": _ratio(c["failed_turns"], c["assistant_turns"]),
            "failure_per_trajectory": _ratio(self.failed_trajectories, self.traces),
            "recovery_per_failure": _ratio(c["recoveries"], c["failed_tool_responses"]),
            "parallel_turn_share": _ratio(c["parallel_turns"], c["assistant_turns"]),
        }
        out["distributions"] = {k: self.values[k].summary() for k in DIST_KEYS}
        return out


class CorpusStats:
    """The whole corpus plus one :class:`Aggregate` per category / subcategory / source value.

    Traces are folded into one aggregate per (category, subcategory, source) combination; the total and the
    per-field groups are merged from those on first read (exact: counts add, histograms add), so each trace
    costs one fold instead of four."""

    def __init__(self) -> None:
        self.parts: dict[GroupKey, Aggregate] = {}
        self.skipped_rows = 0
        self.diagnostic_counts: Counter = Counter()
        self._views: tuple[Aggregate, dict[str, dict[str, Aggregate]]] | None = None

    def add(self, trace: Trace, tm: TraceMetrics) -> None:
        self.add_metrics(group_key(trace.category, trace.subcategory, trace.source), tm,
                         [d.code for d in trace.diagnostics])

    def add_metrics(self, key: GroupKey, tm: TraceMetrics, diagnostics: list[str] | tuple[str, ...] = ()) -> None:
        """Fold one trace's metrics under its (category, subcategory, source) names, with the codes of its
        diagnostics."""
        agg = self.parts.get(key)
        if agg is None:
            agg = self.parts[key] = Aggregate()
        agg.add(tm)
        if diagnostics:
            self.diagnostic_counts.update(diagnostics)
        self._views = None

    @property
    def total(self) -> Aggregate:
        return self._merged()[0]

    @property
    def groups(self) -> dict[str, dict[str, Aggregate]]:
        return self._merged()[1]

    def _merged(self) -> tuple[Aggregate, dict[str, dict[str, Aggregate]]]:
        if self._views is None:
            total = Aggregate()
            groups: dict[str, dict[str, Aggregate]] = {g: defaultdict(Aggregate) for g in GROUP_FIELDS}
            for key, agg in self.parts.items():
                total.merge(agg)
                for g, name in zip(GROUP_FIELDS, key):
                    groups[g][name].merge(agg)
            self._views = total, groups
        return self._views

    def merge(self, other: "CorpusStats") -> None:
        for key, agg in other.parts.items():
            mine = self.parts.get(key)
            if mine is None:
                mine = self.parts[key] = Aggregate()
            mine.merge(agg)
        self._views = None
        self.skipped_rows += other.skipped_rows
        self.diagnostic_counts.update(other.diagnostic_counts)

    def to_dict(self, *, groups: bool = True) -> dict[str, Any]:
        out = self.total.summary()
        out["skipped_rows"] = self.skipped_rows
        out["diagnostics"] = _by_count(self.diagnostic_counts)
        if groups:
            out["by"] = {g: {k: a.summary() for k, a in sorted(agg.items())} for g, agg in self.groups.items()}
        return out


def _by_count(counter: Counter) -> dict[str, int]:
    """Most frequent first, ties by name: the same bytes however the rows were split across workers."""
    return dict(sorted(counter.items(), key=lambda item: (-item[1], item[0])))
