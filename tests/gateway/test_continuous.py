"""Continuous batching in the gateway's scheduler: a request that arrives while another is generating joins
the running batch and finishes first (it did not wait for the running one), both sample exactly what they
sample alone, a weight update waits for the rows in flight and holds back new ones, and streaming sends
text while the choice is still being generated."""
import threading
import time

import httpx
import pytest

import torch

from trajkit.backends.base import Capabilities
from trajkit.engine import Engine, SamplingParams
from trajkit.engine.drafters import DraftModel
from trajkit.gateway.live import LiveText, rest
from trajkit.gateway.scheduler import Scheduler
from trajkit.models.spec import TinySpec, build_model

LONG, SHORT = [5, 6, 7, 8], [9, 10]


@pytest.fixture(scope="module")
def engine():
    return Engine(build_model(TinySpec(vocab_size=259, hidden_size=32, max_positions=4096), seed=0, init_scale=5.0))


def _when(n: int, action):
    """An ``on_tokens`` listener that counts tokens and runs ``action`` once, when the count reaches ``n``."""
    seen = []

    def on_tokens(_k, ids):
        before = len(seen)
        seen.extend(ids)
        if before < n <= len(seen):  # speculative rounds deliver several tokens at once
            action()
    return on_tokens, seen


@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_a_request_that_arrives_mid_generation_joins_and_finishes_first(engine, temperature):
    scheduler = Scheduler(engine)
    long_p = SamplingParams(temperature=temperature, max_new_tokens=120, seed=1)
    short_p = SamplingParams(temperature=temperature, max_new_tokens=6, seed=2)
    state = {}

    def submit_short():
        state["short"] = scheduler.submit(SHORT, [short_p])
        state["short"].add_done_callback(lambda _f: state.update(long_seen_then=len(seen), long_done=first.done()))

    listener, seen = _when(10, submit_short)
    first = scheduler.submit(LONG, [long_p], listener)
    long_out, short_out = first.result(timeout=60), state["short"].result(timeout=60)
    scheduler.close()
    assert not state["long_done"] and 10 < state["long_seen_then"] < 120  # it finished while the long one ran
    assert short_out.batch_rows == 2  # admitted into the running batch
    assert seen == long_out.completions[0].token_ids  # streamed tokens are the completion's
    assert long_out.completions[0].token_ids == engine.generate([LONG], long_p)[0].token_ids
    assert short_out.completions[0].token_ids == engine.generate([SHORT], short_p)[0].token_ids
    assert len(long_out.completions[0].token_ids) == 120


def test_with_a_batch_of_one_row_a_request_waits_for_the_running_one(engine):
    """``max_batch=1`` (``task.KIND.gateway_max_batch=1``): the request that arrives mid-generation is not
    admitted beside the running row; it starts when that one is done, computed alone."""
    scheduler = Scheduler(engine, max_batch=1)
    long_p, short_p = SamplingParams(max_new_tokens=40, seed=1), SamplingParams(max_new_tokens=6, seed=2)
    state = {}
    listener, _seen = _when(10, lambda: state.update(short=scheduler.submit(SHORT, [short_p])))
    first = scheduler.submit(LONG, [long_p], listener)
    long_out = first.result(timeout=60)
    short_out = state["short"].result(timeout=60)  # submitted at the long row's 10th token
    scheduler.close()
    assert long_out.batch_rows == short_out.batch_rows == 1
    assert [len(o.completions[0].token_ids) for o in (long_out, short_out)] == [40, 6]
    assert scheduler.steps == 40 + 6  # a decode step a token of one row: the two never shared a step


@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_with_a_drafter_requests_join_a_running_speculative_batch(engine, temperature):
    """The same with speculative rounds: the late request joins the running batch (no whole-call wait),
    and both sample exactly what ``Engine.generate`` samples alone with the same drafter and k."""
    draft = build_model(TinySpec(vocab_size=259, hidden_size=32, max_positions=4096), seed=0, init_scale=5.0)
    with torch.no_grad():
        for p in draft.parameters():
            p.add_(0.2 * p.std() * torch.randn(p.shape, generator=torch.Generator().manual_seed(1)))
    spec = Engine(engine.model, DraftModel(draft), num_draft_tokens=3)
    scheduler = Scheduler(spec)
    assert scheduler.continuous
    long_p = SamplingParams(temperature=temperature, max_new_tokens=120, seed=1)
    short_p = SamplingParams(temperature=temperature, max_new_tokens=6, seed=2)
    state = {}

    def submit_short():
        state["short"] = scheduler.submit(SHORT, [short_p])
        state["short"].add_done_callback(lambda _f: state.update(long_done=first.done()))

    listener, seen = _when(10, submit_short)
    first = scheduler.submit(LONG, [long_p], listener)
    long_out, short_out = first.result(timeout=60), state["short"].result(timeout=60)
    scheduler.close()
    assert not state["long_done"] and short_out.batch_rows == 2
    assert seen == long_out.completions[0].token_ids
    alone = spec.generate([LONG], long_p)[0]
    assert long_out.completions[0].token_ids == alone.token_ids and alone.draft_accepted > 0
    assert short_out.completions[0].token_ids == spec.generate([SHORT], short_p)[0].token_ids


