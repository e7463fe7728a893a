"""Nothing silently changed: filter copies the bytes of kept rows, export keeps argument numbers exactly."""
import json

import pytest

from trajkit.cli.main import main
from trajkit.traces import jsonvalue
from trajkit.traces.blocks import parse_call_body
from trajkit.traces.hermes import parse_row

from .conftest import resp

# numbers a float cannot hold, written the way a user might
ARGS_TEXT = '{"x": 1e400, "n": 123456789012345678901234567890, "f": 0.1000000000000000000001, "m": -9223372036854775809}'
ARGS_COMPACT = '{"x":1e400,"n":123456789012345678901234567890,"f":0.1000000000000000000001,"m":-9223372036854775809}'


def _hermes_line(i, extra=""):
    gpt = f'<think>t</think>\n<tool_call>\n{{"name": "a", "arguments": {ARGS_TEXT}}}\n</tool_call>'
    conv = [{"from": "human", "value": "go"}, {"from": "gpt", "value": gpt},
            {"from": "tool", "value": resp("a", 0, "ok")}]
    body = json.dumps({"id": f"r{i}", "conversations": conv})
    return body[:-1] + extra + "}"


def test_filter_writes_the_original_bytes(tmp_path):
    lines = [
        _hermes_line(0, ', "seed": 12345678901234567890123'),
        _hermes_line(1, ', "name": "caf\\u00e9", "z":   1.0E+2, "a": [1, 2]'),  # escapes, spelling, key order
        _hermes_line(2, ', "big": 1e400'),
    ]
    src = tmp_path / "in.jsonl"
    raw = (lines[0] + "\n" + lines[1] + "\r\n" + lines[2]).encode()  # CRLF and no final newline
    src.write_bytes(raw)
    for suffix, read in ((".jsonl", lambda p: p.read_bytes()),
                         (".jsonl.gz", lambda p: __import__("gzip").decompress(p.read_bytes()))):
        out = tmp_path / f"out{suffix}"
        assert main(["traces", "filter", str(src), "--out", str(out), "-q"]) == 0
        assert read(out) == raw + b"\n"  # each kept line byte for byte; only a missing final newline is added


def test_filter_parquet_with_a_too_big_integer_is_a_message(tmp_path, capsys):
    src = tmp_path / "in.jsonl"
    src.write_text(_hermes_line(0, ', "seed": 1e400') + "\n")
    out = tmp_path / "out.parquet"
    assert main(["traces", "filter", str(src), "--out", str(out), "-q"]) == 2
    assert "write .jsonl to keep rows exactly" in capsys.readouterr().err
    assert [p.name for p in tmp_path.iterdir()] == ["in.jsonl"]


def test_1e400_is_a_well_formed_call():
    call = parse_call_body('{"name": "a", "arguments": {"x": 1e400}}')
    assert call.ok and call.error is None
    assert jsonvalue.dumps(call.arguments) == b'{"x":1e400}'


def test_stats_count_1e400_as_well_formed(tmp_path, capsys):
    src = tmp_path / "in.jsonl"
    src.write_text(_hermes_line(0) + "\n")
    assert main(["traces", "stats", str(src), "--json", "-q"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["tool_calls"] == 1 and data["malformed_tool_calls"] == 0


@pytest.mark.parametrize("form", ["hermes", "openai_string", "openai_object"])
def test_export_keeps_argument_numbers(tmp_path, form):
    if form == "hermes":
        line = _hermes_line(0)
    else:
        args = ARGS_TEXT if form == "openai_string" else "@@"
        row = {"id": "o", "messages": [
            {"role": "user", "content": "go"},
            {"role": "assistant", "content": "", "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "a", "arguments": args}}]},
            {"role": "tool", "tool_call_id": "c1", "content": "ok"}]}
        line = json.dumps(row).replace('"@@"', ARGS_TEXT)  # an object with the numbers as written
    src = tmp_path / "in.jsonl"
    src.write_text(line + "\n")
    out = tmp_path / "sft.jsonl"
    assert main(["traces", "export", str(src), "--format", "openai", "--out", str(out), "-q"]) == 0
    exported = json.loads(out.read_text())  # the arguments travel as a JSON string: compare its text
    args = [m for m in exported["messages"] if m.get("tool_calls")][0]["tool_calls"][0]["function"]["arguments"]
    # a Hermes call keeps its arguments as the model wrote them (the text a template renders back); from
    # OpenAI rows they come as the exact writer's compact JSON
    assert args == (ARGS_TEXT if form == "hermes" else ARGS_COMPACT)


def test_jsonvalue_round_trip_keeps_each_number():
    text = '[1e400, -1e400, 1e-400, 4.9e-324, 18446744073709551616, -0.0, 1.5, 12, 0.1]'
    assert jsonvalue.dumps(jsonvalue.loads(text)) == text.replace(" ", "").encode()


def test_jsonvalue_refuses_nan_and_deep_nesting():
    with pytest.raises(ValueError, match="not a JSON number"):
        jsonvalue.loads('[NaN, 12345678901234567890]')
    with pytest.raises(ValueError, match="nested deeper than 200"):
        jsonvalue.loads("[" * 201 + "]" * 201)
    assert jsonvalue.depth(jsonvalue.loads("[" * 200 + "]" * 200)) == 200
    deep_in_a_row = '{"a": "' + "x" * 300 + '", "b": ' + '{"c": ' * 201 + "1" + "}" * 201 + "}"
    with pytest.raises(ValueError, match="nested deeper than 200"):
        jsonvalue.loads_fast(deep_in_a_row)


@pytest.mark.parametrize("text", ["1", '"x"', "[]", "{}", "[[[]], [[[1]]]]", '{"a": [{"b": {}}], "c": [1, [2]]}',
                                  "[" * 7 + "]" * 7, '[{"a": [[{}]]}, "s", 1.5, null]'])
@pytest.mark.parametrize("limit", [0, 1, 2, 3, 4, 8])
def test_deeper_than_is_depth_over_the_limit(text, limit):
    value = jsonvalue.loads(text)
    assert jsonvalue.deeper_than(value, limit) == (jsonvalue.depth(value) > limit)


def test_a_long_digit_run_without_a_float_parses_the_same_either_way():
    """The lossy re-parse is skipped when orjson's result holds no float: both paths give the same value."""
    text = '{"id": 1234567890123456, "note": "a:1234567890123456789", "n": [9223372036854775807]}'
    assert jsonvalue._maybe_lossy(text)
    assert jsonvalue.loads(text) == json.loads(text)
    assert [type(v) for v in jsonvalue.loads(text)["n"]] == [int]


def test_openai_row_round_trip_of_hermes_text_unchanged():
    """The rendered Hermes text of a call is the body as read, numbers included."""
    trace = parse_row(json.loads(_hermes_line(0)))
    assert ARGS_TEXT in trace.messages[1].text


def test_a_text_of_at_most_two_brackets_per_level_is_too_short_to_nest_too_deeply():
    """The depth guard skips texts of at most 2 * MAX_DEPTH characters: the shortest JSON nested one level
    too deep is one character longer than that."""
    deep = "[" * (jsonvalue.MAX_DEPTH + 1) + "]" * (jsonvalue.MAX_DEPTH + 1)
    assert len(deep) == 2 * jsonvalue.MAX_DEPTH + 2 and not jsonvalue.too_short_to_nest(deep)
    assert jsonvalue.too_short_to_nest(deep[1:-1])
    with pytest.raises(ValueError, match="nested deeper"):
        jsonvalue.loads(deep)
    assert jsonvalue.depth(jsonvalue.loads(deep[1:-1])) == jsonvalue.MAX_DEPTH
