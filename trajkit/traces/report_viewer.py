"""Server-side HTML for the report's trace viewer.

Trace text is untrusted (browser tools capture raw pages with ``<script>``, event handlers, ``</textarea>``
and ``</script>`` inside JSON), so every piece of it goes through :func:`html.escape` (quotes included)
here, in Python, and nothing from a trace ever reaches JavaScript as code or as a string to parse: the page
script only toggles, clones and filters elements. Each trace's body sits in an inert ``<template>`` that
the page clones on first expand (lazy rendering keeps a few hundred traces fast); a system prompt (~26k
characters, usually the same in every row) is stored once in a shared ``<template>`` and referenced.

Per-block text is capped at ``max_block_chars`` with a visible note: the viewer is for reading traces,
the source file holds the full text.
"""
from __future__ import annotations

import hashlib
import html
import json
from typing import Any

from trajkit.traces.harness import decode_json_text
from trajkit.traces.metrics import TraceMetrics
from trajkit.traces.model import Message, Segment, ToolCall, ToolResponse, Trace
from trajkit.traces.safe_text import mark_bidi

ROLE_LABEL = {"system": "System", "user": "User", "assistant": "Assistant", "tool": "Tool"}


def esc(value: Any) -> str:
    """Escape any value for HTML text or a quoted attribute."""
    return html.escape(str(value), quote=True)


def esc_name(value: Any) -> str:
    """:func:`esc` for ids, titles and names: bidi controls (U+202E reverses what follows) are shown as a
    visible ``[U+202E]`` mark instead of reordering the text around them."""
    return esc(mark_bidi(str(value)))


def plural(n: int, word: str) -> str:
    return f"{n:,} {word}" + ("" if n == 1 else "s")


def badge(text: str, kind: str = "") -> str:
    return f'<span class="badge {kind}">{esc(text)}</span>'


