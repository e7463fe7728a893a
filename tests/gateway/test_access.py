"""A locked gateway (the one harness runs are served on): a session's key reaches that session only, and nothing
that reads across sessions; an open gateway (``trajkit serve``) keeps serving everything. Real uvicorn on loopback,
the random tiny model; each check against the sessions' own record counts."""
import httpx
import pytest

from trajkit.gateway.sessions import Forced

from .conftest import serving, tiny_gateway

CHAT = {"model": "policy", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2}


@pytest.fixture(scope="module")
def locked():
    """A gateway built as GatewayEnv builds it, with sessions A = run-1-0 and B = run-1-1 opened for a round."""
    gateway = tiny_gateway()
    forced = Forced(1.0, 7, 2)
    a, b = (gateway.sessions.open(f"run-1-{i}", "policy", forced, tag=1) for i in range(2))
    with serving(gateway, timeout=30) as http:
        yield gateway, http, a, b


def _auth(key: str, **extra) -> dict:
    return {"Authorization": f"Bearer {key}", **extra}


def test_a_sessions_key_lands_in_that_session_only(locked):
    gateway, http, a, b = locked
    before = len(a.records), len(b.records)
    r = http.post("/v1/chat/completions", json=CHAT, headers=_auth(a.key))
    assert r.status_code == 200 and r.json()["trajkit"]["session"] == "run-1-0"
    assert (len(a.records), len(b.records)) == (before[0] + 1, before[1])
    same = http.post("/v1/chat/completions", json=CHAT, headers=_auth(a.key, **{"x-session-id": "run-1-0"}))
    assert same.status_code == 200 and len(a.records) == before[0] + 2  # naming its own session is fine
    assert http.get("/v1/models", headers=_auth(a.key)).json()["data"][0]["id"] == "policy"


def test_another_sessions_id_is_refused_and_adds_nothing(locked):
    gateway, http, a, b = locked
    counts = len(a.records), len(b.records)
    for path, body in (("/v1/chat/completions", CHAT), ("/v1/completions", {"model": "policy", "prompt": "x"}),
                       ("/inference/v1/generate", {"model": "policy", "token_ids": [104, 105]})):
        r = http.post(path, json=body, headers=_auth(a.key, **{"x-session-id": "run-1-1"}))
        assert r.status_code == 403 and r.json()["error"]["param"] == "x-session-id", path
    # the session id as the key (what it was before keys were secrets), no key, a made-up key: 401
    for headers in (_auth("run-1-1"), {}, {"x-session-id": "run-1-1"}, _auth(a.key + "x"),
                    {"Authorization": "Basic " + a.key}):
        r = http.post("/v1/chat/completions", json=CHAT, headers=headers)
        assert r.status_code == 401 and r.json()["error"]["code"] == "invalid_api_key", headers
    assert http.get("/v1/models").status_code == 401
    assert (len(a.records), len(b.records)) == counts
    assert set(gateway.sessions.ids()) == {"run-1-0", "run-1-1"}  # no anon-… session either


def test_a_sessions_key_reads_nothing_across_sessions(locked):
    gateway, http, a, b = locked
    for path in ("/trajkit/sessions", "/trajkit/sessions/run-1-1/records", "/trajkit/sessions/run-1-1/samples",
                 "/trajkit/sessions/run-1-1/hermes", "/trajkit/sessions/run-1-0/records", "/metrics"):
        assert http.get(path, headers=_auth(a.key)).status_code == 403, path
        assert http.get(path).status_code == 401, path
        assert http.get(path, headers=_auth(b.key, **{"x-session-id": "run-1-1"})).status_code == 403, path
    assert http.get("/health", headers=_auth(a.key)).json() == {"status": "ok"}  # no session count


