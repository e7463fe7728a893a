"""The stats fast path (:mod:`trajkit.traces.scan`) against the reference (``parse_raw`` + ``trace_metrics``).

For every row it takes, its metrics, group names and diagnostic codes must equal the reference's; every row
it declines goes through the reference, so the corpus statistics must equal the reference's exactly, on the
bundled samples, the real fixture, the synthetic generator's quirks, a messy file and generated rows. Each row
is checked through both of its decoders: orjson's dict (:func:`row_metrics`) and the JSON line through
msgspec's structs (:mod:`trajkit.traces.scan_typed`, :func:`typed_row_metrics`); the reference reads the
line with the exact reader (``decode_line``).
"""
import datetime
import json
import lzma
from pathlib import Path

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import trajkit
from trajkit.errors import InputError
from trajkit.synth.generator import SynthConfig, generate
from trajkit.traces.aggregate import CorpusStats, group_key
from trajkit.traces.hermes import parse_row
from trajkit.traces.load import RawRow, decode_line, iter_traces, parse_raw
from trajkit.traces.metrics import trace_metrics
from trajkit.traces.scan import row_metrics, typed_row_metrics
from trajkit.traces.scan_typed import decode_row
from trajkit.traces.stats import compute_stats

from .conftest import SYSTEM, TOOLS, call, quirky_row, resp

SAMPLES = Path(trajkit.__file__).parent / "data" / "sample"


def reference(row, source="src"):
    trace = parse_raw(RawRow("f.jsonl", 1, row), source)
    return (group_key(trace.category, trace.subcategory, trace.source), trace_metrics(trace),
            sorted(d.code for d in trace.diagnostics))


def line_reference(line: bytes, source="src"):
    trace = parse_raw(decode_line("f.jsonl", 1, line), source)
    return (group_key(trace.category, trace.subcategory, trace.source), trace_metrics(trace),
            sorted(d.code for d in trace.diagnostics))


def assert_equal(found, ref, what) -> None:
    key, tm, diags = found
    ref_key, ref_tm, ref_diags = ref
    assert key == ref_key, what
    assert tm == ref_tm, what
    assert sorted(diags) == ref_diags, what


def assert_same(row, source="src") -> bool:
    """The fast path's answer equals the reference's when it takes the row, from orjson's dict and from the
    row's JSON line through msgspec's structs; True when it took it. The typed decoder takes the row exactly
    when the dict path does (the row has only the keys it declares)."""
    found = row_metrics(row, source)
    if found is not None:
        assert_equal(found, reference(row, source), row.get("id"))
    line = orjson.dumps(row) + b"\n"
    typed = decode_row(line)
    typed_found = typed_row_metrics(typed, source) if typed is not None else None
    if typed_found is not None:
        assert_equal(typed_found, line_reference(line, source), row.get("id"))
    if typed_shape(row):
        assert (typed_found is None) == (found is None), row.get("id")
    return found is not None


def typed_shape(row) -> bool:
    """Whether the row has the shape :mod:`trajkit.traces.scan_typed` declares: its known keys only, string or
    null groups, messages of exactly ``from`` and ``value``."""
    conv = row.get("conversations")
    return (set(row) <= {"conversations", "tools", "category", "subcategory", "id", "task"}
            and all(isinstance(row.get(k), (str, type(None))) for k in ("category", "subcategory"))
            and isinstance(conv, list) and all(isinstance(m, dict) and set(m) == {"from", "value"} for m in conv))


def sample_rows(name):
    with lzma.open(SAMPLES / name) as fh:
        return [orjson.loads(line) for line in fh if line.strip()]


@pytest.mark.parametrize("name", ["kimi.jsonl.xz", "glm-5.1.jsonl.xz"])
def test_bundled_samples_equal_the_reference_row_by_row(name):
    rows = sample_rows(name)
    taken = sum(assert_same(row) for row in rows)
    assert taken >= 0.9 * len(rows), f"the fast path took only {taken} of {len(rows)} rows"


