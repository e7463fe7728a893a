"""What a chat template renders, found by rendering a small probe conversation with unique markers.

Chat templates differ in what they keep. A plain ChatML template (SmolLM2's) renders only ``content``:
tool schemas, assistant ``tool_calls`` and ``reasoning_content`` vanish, and a default system prompt
appears when none is given. A Qwen3-style template renders all of them but drops the reasoning of turns
before the last user message. The SFT export must know this before it trains anything, or it trains
empty turns. :func:`probe_template` renders one conversation holding a marker in every field and reports,
for each way of writing a conversation (:data:`MODES`), which markers survive and whether the render of a
conversation's prefix is a prefix of the render of the whole (the property prefix rendering needs):

- ``structured``: OpenAI fields (``tools``, ``tool_calls``, ``reasoning_content``, ``tool`` messages);
- ``inline``: the Hermes text itself (``<think>``, narration and ``<tool_call>`` blocks in the assistant
  ``content``; the tool schemas as the Hermes ``<tools>`` system block; tool results as
  ``<tool_response>`` text in the ``tool`` role, or the ``user`` role when the template drops tool messages).

:func:`choose_rendering` then picks ``structured`` only when nothing is lost, else ``inline``, and how to
split conversations into examples: ``all`` turns in one example when every prefix renders as a prefix;
``query`` (one example per user query) when that holds only after the last user message (templates that
drop earlier reasoning); ``last`` (one example per assistant turn, the inference view) otherwise. The
export still verifies every example, and where a template renders one turn differently once it is no
longer the last (Qwen3 writes an empty think block on the last turn only), that group of turns falls back
to one example per turn (:mod:`trajkit.traces.export.tokenize`). A template that loses an assistant turn's
content in every mode is a :class:`~trajkit.errors.ConfigError` naming the template and what it drops.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from trajkit.errors import ConfigError
from trajkit.traces.hermes_text import assistant_text, call_body, response_block, tools_system

Mode = Literal["structured", "inline"]
MODES: tuple[Mode, ...] = ("structured", "inline")
Split = Literal["all", "query", "last"]

SYSTEM = "sysmark7q"
USER_1, USER_2 = "usermarkA3", "usermarkB4"
EARLY_REASON, REASON, LAST_REASON = "earlyreason5x", "reasonmark6y", "lastreason8w"
NARRATION, FINAL = "narration9v", "finalanswer2u"
TOOL_NAME, TOOL_DESC, ARG_VALUE, RESULT = "probetool_k1", "tooldesc_j2", "argval_h3", "toolresult_g4"
TOOLS = [{"type": "function", "function": {
    "name": TOOL_NAME, "description": TOOL_DESC,
    "parameters": {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}}}]
CALL = {"name": TOOL_NAME, "arguments": {"q": ARG_VALUE}}


def _assistant(mode: Mode, reasoning: str, content: str, call: bool) -> dict[str, Any]:
    if mode == "inline":
        bodies = [call_body(CALL["name"], CALL["arguments"])] if call else []
        return {"role": "assistant", "content": assistant_text(content, bodies, reasoning)}
    msg: dict[str, Any] = {"role": "assistant", "content": content, "reasoning_content": reasoning}
    if call:
        msg["tool_calls"] = [{"id": "call_0", "type": "function",
                              "function": {"name": TOOL_NAME, "arguments": json.dumps(CALL["arguments"])}}]
    return msg


def hermes_tools_system(tools: list[dict[str, Any]], preamble: str = "") -> str:
    """A short Hermes function-calling system prompt: ``preamble`` then the schemas in ``<tools></tools>``.
    Only the calculator tool env uses it (its warm-start demonstrations are cached on it); everything else
    writes :func:`trajkit.traces.hermes_text.tools_system`, the data's prompt."""
    head = (preamble + "\n\n") if preamble else ""
    return (head + "You are a function calling AI model. You are provided with function signatures within "
            "<tools> </tools> XML tags. You may call one or more functions to assist with the user query.\n"
            "<tools>\n" + json.dumps(tools, ensure_ascii=False) + "\n</tools>\nFor each function call return "
            "a json object with function name and arguments within <tool_call> </tool_call> XML tags.")


