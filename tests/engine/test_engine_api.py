"""Engine API: seeds, per-row streams, logprob helper, weight updates, n-gram lookup, choosing k."""
from __future__ import annotations

import math

import pytest
import torch

from tests.engine.helpers import perturbed_copy, target_model
from trajkit.engine import (
    DraftModel,
    Engine,
    EngineConfig,
    GenerationStats,
    NgramDrafter,
    SamplingParams,
)
from trajkit.engine.auto_k import AutoK
from trajkit.engine.choose_k import choose_k, predicted_speedup
from trajkit.engine.drafters.ngram import NgramIndex
from trajkit.engine.types import validate_completion
from trajkit.errors import ConfigError
from trajkit.models.spec import TinySpec

SPEC = TinySpec(vocab_size=16, hidden_size=32, num_layers=2, num_heads=4, num_kv_heads=2, intermediate_size=64)
PROMPTS = [[3, 4], [1, 2, 3, 4, 5, 6], [7]]


@pytest.fixture(scope="module")
def models():
    target = target_model(SPEC, seed=11, dtype=torch.float64)
    return target, perturbed_copy(target, noise=0.5, seed=12)


def ids(out):
    return [c.token_ids for c in out]


def test_seeded_runs_repeat_and_rows_differ(models):
    target, draft = models
    params = SamplingParams(temperature=1.0, max_new_tokens=20, seed=5)
    for engine in (Engine(target), Engine(target, DraftModel(draft), num_draft_tokens=2)):
        a, b = engine.generate(PROMPTS * 2, params), engine.generate(PROMPTS * 2, params)
        assert ids(a) == ids(b)
        assert ids(a)[:3] != ids(a)[3:]  # same prompts, different row streams
        other = engine.generate(PROMPTS * 2, SamplingParams(temperature=1.0, max_new_tokens=20, seed=6))
        assert ids(other) != ids(a)
        for c in a:
            validate_completion(c)


def test_row_independent_of_batch_composition(models):
    """With one SamplingParams per row, a row's completion does not depend on its neighbours."""
    target, draft = models
    mine = SamplingParams(temperature=0.9, top_p=0.95, max_new_tokens=25, seed=42)
    alone = Engine(target, DraftModel(draft), num_draft_tokens=3).generate([PROMPTS[1]], [mine])
    crowd = [SamplingParams(temperature=1.0, max_new_tokens=n, seed=s) for s, n in ((1, 5), (2, 40))]
    together = Engine(target, DraftModel(draft), num_draft_tokens=3).generate(
        [PROMPTS[0], PROMPTS[1], PROMPTS[2]], [crowd[0], mine, crowd[1]])
    assert together[1].token_ids == alone[0].token_ids
    assert together[1].logprobs == pytest.approx(alone[0].logprobs, abs=1e-9)


def test_logprobs_match_the_scoring_helper(models):
    target, draft = models
    params = SamplingParams(temperature=0.7, top_k=8, max_new_tokens=15, seed=3)
    for engine in (Engine(target), Engine(target, DraftModel(draft), num_draft_tokens=3)):
        out = engine.generate(PROMPTS, params)
        scored = engine.token_logprobs(PROMPTS, ids(out), params)
        for c, s in zip(out, scored):
            assert c.logprobs == pytest.approx(s, abs=1e-9)
    raw = Engine(target).token_logprobs([[3, 4]], [[5, 6]])[0]
    with torch.no_grad():
        ref = torch.log_softmax(target(input_ids=torch.tensor([[3, 4, 5, 6]])).logits[0], -1)
    assert raw == pytest.approx([float(ref[1, 5]), float(ref[2, 6])], abs=1e-12)


def test_update_weights_switches_policy(models):
    target, draft = models
    engine = Engine(perturbed_copy(target, noise=2.0, seed=99))
    greedy = SamplingParams(temperature=0.0, max_new_tokens=12)
    before = ids(engine.generate(PROMPTS, greedy))
    assert engine.update_weights(target.state_dict()) == 1
    assert ids(engine.generate(PROMPTS, greedy)) == ids(Engine(target).generate(PROMPTS, greedy)) != before


def test_ngram_index_lookup():
    index = NgramIndex(min_n=1, max_n=3)
    seq = [1, 2, 3, 4, 9, 2, 3, 4, 5, 1, 2, 3]
    assert index.lookup(seq, 3) == [4, 9, 2]  # "1 2 3" seen at the start, followed by 4 9 2
    seq += [7]
    assert index.lookup(seq, 2) == []  # 7 never seen before
    seq += [3, 4]
    assert index.lookup(seq, 4) == [5, 1, 2, 3]  # "3 4" most recently followed by 5 ...
    assert index.lookup([1, 2, 1], 5) == [2, 1]  # rebuilt for a new sequence; "1" followed by 2 1


