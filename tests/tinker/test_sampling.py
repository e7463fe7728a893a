"""Prompt log-probs, top-k log-probs, stop strings and REST answers through the real SDK on a tiny model.

References: ``forward`` of a training client (the server's other path to the same log-probs), the base
model's own ``log_softmax`` computed here, trajkit's engine over a copy of the base for the samples, and,
for stop strings, the token ids themselves (ASCII bytes are one token each in the byte tokenizer).
"""
import copy
import math

import pytest
import tinker
import torch
from tinker import types

from trajkit.engine import Engine, SamplingParams

PROMPT = [104, 101, 108, 108, 111, 32, 119, 111, 114, 108, 100, 33, 7, 200, 3]


def _forward_logprobs(tc, tokens):
    """``forward``'s log-probs of ``tokens[1:]`` after each prefix: what Tinker users train with."""
    datum = types.Datum(model_input=types.ModelInput.from_ints(tokens[:-1]),
                        loss_fn_inputs={"target_tokens": tokens[1:], "weights": [1.0] * (len(tokens) - 1)})
    return tc.forward([datum], "cross_entropy").result().loss_fn_outputs[0]["logprobs"].tolist()


def _reference_logp(base, tokens):
    with torch.no_grad():
        return torch.log_softmax(base(input_ids=torch.tensor([tokens])).logits[0, :-1].float(), -1)  # [N-1, V]


def test_compute_logprobs_and_prompt_topk_equal_forward(server):
    """Base model: the sampler's prompt log-probs equal a fresh LoRA client's ``forward`` exactly (B = 0) and
    the base model's own log-softmax; top-k come from the same logits; after a step, a snapshot's prompt
    log-probs still equal the client's ``forward`` exactly."""
    service, client, base, _ = server
    tc = client.create_lora_training_client(base_model="tiny", rank=4, seed=1).result()
    sampler = client.create_sampling_client(base_model="tiny").result()
    got = sampler.compute_logprobs(types.ModelInput.from_ints(PROMPT)).result()
    want = _forward_logprobs(tc, PROMPT)
    assert got[0] is None and len(got) == len(PROMPT)
    assert got[1:] == want  # exactly: the same float32 forward of the same weights
    ref = _reference_logp(base, PROMPT)
    torch.testing.assert_close(torch.tensor(got[1:]), ref.gather(-1, torch.tensor(PROMPT[1:])[:, None])[:, 0],
                               rtol=0, atol=1e-6)

    k = 5
    res = sampler.sample(types.ModelInput.from_ints(PROMPT), 1, types.SamplingParams(max_tokens=2, seed=0),
                         include_prompt_logprobs=True, topk_prompt_logprobs=k).result()
    assert res.prompt_logprobs == got
    assert res.topk_prompt_logprobs[0] is None and len(res.topk_prompt_logprobs) == len(PROMPT)
    values, ids = ref.topk(k, dim=-1)
    for t, row in enumerate(res.topk_prompt_logprobs[1:]):
        assert [i for i, _ in row] == ids[t].tolist()
        torch.testing.assert_close(torch.tensor([v for _, v in row]), values[t], rtol=0, atol=1e-6)
        assert row[0][1] >= got[t + 1]  # the top token is at least as likely as the prompt's own

    last = sampler.compute_logprobs(types.ModelInput.from_ints(PROMPT), prompt_logprobs_last_n=4).result()
    assert last[:-4] == [None] * (len(PROMPT) - 4) and last[-4:] == got[-4:]

    tc.forward_backward([types.Datum(model_input=types.ModelInput.from_ints(PROMPT[:-1]),
                                     loss_fn_inputs={"target_tokens": PROMPT[1:],
                                                     "weights": [1.0] * (len(PROMPT) - 1)})],
                        "cross_entropy").result()
    tc.optim_step(types.AdamParams(learning_rate=5e-2)).result()
    trained = tc.save_weights_and_get_sampling_client().result()
    got = trained.compute_logprobs(types.ModelInput.from_ints(PROMPT)).result()
    want = _forward_logprobs(tc, PROMPT)
    assert got[1:] == want  # exactly: the adapter added unmerged, as peft adds it
    assert not torch.allclose(torch.tensor(got[1:]), ref.gather(-1, torch.tensor(PROMPT[1:])[:, None])[:, 0],
                              atol=1e-3)  # the step changed them: the adapter is in the scores


def test_sampled_topk_logprobs_equal_the_engines(server):
    _, client, base, _ = server
    sampler = client.create_sampling_client(base_model="tiny").result()
    params = types.SamplingParams(max_tokens=5, seed=3, stop=[])
    res = sampler.sample(types.ModelInput.from_ints(PROMPT[:4]), 2, params, topk_sample_logprobs=3).result()
    expected = Engine(copy.deepcopy(base).eval()).generate(
        [PROMPT[:4]] * 2, SamplingParams(max_new_tokens=5, seed=3, top_logprobs=3))
    for s, c in zip(res.sequences, expected):
        assert s.tokens == c.token_ids
        assert [[i for i, _ in row] for row in s.topk_logprobs] == [[i for i, _ in row] for row in c.top_logprobs]
        for row, ref in zip(s.topk_logprobs, c.top_logprobs):
            torch.testing.assert_close(torch.tensor([v for _, v in row]), torch.tensor([v for _, v in ref]),
                                       rtol=0, atol=1e-5)


def _ascii_pair(tokens):
    """The first two consecutive ASCII printable tokens (one byte, one character each)."""
    return next(i for i in range(len(tokens) - 1) if all(32 <= t < 127 for t in tokens[i:i + 2]))


