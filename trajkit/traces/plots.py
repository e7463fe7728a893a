"""PNG charts of a corpus's :class:`~trajkit.traces.aggregate.CorpusStats`.

Each chart is one pure function ``(stats, ax) -> None`` registered in :data:`CHARTS`; :func:`write_plots`
draws them all with matplotlib's Agg canvas (``matplotlib.figure.Figure`` objects, never ``pyplot``, so no
global backend or figure state is touched and nothing needs a display). Every chart puts the sources side
by side when the corpus has more than one, and shares (%), not raw counts, wherever the sources differ in
size. Charts read the aggregate counters and the per-trace / per-turn value lists the aggregates keep.
Names from the data (tools, categories, sources) are untrusted: they are cut to one short line and their
``$`` escaped, so matplotlib never parses them as mathtext.

Charts: ``tool_usage`` (top tools, stacked by source), ``tool_failure_rate`` (failed responses per call,
by tool), ``think_words_per_turn`` (histogram; when skewed, a log axis whose integer-aligned bins are
drawn as a density per decade so that bins of unequal log width stay comparable),
``turns_per_trace``, ``parallel_width`` (call blocks per turn that calls tools), ``rates_by_source`` and
``rates_by_category`` (malformed / failure / recovery rates).
"""
from __future__ import annotations

from pathlib import Path
from typing import Callable

import matplotlib
import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from trajkit.traces.aggregate import Aggregate, CorpusStats
from trajkit.atomic import AtomicFile

# Okabe-Ito: distinguishable with every common colour-vision deficiency.
PALETTE = ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442", "#000000")
TOP_TOOLS = 15
SKEW_RATIO = 20.0  # max / p50 above this draws think words on a log scale
STYLE = {
    "font.size": 11, "axes.titlesize": 13, "axes.titleweight": "bold", "axes.titlelocation": "left",
    "axes.labelsize": 11, "axes.spines.top": False, "axes.spines.right": False, "axes.grid": True,
    "grid.color": "#e3e6ea", "grid.linewidth": 0.8, "axes.axisbelow": True, "legend.frameon": False,
    "axes.edgecolor": "#9aa3ad", "xtick.color": "#4a525c", "ytick.color": "#4a525c",
    "axes.labelcolor": "#2b3138", "text.color": "#2b3138",
}
LABEL_CHARS = 32  # longer tool / category / source names are cut with an ellipsis


def _label(name: str) -> str:
    """An untrusted name as chart text: one line, at most LABEL_CHARS, and ``$`` escaped (no mathtext)."""
    name = " ".join(str(name).split())
    name = name if len(name) <= LABEL_CHARS else name[:LABEL_CHARS - 1] + "…"
    return name.replace("$", r"\$")


def _sources(stats: CorpusStats) -> list[tuple[str, Aggregate]]:
    """(label, aggregate) per source, or [("all", total)] when there is at most one source."""
    by = stats.groups["source"]
    if len(by) > 1:
        return sorted(by.items())
    return [(next(iter(by)) if by else "all", stats.total)]


def _no_data(ax: Axes, title: str, what: str) -> None:
    ax.set_title(title)
    ax.text(0.5, 0.5, f"no {what} in this corpus", ha="center", va="center", transform=ax.transAxes,
            color="#7a838d", fontsize=11)
    ax.set_xticks([])
    ax.set_yticks([])
    ax.grid(False)


def _legend(ax: Axes, n: int, **kw) -> None:
    if n > 1:
        ax.legend(**kw)


