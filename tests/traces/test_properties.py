"""Property-based tests (hypothesis) of the parsers, metrics, report viewer and export over random and
adversarial rows: deep nesting, NUL, lone surrogates, huge numbers, wrong types at every field.

Asserted for every generated row: only trajkit's typed errors (:class:`trajkit.errors.InputError`) come
out; a parsed Hermes row renders back to its exact texts; an exported row reads back as a trace; and a bad
row between two good ones leaves the good ones in every command's output. Bounded for CI: a fixed number
of examples per test, a deadline (60 s: generous for a loaded 2-core machine, still a stop for runaway
backtracking), and a fixed seed (``derandomize``).
"""
import datetime
import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from trajkit.errors import InputError
from trajkit.traces.filters import FilterConfig, filter_corpus
from trajkit.traces.hermes import parse_row, render_row
from trajkit.traces.load import RawRow, decode_line, parse_raw
from trajkit.traces.metrics import trace_metrics
from trajkit.traces.openai import from_openai
from trajkit.traces.report_viewer import TraceViewer
from trajkit.traces.export.sft import openai_row
from trajkit.traces.stats import compute_stats

from .conftest import call, resp

BOUNDED = settings(max_examples=200, deadline=datetime.timedelta(seconds=60), derandomize=True,
                   suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
FILES = settings(BOUNDED, max_examples=40, suppress_health_check=list(HealthCheck))

# text with the characters that break parsers: NUL, a lone surrogate, control and bidi characters, tags
TAGS = ["<think>", "</think>", "<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>", "<tools>"]
text = st.one_of(
    st.text(st.characters(codec=None, blacklist_categories=()), max_size=20),
    st.lists(st.sampled_from(TAGS + ["\x00", "\ud800", "\u202e", "\x1b[31m", "{", "}", '"', "1e400", " "]),
             max_size=12).map("".join))
numbers = st.one_of(st.integers(), st.integers(min_value=2**64, max_value=2**200), st.floats(allow_nan=False),
                    st.just(10**30))
scalars = st.one_of(st.none(), st.booleans(), numbers, text)
json_values = st.recursive(scalars, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                            st.dictionaries(text, inner, max_size=4)),
                           max_leaves=12)


def deep(levels: int, leaf="[]") -> str:
    return "[" * levels + leaf + "]" * levels


call_bodies = st.one_of(
    st.builds(lambda n, a: json.dumps({"name": n, "arguments": a}), text, json_values),
    st.integers(150, 1100).map(lambda d: '{"name": "t", "arguments": {"a": ' + deep(d) + "}}"),
    st.just('{"name": "t", "arguments": {"x": 1e400, "n": 123456789012345678901234567890}}'),
    text)
gpt_values = st.lists(st.one_of(text, call_bodies.map(lambda b: "<tool_call>\n" + b + "\n</tool_call>")),
                      max_size=4).map("".join)
tool_values = st.lists(st.one_of(text, json_values.map(lambda v: resp("t", 0, v))), max_size=3).map("".join)
roles = st.one_of(st.sampled_from(["system", "human", "gpt", "tool"]), json_values)


@st.composite
def hermes_messages(draw):
    role = draw(roles)
    value = draw({"gpt": gpt_values, "tool": tool_values}.get(role, text) if isinstance(role, str) else text)
    msg = {"from": role, "value": value}
    if draw(st.integers(0, 9)) == 0:  # a wrong type at a field of the message
        msg[draw(st.sampled_from(["from", "value"]))] = draw(json_values)
    return msg


tool_defs = st.one_of(
    st.builds(lambda n, p: {"type": "function", "function": {"name": n, "parameters": p}}, text, json_values),
    st.just({"type": "function", "function": {"name": "t", "parameters": {"type": "object", "required": 5}}}),
    json_values)


@st.composite
def hermes_rows(draw):
    row = {"id": draw(json_values), "conversations": draw(st.lists(hermes_messages(), max_size=5))}
    if draw(st.booleans()):
        tools = draw(st.lists(tool_defs, max_size=2))
        row["tools"] = json.dumps(tools) if draw(st.booleans()) else tools
    for key in ("category", "subcategory", "task"):
        if draw(st.booleans()):
            row[key] = draw(json_values)
    if draw(st.integers(0, 9)) == 0:
        row[draw(st.sampled_from(list(row)))] = draw(json_values)
    return row


