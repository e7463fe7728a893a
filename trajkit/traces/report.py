"""``trajkit traces report``: PNG charts and ONE self-contained HTML page for a corpus of traces.

The sources are streamed once. Every trace is folded into a :class:`~trajkit.traces.aggregate.CorpusStats`
(bounded memory: counters and a few integers per trace) and only the first ``max_traces`` traces are kept,
already rendered, for the page's trace viewer. Then the charts are drawn (:mod:`trajkit.traces.plots`)
and ``report.html`` is written with the charts embedded as ``data:`` URIs, the CSS and script inline and
no external resource, so the file can be mailed or attached to an issue as is.

Security model: trace text is untrusted (captured web pages with scripts and event handlers). All of it is
escaped in Python (:mod:`trajkit.traces.report_viewer`); the page script never reads trace text as code or
data to parse, only clones inert ``<template>`` elements and filters the list. As a second wall, a
Content-Security-Policy meta tag allows exactly the page's own stylesheet and script (by SHA-256 hash),
``data:`` images and nothing else -- no inline handlers, no network.

With ``--audit AUDIT.json`` (``trajkit audit … --json``) the page opens with the audit's verdict tables.

Output folder: ``report.html``, ``stats.json`` (the same object as ``trajkit traces stats --json``) and
``charts/NAME.png``.
"""
from __future__ import annotations

import base64
import hashlib
import json
import re
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any, Callable

from trajkit import version
from trajkit.errors import ConfigError, InputError
from trajkit.traces.aggregate import CorpusStats
from trajkit.atomic import refuse_same_file, write_atomic
from trajkit.traces.load import no_rows_error, source_label
from trajkit.traces.report_audit import audit_section
from trajkit.traces.report_viewer import TraceViewer, esc, esc_name
from trajkit.traces.stats import compute_stats

ASSETS = "report_assets"


@dataclass(frozen=True)
class ReportConfig:
    """What goes into the HTML page."""

    max_traces: int = 200
    max_block_chars: int = 20_000

    __field_docs__ = {
        "max_traces": "traces listed in the viewer (the first N read; statistics always cover all rows)",
        "max_block_chars": "characters shown per text block in the viewer (longer ones are cut with a note)",
    }

    def __post_init__(self) -> None:
        for name, low in (("max_traces", 0), ("max_block_chars", 100)):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise ConfigError(f"{name} must be an integer >= {low}, got {value!r} "
                                  f"(default {getattr(ReportConfig, name)})")


def write_report(specs: list[str], out_dir: str | Path, *, max_traces: int | None = None,
                 config: ReportConfig | None = None, strict: bool = False,
                 on_error: Callable[[InputError], None] | None = None, progress: bool = False,
                 require_rows: bool = False, audit: list[str] | None = None) -> Path:
    """Stream ``specs`` once, write charts, ``stats.json`` and ``report.html`` into ``out_dir``.

    ``require_rows``: sources without a readable row raise :class:`InputError` before anything is written
    (the CLI's behaviour); otherwise an empty corpus gives an empty report.

    ``max_traces`` overrides ``config.max_traces``. Unreadable rows go to ``on_error`` and are counted in
    ``skipped_rows`` (with ``strict`` the first one raises :class:`InputError`). ``audit``: files of
    ``trajkit audit … --json`` whose verdict tables head the page (:mod:`trajkit.traces.report_audit`;
    read before anything else, so a bad one fails first). Returns the HTML path.
    """
    config = config or ReportConfig()
    if max_traces is not None:
        config = ReportConfig(max_traces=max_traces, max_block_chars=config.max_block_chars)
    audit_html = audit_section(audit or [])
    out = _output_folder(out_dir)
    refuse_same_file([out / "stats.json", out / "report.html"], specs)
    stats, viewer = collect(specs, config, strict=strict, on_error=on_error, progress=progress)
    if require_rows and not stats.total.traces:
        raise no_rows_error(specs, stats.skipped_rows)
    data = stats.to_dict()
    write_atomic(out / "stats.json", json.dumps(data, indent=2) + "\n")
    from trajkit.traces.plots import write_plots  # matplotlib: imported only when a report is drawn

    charts = write_plots(stats, out / "charts")
    page = render_page(specs, data, charts, viewer, audit_html)
    return write_atomic(out / "report.html", page)


