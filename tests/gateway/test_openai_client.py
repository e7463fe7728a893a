"""The gateway through the official ``openai`` client against a real uvicorn server (random tiny model)."""
import httpx
import openai
import pytest

from trajkit.engine import SamplingParams
from trajkit.gateway.stitch import stitch
from trajkit.models.tokenizer import byte_tokenizer

from .conftest import TOOLS

USER = [{"role": "user", "content": "hi there"}]


def _client(url, key="s-default"):
    return openai.OpenAI(base_url=url, api_key=key, max_retries=0)


def _decode(tok, ids):
    return tok.decode(ids, skip_special_tokens=False, clean_up_tokenization_spaces=False)


def test_returned_text_is_the_decode_of_the_recorded_ids(random_gateway):
    gw, url = random_gateway
    r = _client(url, "s-decode").chat.completions.create(model="tiny", messages=USER, max_tokens=24, seed=3, n=3,
                                                        extra_body={"return_token_ids": True})
    rec = gw.sessions.find("s-decode").records[0]
    assert r.prompt_token_ids == rec.prompt_ids
    assert rec.prompt_ids == gw.tokenizer.encode(gw.tokenizer.apply_chat_template(USER, tokenize=False,
                                                 add_generation_prompt=True), add_special_tokens=False)
    assert len(r.choices) == 3 and len({tuple(c.token_ids) for c in r.choices}) == 3
    for choice, ch in zip(r.choices, rec.choices):
        assert choice.token_ids == ch.token_ids and len(ch.logprobs) == len(ch.token_ids)
        body = ch.token_ids[:-1] if choice.finish_reason == "stop" else ch.token_ids
        assert choice.message.content == _decode(gw.tokenizer, body)
    assert r.usage.completion_tokens == sum(len(c.token_ids) for c in rec.choices)


def test_greedy_through_the_server_equals_engine_generate(random_gateway):
    gw, url = random_gateway
    r = _client(url, "s-greedy").chat.completions.create(model="tiny", messages=USER, max_tokens=40, temperature=0,
                                                        extra_body={"return_token_ids": True})
    ref = gw.engine.generate([r.prompt_token_ids], SamplingParams(temperature=0, max_new_tokens=40,
                                                                  stop_token_ids=[gw.tokenizer.eos_token_id]))
    assert r.choices[0].token_ids == ref[0].token_ids


def test_force_temperature_replaces_the_requests_sampling(random_gateway):
    gw, url = random_gateway
    gw.config.force_temperature = 0.7
    try:
        r = _client(url, "s-forced").chat.completions.create(
            model="tiny", messages=USER, max_tokens=20, temperature=0, top_p=0.5, seed=3,
            extra_body={"top_k": 2, "return_token_ids": True})
    finally:
        gw.config.force_temperature = None
    ref = gw.engine.generate([r.prompt_token_ids], SamplingParams(temperature=0.7, max_new_tokens=20, seed=3,
                                                                  stop_token_ids=[gw.tokenizer.eos_token_id]))
    assert r.choices[0].token_ids == ref[0].token_ids
    record = gw.sessions.find("s-forced").records[0]
    assert record.choices[0].logprobs == pytest.approx(ref[0].logprobs) and min(ref[0].logprobs) < 0.0


def test_a_seed_reproduces_and_streaming_sends_the_same_text(random_gateway):
    _, url = random_gateway
    c = _client(url, "s-seed")
    a = c.chat.completions.create(model="tiny", messages=USER, max_tokens=30, seed=11, temperature=0.9)
    b = c.chat.completions.create(model="tiny", messages=USER, max_tokens=30, seed=11, temperature=0.9)
    other = c.chat.completions.create(model="tiny", messages=USER, max_tokens=30, seed=12, temperature=0.9)
    assert a.choices[0].message.content == b.choices[0].message.content != other.choices[0].message.content
    chunks = list(c.chat.completions.create(model="tiny", messages=USER, max_tokens=30, seed=11, temperature=0.9,
                                            stream=True, stream_options={"include_usage": True}))
    text = "".join(ch.choices[0].delta.content or "" for ch in chunks if ch.choices)
    assert text == a.choices[0].message.content
    assert chunks[0].choices[0].delta.role == "assistant"
    assert [ch.choices[0].finish_reason for ch in chunks if ch.choices][-1] == a.choices[0].finish_reason
    assert chunks[-1].choices == [] and chunks[-1].usage.completion_tokens == a.usage.completion_tokens