def test_the_real_fixture_row_equals_the_reference(real_row):
    assert assert_same(real_row) or reference(real_row)[2], "declined a real row without a diagnostic"


@pytest.mark.parametrize("style", ["kimi", "glm-5.1"])
def test_every_generator_quirk_equals_the_reference(style):
    cfg = SynthConfig(rows=300, style=style, seed=7, malformed_rate=0.4, retry_rate=0.5, invalid_args_rate=0.3,
                      unknown_tool_rate=0.3, consecutive_gpt_rate=0.3, response_mismatch_rate=0.3)
    rows = list(generate(cfg))
    taken = sum(assert_same(row) for row in rows)
    assert taken >= 0.9 * len(rows)


def row(*conv, tools=TOOLS, **extra):
    out = {"id": "r", "conversations": [{"from": f, "value": v} for f, v in conv], **extra}
    if tools is not None:
        out["tools"] = json.dumps(tools)
    return out


OK_CALL = call("terminal", {"command": "ls"})
FAILED = resp("terminal", 0, {"output": "", "error": "boom"})
FINE = resp("terminal", 0, {"output": "x", "exit_code": 0, "error": None})


@pytest.mark.parametrize("case", [
    row(("gpt", "<think>never closed " + OK_CALL)),                       # unclosed_think
    row(("gpt", "plan</think>" + OK_CALL)),                                # missing_think_open
    row(("gpt", OK_CALL), ("tool", "no blocks here")),                     # bare_tool_message
    row(("gpt", OK_CALL), ("tool", "<tool_response>{}")),                  # unclosed_tool_response
    row(("gpt", OK_CALL), tools=None),                                     # no tools field: no_tools / system
    row(("system", SYSTEM), ("gpt", OK_CALL), tools=None),                 # tools from the system prompt
    row(("gpt", OK_CALL), tools=[{"type": "function", "function": {"name": "t", "parameters": {"type": 5}}}]),
    {**row(("gpt", OK_CALL)), "tools": "not json"},                         # bad_tools_field
    {**row(("gpt", OK_CALL)), "meta": {"nested": [1]}},                   # a nested value: the depth check
    {"id": "r", "tools": json.dumps(TOOLS), "conversations": [{"from": "gpt", "value": OK_CALL, "w": [1]}]},
    {"id": "r", "tools": json.dumps(TOOLS), "conversations": [{"from": "robot", "value": "x"}]},
    {"id": "r", "tools": json.dumps(TOOLS), "conversations": ["not a message"]},
    {"id": "r", "tools": json.dumps(TOOLS), "messages": [{"role": "user", "content": "hi"}]},  # OpenAI
])
def test_rows_the_fast_path_must_leave_to_the_reference(case):
    assert row_metrics(case, "src") is None


@pytest.mark.parametrize("case", [
    quirky_row() | {"tools": json.dumps(TOOLS)},
    # a malformed and an unclosed call: counted, with their diagnostics
    row(("gpt", "<tool_call>{'name': 'terminal', 'arguments': {}}</tool_call><tool_call>" + json.dumps(
        {"name": "terminal", "arguments": {"command": "x"}})), ("tool", FAILED + FINE)),
    # retry loops: 1, 1.0 and true are == in Python but different actions in the canonical JSON
    row(("gpt", call("terminal", {"command": 1})), ("tool", FAILED), ("gpt", call("terminal", {"command": 1.0})),
        ("tool", FAILED), ("gpt", call("terminal", {"command": True})), ("tool", FINE),
        ("gpt", call("terminal", {"command": True})), ("gpt", call("read_file", {"path": "a", "n": -0.0})),
        ("tool", FINE)),
    # recovery: a failed malformed call is recovered by any well-formed success; a failed call by a different one
    row(("gpt", "<tool_call>{bad}</tool_call>"), ("tool", resp("terminal", 0, "Error: x")),
        ("gpt", OK_CALL), ("tool", FAILED), ("gpt", OK_CALL), ("tool", FINE),
        ("gpt", call("terminal", {"command": "pwd"})), ("tool", FINE)),
    # orphan tool turns, consecutive assistants, a context summary, unanswered calls, a call to an unknown tool
    row(("tool", FINE), ("human", "[CONTEXT SUMMARY]: x"), ("gpt", OK_CALL + OK_CALL), ("gpt", "done"),
        ("gpt", call("nope", {})), ("tool", FINE + FINE + FINE)),
    # exact numbers: a big integer and a float orjson would round (the exact reader's values)
    row(("gpt", '<tool_call>{"name": "terminal", "arguments": {"command": 123456789012345678901234567890}}'
                '</tool_call>'), ("tool", FAILED),
        ("gpt", '<tool_call>{"name": "terminal", "arguments": {"command": 123456789012345678901234567891}}'
                '</tool_call>'), ("tool", FINE)),
])
def test_hand_made_rows_equal_the_reference(case):
    assert assert_same(case)


