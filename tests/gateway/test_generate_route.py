"""verifiers' token route ``POST /inference/v1/generate`` beside the OpenAI routes: the same engine output,
records, sessions, stitching and errors (random tiny model behind a real uvicorn server). The wire format
is the one verifiers' ``renderers.client.generate`` writes and parses (its checks are restated in
:func:`_renderers_parse`: ``token_id:N`` entries, one per sampled id, finite log-probs)."""
import math

import httpx
import openai
import pytest

from trajkit.engine import SamplingParams
from trajkit.gateway.export import session_samples
from trajkit.gateway.stitch import stitch

USER = [{"role": "user", "content": "hi there"}]


def _post(url, body, sid="g-default"):
    base = url.removesuffix("/v1")
    return httpx.post(f"{base}/inference/v1/generate", json=body, headers={"X-Session-ID": sid}, timeout=60)


def _renderers_parse(data):
    """(completion ids, log-probs) as verifiers' renderers client reads them (renderers 0.1.12 client.py)."""
    choice = data["choices"][0]
    ids, content = choice["token_ids"], choice["logprobs"]["content"]
    assert len(content) == len(ids)
    for t, e in zip(ids, content):
        assert e["token"] == f"token_id:{t}" and math.isfinite(e["logprob"]) and e["logprob"] != -9999.0
    return ids, [e["logprob"] for e in content]


def _chat_prompt_ids(gw):
    text = gw.tokenizer.apply_chat_template(USER, tokenize=False, add_generation_prompt=True)
    return gw.tokenizer.encode(text, add_special_tokens=False)


def test_generate_equals_the_engine_and_the_chat_route_for_the_same_ids_and_seed(random_gateway):
    gw, url = random_gateway
    ids = _chat_prompt_ids(gw)
    r = _post(url, {"model": "tiny", "token_ids": ids,
                    "sampling_params": {"temperature": 0.8, "max_tokens": 20, "seed": 7, "logprobs": 1}}, "g-parity")
    assert r.status_code == 200, r.text
    data = r.json()
    got_ids, got_lps = _renderers_parse(data)
    ref = gw.engine.generate([ids], SamplingParams(temperature=0.8, max_new_tokens=20, seed=7,
                                                   stop_token_ids=[gw.tokenizer.eos_token_id]))[0]
    assert got_ids == ref.token_ids and got_lps == pytest.approx(ref.logprobs) and min(got_lps) < -0.01
    chat = openai.OpenAI(base_url=url, api_key="g-parity-chat", max_retries=0).chat.completions.create(
        model="tiny", messages=USER, max_tokens=20, temperature=0.8, seed=7, extra_body={"return_token_ids": True})
    assert chat.prompt_token_ids == ids == data["prompt_token_ids"]
    assert chat.choices[0].token_ids == got_ids
    assert data["choices"][0]["finish_reason"] == chat.choices[0].finish_reason


def test_the_call_is_recorded_in_the_header_session_as_returned(random_gateway):
    gw, url = random_gateway
    ids = _chat_prompt_ids(gw)
    data = _post(url, {"model": "tiny", "token_ids": ids, "sampling_params": {"max_tokens": 12, "seed": 1, "n": 2}},
                 "g-record").json()
    [rec] = gw.sessions.find("g-record").records
    assert rec.endpoint == "generate" and rec.prompt_ids == ids and data["trajkit"]["session"] == "g-record"
    assert [c["token_ids"] for c in data["choices"]] == [c.token_ids for c in rec.choices]
    assert [[e["logprob"] for e in c["logprobs"]["content"]] for c in data["choices"]] == \
        [c.logprobs for c in rec.choices]
    assert data["usage"]["completion_tokens"] == sum(len(c.token_ids) for c in rec.choices)
    bearer = httpx.post(url.removesuffix("/v1") + "/inference/v1/generate", timeout=60,
                        headers={"Authorization": "Bearer g-bearer"},
                        json={"model": "tiny", "token_ids": ids, "sampling_params": {"max_tokens": 2}})
    assert bearer.status_code == 200 and len(gw.sessions.find("g-bearer").records) == 1