def tool_usage(stats: CorpusStats, ax: Axes, top: int = TOP_TOOLS) -> None:
    """Top tools by well-formed calls, one stacked segment per source."""
    title = f"Tool usage (top {top} tools)"
    tools = [name for name, _ in stats.total.tool_call_counts.most_common(top)]
    if not tools:
        return _no_data(ax, title, "well-formed tool calls")
    y = np.arange(len(tools))[::-1]
    left = np.zeros(len(tools))
    sources = _sources(stats)
    for i, (label, agg) in enumerate(sources):
        counts = np.array([agg.tool_call_counts.get(t, 0) for t in tools], dtype=float)
        ax.barh(y, counts, left=left, color=PALETTE[i % len(PALETTE)], label=_label(label), height=0.7)
        left += counts
    for yi, total in zip(y, left):
        ax.text(total, yi, f" {int(total):,}", va="center", fontsize=8, color="#4a525c")
    ax.set_yticks(y, [_label(t) for t in tools])
    ax.set_xlabel("well-formed calls")
    ax.set_xlim(0, left.max() * 1.12)
    ax.grid(axis="y", visible=False)
    ax.set_title(title)
    _legend(ax, len(sources), loc="lower right", title="source")


def tool_failure_rate(stats: CorpusStats, ax: Axes, top: int = TOP_TOOLS) -> None:
    """Failed responses (harness rule) per well-formed call, for the most used tools."""
    title = "Failure rate by tool (harness rule)"
    total = stats.total
    tools = [name for name, _ in total.tool_call_counts.most_common(top)]
    if not tools:
        return _no_data(ax, title, "well-formed tool calls")
    calls = np.array([total.tool_call_counts[t] for t in tools], dtype=float)
    fails = np.array([total.tool_failures.get(t, 0) for t in tools], dtype=float)
    rate = 100.0 * fails / calls
    y = np.arange(len(tools))[::-1]
    colors = [PALETTE[5] if r > 0 else "#c5cbd3" for r in rate]
    ax.barh(y, rate, color=colors, height=0.7)
    for yi, r, f, c in zip(y, rate, fails, calls):
        ax.text(r, yi, f" {r:.0f}%  ({int(f):,}/{int(c):,})", va="center", fontsize=8, color="#4a525c")
    ax.set_yticks(y, [_label(t) for t in tools])
    ax.set_xlabel("failed responses per call (%)")
    ax.set_xlim(0, max(10.0, rate.max()) * 1.45)
    ax.grid(axis="y", visible=False)
    ax.set_title(title)


def _is_skewed(values: np.ndarray) -> bool:
    """Long right tail: the maximum is more than SKEW_RATIO times the median (or the median is 0)."""
    p50 = float(np.median(values))
    return bool(values.max() > 30 and values.max() / max(p50, 1.0) > SKEW_RATIO)


def _int_bins(top: float, n: int = 40) -> np.ndarray:
    """Equal-width bins of whole numbers of units, centred on the integers, covering 0..top."""
    step = max(1, int(np.ceil((top + 1) / n)))
    return np.arange(-0.5, top + step, step)


def _log_bins(top: float, n: int = 32) -> np.ndarray:
    """Integer-aligned edges, roughly evenly spaced on a log axis, covering 1..top."""
    return np.unique(np.round(np.geomspace(1, top + 1, n))) - 0.5


def _outline(ax: Axes, heights: np.ndarray, edges: np.ndarray, color: str, label: str) -> None:
    ax.stairs(heights, edges, fill=True, alpha=0.18, color=color)
    ax.stairs(heights, edges, linewidth=1.8, color=color, label=label)


def think_words_per_turn(stats: CorpusStats, ax: Axes) -> None:
    """Histogram of think words per assistant turn, one outline per source.

    Linear axis: share of that source's turns per bin. Skewed data (see :func:`_is_skewed`): log axis,
    turns with at least one word, drawn as a density per decade so bins of unequal width stay comparable
    (the area under each outline is that source's share of non-empty turns); the legend gives the share
    of empty think blocks.
    """
    title = "Think words per assistant turn"
    series = [(label, agg.values["think_words_per_turn"].expand()) for label, agg in _sources(stats)]
    series = [(label, v) for label, v in series if v.size]
    if not series:
        return _no_data(ax, title, "assistant turns")
    everything = np.concatenate([v for _, v in series])
    log = _is_skewed(everything)
    top = max(everything.max(), 1.0)
    edges = _log_bins(top) if log else _int_bins(top)
    for i, (label, v) in enumerate(series):
        counts, _ = np.histogram(v, bins=edges)
        heights = 100.0 * counts / v.size
        name = f"{_label(label)}: p50 {np.median(v):.0f}"
        if log:
            heights = heights / np.diff(np.log10(edges))
            name += f", {100.0 * float((v == 0).mean()):.0f}% empty"
        _outline(ax, heights, edges, PALETTE[i % len(PALETTE)], name)
    if log:
        ax.set_xscale("log")
        ax.set_xlabel("think words per turn (log scale; empty think blocks not drawn)")
        ax.set_ylabel("% of turns per decade of words")
    else:
        ax.set_xlabel("think words per turn")
        ax.set_ylabel("share of assistant turns (%)")
    ax.set_ylim(0, ax.get_ylim()[1] * 1.3)  # room for the legend
    ax.set_title(title)
    ax.legend(loc="upper right")


