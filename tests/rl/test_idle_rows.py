"""Rows whose advantages are all zero (a GRPO group whose rewards agree) are scored without a graph and never
backed (trajkit.rl.update). References: the gradient of the GRPO loss derived by hand over every row, each
row forwarded alone; the update that backs every row (the step before the skip), bitwise, for a slice where
no row has a gradient and AdamW moves the weights on its momentum alone."""
import copy

import pytest
import torch

from trajkit.envs.sample import Sample
from trajkit.rl import update
from trajkit.rl.batching import collate
from trajkit.rl.build import random_model
from trajkit.rl.config import load_config
from trajkit.rl.update import idle_rows, update_policy

from .conftest import TINY
from .test_on_policy_update import VOCAB, _samples  # six rows of mixed lengths, one forced token


def _row_logprobs(model, sample: Sample, temperature: float) -> torch.Tensor:
    """One unpadded row, with its graph: the completion tokens' log-probs at the rollout temperature."""
    ids = torch.tensor([sample.ids])
    logits = model(input_ids=ids).logits[0, :-1].float()
    logp = torch.log_softmax(logits / temperature, dim=-1).gather(-1, ids[0, 1:, None])[:, 0]
    return logp[len(sample.prompt_ids) - 1:]


def _count_backwards(monkeypatch) -> list[int]:
    calls = [0]
    backward = torch.Tensor.backward

    def counted(self, *args, **kwargs):
        calls[0] += 1
        return backward(self, *args, **kwargs)
    monkeypatch.setattr(torch.Tensor, "backward", counted)
    return calls


def test_idle_rows_are_not_backed_and_the_gradient_is_the_hand_derived_one(monkeypatch):
    cfg = load_config(None, TINY + ["optim.micro_batch_size=2", "loss.name=grpo", "optim.grad_clip=1e9"])
    policy = random_model(cfg.policy, vocab_size=VOCAB)
    reference = copy.deepcopy(policy)
    samples = _samples()
    adv = torch.tensor([0.5, 0.0, 2.0, 0.0, 0.0, -1.25])
    batch = collate(samples, adv, pad_id=0)
    old = torch.zeros(batch.mask.shape)
    backwards = _count_backwards(monkeypatch)
    metrics = update_policy(policy, torch.optim.SGD(policy.parameters(), lr=0.0), batch, old, None, cfg,
                            on_policy=True)
    assert backwards[0] == 2  # rows 2, 5 and 0 in micro-batches of 2; the idle rows 1, 3, 4 are never backed
    # GRPO on policy (ratio 1): loss = -(1/B) sum_rows A_r * mean over the row's sampled tokens of logp
    loss = 0.0
    for s, a in zip(samples, adv.tolist()):
        logp = _row_logprobs(reference, s, cfg.rollout.temperature)
        m = torch.tensor(s.loss_mask, dtype=torch.float32)
        loss = loss - a * (logp * m).sum() / m.sum() / len(samples)
    loss.backward()
    for (name, p), q in zip(policy.named_parameters(), reference.parameters()):
        torch.testing.assert_close(p.grad, q.grad, rtol=1e-5, atol=1e-7, msg=name)
    assert metrics["loss/pg"] == pytest.approx(-float(adv.mean()), abs=1e-6)
    assert metrics["loss/ratio"] == 1.0
    with torch.no_grad():  # the idle rows' old log-probs (the mismatch metrics read them) are still written
        for i in (1, 3, 4):
            s = samples[i]
            p, c = len(s.prompt_ids), len(s.completion_ids)
            torch.testing.assert_close(old[i, p - 1:p - 1 + c], _row_logprobs(reference, s, cfg.rollout.temperature), rtol=0, atol=2e-6)


def test_a_slice_without_gradient_moves_adamw_as_backing_its_zero_loss_does(monkeypatch):
    """Second step: every advantage zero. AdamW still moves the weights (momentum, decay); the skip must
    leave zero gradients, not none (a parameter without one is not stepped). Reference: every row backed."""
    cfg = load_config(None, TINY + ["optim.micro_batch_size=4", "loss.name=grpo"])
    samples = _samples()
    batches = [collate(samples, torch.tensor([0.5, -1.0, 2.0, 0.25, -0.75, 1.25]), pad_id=0),
               collate(samples, torch.zeros(6), pad_id=0)]

    def run():
        policy = random_model(cfg.policy, vocab_size=VOCAB)
        optimizer = torch.optim.AdamW(policy.parameters(), lr=1e-3, weight_decay=0.1)
        states = []
        for batch in batches:
            update_policy(policy, optimizer, batch, torch.zeros(batch.mask.shape), None, cfg, on_policy=True)
            states.append({k: v.clone() for k, v in policy.state_dict().items()})
        return states

    backwards = _count_backwards(monkeypatch)
    skipped = run()
    assert backwards[0] == 2  # the first step's two micro-batches; none in the second
    monkeypatch.setattr(update, "idle_rows", lambda *args: None)
    backed = run()
    assert backwards[0] == 2 + 4  # counted on: both steps back their two micro-batches
    for step in (0, 1):
        for key, value in skipped[step].items():
            assert torch.equal(value, backed[step][key]), (step, key)
    assert any(not torch.equal(skipped[0][k], v) for k, v in skipped[1].items())  # the second step moved them


