"""Context limits answered the way harnesses understand them (docs/gateway.md, "Context limits").

- ``max_tokens`` past the room left is clamped to it by default: the reply is exactly the engine's own
  greedy continuation of ``room`` tokens (the reference), ``finish_reason: length``;
- with ``max_tokens_overflow: error``, and whenever the prompt alone fills the window, the 400 is vLLM's
  ``context_length_exceeded`` in vLLM's wording; the real Hermes Agent's own classifier (its venv) reads
  the first as an output-cap error with the exact room left and the second as a history to shorten;
- ``/v1/models`` reports the enforced window unless overridden.
"""
import json
import os
import subprocess

import httpx
import openai
import pytest

from trajkit.engine import Engine, SamplingParams
from trajkit.gateway import Gateway, GatewayConfig, running
from trajkit.gateway.errors import output_too_long, prompt_too_long
from trajkit.models.spec import TinySpec, build_model
from trajkit.models.tokenizer import byte_tokenizer

from . import hermes_support as hs

WINDOW = 300


def _gateway(**kw) -> Gateway:
    model = build_model(TinySpec(vocab_size=259, hidden_size=32, max_positions=4096), seed=0, init_scale=5.0)
    return Gateway(Engine(model), byte_tokenizer(), GatewayConfig(model_name="tiny", max_context=WINDOW, **kw))


def _messages(n_chars: int) -> list[dict]:
    return [{"role": "user", "content": "x" * n_chars}]


def test_max_tokens_past_the_window_is_clamped_to_the_room_left():
    gw = _gateway()
    with running(gw) as url:
        r = httpx.post(url + "/chat/completions", json={"model": "tiny", "messages": _messages(250),
                       "max_tokens": 8192, "temperature": 0, "return_token_ids": True}).json()
    gw.close()
    prompt, sampled = r["prompt_token_ids"], r["choices"][0]["token_ids"]
    room = WINDOW - len(prompt)
    assert 0 < room < 40
    ref = gw.engine.generate([prompt], SamplingParams(temperature=0.0, max_new_tokens=room,
                                                      stop_token_ids=gw.stop_ids))[0]
    assert sampled == list(ref.token_ids) and len(prompt) + len(sampled) <= WINDOW
    assert r["choices"][0]["finish_reason"] == ref.finish_reason


def test_error_mode_and_a_prompt_that_fills_the_window_are_vllms_400():
    gw = _gateway(max_tokens_overflow="error")
    client = None
    with running(gw) as url:
        client = openai.OpenAI(base_url=url, api_key="s", max_retries=0)
        with pytest.raises(openai.BadRequestError) as over:
            client.chat.completions.create(model="tiny", messages=_messages(250), max_tokens=8192)
        with pytest.raises(openai.BadRequestError) as full:
            client.chat.completions.create(model="tiny", messages=_messages(400))
        models = client.models.list().data
    gw.close()
    text = gw.tokenizer.apply_chat_template(_messages(250), tokenize=False, add_generation_prompt=True)
    prompt = len(gw.tokenizer.encode(text, add_special_tokens=False))
    assert over.value.body == {"message": (
        f"This model's maximum context length is {WINDOW} tokens. However, you requested 8192 output tokens and "
        f"your prompt contains {prompt} input tokens, for a total of {prompt + 8192} tokens. Please reduce the "
        "length of the input prompt or the number of requested output tokens."),
        "type": "invalid_request_error", "param": "max_tokens", "code": "context_length_exceeded"}
    assert full.value.body["code"] == "context_length_exceeded" and full.value.body["param"] == "messages"
    assert full.value.body["message"].startswith(f"This model's maximum context length is {WINDOW} tokens.")
    assert models[0].context_length == WINDOW and models[0].model_extra["max_model_len"] == WINDOW


def test_the_reported_window_can_be_overridden():
    gw = _gateway(reported_context_length=131072)
    assert gw.models_list()["data"][0]["context_length"] == 131072
    assert gw.models_list()["data"][0]["max_model_len"] == WINDOW
    gw.close()


HERMES_READS = """
import json, sys
from agent.model_metadata import parse_available_output_tokens_from_error, is_output_cap_error
from agent import error_classifier as ec
out = []
for msg in json.loads(sys.argv[1]):
    low = msg.lower()
    out.append({"available": parse_available_output_tokens_from_error(msg),
                "overflow": any(p in low for p in ec._CONTEXT_OVERFLOW_PATTERNS)})
print(json.dumps(out))
"""


def test_the_hermes_agents_classifier_reads_both_errors_as_meant(hermes_venv):
    """Run the agent's own error parsers (its venv) on our messages: the output-cap one yields exactly the
    room left (it retries with a smaller max_tokens), the prompt one is a context overflow with no room
    (it compresses its history)."""
    if not hs.agent_python().exists():
        missing = f"the Hermes Agent virtualenv is missing ({hs.agent_python()}); run `make hermes-venv`"
        if os.environ.get("TRAJKIT_REQUIRE_FIXTURES") == "1":
            pytest.fail(missing, pytrace=False)
        pytest.skip(missing)
    msgs = [output_too_long(2768, 8192, 8192).message, prompt_too_long(9000, 8192, "messages").message,
            output_too_long(100, 50, 120).message]
    proc = subprocess.run([str(hs.agent_python()), "-c", HERMES_READS, json.dumps(msgs)], capture_output=True,
                          text=True, timeout=120, check=True)
    assert json.loads(proc.stdout) == [{"available": 8192 - 2768, "overflow": True},
                                       {"available": None, "overflow": True},
                                       {"available": 20, "overflow": True}]
