"""Warping against hand-derived distributions, and the inverse-CDF sampler's edge cases."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from tests.engine.helpers import chi_square, combined_p_value
from trajkit.engine.warp import row_params, sample, warp_probs

LOGITS = torch.log(torch.tensor([[0.1, 0.4, 0.2, 0.3]]))  # probabilities 0.1 0.4 0.2 0.3


def warp(logits, temperature=1.0, top_k=0, top_p=1.0):
    n = logits.shape[0]
    return warp_probs(logits, *row_params([temperature] * n, [top_k] * n, [top_p] * n, "cpu"))


@pytest.mark.parametrize("kwargs,expected", [
    ({}, [0.1, 0.4, 0.2, 0.3]),
    ({"temperature": 0.0}, [0, 1, 0, 0]),
    ({"top_k": 2}, [0, 0.4 / 0.7, 0, 0.3 / 0.7]),
    ({"top_p": 0.5}, [0, 0.4 / 0.7, 0, 0.3 / 0.7]),  # 0.4 < 0.5, so 0.3 is needed too
    ({"top_p": 0.4}, [0, 1, 0, 0]),  # mass before the 2nd token is 0.4, not < 0.4
    ({"top_p": 0.75}, [0, 0.4 / 0.9, 0.2 / 0.9, 0.3 / 0.9]),
    ({"top_k": 3, "top_p": 0.5}, [0, 0.4 / 0.7, 0, 0.3 / 0.7]),  # top-p over the renormalised top-3
    ({"top_p": 0.42}, [0, 0.4 / 0.7, 0, 0.3 / 0.7]),  # mass before token 3 is 0.4 < 0.42
    ({"top_k": 3, "top_p": 0.42}, [0, 1, 0, 0]),  # after top-3 it is 0.4 / 0.9 = 0.444 >= 0.42
])
def test_hand_derived(kwargs, expected):
    torch.testing.assert_close(warp(LOGITS, **kwargs)[0], torch.tensor(expected, dtype=torch.float32),
                               rtol=0, atol=1e-6)


def test_temperature():
    probs = warp(LOGITS, temperature=0.5)[0]
    ref = torch.tensor([0.1, 0.4, 0.2, 0.3]) ** 2
    torch.testing.assert_close(probs, ref / ref.sum(), rtol=0, atol=1e-6)


def test_per_row_parameters_and_ties():
    logits = torch.tensor([[1.0, 3.0, 3.0, 0.0], [1.0, 3.0, 3.0, 0.0], [2.0, 2.0, 2.0, 2.0]])
    probs = warp_probs(logits, *row_params([0.0, 1.0, 1.0], [0, 1, 2], [1.0, 1.0, 1.0], "cpu"))
    assert probs[0].tolist() == [0, 1, 0, 0]  # greedy: first index among ties
    assert probs[1].tolist() == [0, 1, 0, 0]  # top-1: the lower token id among ties
    assert probs[2].tolist() == [0.5, 0.5, 0, 0]


def test_sample_never_picks_zero_probability():
    probs = torch.tensor([[0.0, 0.5, 0.0, 0.5, 0.0]] * 5)
    u = torch.tensor([0.0, 0.49999, 0.5, 1 - 2 ** -53, 0.75], dtype=torch.float64)
    assert sample(probs, u).tolist() == [1, 1, 3, 3, 3]
    # unnormalised input and a u whose product rounds up to the total: clamped to the last positive token
    probs = torch.tensor([[0.3, 0.3, 0.0]])
    assert sample(probs, torch.tensor([math.nextafter(1.0, 0.0)], dtype=torch.float64)).tolist() == [1]


def test_sample_distribution():
    p = torch.tensor([0.05, 0.0, 0.5, 0.25, 0.2])
    n = 50_000
    tokens = sample(p.expand(n, 5), torch.rand(n, generator=torch.Generator().manual_seed(0), dtype=torch.float64))
    counts = np.bincount(tokens.numpy(), minlength=5)
    assert counts[1] == 0
    assert combined_p_value([chi_square(counts, p.double().numpy())]) > 1e-3