def test_completions_take_text_or_token_ids(random_gateway):
    gw, url = random_gateway
    c = _client(url, "s-comp")
    ids = [104, 101, 108, 108, 111]
    a = c.completions.create(model="tiny", prompt="hello", max_tokens=12, seed=5)
    b = c.completions.create(model="tiny", prompt=ids, max_tokens=12, seed=5)
    assert a.choices[0].text == b.choices[0].text
    recs = gw.sessions.find("s-comp").records
    assert recs[0].prompt_ids == recs[1].prompt_ids == ids
    assert a.choices[0].text == _decode(gw.tokenizer, [t for t in recs[0].choices[0].token_ids if t != 258])


def test_stop_strings_cut_text_and_ids(random_gateway):
    gw, url = random_gateway
    c = _client(url, "s-stop")
    full = c.completions.create(model="tiny", prompt="abc", max_tokens=30, temperature=0).choices[0].text
    stop = full[5:7]
    cut = c.completions.create(model="tiny", prompt="abc", max_tokens=30, temperature=0, stop=[stop])
    assert cut.choices[0].text == full[:full.index(stop)] and cut.choices[0].finish_reason == "stop"
    ids = gw.sessions.find("s-stop").records[1].choices[0].token_ids
    assert _decode(gw.tokenizer, ids).startswith(full[:full.index(stop)] + stop)
    assert stop not in _decode(gw.tokenizer, ids[:-1])


def test_tools_are_rendered_into_the_prompt(random_gateway):
    gw, url = random_gateway
    _client(url, "s-tools").chat.completions.create(model="tiny", messages=USER, tools=TOOLS, max_tokens=4)
    _client(url, "s-notools").chat.completions.create(model="tiny", messages=USER, tools=TOOLS, tool_choice="none",
                                                      max_tokens=4)
    with_tools = _decode(gw.tokenizer, gw.sessions.find("s-tools").records[0].prompt_ids)
    assert '"name": "terminal"' in with_tools and "<tools>" in with_tools
    assert "<tools>" not in _decode(gw.tokenizer, gw.sessions.find("s-notools").records[0].prompt_ids)


def test_multi_turn_stitches_into_one_sample_with_sampled_tokens_masked_in(random_gateway):
    gw, url = random_gateway
    c = _client(url, "s-multi")
    messages = list(USER)
    for turn in range(3):
        r = c.chat.completions.create(model="tiny", messages=messages, max_tokens=16, seed=turn)
        messages += [{"role": "assistant", "content": r.choices[0].message.content},
                     {"role": "user", "content": f"turn {turn}"}]
    recs = gw.sessions.find("s-multi").records
    [chain] = stitch(recs)
    sampled = [t for rec in recs for t in rec.choices[0].token_ids]
    assert [t for t, m in zip(chain.completion_ids, chain.loss_mask) if m == 1] == sampled
    assert chain.prompt_ids == recs[0].prompt_ids
    assert chain.ids == recs[-1].prompt_ids + recs[-1].choices[0].token_ids
    assert [lp for lp, m in zip(chain.logprobs, chain.loss_mask) if m] == [x for r in recs for x in r.choices[0].logprobs]
    forced = _decode(gw.tokenizer, [t for t, m in zip(chain.completion_ids, chain.loss_mask) if m == 0])
    assert "turn 0" in forced and "turn 1" in forced and "hi there" not in forced
    # the session's own ids were reused: every later prompt starts with the earlier prompt + sampled ids
    assert all(recs[i + 1].prompt_ids[:len(recs[i].prompt_ids) + len(recs[i].choices[0].token_ids)]
               == recs[i].prompt_ids + recs[i].choices[0].token_ids for i in range(2))