def test_a_stop_string_of_several_tokens_ends_the_sample_after_its_text(server):
    """Greedy, unstopped, then stopped on two characters it emitted: the sample is the unstopped one up to
    and including the token that completes the first occurrence (Tinker keeps the stop text)."""
    _, client, _, _ = server
    sampler = client.create_sampling_client(base_model="tiny").result()
    prompt = types.ModelInput.from_ints(PROMPT[:3])
    free = sampler.sample(prompt, 1, types.SamplingParams(max_tokens=40, temperature=0.0, stop=[])).result()
    tokens = free.sequences[0].tokens
    i = _ascii_pair(tokens)
    stop = bytes(tokens[i:i + 2]).decode()
    first = next(j for j in range(len(tokens) - 1) if tokens[j:j + 2] == tokens[i:i + 2])
    assert 258 not in tokens[:first + 2]  # no EOS before it (EOS stays a stop beside the string)
    res = sampler.sample(prompt, 1, types.SamplingParams(max_tokens=40, temperature=0.0, stop=[stop])).result()
    seq = res.sequences[0]
    assert seq.tokens == tokens[:first + 2] and seq.stop_reason == "stop"
    assert seq.logprobs == pytest.approx(free.sequences[0].logprobs[:first + 2], abs=1e-6)
    none = sampler.sample(prompt, 1, types.SamplingParams(max_tokens=6, temperature=0.0, stop=["\x00\x00never"])).result()
    assert none.sequences[0].stop_reason == "length" and none.sequences[0].tokens == tokens[:6]


def test_unimplemented_request_fields_are_refused_by_name(server):
    _, client, _, _ = server
    sampler = client.create_sampling_client(base_model="tiny").result()
    ids = types.TensorData.from_torch(torch.full((len(PROMPT) - 1, 1), 5, dtype=torch.int64))
    with pytest.raises(Exception, match=r"SampleRequest\.target_prompt_logprobs=.*not implemented"):
        sampler.sample(types.ModelInput.from_ints(PROMPT), 1, types.SamplingParams(max_tokens=1),
                       include_prompt_logprobs=True, target_prompt_logprobs=ids).result()
    with pytest.raises(Exception, match=r"SampleRequest\.prompt_alt_tokens_k=2"):
        sampler.sample(types.ModelInput.from_ints(PROMPT), 1, types.SamplingParams(max_tokens=1),
                       prompt_alt_tokens_k=2).result()


def test_rest_routes_list_runs_and_name_what_is_missing(server):
    _, client, _, url = server
    tc = client.create_lora_training_client(base_model="tiny", rank=2).result()
    rest = tinker.RestClient(_holder=client.holder)  # the module's connection (closed with it)
    runs = rest.list_training_runs(limit=100).result()
    assert tc.model_id in [r.training_run_id for r in runs.training_runs]
    assert runs.cursor.total_count == len(runs.training_runs) and all(r.base_model == "tiny" for r in runs.training_runs)
    import httpx

    answer = httpx.get(f"{url}/api/v1/sessions", headers={"X-API-Key": "tml-test"})
    assert answer.status_code == 404
    assert answer.json()["error"] == ("trajkit's Tinker server does not implement GET /api/v1/sessions "
                                      "(docs/tinker.md lists what it implements)")
    with pytest.raises(tinker.NotFoundError, match="does not implement GET /api/v1/sessions"):
        rest.list_sessions().result()


def test_nan_marks_the_unscored_positions():
    """The wire form: NaN where Tinker has no log-prob (the SDK reads NaN as None)."""
    from trajkit.tinker import wire
    from trajkit.tinker.sampling import PromptScores
    from trajkit.tinker.service import SampleResult
    from tinker.proto.response_conv import deserialize_sample_response

    out = deserialize_sample_response(wire.encode_sample(SampleResult([], PromptScores([math.nan, -1.5], [], []))))
    assert out.prompt_logprobs == [None, -1.5] and out.topk_prompt_logprobs is None


def test_stop_as_the_sdk_defines_it():
    """None: EOS; []: nothing; ids or strings: those and EOS (strings stay text, whatever their length: the
    engine matches them as it samples)."""
    from trajkit.models.tokenizer import byte_tokenizer
    from trajkit.tinker.sampling import Stops, stops

    tok = byte_tokenizer()
    assert stops(None, tok) == Stops((258,)) and stops([], tok) == Stops(())
    assert stops([5, 7], tok) == Stops((5, 7, 258))
    assert stops("\n\nUser:", tok) == Stops((258,), ("\n\nUser:",))
    assert stops(["<|im_end|>", "ab"], tok) == Stops((258,), ("<|im_end|>", "ab"))
    assert stops(["a"], tok) == Stops((258,), ("a",))


def test_adapter_logprobs_before_any_client_add_the_lora_term():
    """No training client yet (plain base model, no peft): a saved adapter's scores equal the merged model's."""
    from tests.tinker.conftest import tiny_base
    from trajkit.engine.adapters import LoraAdapter
    from trajkit.tinker.training import TrainingClients

    base = tiny_base()
    g = torch.Generator().manual_seed(0)
    name = "model.layers.0.self_attn.q_proj"
    w = base.get_submodule(name).weight
    a, b = torch.randn(2, w.shape[1], generator=g), torch.randn(w.shape[0], 2, generator=g)
    got = TrainingClients(copy.deepcopy(base)).adapter_logprobs(LoraAdapter({name: (a, b)}, 0.5), PROMPT)
    merged = copy.deepcopy(base)
    with torch.no_grad():
        merged.get_submodule(name).weight += 0.5 * b @ a
    torch.testing.assert_close(got, _reference_logp(merged, PROMPT), rtol=0, atol=1e-5)
    assert not torch.allclose(got, _reference_logp(base, PROMPT), atol=1e-3)