class TraceViewer:
    """Collects viewer HTML for the first ``max_traces`` traces offered to :meth:`add`."""

    def __init__(self, max_traces: int, max_block_chars: int, source_index: dict[str, int]):
        self.max_traces = max_traces
        self.cap = max_block_chars
        self.source_index = source_index
        self.items: list[str] = []
        self.offered = 0
        self._system: dict[str, tuple[int, str]] = {}  # sha1 of a system prompt -> (index, text)

    def add(self, trace: Trace, tm: TraceMetrics) -> None:
        self.offered += 1
        if len(self.items) < self.max_traces:
            self.items.append(self.render_item(trace, tm, len(self.items) + 1))

    def system_templates(self) -> str:
        return "".join(f'<template id="sys-{i}"><pre class="block sys-text">{esc(text)}</pre></template>'
                       for i, text in self._system.values())

    # -- one trace -------------------------------------------------------------------------------
    def render_item(self, trace: Trace, tm: TraceMetrics, number: int) -> str:
        c = tm.counts
        failed, malformed = c["failed_tool_responses"], c["malformed_tool_calls"]
        flags = {"failed": failed > 0, "malformed": malformed > 0}
        search_key = " ".join(str(x) for x in (trace.id, trace.source, trace.category, trace.subcategory,
                                               trace.task, *tm.tool_call_counts) if x).lower()
        attrs = " ".join(f'data-{k}="{int(v)}"' for k, v in flags.items())
        return (f'<details class="trace" id="trace-{number}" data-q="{esc(search_key)}" {attrs}>'
                f'<summary>{self._summary_line(trace, tm, number)}</summary>'
                f'<div class="t-body"></div><template>{self._body(trace, tm)}</template></details>')

    def _summary_line(self, trace: Trace, tm: TraceMetrics, number: int) -> str:
        c = tm.counts
        src = trace.source or "(none)"
        cat = " / ".join(esc_name(x) for x in (trace.category, trace.subcategory) if x) or "—"
        counts = " · ".join(plural(c[key], word) for key, word in (
            ("assistant_turns", "turn"), ("tool_calls", "call"), ("tool_responses", "response"),
            ("think_words", "think word")))
        badges = []
        if c["failed_tool_responses"]:
            badges.append(badge(f'{c["failed_tool_responses"]} failed', "bad"))
        if c["malformed_tool_calls"]:
            badges.append(badge(f'{c["malformed_tool_calls"]} malformed', "warn"))
        if c["nonzero_exit_responses"]:
            badges.append(badge(f'{c["nonzero_exit_responses"]} exit≠0', "muted"))
        if c["unanswered_tool_calls"] or c["orphan_tool_responses"]:
            badges.append(badge("unpaired", "warn"))
        if tm.context_summary:
            badges.append(badge("context summary", "info"))
        return (f'<span class="t-num">{number}</span>'
                f'<span class="t-main"><span class="t-task" title="{esc_name(trace.task or "")}">'
                f'{esc_name(trace.task or "(no task)")}</span>'
                f'<span class="t-meta"><span class="chip src-{self.source_index.get(src, 0) % 8}">{esc_name(src)}</span>'
                f'<span class="t-cat">{cat}</span><code class="t-id">{esc_name(trace.id or "(no id)")}</code></span></span>'
                f'<span class="t-side"><span class="t-counts">{counts}</span>'
                f'<span class="badges">{"".join(badges)}</span></span>')

    def _body(self, trace: Trace, tm: TraceMetrics) -> str:
        turn = 0
        parts = [self._meta(trace, tm), '<div class="msgs">']
        for i, msg in enumerate(trace.messages):
            turn += msg.role == "assistant"
            parts.append(self._message(trace, msg, i, turn))
        parts.append("</div>")
        if trace.diagnostics:
            parts.append(_diagnostics(trace))
        return "".join(parts)

    def _meta(self, trace: Trace, tm: TraceMetrics) -> str:
        rows = [("id", trace.id), ("source", trace.source), ("category", trace.category),
                ("subcategory", trace.subcategory), ("format", trace.format),
                ("tools declared", len(trace.tools)), ("messages", tm.counts["messages"])]
        cells = "".join(f"<div><dt>{esc(k)}</dt><dd>{esc_name(v if v not in (None, '') else '—')}</dd></div>"
                        for k, v in rows)
        task = f'<p class="task-full">{esc_name(trace.task)}</p>' if trace.task else ""
        return f'<div class="t-info">{task}<dl class="facts">{cells}</dl></div>'

    # -- messages --------------------------------------------------------------------------------
    def _message(self, trace: Trace, msg: Message, index: int, turn: int) -> str:
        head = f'<span class="role">{ROLE_LABEL[msg.role]}</span><span class="m-idx">message {index + 1}'
        head += f" · turn {turn}" if msg.role == "assistant" else ""
        head += "</span>"
        if msg.role == "system":
            body = self._system_block(trace, msg.text)
        elif msg.role == "user":
            summary = msg.text.startswith("[CONTEXT SUMMARY]:")
            head += badge("context summary", "info") if summary else ""
            body = self._text(msg.text, "user-text")
        else:
            body = "".join(self._segment(trace, msg, seg) for seg in msg.segments)
        return f'<section class="msg m-{msg.role}"><header>{head}</header>{body}</section>'

    def _system_block(self, trace: Trace, text: str) -> str:
        key = hashlib.sha1(text.encode("utf-8", "surrogatepass")).hexdigest()
        index, _ = self._system.setdefault(key, (len(self._system), text))
        return (f'<details class="sys" data-sys="{index}"><summary>System prompt · {len(text):,} characters · '
                f'{len(trace.tools)} tools</summary><div class="sys-body"></div></details>')

    def _segment(self, trace: Trace, msg: Message, seg: Segment) -> str:
        if seg.kind == "think":
            return self._think(msg.think or "")
        if seg.kind == "tool_call":
            return self._call(trace, msg.tool_calls[seg.ref], seg.ref)
        if seg.kind == "tool_response":
            return self._response(msg.tool_responses[seg.ref], seg.ref)
        if not seg.raw.strip():
            return ""
        cls = "narration" if msg.role == "assistant" else "stray"
        return self._text(seg.raw.strip(), cls)

    def _think(self, text: str) -> str:
        if not text:
            return '<div class="think empty">Thinking · empty</div>'
        words = len(text.split())
        return (f'<details class="think" open><summary>Thinking · {plural(words, "word")}</summary>'
                f'{self._text(text, "think-text")}</details>')

    def _call(self, trace: Trace, call: ToolCall, k: int) -> str:
        badges = []
        if call.error:
            badges.append(badge(f"malformed: {call.error}", "warn"))
        if not call.closed:
            badges.append(badge("unclosed <tool_call>", "warn"))
        if call.ok and trace.tools and call.name not in trace.tools:
            badges.append(badge("unknown tool", "warn"))
        if call.ok:
            body = self._text(json.dumps(call.arguments, indent=2, ensure_ascii=False), "json")
        else:
            body = '<div class="raw-label">raw block body</div>' + self._text(call.body.strip(), "json")
        name = esc(call.name) if call.name else "(no name)"
        ident = f'<code class="muted">{esc(call.id)}</code>' if call.id else ""
        return (f'<div class="call{"" if call.ok else " bad"}"><div class="c-head"><span class="arrow">call {k + 1}'
                f'</span><span class="tool">{name}</span>{ident}{"".join(badges)}</div>{body}</div>')

    def _response(self, resp: ToolResponse, k: int) -> str:
        badges = [badge("failed", "bad") if resp.failed else badge("ok", "good")]
        if resp.exit_code is not None:
            badges.append(badge(f"exit {resp.exit_code}", "muted" if resp.exit_code else "plain"))
        if resp.truncated:
            badges.append(badge("truncated", "info"))
        if resp.error:
            badges.append(badge(resp.error, "warn"))
        if not resp.closed:
            badges.append(badge("unclosed <tool_response>", "warn"))
        name = esc(resp.name) if resp.name else "(no name)"
        ident = f'<code class="muted">{esc(resp.tool_call_id)}</code>' if resp.tool_call_id else ""
        cls = "resp failed" if resp.failed else "resp"
        cls += " nonzero" if resp.exit_code else ""
        return (f'<div class="{cls}"><div class="c-head"><span class="arrow">response {k + 1}</span>'
                f'<span class="tool">{name}</span>{ident}{"".join(badges)}</div>{self._result(resp.result)}</div>')

    def _result(self, result: Any) -> str:
        value, _ = decode_json_text(result)
        if isinstance(value, str):
            return self._text(value, "out") if value else '<div class="empty-out">(empty)</div>'
        if not isinstance(value, dict) or not value:
            return self._text(json.dumps(value, indent=2, ensure_ascii=False), "json")
        rows = []
        for key, v in value.items():
            shown = self._value(v)
            err = ' class="err"' if key == "error" and v is not None else ""
            rows.append(f"<div{err}><dt>{esc(key)}</dt><dd>{shown}</dd></div>")
        return f'<dl class="kv">{"".join(rows)}</dl>'

    def _value(self, v: Any) -> str:
        """A field of a result object: short scalars inline, text and containers as blocks."""
        if isinstance(v, str):
            if v and "\n" not in v and len(v) <= 160:
                return f'<span class="scalar">{esc(v)}</span>'
            return self._text(v, "out") if v else '<span class="scalar empty-out">(empty string)</span>'
        if v is None or isinstance(v, (bool, int, float)):
            return f'<code class="scalar lit">{esc(json.dumps(v))}</code>'
        return self._text(json.dumps(v, indent=2, ensure_ascii=False), "json")

    def _text(self, text: str, cls: str) -> str:
        if len(text) <= self.cap:
            return f'<pre class="block {cls}">{esc(text)}</pre>'
        more = len(text) - self.cap
        return (f'<pre class="block {cls}">{esc(text[:self.cap])}</pre><div class="elided">… {more:,} more '
                f'characters not shown (viewer limit {self.cap:,} per block; the source file has the full text)'
                '</div>')


def _diagnostics(trace: Trace) -> str:
    rows = "".join(
        f'<tr class="sev-{esc(d.severity)}"><td><code>{esc(d.code)}</code></td><td>{esc(d.severity)}</td>'
        f'<td>{"—" if d.message is None else d.message + 1}</td><td>{"—" if d.offset is None else d.offset}</td>'
        f'<td>{esc(d.detail)}</td></tr>' for d in trace.diagnostics)
    return ('<div class="diags"><h4>Diagnostics</h4><table><thead><tr><th>code</th><th>severity</th>'
            f'<th>message</th><th>offset</th><th>detail</th></tr></thead><tbody>{rows}</tbody></table></div>')