@pytest.mark.parametrize("body, param, status", [
    ({"model": "nope", "messages": USER}, "model", 404),
    ({"model": "tiny", "messages": []}, "messages", 400),
    ({"model": "tiny", "messages": [{"role": "robot", "content": "x"}]}, "messages[0].role", 400),
    ({"model": "tiny", "messages": [{"role": "user", "content": 3}]}, "messages[0].content", 400),
    ({"model": "tiny", "messages": USER, "tools": [{"type": "function", "function": {}}]}, "tools[0].function.name", 400),
    ({"model": "tiny", "messages": [{"role": "assistant", "content": "", "tool_calls": [{"function": {"name": 1}}]}]},
     "messages[0].tool_calls[0].function.name", 400),
    ({"model": "tiny", "messages": USER, "temperature": -1}, "temperature", 400),
    ({"model": "tiny", "messages": USER, "top_p": 0}, "top_p", 400),
    ({"model": "tiny", "messages": USER, "max_tokens": 0}, "max_tokens", 400),
    ({"model": "tiny", "messages": USER, "n": 0}, "n", 400),
    ({"model": "tiny", "messages": USER, "seed": "x"}, "seed", 400),
    ({"model": "tiny", "messages": USER, "stop": [1]}, "stop", 400),
    ({"model": "tiny", "messages": USER, "tool_choice": {"type": "function", "function": {"name": "x"}}},
     "tool_choice", 400),
    ({"model": "tiny", "messages": [{"role": "user", "content": "x" * 2000}]}, "messages", 400),
    # as OpenAI: a tool result names its call; a call has an id and arguments (a string)
    ({"model": "tiny", "messages": USER + [{"role": "tool", "content": "out"}]}, "messages[1].tool_call_id", 400),
    ({"model": "tiny", "messages": USER + [{"role": "tool", "tool_call_id": "", "content": "o"}]},
     "messages[1].tool_call_id", 400),
    ({"model": "tiny", "messages": [{"role": "assistant", "content": "", "tool_calls": [
        {"type": "function", "function": {"name": "terminal", "arguments": "{}"}}]}]}, "messages[0].tool_calls[0].id", 400),
    ({"model": "tiny", "messages": [{"role": "assistant", "content": "", "tool_calls": [
        {"id": "c0", "type": "function", "function": {"name": "terminal"}}]}]},
     "messages[0].tool_calls[0].function.arguments", 400),
    ({"model": "tiny", "messages": [{"role": "assistant", "content": "", "tool_calls": [
        {"id": "c0", "type": "function", "function": {"name": "terminal", "arguments": ["ls"]}}]}]},
     "messages[0].tool_calls[0].function.arguments", 400),
])
def test_bad_requests_get_an_openai_error_naming_the_field(random_gateway, body, param, status):
    _, url = random_gateway
    r = httpx.post(url + "/chat/completions", json=body, headers={"Authorization": "Bearer s-bad"})
    assert r.status_code == status, r.text
    assert r.json()["error"]["param"] == param and r.json()["error"]["message"]
    assert httpx.get(url.removesuffix("/v1") + "/health").json()["status"] == "ok"


def test_a_tool_message_without_tool_call_id_is_refused_in_openais_words(random_gateway):
    _, url = random_gateway
    with pytest.raises(openai.BadRequestError) as err:
        _client(url, "s-no-id").chat.completions.create(model="tiny", max_tokens=2, messages=USER + [
            {"role": "assistant", "content": "", "tool_calls": [CALL_BAD]}, {"role": "tool", "content": "out"}])
    assert err.value.body["message"] == ("Missing parameter 'tool_call_id': messages with role 'tool' must have a "
                                         "'tool_call_id'")


CALL_BAD = {"id": "c0", "type": "function", "function": {"name": "terminal", "arguments": '{"command": "ls'}}


def test_arguments_that_are_not_json_are_kept_verbatim(random_gateway):
    """As OpenAI: a call's ``arguments`` sent back in the history need not be JSON (a model wrote them). The
    prompt holds them exactly as sent, and so does the saved Hermes row (never an invented ``{}``)."""
    gw, url = random_gateway
    msgs = USER + [{"role": "assistant", "content": "", "tool_calls": [CALL_BAD]},
                   {"role": "tool", "tool_call_id": "c0", "content": "out"}]
    r = httpx.post(url + "/chat/completions", json={"model": "tiny", "messages": msgs, "max_tokens": 2,
                   "return_token_ids": True}, headers={"Authorization": "Bearer s-bad-args"})
    assert r.status_code == 200, r.text
    prompt = _decode(gw.tokenizer, r.json()["prompt_token_ids"])
    assert '"arguments": {"command": "ls}' in prompt
    row = httpx.get(url.removesuffix("/v1") + "/trajkit/sessions/s-bad-args/hermes").json()["data"][0]
    call_turn = next(t["value"] for t in row["conversations"] if t["from"] == "gpt")
    assert '"arguments": {"command": "ls}' in call_turn


