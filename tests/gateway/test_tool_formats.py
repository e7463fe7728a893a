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
from trajkit.gateway.stops import end_of_turn_text
from trajkit.models.chat import render
from trajkit.models.tokenizer import byte_tokenizer

from ..traces.templates import LLAMA31_STYLE, plain_header_tokenizer
from .hermes_support import ReplayEngine

CALLS = [{"id": "a", "type": "function", "function": {"name": "terminal", "arguments": '{"command": "ls -l"}'}},
         {"id": "b", "type": "function", "function": {"name": "read", "arguments": '{"path": "a", "n": 10}'}}]
TOOLS = [{"type": "function", "function": {"name": "terminal", "description": "Run a shell command.",
          "parameters": {"type": "object", "properties": {"command": {"type": "string"}}}}}]


# Mistral v3-style: tools in [AVAILABLE_TOOLS], calls as [TOOL_CALLS] + a JSON list with the model's ids,
# results in [TOOL_RESULTS], "</s>" ends an assistant turn (here spelled in the byte vocabulary: stop text);
# reasoning as a leading think block, as LLAMA31_STYLE (a template that drops reasoning is served inline)
MISTRAL_STYLE = r"""
{%- if tools -%}{{- "[AVAILABLE_TOOLS]" + (tools | tojson) + "[/AVAILABLE_TOOLS]" -}}{%- endif -%}
{%- for m in messages -%}
{%- if m.role == "system" -%}{{- "[SYSTEM_PROMPT]" + m.content + "[/SYSTEM_PROMPT]" -}}
{%- elif m.role == "user" -%}{{- "[INST]" + m.content + "[/INST]" -}}
{%- elif m.role == "assistant" -%}
{%- if m.reasoning_content is string -%}{{- "<think>\n" + m.reasoning_content + "\n</think>\n\n" -}}{%- endif -%}
{{- m.content or "" -}}
{%- if m.tool_calls -%}
{{- "[TOOL_CALLS][" -}}
{%- for c in m.tool_calls -%}
{%- if not loop.first -%}{{- ", " -}}{%- endif -%}
{%- set args = c.function.arguments -%}
{{- "{\"name\": " + (c.function.name | tojson) + ", \"arguments\": " -}}
{{- args if args is string else (args | tojson) -}}
{{- ", \"id\": " + (c.id | tojson) + "}" -}}
{%- endfor -%}
{{- "]" -}}
{%- endif -%}
{{- "</s>" -}}
{%- elif m.role == "tool" -%}
{{- "[TOOL_RESULTS]{\"content\": " + (m.content | tojson) + ", \"call_id\": " + (m.tool_call_id | tojson) + "}[/TOOL_RESULTS]" -}}
{%- endif -%}
{%- endfor -%}
"""


@pytest.fixture(scope="module")
def llama_tokenizer():
    return plain_header_tokenizer(["List the files. There is one file: a.txt. Bye."] * 50, vocab_size=400)


def _tokenizer(name, llama_tokenizer):
    if name == "llama3_json":
        return llama_tokenizer
    tok = byte_tokenizer()
    if name == "mistral":
        tok.chat_template = MISTRAL_STYLE
    return tok


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
    turn = render(tok, user + [msg], TOOLS)[len(before):].removesuffix(end_of_turn_text(tok))
    parsed = fmt.parse(turn, "s")
    assert [(c["function"]["name"], json.loads(c["function"]["arguments"])) for c in parsed.calls] == [
        (c["function"]["name"], json.loads(c["function"]["arguments"])) for c in CALLS]
    if name == "mistral":  # the model writes the ids: they are kept
        assert [c["id"] for c in parsed.calls] == [c["id"] for c in CALLS]
    assert parsed.content == (content or None) and not parsed.diagnostics
    assert fmt.assistant_text(parsed.message()) == turn


