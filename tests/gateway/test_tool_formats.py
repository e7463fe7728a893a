"""One conformance suite for the tool-call formats (trajkit/gateway/formats.py), each format against its own
template, and a Llama-3.1-style 3-turn tool session through the gateway that stitches into one chain with
parsed calls (issue 18, item 4)."""
import asyncio
import json

import pytest

from trajkit.errors import ConfigError
from trajkit.gateway import Gateway, GatewayConfig
from trajkit.gateway.formats import FORMATS, detect_format
from trajkit.gateway.parse import NOT_REPRODUCIBLE
from trajkit.gateway.stitch import stitch
from trajkit.models.chat import render
from trajkit.models.tokenizer import byte_tokenizer

from ..traces.templates import LLAMA31_STYLE, plain_header_tokenizer
from .hermes_support import ReplayEngine

CALLS = [{"id": "a", "type": "function", "function": {"name": "terminal", "arguments": '{"command": "ls -l"}'}},
         {"id": "b", "type": "function", "function": {"name": "read", "arguments": '{"path": "a", "n": 10}'}}]
TOOLS = [{"type": "function", "function": {"name": "terminal", "description": "Run a shell command.",
          "parameters": {"type": "object", "properties": {"command": {"type": "string"}}}}}]


@pytest.fixture(scope="module")
def llama_tokenizer():
    return plain_header_tokenizer(["List the files. There is one file: a.txt. Bye."] * 50, vocab_size=400)


def _tokenizer(name, llama_tokenizer):
    return byte_tokenizer() if name == "hermes" else llama_tokenizer


@pytest.mark.parametrize("name", sorted(FORMATS))
def test_the_template_is_detected_as_its_format(name, llama_tokenizer):
    assert detect_format(_tokenizer(name, llama_tokenizer)) == name


@pytest.mark.parametrize("name", sorted(FORMATS))
@pytest.mark.parametrize("content", ["", "Let me look."])
def test_calls_written_by_the_template_parse_back_to_the_message(name, content, llama_tokenizer):
    """The reference is the template's own render of the message: its assistant text parses to the same
    calls and content, without a diagnostic, and the format writes it back identically."""
    fmt, tok = FORMATS[name], _tokenizer(name, llama_tokenizer)
    msg = {"role": "assistant", "content": content, "tool_calls": CALLS}
    user = [{"role": "user", "content": "hi"}]
    before = render(tok, user, TOOLS, add_generation_prompt=True)
    turn = render(tok, user + [msg], TOOLS)[len(before):].removesuffix("\n").removesuffix(tok.eos_token)
    parsed = fmt.parse(turn, "s")
    assert [(c["function"]["name"], json.loads(c["function"]["arguments"])) for c in parsed.calls] == [
        (c["function"]["name"], json.loads(c["function"]["arguments"])) for c in CALLS]
    assert parsed.content == (content or None) and not parsed.diagnostics
    assert fmt.assistant_text(parsed.message()) == turn


@pytest.mark.parametrize("name", sorted(FORMATS))
@pytest.mark.parametrize("text", ["plain words\n", " lead and trail ", '{"name": "x"', '{"name": "t", "parameters": 3}',
                                  '<tool_call>\n{"name": "t", "arguments": {\n</tool_call>'])
def test_text_that_is_no_call_stays_content_verbatim(name, text):
    parsed = FORMATS[name].parse(text, "s")
    assert parsed.calls == [] and parsed.content == text
    assert FORMATS[name].assistant_text(parsed.message()) == text


@pytest.mark.parametrize("name", sorted(FORMATS))
def test_a_call_written_another_way_is_returned_with_a_diagnostic(name):
    other = {"hermes": '<tool_call>\n{"arguments": {"command": "ls"}, "name": "terminal"}\n</tool_call>',
             "llama3_json": '{"parameters": {"command": "ls"}, "name": "terminal"}'}[name]
    parsed = FORMATS[name].parse(other, "s")
    assert parsed.calls[0]["function"]["name"] == "terminal"
    assert [d["code"] for d in parsed.diagnostics] == [NOT_REPRODUCIBLE]


@pytest.mark.parametrize("name", sorted(FORMATS))
def test_a_forced_start_and_the_rest_parse_to_the_named_call(name):
    fmt = FORMATS[name]
    forced = fmt.forced({"type": "function", "function": {"name": "terminal"}})
    rest = {"hermes": '{"command": "ls"}}\n</tool_call>', "llama3_json": '{"command": "ls"}}'}[name]
    parsed = fmt.parse(forced + rest, "s")
    assert parsed.calls[0]["function"] == {"name": "terminal", "arguments": '{"command": "ls"}'}
    assert fmt.forced("auto") == "" and fmt.forced("required").endswith('{"name": "')


def test_a_format_the_content_only_template_cannot_render_is_refused(smollm2_tokenizer_folder):
    from trajkit.models.load import load_tokenizer

    tok = load_tokenizer(smollm2_tokenizer_folder)
    with pytest.raises(ConfigError, match="--tool-call-format hermes"):
        Gateway(ReplayEngine(tok, ["x"]), tok, GatewayConfig(tool_call_format="llama3_json"))


def test_a_llama31_style_tool_session_stitches_into_one_chain_with_parsed_calls(llama_tokenizer):
    """Three turns: a call (a bare JSON object after the header), the result in an ipython turn, an answer;
    a new user turn, an answer. Replies end with <|eot_id|> (the ReplayEngine appends the eos)."""
    tok = llama_tokenizer
    replies = ['{"name": "terminal", "parameters": {"command": "ls"}}', "There is one file: a.txt.", "Bye."]
    gw = Gateway(ReplayEngine(tok, replies), tok, GatewayConfig(model_name="m", continuous=False))
    assert gw.format.name == "llama3_json" and gw.stop_ids == (tok.convert_tokens_to_ids("<|eot_id|>"),)

    def chat(messages):
        out = asyncio.run(gw.chat({"model": "m", "messages": messages, "tools": TOOLS}, "s"))["choices"][0]
        return out, {k: v for k, v in out["message"].items() if k in ("role", "content", "tool_calls")}
    try:
        msgs = [{"role": "user", "content": "List the files."}]
        first, m1 = chat(msgs)
        assert first["finish_reason"] == "tool_calls" and m1["content"] is None
        assert m1["tool_calls"][0]["function"] == {"name": "terminal", "arguments": '{"command": "ls"}'}
        msgs += [m1, {"role": "tool", "tool_call_id": m1["tool_calls"][0]["id"], "content": "a.txt"}]
        _, m2 = chat(msgs)
        assert m2["content"] == "There is one file: a.txt."
        _, m3 = chat(msgs + [m2, {"role": "user", "content": "Thanks."}])
        records = gw.sessions.find("s").records
    finally:
        gw.close()
    assert "<|start_header_id|>ipython<|end_header_id|>\n\na.txt<|eot_id|>" in gw._decode(records[1].prompt_ids)
    [chain] = stitch(records)
    sampled = [t for r in records for t in r.choices[0].token_ids]
    assert [t for t, m in zip(chain.completion_ids, chain.loss_mask) if m] == sampled
    assert not any(r.choices[0].message.get("trajkit_diagnostics") for r in records)