def turns_per_trace(stats: CorpusStats, ax: Axes) -> None:
    """Histogram of assistant turns per trace, per source (share of that source's traces)."""
    title = "Assistant turns per trace"
    series = [(label, agg.values["turns"].expand()) for label, agg in _sources(stats)]
    series = [(label, v) for label, v in series if v.size]
    if not series:
        return _no_data(ax, title, "traces")
    edges = _int_bins(max(float(max(v.max() for _, v in series)), 1.0))
    for i, (label, v) in enumerate(series):
        counts, _ = np.histogram(v, bins=edges)
        _outline(ax, 100.0 * counts / v.size, edges, PALETTE[i % len(PALETTE)],
                 f"{_label(label)}: p50 {np.median(v):.0f}, p95 {np.percentile(v, 95):.0f}")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("assistant turns per trace")
    ax.set_ylabel("share of traces (%)")
    ax.set_ylim(0, ax.get_ylim()[1] * 1.3)
    ax.set_title(title)
    ax.legend(loc="upper right")


def parallel_width(stats: CorpusStats, ax: Axes, cap: int = 8) -> None:
    """Call blocks per assistant turn that calls tools (widths >= cap pooled), per source."""
    title = "Parallel width (tool calls per turn)"
    sources = [(label, agg.values["parallel_width"].expand()) for label, agg in _sources(stats)]
    sources = [(label, v) for label, v in sources if v.size]
    if not sources:
        return _no_data(ax, title, "turns with tool calls")
    widest = int(max(v.max() for _, v in sources))
    widths = np.arange(1, min(max(widest, 2), cap) + 1)
    pooled = widest > cap
    bar = 0.8 / len(sources)
    for i, (label, v) in enumerate(sources):
        share = np.array([(v >= w).mean() if pooled and w == cap else (v == w).mean() for w in widths]) * 100.0
        ax.bar(widths + (i - (len(sources) - 1) / 2) * bar, share, width=bar, color=PALETTE[i % len(PALETTE)],
               label=f"{_label(label)}: {100.0 * (v >= 2).mean():.0f}% of turns parallel")
    ax.set_xticks(widths, [str(w) for w in widths[:-1]] + [f"≥{cap}" if pooled else str(widths[-1])])
    ax.set_xlabel("call blocks in the turn")
    ax.set_ylabel("share of turns with calls (%)")
    ax.grid(axis="x", visible=False)
    ax.set_title(title)
    ax.legend(loc="upper right")


RATE_LABELS = (
    ("malformed_per_call", "malformed\n/ call"), ("failure_per_response", "failed\n/ response"),
    ("failure_per_turn", "failed turns\n/ turn"), ("failure_per_trajectory", "failed traces\n/ trace"),
    ("recovery_per_failure", "recoveries\n/ failure"),
)


