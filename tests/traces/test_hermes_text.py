"""The one Hermes layout (:mod:`trajkit.traces.hermes_text`): pinned against hand-written strings, and
parse/render round trips on the real Hermes row of the shared fixtures and on the bundled sample rows."""
import json
import lzma

import pytest

from trajkit.synth import sample_paths
from trajkit.traces.hermes_text import (HERMES_SYSTEM, AssistantParts, assistant_text, call_body, hermes_conversation,
                                        inline_messages, message_text, parse_assistant_text, parse_envelope,
                                        parse_tool_turn, response_envelope, tool_turn, tools_system,
                                        tools_system_preamble)

from ..conftest import _load_real

LS = '{"name": "terminal", "arguments": {"command": "ls"}}'
READ = '{"name": "read_file", "arguments": {"path": "a.txt"}}'
CALL = {"id": "c1", "type": "function", "function": {"name": "terminal", "arguments": '{"command": "ls"}'}}
CALL2 = {"id": "c2", "type": "function", "function": {"name": "read_file", "arguments": {"path": "a.txt"}}}


@pytest.mark.parametrize("msg, text", [
    ({"content": "hi", "reasoning_content": "plan"}, "<think>\nplan\n</think>\nhi"),
    ({"content": "", "reasoning_content": ""}, "<think>\n\n</think>\n"),  # empty reasoning: the empty block
    ({"content": "hi"}, "hi"),  # no reasoning: no block (the Hermes Agent would add <think>\n</think>\n)
    ({"content": None, "reasoning_content": "r", "tool_calls": [CALL]},
     "<think>\nr\n</think>\n<tool_call>\n" + LS + "\n</tool_call>"),
    ({"content": "Looking.", "tool_calls": [CALL, CALL2]},
     "Looking.\n<tool_call>\n" + LS + "\n</tool_call>\n<tool_call>\n" + READ + "\n</tool_call>"),
    ({"content": " keep  spaces \n", "reasoning_content": " r "}, "<think>\n r \n</think>\n keep  spaces \n"),
])
def test_an_assistant_turn_is_written_in_the_one_layout(msg, text):
    assert message_text(msg) == text
    back = parse_assistant_text(text)
    assert back.exact and back.text() == text
    assert (back.reasoning, back.content) == (msg.get("reasoning_content"), msg.get("content") or "")
    assert [call_body(c.name, a) for c, a in zip(back.calls, back.arguments)] == [
        call_body(c["function"]["name"], c["function"]["arguments"]) for c in msg.get("tool_calls") or []]


def test_a_tool_turn_is_one_turn_of_envelopes_named_by_their_calls():
    messages = [{"role": "user", "content": "go"},
                {"role": "assistant", "content": "", "tool_calls": [CALL, CALL2]},
                {"role": "tool", "tool_call_id": "c2", "content": "hello"},  # answers the second call
                {"role": "tool", "tool_call_id": "c1", "content": '{"output": "a.txt", "exit_code": 0}'}]
    expected = ('<tool_response>\n{"tool_call_id": "c2", "name": "read_file", "content": "hello"}\n</tool_response>\n'
                '<tool_response>\n{"tool_call_id": "c1", "name": "terminal", "content": {"output": "a.txt", '
                '"exit_code": 0}}\n</tool_response>')
    assert hermes_conversation(messages, None)[-1] == {"from": "tool", "value": expected}
    assert [parse_envelope(b) for b in parse_tool_turn(expected)] == [
        {"tool_call_id": "c2", "name": "read_file", "content": "hello"},
        {"tool_call_id": "c1", "name": "terminal", "content": {"output": "a.txt", "exit_code": 0}}]
    assert parse_tool_turn(expected.replace("\n<tool_response>", "\n\n<tool_response>")) is None  # other glue


def test_the_system_prompt_and_the_inline_messages():
    tools = [{"type": "function", "function": {"name": "terminal", "parameters": {}}}]
    listed = '[{"type": "function", "function": {"name": "terminal", "parameters": {}}}]'
    assert tools_system(tools) == HERMES_SYSTEM.format(tools=listed)
    assert "<tools>\n" + listed + "\n</tools>\nFor each function call" in tools_system(tools)
    assert tools_system(tools, "Be brief.").startswith("Be brief.\n\nYou are a function calling AI model.")
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "go"},
                {"role": "assistant", "content": "", "reasoning_content": "r", "tool_calls": [CALL]},
                {"role": "tool", "tool_call_id": "c1", "content": "x"}]
    assert inline_messages(messages, tools, "user") == [
        {"role": "system", "content": tools_system(tools, "Be brief.")}, {"role": "user", "content": "go"},
        {"role": "assistant", "content": "<think>\nr\n</think>\n<tool_call>\n" + LS + "\n</tool_call>"},
        {"role": "user", "content": tool_turn([response_envelope("c1", "terminal", "x")])}]
    kept = [{"role": "system", "content": "mine <tools>[]</tools>"}] + messages[1:2]
    assert inline_messages(kept, tools, "tool")[0]["content"] == "mine <tools>[]</tools>"  # already lists them
    assert [t["from"] for t in hermes_conversation(messages[1:], None)] == ["human", "gpt", "tool"]  # no tools