def test_invalid_json_probe_routes_and_models(random_gateway):
    gw, url = random_gateway
    root = url.removesuffix("/v1")
    r = httpx.post(url + "/chat/completions", content=b"{not json", headers={"content-type": "application/json"})
    assert r.status_code == 400 and r.json()["error"]["param"] == "body"
    assert httpx.post(root + "/api/show", json={"name": "tiny"}).status_code == 404
    models = _client(url).models.list().data
    assert [m.id for m in models] == ["tiny", "other"]
    assert models[0].context_length == 1024 == gw.max_context  # the window enforced (max_context), not 131072


def test_a_session_is_bound_to_one_model(random_gateway):
    gw, url = random_gateway
    c = _client(url, "s-bound")
    c.chat.completions.create(model="tiny", messages=USER, max_tokens=2)
    with pytest.raises(openai.APIStatusError) as err:
        c.chat.completions.create(model="other", messages=USER, max_tokens=2)
    assert err.value.status_code == 409 and err.value.body["param"] == "model"
    r = httpx.post(url + "/chat/completions", json={"model": "other", "messages": USER, "max_tokens": 2},
                   headers={"x-session-id": "s-header", "Authorization": "Bearer s-bound"})
    assert r.status_code == 200 and len(gw.sessions.find("s-bound").records) == 1
    assert gw.sessions.find("s-header").model == "other"


@pytest.mark.parametrize("choice, forced", [
    ("required", '<tool_call>\n{"name": "'),
    ({"type": "function", "function": {"name": "terminal"}}, '<tool_call>\n{"name": "terminal", "arguments": ')])
def test_tool_choice_required_or_named_forces_the_call_to_start(random_gateway, choice, forced):
    """The forced text ends the prompt ids (mask 0 when stitched); the model continues from it (greedy ==
    ``Engine.generate`` on those ids); the reply is parsed from forced + sampled text. A random model then
    writes no valid call: the raw block stays in ``content`` with a diagnostic, streamed or not."""
    gw, url = random_gateway
    sid = f"s-choice-{'named' if isinstance(choice, dict) else choice}"
    c = _client(url, sid)
    r = c.chat.completions.create(model="tiny", messages=USER, tools=TOOLS, tool_choice=choice, max_tokens=20,
                                  temperature=0, extra_body={"return_token_ids": True})
    plain = gw.tokenizer.encode(gw.renderer.text(USER, TOOLS), add_special_tokens=False)
    assert r.prompt_token_ids == plain + gw.tokenizer.encode(forced, add_special_tokens=False)
    rec = gw.sessions.find(sid).records[0]
    assert rec.forced_text == forced and rec.prompt_ids == r.prompt_token_ids
    ref = gw.engine.generate([r.prompt_token_ids], SamplingParams(temperature=0, max_new_tokens=20,
                                                                  stop_token_ids=[gw.tokenizer.eos_token_id]))
    assert r.choices[0].token_ids == ref[0].token_ids
    body = [t for t in ref[0].token_ids if t != gw.tokenizer.eos_token_id]
    assert rec.choices[0].text == forced + _decode(gw.tokenizer, body)
    message = r.choices[0].message
    assert message.content == rec.choices[0].text.strip() and not message.tool_calls
    assert message.model_extra["trajkit_diagnostics"][0]["code"] in ("malformed_tool_call", "unclosed_tool_call")
    chunks = list(c.chat.completions.create(model="tiny", messages=USER, tools=TOOLS, tool_choice=choice,
                                            max_tokens=20, temperature=0, stream=True))
    assert "".join(ch.choices[0].delta.content or "" for ch in chunks if ch.choices) == message.content
    [chain] = stitch(gw.sessions.find(sid).records[:1])
    assert [t for t, m in zip(chain.completion_ids, chain.loss_mask) if m] == r.choices[0].token_ids
    assert chain.prompt_ids == r.prompt_token_ids  # the forced ids are prompt: never trained


