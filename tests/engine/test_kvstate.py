"""KVState bookkeeping (left padding, holes, per-row rollback, row dropping, compaction) against full
no-cache forwards of each row's true sequence."""
from __future__ import annotations

import torch

from tests.engine.helpers import target_model
from trajkit.engine.kvstate import KVState
from trajkit.models.spec import TinySpec

SPEC = TinySpec(vocab_size=16, hidden_size=32, num_layers=2, num_heads=4, num_kv_heads=2, intermediate_size=64)


@torch.no_grad()
def full_logits(model, seq: list[int]) -> torch.Tensor:
    return model(input_ids=torch.tensor([seq])).logits[0, -1]


@torch.no_grad()
def test_rollback_holes_drop_and_compact():
    model = target_model(SPEC, seed=7, dtype=torch.float64)
    seqs = [[1, 2, 3], [4], [5, 6, 7, 8, 9, 10]]
    state = KVState(model)
    state.prefill(seqs)
    gen = torch.Generator().manual_seed(0)
    compactions = 0
    for step in range(12):
        new = torch.randint(0, 16, (len(seqs), 4), generator=gen)  # [B, 4] speculative tokens
        logits = state.extend(new)  # [B, 4, V]
        keep = torch.randint(0, 5, (len(seqs),), generator=gen)  # per-row number of new tokens kept
        for b, seq in enumerate(seqs):
            for j in range(4):  # each scored position matches the full forward of its prefix
                torch.testing.assert_close(logits[b, j], full_logits(model, seq + new[b, :j + 1].tolist()),
                                           rtol=0, atol=1e-10)
            seq.extend(new[b, :int(keep[b])].tolist())
        state.truncate(state.lengths - 4 + keep)
        assert state.lengths.tolist() == [len(s) for s in seqs]
        assert state.slots.sum(1).tolist() == [len(s) for s in seqs]
        if step == 5:  # drop the middle row
            state.retain(torch.tensor([0, 2]))
            seqs = [seqs[0], seqs[2]]
        compactions += state.compact(min_waste=0.0 if step % 4 == 3 else 0.5)
    assert compactions > 0
    assert state.width <= 2 * max(len(s) for s in seqs)


@torch.no_grad()
def test_batch_of_one_rollback_is_an_exact_crop():
    model = target_model(SPEC, seed=7, dtype=torch.float64)
    state = KVState(model)
    state.prefill([[1, 2, 3]])
    state.extend(torch.tensor([[4, 5, 6]]))
    state.truncate(torch.tensor([4]))
    assert state.width == 4 and bool(state.slots.all())
    assert state.cache.get_seq_length() == 4


@torch.no_grad()
def test_empty_prompts_prefill_nothing():
    model = target_model(SPEC, seed=7, dtype=torch.float64)
    state = KVState(model)
    assert state.prefill([[], []]) is None and state.width == 0 and state.calls == 0
    logits = state.extend(torch.tensor([[3], [4]]))
    torch.testing.assert_close(logits[1, 0], full_logits(model, [4]), rtol=0, atol=1e-10)


@torch.no_grad()
def test_keep_appended_equals_truncate():
    """The host-side rollback of the last extend leaves the same cache as ``truncate``, step after step."""
    model = target_model(SPEC, seed=7, dtype=torch.float64)
    prompts = [[1, 2, 3], [4], [5, 6, 7, 8, 9, 10]]
    by_truncate, by_kept = KVState(model), KVState(model)
    for state in (by_truncate, by_kept):
        state.prefill(prompts)
    gen = torch.Generator().manual_seed(1)
    for step in range(10):
        new = torch.randint(0, 16, (3, 3), generator=gen)  # [B, 3]
        same = step % 3 == 0  # every row keeps as many: the crop path once the cache is dense
        kept = [2] * 3 if same else torch.randint(1, 4, (3,), generator=gen).tolist()
        torch.testing.assert_close(by_kept.extend(new), by_truncate.extend(new), rtol=0, atol=0)
        by_truncate.truncate(by_truncate.lengths - 3 + torch.tensor(kept))
        by_kept.keep_appended(3, kept)
        assert by_kept.lengths.tolist() == by_truncate.lengths.tolist()
        assert torch.equal(by_kept.slots, by_truncate.slots) and by_kept.dense == by_truncate.dense
        assert by_kept.cache.get_seq_length() == by_truncate.cache.get_seq_length()
    single = KVState(model)
    single.prefill([[1, 2, 3]])
    single.extend(torch.tensor([[4, 5, 6]]))
    single.keep_appended(3, [1])  # batch of one: an exact crop, no holes
    assert single.width == 4 and single.dense and single.cache.get_seq_length() == 4
