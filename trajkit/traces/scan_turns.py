"""The stats fast path's scan of one Hermes row's messages: :class:`~trajkit.traces.metrics.TraceMetrics` from
its ``(role, text)`` pairs, with the reference's rules and readers but none of its objects.

Rules (each the reference's; :mod:`trajkit.traces.scan` says which rows come here):

* an assistant message's think block, then its call blocks: :func:`~trajkit.traces.blocks.split_blocks` and
  the think span's rules, inline (:func:`_assistant`); a body through
  :func:`~trajkit.traces.scan_typed.decode_call`, else the exact reader, else
  :func:`~trajkit.traces.blocks.parse_call_body` for a malformed one (:func:`_call`);
* a tool message's response blocks, each judged by the harness rule on its envelope
  (:func:`~trajkit.traces.blocks.read_envelope`, :func:`~trajkit.traces.harness.judge`);
* the turn pairing of :func:`~trajkit.traces.metrics.tool_turns` (an assistant turn and the tool message right
  after it; a tool message with no assistant turn before it is an orphan turn), and
  :func:`~trajkit.traces.metrics._count_sequences`' retry loops and recoveries (:class:`_Calls`).

Why the shape: a kimi-style row holds ~8 turns, and per turn the work the statistics cannot skip (a think
block's words, a call body and a response envelope decoded) costs ~5 us in C, where the scan of the last
round spent ~14 us a turn in all: a counter dict updated once per count, a function per turn's counts and
another per turn's responses, four calls between the scan and each envelope's orjson parse. Here a row's
counts are local integers and slots, folded into the counter dict once; counts the distributions' lists
already hold (think words, calls per turn) are summed at the end; a think block's words are counted without
building them (:func:`think_words`). The scan went from ~104-113 to ~89-94 us a row (min of 5). The tests
hold it equal to the reference, metric for metric (``tests/traces/test_scan.py``).
"""
from __future__ import annotations

from collections import Counter
from typing import Any, Callable

from trajkit.traces import jsonvalue
from trajkit.traces.blocks import (CALL_CLOSE, CALL_OPEN, RESP_CLOSE, RESP_OPEN, THINK_CLOSE, THINK_OPEN,
                                   parse_call_body, read_envelope)
from trajkit.traces.harness import judge
from trajkit.traces.hermes import CONTEXT_SUMMARY_PREFIX
from trajkit.traces.metrics import TraceMetrics, action_key
from trajkit.traces.scan_typed import decode_call

Call = tuple[Any, Any, Any]  # (name, arguments, None) or, for a malformed call, (name or None, None, stripped body)
Checks = dict[str, Callable[[dict[str, Any]], bool]]

_CALL_BODY, _CALL_TAG, _RESP_BODY, _RESP_TAG = len(CALL_OPEN), len(CALL_CLOSE), len(RESP_OPEN), len(RESP_CLOSE)
_THINK_BODY, _THINK_TAG = len(THINK_OPEN), len(THINK_CLOSE)
_NO_CALLS: tuple[Call, ...] = ()


def scan_messages(msgs: list[tuple[str, Any]], checks: Checks, diags: list[str]) -> TraceMetrics | None:
    """The metrics of one row's ``(role, text)`` messages, or None at the first piece the reference would
    record a diagnostic for (other than an unclosed or malformed call, whose codes go to ``diags``)."""
    tm = TraceMetrics()
    words, widths = tm.think_words_per_turn, tm.parallel_widths
    calls_tally = _Calls(checks, tm)
    responses = _Responses()
    consecutive = orphans = unanswered = 0
    prev_role = None
    i, n = 0, len(msgs)
    while i < n:
        role, text = msgs[i]
        i += 1
        if role == "assistant":
            consecutive += prev_role == "assistant"
            turn = _assistant(text, diags)
            if turn is None:
                return None
            failed: list[bool] = []
            prev_role = role
            if i < n and msgs[i][0] == "tool":
                if responses.read(msgs[i][1], failed) is None:
                    return None
                prev_role = "tool"
                i += 1
            words.append(turn[0])
            calls = turn[1]
            if calls:
                widths.append(len(calls))
                calls_tally.add(calls, failed)
            diff = len(calls) - len(failed)
            if diff > 0:
                unanswered += diff
            else:
                orphans -= diff
        elif role == "tool":
            failed = []
            if responses.read(text, failed) is None:
                return None
            orphans += len(failed)
            prev_role = role
        else:
            if role == "user" and text.startswith(CONTEXT_SUMMARY_PREFIX):
                tm.context_summary = True
            prev_role = role
    dict.update(tm.counts, {  # (Counter(...) pays an isinstance(Mapping) check per row)
        "messages": n, "assistant_turns": len(words), "tool_calls": sum(widths),
        "parallel_turns": len(widths) - widths.count(1), "think_words": sum(words),
        "consecutive_assistant_turns": consecutive, "unanswered_tool_calls": unanswered,
        "orphan_tool_responses": orphans, **responses.counts(), **calls_tally.counts()})
    return tm


