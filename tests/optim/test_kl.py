"""The KL budget: the second-order formula against the exact KL, and on a small policy the measured KL
between before and after a step stays within the budget, tracks the prediction, and exceeds it unbudgeted."""
from __future__ import annotations

import torch

from tests.optim.helpers import VOCAB, tiny
from trajkit.optim import LoGRA, exact_kl, tangent_kl


def test_half_variance_is_the_second_order_kl():
    """KL(softmax(z) || softmax(z + e dz)) / (e^2/2 Var_p dz) -> 1 as e -> 0 (error O(e))."""
    g = torch.Generator().manual_seed(0)
    z, dz = torch.randn(3, 5, 50, generator=g) * 2, torch.randn(3, 5, 50, generator=g)
    mask = torch.ones(3, 5)
    mask[0, 0] = 0
    for eps, tol in ((1e-1, 0.1), (1e-2, 0.01)):
        pred, n = tangent_kl(z, eps * dz, mask)
        exact, m = exact_kl(z, z + eps * dz, mask)
        assert n == m == 14
        assert abs(exact / pred - 1) < tol
    # a shift of every logit by the same amount changes nothing: zero variance, zero KL
    assert tangent_kl(z, torch.ones_like(z), mask)[0] < 1e-9 and exact_kl(z, z + 1.0, mask)[0] < 1e-9


def _policy_batch(model, rows=8, prompt=4, new=12, seed=0):
    """Tokens sampled from the policy itself (as RL rollouts are), the sampled positions, random advantages."""
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, VOCAB, (rows, prompt), generator=g)
    with torch.no_grad():
        for _ in range(new):
            probs = torch.softmax(model(input_ids=ids).logits[:, -1].float(), -1)
            ids = torch.cat([ids, torch.multinomial(probs, 1, generator=g)], 1)
    mask = torch.zeros(rows, prompt + new - 1)
    mask[:, prompt - 1:] = 1
    return ids, mask, torch.randn(rows, generator=g)


def _step(lr: float, budget: float | None) -> tuple[float, float, float]:
    """One policy-gradient step -> (measured mean KL, predicted KL of the step taken, scale)."""
    model = tiny(seed=1)
    ids, mask, adv = _policy_batch(model)
    opt = LoGRA(model, lr=lr, rank=8, kl_budget=budget)
    logits = model(input_ids=ids).logits[:, :-1].float()
    logp = torch.log_softmax(logits, -1).gather(-1, ids[:, 1:, None])[..., 0]
    (-(adv[:, None] * logp * mask).sum() / mask.sum()).backward()
    before = logits.detach()
    opt.step(kl_forward=lambda: [(model(input_ids=ids).logits[:, :-1].float(), mask)])
    with torch.no_grad():
        total, n = exact_kl(before, model(input_ids=ids).logits[:, :-1].float(), mask)
    scale = opt.last["scale"] if budget is not None else 1.0
    return total / n, opt.last["predicted_kl"] * scale ** 2, scale


def test_measured_kl_stays_within_the_budget_and_tracks_the_prediction():
    """Budget 1e-3 at a learning rate whose full step would move the policy ~10x more: the step is scaled
    down, the measured KL is within the budget x 1.2 and within 20% of the prediction (third-order terms)."""
    measured, predicted, scale = _step(lr=3e-2, budget=1e-3)
    assert scale < 0.5
    assert abs(predicted - 1e-3) < 1e-9
    assert measured < 1e-3 * 1.2
    assert abs(measured / predicted - 1) < 0.2


def test_without_a_budget_the_same_step_exceeds_it():
    measured, _, _ = _step(lr=3e-2, budget=None)
    assert measured > 5e-3


def test_prediction_tracks_the_measured_kl_for_small_steps():
    """A budget far above the step's KL leaves it unscaled; the prediction is then within 5%."""
    measured, predicted, scale = _step(lr=1e-3, budget=1.0)
    assert scale == 1.0
    assert abs(measured / predicted - 1) < 0.05
