"""Truncated importance sampling: the weighted loss and gradient by hand, and through ``update_policy``
against a loss written independently from the formula."""
import math

import pytest
import torch

from trajkit.errors import ConfigError
from trajkit.rl.batching import batch_logprobs, collate
from trajkit.rl.build import random_model
from trajkit.rl.config import load_config
from trajkit.rl.losses import LossNorm, policy_loss, tis_metrics, truncated_is_weights
from trajkit.envs.sample import Sample
from trajkit.rl.update import update_policy

from .conftest import TINY

# The two rows of tests/rl/test_losses.py: ratios pi/pi_old, A = (+1, -2), row 0 has 2 sampled tokens.
RATIOS = [[1.5, 0.9, 1.0], [0.7, 1.1, 1.3]]
MASK = torch.tensor([[1.0, 1.0, 0.0], [1.0, 1.0, 1.0]], dtype=torch.float64)
ADV = torch.tensor([1.0, -2.0], dtype=torch.float64)
NORM = LossNorm(num_seqs=2, num_tokens=5, max_tokens=4)
# exp(old - rollout) per token: 1.2, 3.0 (capped to 2) | 0.5, 1.0, 2.5 (capped to 2); the masked one 7.0
TRAIN_OVER_ROLLOUT = [[1.2, 3.0, 7.0], [0.5, 1.0, 2.5]]


def _inputs():
    old = torch.full((2, 3), math.log(0.5), dtype=torch.float64)
    logp = (old + torch.log(torch.tensor(RATIOS, dtype=torch.float64))).requires_grad_(True)
    rollout = old - torch.log(torch.tensor(TRAIN_OVER_ROLLOUT, dtype=torch.float64))
    return logp, old, rollout


def test_weights_and_metrics_by_hand():
    _, old, rollout = _inputs()
    w = truncated_is_weights(old, rollout, cap=2.0)
    assert torch.allclose(w, torch.tensor([[1.2, 2.0, 2.0], [0.5, 1.0, 2.0]], dtype=torch.float64), atol=1e-12)
    stats = tis_metrics(old, rollout, MASK, cap=2.0)
    assert stats["tis/weight_mean"] == pytest.approx((1.2 + 2.0 + 0.5 + 1.0 + 2.0) / 5, abs=1e-12)
    assert stats["tis/capped_frac"] == pytest.approx(2 / 5)  # 3.0 and 2.5; the masked 7.0 does not count


def test_grpo_loss_and_gradient_by_hand():
    # unweighted per-token surrogates (see test_losses): row 0: -1.2 (clipped), -0.9 ; row 1: 1.6 (clipped), 2.2, 2.6
    # weighted: row 0: -1.2*1.2 = -1.44, -0.9*2 = -1.8 -> mean -1.62
    #           row 1: 1.6*0.5 = 0.8, 2.2*1 = 2.2, 2.6*2 = 5.2 -> mean 8.2/3
    logp, old, rollout = _inputs()
    w = truncated_is_weights(old, rollout, cap=2.0)
    loss, _ = policy_loss("grpo", logp, old, ADV, MASK, NORM, tis_weights=w)
    assert loss.item() == pytest.approx((-1.62 + 8.2 / 3) / 2, abs=1e-12)
    loss.backward()
    # unclipped token: d/dlogp of -w r A = -w r A, over (row tokens x rows)
    assert logp.grad[0, 1].item() == pytest.approx(-2.0 * 0.9 * 1.0 / 2 / 2)
    assert logp.grad[1, 1].item() == pytest.approx(-1.0 * 1.1 * -2.0 / 3 / 2)
    assert logp.grad[1, 2].item() == pytest.approx(-2.0 * 1.3 * -2.0 / 3 / 2)
    assert logp.grad[0, 0].item() == 0.0 and logp.grad[1, 0].item() == 0.0  # clipped: no gradient
    assert logp.grad[0, 2].item() == 0.0  # masked


def test_dapo_token_mean_by_hand():
    # clip-higher 0.28: row 0 t0 -> -1.28 * 1.2 ; t1 -0.9 * 2 ; row 1: 1.6 * 0.5, 2.2 * 1, 2.6 * 2 ; / 5 tokens
    logp, old, rollout = _inputs()
    loss, _ = policy_loss("dapo", logp, old, ADV, MASK, NORM, tis_weights=truncated_is_weights(old, rollout, 2.0))
    assert loss.item() == pytest.approx((-1.28 * 1.2 - 1.8 + 0.8 + 2.2 + 5.2) / 5, abs=1e-12)


