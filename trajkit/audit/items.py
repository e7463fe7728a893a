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
it has one, else ``FILE:ROW``. Token export rows (``input_ids`` + ``labels``) are read with their
tokenizer: the prompt is the text of their user turns (found as :mod:`trajkit.audit.labels` finds turns;
ChatML tool templates render tool results inside user turns, so those count too), the answer the text of
their trained tokens. Without a tokenizer such a row is refused with the reason.
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


def token_item(row: dict, name: str, tokenizer, openers: dict[str, list[int]]) -> Item:
    """A token export row as an :class:`Item`: user-turn text as the prompt, trained tokens as the answer."""
    from trajkit.audit.labels import IGNORE, turn_spans

    ids, labels = row["input_ids"], row.get("labels") or [IGNORE] * len(row["input_ids"])
    users = [tokenizer.decode(ids[a:b], skip_special_tokens=True) for role, a, b in turn_spans(ids, openers)
             if role == "user"]
    trained = [i for i, lab in zip(ids, labels) if lab != IGNORE]
    return Item(name, "\n".join(users), tokenizer.decode(trained, skip_special_tokens=True))


def row_item(row: Any, where: str, tokenizer=None, openers=None) -> Item:
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
        if tokenizer is None:
            raise InputError("a token export row has no text to compare", field="input_ids",
                             hint="pass --tokenizer DIR (the export's tokenizer), or audit the messages export")
        return token_item(row, name, tokenizer, openers)
    raise InputError("no text field found", hint=f"expected conversations, messages or one of {', '.join(PROMPT_KEYS)}")


def load_items(paths: Iterable[str], tokenizer=None) -> list[Item]:
    """Every row of ``paths`` as an :class:`Item` (``tokenizer``: to read token export rows). A row that
    cannot be read raises (naming FILE:ROW): an audit that silently skipped rows would pass the very rows
    it did not look at."""
    from trajkit.traces.load import iter_raw

    openers = None
    if tokenizer is not None:
        from trajkit.audit.labels import role_openers

        openers = role_openers(tokenizer)
    items = []
    for path in paths:
        for raw in iter_raw(path):
            if raw.error is not None:
                raise InputError(raw.error, path=raw.path, row=raw.row)
            try:
                items.append(row_item(raw.value, f"{raw.path}:{raw.row}", tokenizer, openers))
            except InputError as exc:
                raise InputError(exc.message, path=raw.path, row=raw.row, field=exc.field, hint=exc.hint) from None
    if not items:
        raise InputError("no rows", path=", ".join(paths))
    return items
