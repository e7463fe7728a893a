"""The HTML report and its charts on hand-made rows, malicious payloads included.

Corpus (see :func:`write_corpus`), hand-derived totals in ``EXPECTED``:
  alpha.jsonl: evil-1 (payloads everywhere, 1 call / 1 ok response), fail-1 (1 call, 1 failed response),
               quirky-1 (conftest.quirky_row: 7 calls, 1 malformed, 7 responses, 3 failed, 1 non-zero exit)
  beta.jsonl:  glm-1 (2 web_search calls, first response "Error: rate limited" fails), a bad JSON line
               (line 2, skipped), glm-2 (1 call, exit_code 1 which is not a failure)
"""
import base64
import hashlib
import html
import json
import re
from html.parser import HTMLParser

import numpy as np
import pytest
from matplotlib.figure import Figure

from trajkit.cli.main import main
from trajkit.errors import ConfigError, InputError
from trajkit.traces.plots import (
    CHARTS,
    parallel_width,
    think_words_per_turn,
    tool_failure_rate,
    tool_usage,
)
from trajkit.traces.report import ReportConfig, write_report
from trajkit.traces.stats import compute_stats

from .conftest import SYSTEM, call, quirky_row, resp

P1 = "<script>window.__pwned=1</script>"
P2 = '<img src=x onerror="window.__pwned=2">'
P3 = "</textarea><script>window.__pwned=3</script>"
P4 = "</script><script>window.__pwned=4</script>"
PAYLOADS = (P1, P2, P3, P4)
EVIL = P1 + " " + P2 + " " + P3 + " " + P4
EVIL_TASK = "Inspect the page " + EVIL + " {{js}}"

EXPECTED = {
    "traces": 5, "skipped_rows": 1,
    "tool_calls": 12,             # 1 + 1 + 7 + 2 + 1
    "malformed_tool_calls": 1,    # quirky-1
    "tool_responses": 12,         # 1 + 1 + 7 + 2 + 1
    "failed_tool_responses": 5,   # fail-1: 1, quirky-1: 3, glm-1: 1
    "nonzero_exit_responses": 2,  # quirky-1 and glm-2 (exit 1, not failures)
    "failed_trajectories": 3,     # fail-1, quirky-1, glm-1
}


def _row(id, category, task, conv):
    return {"id": id, "category": category, "subcategory": "test", "task": task,
            "conversations": [{"from": f, "value": v} for f, v in conv]}


def evil_row():
    return _row("evil-1", "Web", EVIL_TASK, [
        ("system", SYSTEM), ("human", "Summarize this page: " + P2),
        ("gpt", "<think>\nThe page says " + EVIL + "\n</think>\nReading it now " + P1 + "\n"
         + call("terminal", {"command": "curl " + P4})),
        ("tool", resp("terminal", 0, {"output": EVIL, "exit_code": 0, "error": None})),
        ("gpt", "<think>\ndone\n</think>\nThe page holds scripts.")])


def fail_row():
    return _row("fail-1", "Files", "Read the shadow file", [
        ("system", SYSTEM), ("human", "Read /etc/shadow"),
        ("gpt", "<think>\ncheck the disk quota first\n</think>\n" + call("read_file", {"path": "/etc/shadow"})),
        ("tool", resp("read_file", 0, {"success": False, "error": "permission denied"})),
        ("gpt", "<think>\nask for sudo\n</think>\nI cannot read it.")])


def glm_rows():
    return [
        _row("glm-1", "Web", "Find the trajkit docs", [
            ("system", SYSTEM), ("human", "find docs"),
            ("gpt", "<think>search</think>" + call("web_search", {"query": "trajkit docs"})),
            ("tool", resp("web_search", 0, "Error: rate limited")),
            ("gpt", "<think>retry</think>" + call("web_search", {"query": "trajkit documentation"})),
            ("tool", resp("web_search", 1, {"results": ["https://example.org"]})),
            ("gpt", "Found them.")]),
        _row("glm-2", "Coding", "grep for x", [
            ("system", SYSTEM), ("human", "is x in f?"),
            ("gpt", "<think>grep</think>" + call("terminal", {"command": "grep x f"})),
            ("tool", resp("terminal", 0, {"output": "", "exit_code": 1, "error": None})),
            ("gpt", "No.")]),
    ]


def write_corpus(folder):
    """Two sources; returns their paths (as strings)."""
    alpha, beta = folder / "alpha.jsonl", folder / "beta.jsonl"
    alpha.write_text("".join(json.dumps(r) + "\n" for r in (evil_row(), fail_row(), quirky_row())))
    g1, g2 = glm_rows()
    beta.write_text(json.dumps(g1) + "\n{not json\n" + json.dumps(g2) + "\n")
    return [str(alpha), str(beta)]


