"""The stats fast path: one Hermes row's :class:`~trajkit.traces.metrics.TraceMetrics` straight from its parsed
JSON, without building the trace model.

Why: on a 14,701-row kimi-style corpus, ``traces stats`` spent ~80% of its time beyond the JSON parse in
building ``Message``/``Segment``/``ToolCall``/``ToolResponse`` objects that the counts read once and drop.
:func:`row_metrics` computes the same metrics in one pass over the row's messages with the same scanning
rules (:mod:`trajkit.traces.blocks`), the same JSON readers (:mod:`trajkit.traces.jsonvalue`), the same
harness rule (:mod:`trajkit.traces.harness`) and the same argument verdicts (:mod:`trajkit.traces.tools`).

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

from trajkit.traces import jsonvalue
from trajkit.traces.aggregate import CorpusStats, GroupKey, group_key
from trajkit.traces.blocks import (CALL_CLOSE, CALL_OPEN, RESP_CLOSE, RESP_OPEN, THINK_CLOSE, THINK_OPEN,
                                   parse_call_body, read_envelope)
from trajkit.traces.harness import judge
from trajkit.traces.hermes import CONTEXT_SUMMARY_PREFIX
from trajkit.traces.load import decode_line, parse_raw
from trajkit.traces.metrics import TraceMetrics, action_key, trace_metrics
from trajkit.traces.model import HERMES_ROLE
from trajkit.traces.scan_typed import TypedRow, decode_call, decode_row, tools_text
from trajkit.traces.tools import ToolTable, schema_problems, tools_from_json
from trajkit.traces.tools import _validator as schema_validator

Call = tuple[Any, Any, Any]  # (name, arguments, None) or, for a malformed call, (name or None, None, stripped body)
Response = tuple[bool, bool, bool]  # failed, non-zero exit code, truncated

_PLAIN = (str, int, float, bool, type(None))
_ROLE = HERMES_ROLE
_CALL_BODY, _RESP_BODY = len(CALL_OPEN), len(RESP_OPEN)


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
    tm = _scan(msgs, checks, diags)
    return None if tm is None else (key, tm, diags)


Checks = dict[str, Callable[[dict[str, Any]], bool]]
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
    from trajkit.traces.tools import argument_problems

    validator, certainly_valid = schema_validator(schema)
    return lambda args: certainly_valid(args) or not argument_problems(args, schema)


def _scan(msgs: list[tuple[str, Any]], checks: Checks, diags: list[str]) -> TraceMetrics | None:
    """The metrics of one row's ``(role, text)`` messages, or None at the first piece the reference would
    record a diagnostic for (other than an unclosed or malformed call)."""
    tm = TraceMetrics()
    c = {"messages": len(msgs), "assistant_turns": 0, "tool_calls": 0, "parallel_turns": 0, "think_words": 0,
         "unknown_tool_calls": 0, "invalid_argument_calls": 0, "unanswered_tool_calls": 0,
         "orphan_tool_responses": 0, "consecutive_assistant_turns": 0, "tool_responses": 0,
         "failed_tool_responses": 0, "failed_turns": 0, "nonzero_exit_responses": 0, "truncated_responses": 0,
         "retry_loops": 0, "recoveries": 0, "malformed_tool_calls": 0}
    seq = _Sequences()
    prev_role = None
    i, n = 0, len(msgs)
    while i < n:
        role, text = msgs[i]
        if role == "assistant":
            c["consecutive_assistant_turns"] += prev_role == "assistant"
            turn = _assistant(text, diags)
            if turn is None:
                return None
            responses: list[Response] = []
            prev_role = role
            if i + 1 < n and msgs[i + 1][0] == "tool":
                i += 1
                found = _tool_message(msgs[i][1])
                if found is None:
                    return None
                responses, prev_role = found, "tool"
            _count_turn(c, tm, turn[0], turn[1], responses, checks)
            seq.add(c, turn[1], responses)
        elif role == "tool":
            responses = _tool_message(text)
            if responses is None:
                return None
            c["orphan_tool_responses"] += len(responses)
            if responses:
                _count_responses(c, tm, (), responses)
            prev_role = role
        else:
            if role == "user" and text.startswith(CONTEXT_SUMMARY_PREFIX):
                tm.context_summary = True
            prev_role = role
        i += 1
    dict.update(tm.counts, c)  # (Counter(c) pays an isinstance(Mapping) check per row)
    return tm


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


def _assistant(text: str, diags: list[str]) -> tuple[int, list[Call]] | None:
    """(think words, calls) of an assistant text whose think block is in place, else None; the codes of the
    call diagnostics the reference records (unclosed or malformed calls) go to ``diags``. The scan repeats
    :func:`~trajkit.traces.blocks.split_blocks`' and the think span's rules inline: calling them (with their
    span lists and diagnostic records) made ``traces stats`` 8% slower; the equality tests hold the two
    copies together."""
    open_at, close_at, first_call = text.find(THINK_OPEN), text.find(THINK_CLOSE), text.find(CALL_OPEN)
    words, cursor = 0, 0
    if open_at >= 0 and (first_call < 0 or open_at < first_call):
        close_at = text.find(THINK_CLOSE, open_at + len(THINK_OPEN))
        if close_at < 0:
            return None  # unclosed_think
        words = len(text[open_at + len(THINK_OPEN):close_at].split())
        cursor = close_at + len(THINK_CLOSE)
    elif close_at >= 0 and (first_call < 0 or close_at < first_call):
        return None  # missing_think_open
    calls: list[Call] = []
    pos = text.find(CALL_OPEN, cursor)
    while pos >= 0:
        close = text.find(CALL_CLOSE, pos + _CALL_BODY)
        nxt = text.find(CALL_OPEN, pos + _CALL_BODY)
        if close >= 0 and (nxt < 0 or close < nxt):
            body = text[pos + _CALL_BODY:close]
        else:
            body = text[pos + _CALL_BODY:nxt if nxt >= 0 else len(text)]
            diags.append("unclosed_tool_call")
        calls.append(_call(body, diags))
        pos = nxt
    return words, calls


def _call(body: str, diags: list[str]) -> Call:
    """``(name, arguments, None)`` of a well-formed call (:func:`~trajkit.traces.scan_typed.decode_call`, else
    the exact reader); ``(recovered name, None, stripped body)`` of a malformed one (read by the reference,
    :func:`~trajkit.traces.blocks.parse_call_body`)."""
    found = decode_call(body)
    if found is not None:
        return found[0], found[1], None
    try:
        value = jsonvalue.loads(body)
    except ValueError:
        value = None
    if type(value) is dict:
        name, args = value.get("name"), value.get("arguments")
        if type(name) is str and isinstance(args, dict):
            return name, args, None
    diags.append("malformed_tool_call")
    call = parse_call_body(body)
    return call.name, None, call.body.strip()


def _tool_message(text: str) -> list[Response] | None:
    """The responses of a tool message whose blocks are all closed, else None."""
    responses: list[Response] = []
    pos = text.find(RESP_OPEN)
    while pos >= 0:
        close = text.find(RESP_CLOSE, pos + _RESP_BODY)
        nxt = text.find(RESP_OPEN, pos + _RESP_BODY)
        if close < 0 or 0 <= nxt < close:
            return None  # unclosed_tool_response
        responses.append(_response(text[pos + _RESP_BODY:close]))
        pos = nxt
    if not responses and text.strip():
        return None  # bare_tool_message
    return responses


def _response(body: str) -> Response:
    """:func:`trajkit.traces.blocks.parse_response_body`'s verdicts, without the record."""
    failed, exit_code, truncated = judge(read_envelope(body)[1])
    return failed, bool(exit_code), truncated


