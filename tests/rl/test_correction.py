"""Masked importance sampling: every mask's weights, loss and gradient derived by hand on the fixed rows of
tests/rl/test_tis.py, the metrics, and the config's refusals (each naming its key)."""
import math

import pytest
import torch

from trajkit.errors import ConfigError
from trajkit.rl.config import load_config
from trajkit.rl.correction import correction_weights
from trajkit.rl.losses import LossNorm, policy_loss

# ratios pi_theta / pi_old per token; A = (+1, -2); row 0 has 2 sampled tokens, row 1 three
RATIOS = [[1.5, 0.9, 1.0], [0.7, 1.1, 1.3]]
MASK = torch.tensor([[1.0, 1.0, 0.0], [1.0, 1.0, 1.0]], dtype=torch.float64)
ADV = torch.tensor([1.0, -2.0], dtype=torch.float64)
NORM = LossNorm(num_seqs=2, num_tokens=5, max_tokens=4)
# behaviour ratios exp(old - engine): row 0 1.2, 3.0 (the unsampled 7.0 never counts); row 1 0.5, 1.0, 2.5.
# Sequence statistics over the sampled tokens: row 0 arithmetic 2.1, geometric sqrt(3.6) = 1.897;
# row 1 arithmetic 4/3, geometric 1.25 ** (1/3) = 1.077.
BEHAV = [[1.2, 3.0, 7.0], [0.5, 1.0, 2.5]]
# Unweighted GRPO surrogates -min(rA, clip(r, 0.8, 1.2)A): row 0 -1.2 (clipped), -0.9; row 1 1.6 (clipped),
# 2.2, 2.6. An unclipped token's gradient is -w r A / (n_b B), a clipped one's 0.


def _inputs():
    old = torch.full((2, 3), math.log(0.5), dtype=torch.float64)
    logp = (old + torch.log(torch.tensor(RATIOS, dtype=torch.float64))).requires_grad_(True)
    engine = old - torch.log(torch.tensor(BEHAV, dtype=torch.float64))
    return logp, old, engine


def _loss(overrides, name="grpo"):
    cfg = load_config(None, [f"loss.name={name}"] + overrides).loss
    logp, old, engine = _inputs()
    weights, metrics = correction_weights(cfg, old, engine, MASK)
    loss, _ = policy_loss(name, logp, old, ADV, MASK, NORM, tis_weights=weights)
    loss.backward()
    return float(loss.detach()), logp.grad, weights, metrics


def _grad(row0_t1=0.0, row1_t1=0.0, row1_t2=0.0):
    """Gradient with the given entries at the unclipped tokens (row 0 t1, row 1 t1, row 1 t2), 0 elsewhere."""
    return torch.tensor([[0.0, row0_t1, 0.0], [0.0, row1_t1, row1_t2]], dtype=torch.float64)


