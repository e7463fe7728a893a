"""OpenAI chat messages <-> :class:`Trace`.

Input messages: ``{"role", "content"}``; assistant messages may carry ``reasoning_content`` (or
``reasoning``) and ``tool_calls: [{"id", "type": "function", "function": {"name", "arguments": str}}]``;
tool messages carry ``tool_call_id`` and usually ``name``. An OpenAI trace is stored in the one Hermes
layout (:mod:`trajkit.traces.hermes_text`: reasoning -> ``<think>`` block, calls -> ``<tool_call>`` blocks,
each tool message -> one ``<tool_response>`` envelope), so one set of metrics, plots and exports serves both formats.

Rendering to Hermes text is made safe for untrusted content: JSON inside a block has the ``<`` of block tags written
``\\u003c`` (the same JSON), so arguments holding ``</tool_call>`` cannot end their block; plain text that
holds a tag (assistant content with ``<tool_call>…``, reasoning with ``</think>``) keeps its meaning in the
trace, but :func:`trajkit.traces.hermes.render_row` refuses to write it as Hermes text, where it would
read back as a call.

``to_openai`` goes the other way for SFT export. Conversions are lossless for well-formed traces:
``from_openai(*to_openai(t))`` has the same structure as ``t``.
"""
from __future__ import annotations

import json
import re
from typing import Any, Literal

from trajkit.errors import InputError
from trajkit.traces import jsonvalue
from trajkit.traces.blocks import CALL_CLOSE, CALL_OPEN, parse_call_body
from trajkit.traces.harness import decode_json_text, judge
from trajkit.traces.hermes_text import (THINK_GLUE, arguments_text, call_block, response_block, think_block,
                                        tools_system_preamble)
from trajkit.traces.model import Diagnostic, Message, Segment, ToolCall, ToolResponse, Trace
from trajkit.traces.tools import normalize_tools, schema_problems, tools_from_json

SystemPolicy = Literal["keep", "drop", "auto"]
MalformedPolicy = Literal["error", "as_text"]


def _content_text(content: Any, where: str) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # content parts; parts without text (images) add nothing
        texts = []
        for j, part in enumerate(content):
            text = part.get("text", "") if isinstance(part, dict) else ""
            if not isinstance(text, str):
                raise InputError(f"text of a content part is {type(text).__name__}, expected a string",
                                 field=f"{where}[{j}].text")
            texts.append(text)
        return "".join(texts)
    raise InputError(f"content is {type(content).__name__}, expected a string or content parts", field=where)


def from_openai(messages: Any, tools: Any = None, *, id: str = "", source: str | None = None,
                **meta: Any) -> Trace:
    """Build a trace from OpenAI chat messages (raises :class:`InputError` naming the bad field)."""
    if not isinstance(messages, list):
        raise InputError("missing or not a list", field="messages", hint="expected [{role, content}, ...]")
    out = [_from_openai_message(m, i) for i, m in enumerate(messages)]
    trace = Trace(id=id, messages=out, source=source, format="openai",
                  category=meta.get("category"), subcategory=meta.get("subcategory"), task=meta.get("task"))
    if tools:
        try:
            trace.tools = tools_from_json(tools) if isinstance(tools, str) else normalize_tools(tools)
        except ValueError as exc:  # orjson's decode error is a ValueError too
            raise InputError(str(exc), field="tools", hint="tools: a list of tool definitions, or that list "
                             "as a JSON string") from None
        trace.diagnostics.extend(Diagnostic("bad_tool_schema", p) for p in schema_problems(trace.tools))
    return trace


def _from_openai_message(msg: Any, i: int) -> Message:
    if not isinstance(msg, dict):
        raise InputError(f"message is a {type(msg).__name__}", field=f"messages[{i}]")
    role = msg.get("role")
    text = _content_text(msg.get("content"), f"messages[{i}].content")
    if role in ("system", "developer", "user"):
        return Message("user" if role == "user" else "system", [Segment("text", text)] if text else [])
    if role == "assistant":
        return _assistant(msg, text, i)
    if role == "tool":
        return _tool(msg, text)
    raise InputError(f"unknown role {role!r}", field=f"messages[{i}].role",
                     hint="expected system, user, assistant or tool")


def _assistant(msg: dict[str, Any], text: str, i: int) -> Message:
    segments: list[Segment] = []
    reasoning = msg.get("reasoning_content", msg.get("reasoning"))
    if isinstance(reasoning, str):
        think = think_block(reasoning)
        segments.append(Segment("think", think[:-len(THINK_GLUE)]))
        segments.append(Segment("text", THINK_GLUE))
    if text:
        segments.append(Segment("text", text))
    calls: list[ToolCall] = []
    raw_calls = msg.get("tool_calls") or []
    if not isinstance(raw_calls, list):
        raise InputError(f"tool_calls is a {type(raw_calls).__name__}, expected a list",
                         field=f"messages[{i}].tool_calls")
    for k, tc in enumerate(raw_calls):
        fn = tc.get("function") if isinstance(tc, dict) else None
        if not isinstance(fn, dict):
            raise InputError("tool call has no function object", field=f"messages[{i}].tool_calls[{k}]")
        body = _call_body(fn, f"messages[{i}].tool_calls[{k}].function")
        call = parse_call_body(body)
        call.id = tc.get("id")
        if text or calls:  # the layout's newline before a call (trajkit.traces.hermes_text.assistant_text)
            segments.append(Segment("text", "\n"))
        segments.append(Segment("tool_call", call_block(body), len(calls)))
        calls.append(call)
    return Message("assistant", segments, tool_calls=calls)


