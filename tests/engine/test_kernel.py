"""The accept/resample kernel alone, on random and adversarial (p, q) pairs.

Each case draws 60,000 independent rounds in one call and checks, by chi-square against the exact
product distribution, that the first two emitted tokens (the second drawn from p_2 when the round
stopped after one) are distributed as p_1 x p_2 -- which is what losslessness means for one round.
"""
from __future__ import annotations

import numpy as np
import pytest
import torch

from tests.engine.helpers import chi_square, combined_p_value
from trajkit.engine.kernel import emitted_tokens, verify_drafts
from trajkit.engine.warp import sample

V = 6
N = 60_000


def _dist(*weights):
    t = torch.tensor(weights, dtype=torch.float32)
    return t / t.sum()


def _one_hot(i):
    return torch.nn.functional.one_hot(torch.tensor(i), V).float()


P1 = _dist(5, 3, 1, 1, 0, 0)
P2 = _dist(1, 1, 1, 2, 3, 4)
CASES = {
    "q_equals_p": (P1, P2, P1, P2),
    "disjoint_supports": (P1, P2, _dist(0, 0, 0, 0, 1, 1), _dist(1, 1, 1, 0, 0, 0)),
    "one_hot_q": (P1, P2, _one_hot(2), _one_hot(5)),
    "q_zero_where_p_positive": (P1, P2, _dist(1, 0, 0, 0, 0, 0), _dist(0, 0, 0, 1, 0, 1)),
    "q_on_p_zeros": (P1, P2, _dist(1, 1, 1, 1, 5, 5), _dist(5, 1, 1, 1, 1, 1)),
    "p_one_hot": (_one_hot(1), _one_hot(4), _dist(1, 2, 3, 1, 1, 1), P2),
    "random": (_dist(*np.random.default_rng(0).dirichlet(np.ones(V))),
               _dist(*np.random.default_rng(1).dirichlet(np.ones(V))),
               _dist(*np.random.default_rng(2).dirichlet(np.ones(V))),
               _dist(*np.random.default_rng(3).dirichlet(np.ones(V)))),
}


def _run(p1, p2, q1, q2, one_hot_q: bool, seed: int = 0):
    gen = torch.Generator().manual_seed(seed)
    q = torch.stack([q1, q2]).expand(N, 2, V)  # [N, 2, V]
    draft = torch.stack([sample(q[:, 0], torch.rand(N, generator=gen, dtype=torch.float64)),
                         sample(q[:, 1], torch.rand(N, generator=gen, dtype=torch.float64))], dim=1)
    p = torch.stack([p1, p2, _dist(*([1] * V))]).expand(N, 3, V)  # [N, 3, V]; p_3 is the bonus
    n, nxt, overlap = verify_drafts(p, draft, None if one_hot_q else q, torch.full((N,), 2),
                                    torch.rand(N, 2, generator=gen, dtype=torch.float64),
                                    torch.rand(N, generator=gen, dtype=torch.float64))
    out = emitted_tokens(draft, n, nxt)  # [N, 3]
    second = torch.where(n >= 1, out[:, 1], sample(p[:, 1], torch.rand(N, generator=gen, dtype=torch.float64)))
    return out[:, 0], second, n, overlap


@pytest.mark.parametrize("name", sorted(CASES))
def test_kernel_is_lossless(name):
    p1, p2, q1, q2 = CASES[name]
    one_hot_q = name == "one_hot_q"
    first, second, n, overlap = _run(p1, p2, q1, q2, one_hot_q)
    counts = np.bincount((first * V + second).numpy(), minlength=V * V)
    exact = torch.outer(p1, p2).double().flatten().numpy()
    assert combined_p_value([chi_square(counts, exact)]) > 1e-3
    # the expected acceptance of position 1 is sum(min(p1, q1)); the overlap reports exactly that
    assert torch.allclose(overlap[:, 0], torch.minimum(p1, q1).sum().expand(N), atol=1e-6)
    accept_rate = float((n >= 1).double().mean())
    assert abs(accept_rate - float(torch.minimum(p1, q1).sum())) < 0.01


def test_kernel_power_against_wrong_residual():
    """Sampling p instead of the residual on rejection is detected by the same check."""
    p1, p2, q1, q2 = CASES["random"]
    first, second, n, _ = _run(p1, p2, q1, q2, False)
    gen = torch.Generator().manual_seed(9)
    wrong_first = torch.where(n >= 1, first, sample(p1.expand(N, V), torch.rand(N, generator=gen, dtype=torch.float64)))
    counts = np.bincount((wrong_first * V + second).numpy(), minlength=V * V)
    exact = torch.outer(p1, p2).double().flatten().numpy()
    assert combined_p_value([chi_square(counts, exact)]) < 1e-8


def test_accept_test_boundaries():
    """Draft accepted iff u * q(x) < p(x); full acceptance takes the bonus; draft_len stops drafting."""
    p = torch.tensor([[[0.5, 0.5, 0.0], [0.2, 0.8, 0.0], [0.0, 0.0, 1.0]]])  # [1, 3, 3]
    q = torch.tensor([[[0.0, 1.0, 0.0], [0.0, 1.0, 0.0]]])  # drafts 1 then 1
    draft = torch.tensor([[1, 1]])
    u_final = torch.tensor([0.5], dtype=torch.float64)
    # p(1)/q(1) = 0.5 at position 1: u = 0.49 accepts, u = 0.5 rejects
    n, nxt, _ = verify_drafts(p, draft, q, torch.tensor([2]), torch.tensor([[0.49, 0.0]], dtype=torch.float64), u_final)
    assert n.tolist() == [2] and nxt.tolist() == [2]  # bonus from p_3 = delta(2)
    n, nxt, _ = verify_drafts(p, draft, q, torch.tensor([2]), torch.tensor([[0.5, 0.0]], dtype=torch.float64), u_final)
    assert n.tolist() == [0] and nxt.tolist() == [0]  # residual max(0, p1 - q1) = delta(0)
    n, nxt, _ = verify_drafts(p, draft, q, torch.tensor([1]), torch.tensor([[0.0, 0.0]], dtype=torch.float64), u_final)
    assert n.tolist() == [1] and nxt.tolist() == [1]  # draft_len 1: position 2 drawn from p_2 at u=0.5
    n, nxt, _ = verify_drafts(p, draft, q, torch.tensor([0]), torch.tensor([[0.0, 0.0]], dtype=torch.float64), u_final)
    assert n.tolist() == [0] and nxt.tolist() == [1]  # no drafts: p_1 at u = 0.5: first cdf > 0.5 is token 1


def test_greedy_is_argmax():
    """With point masses the kernel keeps drafts while they equal the target argmax."""
    p = torch.nn.functional.one_hot(torch.tensor([[3, 1, 2, 0]]), 4).float()  # [1, 4, 4]
    q = torch.nn.functional.one_hot(torch.tensor([[3, 1, 0]]), 4).float()
    draft = torch.tensor([[3, 1, 0]])
    n, nxt, _ = verify_drafts(p, draft, q, torch.tensor([3]), torch.rand(1, 3, dtype=torch.float64),
                              torch.rand(1, dtype=torch.float64))
    assert n.tolist() == [2] and nxt.tolist() == [2]
    assert emitted_tokens(draft, n, nxt).tolist() == [[3, 1, 2, 0]]
