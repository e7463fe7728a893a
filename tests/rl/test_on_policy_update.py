"""The step's fast paths against references: the update that scores its own old log-probs (no ``logprob``
forward) against the recomputed-old update, the output layer run from the first scored column against a
dense per-row log-softmax, and length-sorted micro-batches against the batch's rows."""
import copy

import pytest
import torch

from trajkit.envs.sample import Sample
from trajkit.rl.batching import batch_logprobs, collate, length_chunks, token_logprobs
from trajkit.rl.build import random_model
from trajkit.rl.config import load_config
from trajkit.rl import packed, shared_prefix
from trajkit.rl.learner import reuses_update_forward
from trajkit.rl.trainer import Trainer
from trajkit.rl.update import update_policy

from .conftest import TINY

VOCAB = 259


def _samples() -> list[Sample]:
    """Rows of different prompt and completion lengths; row 3 has a forced (mask 0) token mid-completion."""
    g = torch.Generator().manual_seed(0)
    out = []
    for p, c in ((3, 5), (4, 2), (3, 7), (5, 4), (4, 1), (3, 6)):
        ids = torch.randint(3, VOCAB, (p + c,), generator=g).tolist()
        mask = [1] * c
        if c == 4:
            mask[1] = 0
        out.append(Sample(ids[:p], ids[p:], [-1.5] * c, mask))
    return out


def _batch():
    adv = torch.tensor([0.5, -1.0, 2.0, 0.25, -0.75, 1.25])
    return collate(_samples(), adv, pad_id=0)


def _dense_row_logprobs(model, sample: Sample, temperature: float) -> torch.Tensor:
    """Reference: one unpadded row, full logits, log-softmax, gather -> the completion tokens' log-probs."""
    ids = torch.tensor([sample.ids])
    with torch.no_grad():
        logits = model(input_ids=ids).logits[0, :-1].float()
    logp = torch.log_softmax(logits / temperature, dim=-1).gather(-1, ids[0, 1:, None])[:, 0]
    p = len(sample.prompt_ids)
    return logp[p - 1:]


def test_token_logprobs_match_a_dense_unpadded_row_at_every_scored_column():
    cfg = load_config(None, TINY)
    model = random_model(cfg.policy, vocab_size=VOCAB)
    batch, samples = _batch(), _samples()
    with torch.no_grad():
        got = token_logprobs(model, batch, 0.7)
    assert got.shape == batch.mask.shape
    start = batch.first_scored()
    assert start == 2  # the shortest prompt has 3 tokens: its first completion token sits at column 2
    assert torch.equal(got[:, :start], torch.zeros(len(samples), start))
    for i, s in enumerate(samples):
        p, c = len(s.prompt_ids), len(s.completion_ids)
        torch.testing.assert_close(got[i, p - 1:p - 1 + c], _dense_row_logprobs(model, s, 0.7),
                                   rtol=0, atol=2e-6)


def test_length_chunks_cover_every_row_once_longest_first():
    lengths = torch.tensor([4, 9, 2, 9, 7, 1, 5])
    rows = torch.tensor([0, 2, 3, 5, 6])
    parts = length_chunks(rows, lengths, 2)
    assert [p.tolist() for p in parts] == [[3, 6], [0, 2], [5]]
    assert sorted(torch.cat(parts).tolist()) == rows.tolist()


def test_batch_logprobs_with_sorted_micro_batches_equal_one_forward_per_row():
    cfg = load_config(None, TINY)
    model = random_model(cfg.policy, vocab_size=VOCAB)
    batch = _batch()
    got, _ = batch_logprobs(model, batch, 0.7, micro_batch_size=4)
    for i in range(len(batch.lengths)):
        row = batch.select(torch.tensor([i]))
        with torch.no_grad():
            alone = token_logprobs(model, row, 0.7)
        width = int(batch.lengths[i]) - 1
        sel = batch.mask[i, :width] > 0
        torch.testing.assert_close(got[i, :width][sel], alone[0][sel], rtol=0, atol=2e-6)


