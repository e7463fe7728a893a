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
        stripped = value.lstrip()
        if stripped[:1] in ("{", "["):
            try:
                return jsonvalue.loads_fast(value), True
            except ValueError:
                pass
    return value, False


def result_failed(result: Any, *, decoded: bool = False) -> bool:
    """Apply the harness rule to one tool result (already taken out of its response envelope).

    ``decoded=True`` says a JSON-in-a-string result was already decoded by the caller."""
    if not decoded:
        result, _ = decode_json_text(result)
    if isinstance(result, dict):
        return result.get("error") is not None or result.get("success") is False
    if isinstance(result, str):
        head = result[:64].lstrip()[:6].lower()
        return head == "error:" or not result.strip()
    return result is None


def result_exit_code(result: Any, *, decoded: bool = False) -> int | None:
    """The integer ``exit_code`` of a result object (bools are not exit codes), else None."""
    if not decoded:
        result, _ = decode_json_text(result)
    if isinstance(result, dict):
        code = result.get("exit_code")
        if isinstance(code, int) and not isinstance(code, bool):
            return code
    return None


def result_truncated(result: Any) -> bool:
    """Whether the result carries the harness's ``[OUTPUT TRUNCATED - N chars omitted …]`` marker."""
    if isinstance(result, str):
        return TRUNCATION_MARK in result
    if isinstance(result, dict):
        return any(isinstance(v, str) and TRUNCATION_MARK in v for v in result.values())
    return False
