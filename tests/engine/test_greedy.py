"""Greedy speculative decoding equals greedy target decoding token for token, batched and unbatched.

float64 models keep batched / incremental / full-forward logits within 1e-12 of each other, so an argmax
can only differ through a real bug, never through rounding.
"""
from __future__ import annotations

import pytest
import torch

from tests.engine.helpers import perturbed_copy, target_model, trained_eagle
from trajkit.engine import DraftModel, Engine, NgramDrafter, SamplingParams
from trajkit.engine.drafters.eagle import EagleDrafter
from trajkit.models.spec import TinySpec

SPEC = TinySpec(vocab_size=16, hidden_size=32, num_layers=2, num_heads=4, num_kv_heads=2, intermediate_size=64)
PROMPTS = [[3], [1, 2, 3, 4, 5, 6, 7, 8, 9], [5, 5, 6], [9, 8, 9, 8, 9, 8, 2, 11, 4, 7, 9, 8], [14, 0]]
GREEDY = SamplingParams(temperature=0.0, max_new_tokens=40)


@pytest.fixture(scope="module")
def models():
    target = target_model(SPEC, seed=3, dtype=torch.float64)
    return target, perturbed_copy(target, noise=0.3, seed=4)


@pytest.fixture(scope="module")
def eagle(models):
    return trained_eagle(models[0], steps=40)


@torch.no_grad()
def reference_greedy(model, prompt: list[int], steps: int) -> list[int]:
    """Slow reference: a full forward over the whole sequence for every token, no cache."""
    seq = list(prompt)
    for _ in range(steps):
        seq.append(int(model(input_ids=torch.tensor([seq])).logits[0, -1].argmax()))
    return seq[len(prompt):]


def test_plain_greedy_matches_reference_batched(models):
    target, _ = models
    out = Engine(target).generate(PROMPTS, GREEDY)
    assert [c.token_ids for c in out] == [reference_greedy(target, p, 40) for p in PROMPTS]
    assert all(c.finish_reason == "length" and c.logprobs == [0.0] * 40 for c in out)


@pytest.mark.parametrize("k", [1, 2, 3, 4])
@pytest.mark.parametrize("kind", ["model", "ngram", "eagle"])
def test_speculative_greedy_equals_plain(models, kind, k, request):
    target, draft = models
    plain = Engine(target).generate(PROMPTS, GREEDY)
    drafter = {"model": lambda: DraftModel(draft), "ngram": NgramDrafter,
               "eagle": lambda: EagleDrafter(request.getfixturevalue("eagle"))}[kind]()
    spec = Engine(target, drafter, num_draft_tokens=k).generate(PROMPTS, GREEDY)
    assert [c.token_ids for c in spec] == [c.token_ids for c in plain]
    st = spec.stats
    assert 0 < st.accepted < st.proposed  # ragged acceptance actually happened
    assert st.target_calls < plain.stats.target_calls


@pytest.mark.parametrize("kind", ["plain", "model"])
def test_batched_equals_unbatched(models, kind):
    target, draft = models

    def engine():
        return Engine(target) if kind == "plain" else Engine(target, DraftModel(draft), num_draft_tokens=3)
    batched = [c.token_ids for c in engine().generate(PROMPTS, GREEDY)]
    single = [engine().generate([p], GREEDY)[0].token_ids for p in PROMPTS]
    assert batched == single


def test_stop_tokens_and_budgets_per_row(models):
    target, draft = models
    ref = [reference_greedy(target, p, 30) for p in PROMPTS]
    stop = ref[1][4]  # row 1 must stop at its 5th token (or earlier, if the token came before)
    rows = [SamplingParams(temperature=0.0, max_new_tokens=n, stop_token_ids=[stop]) for n in (3, 30, 7, 30, 1)]
    for engine in (Engine(target), Engine(target, DraftModel(draft), num_draft_tokens=3)):
        out = engine.generate(PROMPTS, rows)
        for c, r, p in zip(out, ref, rows):
            cut = r[:p.max_new_tokens]
            if stop in cut:
                cut = cut[:cut.index(stop) + 1]
            assert c.token_ids == cut
            assert c.finish_reason == ("stop" if cut[-1] == stop and stop in r[:p.max_new_tokens] else "length")
        assert out[1].finish_reason == "stop" and out[1].token_ids[-1] == stop


def test_qwen2_family_and_long_run_with_compaction(models):
    """Qwen2 architecture; 120 tokens with a poor draft leave many holes, exercising compaction."""
    spec = TinySpec(vocab_size=16, hidden_size=32, num_layers=2, num_heads=4, num_kv_heads=2,
                    intermediate_size=64, family="qwen2")
    target = target_model(spec, seed=5, dtype=torch.float64)
    draft = perturbed_copy(target, noise=1.0, seed=6)
    params = SamplingParams(temperature=0.0, max_new_tokens=120)
    plain = Engine(target).generate(PROMPTS, params)
    spec_out = Engine(target, DraftModel(draft), num_draft_tokens=4).generate(PROMPTS, params)
    assert [c.token_ids for c in spec_out] == [c.token_ids for c in plain]


def test_perfect_draft_statistics(models):
    """Draft = target under greedy: every draft accepted, k + 1 tokens per target call."""
    target, _ = models
    k, rounds = 3, 5
    params = SamplingParams(temperature=0.0, max_new_tokens=rounds * (k + 1))
    out = Engine(target, DraftModel(target), num_draft_tokens=k).generate(PROMPTS[1:3], params)
    st = out.stats
    assert st.target_calls == 1 + rounds  # prefill + one verification per round
    assert st.acceptance_rate == 1.0 and st.alpha == pytest.approx(1.0)
    assert st.mean_acceptance_length == k + 1
    assert st.per_position_acceptance == [1.0] * k
    assert st.proposed == st.accepted == 2 * rounds * k
    assert [c.draft_accepted for c in out] == [rounds * k] * 2
    assert st.target_calls_per_token == pytest.approx((1 + rounds) / (2 * rounds * (k + 1)))
