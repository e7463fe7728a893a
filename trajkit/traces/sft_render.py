"""A trace as chat messages for one chat template: structured (OpenAI fields) or inline (Hermes text).

- ``structured``: :func:`trajkit.traces.openai.to_openai` (``tools``, assistant ``tool_calls`` and
  ``reasoning_content``, ``tool`` messages). Used when the template probe shows nothing is lost.
- ``inline``: the Hermes text itself. The system message keeps the trace's system text when it holds the
  ``<tools>`` block, else the schemas are written as the Hermes ``<tools>`` system block
  (:func:`~trajkit.traces.template_probe.hermes_tools_system`); an assistant message's ``content`` is its
  full Hermes text (``<think>`` block, narration and ``<tool_call>`` blocks, malformed ones included);
  tool results are their ``<tool_response>`` text in the role the template renders (``tool``, else
  ``user``). Two private keys ride along for the think policies (templates ignore unknown keys):
  :data:`NO_REASONING` (the content without its think block) and :data:`REASONING` (the think text).

Every rendered conversation also carries the :class:`~trajkit.traces.source_check.SourceTurn` of each
assistant message (indexed like the rendered messages), which the export checks trained text against.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from trajkit.traces.model import Message, Trace
from trajkit.traces.openai import SystemPolicy, to_openai, tools_to_openai
from trajkit.traces.source_check import SourceTurn
from trajkit.traces.template_probe import Rendering, hermes_tools_system

NO_REASONING = "trajkit_content_without_reasoning"
REASONING = "trajkit_reasoning"


@dataclass
class ChatConversation:
    """``messages`` + ``tools`` for the template; ``sources[i]`` for each assistant message ``i``."""

    id: str
    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]] | None
    sources: dict[int, SourceTurn] = field(default_factory=dict)


def render_trace(trace: Trace, rendering: Rendering, *, system: SystemPolicy = "auto",
                 malformed: str = "skip") -> ChatConversation:
    """``trace`` written for ``rendering`` (raises InputError for malformed calls in structured mode
    unless ``malformed="as_text"``)."""
    if rendering.mode == "inline":
        return _inline(trace, rendering.tool_role)
    messages, tools = to_openai(trace, system=system, malformed="as_text" if malformed == "as_text" else "error")
    assistants = iter(m for m in trace.messages if m.role == "assistant")
    sources = {i: SourceTurn.of(next(assistants)) for i, m in enumerate(messages) if m["role"] == "assistant"}
    return ChatConversation(trace.id, messages, tools or None, sources)


def _inline(trace: Trace, tool_role: str) -> ChatConversation:
    tools = tools_to_openai(trace)
    messages: list[dict[str, Any]] = []
    sources: dict[int, SourceTurn] = {}
    for msg in trace.messages:
        if msg.role == "system":
            text = msg.text
            messages.append({"role": "system", "content": text if "<tools>" in text or not tools
                             else hermes_tools_system(tools, text)})
        elif msg.role == "user":
            messages.append({"role": "user", "content": msg.text})
        elif msg.role == "assistant":
            sources[len(messages)] = SourceTurn.of(msg)
            messages.append(_inline_assistant(msg))
        else:
            messages.append({"role": tool_role, "content": msg.text})
    if tools and not any(m["role"] == "system" for m in messages[:1]):
        messages.insert(0, {"role": "system", "content": hermes_tools_system(tools)})
        sources = {i + 1: s for i, s in sources.items()}
    return ChatConversation(trace.id, messages, None, sources)


def _inline_assistant(msg: Message) -> dict[str, Any]:
    out: dict[str, Any] = {"role": "assistant", "content": msg.text}
    if msg.think is not None:
        out[REASONING] = msg.think
        out[NO_REASONING] = "".join(s.raw for s in msg.segments if s.kind != "think").lstrip()
    return out
