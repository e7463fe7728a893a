"""The source check of the token export: trained text is compared with the SOURCE trace, not with the
template's own render.

A mask check alone (the unmasked tokens decode to the rendered assistant turns) passes while everything
is lost: with a template that drops ``tool_calls`` and ``reasoning_content``, a tool-calling turn renders
as an empty end-of-turn and the mask check still agrees with it. So for every trained assistant turn we
also require, in that turn's trained text:

- its reasoning (when the think policy trains it), compared after collapsing whitespace;
- its narration (the text outside think and tool-call blocks), likewise;
- each well-formed tool call: some JSON object in the trained text with the call's ``name`` and
  ``arguments`` JSON-equal to the source's (``arguments`` may be an object or a JSON string); each
  malformed call's raw body verbatim;
- no role header of another message (``user``/``system``/``tool`` glue as the template writes it).

:class:`SourceTurn` is what the source says one assistant turn must contain; :func:`check_turn` returns
what it misses (empty = pass) and the counts the export summary reports.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from trajkit.traces.model import Message

_SPACE = re.compile(r"\s+")


@dataclass
class SourceTurn:
    """What one source assistant turn holds. ``calls``: well-formed ``(name, arguments)``;
    ``raw_calls``: bodies of malformed calls."""

    think: str | None
    narration: str
    calls: list[tuple[str, Any]] = field(default_factory=list)
    raw_calls: list[str] = field(default_factory=list)

    @classmethod
    def of(cls, msg: Message) -> "SourceTurn":
        return cls(msg.think, msg.narration, [(c.name, c.arguments) for c in msg.tool_calls if c.ok],
                   [c.body.strip() for c in msg.tool_calls if not c.ok and c.body.strip()])

    @property
    def think_words(self) -> int:
        return len(self.think.split()) if self.think else 0

    @property
    def num_calls(self) -> int:
        return len(self.calls) + len(self.raw_calls)


@dataclass
class TurnResult:
    missing: list[str]
    calls_found: int
    think_words_found: int


def _norm(text: str) -> str:
    return _SPACE.sub(" ", text).strip()


def json_objects(text: str) -> list[Any]:
    """Every JSON value that starts at a ``{`` of ``text`` and parses (nested ones included)."""
    decoder, out = json.JSONDecoder(), []
    for m in re.finditer(r"\{", text):
        try:
            value, _ = decoder.raw_decode(text, m.start())
        except ValueError:
            continue
        out.append(value)
    return out


def _call_present(name: str, arguments: Any, objects: list[Any]) -> bool:
    for obj in objects:
        if not isinstance(obj, dict) or obj.get("name") != name:
            continue
        args = obj.get("arguments", obj.get("parameters"))
        if isinstance(args, str):
            try:
                args = json.loads(args)
            except ValueError:
                continue
        if args == arguments:
            return True
    return False


def check_turn(trained: str, source: SourceTurn, reasoning_trained: bool,
               foreign_headers: tuple[str, ...] = ()) -> TurnResult:
    """What of ``source`` is missing from the trained text of its turn (see the module docstring)."""
    missing = []
    flat = _norm(trained)
    think_found = 0
    if reasoning_trained and source.think:
        if _norm(source.think) in flat:
            think_found = source.think_words
        else:
            missing.append(f"its reasoning ({source.think_words} words)")
    if source.narration and _norm(source.narration) not in flat:
        missing.append("its narration")
    objects = json_objects(trained) if source.calls else []
    found = 0
    for name, arguments in source.calls:
        if _call_present(name, arguments, objects):
            found += 1
        else:
            missing.append(f"tool call {name!r} with its arguments")
    for body in source.raw_calls:
        if body in trained:
            found += 1
        else:
            missing.append("a malformed tool call's raw text")
    for header in foreign_headers:
        if header and header in trained:
            missing.append(f"(trains another message's header {header!r})")
    return TurnResult(missing, found, think_found)


def role_headers(tokenizer, roles: tuple[str, ...] = ("user", "system", "tool")) -> tuple[str, ...]:
    """The text a template writes before a message of each role (ChatML: ``<|im_start|>user\\n``), read
    off renders of one-message conversations; roles the template cannot render alone are left out."""
    marker, out = "rolemarker_z9", []
    eos = getattr(tokenizer, "eos_token", None) or ""
    for role in roles:
        try:
            text = tokenizer.apply_chat_template([{"role": role, "content": marker}], tokenize=False)
        except Exception:  # noqa: BLE001 - a template may refuse a lone system or tool message
            continue
        before = text.split(marker, 1)[0]
        head = before.rsplit(eos, 1)[-1].lstrip("\n") if eos else before
        if head.strip():
            out.append(head)
    return tuple(out)