@pytest.mark.parametrize("name", sorted(FORMATS))
@pytest.mark.parametrize("text", ["plain words\n", " lead and trail ", '{"name": "x"', '{"name": "t", "parameters": 3}',
                                  '<tool_call>\n{"name": "t", "arguments": {\n</tool_call>',
                                  '[TOOL_CALLS][{"name": 1}]', "[TOOL_CALLS]oops"])
def test_text_that_is_no_call_stays_content_verbatim(name, text):
    parsed = FORMATS[name].parse(text, "s")
    assert parsed.calls == [] and parsed.content == text
    assert FORMATS[name].assistant_text(parsed.message()) == text


@pytest.mark.parametrize("name", sorted(FORMATS))
def test_a_call_written_another_way_is_returned_with_a_diagnostic(name):
    other = {"hermes": '<tool_call>\n{"arguments": {"command": "ls"}, "name": "terminal"}\n</tool_call>',
             "llama3_json": '{"parameters": {"command": "ls"}, "name": "terminal"}',
             "mistral": '[TOOL_CALLS][{"arguments": {"command": "ls"}, "name": "terminal", "id": "abc123xyz"}]'}[name]
    parsed = FORMATS[name].parse(other, "s")
    assert parsed.calls[0]["function"]["name"] == "terminal"
    assert [d["code"] for d in parsed.diagnostics] == [NOT_REPRODUCIBLE]


@pytest.mark.parametrize("name", sorted(FORMATS))
def test_a_forced_start_and_the_rest_parse_to_the_named_call(name):
    fmt = FORMATS[name]
    forced = fmt.forced({"type": "function", "function": {"name": "terminal"}})
    rest = {"hermes": '{"command": "ls"}}\n</tool_call>', "llama3_json": '{"command": "ls"}}',
            "mistral": '{"command": "ls"}, "id": "abc123xyz"}]'}[name]
    parsed = fmt.parse(forced + rest, "s")
    assert parsed.calls[0]["function"] == {"name": "terminal", "arguments": '{"command": "ls"}'}
    assert not parsed.diagnostics
    assert fmt.forced("auto") == "" and fmt.forced("required").endswith('{"name": "')


def test_a_format_the_content_only_template_cannot_render_is_refused(smollm2_tokenizer_folder):
    from trajkit.models.load import load_tokenizer

    tok = load_tokenizer(smollm2_tokenizer_folder)
    with pytest.raises(ConfigError, match="--tool-call-format hermes"):
        Gateway(ReplayEngine(tok, ["x"]), tok, GatewayConfig(tool_call_format="llama3_json"))


def test_a_mistral_style_session_keeps_the_models_call_ids_and_stitches():
    tok = _tokenizer("mistral", None)
    call = '[TOOL_CALLS][{"name": "terminal", "arguments": {"command": "ls"}, "id": "k7Qp2mXa9"}]'
    gw = Gateway(ReplayEngine(tok, [call + "</s>", "One file.</s>"]), tok,
                 GatewayConfig(model_name="m", continuous=False))
    assert gw.format.name == "mistral" and gw.stops.strings == ("</s>",)
    try:
        msgs = [{"role": "user", "content": "List the files."}]
        out = asyncio.run(gw.chat({"model": "m", "messages": msgs, "tools": TOOLS}, "s"))["choices"][0]
        m1 = {k: v for k, v in out["message"].items() if k in ("role", "content", "tool_calls")}
        assert out["finish_reason"] == "tool_calls" and m1["tool_calls"][0]["id"] == "k7Qp2mXa9"
        msgs += [m1, {"role": "tool", "tool_call_id": "k7Qp2mXa9", "content": "a.txt"}]
        asyncio.run(gw.chat({"model": "m", "messages": msgs, "tools": TOOLS}, "s"))
        records = gw.sessions.find("s").records
    finally:
        gw.close()
    assert len(stitch(records)) == 1 and '"call_id": "k7Qp2mXa9"' in gw._decode(records[1].prompt_ids)


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