def _output_folder(out_dir: str | Path) -> Path:
    """``out_dir``, created if missing; a :class:`ConfigError` when it is a file or cannot be made."""
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise ConfigError(f"--out {str(out)!r} is a file; the report needs a folder (it writes report.html, "
                          "stats.json and charts/ into it)")
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigError(f"cannot create the report folder {str(out)!r} ({exc.strerror})") from None
    return out


def collect(specs: list[str], config: ReportConfig, *, strict: bool = False,
            on_error: Callable[[InputError], None] | None = None,
            progress: bool = False) -> tuple[CorpusStats, TraceViewer]:
    """One pass over the sources: statistics of every trace, viewer HTML of the first ones."""
    labels = sorted({source_label(s) for s in specs})
    viewer = TraceViewer(config.max_traces, config.max_block_chars, {label: i for i, label in enumerate(labels)})
    stats = compute_stats(specs, strict=strict, on_error=on_error, progress=progress, on_trace=viewer.add,
                          desc="report")
    return stats, viewer


# -- summary tables ------------------------------------------------------------------------------
COUNT_ROWS = (  # (label, key, indented under the row above)
    ("traces", "traces", False), ("messages", "messages", False), ("assistant turns", "assistant_turns", False),
    ("parallel turns (≥ 2 calls)", "parallel_turns", True), ("failed turns", "failed_turns", True),
    ("consecutive assistant turns", "consecutive_assistant_turns", True),
    ("tool calls", "tool_calls", False), ("malformed", "malformed_tool_calls", True),
    ("unknown tool", "unknown_tool_calls", True), ("invalid arguments", "invalid_argument_calls", True),
    ("unanswered", "unanswered_tool_calls", True), ("tool responses", "tool_responses", False),
    ("failed (harness rule)", "failed_tool_responses", True), ("non-zero exit", "nonzero_exit_responses", True),
    ("truncated", "truncated_responses", True), ("orphan", "orphan_tool_responses", True),
    ("failed traces", "failed_trajectories", False), ("recoveries", "recoveries", False),
    ("retry loops", "retry_loops", False), ("context summaries", "context_summaries", False),
    ("think words", "think_words", False),
)
RATE_ROWS = (
    ("malformed / call", "malformed_per_call"), ("failed / response", "failure_per_response"),
    ("failed turns / assistant turn", "failure_per_turn"), ("failed traces / trace", "failure_per_trajectory"),
    ("recoveries / failed response", "recovery_per_failure"), ("parallel turns / assistant turn", "parallel_turn_share"),
)
DIST_ROWS = (
    ("assistant turns / trace", "turns"), ("messages / trace", "messages"), ("tool calls / trace", "tool_calls"),
    ("think words / trace", "think_words"), ("think words / turn", "think_words_per_turn"),
    ("parallel width (calls / turn with calls)", "parallel_width"),
)


def fmt_int(n: int) -> str:
    return f"{n:,}"


def fmt_rate(r: float) -> str:
    return f"{100.0 * r:.1f}%"


def fmt_num(x: float) -> str:
    return f"{int(x):,}" if float(x).is_integer() else f"{x:,.1f}"