def _one_update(on_policy: bool, optimizer_of, overrides=()):
    cfg = load_config(None, TINY + ["optim.micro_batch_size=4", "loss.name=grpo"] + list(overrides))
    policy = random_model(cfg.policy, vocab_size=VOCAB)
    batch = _batch()
    if on_policy:
        old = torch.zeros(batch.mask.shape)
    else:
        old, _ = batch_logprobs(policy, batch, cfg.rollout.temperature, cfg.optim.micro_batch_size)
    optimizer = optimizer_of(policy)
    metrics = update_policy(policy, optimizer, batch, old, None, cfg, on_policy=on_policy)
    return policy, old, metrics, batch


@pytest.mark.parametrize("optimizer_of", [lambda m: torch.optim.SGD(m.parameters(), lr=1.0),
                                          lambda m: torch.optim.AdamW(m.parameters(), lr=1e-3)],
                         ids=["sgd-lr1", "adamw"])
def test_on_policy_update_equals_the_update_on_recomputed_old_logprobs(optimizer_of):
    before = random_model(load_config(None, TINY).policy, vocab_size=VOCAB)
    fast, fast_old, fast_m, batch = _one_update(True, optimizer_of)
    slow, slow_old, slow_m, _ = _one_update(False, optimizer_of)
    sel = batch.mask > 0
    # the filled-in old log-probs are the recomputed ones (same weights, same tokens)
    torch.testing.assert_close(fast_old[sel], slow_old[sel], rtol=0, atol=1e-6)
    assert fast_m["loss/ratio"] == 1.0  # exactly on-policy: exp(logp - logp.detach()) = 1
    assert slow_m["loss/ratio"] == pytest.approx(1.0, abs=1e-6)
    for key in ("loss/pg", "loss/grad_norm", "loss/clip_frac"):
        assert fast_m[key] == pytest.approx(slow_m[key], rel=1e-5, abs=1e-7), key
    # GRPO at ratio 1: loss = -mean over rows of A (hand-derived), so both paths compute the same loss
    assert fast_m["loss/pg"] == pytest.approx(-float(batch.advantages.mean()), abs=1e-6)
    moved = 0.0
    for (name, a), b, c in zip(fast.named_parameters(), slow.parameters(), before.parameters()):
        torch.testing.assert_close(a, b, rtol=0, atol=1e-6, msg=name)
        moved = max(moved, float((a - c).detach().abs().max()))
    assert moved > 1e-4  # the step did move the weights (the comparison above is not of two no-ops)


def test_on_policy_update_refuses_more_than_one_optimiser_step_or_a_correction():
    sgd = lambda m: torch.optim.SGD(m.parameters(), lr=0.0)  # noqa: E731
    for overrides in (["optim.num_iterations=2"], ["optim.minibatches=2"], ["loss.name=dapo", "loss.tis=true"]):
        with pytest.raises(ValueError, match="one optimiser step"):
            _one_update(True, sgd, overrides)


def _count_forwards(trainer) -> list[int]:
    """Counts the policy's forwards over the batch's rows (a shared prefix's one-row forward not counted; the
    rows packed into one sequence, with their 4D mask, are one forward over the rows)."""
    calls = [0]

    def hook(_module, _args, kwargs, _out):
        mask = kwargs.get("attention_mask")
        if kwargs["input_ids"].shape[0] > 1 or (mask is not None and mask.dim() == 4):
            calls[0] += 1
    trainer.state.side.policy.register_forward_hook(hook, with_kwargs=True)
    return calls


@pytest.mark.parametrize("overrides, reused", [((), True), (("optim.num_iterations=2",), False),
                                               (("optim.minibatches=2",), False)])
