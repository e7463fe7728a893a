"""Typed decoding of a Hermes JSON Lines row for the stats fast path: msgspec reads the line into structs that
declare only what the statistics read, and keeps the rest as unparsed JSON.

Why: a Kimi-style row is ~58 kB, and two pieces make most of it that the statistics never read as text: the
system prompt (~26 kB; it only has to be a string) and the ``tools`` JSON text (~26 kB; it is the key of
:mod:`trajkit.traces.scan`'s per-row schema cache, and rows repeat it). ``msgspec.json.Decoder(type=_Row)``
keeps both as :class:`msgspec.Raw` (their JSON bytes, syntax checked, no ``str`` built) and skips any field
the structs do not declare; it decodes a row in ~21 us where orjson builds the whole dict in ~31 us.

What it takes: an object whose keys are among ``conversations``, ``tools``, ``category``, ``subcategory``,
``id`` and ``task``; every message exactly ``{from, value}`` with a Hermes role (the tag) and a string value;
``tools`` a non-empty JSON string; ``category``/``subcategory`` a string or null; ``id``/``task`` a JSON
scalar. Then nothing nests below the messages (the reference's depth check has nothing to find), and the row
is what :func:`trajkit.traces.scan.row_metrics` would accept at its first checks. Anything else (an unknown
key, a message with another key, a nested ``id``, invalid JSON) makes :func:`decode_row` return None and the
caller takes the orjson path, so such rows are read as before.

Call bodies get the same treatment (:func:`decode_call`): a struct of a string ``name`` and an object
``arguments`` whose values may not be floats or integers beyond 64 bits, the values that
:func:`trajkit.traces.jsonvalue.loads` may read differently from a plain parse; any other body goes to that
reader. It costs ~0.4 us a body where the exact reader costs ~1.5 us.

One gap is closed by hand: msgspec checks the UTF-8 of the strings it decodes, not of those it keeps raw,
where orjson refuses invalid UTF-8 anywhere in the line. An ASCII line (``bytes.isascii``, ~3 us) has none;
on any other line the raw strings are decoded once to check.
"""
from __future__ import annotations

from typing import Annotated, Any, ClassVar, Optional, Union

import msgspec

from trajkit.traces.jsonvalue import MAX_DEPTH, too_short_to_nest

Raw = msgspec.Raw
_NULL = Raw(b"null")


class _System(msgspec.Struct, tag_field="from", tag="system", forbid_unknown_fields=True):
    value: Raw  # never read by the statistics: kept as its JSON bytes
    role: ClassVar[str] = "system"


class _Human(msgspec.Struct, tag_field="from", tag="human", forbid_unknown_fields=True):
    value: str  # read: a context summary starts with a known prefix
    role: ClassVar[str] = "user"


class _Gpt(msgspec.Struct, tag_field="from", tag="gpt", forbid_unknown_fields=True):
    value: str
    role: ClassVar[str] = "assistant"


class _Tool(msgspec.Struct, tag_field="from", tag="tool", forbid_unknown_fields=True):
    value: str
    role: ClassVar[str] = "tool"


class _Row(msgspec.Struct, forbid_unknown_fields=True):
    conversations: list[Union[_System, _Human, _Gpt, _Tool]]
    tools: Raw
    category: Optional[str] = None
    subcategory: Optional[str] = None
    id: Raw = _NULL
    task: Raw = _NULL


_DECODER = msgspec.json.Decoder(_Row)
_QUOTE, _OPENERS = ord('"'), (ord("["), ord("{"))
_STRING = msgspec.json.Decoder(str)


class TypedRow(msgspec.Struct):
    """What the statistics read of one row: ``(role, text)`` per message (a system message's text is its raw
    JSON), the ``tools`` field's raw JSON string (quotes included), category and subcategory."""

    messages: list
    tools: bytes
    category: Optional[str]
    subcategory: Optional[str]


def decode_row(line: bytes) -> TypedRow | None:
    """The typed view of one JSON Lines row, or None when the orjson path must read it."""
    try:
        row = _DECODER.decode(line)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None
    tools = bytes(row.tools)
    if tools[:1] != b'"' or len(tools) <= 2:  # not a string, or the empty string
        return None
    if _nests(row.id) or _nests(row.task):
        return None
    conv = row.conversations
    for message in conv:
        if message.role == "system" and memoryview(message.value)[0] != _QUOTE:  # (no copy of the prompt)
            return None
    if not line.isascii() and not _raw_text_is_utf8(row):
        return None
    return TypedRow([(m.role, m.value) for m in conv], tools, row.category, row.subcategory)


class _Float(Exception):
    """A float in an untyped place of a call body: the exact reader decides those."""


def _refuse_float(text: str) -> Any:
    raise _Float(text)


_Int64 = Annotated[int, msgspec.Meta(ge=-(1 << 63), le=(1 << 63) - 1)]


class _CallBody(msgspec.Struct):
    name: str
    arguments: dict[str, Union[str, _Int64, bool, None, list, dict]]  # other keys are skipped


_CALL = msgspec.json.Decoder(_CallBody, float_hook=_refuse_float)
_CALL_ERRORS = (msgspec.DecodeError, msgspec.ValidationError, _Float, RecursionError)


def decode_call(body: str) -> tuple[str, dict[str, Any]] | None:
    """``(name, arguments)`` of a well-formed call body, equal to what :func:`trajkit.traces.jsonvalue.loads`
    reads, or None when that reader must decide (a body that is no such object, holds a float or a 64-bit
    overflow, or may nest deeper than :data:`~trajkit.traces.jsonvalue.MAX_DEPTH`: that reader's own test)."""
    if not too_short_to_nest(body) and (len(body) > 16384 or body.count("{") + body.count("[") > MAX_DEPTH):
        return None
    try:
        call = _CALL.decode(body)
    except _CALL_ERRORS:
        return None
    args = call.arguments
    for value in args.values():
        if (type(value) is list or type(value) is dict) and _holds_wide_int(value):
            return None
    return call.name, args


def _holds_wide_int(value: Any) -> bool:
    """Whether an integer outside the signed 64-bit range occurs in ``value`` (without recursion)."""
    stack = [value]
    while stack:
        item = stack.pop()
        if type(item) is dict:
            stack.extend(item.values())
        elif type(item) is list:
            stack.extend(item)
        elif type(item) is int and not -(1 << 63) <= item < (1 << 63):
            return True
    return False


def tools_text(raw: bytes) -> str:
    """The ``tools`` string of :attr:`TypedRow.tools`."""
    return _STRING.decode(raw)


def _nests(raw: Raw) -> bool:
    return raw is not _NULL and memoryview(raw)[0] in _OPENERS


def _raw_text_is_utf8(row: _Row) -> bool:
    pieces = [row.tools, row.id, row.task] + [m.value for m in row.conversations if m.role == "system"]
    try:
        for piece in pieces:
            str(piece, "utf-8")
    except UnicodeDecodeError:
        return False
    return True
