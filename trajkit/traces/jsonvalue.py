"""JSON that keeps numbers exactly and refuses what the writers cannot hold again.

orjson (the fast path) reads an integer beyond 64 bits as a float and refuses ``1e400``; Python's ``json``
turns ``1e400`` into ``inf``. Both would change a tool call's arguments on the way from a trace to an SFT
export. :func:`loads` (used for tool-call bodies) takes orjson's result unless the text holds a number
orjson may not keep (orjson's result holds a float, and the text has 16 or more digits and dots in a row,
or a three-digit exponent, right after ``:``, ``[`` or ``,``); then it parses again with the standard library, keeping

* integers exactly (beyond 64 bits as :class:`BigInt`, an ``int``), and
* floats whose shortest repr is not the number written (``1e400``, ``0.1000000000000000000001``) as
  :class:`ExactFloat`, a ``float`` that remembers its text.

:func:`dumps` writes both back as they were read, so ``dumps(loads(t))`` keeps every number of ``t``.

:func:`loads_fast` (whole rows, tool responses: most of a corpus's bytes, where scanning for such numbers
would double the parse time) trusts orjson and falls back to the exact parse only when orjson refuses a
number (``1e400``); an integer beyond 64 bits there is read as a float, as before. ``traces filter`` copies
rows byte for byte, so it changes nothing either way.

Values nested deeper than :data:`MAX_DEPTH` levels are refused (``ValueError``): the writers (orjson stops
at 254 levels) and the metrics could not handle them. ``NaN``/``Infinity`` literals are not JSON and are
refused too. Every failure is a ``ValueError``.
"""
from __future__ import annotations

import json
import re
from decimal import Decimal, InvalidOperation
from typing import Any

import orjson

MAX_DEPTH = 200
_SHORT = 2 * MAX_DEPTH  # a text at most this long cannot nest deeper than MAX_DEPTH (too_short_to_nest)
_LOSSY = r"(?:^|[:\[,])\s*-?(?:[\d.]{16}|[\d.]+[eE][-+]?\d{3})"
_MAYBE_LOSSY = re.compile(_LOSSY)
_MAYBE_LOSSY_B = re.compile(_LOSSY.encode())


class BigInt(int):
    """An integer outside the 64-bit range (exact; written back digit for digit)."""


class ExactFloat(float):
    """A float whose JSON text is not its shortest repr; ``text`` is what was written."""

    text: str

    def __new__(cls, text: str) -> "ExactFloat":
        obj = super().__new__(cls, float(text))
        obj.text = text
        return obj

    def __reduce__(self):
        return ExactFloat, (self.text,)


def loads_fast(text: str | bytes) -> Any:
    """orjson, with :func:`loads`' exact parse only for numbers orjson refuses; same errors as :func:`loads`."""
    try:
        value = orjson.loads(text)
    except orjson.JSONDecodeError as exc:
        if "number" not in str(exc):
            raise
        return loads(text)
    if len(text) <= _SHORT:  # (too_short_to_nest inline: this runs once per tool response)
        return value
    return _check_depth(text, value)


def _int(text: str) -> int:
    value = int(text)
    return value if -(1 << 63) <= value < (1 << 64) else BigInt(value)


def _float(text: str) -> float:
    value = float(text)
    try:
        same = value == value and abs(value) != float("inf") and Decimal(repr(value)) == Decimal(text)
    except InvalidOperation:
        same = False
    return value if same else ExactFloat(text)


def _constant(text: str):
    raise ValueError(f"{text} is not a JSON number")


def _maybe_lossy(text: str | bytes) -> bool:
    return bool((_MAYBE_LOSSY_B if isinstance(text, (bytes, bytearray)) else _MAYBE_LOSSY).search(text))


def depth(value: Any) -> int:
    """Nesting depth of a JSON value (a scalar is 0, ``[]`` is 1), without recursion."""
    best, stack = 0, [(value, 1)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, dict):
            best = max(best, level)
            stack.extend((v, level + 1) for v in item.values())
        elif isinstance(item, list):
            best = max(best, level)
            stack.extend((v, level + 1) for v in item)
    return best


