"""The gateway's prefix cache: a multi-turn session's later calls reuse the earlier calls' states, replies are
the same as with ``--no-prefix-cache``, each record and ``usage`` say how many prompt tokens hit, ``/metrics``
adds up exactly the records' numbers, and a weight update flushes."""
import argparse
import re

import httpx
import pytest

from trajkit.config import add_arguments, from_args
from trajkit.engine import Engine
from trajkit.errors import ConfigError
from trajkit.gateway import Gateway, GatewayConfig, running
from trajkit.models.spec import TinySpec, build_model
from trajkit.models.tokenizer import byte_tokenizer

SYSTEM = "You are a careful agent. " * 12


def _gateway(prefix_cache: bool) -> Gateway:
    model = build_model(TinySpec(vocab_size=259, hidden_size=32, max_positions=4096), seed=0, init_scale=5.0)
    return Gateway(Engine(model), byte_tokenizer(),
                   GatewayConfig(model_name="tiny", prefix_cache=prefix_cache, default_max_tokens=8))


def _conversation(url: str, turns: int = 4) -> list[dict]:
    messages, outs = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": "Start."}], []
    with httpx.Client(timeout=60) as http:
        for turn in range(turns):
            r = http.post(url + "/chat/completions", headers={"x-session-id": "s"},
                          json={"model": "tiny", "messages": messages, "temperature": 0, "return_token_ids": True})
            r.raise_for_status()
            out = r.json()
            outs.append(out)
            messages += [{"role": "assistant", "content": out["choices"][0]["message"]["content"] or ""},
                         {"role": "user", "content": f"Turn {turn + 1}."}]
    return outs


def _metric(text: str, name: str) -> float:
    return float(re.search(rf"^{name} (\S+)$", text, re.M).group(1))


def test_a_session_reuses_its_history_and_replies_as_without_the_cache():
    on, off = _gateway(True), _gateway(False)
    with running(on) as url_on, running(off) as url_off:
        with_cache, without = _conversation(url_on), _conversation(url_off)
        text = httpx.get(url_on.removesuffix("/v1") + "/metrics").text
        text_off = httpx.get(url_off.removesuffix("/v1") + "/metrics").text
    records = on.sessions.find("s").records
    on.close()
    off.close()
    for a, b in zip(with_cache, without):
        assert a["choices"][0]["token_ids"] == b["choices"][0]["token_ids"]
        assert a["prompt_token_ids"] == b["prompt_token_ids"]
    hits = [r.prefix_cache["hit_tokens"] for r in records]
    assert hits[0] == 0
    for rec, prev in zip(records[1:], records):  # everything the previous call fed, in full 16-token blocks
        fed = len(prev.prompt_ids) + len(prev.choices[0].token_ids) - 1
        assert rec.prompt_ids[:fed] == prev.prompt_ids + prev.choices[0].token_ids[:-1]
        assert rec.prefix_cache["hit_tokens"] == fed // 16 * 16
        assert rec.prefix_cache["new_tokens"] == len(rec.prompt_ids) - rec.prefix_cache["hit_tokens"]
    assert [o["usage"]["prompt_tokens_details"]["cached_tokens"] for o in with_cache] == hits
    assert all(o["usage"]["prompt_tokens_details"]["cached_tokens"] == 0 for o in without)
    assert _metric(text, "trajkit_prefix_cache_hit_tokens_total") == sum(hits)
    assert _metric(text, "trajkit_prefix_cache_query_tokens_total") == sum(len(r.prompt_ids) for r in records)
    assert _metric(text, "trajkit_prefix_cache_flops_saved_total") == 2 * on.engine.num_params * sum(hits)
    assert _metric(text_off, "trajkit_prefix_cache_hit_tokens_total") == 0
    assert _metric(text_off, "trajkit_prefix_cache_budget_tokens") == 0


def test_a_weight_update_flushes_the_gateway_cache():
    gateway = _gateway(True)
    with running(gateway) as url:
        _conversation(url, turns=1)
        gateway.update_weights(gateway.engine.model.state_dict())
        after = _conversation(url, turns=1)[0]
        text = httpx.get(url.removesuffix("/v1") + "/metrics").text
    gateway.close()
    assert after["usage"]["prompt_tokens_details"]["cached_tokens"] == 0  # the same prompt: a hit would be stale
    assert _metric(text, "trajkit_prefix_cache_flushes_total") >= 1
    assert _metric(text, "trajkit_policy_version") == 1


def test_serve_has_a_no_prefix_cache_flag():
    parser = argparse.ArgumentParser()
    add_arguments(parser, GatewayConfig)
    assert from_args(GatewayConfig, parser.parse_args(["--no-prefix-cache"])).prefix_cache is False
    assert from_args(GatewayConfig, parser.parse_args([])).prefix_cache is True


def test_the_engine_turns_the_cache_off_with_0_and_refuses_a_budget_below_one_block():
    model = build_model(TinySpec(vocab_size=259, hidden_size=32, max_positions=4096), seed=0)
    engine = Engine(model)
    assert engine.set_prefix_cache(0) is None and engine.prefix_cache is None
    with pytest.raises(ConfigError, match="at least one block"):
        engine.set_prefix_cache(3)