def test_a_weight_update_waits_for_rows_in_flight_and_holds_back_new_ones(engine):
    scheduler = Scheduler(engine)
    weights = {k: v.clone() for k, v in engine.model.state_dict().items()}
    before = engine.policy_version
    p = SamplingParams(temperature=0.0, max_new_tokens=80)
    state = {}

    def start_update():
        state["update"] = threading.Thread(target=scheduler.update_weights, args=(weights,))
        state["update"].start()
        while not scheduler._updates_waiting:  # the update is registered before the late request comes
            time.sleep(0.001)

    def submit_late():
        state["late"] = scheduler.submit(SHORT, [SamplingParams(temperature=0.0, max_new_tokens=4)])

    def on_tokens(k, ids):
        on_a(k, ids)
        on_b(k, ids)
    on_a, _ = _when(5, start_update)
    on_b, _ = _when(20, submit_late)
    running = scheduler.submit(LONG, [p], on_tokens)
    out, late = running.result(timeout=60), state["late"].result(timeout=60)
    state["update"].join(timeout=60)
    scheduler.close()
    assert out.policy_version == before and len(out.completions[0].token_ids) == 80  # drained on the old weights
    assert late.policy_version == before + 1 == engine.policy_version  # admitted only after the update
    assert late.batch_rows == 1


def test_streaming_sends_text_while_generating(random_gateway):
    _, url = random_gateway
    body = {"model": "tiny", "messages": [{"role": "user", "content": "Tell me a long story."}], "max_tokens": 60,
            "temperature": 0, "stream": True}
    plain = httpx.post(url + "/chat/completions", json={**body, "stream": False},
                       headers={"x-session-id": "s-live-ref"}, timeout=60).json()
    events = []
    with httpx.stream("POST", url + "/chat/completions", json=body, headers={"x-session-id": "s-live"},
                      timeout=60) as r:
        for line in r.iter_lines():
            if line.startswith("data: ") and line != "data: [DONE]":
                events.append(httpx.Response(200, content=line[6:]).json())
    choices = [e["choices"][0] for e in events if e["choices"]]
    finish_at = next(i for i, c in enumerate(choices) if c["finish_reason"] is not None)
    content = [c["delta"]["content"] for c in choices[:finish_at] if c["delta"].get("content")]
    assert len(content) > 1  # token by token, not one chunk at the end
    assert "".join(content) == plain["choices"][0]["message"]["content"]


def _live(stop=(), blocks="<"):
    return LiveText(lambda ids: bytes(ids).decode("utf-8", errors="replace"), list(stop), (0,), blocks)


def test_live_text_sends_only_what_the_final_content_starts_with():
    live = _live(stop=["END"])
    assert [live.push(list(t.encode())) for t in ("He", "llo", " wor", "ldE", "N", "D more")] == \
        ["", "Hel", "lo w", "orl", "d", ""]  # 2 characters held back: they could begin "END"
    live = _live()
    assert [live.push(list(t.encode())) for t in ("Hi ", "there\n", "<tool_call>", "x")] == ["Hi", " there", "", ""]
    assert rest("Hi there", live.sent) == ""  # the parser strips the layout before the block
    live = _live(blocks="")
    assert [live.push(ids) for ids in (list(b"a<b"), [0xC3], [0xA9])] == ["a<b", "", "\u00e9"]  # half a UTF-8 char waits
    assert _live().push(list(b" lead")) == ""  # leading whitespace: stripped if a block follows, so wait
    with pytest.raises(AssertionError):
        rest("other", "Hi")


class _BrokenSessions:
    """A backend whose scheduler thread dies opening its batch (not a backend call's error: the thread's)."""

    policy_version = 0
    capabilities = Capabilities(sessions=True)

    def session(self):
        raise KeyError("no session here")

    def generate(self, prompt_ids, params):
        raise AssertionError("never reached")


def test_a_dead_scheduler_fails_every_waiting_and_later_job_with_its_traceback():
    scheduler = Scheduler(_BrokenSessions())
    first = scheduler.submit(SHORT, [SamplingParams(max_new_tokens=2)])
    with pytest.raises(Exception) as waited:
        first.result(timeout=60)
    assert scheduler.drain(timeout=60) and not scheduler.alive()
    later = scheduler.submit(SHORT, [SamplingParams(max_new_tokens=2)])
    assert later.done()  # refused at once, not queued behind a dead thread
    for exc in (waited.value, later.exception()):
        assert type(exc).__name__ == "SchedulerDied" and "KeyError: 'no session here'" in str(exc)
        assert "Traceback (most recent call last)" in str(exc)
