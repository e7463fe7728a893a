"""Per-trace metrics.

Definitions (they are the contract of ``trajkit traces stats --json``; each has a test with
hand-derived counts):

* ``tool_calls`` -- every ``<tool_call>`` block (malformed and unclosed ones included);
  ``malformed_tool_calls`` -- blocks whose body is not a strict JSON object with a string ``name`` and
  an object ``arguments``; ``parallel_turns`` -- assistant turns with >= 2 call blocks.
* ``tool_responses`` -- every ``<tool_response>`` block / OpenAI ``tool`` message;
  ``failed_tool_responses`` -- Hermes Agent's harness rule (:mod:`trajkit.traces.harness`);
  ``nonzero_exit_responses`` -- results with an integer ``exit_code`` != 0 (not failures).
* ``unanswered_tool_calls`` / ``orphan_tool_responses`` -- for each assistant turn, its call blocks minus
  the response blocks of the tool turn right after it, the positive part each way; responses with no
  assistant turn right before them are orphans. A Hermes tool turn is one tool message; an OpenAI tool
  turn is the run of consecutive tool messages.
* ``unknown_tool_calls`` -- well-formed calls naming a tool absent from the row's tools (only when the
  row declares tools); ``invalid_argument_calls`` -- well-formed calls to a known tool whose arguments
  violate its schema.
* ``recoveries`` -- failed responses followed, in a later assistant turn, by a well-formed call with a
  non-failed response that differs from the failed call (name or arguments; a failed malformed call
  differs from every well-formed call); each failed response counts at most once; ``retry_loops`` -- well-formed calls identical
  (name + arguments) to the immediately previous well-formed call.
* ``think_words`` -- whitespace-separated words inside think blocks.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Callable, Iterator

from trajkit.traces import jsonvalue
from trajkit.traces.model import Message, ToolCall, ToolResponse, Trace
from trajkit.traces.tools import arguments_valid

COUNT_KEYS = (
    "messages", "assistant_turns", "tool_calls", "malformed_tool_calls", "parallel_turns",
    "tool_responses", "failed_tool_responses", "nonzero_exit_responses", "truncated_responses",
    "think_words", "unknown_tool_calls", "invalid_argument_calls", "unanswered_tool_calls",
    "orphan_tool_responses", "recoveries", "retry_loops", "failed_turns", "consecutive_assistant_turns",
)


@dataclass
class TraceMetrics:
    """Counts for one trace (keys in :data:`COUNT_KEYS`) plus per-turn lists for distributions."""

    counts: Counter = field(default_factory=Counter)
    tool_call_counts: Counter = field(default_factory=Counter)
    tool_failures: Counter = field(default_factory=Counter)
    think_words_per_turn: list[int] = field(default_factory=list)
    think_tokens: int | None = None
    parallel_widths: list[int] = field(default_factory=list)  # call blocks per turn with calls
    context_summary: bool = False


def tool_turns(trace: Trace) -> Iterator[tuple[Message | None, list[ToolResponse]]]:
    """(assistant turn or None, responses of the tool turn right after it) pairs, in order.

    Every assistant turn appears once (with [] when no tool turn follows); a tool turn with no
    assistant turn right before it appears with None.
    """
    msgs = trace.messages
    i = 0
    while i < len(msgs):
        msg = msgs[i]
        if msg.role == "assistant":
            responses, i = _tool_turn_at(trace, i + 1)
            yield msg, responses
        elif msg.role == "tool":
            responses, i = _tool_turn_at(trace, i)
            yield None, responses
        else:
            i += 1


def _tool_turn_at(trace: Trace, i: int) -> tuple[list[ToolResponse], int]:
    msgs = trace.messages
    if i >= len(msgs) or msgs[i].role != "tool":
        return [], i
    if trace.format == "hermes":
        return list(msgs[i].tool_responses), i + 1
    out: list[ToolResponse] = []
    while i < len(msgs) and msgs[i].role == "tool":
        out.extend(msgs[i].tool_responses)
        i += 1
    return out, i


def _call_key(call: ToolCall) -> bytes:
    return action_key(call.name, call.arguments, None if call.ok else call.body)


def action_key(name: str | None, arguments, malformed_body: str | None = None) -> bytes:
    """Identity of an action: name + canonical arguments; a malformed call (``malformed_body`` given) is its
    stripped body."""
    if malformed_body is not None:
        return b"\1" + malformed_body.strip().encode()
    return name.encode() + b"\0" + jsonvalue.dumps(arguments, sort_keys=True)


def trace_metrics(trace: Trace, count_tokens: Callable[[str], int] | None = None) -> TraceMetrics:
    """Compute :class:`TraceMetrics` for one trace; ``count_tokens`` enables ``think_tokens``."""
    tm = TraceMetrics()
    c = tm.counts
    c["messages"] = len(trace.messages)
    tm.context_summary = bool(trace.meta.get("context_summary"))
    prev_role = None
    for msg in trace.messages:
        if msg.role == "assistant" and prev_role == "assistant":
            c["consecutive_assistant_turns"] += 1
        prev_role = msg.role
    _count_turns(trace, tm, count_tokens)
    _count_sequences(trace, tm)
    return tm


def _count_turns(trace: Trace, tm: TraceMetrics, count_tokens) -> None:
    c = tm.counts
    think_tokens = 0
    for turn, responses in tool_turns(trace):
        if turn is not None:
            calls = turn.tool_calls
            c["assistant_turns"] += 1
            think = turn.think
            words = len(think.split()) if think else 0
            c["think_words"] += words
            tm.think_words_per_turn.append(words)
            if count_tokens is not None and think:
                think_tokens += count_tokens(think)
            c["tool_calls"] += len(calls)
            if len(calls) >= 2:
                c["parallel_turns"] += 1
            if calls:
                tm.parallel_widths.append(len(calls))
            for call in calls:
                _count_call(trace, call, tm)
            diff = len(calls) - len(responses)
            c["unanswered_tool_calls"] += max(diff, 0)
            c["orphan_tool_responses"] += max(-diff, 0)
        else:
            c["orphan_tool_responses"] += len(responses)
        if responses:
            _count_responses(turn, responses, tm)
    if count_tokens is not None:
        tm.think_tokens = think_tokens


def _count_responses(turn: Message | None, responses: list[ToolResponse], tm: TraceMetrics) -> None:
    c = tm.counts
    failed = nonzero = truncated = 0
    calls = turn.tool_calls if turn is not None else ()
    for k, resp in enumerate(responses):
        if resp.failed:
            failed += 1
            if k < len(calls) and calls[k].name:
                tm.tool_failures[calls[k].name] += 1
        if resp.exit_code:
            nonzero += 1
        if resp.truncated:
            truncated += 1
    c["tool_responses"] += len(responses)
    c["failed_tool_responses"] += failed
    c["failed_turns"] += failed > 0
    c["nonzero_exit_responses"] += nonzero
    c["truncated_responses"] += truncated


def _count_call(trace: Trace, call: ToolCall, tm: TraceMetrics) -> None:
    c = tm.counts
    if not call.ok:
        c["malformed_tool_calls"] += 1
        return
    tm.tool_call_counts[call.name] += 1
    if not trace.tools:
        return
    spec = trace.tools.get(call.name)
    if spec is None:
        c["unknown_tool_calls"] += 1
    elif not arguments_valid(call.arguments, spec["parameters"]):
        c["invalid_argument_calls"] += 1


def _count_sequences(trace: Trace, tm: TraceMetrics) -> None:
    """Retry loops and error recovery, over the well-formed calls in order."""
    c = tm.counts
    pending: list[bytes] = []  # keys of failed calls from earlier turns, not yet recovered
    prev_key = None
    for turn, responses in tool_turns(trace):
        if turn is None:
            continue
        successes = []
        failures = []
        for k, call in enumerate(turn.tool_calls):
            key = _call_key(call)
            if call.ok:
                if key == prev_key:
                    c["retry_loops"] += 1
                prev_key = key
            if k < len(responses):
                if responses[k].failed:
                    failures.append(key)
                elif call.ok:  # a malformed call is no successful action, whatever came back
                    successes.append(key)
        if pending and successes:
            still = [f for f in pending if all(s == f for s in successes)]
            c["recoveries"] += len(pending) - len(still)
            pending = still
        pending.extend(failures)