def test_multi_turn_token_calls_stitch_into_one_sample_with_the_forced_ids_masked_out(random_gateway):
    """The chat-route property through token ids: each turn's prompt = the previous prompt + its sampled ids +
    new ids the client rendered (a user turn); one chain, 1 exactly on the sampled ids, their log-probs."""
    gw, url = random_gateway
    tok = gw.tokenizer
    ids = _chat_prompt_ids(gw)
    for turn in range(3):
        data = _post(url, {"model": "tiny", "token_ids": ids, "sampling_params": {"max_tokens": 10, "seed": turn}},
                     "g-multi").json()
        sampled = data["choices"][0]["token_ids"]
        ids = ids + sampled + tok.encode(f"<|user|>turn {turn}<|assistant|>", add_special_tokens=False)
    recs = gw.sessions.find("g-multi").records
    [chain] = stitch(recs)
    sampled = [t for r in recs for t in r.choices[0].token_ids]
    assert [t for t, m in zip(chain.completion_ids, chain.loss_mask) if m] == sampled
    assert [lp for lp, m in zip(chain.logprobs, chain.loss_mask) if m] == [x for r in recs for x in r.choices[0].logprobs]
    forced = [t for t, m in zip(chain.completion_ids, chain.loss_mask) if m == 0]
    assert tok.decode(forced) == "".join(f"<|user|>turn {k}<|assistant|>" for k in range(2))
    [sample] = session_samples(gw.sessions.find("g-multi"))
    assert sample["completion_ids"] == chain.completion_ids and sample["loss_mask"] == chain.loss_mask


def test_stop_token_ids_of_the_request_end_the_choice_on_that_token(random_gateway):
    gw, url = random_gateway
    ids = _chat_prompt_ids(gw)
    free = _post(url, {"model": "tiny", "token_ids": ids, "sampling_params": {"temperature": 0, "max_tokens": 24}},
                 "g-stop").json()["choices"][0]["token_ids"]
    stop = free[3]
    cut = _post(url, {"model": "tiny", "token_ids": ids,
                      "sampling_params": {"temperature": 0, "max_tokens": 24, "stop_token_ids": [stop]}},
                "g-stop").json()["choices"][0]
    assert cut["token_ids"] == free[:free.index(stop) + 1] and cut["finish_reason"] == "stop"


def test_top_logprobs_when_logprobs_asks_for_more_than_one(random_gateway):
    gw, url = random_gateway
    ids = _chat_prompt_ids(gw)
    data = _post(url, {"model": "tiny", "token_ids": ids,
                       "sampling_params": {"temperature": 1.0, "max_tokens": 6, "seed": 2, "logprobs": 3}}, "g-top").json()
    ref = gw.engine.generate([ids], SamplingParams(temperature=1.0, max_new_tokens=6, seed=2, top_logprobs=3,
                                                   stop_token_ids=[gw.tokenizer.eos_token_id]))[0]
    content = data["choices"][0]["logprobs"]["content"]
    assert [[(e["token"], e["logprob"]) for e in c["top_logprobs"]] for c in content] == \
        [[(f"token_id:{i}", pytest.approx(v)) for i, v in alts] for alts in ref.top_logprobs]


def test_models_report_max_model_len(random_gateway):
    gw, url = random_gateway
    cards = httpx.get(f"{url}/models").json()["data"]
    assert [c["max_model_len"] for c in cards] == [1024, 1024] == [gw.max_context] * 2


@pytest.mark.parametrize("body, param, status", [
    ({"model": "nope", "token_ids": [1]}, "model", 404),
    ({"model": "tiny"}, "token_ids", 400),
    ({"model": "tiny", "token_ids": []}, "token_ids", 400),
    ({"model": "tiny", "token_ids": [1, -2]}, "token_ids", 400),
    ({"model": "tiny", "token_ids": [1, 99999]}, "token_ids", 400),
    ({"model": "tiny", "token_ids": [1], "sampling_params": []}, "sampling_params", 400),
    ({"model": "tiny", "token_ids": [1], "sampling_params": {"temperature": -1}}, "sampling_params.temperature", 400),
    ({"model": "tiny", "token_ids": [1], "sampling_params": {"max_tokens": 0}}, "sampling_params.max_tokens", 400),
    ({"model": "tiny", "token_ids": [1], "sampling_params": {"logprobs": "yes"}}, "sampling_params.logprobs", 400),
    ({"model": "tiny", "token_ids": [1], "sampling_params": {"stop_token_ids": [1, "x"]}},
     "sampling_params.stop_token_ids", 400),
    ({"model": "tiny", "token_ids": [1], "sampling_params": {"stop_token_ids": [99999]}},
     "sampling_params.stop_token_ids", 400),
    ({"model": "tiny", "token_ids": [1], "content_parts": [{"type": "image"}]}, "content_parts", 400),
    ({"model": "tiny", "token_ids": [1] * 2000}, "token_ids", 400),
])
def test_bad_requests_get_an_error_naming_the_field(random_gateway, body, param, status):
    gw, url = random_gateway
    r = _post(url, body, "g-bad")
    assert r.status_code == status, r.text
    assert r.json()["error"]["param"] == param
