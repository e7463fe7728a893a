"""Tinker's dro and gspo losses against values and gradients derived by hand (sums over tokens)."""
import math

import pytest
import torch

from trajkit.errors import InputError
from trajkit.tinker.losses import UnknownLoss, loss_fn


def _grad(name, logp, inputs, config):
    logp = torch.tensor(logp, requires_grad=True)
    loss = loss_fn(name)(logp, {k: torch.tensor(v) for k, v in inputs.items()}, config)
    loss.backward()
    return float(loss), logp.grad.tolist()


def test_dro_by_hand():
    """logp (-1, -2), q (-1.5, -2), A (2, -1), beta 0.5: objective -1*2 - 0.25*0.5^2 = -2.0625 and
    -2*-1 - 0 = 2, so loss = 0.0625; dloss/dlogp = -(A - beta (logp - q)) = (-1.75, 1)."""
    loss, grad = _grad("dro", [-1.0, -2.0], {"logprobs": [-1.5, -2.0], "advantages": [2.0, -1.0]}, {"beta": 0.5})
    assert loss == pytest.approx(0.0625)
    assert grad == pytest.approx([-1.75, 1.0])


GSPO_IN = {"logprobs": [-1.2, -2.1, -3.0], "advantages": [1.0, 1.0, -1.0], "sequence_ratio_mask": [1.0, 1.0, 0.0]}


def test_gspo_by_hand_clipped():
    """Sequence log-ratio over the two marked tokens: (0.2 + 0.1)/2 = 0.15, s = e^0.15 = 1.1618 > 1.1. The
    A = +1 tokens take the clipped 1.1 (no gradient); the A = -1 token (unmarked: it still carries s) keeps
    -s: loss = -(1.1 + 1.1 - s), its gradient s on its own log-prob only."""
    s = math.exp(0.15)
    loss, grad = _grad("gspo", [-1.0, -2.0, -3.0], GSPO_IN, {"clip_low_threshold": 0.9, "clip_high_threshold": 1.1})
    assert loss == pytest.approx(-(2.2 - s))
    assert grad == pytest.approx([0.0, 0.0, s])


def test_gspo_by_hand_inside_the_clip_range():
    """With thresholds (0.5, 2) nothing clips: loss = -(s + s - s) = -s; each token's gradient is -A_t s."""
    s = math.exp(0.15)
    loss, grad = _grad("gspo", [-1.0, -2.0, -3.0], GSPO_IN, {"clip_low_threshold": 0.5, "clip_high_threshold": 2.0})
    assert loss == pytest.approx(-s)
    assert grad == pytest.approx([-s, -s, s])


@pytest.mark.parametrize("name, config, match", [
    ("dro", {}, r"loss_fn 'dro' needs loss_fn_config\['beta'\]"),
    ("dro", {"beta": "high"}, r"loss_fn_config\['beta'\] must be a number"),
    ("gspo", {"clip_low_threshold": 0.9}, r"loss_fn 'gspo' needs loss_fn_config\['clip_high_threshold'\]")])
def test_missing_or_bad_config_is_a_user_error(name, config, match):
    with pytest.raises(InputError, match=match):
        _grad(name, [-1.0, -2.0, -3.0], GSPO_IN, config)


def test_gspo_needs_a_marked_token():
    inputs = {**GSPO_IN, "sequence_ratio_mask": [0.0, 0.0, 0.0]}
    with pytest.raises(InputError, match="sequence_ratio_mask marks no token"):
        _grad("gspo", [-1.0, -2.0, -3.0], inputs, {"clip_low_threshold": 0.9, "clip_high_threshold": 1.1})


@pytest.mark.parametrize("name, why", [("stable_reinforce", "no published definition"),
                                       ("custom", "forward_backward_custom with a Python callable works"),
                                       ("nope", "not a Tinker loss")])
def test_losses_not_run_say_why(name, why):
    with pytest.raises(UnknownLoss, match=why):
        loss_fn(name)