def test_text_no_message_can_carry_is_said():
    after = "<tool_call>\n" + LS + "\n</tool_call>\nDone."  # text after a call
    p = parse_assistant_text(after)
    assert not p.exact and "text after a tool call" in p.why[0]
    spaced = '<tool_call>\n{"arguments": {"command": "ls"}, "name": "terminal"}\n</tool_call>'  # other key order
    p = parse_assistant_text(spaced)
    assert not p.exact and p.arguments == ['{"command":"ls"}'] and "key order" in p.why[0]
    glued = "<think>\nr\n</think>\n\n<tool_call>\n" + LS + "\n</tool_call>"  # a template's glue, read as Hermes text
    p = parse_assistant_text(glued)
    assert p.exact and p.reasoning is None and p.content.startswith("<think>")  # kept whole: still lossless
    assert parse_assistant_text(glued, "\n\n") == AssistantParts("r", "", p.calls, p.arguments)


def _raw_rows(request):
    real = _load_real(request, "kimi-row-0c699abf.json")
    rows = [[(t["from"], t["value"]) for t in real["conversations_preview"]]]
    for path in sample_paths():
        with lzma.open(path, "rt") as fh:
            rows += [[(t["from"], t["value"]) for t in json.loads(line)["conversations"]] for line in fh]
    return rows


def test_render_of_parse_gives_back_the_raw_hermes_text_of_the_data(request):
    rows = _raw_rows(request)
    gpt = [v for row in rows for f, v in row if f == "gpt"]
    exact = [v for v in gpt if parse_assistant_text(v).exact]
    for v in exact:
        assert parse_assistant_text(v).text() == v
    inexact = [v for v in gpt if v not in exact]
    # the only turns no OpenAI message can carry hold a broken call block between good ones (a synthetic
    # sample's deliberate fault: 1 of 1,561 turns); the real row's turn is exact
    assert parse_assistant_text(rows[0][2][1]).exact
    assert inexact and all(parse_assistant_text(v).unreturned for v in inexact), len(inexact)
    tool = [v for row in rows for f, v in row if f == "tool"]
    assert all(tool_turn(parse_tool_turn(v)) == v for v in tool)  # every tool turn is in the layout
    assert parse_tool_turn(rows[0][3][1]) is not None and parse_envelope(parse_tool_turn(rows[0][3][1])[0])


def test_parse_of_render_gives_back_the_parts_of_the_data(request):
    for row in _raw_rows(request):
        for f, v in row:
            if f == "gpt" and parse_assistant_text(v).exact:
                parts = parse_assistant_text(v)
                again = parse_assistant_text(assistant_text(parts.content, parts.bodies(), parts.reasoning))
                assert (again.reasoning, again.content, again.arguments, [c.name for c in again.calls]) == (
                    parts.reasoning, parts.content, parts.arguments, [c.name for c in parts.calls])
            if f == "tool" and parse_tool_turn(v) is not None:
                bodies = parse_tool_turn(v)
                assert parse_tool_turn(tool_turn(bodies)) == bodies
                for b in bodies:
                    env = parse_envelope(b)
                    assert env is None or parse_envelope(response_envelope(**env)) == env


CALL_BLOCK_SPACED = '<tool_call>\n{"name": "terminal", "arguments": {"command":  "ls"}}\n</tool_call>'


def test_the_structured_export_keeps_the_system_prompt_before_the_tools_prompt():
    from trajkit.traces.openai import to_openai
    from trajkit.traces.hermes import parse_row

    tools = [{"type": "function", "function": {"name": "terminal", "description": "Run.", "parameters": {}}}]
    assert tools_system_preamble(tools_system(tools, "Be brief.")) == "Be brief."
    assert tools_system_preamble(tools_system(tools)) == ""
    assert tools_system_preamble(tools_system(tools, "Be brief.") + " edited") is None
    row = {"conversations": [{"from": "system", "value": tools_system(tools, "Be brief.")},
                             {"from": "human", "value": "go"},
                             {"from": "gpt", "value": CALL_BLOCK_SPACED}]}
    messages, listed = to_openai(parse_row(row))
    assert messages[0] == {"role": "system", "content": "Be brief."} and listed[0]["function"]["name"] == "terminal"
    assert messages[2]["tool_calls"][0]["function"]["arguments"] == '{"command":  "ls"}'  # as the model wrote them