def test_the_quirky_row_counts_what_test_parse_derives_by_hand():
    """Not only equal to the reference: the counts test_parse.py derives by hand for this row."""
    from .test_parse import EXPECTED

    _, tm, diags = row_metrics(quirky_row() | {"tools": json.dumps(TOOLS)}, "src")
    assert {k: tm.counts[k] for k in EXPECTED} == EXPECTED
    assert dict(tm.tool_call_counts) == {"terminal": 2, "read_file": 2, "nonexistent": 2}
    assert tm.context_summary is True and tm.parallel_widths == [2, 1, 2, 1, 1]
    assert sorted(diags) == ["malformed_tool_call", "unclosed_tool_call"]


# generated rows: mostly well formed (so the fast path has work), with every quirk mixed in
names = st.sampled_from(["terminal", "read_file", "unknown", ""])
arg_values = st.one_of(st.text(max_size=6), st.integers(-3, 3), st.just(2**70), st.floats(allow_nan=False,
                       allow_infinity=False, width=32), st.booleans(), st.none(), st.lists(st.integers(0, 2), max_size=2))
arguments = st.dictionaries(st.sampled_from(["command", "path", "n"]), arg_values, max_size=3)
bodies = st.one_of(st.builds(lambda n, a: json.dumps({"name": n, "arguments": a}), names, arguments),
                   st.sampled_from(["{'name': 'terminal', 'arguments': {}}", "{bad", '{"name": 1}', "[]",
                                    '{"name": "terminal", "arguments": {"command": 1e400}}']))
results = st.one_of(st.sampled_from(["", "Error: no", "ok", "  error: late", "[OUTPUT TRUNCATED - 3 chars]"]),
                    st.fixed_dictionaries({"output": st.text(max_size=5), "exit_code": st.one_of(
                        st.integers(-1, 2), st.booleans(), st.none()), "error": st.one_of(st.none(), st.just("x"))}),
                    st.fixed_dictionaries({"success": st.booleans()}))
gpt_texts = st.builds(lambda think, calls, tail: think + "".join(calls) + tail,
                      st.sampled_from(["", "<think>a b  c\n</think>", "<think></think>", "x</think>", "<think>open"]),
                      st.lists(st.builds(lambda b, closed: "<tool_call>\n" + b + ("\n</tool_call>" if closed else ""),
                                         bodies, st.integers(0, 5).map(bool)), max_size=3),
                      st.sampled_from(["", " done", "<tool_call>" + json.dumps({"name": "terminal", "arguments": {}})]))
tool_texts = st.builds(lambda rs: "\n".join(resp("terminal", k, r) for k, r in enumerate(rs)),
                       st.lists(results, max_size=3)) | st.sampled_from(["", "bare", "<tool_response>open"])
messages = st.one_of(st.tuples(st.just("gpt"), gpt_texts), st.tuples(st.just("tool"), tool_texts),
                     st.tuples(st.just("human"), st.sampled_from(["hi", "[CONTEXT SUMMARY]: s"])))