def probe_conversation(mode: Mode, tool_role: str = "tool") -> tuple[list[dict[str, Any]], list | None]:
    """The probe: system, a first query and answer, a second query, a tool call, its result, an answer."""
    system = SYSTEM if mode == "structured" else tools_system(TOOLS, SYSTEM)  # as inline rendering writes it
    result = RESULT if mode == "structured" else response_block(RESULT)
    messages = [{"role": "system", "content": system}, {"role": "user", "content": USER_1},
                _assistant(mode, EARLY_REASON, "first", False), {"role": "user", "content": USER_2},
                _assistant(mode, REASON, NARRATION, True), {"role": tool_role, "content": result},
                _assistant(mode, LAST_REASON, FINAL, False)]
    if mode == "structured":
        messages[5]["tool_call_id"] = "call_0"
    return messages, (TOOLS if mode == "structured" else None)


@dataclass
class ModeReport:
    """What survives one way of writing the probe conversation."""

    renders: bool = False  # the template rendered it without an error
    error: str = ""
    system: bool = False
    tools: bool = False
    tool_calls: bool = False  # name and argument value of the call
    tool_results: bool = False
    tool_role: str = "tool"  # the role tool results are written in
    reasoning_last: bool = False  # reasoning of the turns after the last user message
    reasoning_history: bool = False  # reasoning of a turn before a later user message
    narration: bool = False
    appends: bool = False  # every message-boundary prefix renders as a prefix of the whole
    appends_after_query: bool = False  # the same, counting only boundaries after the last user message

    def lost(self) -> list[str]:
        """What this mode drops from a conversation (empty when nothing)."""
        names = ("system", "tools", "tool_calls", "tool_results", "reasoning_last", "narration")
        return [n for n in names if not getattr(self, n)] if self.renders else ["everything (" + self.error + ")"]


@dataclass
class TemplateInfo:
    """The probe's findings for one tokenizer's chat template."""

    name: str
    template_sha: str
    default_system: bool  # a system prompt appears when the conversation has none
    modes: dict[str, ModeReport] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _render(tok, messages, tools, generation_prompt=False) -> str:
    return tok.apply_chat_template(messages, tools=tools, tokenize=False, add_generation_prompt=generation_prompt)


def _report(tok, mode: Mode) -> ModeReport:
    for role in ("tool", "user"):
        messages, tools = probe_conversation(mode, role)
        rep = ModeReport(tool_role=role)
        try:
            text = _render(tok, messages, tools)
        except Exception as exc:  # a template may raise on a field or role it does not support
            rep.error = f"{type(exc).__name__}: {exc}"
            continue
        rep.renders = True
        rep.system = SYSTEM in text
        rep.tools = TOOL_DESC in text
        rep.tool_calls = TOOL_NAME in text.split(USER_2, 1)[-1] and ARG_VALUE in text
        rep.tool_results = RESULT in text
        rep.reasoning_last = REASON in text and LAST_REASON in text
        rep.reasoning_history = EARLY_REASON in text
        rep.narration = NARRATION in text and FINAL in text
        if rep.tool_results:
            break
    if rep.renders:
        _prefix_properties(tok, rep, messages, tools)
    return rep


def _prefix_properties(tok, rep: ModeReport, messages, tools) -> None:
    full = _render(tok, messages, tools)
    last_query = max(i for i, m in enumerate(messages) if m["role"] == "user")
    ok_all = ok_after = True
    for i in range(1, len(messages)):
        if messages[i]["role"] != "assistant":
            continue
        prompt, turn = _render(tok, messages[:i], tools, True), _render(tok, messages[:i + 1], tools)
        good = full.startswith(prompt) and full.startswith(turn) and turn.startswith(prompt)
        ok_all &= good
        if i > last_query:
            ok_after &= good
    rep.appends, rep.appends_after_query = ok_all, ok_after


