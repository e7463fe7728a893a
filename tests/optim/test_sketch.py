"""Sketch hooks against the dense gradient: S = G Aᵀ exactly, linear over micro-batches, unbiased, and no
dense gradient of a target ever exists."""
from __future__ import annotations

import math

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from tests.optim.helpers import dense_grads, summed_loss, tiny, tokens
from trajkit.optim import (
    SketchSettings,
    install_sketches,
    make_projection,
    projection_seed,
)

DEFAULT_NAMES = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]


def test_default_targets_are_the_attention_and_mlp_projections():
    model = tiny()
    sk = install_sketches(model, SketchSettings(rank=4))
    names = [s.name.rsplit(".", 1)[1] for s in sk.states]
    assert names == DEFAULT_NAMES * 2  # two layers; lm_head is not a target
    assert all(not s.weight.requires_grad for s in sk.states)
    sk.remove()
    assert all(p.requires_grad for p in model.parameters()) and "forward" not in model.model.layers[0].mlp.up_proj.__dict__


def test_a_pattern_matching_nothing_is_one_clear_error():
    with pytest.raises(ValueError, match="no nn.Linear module name matches targets='nope'.*self_attn.q_proj"):
        install_sketches(tiny(), SketchSettings(targets="nope"))


def test_sketch_equals_dense_gradient_times_projection_transposed():
    """S = Hᵀ(X Aᵀ) = G Aᵀ, with G from an unsketched copy of the same model (the dense reference)."""
    ids = tokens()
    dense = dense_grads(tiny(), ids)
    model = tiny()
    sk = install_sketches(model, SketchSettings(rank=8, seed=3))
    summed_loss(model, ids).backward()
    for s in sk.states:
        expected = dense[s.name + ".weight"] @ s.projection().T
        torch.testing.assert_close(s.sketch, expected, rtol=1e-4, atol=1e-5)
    # non-targets still get their ordinary gradient
    torch.testing.assert_close(model.model.embed_tokens.weight.grad, dense["model.embed_tokens.weight"],
                               rtol=1e-4, atol=1e-6)


def test_sketches_of_micro_batches_sum_to_the_full_batch_sketch():
    ids = tokens(rows=6)
    full, parts = tiny(), tiny()
    sk_full = install_sketches(full, SketchSettings(rank=8))
    sk_parts = install_sketches(parts, SketchSettings(rank=8))
    summed_loss(full, ids).backward()
    for rows in (slice(0, 1), slice(1, 4), slice(4, 6)):
        summed_loss(parts, ids[rows]).backward()
    for a, b in zip(sk_full.states, sk_parts.states):
        torch.testing.assert_close(b.sketch, a.sketch, rtol=1e-4, atol=1e-5)


def test_no_dense_gradient_of_a_target_is_ever_formed():
    """Every tensor produced during backward is recorded; none has a target weight's shape, and after the
    backward every target's .grad is None."""
    model = tiny()
    sk = install_sketches(model, SketchSettings(rank=8))
    shapes = {tuple(s.weight.shape) for s in sk.states}
    seen: list[tuple[int, ...]] = []

    class Record(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            for t in out if isinstance(out, (tuple, list)) else (out,):
                if isinstance(t, torch.Tensor):
                    seen.append(tuple(t.shape))
            return out

    loss = summed_loss(model, tokens(rows=3, width=11))  # 30 tokens: no activation has a weight's shape
    with Record():
        loss.backward()
    assert len(seen) > 50  # the recorder saw the whole backward
    assert shapes.isdisjoint(seen)
    assert all(s.weight.grad is None for s in sk.states)
    assert all(s.sketch.shape == (s.weight.shape[0], 8) for s in sk.states)


def _mean_estimate(distribution: str, draws: int, scaled: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """Mean over ``draws`` steps of S A for one linear layer, and its dense gradient."""
    torch.manual_seed(0)
    layer = torch.nn.Sequential()
    layer.add_module("q_proj", torch.nn.Linear(8, 6, bias=False))
    x, target = torch.randn(20, 8), torch.randn(20, 6)
    dense = torch.autograd.grad(((layer(x) - target) ** 2).sum(), layer.q_proj.weight)[0]
    sk = install_sketches(layer, SketchSettings(rank=4, distribution=distribution))
    state = sk.states[0]
    total = torch.zeros_like(dense)
    for step in range(draws):
        sk.step = step
        sk.zero_()
        ((layer(x) - target) ** 2).sum().backward()
        a = state.projection()
        # an unscaled A (entries ±1 or N(0, 1)) is sqrt(rank) times the scaled one, in the sketch and in S A
        total += state.sketch @ a * (4.0 if not scaled else 1.0)
    return total / draws, dense


@pytest.mark.parametrize("distribution", ["rademacher", "gaussian"])
def test_sketch_step_is_unbiased_only_with_the_scaled_projection(distribution):
    """E[S A] = G E[AᵀA] = G. Per draw the relative error of S A is about sqrt((in + 1) / rank) = 1.5 (in 8,
    rank 4; rademacher a little less), so the mean of 1000 draws is off by about 1.5 / sqrt(1000) = 0.047;
    tolerance 0.15 (> 3 sigma). Unscaled, the mean is rank * G = 4 G: relative error 3."""
    mean, dense = _mean_estimate(distribution, 1000, scaled=True)
    assert torch.linalg.norm(mean - dense) / torch.linalg.norm(dense) < 0.15
    mean, dense = _mean_estimate(distribution, 100, scaled=False)
    assert torch.linalg.norm(mean - dense) / torch.linalg.norm(dense) > 0.15


@pytest.mark.parametrize("distribution", ["rademacher", "gaussian", "orthogonal"])
def test_projection_is_scaled_so_that_the_expected_gram_matrix_is_the_identity(distribution):
    """Mean of AᵀA over 400 draws, rank 8, width 12: off-diagonal noise ~ 1/sqrt(8 * 400) = 0.018."""
    gram = sum(make_projection(distribution, 8, 12, seed).T @ make_projection(distribution, 8, 12, seed)
               for seed in range(400)) / 400
    torch.testing.assert_close(gram, torch.eye(12), atol=0.1, rtol=0)
    full = make_projection("orthogonal", 12, 12, 7)
    torch.testing.assert_close(full.T @ full, torch.eye(12), atol=1e-5, rtol=0)


def test_projection_is_stable_per_layer_and_step_and_differs_across_them():
    a = make_projection("rademacher", 4, 10, projection_seed(0, "model.layers.0.q_proj", 5))
    assert torch.equal(a, make_projection("rademacher", 4, 10, projection_seed(0, "model.layers.0.q_proj", 5)))
    assert set(a.unique().tolist()) == {-0.5, 0.5} and math.isclose(float(a.abs().max()), 1 / math.sqrt(4))
    assert not torch.equal(a, make_projection("rademacher", 4, 10, projection_seed(0, "model.layers.0.q_proj", 6)))
    assert not torch.equal(a, make_projection("rademacher", 4, 10, projection_seed(0, "model.layers.1.q_proj", 5)))
    assert 0 <= projection_seed(2**40, "x" * 300, 10**9) < 2**63