GENERATED = settings(max_examples=300, deadline=datetime.timedelta(seconds=60), derandomize=True,
                     suppress_health_check=[HealthCheck.too_slow])


TAKEN: list[bool] = []


@GENERATED
@given(st.lists(messages, max_size=8), st.sampled_from([TOOLS, [], TOOLS[:1]]))
def check_generated_row(conv, tools):
    TAKEN.append(assert_same(row(*conv, tools=tools)))


def test_generated_rows_equal_the_reference():
    TAKEN.clear()
    check_generated_row()
    # the fast path took a good share of them (else the equality above would check little)
    assert sum(TAKEN) >= 0.2 * len(TAKEN), f"{sum(TAKEN)} of {len(TAKEN)}"


def messy_file(tmp_path):
    rows = list(generate(SynthConfig(rows=60, seed=11, malformed_rate=0.5)))
    lines = [orjson.dumps(r).decode() for r in rows]
    lines[5] = '{"id": "broken", "conversations": ['                   # invalid JSON
    lines[9] = json.dumps({"id": "no-conv"})                           # no conversations
    lines[14] = json.dumps({"conversations": [{"from": "robot", "value": "x"}]})  # unknown role
    lines[20] = '{"conversations": [], "tools": "[]", "x": 1e400}'      # a number orjson refuses
    lines[21] = ""
    path = tmp_path / "messy.jsonl"
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def stats_both_ways(path: str, name: str, workers: int, chunk_bytes: int):
    """((reference stats, its errors), (``traces stats``' own, its errors)) of ``path``: the reference folds
    every parsed trace; the fast path runs in one process (``workers`` 1) or in several chunks, so the parent
    merges partials (``workers`` 2)."""
    from trajkit.traces.parallel import parallel_file_stats

    ref_errors, errors = [], []
    ref = CorpusStats()
    for trace in iter_traces([path], on_error=ref_errors.append):
        ref.add(trace, trace_metrics(trace))
    ref.skipped_rows = len(ref_errors)
    if workers == 1:
        fast = compute_stats([path], progress=False, workers=1, on_error=errors.append)
    else:
        fast = CorpusStats()
        parallel_file_stats(path, name, fast, workers=2, on_error=errors.append, chunk_bytes=chunk_bytes)
    return (ref, ref_errors), (fast, errors)


@pytest.mark.parametrize("workers", [1, 2])
def test_corpus_stats_equal_the_reference_path(tmp_path, workers):
    (ref, ref_errors), (fast, errors) = stats_both_ways(messy_file(tmp_path), "messy", workers, 20_000)
    assert fast.to_dict() == ref.to_dict()
    assert [str(e) for e in errors] == [str(e) for e in ref_errors]
    assert [e.row for e in errors] == [6, 10, 15]


def test_a_row_it_cannot_read_raises_the_reference_error():
    from trajkit.traces.scan import fold_line

    stats = CorpusStats()
    with pytest.raises(InputError, match="conversations"):
        fold_line(stats, "f.jsonl", 3, b'{"id": "x"}\n', "f")
    assert stats.total.traces == 0


GOOD_LINE = orjson.dumps(row(("system", "You are a helper."), ("human", "hi"), ("gpt", "<think>a b</think>" + OK_CALL),
                             ("tool", FINE), category="c", subcategory="s", task="t"))


