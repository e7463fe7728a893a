"""The gateway over the real SmolLM2-135M-Instruct (prepared offline; skipped when its GGUF is missing): its
plain ChatML template has no tool support, so the tools go inline as the Hermes ``<tools>`` system block; the
recorded ids decode to the text the openai client got, and a second turn stitches onto the first's tokens."""
import json
import re

import openai
import pytest
import torch

from trajkit.engine import Engine
from trajkit.gateway import Gateway, GatewayConfig, running
from trajkit.gateway.stitch import stitch
from trajkit.models.load import load_model, load_tokenizer

from .conftest import TOOLS

SYSTEM = "You are a helpful assistant with access to tools."
USER = "List the files in the current folder."


@pytest.fixture(scope="module", params=["trajkit", pytest.param("vllm", marks=pytest.mark.side_venv("vllm"))])
def smollm2_gateway(request, smollm2_folder):
    """The gateway over trajkit's engine, and over the vLLM backend (the session's; it must never re-tokenize)."""
    path = smollm2_folder
    threads = torch.get_num_threads()
    torch.set_num_threads(2)
    engine = Engine(load_model(path)) if request.param == "trajkit" else request.getfixturevalue("vllm_backend")
    gateway = Gateway(engine, load_tokenizer(path), GatewayConfig(model_name="smollm2"))
    with running(gateway) as url:
        yield gateway, url
    gateway.close()
    torch.set_num_threads(threads)


def _decode(tok, ids):
    return tok.decode(ids, skip_special_tokens=False, clean_up_tokenization_spaces=False)


def test_smollm2_chat_with_tools_renders_inline_and_records_exact_ids(smollm2_gateway):
    gw, url = smollm2_gateway
    assert gw.renderer.rendering.mode == "inline"  # SmolLM2's ChatML template drops `tools`
    client = openai.OpenAI(base_url=url, api_key="smol", max_retries=0)
    messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": USER}]
    first = client.chat.completions.create(model="smollm2", messages=messages, tools=TOOLS, temperature=0,
                                           max_tokens=12, extra_body={"return_token_ids": True})
    reply = first.choices[0].message
    assert first.choices[0].finish_reason == "length" and not reply.tool_calls
    assert _decode(gw.tokenizer, first.choices[0].token_ids) == reply.content  # the text the client got

    prompt = _decode(gw.tokenizer, first.prompt_token_ids)
    system = prompt.split("<|im_start|>system\n", 1)[1].split("<|im_end|>", 1)[0]
    assert system.startswith(SYSTEM)
    assert json.loads(re.search(r"<tools>\n(.*)\n</tools>", system, re.DOTALL).group(1)) == TOOLS
    assert prompt.endswith(f"<|im_start|>user\n{USER}<|im_end|>\n<|im_start|>assistant\n")

    history = messages + [{"role": "assistant", "content": reply.content}, {"role": "user", "content": "Thanks."}]
    second = client.chat.completions.create(model="smollm2", messages=history, tools=TOOLS, temperature=0,
                                            max_tokens=6, extra_body={"return_token_ids": True})
    assert _decode(gw.tokenizer, second.choices[0].token_ids) == second.choices[0].message.content
    records = gw.sessions.find("smol").records
    [chain] = stitch(records)  # the history came back as a token prefix of the second prompt
    sampled = [t for r in records for t in r.choices[0].token_ids]
    assert [t for t, m in zip(chain.completion_ids, chain.loss_mask) if m] == sampled
    assert _decode(gw.tokenizer, chain.ids) == (prompt + reply.content + "<|im_end|>\n<|im_start|>user\nThanks."
                                                "<|im_end|>\n<|im_start|>assistant\n"
                                                + second.choices[0].message.content)
