"""Data rows as audit items: where a row lives, its prompt text and its answer text.

Read from any file :func:`trajkit.traces.load.iter_raw` reads (JSONL, JSON, Parquet, gzip/xz, ``hf:``).
Each row is recognised by its fields:

=====================================  =====================================  ===============================
row                                     prompt                                  answer
=====================================  =====================================  ===============================
Hermes ShareGPT ``conversations``       the user (``human``) turns              the last assistant (``gpt``) turn
OpenAI chat ``messages``                the user turns                          the last assistant turn
prompt dataset ``prompt`` (text or      the prompt text (user turns of a        ``answer`` / ``solution`` /
messages), ``question``, ``problem``    message list)                           ``completion`` / ``response``
=====================================  =====================================  ===============================

System prompts and tool outputs are left out on purpose: a system prompt shared by every trace is not a
leak, and tool outputs are the environment's text, not the task's. A row's name is its ``id`` field when
it has one, else ``FILE:ROW``. Token exports (``input_ids`` only) carry no text: decode them first
(``trajkit traces export --format openai`` writes the messages form), or the row is refused with the reason.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable

from trajkit.errors import InputError

USER_ROLES = {"user", "human"}
ASSISTANT_ROLES = {"assistant", "gpt"}
PROMPT_KEYS = ("prompt", "question", "problem", "input", "instruction")
ANSWER_KEYS = ("answer", "solution", "completion", "response", "output", "target")


@dataclass(frozen=True)
class Item:
    """One row: ``where`` (``id`` or ``FILE:ROW``), the prompt text and the answer text ("" if none)."""

    where: str
    prompt: str
    answer: str

    @property
    def text(self) -> str:
        return f"{self.prompt}\n{self.answer}" if self.answer else self.prompt


def _content(value: Any) -> str:
    """Message content as text: a string, or the text parts of an OpenAI content list."""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return "\n".join(p.get("text", "") for p in value if isinstance(p, dict) and isinstance(p.get("text"), str))
    return ""


def _turns(messages: list, role_key: str, text_key: str) -> tuple[str, str]:
    users, answer = [], ""
    for m in messages:
        if not isinstance(m, dict):
            continue
        role, text = m.get(role_key), _content(m.get(text_key))
        if role in USER_ROLES:
            users.append(text)
        elif role in ASSISTANT_ROLES and text.strip():
            answer = text
    return "\n".join(users), answer


def row_item(row: Any, where: str) -> Item:
    """The :class:`Item` of one decoded row; :class:`InputError` when no known field holds text."""
    if not isinstance(row, dict):
        raise InputError(f"row is a {type(row).__name__}, expected an object")
    name = str(row["id"]) if isinstance(row.get("id"), (str, int)) and str(row["id"]) else where
    conv = row.get("conversations", row.get("conversations_preview"))
    if isinstance(conv, list):
        return Item(name, *_turns(conv, "from", "value"))
    if isinstance(row.get("messages"), list):
        return Item(name, *_turns(row["messages"], "role", "content"))
    answer = next((_content(row[k]) for k in ANSWER_KEYS if k in row), "")
    for key in PROMPT_KEYS:
        if key in row:
            value = row[key]
            prompt = _turns(value, "role", "content")[0] if isinstance(value, list) else _content(value)
            return Item(name, prompt, answer)
    if "input_ids" in row:
        raise InputError("a token export row has no text to compare", field="input_ids",
                         hint="audit the messages export of the same data (trajkit traces export --format openai)")
    raise InputError("no text field found", hint=f"expected conversations, messages or one of {', '.join(PROMPT_KEYS)}")


def load_items(paths: Iterable[str]) -> list[Item]:
    """Every row of ``paths`` as an :class:`Item`. A row that cannot be read raises (naming FILE:ROW): an
    audit that silently skipped rows would pass the very rows it did not look at."""
    from trajkit.traces.load import iter_raw

    items = []
    for path in paths:
        for raw in iter_raw(path):
            if raw.error is not None:
                raise InputError(raw.error, path=raw.path, row=raw.row)
            try:
                items.append(row_item(raw.value, f"{raw.path}:{raw.row}"))
            except InputError as exc:
                raise InputError(exc.message, path=raw.path, row=raw.row, field=exc.field, hint=exc.hint) from None
    if not items:
        raise InputError("no rows", path=", ".join(paths))
    return items
