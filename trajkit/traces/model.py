"""The trace model: the lossless parse of one agent conversation.

A :class:`Trace` holds :class:`Message` objects. Every message is a list of :class:`Segment` objects
whose raw texts concatenate back to the original message text, so re-rendering a parsed Hermes row
gives back exactly its text (``message.text``). Structured views sit beside the segments:

* ``think`` -- text inside ``<think>…</think>`` (or OpenAI ``reasoning_content``),
* ``narration`` -- assistant text outside think and tool-call blocks,
* ``tool_calls`` -- one :class:`ToolCall` per ``<tool_call>`` block, malformed ones included,
* ``tool_responses`` -- one :class:`ToolResponse` per ``<tool_response>`` block (or OpenAI tool message).

Nothing is dropped: malformed pieces stay in place and are described by :class:`Diagnostic` records that
carry their message index and character offset.

Worked example (Hermes)::

    >>> from trajkit.traces.hermes import parse_row
    >>> t = parse_row({"conversations": [
    ...     {"from": "human", "value": "list files"},
    ...     {"from": "gpt", "value": '<think>\\nuse ls\\n</think>\\n<tool_call>\\n'
    ...                               '{"name": "terminal", "arguments": {"command": "ls"}}\\n</tool_call>'},
    ...     {"from": "tool", "value": '<tool_response>\\n{"tool_call_id": "functions.terminal:0", '
    ...                               '"name": "terminal", "content": {"output": "a.txt", "exit_code": 0, '
    ...                               '"error": null}}\\n</tool_response>'}]})
    >>> [m.role for m in t.messages]
    ['user', 'assistant', 'tool']
    >>> t.messages[1].think, t.messages[1].tool_calls[0].name, t.messages[2].tool_responses[0].failed
    ('use ls', 'terminal', False)
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

Role = Literal["system", "user", "assistant", "tool"]
SegmentKind = Literal["text", "think", "tool_call", "tool_response"]
Severity = Literal["error", "warning", "info"]

HERMES_ROLE = {"system": "system", "human": "user", "gpt": "assistant", "tool": "tool"}
ROLE_HERMES = {v: k for k, v in HERMES_ROLE.items()}


@dataclass(slots=True)
class Diagnostic:
    """A problem found while parsing; ``message`` is the message index, ``offset`` the character offset."""

    code: str
    detail: str
    message: int | None = None
    offset: int | None = None
    severity: Severity = "warning"

    def as_dict(self) -> dict[str, Any]:
        return {"code": self.code, "detail": self.detail, "message": self.message,
                "offset": self.offset, "severity": self.severity}


@dataclass(slots=True)
class Segment:
    """A contiguous piece of a message's text. ``ref`` indexes ``tool_calls``/``tool_responses``."""

    kind: SegmentKind
    raw: str
    ref: int | None = None


@dataclass(slots=True)
class ToolCall:
    """One tool-call block. ``error`` is None exactly when the call is well formed.

    Well formed means the body is a strict JSON object with a string ``name`` and an object ``arguments``.
    For malformed calls ``name``/``arguments`` hold what could be recovered (for display), if anything.
    """

    body: str
    name: str | None = None
    arguments: dict[str, Any] | None = None
    error: str | None = None
    closed: bool = True
    offset: int = 0
    id: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None


@dataclass(slots=True)
class ToolResponse:
    """One tool-response block; ``result`` is what the harness failure rule is applied to.

    ``failed`` follows Hermes Agent's batch runner: the result has a non-null ``error`` or
    ``success: false``, or is a non-JSON string that is empty or starts with ``error:``.
    ``exit_code`` is the result's integer ``exit_code`` if any (non-zero is *not* a failure).
    """

    body: str
    tool_call_id: str | None = None
    name: str | None = None
    result: Any = None
    failed: bool = False
    exit_code: int | None = None
    truncated: bool = False
    error: str | None = None
    closed: bool = True
    offset: int = 0


@dataclass(slots=True)
class Message:
    """One conversation message. ``text`` re-renders the original exactly (Hermes source) or in the
    canonical Hermes form (OpenAI source: reasoning becomes a think block, calls become blocks)."""

    role: Role
    segments: list[Segment]
    tool_calls: list[ToolCall] = field(default_factory=list)
    tool_responses: list[ToolResponse] = field(default_factory=list)

    @property
    def text(self) -> str:
        return "".join(s.raw for s in self.segments)

    @property
    def think(self) -> str | None:
        """Think text (inside the tags, stripped), None when the message has no think block."""
        parts = [_think_inner(s.raw) for s in self.segments if s.kind == "think"]
        return "\n".join(parts) if parts else None

    @property
    def narration(self) -> str:
        return "".join(s.raw for s in self.segments if s.kind == "text").strip()


def _think_inner(raw: str) -> str:
    start = raw.find("<think>")
    body = raw[start + 7:] if start >= 0 else raw
    end = body.rfind("</think>")
    if end >= 0:
        body = body[:end]
    return body.strip()


@dataclass(slots=True)
class Trace:
    """One conversation with its tools, provenance and parse diagnostics.

    ``tools`` maps tool name to ``{"name", "description", "parameters"}``, read from the row's ``tools``
    field or else the system prompt's ``<tools>`` block. ``format`` is the source format (``hermes``/``openai``).
    """

    id: str
    messages: list[Message]
    tools: dict[str, dict[str, Any]] = field(default_factory=dict)
    category: str | None = None
    subcategory: str | None = None
    task: str | None = None
    source: str | None = None
    format: Literal["hermes", "openai"] = "hermes"
    diagnostics: list[Diagnostic] = field(default_factory=list)
    meta: dict[str, Any] = field(default_factory=dict)


class TraceValidationError(ValueError):
    """Raised by :func:`validate_trace` when a trace breaks an invariant of the model."""


def validate_trace(trace: Trace) -> None:
    """Check the model's invariants: refs point at existing calls/responses, each call/response is
    referenced exactly once, only assistant messages carry calls and only tool messages responses."""
    for i, msg in enumerate(trace.messages):
        if msg.tool_calls and msg.role != "assistant":
            raise TraceValidationError(f"message {i}: only assistant messages carry tool calls")
        if msg.tool_responses and msg.role != "tool":
            raise TraceValidationError(f"message {i}: only tool messages carry tool responses")
        for kind, items in (("tool_call", msg.tool_calls), ("tool_response", msg.tool_responses)):
            refs = [s.ref for s in msg.segments if s.kind == kind]
            if sorted(r for r in refs if r is not None) != list(range(len(items))):
                raise TraceValidationError(f"message {i}: {kind} segments do not index its {kind}s 0..n-1")