def _assistant(text: str, diags: list[str]) -> tuple[int, list[Call] | tuple[Call, ...]] | None:
    """(think words, calls) of an assistant text whose think block is in place, else None; the codes of the
    call diagnostics the reference records (unclosed or malformed calls) go to ``diags``. The scan repeats
    :func:`~trajkit.traces.blocks.split_blocks`' and the think span's rules inline (calling them, with their
    span lists and diagnostic records, made ``traces stats`` 8% slower); the equality tests hold the two copies
    together. "No ``<tool_call>`` before position p" is asked as ``find(CALL_OPEN, 0, p) < 0``: no tag can
    start inside another one here (each has its only ``<`` first), so it is the reference's
    ``first_call < 0 or p < first_call``."""
    open_at = text.find(THINK_OPEN)
    words = cursor = 0
    if open_at >= 0 and text.find(CALL_OPEN, 0, open_at) < 0:
        close_at = text.find(THINK_CLOSE, open_at + _THINK_BODY)
        if close_at < 0:
            return None  # unclosed_think
        words = think_words(text[open_at + _THINK_BODY:close_at])
        cursor = close_at + _THINK_TAG
    else:
        close_at = text.find(THINK_CLOSE)
        if close_at >= 0 and text.find(CALL_OPEN, 0, close_at) < 0:
            return None  # missing_think_open
    pos = text.find(CALL_OPEN, cursor)
    if pos < 0:
        return words, _NO_CALLS
    calls: list[Call] = []
    while pos >= 0:
        start = pos + _CALL_BODY
        close = text.find(CALL_CLOSE, start)
        nxt = text.find(CALL_OPEN, start)
        if close >= 0 and (nxt < 0 or close < nxt):
            calls.append(_call(text[start:close], diags))
        else:
            diags.append("unclosed_tool_call")
            calls.append(_call(text[start:nxt if nxt >= 0 else len(text)], diags))
        pos = nxt
    return words, calls


# each ASCII character as b" " when str.split() splits at it (str.isspace: \t \n \v \f \r \x1c-\x1f and the
# space), else b"x"; bytes 128-255 never occur (the text is checked ASCII first)
_WORD_MAP = bytes(32 if chr(i).isspace() else 120 for i in range(128)) + b"x" * 128


def think_words(text: str) -> int:
    """``len(text.split())`` without building the words: an ASCII text is mapped to ``x`` (word) and space
    bytes, and a word starts at the start of the text or right after a space (``" x"`` occurrences cannot
    overlap); any other text is split. ~1.1 us less per think block of ~300 characters."""
    if not text.isascii():
        return len(text.split())
    marks = text.encode("ascii").translate(_WORD_MAP)
    return marks.count(b" x") + (marks[:1] == b"x")


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


