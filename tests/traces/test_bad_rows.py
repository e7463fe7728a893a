"""One bad row never kills a command: each kind of bad row seen in real data, between two good rows, through stats, report,
export and filter. Rows that cannot be a trace are skipped with ONE warning naming file:line and field;
rows that can are kept with a diagnostic."""
import json

import pytest

from trajkit.cli.main import main

from .conftest import call, resp

TOOL = {"type": "function", "function": {"name": "t", "description": "d", "parameters": {
    "type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]}}}


def _hermes(i, *, tools=None, gpt=None, from_="gpt"):
    row = {"id": f"h{i}", "conversations": [
        {"from": "human", "value": "go"},
        {"from": from_, "value": gpt or "<think>x</think>\n" + call("t", {"a": "b"})},
        {"from": "tool", "value": resp("t", 0, "ok")}]}
    row["tools"] = json.dumps([tools or TOOL])
    return row


def _bad_schema(**params):
    return {"type": "function", "function": {"name": "t", "parameters": {"type": "object", **params}}}


def _deep_args(levels):
    return ('<tool_call>\n{"name": "t", "arguments": {"a": ' + "[" * levels + "]" * levels + "}}\n</tool_call>")


def _openai(i, content="hi", tool_calls=None):
    msg = {"role": "assistant", "content": content}
    if tool_calls is not None:
        msg["tool_calls"] = tool_calls
    return {"id": f"o{i}", "messages": [{"role": "user", "content": "go"}, msg]}


# (bad row, field named in the one warning) -- the row is skipped
SKIPPED = {
    "from_list": (_hermes(1, from_=["gpt"]), "conversations[1].from"),
    "text_null": (_openai(1, content=[{"type": "text", "text": None}]), "messages[1].content[0].text"),
    "tool_calls_5": (_openai(1, tool_calls=5), "messages[1].tool_calls"),
}
# (bad row, diagnostic code) -- the row is kept, its problem is a diagnostic
KEPT = {
    "required_5": (_hermes(1, tools=_bad_schema(required=5)), "bad_tool_schema"),
    "properties_str": (_hermes(1, tools=_bad_schema(properties="x")), "bad_tool_schema"),
    "enum_null": (_hermes(1, tools=_bad_schema(properties={"a": {"enum": None}})), "bad_tool_schema"),
    "type_object": (_hermes(1, tools=_bad_schema(properties={"a": {"type": {"x": 1}}})), "bad_tool_schema"),
    "args_254": (_hermes(1, gpt=_deep_args(254)), "malformed_tool_call"),
    "args_1023": (_hermes(1, gpt=_deep_args(1023)), "malformed_tool_call"),
}


def _file(tmp_path, bad):
    path = tmp_path / "in.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in (_hermes(0), bad, _hermes(2))))
    return path


def _run(tmp_path, capsys, command, path):
    out = {"stats": [], "report": ["--out", str(tmp_path / "rep")],
           "export": ["--format", "openai", "--out", str(tmp_path / "sft.jsonl")],
           "filter": ["--out", str(tmp_path / "kept.jsonl")]}[command]
    capsys.readouterr()
    code = main(["traces", command, str(path), *out, "-q"] + (["--json"] if command in ("stats", "filter") else []))
    return code, capsys.readouterr()


COMMANDS = ["stats", "report", "export", "filter"]


def _kept_ids(tmp_path, command, stdout):
    if command == "stats":
        return json.loads(stdout)["traces"]
    if command == "report":
        return json.loads((tmp_path / "rep" / "stats.json").read_text())["traces"]
    name = "sft.jsonl" if command == "export" else "kept.jsonl"
    return [json.loads(line)["id"] for line in (tmp_path / name).read_text().splitlines()]


@pytest.mark.parametrize("command", COMMANDS)
@pytest.mark.parametrize("case", sorted(SKIPPED))
def test_unreadable_row_is_skipped_with_one_warning(tmp_path, capsys, command, case):
    bad, field = SKIPPED[case]
    path = _file(tmp_path, bad)
    code, cap = _run(tmp_path, capsys, command, path)
    assert code == 0
    warnings = [line for line in cap.err.splitlines() if line]
    assert len(warnings) == 1 and f"{path}:2: field {field}:" in warnings[0]
    kept = _kept_ids(tmp_path, command, cap.out)
    assert kept == (2 if command in ("stats", "report") else ["h0", "h2"])


@pytest.mark.parametrize("command", COMMANDS)
@pytest.mark.parametrize("case", sorted(KEPT))
def test_understood_row_is_kept_with_a_diagnostic(tmp_path, capsys, command, case):
    bad, code_name = KEPT[case]
    path = _file(tmp_path, bad)
    code, cap = _run(tmp_path, capsys, command, path)
    assert code == 0 and cap.err == ""
    kept = _kept_ids(tmp_path, command, cap.out)
    if command == "stats":
        data = json.loads(cap.out)
        assert kept == 3 and data["diagnostics"].get(code_name) == 1
    elif command == "report":
        assert kept == 3
    elif command == "export" and code_name == "malformed_tool_call":
        assert kept == ["h0", "h2"]  # a malformed call cannot be an OpenAI tool_call: skipped and counted
    else:
        assert kept == ["h0", "h1", "h2"]


def test_openai_tools_as_a_json_string_are_accepted(tmp_path, capsys):
    row = _openai(1, content="", tool_calls=[{"id": "c", "type": "function",
                                              "function": {"name": "t", "arguments": '{"a": 1}'}}])
    row["tools"] = json.dumps([TOOL])
    path = tmp_path / "o.jsonl"
    path.write_text(json.dumps(row) + "\n")
    assert main(["traces", "stats", str(path), "--json", "-q"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["traces"] == 1 and data["invalid_argument_calls"] == 1  # "a" must be a string
