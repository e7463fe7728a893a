"""Each loss against values derived by hand (comments show the arithmetic)."""
import math

import pytest
import torch

from trajkit.rl.losses import LOSSES, LossNorm, kl_k3, policy_loss

# Two sequences: row 0 has 2 sampled tokens, row 1 has 3. Ratios pi/pi_old per token:
RATIOS = [[1.5, 0.9, 1.0], [0.7, 1.1, 1.3]]
MASK = torch.tensor([[1.0, 1.0, 0.0], [1.0, 1.0, 1.0]], dtype=torch.float64)
ADV = torch.tensor([1.0, -2.0], dtype=torch.float64)
NORM = LossNorm(num_seqs=2, num_tokens=5, max_tokens=4)


def _inputs():
    old = torch.full((2, 3), math.log(0.5), dtype=torch.float64)
    logp = (old + torch.log(torch.tensor(RATIOS, dtype=torch.float64))).requires_grad_(True)
    return logp, old


def test_grpo_hand_derived():
    # row 0 (A=+1): min(1.5, clip 1.2) = 1.2 ; min(0.9, 0.9) = 0.9 -> per-token -1.2, -0.9 -> mean -1.05
    # row 1 (A=-2): min(-1.4, 0.8*-2=-1.6) = -1.6 ; -2.2 ; min(-2.6, 1.2*-2=-2.4) = -2.6
    #               -> per-token 1.6, 2.2, 2.6 -> mean 6.4/3
    # loss = (-1.05 + 6.4/3) / 2
    logp, old = _inputs()
    loss, stats = policy_loss("grpo", logp, old, ADV, MASK, NORM)
    assert loss.item() == pytest.approx((-1.05 + 6.4 / 3) / 2, abs=1e-12)
    assert stats["clip_tokens"] == 2  # token (0,0) and (1,0) take the clipped branch


def test_dapo_token_level_clip_higher():
    # clip (0.2, 0.28): row 0 t0 -> min(1.5, 1.28) = 1.28 ; t1 0.9 ; row 1: 1.6, 2.2, min(-2.6, 1.28*-2) -> 2.6
    # token mean over 5 tokens: (-1.28 - 0.9 + 1.6 + 2.2 + 2.6) / 5
    logp, old = _inputs()
    loss, _ = policy_loss("dapo", logp, old, ADV, MASK, NORM)
    assert loss.item() == pytest.approx((-1.28 - 0.9 + 1.6 + 2.2 + 2.6) / 5, abs=1e-12)


def test_dr_grpo_constant_normaliser():
    # per-token values as GRPO; sum = -1.2 - 0.9 + 1.6 + 2.2 + 2.6 = 4.3 ; / (max_tokens 4 * 2 seqs)
    logp, old = _inputs()
    loss, _ = policy_loss("dr_grpo", logp, old, ADV, MASK, NORM)
    assert loss.item() == pytest.approx(4.3 / 8, abs=1e-12)


def test_gspo_sequence_ratio():
    # s0 = exp(mean(log 1.5, log 0.9)) = sqrt(1.35); A=+1 -> min(s0, 1.1) = 1.1 (clip 0.1/0.1 here)
    # s1 = (0.7*1.1*1.3)^(1/3) = 1.001^(1/3); A=-2 inside the clip range -> -2 * s1
    # loss = mean(-1.1, +2 * s1)
    logp, old = _inputs()
    loss, stats = policy_loss("gspo", logp, old, ADV, MASK, NORM, clip_low=0.1, clip_high=0.1)
    assert loss.item() == pytest.approx((-1.1 + 2 * 1.001 ** (1 / 3)) / 2, abs=1e-12)
    assert stats["clip_seqs"] == 1


def test_gspo_paper_clip_defaults():
    assert (LOSSES["gspo"].clip_low, LOSSES["gspo"].clip_high) == (3e-4, 4e-4)
    assert (LOSSES["dapo"].clip_low, LOSSES["dapo"].clip_high) == (0.2, 0.28)


def test_gradient_is_minus_advantage_times_ratio_when_unclipped():
    # d/dlogp of -(r A) = -r A per token; GRPO divides by the row's token count and the batch's rows.
    logp, old = _inputs()
    loss, _ = policy_loss("grpo", logp, old, ADV, MASK, NORM)
    loss.backward()
    assert logp.grad[0, 1].item() == pytest.approx(-0.9 * 1.0 / 2 / 2)  # unclipped token of row 0
    assert logp.grad[0, 0].item() == 0.0  # clipped -> no gradient
    assert logp.grad[1, 2].item() == pytest.approx(-1.3 * -2.0 / 3 / 2)  # min picked the unclipped branch
    assert logp.grad[0, 2].item() == 0.0  # masked


def test_kl_k3_value_and_added_term():
    # d = ref - logp = log 2 -> k3 = 2 - log 2 - 1
    logp = torch.zeros(1, 2, dtype=torch.float64)
    ref = torch.full((1, 2), math.log(2.0), dtype=torch.float64)
    assert kl_k3(logp, ref)[0, 0].item() == pytest.approx(1 - math.log(2.0))
    mask = torch.ones(1, 2, dtype=torch.float64)
    norm = LossNorm(1, 2, 2)
    base, _ = policy_loss("grpo", logp, logp, torch.zeros(1, dtype=torch.float64), mask, norm)
    with_kl, stats = policy_loss("grpo", logp, logp, torch.zeros(1, dtype=torch.float64), mask, norm,
                                 ref_logp=ref, kl_coef=0.5)
    assert with_kl.item() - base.item() == pytest.approx(0.5 * (1 - math.log(2.0)))
    assert stats["kl_ref"] == pytest.approx(1 - math.log(2.0))


@pytest.mark.parametrize("name", sorted(LOSSES))
def test_micro_batches_sum_to_the_full_batch(name):
    torch.manual_seed(0)
    logp = torch.randn(6, 5, dtype=torch.float64) * 0.1 - 1.0
    old = logp.detach() + torch.randn(6, 5, dtype=torch.float64) * 0.05
    mask = (torch.rand(6, 5) > 0.3).double()
    mask[:, 0] = 1
    adv = torch.randn(6, dtype=torch.float64)
    norm = LossNorm(6, int(mask.sum()), 5)
    full_param = logp.clone().requires_grad_(True)
    full, _ = policy_loss(name, full_param, old, adv, mask, norm)
    full.backward()
    part_param = logp.clone().requires_grad_(True)
    total = sum(policy_loss(name, part_param[r], old[r], adv[r], mask[r], norm)[0] for r in (slice(0, 2), slice(2, 6)))
    total.backward()
    assert total.item() == pytest.approx(full.item(), abs=1e-12)
    assert torch.allclose(part_param.grad, full_param.grad, atol=1e-12)
