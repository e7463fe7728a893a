"""Speculative sampling is lossless: sampled continuations follow the target's exact distribution.

For random tiny models (vocabulary 12) we enumerate the exact probability of every continuation of
length 3 (or 2) under the warped target, sample thousands of continuations in one ragged batch (three
prompts of different lengths, each repeated), and run a pooled chi-square goodness-of-fit test. The same
test rejects deliberately wrong samplers, which shows it has power. Seeds are fixed: deterministic.
"""
from __future__ import annotations

import numpy as np
import pytest
import torch

import trajkit.engine.speculative as speculative
from tests.engine.helpers import (
    cell_index,
    chi_square,
    combined_p_value,
    exact_distribution,
    perturbed_copy,
    target_model,
)
from trajkit.engine import DraftModel, Engine, NgramDrafter, SamplingParams
from trajkit.engine.drafters.eagle import EagleDrafter, EagleHead
from trajkit.engine.warp import sample

PROMPTS = [[1, 2, 3, 1, 2], [4, 5, 4], [7, 1, 7, 1, 9, 7, 1]]  # repeats give the n-gram drafter matches
PASS_P = 1e-3  # a correct sampler fails this with probability 1e-3 per config; seeds are fixed
FAIL_P = 1e-8  # a wrong sampler must be rejected far more strongly


@pytest.fixture(scope="module")
def models():
    target = target_model(seed=0)
    return target, perturbed_copy(target, noise=0.6, seed=1)


def run_fit(target, drafter, k, params, length, per_prompt) -> tuple[float, dict]:
    """Sample ``per_prompt`` continuations of each prompt in one batch; (p-value, stats dict)."""
    params = SamplingParams(temperature=params.temperature, top_k=params.top_k, top_p=params.top_p,
                            max_new_tokens=length, seed=params.seed)
    prompts = [p for p in PROMPTS for _ in range(per_prompt)]
    engine = Engine(target, drafter=drafter, num_draft_tokens=k) if drafter else Engine(target)
    out = engine.generate(prompts, params)
    v = target.config.vocab_size
    parts = []
    for j, prompt in enumerate(PROMPTS):
        counts = np.zeros(v ** length)
        for c in out[j * per_prompt:(j + 1) * per_prompt]:
            assert len(c.token_ids) == length
            counts[cell_index(c.token_ids, v)] += 1
        parts.append(chi_square(counts, exact_distribution(target, prompt, length, params)))
    return combined_p_value(parts), out.stats.to_dict()


CASES = [
    # (drafter, k, temperature, top_k, top_p, length)
    ("none", 0, 1.0, 0, 1.0, 3),
    ("model", 1, 1.0, 0, 1.0, 3),
    ("model", 3, 1.0, 0, 1.0, 4),
    ("model", 3, 0.7, 5, 1.0, 3),
    ("model", 1, 0.7, 0, 0.8, 3),
    ("model", 3, 1.0, 6, 0.9, 2),
    ("ngram", 3, 1.0, 0, 1.0, 3),
    ("ngram", 1, 0.7, 0, 0.9, 3),
    ("eagle", 3, 1.0, 0, 1.0, 4),
    ("eagle", 2, 0.7, 5, 0.9, 3),
    ("eagle-shortlist", 3, 1.0, 0, 1.0, 3),  # q is exactly 0 outside 8 of the 12 ids
]


def eagle_drafter(target, shortlist=None):
    """An untrained EAGLE head over ``target`` (features of its layers 1 and 2), seeded."""
    return EagleDrafter(EagleHead(target, (1, 2), shortlist, init_seed=0))


@pytest.mark.parametrize("kind,k,temperature,top_k,top_p,length", CASES)
def test_matches_exact_distribution(models, kind, k, temperature, top_k, top_p, length):
    target, draft = models
    drafter = {"none": lambda: None, "model": lambda: DraftModel(draft), "ngram": NgramDrafter,
               "eagle": lambda: eagle_drafter(target),
               "eagle-shortlist": lambda: eagle_drafter(target, [0, 1, 2, 3, 5, 7, 8, 10])}[kind]()
    params = SamplingParams(temperature=temperature, top_k=top_k, top_p=top_p, seed=11)
    p_value, st = run_fit(target, drafter, k, params, length, per_prompt=2000)
    assert p_value > PASS_P, (p_value, st)
    if kind != "none":  # the test exercised ragged acceptance: some drafts accepted, some rejected
        assert 0.05 < st["acceptance_rate"] < 0.95, st
        assert st["position_tried"][0] > st["position_accepted"][0] > 0, st


def _accept_all(p, draft, q, draft_len, u_accept, u_final):
    """A wrong kernel: keeps every draft, then samples the next token from p."""
    rows = torch.arange(p.shape[0])
    return draft_len.clone(), sample(p[rows, draft_len], u_final), p.new_zeros(draft.shape)


def _resample_from_p(p, draft, q, draft_len, u_accept, u_final):
    """A subtly wrong kernel: correct accept test, but a rejection resamples from p, not max(0, p - q)."""
    n, _, overlap = speculative_kernel(p, draft, q, draft_len, u_accept, u_final)
    rows = torch.arange(p.shape[0])
    return n, sample(p[rows, n], u_final), overlap


speculative_kernel = speculative.verify_drafts


@pytest.mark.parametrize("kind", ["model", "eagle"])
@pytest.mark.parametrize("wrong", [_accept_all, _resample_from_p])
def test_wrong_sampler_fails(models, monkeypatch, wrong, kind):
    """The same test has power with each drafter with weights: a wrong kernel is rejected."""
    target, draft = models
    monkeypatch.setattr(speculative, "verify_drafts", wrong)
    params = SamplingParams(temperature=1.0, seed=11)
    drafter = DraftModel(draft) if kind == "model" else eagle_drafter(target)
    p_value, st = run_fit(target, drafter, 3, params, 3, per_prompt=2000)
    assert p_value < FAIL_P, (p_value, st)


def test_per_row_params_batch(models):
    """Rows with different temperatures / top-p in one batch each follow their own exact distribution."""
    target, draft = models
    per_prompt, length = 2000, 2
    row_params = [SamplingParams(temperature=t, top_p=tp, max_new_tokens=length, seed=s)
                  for t, tp in ((1.0, 1.0), (0.7, 0.9)) for s in range(per_prompt)]
    prompt = PROMPTS[0]
    out = Engine(target, DraftModel(draft), num_draft_tokens=2).generate([prompt] * len(row_params),
                                                                           row_params)
    v = target.config.vocab_size
    parts = []
    for j in range(2):
        counts = np.zeros(v ** length)
        for c in out[j * per_prompt:(j + 1) * per_prompt]:
            counts[cell_index(c.token_ids, v)] += 1
        parts.append(chi_square(counts, exact_distribution(target, prompt, length, row_params[j * per_prompt])))
    assert combined_p_value(parts) > PASS_P