def _columns(data: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """The whole corpus, then each source side by side when there is more than one."""
    by_source = data.get("by", {}).get("source", {})
    return [("all", data)] + (sorted(by_source.items()) if len(by_source) > 1 else [])


def _table(table_id: str, head: list[str], rows: list[tuple[str, str, list[str], str]]) -> str:
    """rows: (data-key, label, cells, css class); every string is escaped here."""
    th = "".join(f"<th>{esc(h)}</th>" for h in head)
    body = "".join(f'<tr data-key="{esc(key)}" class="{cls}"><th scope="row">{esc_name(name)}</th>'
                   + "".join(f"<td>{esc(c)}</td>" for c in cells) + "</tr>" for key, name, cells, cls in rows)
    return f'<div class="table-wrap"><table id="{table_id}"><thead><tr>{th}</tr></thead><tbody>{body}</tbody></table></div>'


def counts_table(data: dict[str, Any]) -> str:
    cols = _columns(data)
    rows = [(key, label, [fmt_int(c[key]) for _, c in cols], "sub" if sub else "") for label, key, sub in COUNT_ROWS]
    rows.append(("skipped_rows", "skipped rows", [fmt_int(data["skipped_rows"])] + ["—"] * (len(cols) - 1), ""))
    return _table("t-counts", ["count"] + [name for name, _ in cols], rows)


def rates_table(data: dict[str, Any]) -> str:
    cols = _columns(data)
    rows = [(key, label, [fmt_rate(c["rates"][key]) for _, c in cols], "") for label, key in RATE_ROWS]
    return _table("t-rates", ["rate"] + [name for name, _ in cols], rows)


def distributions_table(data: dict[str, Any]) -> str:
    """One row per distribution for the whole corpus, then one indented row per source."""
    cols = _columns(data)
    stats = ("mean", "p50", "p95", "max")
    rows = []
    for label, key in DIST_ROWS:
        for i, (name, c) in enumerate(cols):
            d = c["distributions"][key]
            rows.append((f"{key}/{name}", label if i == 0 else name, [fmt_num(d[s]) for s in stats],
                         "sub" if i else ""))
    return _table("t-dists", ["distribution"] + list(stats), rows)


def categories_table(data: dict[str, Any]) -> str:
    cats = sorted(data.get("by", {}).get("category", {}).items(), key=lambda kv: (-kv[1]["traces"], kv[0]))
    head = ["category", "traces", "turns", "tool calls", "malformed", "responses", "failed", "failed / response",
            "failed traces / trace", "recoveries / failure", "think words / turn p50"]
    rows = [(name, name, [fmt_int(c["traces"]), fmt_int(c["assistant_turns"]), fmt_int(c["tool_calls"]),
                          fmt_int(c["malformed_tool_calls"]), fmt_int(c["tool_responses"]),
                          fmt_int(c["failed_tool_responses"]), fmt_rate(c["rates"]["failure_per_response"]),
                          fmt_rate(c["rates"]["failure_per_trajectory"]), fmt_rate(c["rates"]["recovery_per_failure"]),
                          fmt_num(c["distributions"]["think_words_per_turn"]["p50"])], "")
            for name, c in cats]
    return _table("t-cats", head, rows)


def tools_table(data: dict[str, Any], top: int = 40) -> str:
    cols = _columns(data)
    failures = data["tool_failure_counts"]
    head = ["tool"] + [f"calls ({name})" for name, _ in cols] + ["failed responses", "failed / call"]
    rows = []
    for tool, n in list(data["tool_call_counts"].items())[:top]:
        cells = [fmt_int(c["tool_call_counts"].get(tool, 0)) for _, c in cols]
        rows.append((tool, tool, cells + [fmt_int(failures.get(tool, 0)), fmt_rate(failures.get(tool, 0) / n)], ""))
    return _table("t-tools", head, rows)


def _cards(data: dict[str, Any]) -> str:
    r, d = data["rates"], data["distributions"]
    cards = [("traces", fmt_int(data["traces"]), f'{fmt_int(data["skipped_rows"])} rows skipped'),
             ("assistant turns", fmt_int(data["assistant_turns"]), f'p50 {fmt_num(d["turns"]["p50"])} per trace'),
             ("tool calls", fmt_int(data["tool_calls"]), f'{fmt_rate(r["malformed_per_call"])} malformed'),
             ("failed responses", fmt_rate(r["failure_per_response"]),
              f'{fmt_int(data["failed_tool_responses"])} of {fmt_int(data["tool_responses"])}'),
             ("recovered failures", fmt_rate(r["recovery_per_failure"]), f'{fmt_int(data["recoveries"])} recoveries'),
             ("think words / turn", fmt_num(d["think_words_per_turn"]["p50"]),
              f'median; p95 {fmt_num(d["think_words_per_turn"]["p95"])}')]
    return '<div class="cards">' + "".join(
        f'<div class="card" data-key="{esc(k)}"><div class="c-label">{esc(k)}</div><div class="c-value">{esc(v)}'
        f'</div><div class="c-note">{esc(n)}</div></div>' for k, v, n in cards) + "</div>"


def summary_section(data: dict[str, Any]) -> str:
    diags = "".join(f"<li><code>{esc(code)}</code> {fmt_int(n)}</li>" for code, n in data["diagnostics"].items())
    return "".join([
        "<h2>Summary</h2>", _cards(data),
        '<div class="grid2"><div><h3>Counts</h3>', counts_table(data),
        '</div><div><h3>Rates</h3>', rates_table(data), "<h3>Distributions</h3>", distributions_table(data),
        "<h3>Parse diagnostics</h3>", f'<ul class="diag-list">{diags or "<li>none</li>"}</ul></div></div>',
        "<h3>By category</h3>", categories_table(data),
        "<h3>Tools</h3>", tools_table(data),
    ])


# -- page ----------------------------------------------------------------------------------------
def charts_section(charts: dict[str, Path]) -> str:
    from trajkit.traces.plots import CHARTS

    figs = []
    for name, path in charts.items():
        b64 = base64.b64encode(path.read_bytes()).decode("ascii")
        figs.append(f'<figure id="chart-{name}"><img src="data:image/png;base64,{b64}" alt="{esc(name)} chart">'
                    f"<figcaption>{esc(CHARTS[name][2])}</figcaption></figure>")
    return '<h2>Charts</h2><div class="charts">' + "".join(figs) + "</div>"


def viewer_section(viewer: TraceViewer) -> str:
    held = len(viewer.items)
    note = (f"The viewer holds the first {held:,} of {viewer.offered:,} traces (raise it with --max-traces); "
            "the summary and charts cover all of them." if held < viewer.offered else
            f"All {held:,} traces. Click one to open it.")
    return ("<h2>Traces</h2>"
            f'<p class="note">{esc(note)} Text is shown exactly as captured and escaped: nothing in it runs.</p>'
            '<div class="controls"><input id="trace-search" type="search" autocomplete="off" spellcheck="false" '
            'placeholder="Search task, id, source, tool names and text (press / to focus)" aria-label="search traces">'
            '<label><input type="checkbox" id="only-failed"> with failed responses</label>'
            '<label><input type="checkbox" id="only-malformed"> with malformed calls</label>'
            f'<span id="trace-shown" class="count">{held:,} of {held:,} traces</span></div>'
            f'<div id="trace-list">{"".join(viewer.items)}</div>'
            '<p id="no-match" class="note" hidden>No trace matches.</p>')


def _asset(name: str) -> str:
    return resources.files("trajkit.traces").joinpath(ASSETS, name).read_text(encoding="utf-8")


def _sha256(text: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode("utf-8")).digest()).decode("ascii") + "'"


