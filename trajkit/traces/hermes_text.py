"""Hermes text: the one layout trajkit writes and reads, and its one parser.

Every place that writes Hermes text (the gateway's inline rendering for content-only templates, the gateway's
Hermes export, the tool env, the OpenAI -> trace converter, the SFT export's inline mode) calls the renderers
here, and the gateway's reply parser is :func:`parse_assistant_text`; nothing else spells the glue.

**The layout** is the one of the source data, ``lambda/hermes-agent-reasoning-traces`` (rows written by the
Hermes Agent's ``trajectory_samples.jsonl`` saver; the real row in the project's shared fixtures and every row
of the bundled samples follow it)::

    system: [{preamble}\\n\\n]{HERMES_SYSTEM with the tools as a JSON list of OpenAI tool definitions}
    gpt:    [<think>\\n{reasoning}\\n</think>\\n]{content}[\\n]<tool_call>\\n{"name": N, "arguments": A}\\n</tool_call>
                                                     (\\n<tool_call>…</tool_call>)*
    tool:   <tool_response>\\n{"tool_call_id": I, "name": N, "content": C}\\n</tool_response>(\\n<tool_response>…)*

- ``</think>`` is followed by ONE newline (the data's layout; :data:`THINK_GLUE`). A chat template that
  renders ``reasoning_content`` itself may use other glue (trajkit's own template and Qwen3 write
  ``</think>\\n\\n``): that is the template's layout, and the gateway parses replies with the glue it probes
  from the template (``glue`` below); Hermes text written by trajkit always uses :data:`THINK_GLUE`.
- A think block is written exactly when there is reasoning (``reasoning`` a string; ``""`` gives the empty
  block ``<think>\\n\\n</think>\\n`` the data holds). **Deviation from the Hermes Agent:** it adds an empty
  ``<think>\\n</think>\\n`` to every turn without reasoning and strips each turn; we write neither, because the
  Hermes text of a turn must be the text the model wrote (the gateway trains on those bytes, and the export of
  the same conversation must give them back byte for byte).
- ``A`` (arguments) is written as given when it is a string (the model's own JSON text), else as JSON.
- Tool results after one assistant turn form ONE ``tool`` turn, one ``<tool_response>`` per result, holding
  the envelope ``{"tool_call_id", "name", "content"}``; ``content`` is the JSON value when the result text is
  a JSON object or list, else the text (as the Hermes Agent writes it). ``name`` is the name of the call the
  result answers (by ``tool_call_id``, else its position).
- In a content-only template (inline), a ``system`` message that already holds ``<tools>`` is kept, else the
  tools' system prompt is added after it (``preamble``).

**The parser** (:func:`parse_assistant_text`) is the inverse: ``assistant_text`` of its result gives the
text back exactly, or the result says why not (``why``). ``parse_tool_turn`` and ``parse_envelope`` read the
tool turn. The lossless block segmenter underneath is :func:`trajkit.traces.blocks.parse_assistant`.

Worked example::

    >>> text = assistant_text("Let me look.", [call_body("ls", '{"path": "."}')], reasoning="plan")
    >>> text
    '<think>\\nplan\\n</think>\\nLet me look.\\n<tool_call>\\n{"name": "ls", "arguments": {"path": "."}}\\n</tool_call>'
    >>> p = parse_assistant_text(text)
    >>> (p.reasoning, p.content, p.arguments, p.exact)
    ('plan', 'Let me look.', ['{"path": "."}'], True)
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from trajkit.traces import jsonvalue
from trajkit.traces.blocks import (CALL_CLOSE, CALL_OPEN, RESP_CLOSE, RESP_OPEN, THINK_CLOSE, THINK_OPEN,
                                   parse_assistant, parse_tool_message)
from trajkit.traces.model import Segment, ToolCall

THINK_GLUE = "\n"  # after </think>, as the data has it
HERMES_ROLES = {"system": "system", "user": "human", "assistant": "gpt", "tool": "tool"}

HERMES_SYSTEM = (
    "You are a function calling AI model. You are provided with function signatures within <tools> </tools> "
    "XML tags. You may call one or more functions to assist with the user query. If available tools are not "
    "relevant in assisting with user query, just respond in natural conversational language. Don't make "
    "assumptions about what values to plug into functions. After calling & executing the functions, you will "
    "be provided with function results within <tool_response> </tool_response> XML tags. Here are the "
    "available tools:\n<tools>\n{tools}\n</tools>\nFor each function call return a JSON object, with the "
    "following pydantic model json schema for each:\n{{'title': 'FunctionCall', 'type': 'object', "
    "'properties': {{'name': {{'title': 'Name', 'type': 'string'}}, 'arguments': {{'title': 'Arguments', "
    "'type': 'object'}}}}, 'required': ['name', 'arguments']}}\nEach function call should be enclosed within "
    "<tool_call> </tool_call> XML tags.\nExample:\n<tool_call>\n{{'name': <function-name>,'arguments': "
    "<args-dict>}}\n</tool_call>")


# --- rendering ---------------------------------------------------------------------------------------
def tools_system(tools: list[dict[str, Any]], preamble: str = "") -> str:
    """The Hermes function-calling system prompt for OpenAI tool definitions, after ``preamble``."""
    head = preamble + "\n\n" if preamble else ""
    return head + HERMES_SYSTEM.format(tools=json.dumps(tools, ensure_ascii=False))


def tools_system_preamble(text: str) -> str | None:
    """``preamble`` when ``text`` is ``tools_system(tools, preamble)`` for the tools it lists (``""``: none),
    else None: the system prompt the writer of a row had, less the tools prompt a template writes again."""
    start = text.find(HERMES_SYSTEM[:40])
    if start < 0 or (start and not text[:start].endswith("\n\n")):
        return None
    preamble = text[:start - 2] if start else ""
    try:
        tools = json.loads(text[text.index("<tools>\n", start) + 8:text.index("\n</tools>", start)])
    except ValueError:
        return None
    return preamble if tools_system(tools, preamble) == text else None


def think_block(reasoning: str, glue: str = THINK_GLUE) -> str:
    return THINK_OPEN + "\n" + reasoning + "\n" + THINK_CLOSE + glue


def call_body(name: str, arguments: Any) -> str:
    """``{"name": N, "arguments": A}``; a string ``arguments`` is written as given (the model's JSON text)."""
    args = arguments if isinstance(arguments, str) else json.dumps(arguments, ensure_ascii=False)
    return '{"name": ' + json.dumps(name, ensure_ascii=False) + ', "arguments": ' + args + "}"


def call_block(body: str) -> str:
    return CALL_OPEN + "\n" + body + "\n" + CALL_CLOSE


def assistant_text(content: str, call_bodies: list[str], reasoning: str | None = None,
                   glue: str = THINK_GLUE) -> str:
    """One ``gpt`` turn: think block (when ``reasoning`` is a string), content, then the call blocks."""
    out = think_block(reasoning, glue) if isinstance(reasoning, str) else ""
    out += content
    for i, body in enumerate(call_bodies):
        out += ("\n" if i or content else "") + call_block(body)
    return out


def message_text(msg: dict[str, Any], glue: str = THINK_GLUE) -> str:
    """An OpenAI assistant message (``content``, ``reasoning_content``, ``tool_calls``) as Hermes text."""
    bodies = [call_body(c["function"]["name"], c["function"]["arguments"]) for c in msg.get("tool_calls") or []]
    return assistant_text(msg.get("content") or "", bodies, msg.get("reasoning_content"), glue)


def response_block(body: str) -> str:
    return RESP_OPEN + "\n" + body + "\n" + RESP_CLOSE


def tool_turn(bodies: list[str]) -> str:
    """One ``tool`` turn: the results of one assistant turn's calls, one block each."""
    return "\n".join(response_block(b) for b in bodies)


def result_value(text: str) -> Any:
    """A tool result as the envelope's ``content``: the JSON value of a JSON object/list text, else the text."""
    if text.strip().startswith(("{", "[")):
        try:
            return json.loads(text)
        except ValueError:
            pass
    return text


def response_envelope(tool_call_id: str, name: str, content: Any) -> str:
    return json.dumps({"tool_call_id": tool_call_id, "name": name, "content": content}, ensure_ascii=False)


def _result_name(msg: dict[str, Any], calls: list[dict[str, Any]], index: int) -> str:
    """The name of the call a tool message answers: by ``tool_call_id``, else by position, else its own."""
    by_id = {c.get("id"): c["function"]["name"] for c in calls if c.get("id")}
    if msg.get("tool_call_id") in by_id:
        return by_id[msg["tool_call_id"]]
    if index < len(calls):
        return calls[index]["function"]["name"]
    return msg.get("name") or "unknown"


def hermes_turns(messages: list[dict[str, Any]], glue: str = THINK_GLUE) -> list[tuple[str, str]]:
    """OpenAI messages -> ``(role, Hermes text)`` turns; consecutive ``tool`` messages become one turn."""
    turns: list[tuple[str, str]] = []
    calls: list[dict[str, Any]] = []
    bodies: list[str] = []
    for m in messages:
        if m["role"] == "tool":
            body = response_envelope(m.get("tool_call_id") or "", _result_name(m, calls, len(bodies)),
                                     result_value(m.get("content") or ""))
            bodies.append(body)
            continue
        if bodies:
            turns.append(("tool", tool_turn(bodies)))
            bodies = []
        if m["role"] == "assistant":
            calls = m.get("tool_calls") or []
            turns.append(("assistant", message_text(m, glue)))
        else:
            turns.append((m["role"], m.get("content") or ""))
    if bodies:
        turns.append(("tool", tool_turn(bodies)))
    return turns


def with_tools_system(turns: list[tuple[str, str]], tools: list[dict[str, Any]] | None) -> list[tuple[str, str]]:
    """``turns`` with the tools' system prompt: a system turn that already holds ``<tools>`` is kept, another
    becomes its preamble, and none gets one; no tools, no change."""
    if not tools:
        return list(turns)
    if turns and turns[0][0] == "system":
        text = turns[0][1]
        return [("system", text if "<tools>" in text else tools_system(tools, text))] + list(turns[1:])
    return [("system", tools_system(tools))] + list(turns)


def inline_messages(messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None, tool_role: str,
                    glue: str = THINK_GLUE) -> list[dict[str, str]]:
    """``messages`` written as Hermes text into ``content`` (for content-only chat templates); tool turns
    in ``tool_role`` (``tool``, else ``user`` where the template drops tool messages)."""
    return [{"role": tool_role if r == "tool" else r, "content": t}
            for r, t in with_tools_system(hermes_turns(messages, glue), tools)]


def hermes_conversation(messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None) -> list[dict[str, str]]:
    """OpenAI messages -> the ``conversations`` of a Hermes ShareGPT row (the same turns as
    :func:`inline_messages`, so an inline render of the row gives the gateway's inline prompt back)."""
    return [{"from": HERMES_ROLES[r], "value": t} for r, t in with_tools_system(hermes_turns(messages), tools)]


# --- parsing -----------------------------------------------------------------------------------------
@dataclass
class AssistantParts:
    """A ``gpt`` turn split into the fields :func:`assistant_text` writes.

    ``calls``: the closed, well-formed call blocks; ``arguments[i]``: the model's own text of call ``i``'s
    arguments when its block is written in the layout, else their canonical JSON. ``unreturned``: ``(call,
    raw)`` of malformed and unclosed blocks, which stay in ``content`` verbatim. ``exact``: whether
    :func:`assistant_text` of the parts gives the text back; ``why`` says why not, ``at`` where it differs."""

    reasoning: str | None
    content: str
    calls: list[ToolCall] = field(default_factory=list)
    arguments: list[str] = field(default_factory=list)
    unreturned: list[tuple[ToolCall, str]] = field(default_factory=list)
    why: list[str] = field(default_factory=list)
    exact: bool = True
    at: int = 0

    def bodies(self) -> list[str]:
        return [call_body(c.name, a) for c, a in zip(self.calls, self.arguments)]

    def text(self, glue: str = THINK_GLUE) -> str:
        return assistant_text(self.content, self.bodies(), self.reasoning, glue)


def parse_assistant_text(text: str, glue: str = THINK_GLUE) -> AssistantParts:
    """Split ``text`` into reasoning (a closed think block opening the text in the layout), content and
    calls. When splitting off the reasoning leaves parts that cannot give the text back (``<think>\\n…
    </think>\\n\\n<tool_call>…`` with ``glue`` ``\\n``: empty content cannot carry the newline before the
    call), the think block stays in ``content`` instead, if that gives the text back."""
    segments, calls = parse_assistant(text, 0, [])
    parts = _parts(text, segments, calls, glue, split_reasoning=True)
    if parts.reasoning is not None and not parts.exact:
        whole = _parts(text, segments, calls, glue, split_reasoning=False)
        if whole.exact:
            return whole
    return parts


def _parts(text, segments, calls, glue: str, split_reasoning: bool) -> AssistantParts:
    reasoning, segments = _reasoning(segments, glue) if split_reasoning else (None, segments)
    items: list[ToolCall | str] = []  # returned calls, and every other piece of text verbatim
    unreturned = []
    for seg in segments:
        call = calls[seg.ref] if seg.kind == "tool_call" else None
        if call is not None and call.ok and call.closed:
            items.append(call)
            continue
        if call is not None:
            unreturned.append((call, seg.raw))
        items.append(seg.raw)
    content, returned, why = _layout(items)
    arguments = []
    for call in returned:
        written, exact = arguments_text(call)
        arguments.append(written)
        if not exact:
            why.append(_call_layout_problem(call))
    parts = AssistantParts(reasoning, content, returned, arguments, unreturned, why)
    back = parts.text(glue)
    if back != text:
        parts.exact = False
        parts.at = next((i for i, (a, b) in enumerate(zip(back, text)) if a != b), min(len(back), len(text)))
        parts.why = parts.why or ["the message renders back to other text"]
    return parts


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


def _reasoning(segments, glue: str):
    """The reasoning when the text opens with ``<think>\\n…\\n</think>`` + ``glue``; the segments after it."""
    if not segments or segments[0].kind != "think":
        return None, segments
    raw = segments[0].raw
    after = segments[1].raw if len(segments) > 1 and segments[1].kind == "text" else ""
    head, tail = THINK_OPEN + "\n", "\n" + THINK_CLOSE
    if len(raw) < len(head) + len(tail) or not (raw.startswith(head) and raw.endswith(tail)):
        return None, segments
    if not after.startswith(glue):
        return None, segments
    rest = after[len(glue):]
    later = segments[2:] if len(segments) > 1 and segments[1].kind == "text" else segments[1:]
    return raw[len(head):len(raw) - len(tail)], ([Segment("text", rest)] if rest else []) + later


def arguments_text(call: ToolCall) -> tuple[str, bool]:
    """``(arguments text, exact)``: the model's own text of the value when the block is written in the
    layout (``exact``), else the canonical JSON."""
    head = "\n" + call_body(call.name, "")[:-1]
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


def parse_tool_turn(text: str) -> list[str] | None:
    """The bodies of a ``tool`` turn written in the layout (``tool_turn(bodies) == text``), else None."""
    segments, _ = parse_tool_message(text, 0, [])
    bodies = [s.raw[len(RESP_OPEN) + 1:len(s.raw) - len(RESP_CLOSE) - 1] for s in segments
              if s.kind == "tool_response"]
    return bodies if tool_turn(bodies) == text else None


def parse_envelope(body: str) -> dict[str, Any] | None:
    """``{"tool_call_id", "name", "content"}`` of a response body written as :func:`response_envelope`
    writes it, else None."""
    try:
        value = json.loads(body)
    except ValueError:
        return None
    if not (isinstance(value, dict) and list(value) == ["tool_call_id", "name", "content"]):
        return None
    return value if response_envelope(**value) == body else None
