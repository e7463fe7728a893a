"""The trace model and parsers against hand-derived structure and counts."""
import json

import pytest

from trajkit.errors import InputError
from trajkit.traces.aggregate import Aggregate
from trajkit.traces.hermes import parse_row, render_row
from trajkit.traces.metrics import trace_metrics
from trajkit.traces.model import validate_trace
from trajkit.traces.openai import from_openai, to_openai

from .conftest import quirky_row

# Hand-derived from conftest.quirky_row (see the comments beside each number).
EXPECTED = {
    "messages": 14,
    "assistant_turns": 6,
    "tool_calls": 7,            # 2 + 1 + 2 + 1 + 1 (the last one unclosed)
    "malformed_tool_calls": 1,  # the Python-quoted call
    "parallel_turns": 2,        # turns 1 and 3
    "tool_responses": 7,        # 2 + 1 + 1 + 2 + 1
    "failed_tool_responses": 3,  # success:false, "Error: bad call", "" ; exit_code 1 is NOT a failure
    "nonzero_exit_responses": 1,
    "truncated_responses": 1,
    "think_words": 10,          # 1 + 0 + 3 + 3 + 1 + 2
    "unknown_tool_calls": 2,    # nonexistent twice
    "invalid_argument_calls": 1,  # terminal command=5 (should be a string)
    "unanswered_tool_calls": 2,  # turn 3 has 2 calls / 1 response; turn 4 is followed by a gpt turn
    "orphan_tool_responses": 2,  # turn 5 has 1 call / 2 responses; the second tool message follows a tool message
    "recoveries": 2,            # read_file a.txt and the malformed call both precede read_file b.txt succeeding
    "retry_loops": 1,           # nonexistent {} twice in a row
    "failed_turns": 3,
    "consecutive_assistant_turns": 1,
}


def test_quirky_row_counts():
    tm = trace_metrics(parse_row(quirky_row()))
    assert {k: tm.counts[k] for k in EXPECTED} == EXPECTED
    assert dict(tm.tool_call_counts) == {"terminal": 2, "read_file": 2, "nonexistent": 2}
    assert tm.context_summary is True
    assert tm.parallel_widths == [2, 1, 2, 1, 1]


def test_quirky_row_is_lossless_and_valid():
    row = quirky_row()
    trace = parse_row(row)
    validate_trace(trace)
    assert render_row(trace)["conversations"] == row["conversations"]


def test_quirky_row_structure():
    trace = parse_row(quirky_row())
    t1, t5 = trace.messages[2], trace.messages[9]
    assert [s.kind for s in t1.segments] == ["think", "text", "tool_call", "text", "tool_call"]
    assert t1.think == "plan" and t1.narration == "I'll run two things."
    assert [s.kind for s in t5.segments] == ["think", "text", "tool_call"]
    assert t5.tool_calls[0].closed is False and t5.tool_calls[0].ok
    bad = trace.messages[4].tool_calls[0]
    assert bad.error == "Python-literal quoting, not JSON" and bad.name == "read_file"
    codes = sorted((d.code, d.message) for d in trace.diagnostics)
    assert codes == [("malformed_tool_call", 4), ("unclosed_tool_call", 9)]
    tool1 = trace.messages[3].tool_responses
    assert [r.tool_call_id for r in tool1] == ["functions.terminal:0", "functions.read_file:1"]
    assert [(r.failed, r.exit_code) for r in tool1] == [(False, 1), (True, None)]
    assert set(trace.tools) == {"terminal", "read_file"}


@pytest.mark.parametrize("body, reason", [
    ('{"name": "x", "arguments": {"a": 1', "not valid JSON (truncated or garbled)"),
    ('{"name": "x"}', "missing 'arguments'"),
    ('{"name": "x", "arguments": "{\\"a\\": 1}"}', "'arguments' is a str, not an object"),
    ('{"arguments": {}}', "missing string 'name'"),
    ('["x"]', "body is a JSON list, not an object"),
    ("{'name': 'x', 'arguments': {}}", "Python-literal quoting, not JSON"),
])
def test_malformed_call_kinds(body, reason):
    row = {"conversations": [{"from": "gpt", "value": f"<tool_call>\n{body}\n</tool_call>"}]}
    call = parse_row(row).messages[0].tool_calls[0]
    assert call.error == reason


def test_tags_inside_think_are_not_calls():
    text = "<think>I could write <tool_call> here</think>Answer."
    msg = parse_row({"conversations": [{"from": "gpt", "value": text}]}).messages[0]
    assert msg.tool_calls == [] and msg.narration == "Answer."


def test_missing_and_unclosed_think():
    t = parse_row({"conversations": [{"from": "gpt", "value": "reasoning here</think>\nhi"},
                                     {"from": "gpt", "value": "<think>never closed " + '<tool_call>\n{"name": "a", "arguments": {}}\n</tool_call>'}]})
    assert t.messages[0].think == "reasoning here"
    assert t.messages[1].think == "never closed" and len(t.messages[1].tool_calls) == 1
    assert [d.code for d in t.diagnostics] == ["missing_think_open", "unclosed_think", "no_tools"]
    assert [m.text for m in t.messages] == ["reasoning here</think>\nhi",
                                            "<think>never closed " + '<tool_call>\n{"name": "a", "arguments": {}}\n</tool_call>']