class _Responses:
    """The response counts of one row: every response block, judged by the harness rule on its envelope
    (:func:`trajkit.traces.blocks.parse_response_body`'s verdicts, without the record)."""

    __slots__ = ("total", "failed", "failed_turns", "nonzero", "truncated")

    def __init__(self) -> None:
        self.total = self.failed = self.failed_turns = self.nonzero = self.truncated = 0

    def read(self, text: str, failed: list[bool]) -> list[bool] | None:
        """Count one tool message's responses and append each one's failed flag to ``failed``; None when a
        block is unclosed or the message holds no block but text (the reference's diagnostics), and then
        nothing is counted that matters (the caller drops the row)."""
        pos = text.find(RESP_OPEN)
        if pos < 0:
            return None if text.strip() else failed  # bare_tool_message
        nonzero = truncated = 0
        while pos >= 0:
            start = pos + _RESP_BODY
            close = text.find(RESP_CLOSE, start)
            if close < 0 or text.find(RESP_OPEN, start, close) >= 0:
                return None  # unclosed_tool_response
            fail, code, cut = judge(read_envelope(text[start:close])[1])
            failed.append(fail)
            nonzero += bool(code)
            truncated += cut
            pos = text.find(RESP_OPEN, close + _RESP_TAG)  # (no opener starts inside a closing tag)
        fails = failed.count(True)
        self.total += len(failed)
        self.failed += fails
        self.failed_turns += fails > 0
        self.nonzero += nonzero
        self.truncated += truncated
        return failed

    def counts(self) -> dict[str, int]:
        return {"tool_responses": self.total, "failed_tool_responses": self.failed, "failed_turns": self.failed_turns,
                "nonzero_exit_responses": self.nonzero, "truncated_responses": self.truncated}


def _same_action(a: Call, b: Call) -> bool:
    """Equality of :func:`trajkit.traces.metrics.action_key` (name + canonical arguments; a malformed call is its
    stripped body). Python's ``==`` on two well-formed calls is coarser (``1 == 1.0 == True``), so it rules
    pairs out cheaply and the canonical JSON decides the rest."""
    if a[2] is None and b[2] is None:
        return (a[0] == b[0] and a[1] == b[1]
                and jsonvalue.dumps(a[1], sort_keys=True) == jsonvalue.dumps(b[1], sort_keys=True))
    return action_key(*a) == action_key(*b)


class _Calls:
    """The call counts of one row, turn by turn: malformed, per tool, unknown, invalid arguments, failures per
    tool, and :func:`trajkit.traces.metrics._count_sequences`' retry loops and recoveries."""

    __slots__ = ("checks", "names", "failures", "malformed", "unknown", "invalid", "retries", "recoveries",
                 "pending", "prev")

    def __init__(self, checks: Checks, tm: TraceMetrics) -> None:
        self.checks = checks
        self.names: Counter = tm.tool_call_counts
        self.failures: Counter = tm.tool_failures
        self.malformed = self.unknown = self.invalid = self.retries = self.recoveries = 0
        self.pending: list[Call] = []  # failed calls of earlier turns, not yet recovered
        self.prev: Call | None = None  # the last well-formed call

    def add(self, calls: list[Call], failed: list[bool]) -> None:
        """One assistant turn's calls, with the failed flags of the responses after it (in order)."""
        checks, prev, answered = self.checks, self.prev, len(failed)
        successes, failures = [], []
        for k, call in enumerate(calls):
            name, args, malformed = call
            if malformed is None:
                self.names[name] += 1
                if checks:
                    valid = checks.get(name)
                    if valid is None:
                        self.unknown += 1
                    elif not valid(args):
                        self.invalid += 1
                if prev is not None and _same_action(call, prev):
                    self.retries += 1
                prev = call
            else:
                self.malformed += 1
            if k < answered:
                if failed[k]:
                    failures.append(call)
                    if name:
                        self.failures[name] += 1
                elif malformed is None:  # a malformed call is no successful action, whatever came back
                    successes.append(call)
        self.prev = prev
        if self.pending and successes:
            still = [f for f in self.pending if all(_same_action(s, f) for s in successes)]
            self.recoveries += len(self.pending) - len(still)
            self.pending = still
        self.pending.extend(failures)

    def counts(self) -> dict[str, int]:
        return {"malformed_tool_calls": self.malformed, "unknown_tool_calls": self.unknown,
                "invalid_argument_calls": self.invalid, "retry_loops": self.retries, "recoveries": self.recoveries}