@pytest.mark.parametrize("line", [
    GOOD_LINE.replace(b'"id"', b'"meta":{"w":1},"id"'),                   # a key the structs do not declare
    GOOD_LINE.replace(b'"from":"gpt"', b'"from":"gpt","weight":1'),        # a message with another key
    GOOD_LINE.replace(b'"id":"r"', b'"id":["r"]'),                         # a nested id
    GOOD_LINE.replace(b'"task":"t"', b'"task":{"t":1}'),                   # a nested task
    GOOD_LINE.replace(b'"category":"c"', b'"category":7'),                 # a group that is not a string
    GOOD_LINE.replace(b'You are', b'You \xff are'),                        # invalid UTF-8 in a raw string
    GOOD_LINE.replace(b'You are', b'You \xed\xa0\x80 are'),                # an encoded surrogate there
    GOOD_LINE.replace(b'You are', b'You \\ud800 are'),                     # a lone surrogate escape there
    GOOD_LINE.replace(b'"value":"You are a helper."', b'"value":5'),       # a system message that is no string
    GOOD_LINE.replace(b'"from":"gpt"', b'"from":"robot"'),                 # an unknown role
    orjson.dumps({"id": "r", "conversations": [], "tools": ""}),          # empty tools
    orjson.dumps({"id": "r", "conversations": [], "tools": TOOLS}),       # tools as a list
    orjson.dumps({"id": "r", "conversations": [{"from": "gpt"}], "tools": "[]"}),  # a message without value
    GOOD_LINE[:-3],                                                        # truncated
    b"[" + GOOD_LINE + b"]",                                               # not an object
])
def test_lines_the_typed_decoder_leaves_to_the_orjson_path(line):
    assert decode_row(line) is None


@pytest.mark.parametrize("line", [
    GOOD_LINE,
    GOOD_LINE.replace(b'You are', "You été are".encode()),                # non-ASCII in the raw system prompt
    GOOD_LINE.replace(b'"id":"r"', b'"id":1e400'),                        # a number orjson refuses, in a raw id
    GOOD_LINE.replace(b'"id":"r"', b'"id":123456789012345678901234567890'),
    GOOD_LINE.replace(b'"category":"c"', b'"category":null'),
    GOOD_LINE.replace(b'"from":"system","value":"You are a helper."', b'"value":"You are a helper.","from":"system"'),
    GOOD_LINE.replace(b'"tools":', b'"tools":[1],"tools":', 1),             # a duplicate key: the last one counts
    json.dumps(orjson.loads(GOOD_LINE), indent=None).encode(),              # spaces after every colon and comma
])
def test_lines_the_typed_decoder_takes_equal_the_reference(line):
    typed = decode_row(line)
    assert typed is not None
    assert_equal(typed_row_metrics(typed, "src"), line_reference(line, "src"), line[:40])


