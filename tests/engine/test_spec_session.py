"""Continuous batching with speculative rounds (``SpeculativeSession``): a row that joins a running batch
samples exactly what ``Engine.generate([prompt], params)`` samples alone with the same drafter and k
(greedy and seeded; ``generate``'s speculative output is itself checked against the exact distribution in
test_distribution.py), one-token prompts included, and the session's counters add up."""
import pytest
import torch

from trajkit.engine import Engine, SamplingParams
from trajkit.engine.drafters import DraftModel, NgramDrafter
from trajkit.engine.drafters.eagle import EagleDrafter, EagleHead
from trajkit.engine.session import DecodeSession, SpeculativeSession

from .helpers import perturbed_copy, target_model
from .test_session import PROMPTS, SPEC_WIDE, _run, assert_like_alone


def _drafter(kind, model):
    if kind == "eagle":  # drafts from the target's features: joining rows bring theirs from their prefill
        return EagleDrafter(EagleHead(model, (1, 2), init_seed=2))
    return DraftModel(perturbed_copy(model, 0.3, seed=7)) if kind == "model" else NgramDrafter(3, 1)


@pytest.mark.parametrize("kind", ["model", "ngram", "eagle"])
@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_rows_that_join_a_speculative_batch_sample_what_they_sample_alone(kind, temperature):
    model = target_model(SPEC_WIDE, seed=1, dtype=torch.float64)
    drafter = _drafter(kind, model)
    if kind == "model":
        drafter.model.to(torch.float64)
    engine = Engine(model, drafter, num_draft_tokens=3)
    params = [SamplingParams(temperature=temperature, top_k=k, max_new_tokens=n, seed=s)
              for s, n, k in ((3, 20, 0), (4, 6, 5), (5, 14, 0), (6, 9, 0))]
    session = engine.session()
    assert isinstance(session, SpeculativeSession) and session.k == 3
    # row 0 alone; rows 1 and 2 join after two rounds (ragged prompts; row 1's is one token); row 3 (the
    # longest prompt) after row 1 has left
    out = _run(session, {0: [(PROMPTS[0], params[0])], 2: [(PROMPTS[1], params[1]), (PROMPTS[2], params[2])],
                         5: [(PROMPTS[3], params[3])]})
    assert_like_alone(engine, out, params)
    stats = session.stats
    assert stats.new_tokens == sum(len(c.token_ids) for c, _ in out.values()) and stats.rows == 4
    assert stats.accepted == sum(c.draft_accepted for c, _ in out.values()) and stats.proposed > 0


def test_one_token_prompts_join_an_idle_and_a_running_session():
    """Nothing of a one-token prompt is prefilled (its token is scored with the first drafts): the merged
    cache gets rows of holes only, on either side."""
    model = target_model(SPEC_WIDE, seed=2, dtype=torch.float64)
    drafter = DraftModel(perturbed_copy(model, 0.3, seed=1).to(torch.float64))
    engine = Engine(model, drafter, num_draft_tokens=2)
    p = SamplingParams(temperature=0.0, max_new_tokens=8)
    out = _run(engine.session(), {0: [([5], p), ([7], p)], 1: [([9], p)], 2: [([1, 2, 3, 4], p)]})
    for row, prompt in enumerate([[5], [7], [9], [1, 2, 3, 4]]):
        assert out[row][0].token_ids == engine.generate([prompt], p)[0].token_ids, row


def test_rounds_without_drafts_are_plain_decoding():
    """k = 0 (what "auto" picks when drafting would not pay): one token per round, the plain session's
    greedy tokens."""
    model = target_model(SPEC_WIDE, seed=3, dtype=torch.float64)
    p = SamplingParams(temperature=0.0, max_new_tokens=10)
    session = SpeculativeSession(model, NgramDrafter(3, 1), 0)
    out = _run(session, {0: [(PROMPTS[0], p)], 3: [(PROMPTS[2], p)]})
    plain = _run(DecodeSession(model), {0: [(PROMPTS[0], p)], 3: [(PROMPTS[2], p)]})
    assert [out[r][0].token_ids for r in (0, 1)] == [plain[r][0].token_ids for r in (0, 1)]
    assert session.stats.proposed == 0 and session.stats.new_tokens == 20


