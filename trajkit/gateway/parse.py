"""The model's text as an OpenAI assistant message: the Hermes parser of :mod:`trajkit.traces.hermes_text`.

The text is split by :func:`trajkit.traces.hermes_text.parse_assistant_text` (on top of
:func:`trajkit.traces.blocks.parse_assistant`, the parser ``trajkit traces`` reads traces with), and the
message is laid out so that rendering it back (:func:`trajkit.traces.hermes_text.message_text`) gives that
very text. The layout, with ``G`` the glue after ``</think>`` (``\\n`` in Hermes text, the data's layout and
the gateway's inline rendering; a structured template's own glue, probed by
:func:`trajkit.gateway.formats.think_glue`, e.g. ``\\n\\n`` for trajkit's own template and Qwen3)::

    [<think>\\n{reasoning}\\n</think>G]{content}[\\n]<tool_call>\\n{"name": N, "arguments": A}\\n</tool_call>
                                             (\\n<tool_call>…</tool_call>)*

- ``reasoning_content``: a closed think block at the very start, written as that layout. Any other think
  text (unclosed, other newlines, not first) stays in ``content`` verbatim: an unclosed ``<think>``
  returned as reasoning would re-render with a ``</think>`` the model never wrote.
- ``tool_calls``: every closed, well-formed call block (strict JSON object, string ``name``, object
  ``arguments``), as vLLM's Hermes parser returns them. ``arguments`` is the model's own text of the
  value when the body is written ``\\n{"name": N, "arguments": A}\\n``, else canonical JSON.
- ``content``: everything else, verbatim (malformed and unclosed blocks included, never stripped), less
  the one ``\\n`` the layout puts before the first call and between calls. ``None`` when a call is returned
  and nothing else is left (as OpenAI).

Where the message cannot render back to the text (a call's JSON with keys an OpenAI call cannot carry,
``{"name", "arguments", "response"}``; its JSON written in another key order or spacing; text after a
call), the message carries a ``history_not_reproducible`` diagnostic saying why: the harness sends the
message back, the next prompt then differs from the sampled ids and the stitched chain forks there
(:mod:`~trajkit.gateway.stitch` names the reason). The gateway also checks the template's own render of the
returned message (:meth:`trajkit.gateway.service.Gateway._renders_back`), which catches templates that
rewrite history.

Worked example::

    >>> m = parse_output('<think>\\nls first\\n</think>\\n<tool_call>\\n'
    ...                  '{"name": "terminal", "arguments": {"command": "ls"}}\\n</tool_call>')
    >>> m.reasoning, m.content, m.calls[0]["function"], m.diagnostics
    ('ls first', None, {'name': 'terminal', 'arguments': '{"command": "ls"}'}, [])
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any

from trajkit.traces.hermes_text import THINK_GLUE, parse_assistant_text

NOT_REPRODUCIBLE = "history_not_reproducible"


@dataclass
class ParsedMessage:
    """One choice's text, split for the API. ``calls`` are OpenAI ``tool_calls`` entries."""

    content: str | None
    reasoning: str | None
    calls: list[dict[str, Any]] = field(default_factory=list)
    diagnostics: list[dict[str, Any]] = field(default_factory=list)

    def message(self) -> dict[str, Any]:
        """The OpenAI assistant message (``trajkit_diagnostics`` only when there is something to say)."""
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


def parse_output(text: str, id_seed: str = "", think_glue: str = THINK_GLUE) -> ParsedMessage:
    """Split ``text`` as the module docstring says (:func:`trajkit.traces.hermes_text.parse_assistant_text`,
    with the template's ``think_glue`` after ``</think>``)."""
    parts = parse_assistant_text(text, think_glue)
    problems = [{"code": "malformed_tool_call" if call.closed else "unclosed_tool_call",
                 "detail": call.error or "<tool_call> is never closed", "text": raw} for call, raw in parts.unreturned]
    calls = [{"id": call_id(id_seed, k), "type": "function", "function": {"name": c.name, "arguments": a}}
             for k, (c, a) in enumerate(zip(parts.calls, parts.arguments))]
    parsed = ParsedMessage(parts.content if parts.content or not calls else None, parts.reasoning, calls, problems)
    if not parts.exact:
        parsed.diagnostics.append(not_reproducible("; ".join(dict.fromkeys(parts.why)), parts.at))
    return parsed


def not_reproducible(reason: str, at: int) -> dict[str, Any]:
    """The diagnostic of a message whose re-render will not give back the sampled ids (``at``: the first
    character of the sampled reply that differs)."""
    return {"code": NOT_REPRODUCIBLE, "detail": f"{reason}; re-rendered, the reply differs from the sampled text "
            f"at character {at}, so the history sent back will not extend the sampled ids (the chain forks)",
            "at": at}


