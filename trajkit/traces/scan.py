"""The stats fast path: one Hermes row's :class:`~trajkit.traces.metrics.TraceMetrics` straight from its parsed
JSON, without building the trace model.

Why: on a 14,701-row kimi-style corpus, ``traces stats`` spent ~80% of its time beyond the JSON parse in
building ``Message``/``Segment``/``ToolCall``/``ToolResponse`` objects that the counts read once and drop.
:func:`row_metrics` computes the same metrics in one pass over the row's messages with the same scanning
rules (:mod:`trajkit.traces.blocks`), the same JSON readers (:mod:`trajkit.traces.jsonvalue`), the same
harness rule (:mod:`trajkit.traces.harness`) and the same argument verdicts (:mod:`trajkit.traces.tools`);
the scan of the messages is :mod:`trajkit.traces.scan_turns`.

A row comes either from :func:`~trajkit.traces.scan_typed.decode_row` (msgspec structs that keep the system
prompt and the tools field as raw JSON: :func:`typed_row_metrics`) or, for a row those structs decline, from
orjson's dict (:func:`row_metrics`); both feed the same scan of ``(role, text)`` messages.

It takes only the rows the reference would read without a single diagnostic: a ``conversations`` list of
``{from, value}`` messages with known roles and string values, a ``tools`` string that parses into usable
schemas, every think/call/response block in place and closed, every call body a well-formed call, and no
value nested below the top level but the messages (so the reader's depth check has nothing to find). For
any other row it returns None and the caller takes the reference path (``parse_raw`` + ``trace_metrics``),
so those rows are the reference's by construction; the rows it takes are tested equal to the reference,
metric for metric, on the bundled samples, the real fixtures, a messy corpus and generated rows
(``tests/traces/test_scan.py``).
"""
from __future__ import annotations

from typing import Any, Callable

import orjson

from trajkit.traces.aggregate import CorpusStats, GroupKey, group_key
from trajkit.traces.load import decode_line, parse_raw
from trajkit.traces.metrics import TraceMetrics, trace_metrics
from trajkit.traces.model import HERMES_ROLE
from trajkit.traces.scan_turns import Checks, scan_messages
from trajkit.traces.scan_typed import TypedRow, decode_row, tools_text
from trajkit.traces.tools import ToolTable, arguments_valid, schema_problems, tools_from_json

_PLAIN = (str, int, float, bool, type(None))
_ROLE = HERMES_ROLE


def row_metrics(row: Any, source: str) -> tuple[GroupKey, TraceMetrics, list[str]] | None:
    """``(group key, metrics, diagnostic codes)`` of one parsed Hermes row, or None when the reference path
    must read it."""
    if type(row) is not dict:
        return None
    conv = row.get("conversations")
    raw_tools = row.get("tools")
    if type(conv) is not list or type(raw_tools) is not str or not raw_tools:
        return None
    for value in row.values():  # only the messages may nest: then the depth check has nothing to find
        if value is not conv and not isinstance(value, _PLAIN):
            return None
    msgs = _messages(conv)
    checks = _tool_checks(raw_tools) if msgs is not None else None
    if checks is None:
        return None
    return _metrics(msgs, checks, group_key(row.get("category"), row.get("subcategory"), source))


def typed_row_metrics(row: TypedRow, source: str) -> tuple[GroupKey, TraceMetrics, list[str]] | None:
    """:func:`row_metrics` of a row decoded by :func:`trajkit.traces.scan_typed.decode_row` (which has
    checked what :func:`row_metrics` checks before its tools)."""
    checks = _raw_tool_checks(row.tools)
    if checks is None:
        return None
    return _metrics(row.messages, checks, group_key(row.category, row.subcategory, source))


def _metrics(msgs: list[tuple[str, Any]], checks: Checks, key: GroupKey
             ) -> tuple[GroupKey, TraceMetrics, list[str]] | None:
    diags: list[str] = []
    tm = scan_messages(msgs, checks, diags)
    return None if tm is None else (key, tm, diags)


_MAX_TABLES = 64