class PageParser(HTMLParser):
    """Every start tag (with attributes), every table row by table id, and script bodies."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.tags, self.tables, self.scripts = [], {}, []
        self._table = self._row = self._cell = self._script = None

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        self.tags.append((tag, attrs))
        if tag == "table":
            self._table = self.tables.setdefault(attrs.get("id"), [])
        elif tag == "tr" and self._table is not None:
            self._row = [attrs.get("data-key"), []]
            self._table.append(self._row)
        elif tag in ("td", "th") and self._row is not None:
            self._cell = []
        elif tag == "script":
            self._script = []

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self._cell is not None:
            self._row[1].append("".join(self._cell))
            self._cell = None
        elif tag == "table":
            self._table = self._row = None
        elif tag == "script" and self._script is not None:
            self.scripts.append("".join(self._script))
            self._script = None

    def handle_data(self, data):
        if self._cell is not None:
            self._cell.append(data)
        if self._script is not None:
            self._script.append(data)


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    folder = tmp_path_factory.mktemp("report")
    specs = write_corpus(folder)
    errors = []
    path = write_report(specs, folder / "out", on_error=errors.append)
    page = path.read_text(encoding="utf-8")
    parser = PageParser()
    parser.feed(page)
    return {"specs": specs, "path": path, "page": page, "parsed": parser, "errors": errors,
            "stats": json.loads((folder / "out" / "stats.json").read_text())}


def test_payloads_never_appear_unescaped(report):
    page = report["page"]
    for payload in PAYLOADS:
        assert payload not in page
    assert "onerror=" not in page.replace("onerror=&quot;", "")  # only ever as escaped text
    for payload in PAYLOADS:  # ... but they are all there as text
        assert html.escape(payload) in page


def test_only_the_page_script_and_chart_images(report):
    parsed = report["parsed"]
    scripts = [a for t, a in parsed.tags if t == "script"]
    assert len(scripts) == 1 and parsed.scripts and "window.__pwned" not in parsed.scripts[0]
    assert all(not k.startswith("on") for _, attrs in parsed.tags for k in attrs)
    imgs = [a["src"] for t, a in parsed.tags if t == "img"]
    assert len(imgs) == len(CHARTS) and all(src.startswith("data:image/png;base64,") for src in imgs)
    assert not [t for t, _ in parsed.tags if t in ("iframe", "object", "embed", "base", "form")]
    links = [a for t, a in parsed.tags if t == "link"]
    assert links == [{"rel": "icon", "href": "data:,"}]  # no external resource


def test_csp_allows_exactly_the_page_script_and_style(report):
    parsed = report["parsed"]
    csp = next(a["content"] for t, a in parsed.tags if t == "meta" and a.get("http-equiv") == "Content-Security-Policy")
    digest = base64.b64encode(hashlib.sha256(parsed.scripts[0].encode()).digest()).decode()
    assert f"script-src 'sha256-{digest}';" in csp
    assert "default-src 'none'" in csp and "img-src data:" in csp and "unsafe-inline" not in csp
    style = re.search(r"<style>(.*?)</style>", report["page"], re.S).group(1)
    assert f"style-src 'sha256-{base64.b64encode(hashlib.sha256(style.encode()).digest()).decode()}'" in csp


def test_placeholders_in_trace_text_are_not_filled(report):
    page = report["page"]
    assert page.count(report["parsed"].scripts[0]) == 1
    assert "{{js}}" in page  # the task's literal text survives


def test_summary_counts_equal_stats(report):
    stats = report["stats"]
    assert {k: stats[k] for k in EXPECTED} == EXPECTED
    rows = {key: cells for key, cells in report["parsed"].tables["t-counts"]}
    head = rows.pop(None)
    assert head == ["count", "all", "alpha", "beta"]
    for key, cells in rows.items():
        if key == "skipped_rows":
            assert cells[1:] == ["1", "—", "—"]
            continue
        want = [stats[key], stats["by"]["source"]["alpha"][key], stats["by"]["source"]["beta"][key]]
        assert cells[1:] == [f"{n:,}" for n in want], key
    assert rows["tool_calls"][1:] == ["12", "9", "3"]
    assert rows["failed_tool_responses"][1:] == ["5", "4", "1"]


def test_summary_rates_and_categories(report):
    rates = {key: cells for key, cells in report["parsed"].tables["t-rates"]}
    assert rates["failure_per_response"][1:] == ["41.7%", "44.4%", "33.3%"]  # 5/12, 4/9, 1/3
    assert rates["failure_per_trajectory"][1:] == ["60.0%", "66.7%", "50.0%"]  # 3/5, 2/3, 1/2
    cats = {key: cells for key, cells in report["parsed"].tables["t-cats"]}
    assert cats["Web"][:2] == ["Web", "2"] and cats["Files"][:2] == ["Files", "2"]
    assert cats["Files"][6] == "4"  # failed responses: fail-1 1 + quirky-1 3


def test_matches_stats_command(report):
    assert compute_stats(report["specs"], progress=False).to_dict() == report["stats"]


def test_skipped_row_reported_with_file_and_line(report):
    assert len(report["errors"]) == 1
    err = report["errors"][0]
    assert isinstance(err, InputError) and str(err).startswith(report["specs"][1] + ":2:")


def test_viewer_lists_every_trace_and_shares_the_system_prompt(report):
    parsed, page = report["parsed"], report["page"]
    traces = [a for t, a in parsed.tags if t == "details" and a.get("class") == "trace"]
    assert len(traces) == 5
    assert [a["data-failed"] for a in traces] == ["0", "1", "1", "1", "0"]
    assert [a["data-malformed"] for a in traces] == ["0", "0", "1", "0", "0"]
    assert page.count(html.escape(SYSTEM)) == 1  # stored once, five traces point at it
    assert len([a for t, a in parsed.tags if t == "details" and a.get("data-sys") == "0"]) == 5


def test_charts_are_valid_pngs(report):
    charts = report["path"].parent / "charts"
    for name in CHARTS:
        data = (charts / f"{name}.png").read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 5000
        width, height = int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")
        assert width >= 800 and height >= 500
        assert f"data:image/png;base64,{base64.b64encode(data).decode()}" in report["page"]


def test_max_traces_and_block_cap(tmp_path):
    specs = write_corpus(tmp_path)
    page = write_report(specs, tmp_path / "out", max_traces=2,
                        config=ReportConfig(max_block_chars=100)).read_text()
    assert page.count('<details class="trace"') == 2
    assert "first 2 of 5 traces" in page
    assert "more characters not shown" in page  # the system prompt is not capped; long outputs are
    assert json.loads((tmp_path / "out" / "stats.json").read_text())["traces"] == 5


def test_empty_corpus_still_writes_a_report(tmp_path):
    src = tmp_path / "empty.jsonl"
    src.write_text("")
    path = write_report([str(src)], tmp_path / "out")
    assert "0 of 0 traces" in path.read_text()
    assert all((tmp_path / "out" / "charts" / f"{n}.png").stat().st_size > 0 for n in CHARTS)


def test_config_errors_name_the_parameter():
    with pytest.raises(ConfigError, match="max_traces"):
        ReportConfig(max_traces=-1)
    with pytest.raises(ConfigError, match="max_block_chars"):
        ReportConfig(max_block_chars=True)


def test_strict_raises_on_the_bad_row(tmp_path):
    specs = write_corpus(tmp_path)
    with pytest.raises(InputError, match=r"beta\.jsonl:2:"):
        write_report(specs, tmp_path / "out", strict=True)


def test_cli_report(tmp_path, capsys):
    specs = write_corpus(tmp_path)
    assert main(["traces", "report", *specs, "--out", str(tmp_path / "out"), "-q", "--max-traces", "3"]) == 0
    out, err = capsys.readouterr()
    assert str(tmp_path / "out" / "report.html") in out
    assert "beta.jsonl:2:" in err and "warning" in err
    assert (tmp_path / "out" / "report.html").read_text().count('<details class="trace"') == 3
    assert main(["traces", "report", *specs, "--out", str(tmp_path / "o2"), "-q", "--strict"]) == 2
    assert "beta.jsonl:2:" in capsys.readouterr().err


# -- charts draw the numbers they claim -----------------------------------------------------------
@pytest.fixture(scope="module")
def corpus_stats(tmp_path_factory):
    return compute_stats(write_corpus(tmp_path_factory.mktemp("stats")), progress=False)


def _axes():
    return Figure().add_subplot()


def test_tool_usage_bars_stack_per_source(corpus_stats):
    ax = _axes()
    tool_usage(corpus_stats, ax)
    labels = [t.get_text() for t in ax.get_yticklabels()]
    bars = ax.patches
    n = len(labels)
    # well-formed calls: terminal 3 + 1 (evil, quirky x2 | glm-2), read_file 3 (fail-1, quirky x2),
    # nonexistent 2 (quirky), web_search 2 (glm-1); most used first, drawn from the top down
    assert labels[:2] == ["terminal", "read_file"] and sorted(labels[2:]) == ["nonexistent", "web_search"]
    stacked = {label: (bars[i].get_width(), bars[n + i].get_width()) for i, label in enumerate(labels)}
    assert stacked == {"terminal": (3, 1), "read_file": (3, 0), "nonexistent": (2, 0), "web_search": (0, 2)}
    assert [b.get_y() for b in bars[:n]] == sorted((b.get_y() for b in bars[:n]), reverse=True)
    assert all(bars[n + i].get_x() == bars[i].get_width() for i in range(n))  # beta starts where alpha ends


def test_failure_rate_bars(corpus_stats):
    ax = _axes()
    tool_failure_rate(corpus_stats, ax)
    labels = [t.get_text() for t in ax.get_yticklabels()]
    rates = dict(zip(labels, (p.get_width() for p in ax.patches)))
    # read_file 3 of 3: fail-1, quirky's success:false and quirky's "Error: bad call" (answering the
    # malformed call, whose name is recovered); web_search 1 of 2; terminal: quirky's "" = 1 of 4
    assert rates == pytest.approx({"read_file": 100.0, "web_search": 50.0, "terminal": 25.0, "nonexistent": 0.0})


def test_parallel_width_shares(corpus_stats):
    ax = _axes()
    parallel_width(corpus_stats, ax)
    heights = [p.get_height() for p in ax.patches]
    # alpha turns with calls: evil 1, fail 1, quirky 2,1,2,1,1 -> widths 1 x5, 2 x2; beta: 1,1,1
    assert heights == pytest.approx([500 / 7, 200 / 7, 100.0, 0.0])  # alpha widths 1, 2; beta widths 1, 2


def test_real_row(tmp_path, real_row):
    """The real kimi row: 25,879-character system prompt, 15 tools, one failed session_search response."""
    src = tmp_path / "kimi.json"
    src.write_text(json.dumps(real_row))
    page = write_report([str(src)], tmp_path / "out").read_text()
    assert "System prompt · 25,879 characters · 15 tools" in page
    assert page.count(html.escape(real_row["conversations_preview"][0]["value"])) == 1
    assert "Thinking · 44 words" in page
    assert '<div class="resp failed">' in page and "Session database not available." in page
    assert '<span class="tool">session_search</span>' in page


def test_charts_take_untrusted_names(tmp_path):
    """Names go into the PNGs as plain text: no mathtext parsing (a lone $ or \\frac{ would raise)."""
    from trajkit.traces.aggregate import CorpusStats
    from trajkit.traces.hermes import parse_row
    from trajkit.traces.metrics import trace_metrics
    from trajkit.traces.plots import write_plots

    row = _row("m-1", "cost $\\frac{ " * 20, "t", [
        ("human", "go"), ("gpt", call("$\\frac{x", {}) + call("a" * 300, {})),
        ("tool", resp("x", 0, "error: $\\bad{") + resp("y", 1, "ok"))])
    stats = CorpusStats()
    trace = parse_row(row, source="$src_" * 10)
    stats.add(trace, trace_metrics(trace))
    paths = write_plots(stats, tmp_path)
    assert sorted(paths) == sorted(CHARTS) and all(p.stat().st_size > 5000 for p in paths.values())


def _stairs(ax):
    """(values, edges) of each outline drawn by a histogram chart (every other StepPatch is its fill)."""
    return [p.get_data()[:2] for p in ax.patches][1::2]


def test_think_words_histogram_linear(corpus_stats):
    ax = _axes()
    think_words_per_turn(corpus_stats, ax)
    # think words per assistant turn -- alpha: evil 9 (3 words + P1 + 3 in P2 + P3 + P4), 1; fail-1 5, 3;
    # quirky 1, 0, 3, 3, 1, 2.  beta: glm-1 1, 1, 0 (no think block); glm-2 1, 0.
    # max 9, median 1: linear axis, one bin per word count 0..9, share of that source's turns
    (alpha, edges), (beta, _) = _stairs(ax)
    assert ax.get_xscale() == "linear" and list(edges) == [k - 0.5 for k in range(11)]
    assert list(alpha) == pytest.approx([10, 30, 10, 30, 0, 10, 0, 0, 0, 10])
    assert list(beta) == pytest.approx([40, 60, 0, 0, 0, 0, 0, 0, 0, 0])


def test_think_words_histogram_log_density():
    from trajkit.traces.aggregate import CorpusStats

    stats = CorpusStats()
    stats.total.values["think_words_per_turn"].extend([0, 1, 1, 2, 100])  # max / median = 100: skewed
    ax = _axes()
    think_words_per_turn(stats, ax)
    ((heights, edges),) = _stairs(ax)
    assert ax.get_xscale() == "log" and edges[0] == 0.5 and edges[-1] == 100.5
    # density per decade: the area under the outline is the share of non-empty turns (4 of 5)
    assert float(np.sum(heights * np.diff(np.log10(edges)))) == pytest.approx(80.0)
    assert heights[-1] * np.diff(np.log10(edges))[-1] == pytest.approx(20.0)  # the 100-word turn
    assert ax.get_legend().get_texts()[0].get_text() == "all: p50 1, 20% empty"