def test_predicted_speedup_and_choice():
    # alpha 0.8, k 3: (1 - 0.8^4) / 0.2 = 2.952 tokens per round; cost 3 * 0.1 + 1.2 = 1.5
    assert predicted_speedup(0.8, 3, 0.1, 1.2) == pytest.approx(2.952 / 1.5)
    assert predicted_speedup(1.0, 2, 0.0, 1.0) == 3.0
    assert predicted_speedup(0.5, 0, 0.3, 1.0) == 1.0
    v = {1: 1.1, 2: 1.2, 3: 1.3, 4: 1.5}
    k, s = choose_k(0.8, 0.1, v)
    assert k == 3 and s == pytest.approx(max(predicted_speedup(0.8, j, 0.1, v[j]) for j in v))
    assert choose_k(0.2, 0.5, v) == (0, 1.0)  # weak draft: plain decoding
    assert choose_k(0.9, 0.05, {j: j + 1.0 for j in range(1, 5)}) == (0, 1.0)  # compute bound: v(k) = k+1


def test_auto_k_runs_and_records_choice(models):
    target, _ = models
    engine = Engine(target, DraftModel(target), num_draft_tokens="auto")
    out = engine.generate(PROMPTS, SamplingParams(temperature=1.0, max_new_tokens=10, seed=0))
    choice = engine.auto_k.last_choice
    assert choice["alpha"] == pytest.approx(1.0)  # the draft is the target itself
    assert set(choice["v"]) == {"1", "2", "3", "4"} and choice["c"] > 0
    assert choice["k"] == out.stats.num_draft_tokens and 0 <= choice["k"] <= 4
    assert math.isfinite(choice["predicted_speedup"])


def test_ngram_engine_uses_prompt_lookup(models):
    target, _ = models
    prompt = [[5, 6, 7, 8] * 6]
    out = Engine(target, NgramDrafter(), num_draft_tokens=4).generate(prompt, SamplingParams(temperature=0.0,
                                                                                            max_new_tokens=30))
    assert out.stats.proposed > 0 and out.stats.draft_calls == 0


def test_auto_k_alpha_is_smoothed_over_speculative_calls():
    auto = AutoK(model=None, drafter=None, smoothing=0.25)
    auto.observe(GenerationStats(position_tried=[0, 0]))  # nothing verified: no information
    assert auto.alpha is None
    auto.observe(GenerationStats(position_tried=[3, 1], overlap_sum=2.0))  # alpha 0.5
    assert auto.alpha == 0.5
    auto.observe(GenerationStats(position_tried=[4], overlap_sum=4.0))  # alpha 1.0
    assert auto.alpha == 0.75 * 0.5 + 0.25 * 1.0
    with pytest.raises(ConfigError, match="drafter"):
        auto.calibrate([[1]], SamplingParams())


def test_auto_k_falls_back_to_plain_after_a_speculative_call_slower_than_plain():
    from trajkit.engine.choose_k import CostProfile

    auto = AutoK(model=None, drafter=None)
    auto.alpha = 0.9  # the model predicts a large gain at both batch sizes
    cheap = {k: 1.0 + 0.1 * k for k in range(1, 5)}
    auto.costs = {4: CostProfile(4, t1=0.01, c=0.05, v=cheap), 8: CostProfile(8, t1=0.02, c=0.05, v=cheap)}
    assert auto.choice(4)["k"] > 0 and auto.choice(8)["k"] > 0
    # plain decoding at batch 4 makes 4 / 0.01 = 400 tokens/s; this call made 100 tokens in 0.5 s = 200/s
    auto.observe(GenerationStats(position_tried=[4], overlap_sum=3.6, new_tokens=100, seconds=0.5), batch=4)
    assert auto.plain_only == {4: pytest.approx(0.5)} and auto.choice(4)["k"] == 0
    # faster than plain (500 tokens/s at batch 8 against 400): batch 8 keeps speculating
    auto.observe(GenerationStats(position_tried=[4], overlap_sum=3.6, new_tokens=250, seconds=0.5), batch=8)
    assert 8 not in auto.plain_only and auto.choice(8)["k"] > 0


def test_sync_timing_changes_no_output(models):
    target, draft = models
    params = SamplingParams(temperature=1.0, max_new_tokens=15, seed=4)
    outs = [Engine(target, DraftModel(draft), config=EngineConfig(num_draft_tokens=2, sync_timing=sync))
            .generate(PROMPTS, params) for sync in (False, True)]
    assert ids(outs[0]) == ids(outs[1]) and outs[0].stats.target_seconds > 0
    with pytest.raises(ConfigError, match="sync_timing"):
        EngineConfig(sync_timing="yes")
