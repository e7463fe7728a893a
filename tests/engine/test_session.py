"""Continuous batching: a row that joins a running ``DecodeSession`` samples exactly what it samples alone
through ``Engine.generate`` (greedy and seeded), rows leave as they finish, and bad input is refused."""
import pytest
import torch

from trajkit.engine import Engine, SamplingParams
from trajkit.errors import ConfigError, InputError
from trajkit.models.spec import TinySpec

from .helpers import SPEC, target_model

SPEC_WIDE = TinySpec(vocab_size=40, hidden_size=32, num_layers=2, num_heads=4, num_kv_heads=2,
                     intermediate_size=64, max_positions=256)
PROMPTS = [[1, 2, 3, 4, 5, 6, 7], [3], [5, 9, 2, 11], [8, 8, 1, 30, 2, 6, 6, 6, 1, 2, 3]]


def _run(session, schedule: dict[int, list[tuple[list[int], SamplingParams]]]):
    """Step ``session``; before step ``s`` admit ``schedule[s]``. -> {row id: (completion, tokens streamed)}."""
    done, streamed, step = {}, {}, 0
    while step <= max(schedule) or session.rows:
        if step in schedule:
            prompts, params = zip(*schedule[step])
            session.admit(list(prompts), list(params))
        for u in session.step():
            streamed.setdefault(u.row, []).extend(u.token_ids)
            if u.done is not None:
                done[u.row] = u.done
        step += 1
    return {r: (done[r], streamed[r]) for r in done}


def assert_like_alone(engine, out, params) -> None:
    """Row ``r`` of ``out`` (``_run``'s result for ``PROMPTS[r]``) is what ``engine.generate`` gives it alone:
    tokens (streamed too), log-probs, finish reason, drafts proposed and accepted."""
    assert sorted(out) == list(range(len(params)))
    for row, p in enumerate(params):
        alone = engine.generate([PROMPTS[row]], p)[0]
        got, streamed = out[row]
        assert got.token_ids == alone.token_ids, row
        assert streamed == alone.token_ids
        assert got.logprobs == pytest.approx(alone.logprobs, abs=1e-9)
        assert got.finish_reason == alone.finish_reason
        assert (got.draft_proposed, got.draft_accepted) == (alone.draft_proposed, alone.draft_accepted)


@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_rows_that_join_a_running_batch_sample_what_they_sample_alone(temperature):
    model = target_model(SPEC_WIDE, seed=1, dtype=torch.float64)
    engine = Engine(model)
    params = [SamplingParams(temperature=temperature, top_k=k, max_new_tokens=n, seed=s)
              for s, n, k in ((3, 20, 0), (4, 6, 5), (5, 14, 0), (6, 9, 0))]
    # row 0 starts alone; rows 1 and 2 join at step 4 (a two-row prefill of ragged prompts, merged into a
    # wider cache); row 1 leaves at step 10; row 3 (the longest prompt, wider than the running cache) joins
    # at step 12, after row 1 left
    out = _run(engine.session(), {0: [(PROMPTS[0], params[0])], 4: [(PROMPTS[1], params[1]), (PROMPTS[2], params[2])],
                                  12: [(PROMPTS[3], params[3])]})
    assert_like_alone(engine, out, params)
    assert len(out[1][0].token_ids) == 6  # its budget: it left the batch while the others ran on


def test_float32_greedy_rows_join_and_match_alone():
    model = target_model(SPEC, seed=0)
    engine = Engine(model)
    p = SamplingParams(temperature=0.0, max_new_tokens=12, stop_token_ids=[11])
    out = _run(engine.session(), {0: [([1, 2, 3], p)], 3: [([4, 5], p), ([6, 7, 8, 9, 1], p)]})
    for row, prompt in enumerate([[1, 2, 3], [4, 5], [6, 7, 8, 9, 1]]):
        assert out[row][0].token_ids == engine.generate([prompt], p)[0].token_ids


def test_stats_and_an_idle_session_restarts():
    engine = Engine(target_model(SPEC, seed=0))
    session = engine.session()
    assert session.step() == []
    p = SamplingParams(temperature=0.0, max_new_tokens=3)
    first = _run(session, {0: [([1, 2], p)]})
    again = _run(session, {0: [([1, 2], p)]})  # the batch emptied; the next admission starts a fresh cache
    assert first[0][0].token_ids == again[1][0].token_ids
    assert session.stats.new_tokens == 6 and session.stats.rows == 2
    assert session.stats.target_calls == 2 * (1 + 2)  # per row: its prefill, then one forward per next token


def test_bad_admissions_are_refused_before_touching_the_batch():
    engine = Engine(target_model(SPEC, seed=0))
    session = engine.session()
    with pytest.raises(InputError, match="prompt_ids"):
        session.admit([[1, 99]], [SamplingParams()])
    with pytest.raises(ConfigError, match="stop_token_ids"):
        session.admit([[1]], [SamplingParams(stop_token_ids=[50])])
    assert session.rows == []
