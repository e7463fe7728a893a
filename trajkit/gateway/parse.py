"""The model's text as an OpenAI assistant message, built from trajkit's lossless trace parse.

The text is split by :func:`trajkit.traces.blocks.parse_assistant` (the parser ``trajkit traces`` reads
traces with: segments that concatenate back to the text exactly), and the message is laid out so that
rendering it back gives that very text. The layout templates render an assistant message in (trajkit's
own template and the gateway's inline Hermes text, :func:`trajkit.gateway.render.hermes_assistant_text`)::

    [<think>\\n{reasoning}\\n</think>\\n\\n]{content}[\\n]<tool_call>\\n{"name": N, "arguments": A}\\n</tool_call>
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
returned message (:meth:`trajkit.gateway.service.Gateway._reproduces`), which catches templates that
rewrite history.

Worked example::

    >>> m = parse_output('<think>\\nls first\\n</think>\\n\\n<tool_call>\\n'
    ...                  '{"name": "terminal", "arguments": {"command": "ls"}}\\n</tool_call>')
    >>> m.reasoning, m.content, m.calls[0]["function"], m.diagnostics
    ('ls first', None, {'name': 'terminal', 'arguments': '{"command": "ls"}'}, [])
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

from trajkit.traces import jsonvalue
from trajkit.traces.blocks import THINK_CLOSE, THINK_OPEN, parse_assistant
from trajkit.traces.model import Segment, ToolCall

REASONING_OPEN, REASONING_CLOSE = THINK_OPEN + "\n", "\n" + THINK_CLOSE + "\n\n"
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


def parse_output(text: str, id_seed: str = "") -> ParsedMessage:
    """Split ``text`` (a completion, end-of-turn token excluded) as the module docstring says. When the
    reasoning split leaves a message that cannot render back (``<think>\n\n</think>\n\n\n<tool_call>…``:
    empty content cannot carry the newline before the call), the think block is kept in ``content``
    instead, if that message renders back."""
    segments, calls = parse_assistant(text, 0, [])
    parsed = _message(text, segments, calls, id_seed, split_reasoning=True)
    if parsed.reasoning is not None and _flagged(parsed):
        whole = _message(text, segments, calls, id_seed, split_reasoning=False)
        if not _flagged(whole):
            return whole
    return parsed


def _flagged(parsed: ParsedMessage) -> bool:
    return any(d["code"] == NOT_REPRODUCIBLE for d in parsed.diagnostics)


def _message(text: str, segments: list[Segment], calls: list[ToolCall], id_seed: str, split_reasoning: bool
             ) -> ParsedMessage:
    reasoning, segments = _reasoning(segments) if split_reasoning else (None, segments)
    items: list[ToolCall | str] = []  # returned calls, and every other piece of text verbatim
    problems: list[dict[str, Any]] = []
    for seg in segments:
        call = calls[seg.ref] if seg.kind == "tool_call" else None
        if call is not None and call.ok and call.closed:
            items.append(call)
            continue
        if call is not None:
            problems.append({"code": "malformed_tool_call" if call.closed else "unclosed_tool_call",
                             "detail": call.error or "<tool_call> is never closed", "text": seg.raw})
        items.append(seg.raw)
    content, returned, why = _layout(items)
    out_calls = []
    for call in returned:
        arguments, exact = _arguments(call)
        if not exact:
            why.append(_call_layout_problem(call))
        out_calls.append({"id": call_id(id_seed, len(out_calls)), "type": "function",
                          "function": {"name": call.name, "arguments": arguments}})
    parsed = ParsedMessage(content if content or not out_calls else None, reasoning, out_calls, problems)
    _check_renders_back(parsed, text, why)
    return parsed


def _layout(items: list[ToolCall | str]) -> tuple[str, list[ToolCall], list[str]]:
    """``(content, calls, why)``: the text before the first call (less the layout's newline before it) and
    any text after it (which no message can place there: ``why`` says so); the one-newline separators
    between calls are layout."""
    first = next((i for i, x in enumerate(items) if isinstance(x, ToolCall)), len(items))
    before = "".join(items[:first])
    if first < len(items) and before.endswith("\n"):
        before = before[:-1]
    calls, after, why = [], [], []
    for i in range(first, len(items)):
        x = items[i]
        if isinstance(x, ToolCall):
            calls.append(x)
        elif not (x == "\n" and i + 1 < len(items) and isinstance(items[i + 1], ToolCall)
                  and isinstance(items[i - 1], ToolCall)):
            after.append(x)
            why.append("text after a tool call (an OpenAI message puts its content before its calls)")
    return before + "".join(after), calls, why


def _reasoning(segments: list[Segment]) -> tuple[str | None, list[Segment]]:
    """The reasoning when the text opens with ``<think>\\n…\\n</think>\\n\\n``; the segments after it."""
    if len(segments) < 2 or segments[0].kind != "think" or segments[1].kind != "text":
        return None, segments
    raw, after = segments[0].raw, segments[1].raw
    inner = raw[len(REASONING_OPEN):len(raw) - len(THINK_CLOSE) - 1]
    too_short = len(raw) < len(REASONING_OPEN) + len(THINK_CLOSE) + 1  # "<think>\n</think>": no inner newline
    if too_short or raw + after[:2] != REASONING_OPEN + inner + REASONING_CLOSE:
        return None, segments
    rest = after[2:]
    return inner, ([Segment("text", rest)] if rest else []) + segments[2:]


def _arguments(call: ToolCall) -> tuple[str, bool]:
    """``(arguments text, exact)``: the model's own text of the value when the block is written in the
    layout (``exact``), else the canonical JSON."""
    head = "\n{\"name\": " + json.dumps(call.name, ensure_ascii=False) + ", \"arguments\": "
    body = call.body
    if body.startswith(head) and body.endswith("}\n"):
        written = body[len(head):-2]
        try:
            if jsonvalue.loads(written) == call.arguments:
                return written, True
        except ValueError:
            pass
    return jsonvalue.dumps(call.arguments).decode(), False


def _call_layout_problem(call: ToolCall) -> str:
    extra = sorted(set(jsonvalue.loads(call.body)) - {"name", "arguments"})
    if extra:
        return f"the call's JSON has keys an OpenAI tool call cannot carry: {extra}"
    return ("the call's JSON is not written as <tool_call>\\n{\"name\": …, \"arguments\": …}\\n</tool_call> "
            "(key order, spacing or newlines)")


def _check_renders_back(parsed: ParsedMessage, text: str, why: list[str]) -> None:
    from trajkit.gateway.render import hermes_assistant_text

    back = hermes_assistant_text(parsed.message())
    if back == text:
        return
    at = next((i for i, (a, b) in enumerate(zip(back, text)) if a != b), min(len(back), len(text)))
    reason = "; ".join(dict.fromkeys(why)) or "the message renders back to other text"
    parsed.diagnostics.append(not_reproducible(reason, at))


def not_reproducible(reason: str, at: int) -> dict[str, Any]:
    """The diagnostic of a message whose re-render will not give back the sampled ids (``at``: the first
    character of the sampled reply that differs)."""
    return {"code": NOT_REPRODUCIBLE, "detail": f"{reason}; re-rendered, the reply differs from the sampled text "
            f"at character {at}, so the history sent back will not extend the sampled ids (the chain forks)",
            "at": at}


