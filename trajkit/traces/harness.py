"""Hermes Agent's tool-result failure rule, and the result fields trajkit counts beside it.

The batch runner of Hermes Agent marks a tool result as failed when it is a JSON object with a non-null
``error`` or ``success: false``, or a non-JSON string that is empty or starts with ``error:``. A
non-zero ``exit_code`` is *not* a failure (a ``grep`` with no match exits 1); we count it separately.
The tutorial this replaces flagged any result containing the substring "error", which marks every
terminal result (they all carry ``"error": null``).

Deviation: the prefix test is case-insensitive and ignores leading whitespace ("Error: ..." is common).
"""
from __future__ import annotations

from typing import Any

from trajkit.traces import jsonvalue

TRUNCATION_MARK = "[OUTPUT TRUNCATED"


def decode_json_text(value: Any) -> tuple[Any, bool]:
    """(parsed, True) when ``value`` is a string holding a JSON object/array, else (value, False).

    Parsed by :func:`trajkit.traces.jsonvalue.loads_fast` (bounded depth)."""
    if isinstance(value, str):
        first = value[:1]
        if first.isspace():  # (strip a copy only when there is something to strip)
            first = value.lstrip()[:1]
        if first in ("{", "["):
            try:
                return jsonvalue.loads_fast(value), True
            except ValueError:
                pass
    return value, False


def judge(result: Any, *, decoded: bool = False) -> tuple[bool, int | None, bool]:
    """(failed, exit code, truncated) of one tool result (already taken out of its response envelope):
    the harness rule, the integer ``exit_code`` (bools are not exit codes) and the truncation marker.

    ``decoded=True`` says a JSON-in-a-string result was already decoded by the caller."""
    if not decoded and isinstance(result, str):  # (decode_json_text reads strings only)
        result, _ = decode_json_text(result)
    if isinstance(result, dict):
        failed = result.get("error") is not None or result.get("success") is False
        code = result.get("exit_code")
        if not isinstance(code, int) or isinstance(code, bool):
            code = None
        for v in result.values():  # (a loop, not any() over a generator: this runs once per tool response)
            if isinstance(v, str) and TRUNCATION_MARK in v:
                return failed, code, True
        return failed, code, False
    if isinstance(result, str):
        head = result[:64].lstrip()[:6].lower()
        return head == "error:" or not result.strip(), None, TRUNCATION_MARK in result
    return result is None, None, False


def result_failed(result: Any, *, decoded: bool = False) -> bool:
    """The harness rule for one tool result (:func:`judge`)."""
    return judge(result, decoded=decoded)[0]


def result_exit_code(result: Any, *, decoded: bool = False) -> int | None:
    """The integer ``exit_code`` of a result object, else None (:func:`judge`)."""
    return judge(result, decoded=decoded)[1]


def result_truncated(result: Any) -> bool:
    """Whether the result carries the harness's ``[OUTPUT TRUNCATED - N chars omitted …]`` marker
    (:func:`judge`; a string result is not decoded first)."""
    return judge(result, decoded=True)[2]
