"""Fixtures: a random tiny byte-vocabulary model behind a real uvicorn server on a loopback port, and a
tiny model fine-tuned for a few seconds to answer scripted conversations (real ``<think>`` and
``<tool_call>`` blocks through the real engine and chat template)."""
import contextlib
import copy

import httpx
import pytest
import torch

from trajkit.engine import Engine
from trajkit.gateway import Gateway, GatewayConfig, running
from trajkit.models.spec import TinySpec, build_model
from trajkit.models.tokenizer import byte_tokenizer

TOOLS = [{"type": "function", "function": {
    "name": "terminal", "description": "Run a shell command.",
    "parameters": {"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]}}}]
CALL = {"id": "c0", "type": "function", "function": {"name": "terminal", "arguments": "{\"command\": \"ls\"}"}}
TOOL_CONV = [{"role": "user", "content": "List the files."},
             {"role": "assistant", "content": "", "reasoning_content": "I will run ls.", "tool_calls": [CALL]},
             {"role": "tool", "tool_call_id": "c0", "content": "{\"output\": \"a.txt\", \"exit_code\": 0}"},
             {"role": "assistant", "content": "There is one file: a.txt.", "reasoning_content": "Found it."}]
CHAT_CONV = [{"role": "user", "content": "Say hello."},
             {"role": "assistant", "content": "Hello!", "reasoning_content": "Greet."},
             {"role": "user", "content": "Again."},
             {"role": "assistant", "content": "Hello again!", "reasoning_content": "Greet twice."}]


@pytest.fixture(scope="session", autouse=True)
def _one_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)  # later tests get the thread count they would get alone


def tiny_gateway(locked: bool = True, max_context: int = 256):
    """A gateway serving model ``policy``, a random 16-wide tiny model: ``locked``, the one GatewayEnv builds
    (a session's key reaches that session only); else the open one ``trajkit serve`` builds."""
    from trajkit.envs.agent import episode_gateway

    torch.manual_seed(0)
    model = build_model(TinySpec(vocab_size=259, hidden_size=16, max_positions=512), seed=0)
    build = episode_gateway if locked else Gateway
    return build(Engine(model), byte_tokenizer(), GatewayConfig(model_name="policy", max_context=max_context))


@contextlib.contextmanager
def serving(gateway, timeout: float = 60):
    """``gateway`` on a loopback port with an ``httpx.Client`` at its root; closed (server and gateway) after."""
    try:
        with running(gateway) as url, httpx.Client(base_url=url.removesuffix("/v1"), timeout=timeout) as http:
            yield http
    finally:
        gateway.close()


@pytest.fixture(scope="module")
def random_gateway():
    model = build_model(TinySpec(vocab_size=259, hidden_size=32, max_positions=4096), seed=0, init_scale=5.0)
    gateway = Gateway(Engine(model), byte_tokenizer(), GatewayConfig(model_name="tiny,other", max_context=1024))
    with running(gateway) as url:
        yield gateway, url
    gateway.close()


@pytest.fixture(scope="session")
def scripted_model():
    """Fine-tuned (~20 s on a loaded 2-core CPU) to reproduce TOOL_CONV and CHAT_CONV greedily."""
    from trajkit.recipes.scripted import fit_replies, replay_mismatches

    model = build_model(TinySpec(vocab_size=259, hidden_size=64, num_layers=2, num_heads=4, num_kv_heads=2,
                                 intermediate_size=128, max_positions=4096), seed=0)
    script = [(TOOL_CONV, TOOLS), (CHAT_CONV, None)]
    fit_replies(model, byte_tokenizer(), script, steps=100, lr=5e-3)
    # the tests assert the scripted replies exactly: a fit that missed one is said here, not as a mystery there
    assert replay_mismatches(model, byte_tokenizer(), script) == [], "the scripted model does not replay its script"
    return model


@pytest.fixture
def scripted_server(scripted_model):
    """A fresh gateway over a copy of the scripted model; ``make(template=None)`` -> (gateway, url)."""
    stack = []

    def make(template: str | None = None):
        tok = byte_tokenizer()
        if template is not None:
            tok.chat_template = template
        gateway = Gateway(Engine(copy.deepcopy(scripted_model)), tok, GatewayConfig(model_name="tiny"))
        ctx = running(gateway)
        url = ctx.__enter__()
        stack.append((gateway, ctx))
        return gateway, url

    yield make
    for gateway, ctx in stack:
        ctx.__exit__(None, None, None)
        gateway.close()
