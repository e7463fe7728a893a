"""32 client sessions x 5 turns at once against one server: every record in its own session, none lost
or mixed, every session one stitched chain, the server still healthy."""
import httpx

from trajkit.gateway.load import run_load
from trajkit.gateway.stitch import stitch


def _decode(tok, ids):
    return tok.decode(ids, skip_special_tokens=False, clean_up_tokenization_spaces=False)


def test_32_sessions_by_5_turns_in_parallel(random_gateway):
    gw, url = random_gateway
    calls_before = gw.scheduler.calls
    out = run_load(url, sessions=32, turns=5, max_tokens=6, model="tiny", prefix="par")
    assert out["requests"] == 160
    for i in range(32):
        session = gw.sessions.find(f"par-{i}")
        assert [r.index for r in session.records] == [0, 1, 2, 3, 4]
        for turn, rec in enumerate(session.records):
            assert rec.messages[-1]["content"] == f"session par-{i} turn {turn}"
            text = _decode(gw.tokenizer, rec.prompt_ids)
            assert f"session par-{i} turn {turn}" in text and f"session par-{(i + 1) % 32} " not in text
        [chain] = stitch(session.records)
        assert [t for t, m in zip(chain.completion_ids, chain.loss_mask) if m] == [
            t for r in session.records for t in r.choices[0].token_ids]
    assert gw.scheduler.calls - calls_before < 160  # requests that waited together shared engine calls
    assert httpx.get(url.removesuffix("/v1") + "/health").json()["status"] == "ok"