def _call_body(fn: dict[str, Any], where: str) -> str:
    """The Hermes ``<tool_call>`` body of an OpenAI function call; ``arguments`` (a JSON string, or an
    object) keep their numbers exactly."""
    args = fn.get("arguments")
    try:
        args_json = args if isinstance(args, str) else jsonvalue.dumps(args).decode()
    except ValueError as exc:
        raise InputError(str(exc), field=f"{where}.arguments") from None
    return _inert(f'{{"name": {json.dumps(fn.get("name"), ensure_ascii=False)}, "arguments": {args_json}}}')


_TAG = re.compile(r"<(/?(?:tool_call|tool_response|think)>)")


def _inert(block_json: str) -> str:
    """JSON put inside a Hermes block with the ``<`` of every block tag written ``\\u003c``: the same JSON
    value (in valid JSON a ``<`` occurs only inside strings), but no text in it can open or close a block."""
    return _TAG.sub(r"\\u003c\1", block_json)


def _tool(msg: dict[str, Any], text: str) -> Message:
    result, _ = decode_json_text(text)
    failed, exit_code, truncated = judge(result, decoded=True)
    resp = ToolResponse(text, tool_call_id=msg.get("tool_call_id"), name=msg.get("name"), result=result,
                        failed=failed, exit_code=exit_code, truncated=truncated)
    envelope = _inert(_json_text({"tool_call_id": resp.tool_call_id, "name": resp.name, "content": result}))
    return Message("tool", [Segment("tool_response", response_block(envelope), 0)],
                   tool_responses=[resp])


def tools_to_openai(trace: Trace) -> list[dict[str, Any]]:
    """The trace's tools as OpenAI tool definitions."""
    return [{"type": "function", "function": dict(spec)} for spec in trace.tools.values()]


def to_openai(trace: Trace, *, system: SystemPolicy = "auto",
              malformed: MalformedPolicy = "error") -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(messages, tools) in OpenAI form.

    ``system="auto"`` drops a system message that holds the ``<tools>`` block (the tools travel in
    ``tools`` and the chat template renders them again), keeping the system prompt written before trajkit's
    Hermes tools prompt (:func:`trajkit.traces.hermes_text.tools_system_preamble`: the gateway's rows); ``"keep"``/``"drop"`` do what they say.
    Malformed calls cannot be OpenAI ``tool_calls``: ``malformed="error"`` raises :class:`InputError`,
    ``"as_text"`` keeps the raw block in the assistant content.
    """
    out: list[dict[str, Any]] = []
    last_ids: list[str] = []
    for i, msg in enumerate(trace.messages):
        if msg.role == "system":
            text = msg.text if system == "keep" or "<tools>" not in msg.text else tools_system_preamble(msg.text)
            if system != "drop" and text:
                out.append({"role": "system", "content": text})
        elif msg.role == "user":
            out.append({"role": "user", "content": msg.text})
        elif msg.role == "assistant":
            entry, last_ids = _assistant_to_openai(msg, i, malformed)
            out.append(entry)
        else:
            out.extend(_tool_to_openai(msg, last_ids))
            last_ids = []
    return out, tools_to_openai(trace)


def _assistant_to_openai(msg: Message, i: int, malformed: MalformedPolicy):
    content = msg.narration
    calls, ids = [], []
    for k, call in enumerate(msg.tool_calls):
        if not call.ok:
            if malformed == "error":
                raise InputError(f"malformed tool call ({call.error}) cannot become an OpenAI tool_call",
                                 row=None, field=f"messages[{i}].tool_calls[{k}]",
                                 hint="filter malformed rows first or use malformed='as_text'")
            content = (content + "\n" if content else "") + f"{CALL_OPEN}{call.body}{CALL_CLOSE}"
            continue
        call_id = call.id or f"call_{i}_{k}"
        ids.append(call_id)
        calls.append({"id": call_id, "type": "function",
                      "function": {"name": call.name, "arguments": arguments_text(call)[0]}})
    entry: dict[str, Any] = {"role": "assistant", "content": content}
    if msg.think is not None:
        entry["reasoning_content"] = msg.think
    if calls:
        entry["tool_calls"] = calls
    return entry, ids


def _json_text(value: Any) -> str:
    """``json.dumps`` as before, or the exact writer when ``value`` holds numbers a float cannot keep."""
    if jsonvalue.has_exact(value):
        return jsonvalue.dumps(value).decode()
    return json.dumps(value, ensure_ascii=False)


def _tool_to_openai(msg: Message, call_ids: list[str]) -> list[dict[str, Any]]:
    out = []
    for k, resp in enumerate(msg.tool_responses):
        result = resp.result
        content = result if isinstance(result, str) else _json_text(result)
        entry = {"role": "tool", "content": content,
                 "tool_call_id": call_ids[k] if k < len(call_ids) else (resp.tool_call_id or f"orphan_{k}")}
        if resp.name:
            entry["name"] = resp.name
        out.append(entry)
    return out