def test_auto_k_is_chosen_per_busy_period_and_learns_from_it():
    model = target_model(SPEC_WIDE, seed=1, dtype=torch.float64)
    engine = Engine(model, DraftModel(perturbed_copy(model, 0.1, seed=3).to(torch.float64)), num_draft_tokens="auto")
    session = engine.session()
    p = SamplingParams(temperature=1.0, max_new_tokens=12, seed=0)
    _run(session, {0: [(PROMPTS[0], p), (PROMPTS[2], p)]})
    choice = engine.auto_k.last_choice
    assert choice is not None and session.k == choice["k"] and session.period.num_draft_tokens == session.k
    if session.k:  # the busy period's acceptance was folded into the running alpha (exponential smoothing)
        w = engine.config.alpha_smoothing
        assert sum(session.period.position_tried) > 0
        assert engine.auto_k.alpha == pytest.approx((1 - w) * choice["alpha"] + w * session.period.alpha)
    else:
        assert engine.auto_k.alpha == choice["alpha"]


def test_a_drafter_without_admit_gets_the_plain_session():
    class Legacy(NgramDrafter):
        admit = None

    engine = Engine(target_model(SPEC_WIDE, seed=1), Legacy(3, 1), num_draft_tokens=2)
    assert isinstance(engine.session(), DecodeSession)


def test_stats_is_one_live_object_across_busy_periods():
    """Callers keep ``session.stats`` (the RL agent task adds it to the step's counters): it must grow in
    place, busy period after busy period."""
    model = target_model(SPEC_WIDE, seed=1)
    session = Engine(model, NgramDrafter(3, 1), num_draft_tokens=2).session()
    held = session.stats
    p = SamplingParams(temperature=0.0, max_new_tokens=5)
    _run(session, {0: [(PROMPTS[0], p)]})
    assert held.new_tokens == 5 and held.rows == 1
    _run(session, {0: [(PROMPTS[2], p), (PROMPTS[3], p)]})
    assert session.stats is held and held.new_tokens == 15 and held.rows == 3


def test_a_callable_k_is_asked_per_busy_period_and_on_idle_gets_the_period():
    """The auto wiring without the cost model's verdict: k comes from the callable at each idle admission,
    and ``on_idle`` (the engine passes ``AutoK.observe``) folds the period's alpha into the estimate."""
    model = target_model(SPEC_WIDE, seed=1, dtype=torch.float64)
    engine = Engine(model, DraftModel(perturbed_copy(model, 0.1, seed=3).to(torch.float64)), num_draft_tokens=2)
    engine.auto_k.alpha = 0.5
    asked, periods, batches = [], [], []

    def pick(prompts, params):
        asked.append(len(prompts))
        return 2 if len(asked) == 1 else 3

    def on_idle(stats, batch):
        periods.append(stats)
        batches.append(batch)  # the rows the period started with (not those that joined)
        engine.auto_k.observe(stats)
    session = SpeculativeSession(model, engine.drafter, pick, on_idle=on_idle)
    p = SamplingParams(temperature=1.0, max_new_tokens=10, seed=0)
    _run(session, {0: [(PROMPTS[0], p), (PROMPTS[2], p)], 1: [(PROMPTS[3], p)]})
    assert asked == [2] and session.k == 2 and len(periods) == 1  # the joining row did not re-pick
    assert batches == [2]
    first = periods[0]
    assert first.num_draft_tokens == 2 and first.rows == 3 and first.new_tokens == 30 and sum(first.position_tried) > 0
    assert engine.auto_k.alpha == pytest.approx(0.5 * 0.5 + 0.5 * first.alpha)
    _run(session, {0: [(PROMPTS[1], p)]})
    assert asked == [2, 1] and session.k == 3 and len(periods) == 2 and periods[1].num_draft_tokens == 3
    assert session.stats.rows == 4 and session.stats.new_tokens == 40
