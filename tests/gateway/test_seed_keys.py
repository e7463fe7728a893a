"""Attacks on the row seed keys (GatewayEnv.rollout_part -> Session.seed_key -> Gateway._prepare): what a
run holding only its own key can and cannot do to the seeds its calls and other rows' calls sample with; and
whether the round seeds of one run (train rounds, refill rounds, profile batches, evaluation) can coincide.
Real uvicorn on loopback, the random tiny model, as tests/gateway/test_access.py."""
import pytest

from trajkit.gateway.service import session_seed
from trajkit.gateway.sessions import Forced
from trajkit.rl.dynamic import round_seed
from trajkit.rl.sampler import PROFILE_ROUND
from trajkit.rl.step import step_seed
from trajkit.rl.trainer import EVAL_SEED

from .conftest import serving, tiny_gateway

TRAIN, EVAL = Forced(1.0, 7, 8), Forced(1.0, 8, 8)  # two rounds' sampling: same temperature, other round seeds


@pytest.fixture(scope="module")
def gw():
    gateway = tiny_gateway()
    with serving(gateway) as http:
        yield gateway, http


_opened = iter(range(10_000))


def _open(gateway, row: int, forced: Forced = TRAIN):
    """A session as rollout_part opens it: a fresh round number, the row's seed key."""
    return gateway.sessions.open(f"run-{next(_opened)}-{row}", "policy", forced, tag=0, seed_key=f"run-row-{row}")


def _call(http, session, headers=None, **body):
    r = http.post("/v1/completions", json={"model": "policy", "prompt": "abc", **body},
                  headers={"Authorization": f"Bearer {session.key}", **(headers or {})})
    assert r.status_code == 200, r.text
    return [c.token_ids for c in session.records[-1].choices]


# `x-session-id` of another row's session: refused (access.py, 403 before _prepare). Existing tests check
# the 403 and record counts; this one checks the victim's call index (and so its seed stream) is not shifted.
def test_a_refused_cross_session_request_shifts_no_call_index_of_the_victim(gw):
    gateway, http = gw
    a, b, twin = _open(gateway, 0), _open(gateway, 1), _open(gateway, 1)
    for _ in range(3):
        r = http.post("/v1/completions", json={"model": "policy", "prompt": "abc"},
                      headers={"Authorization": f"Bearer {a.key}", "x-session-id": b.id})
        assert r.status_code == 403
    assert b.calls == 0 and a.calls == 0
    assert _call(http, b) == _call(http, twin)  # b's first call still samples row 1's call-0 seed


# Extra calls to shift call indices: no other row's seeds move (the counter is per session,
# Session.next_call); a run only shifts its own stream.
def test_extra_calls_of_one_run_shift_no_other_rows_seeds(gw):
    gateway, http = gw
    noisy, quiet = _open(gateway, 0), _open(gateway, 1)
    noisy2, quiet2 = _open(gateway, 0), _open(gateway, 1)  # the same rows in another round with the same seed
    first = _call(http, noisy)
    for _ in range(3):
        _call(http, noisy)
    assert _call(http, quiet) == _call(http, quiet2)
    assert _call(http, noisy2) == first


# `n` > 1: choice 0 keeps the call's seed, choices i>0 get mix(seed, i): none lands on another row's
# stream.
def test_n_choices_stay_in_the_runs_own_stream(gw):
    gateway, http = gw
    a, twin, other = _open(gateway, 0), _open(gateway, 0), _open(gateway, 1)
    many = _call(http, a, n=3)
    assert many[0] == _call(http, twin)[0]
    assert len({tuple(c) for c in many}) == 3
    assert _call(http, other)[0] not in many


# Rows / rounds with identical streams: distinct rows of a round and the same row under two round
# seeds (train vs eval) sample apart; the same row under the same round seed replays (by design: resume).
def test_rows_and_round_seeds_separate_streams_and_only_the_pair_replays(gw):
    gateway, http = gw
    group = [_call(http, _open(gateway, row)) for row in range(4)]  # a GRPO group: the same prompt on 4 rows
    assert len({tuple(g[0]) for g in group}) == 4
    assert _call(http, _open(gateway, 0, EVAL)) != group[0]
    assert _call(http, _open(gateway, 0)) == group[0]


# A seed in the request body: an RL round's session replaces it with the round's, so a harness that pins one (an
# agent framework sending seed=0, or a policy whose output the harness turns into request fields) can neither
# make a group's members copies of each other nor replay another row's call. (Before, a request's seed won: two
# rows sending seed=5 sampled the same tokens.)
def test_a_request_seed_neither_copies_group_members_nor_replays_another_row(gw):
    gateway, http = gw
    a, b, twin = _open(gateway, 0), _open(gateway, 1), _open(gateway, 0)
    pinned = _call(http, a, seed=5)
    assert pinned != _call(http, b, seed=5)  # two rows of a group stay apart
    assert pinned == _call(http, twin)  # row 0's call 0 samples the round's seed, whatever the request said
    victim, thief = _open(gateway, 2), _open(gateway, 3)
    stolen = session_seed(TRAIN.seed, "run-row-2", 0)
    assert _call(http, thief, seed=stolen) != _call(http, victim)
    assert thief.calls == 1  # the seeded request took its call index like any other


# `seed_key` exposure: no route returns it (listing: id/model/calls; records: CallRecord; hermes:
# session id; responses: session/call/policy_version). It is derivable from the session id anyway, and a seed is
# not a credential.
def test_no_route_returns_the_seed_key(gw):
    gateway, http = gw
    s = _open(gateway, 5)
    r = http.post("/v1/chat/completions", json={"model": "policy", "messages": [{"role": "user", "content": "x"}],
                                                "max_tokens": 2}, headers={"Authorization": f"Bearer {s.key}"})
    assert r.status_code == 200 and "run-row-5" not in r.text
    admin = {"Authorization": f"Bearer {gateway.access.admin_token}"}
    for path in ("/trajkit/sessions", f"/trajkit/sessions/{s.id}/records", f"/trajkit/sessions/{s.id}/samples",
                 f"/trajkit/sessions/{s.id}/hermes"):
        got = http.get(path, headers=admin)
        assert got.status_code == 200 and "run-row-" not in got.text, path


# Round seeds: train rounds of a run (steps x refill rounds), its profile batches and its
# evaluation seed never coincide over realistic ranges, so a train row never shares an eval/profile row's stream.
# The one arithmetic coincidence: cfg.seed=0, step 987_654 trains with the evaluation's seed (other prompts, and
# only past ~1M steps).
def test_round_seeds_of_one_run_are_distinct():
    for seed in (0, 1, 42):
        seen = {}
        for step in range(0, 3000):
            ss = step_seed(seed, step)
            for r in range(6):
                seen.setdefault(round_seed(ss, r), []).append(("train", step, r))
            for b in range(4):
                seen.setdefault(round_seed(ss, PROFILE_ROUND + b), []).append(("profile", step, b))
        seen.setdefault(EVAL_SEED + seed, []).append(("eval",))
        assert all(len(v) == 1 for v in seen.values()), [v for v in seen.values() if len(v) > 1][:3]
    assert step_seed(0, 987_654) == EVAL_SEED + 0  # the documented far-off coincidence