def probe_template(tokenizer) -> TemplateInfo:
    """Render the probe conversation in every mode (see the module docstring)."""
    template = getattr(tokenizer, "chat_template", None)
    if not template:
        raise ConfigError(f"tokenizer {getattr(tokenizer, 'name_or_path', '')!r} has no chat template")
    text = template if isinstance(template, str) else json.dumps(template, sort_keys=True)
    try:
        bare = _render(tokenizer, [{"role": "user", "content": USER_1}], None)
        default_system = "system" in bare.split(USER_1, 1)[0]
    except Exception:  # noqa: BLE001 - reported through the modes below
        default_system = False
    info = TemplateInfo(getattr(tokenizer, "name_or_path", "") or "(unnamed)",
                        hashlib.sha256(text.encode()).hexdigest()[:12], default_system)
    for mode in MODES:
        info.modes[mode] = _report(tokenizer, mode)
    return info


@dataclass(frozen=True)
class Rendering:
    """How the export writes conversations for one template: the mode, the tool role, the split."""

    mode: Mode
    tool_role: str
    split: Split
    reason: str


def _split_reason(rep: ModeReport) -> tuple[Split, str]:
    if rep.appends:
        return "all", "the template renders history verbatim: every turn trained once in one example"
    if rep.appends_after_query:
        return "query", ("the template rewrites turns before the last user message (e.g. drops their "
                         "reasoning): one example per user query, each turn trained with its own reasoning")
    return "last", ("the template renders a turn differently once it is not the last message: one example "
                    "per assistant turn (the inference view)")


def split_for(rep: ModeReport) -> Split:
    """How conversations written in ``rep``'s mode are split into examples."""
    return _split_reason(rep)[0]


def choose_rendering(info: TemplateInfo, mode: str = "auto") -> Rendering:
    """``auto``: ``structured`` when it loses nothing, else ``inline``; ConfigError when both lose part of
    an assistant turn. An explicit mode is used as asked, its losses named in ``reason`` (the export's
    source check then drops, and counts, every example that loses content)."""
    if mode not in ("auto", *MODES):
        raise ConfigError(f"render mode must be one of auto, {', '.join(MODES)}; got {mode!r}")
    if mode != "auto":
        rep = info.modes[mode]
        split, why = _split_reason(rep)
        lost = rep.lost()
        return Rendering(mode, rep.tool_role, split, f"{mode} (asked): " + (f"DROPS {', '.join(lost)}; "
                                                                          if lost else "nothing lost; ") + why)
    for name in MODES:
        rep = info.modes[name]
        if not rep.lost():
            split, why = _split_reason(rep)
            return Rendering(name, rep.tool_role, split, f"{name}: nothing lost; {why}")
    detail = "; ".join(f"{m} drops {', '.join(info.modes[m].lost())}" for m in MODES)
    raise ConfigError(f"chat template of {info.name!r} (sha {info.template_sha}) cannot carry agent turns: "
                      f"{detail}. Use a tokenizer whose template renders message content")


def format_info(info: TemplateInfo, rendering: Rendering | None = None) -> str:
    """A short table for the terminal: one row per mode, a column per field."""
    cols = ("renders", "system", "tools", "tool_calls", "tool_results", "reasoning_last",
            "reasoning_history", "narration", "appends", "appends_after_query")
    lines = [f"chat template of {info.name} (sha {info.template_sha}); default system prompt: "
             f"{'yes' if info.default_system else 'no'}",
             f"{'mode':<11} " + " ".join(f"{c:>{len(c)}}" for c in cols) + "  tool role"]
    for name, rep in info.modes.items():
        cells = " ".join(f"{('yes' if getattr(rep, c) else 'NO'):>{len(c)}}" for c in cols)
        lines.append(f"{name:<11} {cells}  {rep.tool_role}")
    if rendering is not None:
        lines.append(f"export uses: {rendering.reason} (split={rendering.split}, tool role {rendering.tool_role})")
    return "\n".join(lines)