class _TextCache:
    """Values keyed by long texts (str or bytes) that rows repeat. The key is the text's length and ends,
    confirmed by ``==``: hashing a fresh 25 kB string costs ~30 us, half the row's JSON parse, where comparing
    it costs ~2 us. Cleared when it holds :data:`_MAX_TABLES` fingerprints."""

    def __init__(self) -> None:
        self.entries: dict[tuple[int, Any, Any], list[tuple[Any, Any]]] = {}

    def get(self, text: str | bytes, default: Any = None) -> Any:
        for seen, value in self.entries.get((len(text), text[:32], text[-32:]), ()):
            if seen == text:
                return value
        return default

    def put(self, text: str | bytes, value: Any) -> None:
        if len(self.entries) >= _MAX_TABLES:
            self.entries.clear()
        self.entries.setdefault((len(text), text[:32], text[-32:]), []).append((text, value))


_TABLES = _TextCache()  # tools text -> checks
_RAW_TABLES = _TextCache()  # tools field's raw JSON -> checks
_MISSING = object()


def _tool_checks(text: str) -> Checks | None:
    """``{tool name: arguments-valid test}`` for a row's tools text; None when the reference would note a
    problem (unreadable tools, a schema that is not JSON Schema). Cached per text, which rows repeat."""
    checks = _TABLES.get(text, _MISSING)
    if checks is not _MISSING:
        return checks
    try:
        table: ToolTable | None = tools_from_json(text)
    except (ValueError, orjson.JSONDecodeError):
        table = None
    checks = None
    if table is not None and not schema_problems(table):
        checks = {name: _valid_test(spec["parameters"]) for name, spec in table.items()}
    _TABLES.put(text, checks)
    return checks


def _raw_tool_checks(raw: bytes) -> Checks | None:
    """:func:`_tool_checks` of the tools field given as its raw JSON string, cached per raw text, so a
    repeated tools field is never decoded."""
    checks = _RAW_TABLES.get(raw, _MISSING)
    if checks is _MISSING:
        checks = _tool_checks(tools_text(raw))
        _RAW_TABLES.put(raw, checks)
    return checks


def _valid_test(schema: dict[str, Any]) -> Callable[[dict[str, Any]], bool]:
    """:func:`~trajkit.traces.tools.arguments_valid` for one schema: its certified check itself, when exact."""
    from trajkit.traces.tools import _validator

    found = _validator(schema)  # (usable: the caller checked schema_problems)
    if found.exact:
        return found.check
    return lambda args: arguments_valid(args, schema)


def _messages(conv: list[Any]) -> list[tuple[str, str]] | None:
    """(role, text) of every message when all are ``{from, value}`` objects with a known role and a string
    value (other keys holding plain values only), else None."""
    out = []
    for item in conv:
        if type(item) is not dict:
            return None
        source, text = item.get("from"), item.get("value")
        role = _ROLE.get(source) if type(source) is str else None
        if role is None or type(text) is not str:
            return None
        if len(item) != 2 and not all(isinstance(v, _PLAIN) for v in item.values()):
            return None
        out.append((role, text))
    return out


def fold_line(stats: CorpusStats, path: str, lineno: int, line: bytes, source: str) -> None:
    """Fold one JSON Lines row into ``stats``: the fast path when it can take the row (decoded by
    :func:`~trajkit.traces.scan_typed.decode_row`, or else by orjson), else the reference (``parse_raw`` +
    ``trace_metrics``). Raises the reference's :class:`~trajkit.errors.InputError` for a row that cannot be
    read (nothing is folded then)."""
    typed = decode_row(line)
    if typed is not None:
        found = typed_row_metrics(typed, source)  # None: the orjson path would decline the row too
    else:
        try:
            row = orjson.loads(line)
        except orjson.JSONDecodeError:
            row = None  # the reference reader words the error (or reads a number orjson refuses)
        found = row_metrics(row, source) if row is not None else None
    if found is not None:
        stats.add_metrics(*found)
        return
    trace = parse_raw(decode_line(path, lineno, line), source)
    stats.add(trace, trace_metrics(trace))
