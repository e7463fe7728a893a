"""Tool-call formats: how a model writes its calls, read into ``tool_calls`` and written back (the role of
vLLM's ``--tool-call-parser hermes|llama3_json|…``). A format is a small object: ``parse`` (the text -> the
message, lossless: :mod:`~trajkit.gateway.parse`), ``assistant_text`` (a message -> the text its template
writes), ``forced`` (the text that starts a reply ``tool_choice`` demands), ``holds`` (the characters at
which live streaming stops sending: a block may start there).

- ``hermes`` (Hermes, Qwen, trajkit's own template): ``<tool_call>\\n{"name", "arguments"}\\n</tool_call>``;
- ``llama3_json`` (Llama 3.1/3.2 JSON calls): one bare JSON object ``{"name": …, "parameters": …}`` per
  call, one per line, after any text; results come back in an ``ipython`` turn (the template's business);
- ``mistral`` (Mistral v3+): ``[TOOL_CALLS]`` and a JSON list of ``{"name", "arguments", "id"}``; the ids
  are the model's own and are kept as the ``tool_calls`` ids.

``--tool-call-format auto`` (default) asks the template: it renders an assistant turn holding a call, and
the format whose ``assistant_text`` of that turn appears in the render is the template's. A content-only
template (rendered inline: the gateway writes the Hermes text itself) is always ``hermes``.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, replace
from typing import Any

from trajkit.errors import ConfigError
from trajkit.gateway.parse import ParsedMessage, call_id, not_reproducible, parse_output
from trajkit.models.chat import render
from trajkit.traces.hermes_text import THINK_CLOSE, THINK_GLUE, message_text

PROBE_CALL = {"id": "call_probe", "type": "function", "function": {"name": "probe_fn", "arguments": '{"q": "Zq9"}'}}
PROBE_SCHEMA = {"type": "object", "properties": {"q": {"type": "string"}}}
PROBE_TOOLS = [{"type": "function", "function": {"name": "probe_fn", "description": "A probe.", "parameters": PROBE_SCHEMA}}]


@dataclass(frozen=True)
class Hermes:
    """Hermes text (:mod:`trajkit.traces.hermes_text`); ``think_glue``: what follows ``</think>`` (the
    template's, :func:`think_glue`; Hermes text's own when the gateway writes it inline)."""

    name: str = "hermes"
    holds: str = "<"
    think_glue: str = THINK_GLUE

    def parse(self, text: str, id_seed: str = "") -> ParsedMessage:
        return parse_output(text, id_seed, self.think_glue)

    def assistant_text(self, msg: dict) -> str:
        return message_text(msg, self.think_glue)

    def forced(self, tool_choice: Any) -> str:
        if tool_choice == "required":
            return '<tool_call>\n{"name": "'
        if isinstance(tool_choice, dict):
            return '<tool_call>\n{"name": ' + json.dumps(tool_choice["function"]["name"]) + ', "arguments": '
        return ""


@dataclass(frozen=True)
class Llama3Json:
    name: str = "llama3_json"
    holds: str = "<{"

    def assistant_text(self, msg: dict) -> str:
        out = body = msg.get("content") or ""
        for i, call in enumerate(msg.get("tool_calls") or []):
            fn = call["function"]
            args = fn["arguments"] if isinstance(fn["arguments"], str) else json.dumps(fn["arguments"])
            out += ("\n" if i or body else "") + '{"name": ' + json.dumps(fn["name"]) + ', "parameters": ' + args + "}"
        return out

    def forced(self, tool_choice: Any) -> str:
        if tool_choice == "required":
            return '{"name": "'
        if isinstance(tool_choice, dict):
            return '{"name": ' + json.dumps(tool_choice["function"]["name"]) + ', "parameters": '
        return ""

    def parse(self, text: str, id_seed: str = "") -> ParsedMessage:
        """The calls are the run of ``{"name", "parameters"}`` objects, one per line, that ends the text;
        the text before them is ``content`` verbatim (less the newline before the first). Anything else is
        ``content`` unchanged: there is no block syntax to be malformed."""
        for start in [0] + [i + 1 for i, ch in enumerate(text) if ch == "\n"]:
            calls = _json_calls(text[start:]) if text[start:start + 1] == "{" else None
            if calls:
                content = text[:start].removesuffix("\n") if start else ""
                out = [{"id": call_id(id_seed, k), "type": "function",
                        "function": {"name": name, "arguments": args}} for k, (name, args) in enumerate(calls)]
                parsed = ParsedMessage(content or None, None, out)
                back = self.assistant_text(parsed.message())
                if back != text:
                    at = next((i for i, (a, b) in enumerate(zip(back, text)) if a != b), min(len(back), len(text)))
                    parsed.diagnostics.append(not_reproducible(
                        "the call's JSON is not written as {\"name\": …, \"parameters\": …} (key order, spacing or "
                        "extra keys), or the text before it has no newline", at))
                return parsed
        return ParsedMessage(text, None)


def _json_calls(text: str) -> list[tuple[str, str]] | None:
    """``[(name, arguments text)]`` when ``text`` is nothing but call objects joined by newlines, else None.
    The arguments text is the model's own when the object is written ``{"name": N, "parameters": A}``."""
    decoder, calls, pos = json.JSONDecoder(), [], 0
    while pos < len(text):
        try:
            value, end = decoder.raw_decode(text, pos)
        except ValueError:
            return None
        if not (isinstance(value, dict) and isinstance(value.get("name"), str)
                and isinstance(value.get("parameters"), dict)):
            return None
        calls.append((value["name"], _written_arguments(text[pos:end], value)))
        pos = end + 1 if text[end:end + 1] == "\n" and end + 1 < len(text) else end
        if pos == end and end < len(text):
            return None
    return calls