def deeper_than(value: Any, limit: int) -> bool:
    """Whether ``value`` nests deeper than ``limit`` levels (``depth(value) > limit``); it visits only
    containers, so a row of long strings costs a few steps, not a pass over its text."""
    stack = [(value, 1)] if isinstance(value, (dict, list)) else []
    while stack:
        item, level = stack.pop()
        if level > limit:
            return True
        for child in item.values() if isinstance(item, dict) else item:
            if isinstance(child, (dict, list)):
                stack.append((child, level + 1))
    return False


def _holds(value: Any, kinds: type | tuple[type, ...]) -> bool:
    """Whether a scalar of ``kinds`` occurs anywhere in ``value`` (without recursion)."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
        elif isinstance(item, kinds):
            return True
    return False


def _check_depth(text: str | bytes, value: Any) -> Any:
    # each level opens and closes with its own brackets, so a text of at most 2 * MAX_DEPTH characters, or
    # with few openers, cannot nest too deeply; counting them is the cheaper test on a short text (a tool
    # response), walking the containers on a long one (a row)
    if too_short_to_nest(text):
        return value
    if (len(text) > 16384 or _openers(text) > MAX_DEPTH) and deeper_than(value, MAX_DEPTH):
        raise ValueError(f"JSON nested deeper than {MAX_DEPTH} levels")
    return value


def too_short_to_nest(text: str | bytes) -> bool:
    """Whether ``text`` is too short to hold JSON nested deeper than :data:`MAX_DEPTH` levels (each level
    takes two bracket characters)."""
    return len(text) <= _SHORT


def _openers(text: str | bytes) -> int:
    if isinstance(text, str):
        return text.count("{") + text.count("[")
    return text.count(b"{") + text.count(b"[")


def loads(text: str | bytes) -> Any:
    """Parse JSON keeping every number exactly; ``ValueError`` for invalid or too deeply nested JSON."""
    try:
        value = orjson.loads(text)
    except orjson.JSONDecodeError:
        if not _maybe_lossy(text):
            raise
    else:
        # orjson reads every number it cannot keep (a big integer, a long decimal) as a float
        # (walking the value is cheaper than the regex: ~0.7 us vs ~2.6 us on a 100-character call body)
        if not _holds(value, float) or not _maybe_lossy(text):
            return _check_depth(text, value)
    try:
        value = json.loads(text, parse_int=_int, parse_float=_float, parse_constant=_constant)
    except RecursionError:
        raise ValueError(f"JSON nested deeper than {MAX_DEPTH} levels") from None
    except UnicodeDecodeError as exc:
        raise ValueError(f"not UTF-8 ({exc.reason})") from None
    dumps(value)  # what orjson refuses besides numbers (lone surrogates) is refused here too
    return _check_depth(text, value)


def _default(obj: Any) -> Any:
    if isinstance(obj, BigInt):
        return orjson.Fragment(str(int(obj)).encode())
    if isinstance(obj, ExactFloat):
        return orjson.Fragment(obj.text.encode())
    if isinstance(obj, bool):
        return bool(obj)
    if isinstance(obj, int):
        return int(obj)
    if isinstance(obj, float):
        return float(obj)
    if isinstance(obj, str):
        return str(obj)
    if isinstance(obj, dict):
        return dict(obj)
    if isinstance(obj, (list, tuple)):
        return list(obj)
    if hasattr(obj, "tolist"):  # numpy values from Parquet
        return obj.tolist()
    raise TypeError(f"{type(obj).__name__} is not JSON")


def has_exact(value: Any) -> bool:
    """Whether ``value`` holds a :class:`BigInt` or :class:`ExactFloat` (which only :func:`dumps` writes
    exactly), without recursion."""
    return _holds(value, (BigInt, ExactFloat))


def dumps(value: Any, *, sort_keys: bool = False) -> bytes:
    """Compact JSON of ``value`` with the numbers of :func:`loads` written as read; ``ValueError`` when
    ``value`` cannot be JSON (nested too deeply, lone surrogates, other types)."""
    option = orjson.OPT_PASSTHROUGH_SUBCLASS | orjson.OPT_SERIALIZE_NUMPY | (orjson.OPT_SORT_KEYS if sort_keys else 0)
    try:
        return orjson.dumps(value, option=option, default=_default)
    except TypeError as exc:  # orjson.JSONEncodeError: recursion limit, surrogates, unknown types
        raise ValueError(f"cannot be written as JSON: {exc}") from None