def test_the_admin_token_reads_what_the_sessions_cannot(locked):
    gateway, http, a, b = locked
    admin = _auth(gateway.access.admin_token)
    assert {s["id"] for s in http.get("/trajkit/sessions", headers=admin).json()["data"]} == {"run-1-0", "run-1-1"}
    records = http.get("/trajkit/sessions/run-1-0/records", headers=admin).json()["data"]
    assert len(records) == len(a.records)
    assert "trajkit_" in http.get("/metrics", headers=admin).text
    assert set(http.get("/health", headers=admin).json()) >= {"status", "sessions"}
    # the admin token is no session's key
    assert http.post("/v1/chat/completions", json=CHAT, headers=admin).status_code == 401


def test_a_session_is_not_told_what_the_shared_prefix_cache_holds_from_another(locked):
    """B sends a prompt, then A the same one: the cache serves A's prefill from B's states (A's record says
    so), but A's response reports no cached tokens, which would tell A what B had sent."""
    gateway, http, a, b = locked
    body = {"model": "policy", "prompt": "the sibling's secret answer is 42", "max_tokens": 1}
    assert http.post("/v1/completions", json=body, headers=_auth(b.key)).status_code == 200
    r = http.post("/v1/completions", json=body, headers=_auth(a.key))
    assert r.status_code == 200 and r.json()["usage"]["prompt_tokens_details"]["cached_tokens"] == 0
    assert a.records[-1].prefix_cache["hit_tokens"] > 0


def test_a_revoked_key_is_refused():
    gateway = tiny_gateway(max_context=0)  # 0: the model's own limit
    s = gateway.sessions.open("run-2-0", "policy")
    try:
        assert gateway.access.session({"authorization": f"Bearer {s.key}"}) == "run-2-0"
        gateway.sessions.revoke(["run-2-0"])
        with pytest.raises(Exception, match="no session is bound"):
            gateway.access.session({"authorization": f"Bearer {s.key}"})
        assert gateway.sessions.find("run-2-0") is s  # its records stay
    finally:
        gateway.close()


def test_keys_are_random_and_never_the_session_id(locked):
    gateway, http, a, b = locked
    assert a.key != b.key and a.key not in (a.id, b.id) and len(a.key) >= 32
    assert a.key not in repr(a)


def test_an_open_gateway_still_serves_everything(random_gateway):
    """``trajkit serve``'s default: the header or the Bearer key names the session, management routes open."""
    gw, url = random_gateway
    root = url.removesuffix("/v1")
    body = {"model": "tiny", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 1}
    r = httpx.post(url + "/chat/completions", json=body, headers={"x-session-id": "open-a"}, timeout=30)
    assert r.status_code == 200 and len(gw.sessions.find("open-a").records) == 1
    assert any(s["id"] == "open-a" for s in httpx.get(root + "/trajkit/sessions").json()["data"])
    assert httpx.get(root + "/metrics").status_code == 200
    assert "sessions" in httpx.get(root + "/health").json()


def test_an_open_gateway_with_a_shared_api_key_needs_it_everywhere():
    """``trajkit serve --api-key K``: every route but /health needs ``Bearer K``; sessions are named by the header."""
    from trajkit.gateway.access import Access

    gateway = tiny_gateway(locked=False)
    gateway.access = Access(gateway.sessions, api_key="K")
    with serving(gateway, timeout=30) as http:
        for path in ("/trajkit/sessions", "/metrics", "/v1/models"):
            assert http.get(path).status_code == 401 and http.get(path, headers=_auth("k")).status_code == 401
        assert http.post("/v1/chat/completions", json=CHAT, headers={"x-session-id": "s1"}).status_code == 401
        assert gateway.sessions.ids() == []
        r = http.post("/v1/chat/completions", json=CHAT, headers=_auth("K", **{"x-session-id": "s1"}))
        assert r.status_code == 200 and len(gateway.sessions.find("s1").records) == 1
        anon = http.post("/v1/chat/completions", json=CHAT, headers=_auth("K")).json()["trajkit"]["session"]
        assert anon.startswith("anon-") and "K" not in gateway.sessions.ids()  # the key names no session
        assert {s["id"] for s in http.get("/trajkit/sessions", headers=_auth("K")).json()["data"]} == {"s1", anon}
        assert http.get("/health").json() == {"status": "ok"}