def test_kl_term_is_not_reweighted():
    logp, old, rollout = _inputs()
    ref = old + 0.3
    w = truncated_is_weights(old, rollout, 2.0)
    plain, _ = policy_loss("grpo", logp, old, ADV, MASK, NORM, ref_logp=ref, kl_coef=0.5)
    nokl, _ = policy_loss("grpo", logp, old, ADV, MASK, NORM)
    weighted, _ = policy_loss("grpo", logp, old, ADV, MASK, NORM, ref_logp=ref, kl_coef=0.5, tis_weights=w)
    weighted_nokl, _ = policy_loss("grpo", logp, old, ADV, MASK, NORM, tis_weights=w)
    assert (weighted - weighted_nokl).item() == pytest.approx((plain - nokl).item(), abs=1e-12)


def test_gspo_refuses_token_weights():
    logp, old, rollout = _inputs()
    with pytest.raises(ValueError, match="token-level"):
        policy_loss("gspo", logp, old, ADV, MASK, NORM, tis_weights=truncated_is_weights(old, rollout, 2.0))
    with pytest.raises(ConfigError, match="loss.tis needs a token-level loss"):
        load_config(None, ["loss.name=gspo", "loss.tis=true"])
    with pytest.raises(ConfigError, match="tis_cap"):
        load_config(None, ["loss.tis=true", "loss.tis_cap=0.5"])


def _reference_grads(policy, samples, adv, engine, cap):
    """GRPO + TIS gradient written from the formula, one unpadded sequence at a time: at ratio 1 the loss is
    mean_b mean_t [-min(exp(old - q), cap) * A_b * exp(logp - old)]; ``cap=None``: no weights (TIS off)."""
    policy.zero_grad(set_to_none=True)
    total = 0.0
    for s, a, q in zip(samples, adv.tolist(), engine):
        ids = torch.tensor([s.prompt_ids + s.completion_ids])
        logits = policy(input_ids=ids).logits[0, len(s.prompt_ids) - 1:-1].float()
        logp = torch.log_softmax(logits, -1).gather(-1, torch.tensor(s.completion_ids).unsqueeze(-1)).squeeze(-1)
        old = logp.detach()
        w = torch.exp(old - torch.tensor(q)).clamp(max=cap) if cap is not None else 1.0
        total = total + (-(w * a * torch.exp(logp - old))).mean()
    (total / len(samples)).backward()
    return [p.grad.clone() for p in policy.parameters()]


@pytest.mark.parametrize("tis", [True, False])
def test_update_policy_gradient_equals_the_formula(tis):
    cfg = load_config(None, TINY + ["optim.micro_batch_size=2", "optim.grad_clip=1e9", f"loss.tis={tis}",
                                    "loss.tis_cap=1.5"])
    policy = random_model(cfg.policy, vocab_size=259)
    gen = torch.Generator().manual_seed(0)
    samples = []
    for n in (3, 1, 4, 2, 3):
        completion = torch.randint(3, 250, (n,), generator=gen).tolist()
        samples.append(Sample([1, 2, 7][: 1 + n % 3], completion, [0.0] * n, [1] * n))
    adv = torch.tensor([0.5, -1.0, 2.0, 0.25, -0.75])
    batch = collate(samples, adv, pad_id=0)
    old, _ = batch_logprobs(policy, batch, 1.0, 8)
    # engine log-probs: the policy's own, shifted per token by up to +-0.8
    shift = (torch.rand(batch.mask.shape, generator=gen) - 0.5) * 1.6
    batch.engine_logp = (old + shift) * batch.mask
    engine = [batch.engine_logp[i, len(s.prompt_ids) - 1:len(s.prompt_ids) - 1 + len(s.completion_ids)].tolist()
              for i, s in enumerate(samples)]
    metrics = update_policy(policy, torch.optim.SGD(policy.parameters(), lr=0.0), batch, old, None, cfg)
    got = [p.grad.clone() for p in policy.parameters()]
    want = _reference_grads(policy, samples, adv, engine, cap=1.5 if tis else None)
    for g, w in zip(got, want):
        assert torch.allclose(g, w, atol=1e-6, rtol=1e-4)
    if tis:
        ratio = torch.exp(old - batch.engine_logp)[batch.mask.bool()]
        assert metrics["tis/capped_frac"] == pytest.approx(float((ratio > 1.5).float().mean()))
        assert 0.0 < metrics["tis/capped_frac"] < 1.0
        # the weights matter: the gradient without them is different
        plain = _reference_grads(policy, samples, adv, engine, cap=None)
        assert not all(torch.allclose(g, p, atol=1e-6, rtol=1e-4) for g, p in zip(got, plain))


def test_trainer_step_logs_tis_weights_near_one(tiny):
    """With a correct float32 CPU sync the engine and the trainer agree to ~1e-7: every weight is ~1."""
    from trajkit.rl.trainer import Trainer

    result = Trainer(tiny("loss.tis=true"), logger=False).step_once()
    assert result.metrics["tis/weight_mean"] == pytest.approx(1.0, abs=1e-5)
    assert result.metrics["tis/capped_frac"] == 0.0