@pytest.mark.parametrize("content, failed, exit_code", [
    ({"output": "boom", "exit_code": 2, "error": None}, False, 2),
    ({"output": "", "exit_code": 0, "error": "timeout"}, True, 0),
    ({"success": False}, True, None),
    ({"success": True, "error": None}, False, None),
    ("", True, None), ("   ", True, None), ("error: nope", True, None), ("  ERROR: x", True, None),
    ("the word error appears here", False, None),
    ('{"error": "as a JSON string"}', True, None),
    ('{"output": "ok", "exit_code": 0, "error": null}', False, 0),
    ({"exit_code": True}, False, None),
])
def test_harness_failure_rule(content, failed, exit_code):
    from .conftest import resp
    r = parse_row({"conversations": [{"from": "tool", "value": resp("t", 0, content)}]}).messages[0].tool_responses[0]
    assert (r.failed, r.exit_code) == (failed, exit_code)


def test_block_without_envelope_is_judged_itself():
    r = parse_row({"conversations": [{"from": "tool", "value": "<tool_response>\nError: no envelope\n</tool_response>"}]})
    assert r.messages[0].tool_responses[0].failed is True


def test_real_row_structure(real_row):
    trace = parse_row(real_row)
    assert [m.role for m in trace.messages] == ["system", "user", "assistant", "tool"]
    assert len(trace.messages[0].text) == 25_879
    assert len(trace.tools) == 15 and "session_search" in trace.tools
    gpt = trace.messages[2]
    assert gpt.think.startswith("The user wants me to look through past sessions")
    assert len(gpt.think.split()) == 44
    (c,) = gpt.tool_calls
    assert (c.name, c.arguments, c.ok) == ("session_search", {"query": "staging deployment config"}, True)
    (r,) = trace.messages[3].tool_responses
    assert r.tool_call_id == "functions.session_search:0" and r.failed
    assert r.result == {"success": False, "error": "Session database not available."}
    assert render_row(trace)["conversations"] == real_row["conversations_preview"]
    # the preview's tools field is cut at 1,200 characters: reported, and the prompt's block used instead
    assert [d.code for d in trace.diagnostics] == ["bad_tools_field"]


def test_upstream_hermes_tool_form_accepted():
    tools = [{"name": "terminal", "description": "d", "parameters": {"type": "object", "properties": {}},
              "required": None}]
    row = {"conversations": [{"from": "gpt", "value": '<tool_call>\n{"name": "terminal", "arguments": {}}\n</tool_call>'}],
           "tools": json.dumps(tools)}
    trace = parse_row(row)
    assert list(trace.tools) == ["terminal"] and trace_metrics(trace).counts["unknown_tool_calls"] == 0


def test_bad_rows_name_the_field():
    with pytest.raises(InputError, match=r"field conversations\[1\]\.from: unknown role 'bot'"):
        parse_row({"conversations": [{"from": "human", "value": "a"}, {"from": "bot", "value": "b"}]})
    with pytest.raises(InputError, match="field conversations: missing or not a list"):
        parse_row({"id": "x"})


def test_openai_roundtrip_and_tool_runs():
    trace = parse_row(quirky_row())
    # the malformed call cannot be an OpenAI tool_call
    with pytest.raises(InputError, match="malformed tool call"):
        to_openai(trace)
    messages, tools = to_openai(trace, malformed="as_text")
    assert [m["role"] for m in messages][:4] == ["user", "assistant", "tool", "tool"]  # system dropped (auto)
    assert messages[1]["reasoning_content"] == "plan"
    assert [m["tool_call_id"] for m in messages[2:4]] == [tc["id"] for tc in messages[1]["tool_calls"]]
    back = from_openai(messages, tools)
    validate_trace(back)
    tm_a, tm_b = trace_metrics(trace).counts, trace_metrics(back).counts
    # calls, responses and failures survive the round trip; the malformed call became text
    for key in ("tool_responses", "failed_tool_responses", "nonzero_exit_responses", "think_words",
                "unknown_tool_calls", "invalid_argument_calls", "parallel_turns"):
        assert tm_a[key] == tm_b[key], key
    assert tm_b["tool_calls"] == tm_a["tool_calls"] - 1


def test_openai_orphans_and_unanswered():
    msgs = [
        {"role": "tool", "tool_call_id": "x", "content": "early"},
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": None, "reasoning_content": "think a b",
         "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}},
                        {"id": "c2", "type": "function", "function": {"name": "g", "arguments": "{\"a\": 1}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "{\"error\": \"x\"}"},
        {"role": "assistant", "content": "done"},
    ]
    c = trace_metrics(from_openai(msgs)).counts
    assert (c["tool_calls"], c["tool_responses"], c["orphan_tool_responses"], c["unanswered_tool_calls"],
            c["failed_tool_responses"], c["think_words"], c["parallel_turns"]) == (2, 2, 1, 1, 1, 3, 1)


def test_aggregate_distribution_percentiles():
    agg = Aggregate()
    for n in range(1, 5):  # traces with 1..4 gpt turns
        row = {"conversations": [{"from": "gpt", "value": "<think>w</think>x"}] * n}
        agg.add(trace_metrics(parse_row(row)))
    d = agg.summary()["distributions"]["turns"]
    assert (d["count"], d["mean"], d["p50"], d["max"]) == (4, 2.5, 2.5, 4.0)
    assert d["p95"] == pytest.approx(3.85)


def test_histogram_percentiles_equal_numpy():
    import numpy as np

    from trajkit.traces.aggregate import Histogram

    rng = np.random.default_rng(0)
    for n in (1, 2, 3, 10, 101, 1000):
        values = rng.integers(0, 50, size=n) ** 2  # skewed, with ties
        hist = Histogram()
        hist.extend(values.tolist())
        for q in (0, 5, 50, 95, 99, 100):
            assert hist.percentile(q) == pytest.approx(float(np.percentile(values, q)), abs=1e-9), (n, q)
        assert hist.summary()["mean"] == round(float(values.mean()), 3)
        assert np.array_equal(np.sort(values).astype(float), hist.expand())