def test_logprobs_are_the_recorded_engine_logprobs(random_gateway):
    """``logprobs=true`` returns every sampled token's log-prob, equal to the record and to an independent
    scoring forward of the same ids under the same temperature; streamed, in the finishing chunk."""
    gw, url = random_gateway
    c = _client(url, "s-logprobs")
    r = c.chat.completions.create(model="tiny", messages=USER, max_tokens=16, temperature=0.8, seed=4, logprobs=True,
                                  extra_body={"return_token_ids": True})
    rec = gw.sessions.find("s-logprobs").records[0]
    content = r.choices[0].logprobs.content
    assert [e.logprob for e in content] == rec.choices[0].logprobs
    assert [e.token for e in content] == [_decode(gw.tokenizer, [t]) for t in rec.choices[0].token_ids]
    scored = gw.engine.token_logprobs([rec.prompt_ids], [rec.choices[0].token_ids],
                                      SamplingParams(temperature=0.8, max_new_tokens=16))[0]
    assert [e.logprob for e in content] == pytest.approx(scored, abs=1e-4) and min(scored) < -0.01
    assert all(e.top_logprobs == [] and bytes(e.bytes).decode("utf-8") == e.token for e in content)
    chunks = list(c.chat.completions.create(model="tiny", messages=USER, max_tokens=16, temperature=0.8, seed=4,
                                            logprobs=True, stream=True))
    streamed = [e for ch in chunks if ch.choices and ch.choices[0].logprobs for e in ch.choices[0].logprobs.content]
    assert [e.logprob for e in streamed] == [e.logprob for e in content]
    legacy = c.completions.create(model="tiny", prompt="hello", max_tokens=8, seed=2, logprobs=0)
    crec = gw.sessions.find("s-logprobs").records[-1]
    assert legacy.choices[0].logprobs.token_logprobs == crec.choices[0].logprobs
    # per-token strings need not join to the text (a multi-byte character split over tokens decodes to
    # U+FFFD piece by piece), so the text is checked against the recorded ids
    assert len(legacy.choices[0].logprobs.tokens) == len(crec.choices[0].token_ids)
    assert byte_tokenizer().decode(crec.choices[0].token_ids).startswith(legacy.choices[0].text)
    assert c.chat.completions.create(model="tiny", messages=USER, max_tokens=4).choices[0].logprobs is None


def test_top_logprobs_are_the_engines(random_gateway):
    """``top_logprobs=3``: each token's alternatives are what ``Engine.generate`` records for the same ids
    and parameters (tests/engine/test_top_logprobs.py checks those against a full forward)."""
    gw, url = random_gateway
    c = _client(url, "s-top")
    r = c.chat.completions.create(model="tiny", messages=USER, max_tokens=10, temperature=0.8, seed=6, logprobs=True,
                                  top_logprobs=3, extra_body={"return_token_ids": True})
    ref = gw.engine.generate([r.prompt_token_ids], SamplingParams(temperature=0.8, max_new_tokens=10, seed=6,
                                                                  top_logprobs=3,
                                                                  stop_token_ids=[gw.tokenizer.eos_token_id]))[0]
    content = r.choices[0].logprobs.content
    assert [e.token for e in content] == [_decode(gw.tokenizer, [t]) for t in ref.token_ids]
    for e, alts in zip(content, ref.top_logprobs):
        assert [a.token for a in e.top_logprobs] == [_decode(gw.tokenizer, [t]) for t, _ in alts]
        assert [a.logprob for a in e.top_logprobs] == pytest.approx([v for _, v in alts], abs=1e-6)
        assert len(e.top_logprobs) == 3 and e.top_logprobs[0].logprob >= e.logprob - 1e-6
    legacy = c.completions.create(model="tiny", prompt="hello", max_tokens=6, seed=2, logprobs=2)
    tops = legacy.choices[0].logprobs.top_logprobs
    assert len(tops) == len(legacy.choices[0].logprobs.tokens) and all(len(t) <= 2 for t in tops)


@pytest.mark.parametrize("body, param", [({"top_logprobs": 3}, "top_logprobs"),
                                         ({"logprobs": True, "top_logprobs": 21}, "top_logprobs"),
                                         ({"logprobs": "yes"}, "logprobs")])
def test_unsupported_or_bad_logprobs_are_a_400_naming_the_field(random_gateway, body, param):
    _, url = random_gateway
    r = httpx.post(f"{url}/chat/completions", json={"model": "tiny", "messages": USER, **body})
    assert r.status_code == 400 and r.json()["error"]["param"] == param
