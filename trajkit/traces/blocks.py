"""Split a Hermes message's text into segments and parse the tool-call / tool-response blocks.

Scanning is a single left-to-right pass with ``str.find`` (no backtracking regexes). Rules:

* ``<think>…</think>`` is one think segment (tags included). Tags inside it are not interpreted.
  An unclosed ``<think>`` runs to the next ``<tool_call>`` (or the end) with diagnostic
  ``unclosed_think``; a ``</think>`` with no opener makes the text before it the think block
  (``missing_think_open``), as templates that put ``<think>`` in the prompt produce.
* ``<tool_call>…</tool_call>`` is one call block. A block whose closing tag is missing runs to the next
  ``<tool_call>`` or the end of the message; it is still a call block (counted) with ``closed=False``
  and diagnostic ``unclosed_tool_call``.
* Everything else is a text segment, so the segments concatenate back to the input exactly.
"""
from __future__ import annotations

import ast
from typing import Any

from trajkit.traces import jsonvalue
from trajkit.traces.harness import judge
from trajkit.traces.model import Diagnostic, Segment, ToolCall, ToolResponse

THINK_OPEN, THINK_CLOSE = "<think>", "</think>"
CALL_OPEN, CALL_CLOSE = "<tool_call>", "</tool_call>"
RESP_OPEN, RESP_CLOSE = "<tool_response>", "</tool_response>"


def split_blocks(text: str, open_tag: str, close_tag: str, begin: int = 0) -> list[tuple[int, int, bool]]:
    """(start, end, closed) spans of ``open_tag…close_tag`` blocks found from ``begin`` on; an unclosed
    block ends at the next opener or the end of ``text``."""
    spans = []
    pos = text.find(open_tag, begin)
    while pos >= 0:
        nxt = text.find(open_tag, pos + len(open_tag))
        close = text.find(close_tag, pos + len(open_tag))
        if close >= 0 and (nxt < 0 or close < nxt):
            end = close + len(close_tag)
            spans.append((pos, end, True))
            pos = text.find(open_tag, end)
        else:
            end = nxt if nxt >= 0 else len(text)
            spans.append((pos, end, False))
            pos = nxt
    return spans


def _think_span(text: str, diags: list[Diagnostic], index: int) -> tuple[int, int] | None:
    """Span of the think block, if any, with diagnostics for broken tags."""
    open_at = text.find(THINK_OPEN)
    close_at = text.find(THINK_CLOSE)
    first_call = text.find(CALL_OPEN)
    if open_at >= 0 and (first_call < 0 or open_at < first_call):
        close_at = text.find(THINK_CLOSE, open_at + len(THINK_OPEN))
        if close_at >= 0:
            return open_at, close_at + len(THINK_CLOSE)
        end = text.find(CALL_OPEN, open_at)
        diags.append(Diagnostic("unclosed_think", "<think> is never closed", index, open_at))
        return open_at, end if end >= 0 else len(text)
    if close_at >= 0 and (first_call < 0 or close_at < first_call):
        diags.append(Diagnostic("missing_think_open", "</think> without <think>", index, close_at, "info"))
        return 0, close_at + len(THINK_CLOSE)
    return None


def parse_assistant(text: str, index: int, diags: list[Diagnostic]) -> tuple[list[Segment], list[ToolCall]]:
    """Segments and tool calls of one assistant (``gpt``) message."""
    segments: list[Segment] = []
    calls: list[ToolCall] = []
    cursor = 0
    think = _think_span(text, diags, index)
    if think is not None:
        if think[0] > 0:
            segments.append(Segment("text", text[:think[0]]))
        segments.append(Segment("think", text[think[0]:think[1]]))
        cursor = think[1]
    for start, end, closed in split_blocks(text, CALL_OPEN, CALL_CLOSE, cursor):
        if start > cursor:
            segments.append(Segment("text", text[cursor:start]))
        raw = text[start:end]
        call = parse_call_body(raw[len(CALL_OPEN):len(raw) - (len(CALL_CLOSE) if closed else 0)])
        call.closed, call.offset = closed, start
        if not closed:
            diags.append(Diagnostic("unclosed_tool_call", "<tool_call> is never closed", index, start))
        if call.error:
            diags.append(Diagnostic("malformed_tool_call", call.error, index, start))
        segments.append(Segment("tool_call", raw, len(calls)))
        calls.append(call)
        cursor = end
    if cursor < len(text):
        segments.append(Segment("text", text[cursor:]))
    return segments, calls


