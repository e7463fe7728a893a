"""verifiers' real token client against the gateway: ``renderers.client.generate`` (the call verifiers 0.4.0's
``TrainClient`` makes, run in the verifiers venv: ``make verifiers-venv``) renders SmolLM2's chat itself, posts
``/inference/v1/generate``, reads ``max_model_len`` from ``/v1/models``, and must get back exactly the ids and
log-probs the gateway recorded in the session it named, an independent scoring forward's log-probs, and the
ids an engine call with the same prompt and seed samples."""
import json
import os
import subprocess
from pathlib import Path

import pytest
import torch

from tests.conftest import skip_or_fail
from trajkit.engine import Engine, SamplingParams
from trajkit.gateway import Gateway, GatewayConfig, running
from trajkit.models.load import load_model, load_tokenizer

CACHE = Path(os.environ.get("TRAJKIT_CACHE", Path.home() / ".cache" / "trajkit"))
VERIFIERS_PYTHON = Path(os.environ.get("TRAJKIT_VERIFIERS_PYTHON", CACHE / "verifiers-0.4.0" / "bin" / "python"))
CLIENT = Path(__file__).with_name("renderers_client.py")


@pytest.fixture
def verifiers_python(request, verifiers_venv):
    if not VERIFIERS_PYTHON.exists():
        skip_or_fail(request, f"verifiers' venv is missing ({VERIFIERS_PYTHON}): make verifiers-venv, or set "
                              "TRAJKIT_VERIFIERS_PYTHON")
    return str(VERIFIERS_PYTHON)


def test_verifiers_token_client_gets_the_gateways_exact_ids_and_logprobs(verifiers_python, smollm2_folder):
    threads = torch.get_num_threads()
    torch.set_num_threads(2)
    tokenizer = load_tokenizer(smollm2_folder)
    gateway = Gateway(Engine(load_model(smollm2_folder)), tokenizer, GatewayConfig(model_name="smollm2"))
    try:
        with running(gateway) as url:
            env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
            proc = subprocess.run([verifiers_python, str(CLIENT), url, str(Path(smollm2_folder)), "smollm2", "vf-1"],
                                  capture_output=True, text=True, timeout=600, env=env, check=False)
        assert proc.returncode == 0, proc.stderr[-3000:]
        calls = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
        records = gateway.sessions.find("vf-1").records
        assert len(calls) == len(records) == 2 and all(r.endpoint == "generate" for r in records)
        for turn, (call, rec) in enumerate(zip(calls, records)):
            assert call["prompt_ids"] == rec.prompt_ids
            assert call["completion_ids"] == rec.choices[0].token_ids and call["completion_logprobs"] == \
                rec.choices[0].logprobs
            ref = gateway.engine.generate([rec.prompt_ids], SamplingParams(
                temperature=0.7, max_new_tokens=12, seed=5 + turn, stop_token_ids=list(gateway.stop_ids)))[0]
            assert call["completion_ids"] == ref.token_ids
            scored = gateway.engine.token_logprobs([rec.prompt_ids], [rec.choices[0].token_ids],
                                                   SamplingParams(temperature=0.7, max_new_tokens=12))[0]
            assert call["completion_logprobs"] == pytest.approx(scored, abs=1e-4)
        # the client rendered the prompt with SmolLM2's own chat template: the same text the chat route renders
        first = tokenizer.apply_chat_template([{"role": "user", "content": "What is 2 + 3?"}], tokenize=False,
                                              add_generation_prompt=True)
        assert tokenizer.decode(calls[0]["prompt_ids"]) == first
    finally:
        gateway.close()
        torch.set_num_threads(threads)
