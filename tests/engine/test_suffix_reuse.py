"""Approximate suffix reuse (trajkit.engine.suffix): RoPE re-rotation against a real forward at the moved
positions, surviving blocks found by hand-built edits, and the KL measurement's zero for an unedited prompt."""
import pytest
import torch
from transformers import DynamicCache

from trajkit.engine.kvstate import forward_keywords
from trajkit.engine.suffix import Block, rerotate, rope_inv_freq, suffix_reuse_kl, surviving_blocks
from trajkit.models.spec import TinySpec

from .helpers import target_model

SPEC = TinySpec(vocab_size=40, hidden_size=32, num_layers=2, num_heads=4, num_kv_heads=2,
                intermediate_size=64, max_positions=512)


def _ids(seed: int, n: int) -> list[int]:
    return torch.randint(1, SPEC.vocab_size, (n,), generator=torch.Generator().manual_seed(seed)).tolist()


@torch.no_grad()
@pytest.mark.parametrize("shift", [0, 37, -5])
def test_rerotation_is_exact_for_a_block_whose_context_moved_with_it(shift):
    """Every key of a sequence moved as a whole (a zero edit: nothing it attends to changed) equals the key a
    forward at the new positions computes, in every layer."""
    model = target_model(SPEC, seed=2)
    ids = _ids(0, 40)
    base = 10  # positions 10..49, moved to 10 + shift
    at_old, at_new = DynamicCache(config=model.config), DynamicCache(config=model.config)
    kw, _ = forward_keywords(model)
    model(input_ids=torch.tensor([ids]), position_ids=torch.arange(base, base + 40)[None], **{kw: at_old})
    model(input_ids=torch.tensor([ids]), position_ids=torch.arange(base + shift, base + shift + 40)[None],
          **{kw: at_new})
    inv_freq = rope_inv_freq(model)
    for old, new in zip(at_old.layers, at_new.layers):
        assert (rerotate(old.keys, shift, inv_freq) - new.keys).abs().max() < 1e-5
        assert (old.values - new.values).abs().max() < 1e-5
    if shift:  # the rotation is not a no-op: unrotated keys differ
        assert (at_old.layers[0].keys - at_new.layers[0].keys).abs().max() > 1e-2


def test_surviving_blocks_of_a_hand_made_edit():
    a, b, c = _ids(1, 70), _ids(2, 10), _ids(3, 80)
    old = a + b + c  # the edit drops b (earlier reasoning): c moves from 80 to 70
    new = a + c + [5, 6]
    assert surviving_blocks(old, new, start=70, min_block=64) == [Block(old=80, new=70, size=80)]
    assert surviving_blocks(old, new, start=70, min_block=81) == []


@torch.no_grad()
def test_kl_is_zero_without_an_edit_and_measured_after_one():
    model = target_model(SPEC, seed=4, dtype=torch.float64)
    a, b, c, cont = _ids(5, 70), _ids(6, 12), _ids(7, 90), _ids(8, 10)
    same = suffix_reuse_kl(model, a + b + c, a + b + c + [3], cont, min_block=64)
    assert same["copied"] == 0 and max(same["kl"]) < 1e-12 and same["first_divergence"] == -1
    edited = suffix_reuse_kl(model, a + b + c, a + c + [3], cont, min_block=64, boundary=4)
    assert edited["prefix"] == 70 and edited["copied"] == 90 - 8  # c's middle; its first and last 4 recomputed
    assert edited["computed"] == 8  # c's two boundaries; the appended id is the one fed with the continuation
    assert min(edited["kl"]) >= -1e-12 and max(edited["kl"]) > 1e-9  # approximate: c attended to b when computed