def _count_turn(c: dict[str, int], tm: TraceMetrics, words: int, calls: list[Call], responses: list[Response],
                checks: Checks) -> None:
    c["assistant_turns"] += 1
    c["think_words"] += words
    tm.think_words_per_turn.append(words)
    n = len(calls)
    if n:
        c["tool_calls"] += n
        c["parallel_turns"] += n >= 2
        tm.parallel_widths.append(n)
        counts = tm.tool_call_counts
        for name, args, malformed in calls:
            if malformed is not None:
                c["malformed_tool_calls"] += 1
                continue
            counts[name] += 1
            if checks:
                valid = checks.get(name)
                if valid is None:
                    c["unknown_tool_calls"] += 1
                elif not valid(args):
                    c["invalid_argument_calls"] += 1
    diff = n - len(responses)
    if diff > 0:
        c["unanswered_tool_calls"] += diff
    else:
        c["orphan_tool_responses"] -= diff
    if responses:
        _count_responses(c, tm, calls, responses)


def _count_responses(c: dict[str, int], tm: TraceMetrics, calls, responses: list[Response]) -> None:
    failed = 0
    for k, (fail, nonzero, truncated) in enumerate(responses):
        if fail:
            failed += 1
            if k < len(calls) and calls[k][0]:
                tm.tool_failures[calls[k][0]] += 1
        c["nonzero_exit_responses"] += nonzero
        c["truncated_responses"] += truncated
    c["tool_responses"] += len(responses)
    c["failed_tool_responses"] += failed
    c["failed_turns"] += failed > 0


def _same_action(a: Call, b: Call) -> bool:
    """Equality of :func:`trajkit.traces.metrics.action_key` (name + canonical arguments; a malformed call is its
    stripped body). Python's ``==`` on two well-formed calls is coarser (``1 == 1.0 == True``), so it rules
    pairs out cheaply and the canonical JSON decides the rest."""
    if a[2] is None and b[2] is None:
        return (a[0] == b[0] and a[1] == b[1]
                and jsonvalue.dumps(a[1], sort_keys=True) == jsonvalue.dumps(b[1], sort_keys=True))
    return action_key(*a) == action_key(*b)


class _Sequences:
    """Retry loops and recoveries (:func:`trajkit.traces.metrics._count_sequences`) over well-formed calls."""

    __slots__ = ("pending", "prev")

    def __init__(self) -> None:
        self.pending: list[Call] = []  # failed calls of earlier turns, not yet recovered
        self.prev: Call | None = None

    def add(self, c: dict[str, int], calls: list[Call], responses: list[Response]) -> None:
        successes, failures = [], []
        for k, call in enumerate(calls):
            ok = call[2] is None
            if ok:
                if self.prev is not None and _same_action(call, self.prev):
                    c["retry_loops"] += 1
                self.prev = call
            if k < len(responses):
                if responses[k][0]:
                    failures.append(call)
                elif ok:  # a malformed call is no successful action, whatever came back
                    successes.append(call)
        if self.pending and successes:
            still = [f for f in self.pending if all(_same_action(s, f) for s in successes)]
            c["recoveries"] += len(self.pending) - len(still)
            self.pending = still
        self.pending.extend(failures)


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
