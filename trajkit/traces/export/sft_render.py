"""A trace as chat messages for one chat template: structured (OpenAI fields) or inline (Hermes text).

- ``structured``: :func:`trajkit.traces.openai.to_openai` (``tools``, assistant ``tool_calls`` and
  ``reasoning_content``, ``tool`` messages). Used when the template probe shows nothing is lost.
- ``inline``: the Hermes text itself. The system message keeps the trace's system text when it holds the
  ``<tools>`` block, else the schemas are written as the Hermes system prompt after it
  (:func:`~trajkit.traces.hermes_text.with_tools_system`, as the gateway's inline rendering does); an
  assistant message's ``content`` is its full Hermes text (``<think>`` block, narration and ``<tool_call>``
  blocks, malformed ones included); tool results are their ``<tool_response>`` text in the role the
  template renders (``tool``, else ``user``). Two private keys ride along for the think policies
  (templates ignore unknown keys):
  :data:`NO_REASONING` (the content without its think block) and :data:`REASONING` (the think text).

Every rendered conversation also carries the :class:`~trajkit.traces.export.source_check.SourceTurn` of each
assistant message (indexed like the rendered messages), which the export checks trained text against.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from trajkit.traces.model import Message, Trace
from trajkit.traces.openai import SystemPolicy, to_openai, tools_to_openai
from trajkit.traces.export.source_check import SourceTurn
from trajkit.traces.hermes_text import with_tools_system
from trajkit.traces.export.template_probe import Rendering

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
    """The trace's own Hermes text per message, the tools' system prompt added as the gateway adds it
    (:func:`trajkit.traces.hermes_text.with_tools_system`)."""
    tools = tools_to_openai(trace)
    turns = with_tools_system([(m.role, m.text) for m in trace.messages], tools)
    shift = len(turns) - len(trace.messages)  # 1 when a system turn was added
    messages: list[dict[str, Any]] = [{"role": tool_role if r == "tool" else r, "content": t} for r, t in turns]
    sources: dict[int, SourceTurn] = {}
    for i, msg in enumerate(trace.messages):
        if msg.role == "assistant":
            sources[i + shift] = SourceTurn.of(msg)
            messages[i + shift] = _inline_assistant(msg)
    return ChatConversation(trace.id, messages, None, sources)


def _inline_assistant(msg: Message) -> dict[str, Any]:
    out: dict[str, Any] = {"role": "assistant", "content": msg.text}
    if msg.think is not None:
        out[REASONING] = msg.think
        out[NO_REASONING] = "".join(s.raw for s in msg.segments if s.kind != "think").lstrip()
    return out
