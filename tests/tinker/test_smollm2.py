"""On SmolLM2-135M-Instruct through the real SDK: ``compute_logprobs`` and prompt top-k equal ``forward``'s
log-probs (base model and after a LoRA step), and a ``role_colon`` sample stops at ``"\\n\\nUser:"`` with the
stop text kept, as tinker-cookbook's ``RoleColonRenderer.parse_response`` needs it."""
import pytest
import tinker
import torch
from tinker import types

from trajkit.tinker.server import load_service, running

ROLE_COLON = ("User: What is 2 + 2?\n\nAssistant: 4\n\nUser: What is 3 + 5?\n\nAssistant: 8\n\n"
              "User: What is 1 + 1?\n\nAssistant:")


@pytest.fixture(scope="module")
def smol(smollm2_folder, tmp_path_factory):
    threads = torch.get_num_threads()
    torch.set_num_threads(2)
    service = load_service(smollm2_folder, "smol", str(tmp_path_factory.mktemp("ck")))
    with running(service) as url:
        client = tinker.ServiceClient(base_url=url, api_key="tml-test")
        yield service, client
        client.holder.close()
    torch.set_num_threads(threads)


def _forward(tc, tokens):
    datum = types.Datum(model_input=types.ModelInput.from_ints(tokens[:-1]),
                        loss_fn_inputs={"target_tokens": tokens[1:], "weights": [1.0] * (len(tokens) - 1)})
    return torch.tensor(tc.forward([datum], "cross_entropy").result().loss_fn_outputs[0]["logprobs"].tolist())


def test_prompt_logprobs_equal_forward_on_smollm2(smol):
    service, client = smol
    tokens = service.tokenizer.encode("The capital of France is Paris, and the capital of Italy is Rome.",
                                      add_special_tokens=False)
    tc = client.create_lora_training_client(base_model="smol", rank=8, seed=0).result()
    base = client.create_sampling_client(base_model="smol").result()
    res = base.sample(types.ModelInput.from_ints(tokens), 1, types.SamplingParams(max_tokens=1),
                      include_prompt_logprobs=True, topk_prompt_logprobs=3).result()
    got = res.prompt_logprobs
    assert got[0] is None and base.compute_logprobs(types.ModelInput.from_ints(tokens)).result() == got
    torch.testing.assert_close(torch.tensor(got[1:]), _forward(tc, tokens), rtol=0, atol=1e-5)
    for t, row in enumerate(res.topk_prompt_logprobs[1:], start=1):
        assert len(row) == 3 and row[0][1] >= row[1][1] >= row[2][1]
        own = [v for i, v in row if i == tokens[t]]
        assert row[0][1] >= got[t] - 1e-6 and all(abs(v - got[t]) < 1e-5 for v in own)

    tc.forward_backward([types.Datum(model_input=types.ModelInput.from_ints(tokens[:-1]),
                                     loss_fn_inputs={"target_tokens": tokens[1:], "weights": [1.0] * (len(tokens) - 1)})],
                        "cross_entropy").result()
    tc.optim_step(types.AdamParams(learning_rate=1e-3)).result()
    trained = tc.save_weights_and_get_sampling_client().result()
    after = trained.compute_logprobs(types.ModelInput.from_ints(tokens)).result()
    want = _forward(tc, tokens)
    torch.testing.assert_close(torch.tensor(after[1:]), want, rtol=0, atol=1e-5)  # 0.0 measured on this CPU
    assert float((want - torch.tensor(got[1:])).abs().max()) > 1e-3  # the step moved them


def test_role_colon_sample_stops_at_the_user_turn(smol):
    """Greedy SmolLM2 continues this role-colon prompt with its answer, then "\\n\\nUser:" (checked unstopped first)."""
    service, client = smol
    tok = service.tokenizer
    prompt = types.ModelInput.from_ints(tok.encode(ROLE_COLON, add_special_tokens=False))
    sampler = client.create_sampling_client(base_model="smol").result()
    free = sampler.sample(prompt, 1, types.SamplingParams(max_tokens=16, temperature=0.0, stop=[])).result()
    tokens = free.sequences[0].tokens
    marker = tok.encode("\n\nUser:", add_special_tokens=False)
    assert len(marker) > 1  # several tokens: no stop id can do it
    at = next(i for i in range(len(tokens)) if tokens[i:i + len(marker)] == marker)
    res = sampler.sample(prompt, 1, types.SamplingParams(max_tokens=16, temperature=0.0,
                                                          stop=["\n\nUser:"])).result()
    seq = res.sequences[0]
    assert seq.stop_reason == "stop" and seq.tokens == tokens[:at + len(marker)]
    text = tok.decode(seq.tokens)
    parts = text.split("\n\nUser:")  # RoleColonRenderer.parse_response: two parts = STOP_SEQUENCE
    assert len(parts) == 2 and parts[1] == "" and parts[0] == tok.decode(tokens[:at])
