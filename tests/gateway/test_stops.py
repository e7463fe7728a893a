"""Stop ids from the tokenizer's eos, the model's generation_config and the template's end-of-turn marker
(issue 18, the "stops" column); a marker that is no token of the vocabulary is cut as text, with a warning."""
import asyncio
import types

from trajkit.gateway import Gateway, GatewayConfig
from trajkit.gateway.stitch import stitch
from trajkit.gateway.stops import stop_plan
from trajkit.models.tokenizer import byte_tokenizer

from ..traces.templates import LLAMA31_STYLE, plain_header_tokenizer
from .hermes_support import ReplayEngine

ENDOFTEXT_TURNS = ("{%- for m in messages -%}{{- '<|im_start|>' + m.role + '\\n' + m.content + '<|endoftext|>\\n' -}}"
                   "{%- endfor -%}{%- if add_generation_prompt -%}{{- '<|im_start|>assistant\\n' -}}{%- endif -%}")


def _byte(template: str | None = None):
    tok = byte_tokenizer()
    if template is not None:
        tok.chat_template = template
    return tok


def test_chatml_stops_at_its_eos():
    plan = stop_plan(_byte())
    assert plan.ids == (258,) and plan.end_of_turn == "<|im_end|>" and plan.warning is None and not plan.strings


def test_the_templates_end_of_turn_and_generation_config_ids_are_stop_ids():
    tok = _byte(ENDOFTEXT_TURNS)  # turns end with <|endoftext|> (256), the eos is <|im_end|> (258)
    assert stop_plan(tok).ids == (258, 256)
    config = types.SimpleNamespace(eos_token_id=[258, 257])
    assert stop_plan(tok, config).ids == (258, 257, 256)
    assert stop_plan(tok, types.SimpleNamespace(eos_token_id=257)).ids == (258, 257, 256)


def test_a_llama31_style_template_stops_at_eot_id():
    tok = plain_header_tokenizer(["hello there, a few words to train on"] * 50, vocab_size=300)
    plan = stop_plan(tok)
    assert plan.ids == (tok.convert_tokens_to_ids("<|eot_id|>"),) and plan.warning is None


def test_an_end_of_turn_that_is_no_token_is_cut_as_text_and_warned_about():
    plan = stop_plan(_byte(LLAMA31_STYLE))  # the byte vocabulary spells <|eot_id|> in bytes
    assert plan.strings == ("<|eot_id|>",) and "not a special token" in plan.warning


class RecordingReplay(ReplayEngine):
    def generate(self, prompts, params):
        self.params = params
        return super().generate(prompts, params)


def test_the_gateway_stops_where_the_template_ends_a_turn():
    """A failure seen: a Llama-3.1-style template over a vocabulary without <|eot_id|> ran every turn
    to the token limit and wrote the next header into the history. Now the turn ends at the marker, the
    client sees only its content, and the message sent back extends the sampled ids (one chain)."""
    tok = _byte(LLAMA31_STYLE)
    run_on = "hello<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nwhat next"
    gw = Gateway(RecordingReplay(tok, [run_on, "bye"]), tok, GatewayConfig(model_name="tiny", continuous=False))
    try:
        user = [{"role": "user", "content": "hi"}]
        first = asyncio.run(gw.chat({"model": "tiny", "messages": user}, "s"))
        assert first["choices"][0]["message"]["content"] == "hello"
        assert first["choices"][0]["finish_reason"] == "stop"
        back = user + [first["choices"][0]["message"], {"role": "user", "content": "and?"}]
        asyncio.run(gw.chat({"model": "tiny", "messages": back}, "s"))
        records = gw.sessions.find("s").records
        sampled = records[0].prompt_ids + records[0].choices[0].token_ids
        assert records[1].prompt_ids[:len(sampled)] == sampled and len(stitch(records)) == 1
        assert gw._decode(records[0].choices[0].token_ids) == "hello<|eot_id|>"  # ids cut after the marker
    finally:
        gw.close()


def test_the_engine_is_asked_to_stop_at_the_templates_end_of_turn():
    tok = _byte(ENDOFTEXT_TURNS)
    engine = RecordingReplay(tok, ["ok"])
    gw = Gateway(engine, tok, GatewayConfig(model_name="tiny", continuous=False))
    try:
        asyncio.run(gw.chat({"model": "tiny", "messages": [{"role": "user", "content": "hi"}]}, "s"))
    finally:
        gw.close()
    assert set(engine.params[0].stop_token_ids) == {258, 256}
