"""AReaL's decoupled objective: behaviour weights, loss and gradient derived by hand (the rows of
tests/rl/test_tis.py), the cap that removes tokens, and the config's refusals."""
import math

import pytest
import torch

from trajkit.errors import ConfigError
from trajkit.rl.config import load_config
from trajkit.rl.losses import LossNorm, decoupled_metrics, decoupled_weights, policy_loss

from .conftest import TINY

# ratios pi_theta / pi_prox per token; A = (+1, -2); row 0 has 2 sampled tokens, row 1 three
RATIOS = [[1.5, 0.9, 1.0], [0.7, 1.1, 1.3]]
MASK = torch.tensor([[1.0, 1.0, 0.0], [1.0, 1.0, 1.0]], dtype=torch.float64)
ADV = torch.tensor([1.0, -2.0], dtype=torch.float64)
NORM = LossNorm(num_seqs=2, num_tokens=5, max_tokens=4)
# pi_prox / pi_behav per token (the masked 7.0 never counts)
PROX_OVER_BEHAV = [[1.2, 3.0, 7.0], [0.5, 1.0, 2.5]]


def _inputs():
    prox = torch.full((2, 3), math.log(0.5), dtype=torch.float64)
    logp = (prox + torch.log(torch.tensor(RATIOS, dtype=torch.float64))).requires_grad_(True)
    behav = prox - torch.log(torch.tensor(PROX_OVER_BEHAV, dtype=torch.float64))
    return logp, prox, behav


def test_weights_uncapped_and_capped_by_hand():
    _, prox, behav = _inputs()
    assert torch.allclose(decoupled_weights(prox, behav), torch.tensor(PROX_OVER_BEHAV, dtype=torch.float64))
    capped = decoupled_weights(prox, behav, cap=2.0)  # 3.0, 7.0 and 2.5 exceed the cap: removed, not truncated
    assert torch.allclose(capped, torch.tensor([[1.2, 0.0, 0.0], [0.5, 1.0, 0.0]], dtype=torch.float64))
    stats = decoupled_metrics(capped, prox, behav, MASK)
    assert stats["decoupled/weight_mean"] == pytest.approx((1.2 + 3.0 + 0.5 + 1.0 + 2.5) / 5)
    assert stats["decoupled/weight_max"] == pytest.approx(3.0)
    assert stats["decoupled/masked_frac"] == pytest.approx(2 / 5)


def test_dapo_loss_and_gradient_by_hand():
    """Clip 0.2 around the proximal policy. Surrogates -min(rA, clip(r)A): row 0 -1.2 (clipped), -0.9;
    row 1 1.6 (clipped), 2.2, 2.6; times the weights 1.2, 3.0 | 0.5, 1.0, 2.5; summed over 5 tokens."""
    logp, prox, behav = _inputs()
    loss, stats = policy_loss("dapo", logp, prox, ADV, MASK, NORM, 0.2, 0.2,
                              tis_weights=decoupled_weights(prox, behav))
    assert float(loss.detach()) == pytest.approx((-1.2 * 1.2 - 0.9 * 3.0 + 1.6 * 0.5 + 2.2 * 1.0 + 2.6 * 2.5) / 5, abs=1e-12)
    loss.backward()
    # d/dlogp of -w r A (unclipped tokens only) = -w r A / 5
    expected = torch.tensor([[0.0, -3.0 * 0.9, 0.0], [0.0, 1.0 * 2.2, 2.5 * 2.6]], dtype=torch.float64) / 5
    assert torch.allclose(logp.grad, expected, atol=1e-12)
    assert stats["clip_tokens"] == 2


def test_grpo_loss_with_the_cap_by_hand():
    """Sequence means: row 0 (-1.2 * 1.2 + 0) / 2, row 1 (1.6 * 0.5 + 2.2 * 1.0 + 0) / 3; mean of the two."""
    logp, prox, behav = _inputs()
    loss, _ = policy_loss("grpo", logp, prox, ADV, MASK, NORM, 0.2, 0.2,
                          tis_weights=decoupled_weights(prox, behav, cap=2.0))
    assert float(loss.detach()) == pytest.approx(((-1.44) / 2 + (0.8 + 2.2) / 3) / 2, abs=1e-12)


def test_same_policies_give_plain_ppo():
    """Behaviour = proximal (a synchronous step on float32): every weight is 1 and the loss is plain PPO's."""
    logp, prox, _ = _inputs()
    plain, _ = policy_loss("dapo", logp, prox, ADV, MASK, NORM, 0.2, 0.28)
    weighted, _ = policy_loss("dapo", logp, prox, ADV, MASK, NORM, 0.2, 0.28,
                              tis_weights=decoupled_weights(prox, prox.clone(), cap=3.0))
    assert float(weighted.detach()) == float(plain.detach())


@pytest.mark.parametrize("overrides, says", [
    (["loss.decoupled=true", "loss.tis=true"], "choose one"),
    (["loss.decoupled=true", "loss.name=gspo"], "token-level"),
    (["loss.decoupled=true", "loss.decoupled_cap=0.5"], "decoupled_cap"),
])
def test_config_refusals(overrides, says):
    with pytest.raises(ConfigError, match=says):
        load_config(None, TINY + overrides)