def mutated_sample_file(tmp_path) -> str:
    """The bundled kimi sample, every row once as it is and once with a malformed piece in a place the typed
    decoder skips or declines, so the file mixes every path: typed, orjson, reference and unreadable rows."""
    with lzma.open(SAMPLES / "kimi.jsonl.xz") as fh:
        lines = [line.rstrip(b"\n") for line in fh if line.strip()]
    mutations = (
        lambda l: l.replace(b'"tools"', b'"extra":[[[1]]],"tools"', 1),
        lambda l: l.replace(b"You are", b"You \xff are", 1),
        lambda l: l.replace(b"You are", "You été are".encode(), 1),
        lambda l: l.replace(b'"from":"gpt"', b'"from":"gpt","weight":1', 1),
        lambda l: l.replace(b'"category"', b'"x":' + b"[" * 250 + b"]" * 250 + b',"category"', 1),
        lambda l: l[:len(l) // 2],
        lambda l: l.replace(b"You are", b"You \\ud800 are", 1),
        lambda l: l.replace(b'"from":"gpt"', b'"from":"bot"', 1),
        lambda l: l.replace(b'"id":', b'"id":1e400,"id2":', 1),
        lambda l: l.replace(b"<tool_call>", b"\\u003ctool_call>", 1),
        lambda l: l.replace(b"</think>", b"", 1),
        lambda l: l.replace(b'"tools":"', b'"tools":"{', 1),
    )
    out = []
    for k, line in enumerate(lines):
        out += [line, mutations[k % len(mutations)](line)]
    path = tmp_path / "mutated.jsonl"
    path.write_bytes(b"\n".join(out) + b"\n")
    return str(path)


@pytest.mark.parametrize("workers", [1, 2])
def test_malformed_pieces_give_the_reference_statistics(tmp_path, workers):
    """Whole-corpus statistics and warnings with rows broken where the typed decoder skips (the system prompt,
    unknown keys) equal the reference path's, sequential and split across processes."""
    (ref, ref_errors), (fast, errors) = stats_both_ways(mutated_sample_file(tmp_path), "mutated", workers, 200_000)
    assert orjson.dumps(fast.to_dict()) == orjson.dumps(ref.to_dict())
    assert [str(e) for e in errors] == [str(e) for e in ref_errors]
    assert len(errors) >= 40 and fast.total.traces >= 140  # both kinds of row are there


def test_the_real_fixture_row_under_the_dataset_field_names_folds_as_the_reference(real_row):
    """The fixture is a preview (``tools_preview`` cut short, ``conversations_preview``); under the dataset's
    own names the typed decoder reads it, its cut tools text sends it to the reference, and the statistics
    are the reference's."""
    from trajkit.traces.scan import fold_line

    names = {"tools_preview": "tools", "conversations_preview": "conversations"}
    line = orjson.dumps({names.get(k, k): v for k, v in real_row.items()}) + b"\n"
    assert decode_row(line) is not None
    stats, ref = CorpusStats(), CorpusStats()
    fold_line(stats, "f.jsonl", 1, line, "kimi")
    trace = parse_raw(decode_line("f.jsonl", 1, line), "kimi")
    ref.add(trace, trace_metrics(trace))
    assert stats.to_dict() == ref.to_dict() and stats.total.traces == 1


def typed_tree(value):
    """A value with the type of every piece spelled out (``1 == 1.0 == True`` and ``int == BigInt`` are not)."""
    if isinstance(value, dict):
        return ("dict", [(k, typed_tree(v)) for k, v in value.items()])
    if isinstance(value, list):
        return ("list", [typed_tree(v) for v in value])
    return (type(value).__name__, repr(value))


@pytest.mark.parametrize("body", [
    '{"name": "t", "arguments": {"command": "ls", "n": 3, "ok": true, "x": null}}',
    '{"name": "t", "arguments": {"deep": {"a": [1, {"b": 9223372036854775807}]}}}',
    '{"name": "t", "arguments": {"deep": {"a": [1, {"b": 9223372036854775808}]}}}',  # beyond int64
    '{"name": "t", "arguments": {"n": 18446744073709551615}}',                          # uint64: orjson's int
    '{"name": "t", "arguments": {"n": -9223372036854775809}}',
    '{"name": "t", "arguments": {"n": 123456789012345678901234567890}}',
    '{"name": "t", "arguments": {"n": [1.5]}}', '{"name": "t", "arguments": {"n": 1e400}}',
    '{"name": "t", "arguments": {"n": 1E5}}', '{"name": "t", "arguments": {"n": -0}}',
    '{"name": "t", "arguments": {}, "id": 1e400}', '{"name": "t", "arguments": {}, "extra": [[[{}]]]}',
    '{"name": "t", "arguments": {"a": 1, "a": "two"}}', '{"name": 1, "name": "t", "arguments": {}}',
    '{"name": "t", "arguments": {"n": ' + "[" * 150 + "]" * 150 + "}}",
    '{"name": "t", "arguments": {"n": ' + "[" * 250 + "]" * 250 + "}}",             # deeper than MAX_DEPTH
    '{"name": "t", "arguments": {}, "x": ' + "[" * 250 + "]" * 250 + "}",
    '{"name": "t", "arguments": []}', '{"name": "t"}', '[1]', '{bad', '', ' {"name": "t", "arguments": {}} \n',
    '{"name": "t", "arguments": {"s": "\\ud83d\\ude00 \\u0000"}}', '{"name": "t", "arguments": {"s": "\\ud800"}}',
])
def test_typed_call_bodies_read_as_the_exact_reader_reads_them(body):
    from trajkit.traces import jsonvalue
    from trajkit.traces.scan_typed import decode_call

    found = decode_call(body)
    if found is None:
        return
    value = jsonvalue.loads(body)
    assert typed_tree([value["name"], value["arguments"]]) == typed_tree(list(found))


# tag layouts where "no <tool_call> before p" (scan_turns asks find(CALL_OPEN, 0, p) < 0) and a response's
# closing tag (the next opener is looked for after it) could differ from the reference's whole-text finds
TAG_LAYOUTS = [
    ("gpt", OK_CALL + "<think>after the call</think>"),                   # a call before the think block
    ("gpt", OK_CALL + "stray</think>"),                                   # a call before a stray </think>
    ("gpt", "<think>" + OK_CALL + "</think>" + OK_CALL),                  # a call inside the think block
    ("gpt", "<think></think><tool_call></tool_call>"),                    # adjacent tags, an empty body
    ("gpt", "<think></think></think>" + OK_CALL),                         # two closers
    ("gpt", "<think><think>x</think>" + OK_CALL),                         # two openers
    ("gpt", "<tool_call><tool_call>" + OK_CALL[len("<tool_call>"):]),     # an opener right after an opener
    ("gpt", OK_CALL[:-len("</tool_call>")] + "</tool_call></tool_call>"),  # a closer right after a closer
    ("gpt", "</think><think>x</think>"),                                  # a closer before the opener
    ("tool", FINE + FINE[:-len("</tool_response>")]),                     # the last response unclosed
    ("tool", "<tool_response>" + FINE),                                   # an opener right before a block
    ("tool", FINE + "</tool_response>" + FINE),                           # a stray closer between blocks
    ("tool", "text before" + FINE + "text after"),                        # text around a block
    ("tool", "  \n "),                                                    # blank: no block, no diagnostic
    ("tool", FINE.replace("\n", "") + FAILED.replace("\n", "")),          # glued blocks
]


@pytest.mark.parametrize("layout", TAG_LAYOUTS)
def test_tag_layouts_equal_the_reference(layout):
    """Each layout alone, after a well-formed turn, and before one: the fast path either equals the
    reference or leaves the row to it."""
    for conv in ((layout,), (("gpt", OK_CALL), layout), (layout, ("gpt", OK_CALL), ("tool", FINE))):
        assert_same(row(*conv))


def test_tag_layouts_are_mostly_taken():
    """The layouts above would check little if the fast path declined them all."""
    taken = sum(assert_same(row(("gpt", OK_CALL), layout)) for layout in TAG_LAYOUTS)
    assert taken >= 10, taken


@GENERATED
@given(st.text(alphabet=st.sampled_from(list("ab\u00e9 \t\n\v\f\r\x1c\x1d\x1e\x1f\x85\xa0\u2003.")), max_size=40))
def test_think_words_is_the_length_of_split(text):
    """Every ASCII character str.split() splits at (the \\x1c-\\x1f separators too), and non-ASCII text (its
    own whitespace: \\x85, \\xa0, \\u2003), against ``len(text.split())``."""
    from trajkit.traces.scan_turns import think_words

    assert think_words(text) == len(text.split())


def test_think_words_of_every_sample_think_block():
    from trajkit.traces.scan_turns import think_words

    blocks = [v[v.index("<think>") + 7:v.index("</think>")] for name in ("kimi.jsonl.xz", "glm-5.1.jsonl.xz")
              for r in sample_rows(name) for m in r["conversations"] for v in [m["value"]]
              if m["from"] == "gpt" and "<think>" in v and "</think>" in v[v.index("<think>"):]]
    assert len(blocks) > 500
    assert [think_words(b) for b in blocks] == [len(b.split()) for b in blocks]
    assert think_words("") == 0 and think_words("  a\x1cb  ") == 2 and think_words("a\xa0b") == 2 == len("a\xa0b".split())