def render_page(specs: list[str], data: dict[str, Any], charts: dict[str, Path], viewer: TraceViewer,
                audit: str = "") -> str:
    """The whole HTML document; placeholders are filled in ONE pass so trace text is never re-scanned.
    ``audit``: the audit section's HTML (:func:`~trajkit.traces.report_audit.audit_section`), '' for none."""
    css, js = _asset("report.css"), _asset("report.js")
    csp = (f"default-src 'none'; script-src {_sha256(js)}; style-src {_sha256(css)}; img-src data:; "
           "base-uri 'none'; form-action 'none'")
    labels = sorted({source_label(s) for s in specs})
    fields = {
        "csp": esc(csp), "css": css, "js": js,
        "title": esc_name("trajkit trace report: " + ", ".join(labels)),
        "heading": esc_name("Trace report: " + ", ".join(labels)),
        "subtitle": esc_name(f'{data["traces"]:,} traces from {len(specs)} source(s): ' + ", ".join(specs)),
        "summary": summary_section(data), "charts": charts_section(charts), "viewer": viewer_section(viewer),
        "audit": audit, "audit_nav": '<a href="#audit">Audit</a>' if audit else "",
        "system_templates": viewer.system_templates(),
        "footer": esc(f"Generated by trajkit {version()}. Self-contained: no network, only this page's own "
                      "script runs (Content-Security-Policy)."),
    }
    return re.sub(r"\{\{(\w+)\}\}", lambda m: fields[m.group(1)], _asset("page.html"))