def rates_by_source(stats: CorpusStats, ax: Axes) -> None:
    """Malformed, failure and recovery rates, one bar per source in each group."""
    title = "Failure and recovery rates by source"
    sources = _sources(stats)
    if stats.total.traces == 0:
        return _no_data(ax, title, "traces")
    x = np.arange(len(RATE_LABELS))
    bar = 0.8 / len(sources)
    for i, (label, agg) in enumerate(sources):
        rates = agg.summary()["rates"]
        vals = np.array([100.0 * rates[k] for k, _ in RATE_LABELS])
        bars = ax.bar(x + (i - (len(sources) - 1) / 2) * bar, vals, width=bar, color=PALETTE[i % len(PALETTE)],
                      label=_label(label))
        ax.bar_label(bars, fmt="%.0f", fontsize=7, padding=1, color="#4a525c")
    ax.set_xticks(x, [name for _, name in RATE_LABELS])
    ax.set_ylabel("rate (%)")
    ax.set_ylim(0, 110)
    ax.grid(axis="x", visible=False)
    ax.set_title(title)
    _legend(ax, len(sources), loc="upper left", ncols=min(len(sources), 4))


CATEGORY_RATES = (("failure_per_response", "failed / response"), ("failure_per_trajectory", "failed traces / trace"),
                  ("recovery_per_failure", "recoveries / failure"))


def rates_by_category(stats: CorpusStats, ax: Axes, top: int = 12) -> None:
    """Failure and recovery rates for the largest categories (by traces)."""
    title = f"Rates by category (largest {top})"
    cats = sorted(stats.groups["category"].items(), key=lambda kv: (-kv[1].traces, kv[0]))[:top]
    if not cats:
        return _no_data(ax, title, "traces")
    y = np.arange(len(cats))[::-1]
    bar = 0.8 / len(CATEGORY_RATES)
    summaries = [agg.summary()["rates"] for _, agg in cats]
    for i, (key, name) in enumerate(CATEGORY_RATES):
        vals = np.array([100.0 * s[key] for s in summaries])
        ax.barh(y - (i - 1) * bar, vals, height=bar, color=(PALETTE[5], PALETTE[3], PALETTE[2])[i], label=name)
    ax.set_yticks(y, [f"{_label(name)} (n={agg.traces:,})" for name, agg in cats])
    ax.set_xlabel("rate (%)")
    ax.set_xlim(0, 105)
    ax.grid(axis="y", visible=False)
    ax.set_title(title)
    ax.legend(loc="lower right", fontsize=8)


ChartFn = Callable[[CorpusStats, Axes], None]
# name -> (draw function, figure size in inches, one-line caption for the report)
CHARTS: dict[str, tuple[ChartFn, tuple[float, float], str]] = {
    "tool_usage": (tool_usage, (7.0, 4.6), "Well-formed calls per tool, stacked by source."),
    "tool_failure_rate": (tool_failure_rate, (7.0, 4.6),
                          "Responses failed by the harness rule per well-formed call (a non-zero exit code is "
                          "not a failure)."),
    "think_words_per_turn": (think_words_per_turn, (7.0, 4.2),
                             "Whitespace-separated words inside each assistant turn's think block."),
    "turns_per_trace": (turns_per_trace, (7.0, 4.2), "Assistant turns in each trace."),
    "parallel_width": (parallel_width, (7.0, 4.2), "Tool-call blocks in each assistant turn that calls tools."),
    "rates_by_source": (rates_by_source, (7.0, 4.2),
                        "Malformed calls, failed responses / turns / traces, and recoveries after a failure."),
    "rates_by_category": (rates_by_category, (7.0, 4.6), "The same rates for the largest categories."),
}


def render_chart(stats: CorpusStats, name: str, path: Path, dpi: int = 140) -> Path:
    """Draw one chart of :data:`CHARTS` to a PNG file."""
    draw, size, _ = CHARTS[name]
    with matplotlib.rc_context(STYLE):
        fig = Figure(figsize=size, dpi=dpi, layout="tight")
        draw(stats, fig.add_subplot())
        with AtomicFile(path, "chart") as tmp:
            fig.savefig(tmp, format="png", facecolor="white")
    return path


def write_plots(stats: CorpusStats, out_dir: str | Path) -> dict[str, Path]:
    """Write every chart of :data:`CHARTS` as ``out_dir/NAME.png``; returns {name: path}."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    return {name: render_chart(stats, name, out / f"{name}.png") for name in CHARTS}