CASES = {
    # token band [0.5, 2] (inclusive): row 0 keeps t0 (1.2), drops t1 (3.0); row 1 keeps 0.5, 1.0, drops 2.5
    "token": (["loss.token_mask=true"],
              (-1.2 / 2 + (1.6 + 2.2) / 3) / 2, _grad(row1_t1=2.2 / 6)),
    # IcePop: the kept tokens weighted by their ratio (TIS cap 2 >= the band's top): 1.2 | 0.5, 1.0
    "token+tis": (["loss.token_mask=true", "loss.tis=true"],
                  (-1.2 * 1.2 / 2 + (1.6 * 0.5 + 2.2) / 3) / 2, _grad(row1_t1=2.2 / 6)),
    # a narrower band [0.8, 1.1] keeps only row 1's 1.0, weighted by TIS's 1.0
    "token_band": (["loss.token_mask=true", "loss.token_mask_low=0.8", "loss.token_mask_high=1.1", "loss.tis=true"],
                   (0.0 + 2.2 / 3) / 2, _grad(row1_t1=2.2 / 6)),
    # arithmetic [0.5, 2]: row 0 (2.1) leaves, row 1 (4/3) stays
    "arithmetic": (["loss.seq_mask=arithmetic"],
                   (0.0 + (1.6 + 2.2 + 2.6) / 3) / 2, _grad(row1_t1=2.2 / 6, row1_t2=2.6 / 6)),
    # geometric with the same band: row 0 (1.897) stays too, so the loss is the plain one
    "geometric_wide": (["loss.seq_mask=geometric", "loss.seq_mask_low=0.5", "loss.seq_mask_high=2.0"],
                       ((-1.2 - 0.9) / 2 + (1.6 + 2.2 + 2.6) / 3) / 2,
                       _grad(row0_t1=-0.9 / 4, row1_t1=2.2 / 6, row1_t2=2.6 / 6)),
    # geometric [0.5, 1.5]: row 0 leaves, row 1 (1.077) stays
    "geometric": (["loss.seq_mask=geometric", "loss.seq_mask_low=0.5", "loss.seq_mask_high=1.5"],
                  (0.0 + (1.6 + 2.2 + 2.6) / 3) / 2, _grad(row1_t1=2.2 / 6, row1_t2=2.6 / 6)),
    # geometric's default band [0.99, 1.01] removes both rows: no policy gradient at all
    "geometric_default": (["loss.seq_mask=geometric"], 0.0, _grad()),
    # mask first, then truncate: row 0 leaves (arithmetic), row 1 weighted 0.5, 1.0, min(2.5, 2) = 2
    "arithmetic+tis": (["loss.seq_mask=arithmetic", "loss.tis=true"],
                       (0.0 + (1.6 * 0.5 + 2.2 + 2.6 * 2.0) / 3) / 2, _grad(row1_t1=2.2 / 6, row1_t2=2.0 * 2.6 / 6)),
    # both masks and TIS: row 0 by the sequence mask, row 1's 2.5 by the token band; 0.5, 1.0 stay
    "token+arithmetic+tis": (["loss.token_mask=true", "loss.seq_mask=arithmetic", "loss.tis=true"],
                             (0.0 + (1.6 * 0.5 + 2.2) / 3) / 2, _grad(row1_t1=2.2 / 6)),
    # decoupled (uncapped behaviour weights) after a geometric [0.5, 1.5] mask: row 1 weighted 0.5, 1.0, 2.5
    "geometric+decoupled": (["loss.seq_mask=geometric", "loss.seq_mask_low=0.5", "loss.seq_mask_high=1.5",
                             "loss.decoupled=true"],
                            (0.0 + (1.6 * 0.5 + 2.2 + 2.6 * 2.5) / 3) / 2,
                            _grad(row1_t1=2.2 / 6, row1_t2=2.5 * 2.6 / 6)),
    # decoupled after the token band: 1.2 | 0.5, 1.0 (the 3.0 and 2.5 left, not weighted)
    "token+decoupled": (["loss.token_mask=true", "loss.decoupled=true"],
                        (-1.2 * 1.2 / 2 + (1.6 * 0.5 + 2.2) / 3) / 2, _grad(row1_t1=2.2 / 6)),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_grpo_loss_and_gradient_by_hand(case):
    overrides, want_loss, want_grad = CASES[case]
    loss, grad, _, _ = _loss(overrides)
    assert loss == pytest.approx(want_loss, abs=1e-12)
    assert torch.allclose(grad, want_grad, atol=1e-12), grad


def test_dapo_token_mask_by_hand():
    """Token mean over the batch's 5 sampled tokens (kept in the count); clip-higher 0.28: row 0 t0 -1.28
    (clipped), t1 masked; row 1 1.6 (clipped), 2.2, t2 masked."""
    loss, grad, _, _ = _loss(["loss.token_mask=true"], name="dapo")
    assert loss == pytest.approx((-1.28 + 1.6 + 2.2) / 5, abs=1e-12)
    assert torch.allclose(grad, _grad(row1_t1=2.2 / 5), atol=1e-12)


def test_gspo_takes_the_sequence_mask_by_hand():
    """GSPO's ratios: row 0 sqrt(1.35) = 1.162 (A=+1, clipped at 1.0004: -1.0004, no gradient); row 1
    (0.7 * 1.1 * 1.3) ** (1/3) = 1.000333 (inside the clip: 2 * 1.000333, gradient 2 s / 3 / 2 per token).
    The arithmetic mask removes row 0's term (not the batch's sequence count)."""
    s1 = (0.7 * 1.1 * 1.3) ** (1 / 3)
    plain, plain_grad, _, _ = _loss([], name="gspo")
    assert plain == pytest.approx((-1.0004 + 2 * s1) / 2, abs=1e-12)
    loss, grad, _, _ = _loss(["loss.seq_mask=arithmetic"], name="gspo")
    assert loss == pytest.approx(2 * s1 / 2, abs=1e-12)
    want = torch.tensor([[0.0, 0.0, 0.0], [s1 / 3] * 3], dtype=torch.float64)
    assert torch.allclose(grad, want, atol=1e-12) and torch.allclose(plain_grad, want, atol=1e-12)


def test_gspo_refuses_per_token_weights_in_the_loss():
    logp, old, engine = _inputs()
    weights = torch.tensor([[1.0, 0.0, 1.0], [1.0, 1.0, 1.0]], dtype=torch.float64)  # differs within row 0
    with pytest.raises(ValueError, match="token-level"):
        policy_loss("gspo", logp, old, ADV, MASK, NORM, tis_weights=weights)


def test_weights_and_metrics_by_hand():
    """Both masks on: row 0 leaves by the sequence mask (2 tokens), row 1's 2.5 by the band: 3 of 5 tokens,
    1 of 2 sequences. Ratios sorted 0.5, 1.0, 1.2, 2.5, 3.0: nearest rank p01 -> 0.5, p50 -> 1.2, p99 -> 3.0."""
    _, _, weights, metrics = _loss(["loss.token_mask=true", "loss.seq_mask=arithmetic"])
    assert torch.equal(weights * MASK, torch.tensor([[0.0, 0.0, 0.0], [1.0, 1.0, 0.0]], dtype=torch.float64))
    assert metrics["correction/tokens_masked"] == pytest.approx(3 / 5)
    assert metrics["correction/seqs_masked"] == pytest.approx(1 / 2)
    want = {"min": 0.5, "p01": 0.5, "p50": 1.2, "p99": 3.0, "max": 3.0}
    for key, value in want.items():
        assert metrics[f"correction/ratio_{key}"] == pytest.approx(value, abs=1e-12)
    _, _, _, tis_too = _loss(["loss.token_mask=true", "loss.tis=true"])
    assert tis_too["tis/capped_frac"] == pytest.approx(2 / 5) and tis_too["correction/seqs_masked"] == 0.0


def test_masks_off_is_the_plain_loss_bitwise():
    """Off, no weights are built (the loss is today's); on with bands no ratio leaves, every weight is 1.0
    and the loss and gradient are bit-for-bit the plain ones."""
    cfg = load_config(None, []).loss
    logp, old, engine = _inputs()
    assert correction_weights(cfg, old, engine, MASK) == (None, {})
    plain, plain_grad, _, _ = _loss([])
    wide = ["loss.token_mask=true", "loss.token_mask_low=0.0", "loss.token_mask_high=1e9",
            "loss.seq_mask=arithmetic", "loss.seq_mask_low=0.0", "loss.seq_mask_high=1e9"]
    loss, grad, weights, metrics = _loss(wide)
    assert torch.equal(weights, torch.ones_like(weights)) and metrics["correction/tokens_masked"] == 0.0
    assert loss == plain and torch.equal(grad, plain_grad)


def test_an_infinite_weight_that_is_masked_is_zero_not_nan():
    """Uncapped decoupled weights overflow to inf for a huge log-ratio; the band removes that token cleanly."""
    cfg = load_config(None, ["loss.decoupled=true", "loss.token_mask=true"]).loss
    old = torch.zeros(1, 2)
    engine = torch.tensor([[0.0, -200.0]])
    weights, _ = correction_weights(cfg, old, engine, torch.ones(1, 2))
    assert weights.tolist() == [[1.0, 0.0]]


REFUSALS = [
    (["loss.name=gspo", "loss.token_mask=true"], "loss.token_mask with loss.name=gspo"),
    (["loss.token_mask=true", "loss.decoupled=true", "loss.decoupled_cap=3"],
     "loss.decoupled_cap with loss.token_mask"),
    (["loss.token_mask_high=3"], "set loss.token_mask=true"),
    (["loss.seq_mask_low=0.9"], "set loss.seq_mask=arithmetic or geometric"),
    (["loss.seq_mask=harmonic"], "loss.seq_mask"),
    (["loss.token_mask=true", "loss.token_mask_low=1.0"], "loss.token_mask_low"),
    (["loss.token_mask=true", "loss.token_mask_high=0.9"], "loss.token_mask_high"),
    (["loss.seq_mask=geometric", "loss.seq_mask_high=1.0"], "loss.seq_mask_high"),
    (["loss.seq_mask=arithmetic", "loss.seq_mask_low=-0.1"], "loss.seq_mask_low"),
    (["loss.echo_coef=-0.1"], "loss.echo_coef"),
]


@pytest.mark.parametrize("overrides,message", REFUSALS)
def test_refusals_name_the_key(overrides, message):
    with pytest.raises(ConfigError, match=message.replace(".", r"\.")):
        load_config(None, overrides)


def test_sound_combinations_are_accepted():
    for overrides in (["loss.name=gspo", "loss.seq_mask=geometric"], ["loss.token_mask=true", "loss.decoupled=true"],
                      ["loss.seq_mask=geometric", "loss.decoupled=true", "loss.decoupled_cap=3"],
                      ["loss.token_mask=true", "loss.seq_mask=geometric", "loss.tis=true", "loss.echo_coef=0.1"]):
        load_config(None, overrides)