@st.composite
def openai_messages(draw):
    role = draw(st.one_of(st.sampled_from(["system", "user", "assistant", "tool", "developer"]), json_values))
    msg = {"role": role, "content": draw(st.one_of(text, st.none(), st.lists(
        st.one_of(st.fixed_dictionaries({"type": st.just("text"), "text": st.one_of(text, json_values)}),
                  json_values), max_size=3), json_values))}
    if role == "assistant":
        calls = st.lists(st.one_of(st.fixed_dictionaries({
            "id": json_values, "type": st.just("function"),
            "function": st.fixed_dictionaries({"name": st.one_of(text, json_values),
                                               "arguments": st.one_of(call_bodies, json_values)})}),
            json_values), max_size=3)
        msg["tool_calls"] = draw(st.one_of(calls, json_values))
        msg["reasoning_content"] = draw(st.one_of(text, json_values))
    if role == "tool":
        msg["tool_call_id"] = draw(json_values)
    return msg


@st.composite
def openai_rows(draw):
    row = {"id": draw(text), "messages": draw(st.lists(openai_messages(), max_size=5))}
    if draw(st.booleans()):
        tools = draw(st.lists(tool_defs, max_size=2))
        row["tools"] = json.dumps(tools) if draw(st.booleans()) else tools
    return row


rows = st.one_of(hermes_rows(), openai_rows(), json_values)


def _through_everything(value):
    """Parse, measure, render for the viewer and export one decoded row; only InputError may escape."""
    try:
        trace = parse_raw(RawRow("p.jsonl", 1, value), "p")
    except InputError:
        return None
    tm = trace_metrics(trace)
    TraceViewer(5, 200, {"p": 0}).add(trace, tm)
    for malformed in ("skip", "as_text"):
        try:
            row = openai_row(trace, malformed=malformed)
        except InputError:
            continue
        json.dumps(row)  # the export row is plain JSON data
        from_openai(row["messages"], row["tools"])  # and reads back as a trace
    return trace


@BOUNDED
@given(rows)
def test_any_row_gives_a_trace_or_an_input_error(value):
    _through_everything(value)


@BOUNDED
@given(hermes_rows())
def test_parsed_hermes_rows_render_back_exactly(row):
    try:
        trace = parse_row(row)
    except InputError:
        return
    assert [m["value"] for m in render_row(trace)["conversations"]] == [m["value"] for m in row["conversations"]]


@BOUNDED
@given(st.one_of(rows.map(lambda v: json.dumps(v).encode()), st.binary(max_size=60),
                 st.integers(150, 1100).map(lambda d: deep(d).encode())))
def test_any_line_decodes_or_names_itself(line):
    raw = decode_line("p.jsonl", 7, line)
    assert raw.line == line
    try:
        parse_raw(raw, "p")
    except InputError as exc:
        assert exc.path == "p.jsonl" and exc.row == 7
        return
    _through_everything(raw.value)


def _good(i):
    return json.dumps({"id": f"g{i}", "conversations": [
        {"from": "human", "value": "go"}, {"from": "gpt", "value": call("t", {"a": 1})},
        {"from": "tool", "value": resp("t", 0, "ok")}]}).encode()


@FILES
@given(st.one_of(rows.map(lambda v: json.dumps(v).encode()), st.binary(max_size=60)).filter(lambda b: b"\n" not in b and b.strip()))
def test_neighbours_of_any_row_are_kept(tmp_path_factory, bad):
    folder = tmp_path_factory.mktemp("p")
    src = folder / "in.jsonl"
    src.write_bytes(_good(0) + b"\n" + bad + b"\n" + _good(2) + b"\n")
    errors = []
    stats = compute_stats([str(src)], on_error=errors.append, progress=False, workers=1)
    assert stats.total.traces + stats.skipped_rows == 3 and len(errors) == stats.skipped_rows
    assert all(e.path == str(src) and e.row == 2 for e in errors)
    out = folder / "out.jsonl"
    report = filter_corpus([str(src)], FilterConfig(), str(out), on_error=errors.append, progress=False)
    kept = out.read_bytes().split(b"\n")[:-1]
    assert kept[0] == _good(0) and kept[-1] == _good(2) and report.read + report.skipped_rows == 3