def parse_call_body(body: str) -> ToolCall:
    """Parse a ``<tool_call>`` body; strict JSON object with string ``name`` and object ``arguments``.

    Numbers are kept exactly (:mod:`trajkit.traces.jsonvalue`); a body nested deeper than
    ``jsonvalue.MAX_DEPTH`` levels is a malformed call saying so."""
    try:
        value = jsonvalue.loads(body)
    except ValueError as exc:
        if "nested deeper" in str(exc):
            return ToolCall(body, error=str(exc))
        return _recover_call(body)
    if not isinstance(value, dict):
        return ToolCall(body, error=f"body is a JSON {type(value).__name__}, not an object")
    name, args = value.get("name"), value.get("arguments")
    call = ToolCall(body, name=name if isinstance(name, str) else None,
                    arguments=args if isinstance(args, dict) else None,
                    id=value.get("id") if isinstance(value.get("id"), str) else None)
    if not isinstance(name, str):
        call.error = "missing string 'name'"
    elif "arguments" not in value:
        call.error = "missing 'arguments'"
    elif not isinstance(args, dict):
        call.error = f"'arguments' is a {type(args).__name__}, not an object"
    return call


def _recover_call(body: str) -> ToolCall:
    """A body that is not JSON: Python-dict quoting is recovered for display, still malformed."""
    try:
        value = ast.literal_eval(body.strip())
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return ToolCall(body, error="not valid JSON (truncated or garbled)")
    if isinstance(value, dict):
        name, args = value.get("name"), value.get("arguments")
        return ToolCall(body, name=name if isinstance(name, str) else None,
                        arguments=args if isinstance(args, dict) else None,
                        error="Python-literal quoting, not JSON")
    return ToolCall(body, error="not valid JSON")


def parse_tool_message(text: str, index: int, diags: list[Diagnostic]) -> tuple[list[Segment], list[ToolResponse]]:
    """Segments and responses of one ``tool`` message (one block per call, joined by newlines)."""
    segments: list[Segment] = []
    responses: list[ToolResponse] = []
    cursor = 0
    for start, end, closed in split_blocks(text, RESP_OPEN, RESP_CLOSE):
        if start > cursor:
            segments.append(Segment("text", text[cursor:start]))
        raw = text[start:end]
        body = raw[len(RESP_OPEN):len(raw) - (len(RESP_CLOSE) if closed else 0)]
        resp = parse_response_body(body)
        resp.closed, resp.offset = closed, start
        if not closed:
            diags.append(Diagnostic("unclosed_tool_response", "<tool_response> is never closed", index, start))
        segments.append(Segment("tool_response", raw, len(responses)))
        responses.append(resp)
        cursor = end
    if cursor < len(text):
        segments.append(Segment("text", text[cursor:]))
    if not responses and text.strip():
        diags.append(Diagnostic("bare_tool_message", "tool message without <tool_response> blocks", index, 0, "info"))
    return segments, responses


def parse_response_body(body: str) -> ToolResponse:
    """Parse a ``<tool_response>`` body: the envelope ``{tool_call_id, name, content}`` when present."""
    resp = ToolResponse(body)
    value, resp.result, is_json = read_envelope(body)
    if not is_json:
        resp.error = "envelope is not JSON"
    if isinstance(value, dict) and "content" in value:
        resp.tool_call_id = value.get("tool_call_id") if isinstance(value.get("tool_call_id"), str) else None
        resp.name = value.get("name") if isinstance(value.get("name"), str) else None
    resp.failed, resp.exit_code, resp.truncated = judge(resp.result)
    return resp


def read_envelope(body: str) -> tuple[Any, Any, bool]:
    """(the body's JSON value, else its stripped text; the result the harness rule judges: the envelope's
    ``content`` when it has one, else that value; whether the body is JSON)."""
    try:
        value, is_json = jsonvalue.loads_fast(body), True
    except ValueError:
        value, is_json = body.strip(), False
    return value, value["content"] if isinstance(value, dict) and "content" in value else value, is_json
