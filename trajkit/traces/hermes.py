"""Hermes-agent ShareGPT rows (``lambda/hermes-agent-reasoning-traces``) to :class:`Trace` and back.

A row is ``{"id", "conversations": [{"from": system|human|gpt|tool, "value"}], "tools", "category",
"subcategory", "task"}``; ``tools`` is a JSON string (Parquet may give a list of objects). The published
row previews name the fields ``conversations_preview``/``tools_preview``; both spellings are read.

``render_row(parse_row(row))`` gives back the row's conversation texts exactly.
"""
from __future__ import annotations

from typing import Any

import orjson

from trajkit.errors import InputError
from trajkit.traces.blocks import parse_assistant, parse_tool_message
from trajkit.traces.model import HERMES_ROLE, ROLE_HERMES, Diagnostic, Message, Segment, Trace
from trajkit.traces.tools import (ToolTable, normalize_tools, schema_problems, tools_from_json,
                                  tools_from_system_prompt)

CONTEXT_SUMMARY_PREFIX = "[CONTEXT SUMMARY]:"


def _field(row: dict[str, Any], name: str) -> Any:
    if name in row:
        return row[name]
    return row.get(f"{name}_preview")


def parse_row(row: Any, *, source: str | None = None) -> Trace:
    """Parse one row. Raises :class:`InputError` (naming the field) when the row cannot be a trace;
    everything softer becomes a diagnostic on the returned trace."""
    if not isinstance(row, dict):
        raise InputError(f"row is a {type(row).__name__}, expected an object", hint="each row must be a JSON object")
    conv = _field(row, "conversations")
    if not isinstance(conv, list):
        raise InputError("missing or not a list", field="conversations",
                         hint="a Hermes row needs conversations: [{from, value}, ...]")
    diags: list[Diagnostic] = []
    messages = [_parse_message(m, i, diags) for i, m in enumerate(conv)]
    trace = Trace(id=str(row.get("id", "")), messages=messages, category=row.get("category"),
                  subcategory=row.get("subcategory"), task=row.get("task"), source=source,
                  format="hermes", diagnostics=diags)
    trace.tools = _row_tools(row, messages, diags)
    diags.extend(Diagnostic("bad_tool_schema", problem) for problem in schema_problems(trace.tools))
    if any(m.role == "user" and m.text.startswith(CONTEXT_SUMMARY_PREFIX) for m in messages):
        trace.meta["context_summary"] = True
    return trace


def _parse_message(item: Any, index: int, diags: list[Diagnostic]) -> Message:
    if not isinstance(item, dict):
        raise InputError(f"message is a {type(item).__name__}, expected {{from, value}}",
                         field=f"conversations[{index}]")
    source = item.get("from")
    role = HERMES_ROLE.get(source) if isinstance(source, str) else None
    if role is None:
        raise InputError(f"unknown role {item.get('from')!r}", field=f"conversations[{index}].from",
                         hint="expected one of system, human, gpt, tool")
    text = item.get("value")
    if not isinstance(text, str):
        raise InputError(f"value is {type(text).__name__}, expected a string", field=f"conversations[{index}].value")
    if role == "assistant":
        segments, calls = parse_assistant(text, index, diags)
        return Message(role, segments, tool_calls=calls)
    if role == "tool":
        segments, responses = parse_tool_message(text, index, diags)
        return Message(role, segments, tool_responses=responses)
    return Message(role, [Segment("text", text)] if text else [])


def _row_tools(row: dict[str, Any], messages: list[Message], diags: list[Diagnostic]) -> ToolTable:
    """Tools from the ``tools`` field, else from the system prompt's ``<tools>`` block."""
    raw = _field(row, "tools")
    if raw not in (None, "", []):
        try:
            return tools_from_json(raw) if isinstance(raw, str) else normalize_tools(_as_plain(raw))
        except (ValueError, orjson.JSONDecodeError) as exc:
            diags.append(Diagnostic("bad_tools_field", f"tools field unreadable: {exc}"))
    if messages and messages[0].role == "system":
        try:
            found = tools_from_system_prompt(messages[0].text)
        except (ValueError, orjson.JSONDecodeError) as exc:
            diags.append(Diagnostic("bad_system_tools", f"<tools> block unreadable: {exc}", 0))
            return {}
        if found is not None:
            return found
    diags.append(Diagnostic("no_tools", "row declares no tools; unknown-tool checks are off", None, None, "info"))
    return {}


def _check_renders_back(msg: Message, index: int) -> None:
    if msg.role not in ("assistant", "tool"):
        return
    parse = parse_assistant if msg.role == "assistant" else parse_tool_message
    segments, _ = parse(msg.text, index, [])
    if _blocks(segments) != _blocks(msg.segments):
        raise InputError("its text holds a tag (<tool_call>, </think>, ...) that Hermes text would read as a "
                         "block", field=f"conversations[{index}]",
                         hint="export this trace in OpenAI form, where content and calls stay apart")


def _blocks(segments: list[Segment]) -> list[tuple[str, str]]:
    """(kind, stripped raw) of each block segment: what a re-parse must find again."""
    return [(s.kind, s.raw.strip()) for s in segments if s.kind != "text"]


def _as_plain(value: Any) -> Any:
    """Parquet/Arrow hands nested values as numpy arrays or similar; turn them into lists."""
    if hasattr(value, "tolist"):
        return value.tolist()
    return value


def render_row(trace: Trace) -> dict[str, Any]:
    """The Hermes row for a trace (conversation texts exactly as parsed).

    Raises :class:`InputError` naming the message when its text would not parse back into the same blocks
    (an OpenAI message whose content holds ``<tool_call>…</tool_call>`` would become a real call)."""
    for i, m in enumerate(trace.messages):
        _check_renders_back(m, i)
    conv = [{"from": ROLE_HERMES[m.role], "value": m.text} for m in trace.messages]
    row: dict[str, Any] = {"id": trace.id, "conversations": conv}
    for key in ("category", "subcategory", "task"):
        if getattr(trace, key) is not None:
            row[key] = getattr(trace, key)
    return row