def test_the_step_skips_the_logprob_forward_only_when_the_update_is_one_step(tiny, overrides, reused):
    t = Trainer(tiny("eval.every=0", "checkpoint.every=0", "optim.micro_batch_size=4", *overrides), logger=False)
    try:
        assert reuses_update_forward(t.state.side, 8, 0) is reused
        calls = _count_forwards(t)
        m = t.step_once().metrics
    finally:
        t.close()
    rows, mbs = 8, 4  # prompts_per_step 2 x group_size 4, micro-batches of 4
    updates = (rows // mbs) * t.cfg.optim.num_iterations
    assert calls[0] == updates + (0 if reused else rows // mbs)
    # the mismatch metrics come either way, from whichever forward scored the old policy
    assert 0.0 <= m["mismatch/mean_abs"] < 1e-4 and m["mismatch/alarm"] == 0.0
    assert m["mismatch/max_abs"] >= m["mismatch/mean_abs"]


def _prefixed_batch():
    """Six rows sharing their first 10 tokens (a system prompt), then prompts of 1-3 tokens of their own."""
    g = torch.Generator().manual_seed(1)
    system = torch.randint(3, VOCAB, (10,), generator=g).tolist()
    samples = []
    for own, c in ((1, 5), (2, 2), (1, 7), (3, 4), (2, 1), (1, 6)):
        ids = torch.randint(3, VOCAB, (own + c,), generator=g).tolist()
        samples.append(Sample(system + ids[:own], ids[own:], [-1.5] * c, [1] * c))
    adv = torch.tensor([0.5, -1.0, 2.0, 0.25, -0.75, 1.25])
    return collate(samples, adv, pad_id=0), samples


def _weighted_grads(model, batch, share: bool, monkeypatch):
    """Gradients of sum(logp * mask * w) with the shared-prefix forward on or off (MIN_PREFIX out of reach),
    the rows padded (packing off: :mod:`trajkit.rl.packed` has its own tests against this forward)."""
    monkeypatch.setattr(packed, "ENABLED", False)
    monkeypatch.setattr(shared_prefix, "MIN_PREFIX", 8 if share else 10 ** 6)
    model.zero_grad(set_to_none=True)
    logp = token_logprobs(model, batch, 0.7)
    w = torch.linspace(-1.0, 1.0, logp.numel()).reshape(logp.shape)
    (logp * batch.mask * w).sum().backward()
    return logp.detach(), {n: p.grad.clone() for n, p in model.named_parameters()}


def test_the_shared_prefix_forward_equals_the_dense_one_in_values_and_gradients(monkeypatch):
    cfg = load_config(None, TINY)
    model = random_model(cfg.policy, vocab_size=VOCAB)
    batch, samples = _prefixed_batch()
    assert shared_prefix.common_prefix(batch.input_ids, batch.attention) == 10
    calls = []
    model.register_forward_hook(lambda _m, _a, kw, _o: calls.append(kw["input_ids"].shape), with_kwargs=True)
    shared, shared_grads = _weighted_grads(model, batch, True, monkeypatch)
    assert calls == [(1, 10), (6, batch.input_ids.shape[1] - 10)]  # the prefix ran once, then every row's rest
    dense, dense_grads = _weighted_grads(model, batch, False, monkeypatch)
    assert calls[2:] == [tuple(batch.input_ids.shape)]
    for i, s in enumerate(samples):  # against an unpadded row's own dense forward, too
        p, c = len(s.prompt_ids), len(s.completion_ids)
        torch.testing.assert_close(shared[i, p - 1:p - 1 + c], _dense_row_logprobs(model, s, 0.7),
                                   rtol=0, atol=2e-6)
    torch.testing.assert_close(shared, dense, rtol=0, atol=2e-6)
    for name, g in dense_grads.items():
        assert float(g.abs().max()) > 0 or name.endswith("bias"), name
        torch.testing.assert_close(shared_grads[name], g, rtol=1e-4, atol=1e-6, msg=name)
