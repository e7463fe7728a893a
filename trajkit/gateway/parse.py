"""The model's text as an OpenAI assistant message: Hermes ``<tool_call>`` blocks become ``tool_calls``, the
``<think>`` block becomes ``reasoning_content``, the rest is ``content``.

Parsing is trajkit's Hermes parser (:func:`trajkit.traces.blocks.parse_assistant`), so the gateway reads
a model's output exactly as ``trajkit traces`` reads a trace. A call block that is not a JSON object with a
string ``name`` and object ``arguments`` (or is never closed) is *not* turned into a call: its raw text stays
in ``content`` where it was, and ``diagnostics`` says why. Text without blocks is ``content`` unchanged
(so it equals the decode of the sampled ids); around blocks the layout newlines are stripped (a harness sees what the model wrote; nothing
is dropped and nothing is a 500).

Worked example::

    >>> m = parse_output('<think>\\nls first\\n</think>\\n\\n<tool_call>\\n'
    ...                  '{"name": "terminal", "arguments": {"command": "ls"}}\\n</tool_call>')
    >>> m.reasoning, m.content, m.calls[0]["function"]
    ('ls first', None, {'name': 'terminal', 'arguments': '{"command": "ls"}'})

The canonical layout (``<think>\\n{reasoning}\\n</think>\\n\\n{content}`` then ``\\n<tool_call>\\n{json}\\n</tool_call>``
per call) is the one trajkit's chat template renders back, so a model writing it keeps its history
token-exact across turns (see docs/gateway.md, stitching).
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any

from trajkit.traces import jsonvalue
from trajkit.traces.blocks import parse_assistant


@dataclass
class ParsedMessage:
    """One choice's text, split for the API. ``calls`` are OpenAI ``tool_calls`` entries."""

    content: str | None
    reasoning: str | None
    calls: list[dict[str, Any]] = field(default_factory=list)
    diagnostics: list[dict[str, Any]] = field(default_factory=list)

    def message(self) -> dict[str, Any]:
        """The OpenAI assistant message (``trajkit_diagnostics`` only when something was malformed)."""
        out: dict[str, Any] = {"role": "assistant", "content": self.content}
        if self.reasoning is not None:
            out["reasoning_content"] = self.reasoning
        if self.calls:
            out["tool_calls"] = self.calls
        if self.diagnostics:
            out["trajkit_diagnostics"] = self.diagnostics
        return out


def call_id(seed: str, index: int) -> str:
    """A stable id for call ``index`` of a response (the same text in the same response gives the same id)."""
    return "call_" + hashlib.sha1(f"{seed}:{index}".encode()).hexdigest()[:20]


def parse_output(text: str, id_seed: str = "") -> ParsedMessage:
    """Split ``text`` (a completion, end-of-turn token excluded) as the module docstring says."""
    diags: list = []
    segments, calls = parse_assistant(text, 0, diags)
    reasoning, parts, out_calls, problems = None, [], [], []
    for seg in segments:
        if seg.kind == "think":
            inner = seg.raw.removeprefix("<think>")
            inner = inner.removesuffix("</think>")
            reasoning = inner.strip()
        elif seg.kind == "tool_call":
            call = calls[seg.ref]
            if call.ok and call.closed:
                args = jsonvalue.dumps(call.arguments).decode()
                out_calls.append({"id": call_id(id_seed, len(out_calls)), "type": "function",
                                  "function": {"name": call.name, "arguments": _spaced(call.body, args)}})
            else:
                parts.append(seg.raw)
                problems.append({"code": "malformed_tool_call" if call.closed else "unclosed_tool_call",
                                 "detail": call.error or "<tool_call> is never closed", "text": seg.raw})
        else:
            parts.append(seg.raw)
    content = "".join(parts)
    if reasoning is not None or calls:  # the newlines around blocks are layout, not content
        content = content.strip()
    return ParsedMessage(content if content or not out_calls else None, reasoning, out_calls, problems)


def _spaced(body: str, compact: str) -> str:
    """The arguments as the model wrote them when the body holds them verbatim (``{"a": 1}`` keeps its
    spaces, so rendering the call back gives the model's own text); else the canonical JSON."""
    import json

    try:
        value = json.loads(body)
        text = json.dumps(value["arguments"], ensure_ascii=False)
    except (ValueError, KeyError, TypeError):
        return compact
    return text if text in body else compact