def _written_arguments(raw: str, value: dict) -> str:
    head = '{"name": ' + json.dumps(value["name"]) + ', "parameters": '
    if raw.startswith(head) and raw.endswith("}"):
        try:
            if json.loads(raw[len(head):-1]) == value["parameters"]:
                return raw[len(head):-1]
        except ValueError:
            pass
    return json.dumps(value["parameters"], ensure_ascii=False)


@dataclass(frozen=True)
class Mistral:
    """``[TOOL_CALLS]`` then one JSON list of ``{"name", "arguments", "id"}`` (Mistral's v3+ templates). The
    model writes each call's id: the returned ``tool_calls`` keep it, so the history sent back re-renders the
    ids the model wrote."""

    name: str = "mistral"
    holds: str = "<["
    marker: str = "[TOOL_CALLS]"

    def assistant_text(self, msg: dict) -> str:
        calls = msg.get("tool_calls") or []
        if not calls:
            return msg.get("content") or ""
        items = [_mistral_item(c) for c in calls]
        return (msg.get("content") or "") + self.marker + "[" + ", ".join(items) + "]"

    def forced(self, tool_choice: Any) -> str:
        if tool_choice == "required":
            return self.marker + '[{"name": "'
        if isinstance(tool_choice, dict):
            return self.marker + '[{"name": ' + json.dumps(tool_choice["function"]["name"]) + ', "arguments": '
        return ""

    def parse(self, text: str, id_seed: str = "") -> ParsedMessage:
        at = text.find(self.marker)
        try:
            value = json.loads(text[at + len(self.marker):]) if at >= 0 else None
        except ValueError:
            value = None
        ok = isinstance(value, list) and value and all(
            isinstance(v, dict) and isinstance(v.get("name"), str) and isinstance(v.get("arguments"), dict)
            for v in value)
        if not ok:
            return ParsedMessage(text, None)
        calls = [{"id": v["id"] if isinstance(v.get("id"), str) else call_id(id_seed, k), "type": "function",
                  "function": {"name": v["name"], "arguments": json.dumps(v["arguments"], ensure_ascii=False)}}
                 for k, v in enumerate(value)]
        parsed = ParsedMessage(text[:at] or None, None, calls)
        back = self.assistant_text(parsed.message())
        if back != text:
            first = next((i for i, (a, b) in enumerate(zip(back, text)) if a != b), min(len(back), len(text)))
            parsed.diagnostics.append(not_reproducible(
                "the call list is not written as [{\"name\": …, \"arguments\": …, \"id\": …}] with JSON's "
                "default spacing (or a call has no id, or extra keys)", first))
        return parsed


def _mistral_item(call: dict) -> str:
    fn = call["function"]
    try:
        args = json.dumps(json.loads(fn["arguments"]), ensure_ascii=False)
    except ValueError:
        args = fn["arguments"]
    return ('{"name": ' + json.dumps(fn["name"], ensure_ascii=False) + ', "arguments": ' + args
            + ', "id": ' + json.dumps(call.get("id", ""), ensure_ascii=False) + "}")


FORMATS = {f.name: f for f in (Hermes(), Llama3Json(), Mistral())}


def detect_format(tokenizer) -> str | None:
    """The registered format the template writes calls in (None when none matches)."""
    msg = {"role": "assistant", "content": "", "tool_calls": [PROBE_CALL]}
    try:
        text = render(tokenizer, [{"role": "user", "content": "hi"}, msg], PROBE_TOOLS)
    except Exception:  # noqa: BLE001 - a template that cannot render a call has no format to detect
        return None
    return next((name for name, f in FORMATS.items() if f.assistant_text(msg) in text), None)


def think_glue(tokenizer) -> str:
    """What the template writes between ``</think>`` and the content of an assistant turn with
    ``reasoning_content`` (``\\n\\n`` for trajkit's own template and Qwen3); Hermes text's
    :data:`~trajkit.traces.hermes_text.THINK_GLUE` when the template renders no reasoning."""
    reason, content = "Rq7zreason", "Cq7zcontent"
    msg = {"role": "assistant", "content": content, "reasoning_content": reason}
    try:
        text = render(tokenizer, [{"role": "user", "content": "hi"}, msg], None)
    except Exception:  # noqa: BLE001 - a template that cannot render reasoning has no glue of its own
        return THINK_GLUE
    start = text.find(reason + "\n" + THINK_CLOSE)
    end = text.find(content, start)
    if start < 0 or end < 0:
        return THINK_GLUE
    return text[start + len(reason) + 1 + len(THINK_CLOSE):end]


def _hermes(tokenizer) -> Hermes:
    return replace(FORMATS["hermes"], think_glue=think_glue(tokenizer))


def resolve_format(name: str, tokenizer, mode: str):
    """The format for ``--tool-call-format NAME`` (``auto``: :func:`detect_format`) and the rendering mode;
    returns ``(format, note)``, the note saying how it was chosen."""
    if mode == "inline":
        if name not in ("auto", "hermes"):
            raise ConfigError(f"--tool-call-format {name}: this chat template renders content only, so the "
                              "gateway writes tool calls as Hermes text; use --tool-call-format hermes (or auto)")
        return FORMATS["hermes"], "Hermes text written inline (content-only template)"
    if name != "auto":
        return (_hermes(tokenizer) if name == "hermes" else FORMATS[name]), "set by --tool-call-format"
    found = detect_format(tokenizer)
    if found is None:
        return _hermes(tokenizer), ("the template's call format is none trajkit reads: calls parsed as Hermes "
                                    "<tool_call> blocks (set --tool-call-format)")
    return (_hermes(tokenizer) if found == "hermes" else FORMATS[found]), "detected from the chat template"