def test_rows_are_idle_only_where_nothing_else_has_a_gradient():
    samples = _samples()
    cfg = load_config(None, TINY)
    batch = collate(samples, torch.tensor([0.5, 0.0, 2.0, 0.0, 0.0, -1.25]), pad_id=0)
    assert idle_rows(batch, cfg, None, None).tolist() == [False, True, False, True, True, False]
    per_token = torch.ones(batch.mask.shape)
    per_token[2] = 0.0
    per_token[4, 0] = 0.0
    token_batch = collate(samples, torch.zeros(6), pad_id=0)
    token_batch.advantages = per_token  # on-policy distillation's per-token advantages: all zero in row 2 only
    assert idle_rows(token_batch, cfg, None, None).tolist() == [False, False, True, False, False, False]
    assert idle_rows(collate(samples, torch.ones(6), pad_id=0), cfg, None, None) is None
    assert idle_rows(batch, load_config(None, TINY + ["loss.kl_coef=0.05"]), None, None) is None
    assert idle_rows(batch, cfg, torch.zeros(batch.mask.shape, dtype=torch.bool), None) is None  # ECHO on
    assert idle_rows(batch, cfg, None, object()) is None  # FSDP2: every rank runs the same forwards
    batch.teacher_dists = object()  # on-policy distillation's divergence term
    assert idle_rows(batch, cfg, None, None) is None


def test_rows_of_one_prompt_share_a_micro_batch_where_that_computes_fewer_positions():
    """Two GRPO groups whose prompts share a 10-token template and differ in their last 5 tokens. Longest first
    mixes the groups (shared prefix 10, each row carrying its 5 other prompt tokens); by prompt, each micro-batch
    shares its whole 15-token prompt. Positions hand-counted (packed: prefix once plus each row's tokens after it)."""
    from trajkit.rl.batching import batch_logprobs, length_chunks, positions, row_chunks, token_logprobs

    cfg = load_config(None, TINY)
    model = random_model(cfg.policy, vocab_size=VOCAB)
    template = list(range(10, 20))
    prompts = [template + [30, 31, 32, 33, 34], template + [40, 41, 42, 43, 44]]
    replies = [9, 7, 4, 2, 8, 6, 5, 1]  # group 0: rows 0-3, group 1: rows 4-7
    samples = [Sample(prompts[i // 4], [50 + j for j in range(n)], [0.0] * n, [1] * n) for i, n in enumerate(replies)]
    batch = collate(samples, torch.zeros(8), pad_id=0)
    rows = torch.arange(8)
    by_length = length_chunks(rows, batch.lengths, 4)
    assert [c.tolist() for c in by_length] == [[0, 4, 1, 5], [6, 2, 3, 7]]
    # by length: prefix 10 + (5 + reply) per row: 10 + 4 * 5 + (9 + 8 + 7 + 6) = 60; 10 + 20 + (5 + 4 + 2 + 1) = 42
    assert positions(batch, by_length, True, True) == 60 + 42
    chosen = row_chunks(model, batch, rows, 4)
    assert [c.tolist() for c in chosen] == [[0, 1, 2, 3], [4, 5, 6, 7]]
    # by prompt: the prefix stops at column 14, the first scored one (the last prompt token's output predicts the
    # reply), so each row carries 1 prompt token: 14 + (10 + 8 + 5 + 3) = 40; 14 + (9 + 7 + 6 + 2) = 38
    assert positions(batch, chosen, True, True) == 40 + 38
    # padded (no packing): prefix once, then every row to the longest: 14 + 4 * 10 = 54 and 14 + 4 * 9 = 50 by
    # prompt, 10 + 4 * 14 = 66 and 10 + 4 * 10 = 50 by length
    assert positions(batch, chosen, True, False) == 54 + 50 and positions(batch, by_length, True, False) == 66 + 50
    same = collate([Sample(prompts[0], s.completion_ids, s.logprobs, s.loss_mask) for s in samples], torch.zeros(8),
                   pad_id=0)
    assert [c.tolist() for c in row_chunks(model, same, rows, 4)] == [c.tolist() for c in length_chunks(
        rows, same.lengths, 4)]  # one prompt: grouping saves nothing, longest first stays
    got, _ = batch_logprobs(model, batch, 0.7, 4)  # the log-probs do not depend on the grouping
    for i in range(8):
        with torch.no_grad():
            alone = token_logprobs(model, batch.select(torch.tensor([i])), 0.7)
        width = int(batch.lengths[i]) - 1
        torch.testing.assert_close(got[i, 14:width], alone[0, 14:width], rtol=0, atol=2e-6)
