"""Masked importance sampling through ``update_policy``: the gradient against the formula written per sequence
from the samples, micro-batches summing to the full batch, the step's metrics, and the perturbed-behaviour
check (the masked update stays bounded where plain importance sampling's grows without bound)."""
import math

import pytest
import torch

from trajkit.envs.sample import Sample
from trajkit.rl.batching import batch_logprobs, collate
from trajkit.rl.build import random_model
from trajkit.rl.config import load_config
from trajkit.rl.update import update_policy

from .conftest import TINY

ADV = torch.tensor([0.5, -1.0, 2.0, 0.25, -0.75])


def _setup(overrides, forced=False):
    cfg = load_config(None, TINY + ["optim.grad_clip=1e9"] + overrides)
    policy = random_model(cfg.policy, vocab_size=259)
    gen = torch.Generator().manual_seed(0)
    samples = []
    for n in (3, 1, 4, 2, 3):
        completion = torch.randint(3, 250, (n,), generator=gen).tolist()
        mask = [0 if forced and i % 3 == 2 else 1 for i in range(n)]
        samples.append(Sample([1, 2, 7][: 1 + n % 3], completion, [0.0] * n, mask))
    batch = collate(samples, ADV, pad_id=0)
    old, _ = batch_logprobs(policy, batch, 1.0, 8)
    return cfg, policy, samples, batch, old, gen


def _rows(batch, samples, tensor):
    return [tensor[i, len(s.prompt_ids) - 1:len(s.prompt_ids) - 1 + len(s.completion_ids)].tolist()
            for i, s in enumerate(samples)]


def _reference_grads(policy, samples, engine, band=None, seq=None, cap=None):
    """GRPO at ratio 1 with each sampled token weighted by keep x min(r, cap), r = exp(old - q), written from
    the formula one unpadded sequence at a time: ``band`` (low, high) drops a token whose r leaves it, ``seq``
    (mode, low, high) a sequence whose mean r (arithmetic) or exp(mean log r) (geometric) leaves it."""
    policy.zero_grad(set_to_none=True)
    total = 0.0
    for s, a, q in zip(samples, ADV.tolist(), engine):
        ids = torch.tensor([s.prompt_ids + s.completion_ids])
        logits = policy(input_ids=ids).logits[0, len(s.prompt_ids) - 1:-1].float()
        logp = torch.log_softmax(logits, -1).gather(-1, torch.tensor(s.completion_ids).unsqueeze(-1)).squeeze(-1)
        old = logp.detach()
        r = [math.exp(o - e) for o, e in zip(old.tolist(), q)]
        w = [1.0 if band is None or band[0] <= x <= band[1] else 0.0 for x in r]
        if seq is not None:
            stat = sum(r) / len(r) if seq[0] == "arithmetic" else math.exp(sum(math.log(x) for x in r) / len(r))
            w = [x * (seq[1] <= stat <= seq[2]) for x in w]
        if cap is not None:
            w = [x * min(y, cap) for x, y in zip(w, r)]
        total = total + (-(torch.tensor(w) * a * torch.exp(logp - old))).mean()
    (total / len(samples)).backward()
    return [p.grad.clone() for p in policy.parameters()]


CASES = {
    "token": (["loss.token_mask=true", "loss.token_mask_low=0.7", "loss.token_mask_high=1.4"],
              dict(band=(0.7, 1.4))),
    "token+tis": (["loss.token_mask=true", "loss.token_mask_low=0.7", "loss.token_mask_high=1.4", "loss.tis=true",
                   "loss.tis_cap=1.2"], dict(band=(0.7, 1.4), cap=1.2)),
    "arithmetic": (["loss.seq_mask=arithmetic", "loss.seq_mask_low=0.9", "loss.seq_mask_high=1.1"],
                   dict(seq=("arithmetic", 0.9, 1.1))),
    "geometric+tis": (["loss.seq_mask=geometric", "loss.seq_mask_low=0.9", "loss.seq_mask_high=1.1", "loss.tis=true"],
                      dict(seq=("geometric", 0.9, 1.1), cap=2.0)),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_update_policy_gradient_equals_the_formula(case):
    overrides, ref = CASES[case]
    cfg, policy, samples, batch, old, gen = _setup(["optim.micro_batch_size=2"] + overrides)
    shift = (torch.rand(batch.mask.shape, generator=gen) - 0.5) * 1.6  # engine = policy +- 0.8 per token
    batch.engine_logp = (old + shift) * batch.mask
    metrics = update_policy(policy, torch.optim.SGD(policy.parameters(), lr=0.0), batch, old, None, cfg)
    got = [p.grad.clone() for p in policy.parameters()]
    want = _reference_grads(policy, samples, _rows(batch, samples, batch.engine_logp), **ref)
    for g, w in zip(got, want):
        assert torch.allclose(g, w, atol=1e-6, rtol=1e-4)
    assert 0.0 < metrics["correction/tokens_masked"] < 1.0  # the mask acted, and not on everything
    plain = _reference_grads(policy, samples, _rows(batch, samples, batch.engine_logp))
    assert not all(torch.allclose(g, p, atol=1e-6, rtol=1e-4) for g, p in zip(got, plain))


def test_micro_batches_sum_to_the_full_batch():
    """Both masks, TIS and ECHO, on samples with forced tokens: 1-row micro-batches == one 5-row micro-batch."""
    on = ["loss.token_mask=true", "loss.token_mask_low=0.7", "loss.token_mask_high=1.4", "loss.seq_mask=geometric",
          "loss.seq_mask_low=0.8", "loss.seq_mask_high=1.25", "loss.tis=true", "loss.echo_coef=0.5"]
    grads, metrics = [], []
    for size in (1, 5):
        cfg, policy, samples, batch, old, gen = _setup([f"optim.micro_batch_size={size}"] + on, forced=True)
        shift = (torch.rand(batch.mask.shape, generator=gen) - 0.5) * 1.6
        batch.engine_logp = (old + shift) * batch.mask
        metrics.append(update_policy(policy, torch.optim.SGD(policy.parameters(), lr=0.0), batch, old, None, cfg))
        grads.append([p.grad.clone() for p in policy.parameters()])
    for a, b in zip(*grads):
        assert torch.allclose(a, b, atol=1e-7, rtol=1e-5)
    for key in ("loss/pg", "loss/echo", "correction/tokens_masked", "correction/seqs_masked", "correction/ratio_p50"):
        assert metrics[0][key] == pytest.approx(metrics[1][key], rel=1e-6, abs=1e-9)
    assert metrics[0]["loss/echo"] > 0.0


DELTAS = (0.0, 1.0, 2.0, 4.0, 8.0)
ARMS = {"plain_is": ["loss.decoupled=true"],  # AReaL's uncapped behaviour weight: plain importance sampling
        "tis": ["loss.tis=true"],
        "token_mask": ["loss.token_mask=true"],
        "icepop": ["loss.token_mask=true", "loss.tis=true"],
        "geometric": ["loss.seq_mask=geometric"]}


def _perturbed(mask):
    """1 at three sampled tokens (rows 0, 2 and 4), the ones whose behaviour log-prob is perturbed."""
    out = torch.zeros_like(mask)
    out[0, 2] = out[2, 3] = out[4, 2] = 1.0
    assert float((out * mask).sum()) == 3.0
    return out


def _perturbed_grads(arm, delta):
    """One update's gradient with the behaviour policy perturbed on a fixed set of tokens: the engine's
    log-prob is the policy's minus ``delta`` there (it found the token ``exp(delta)`` times less likely), exact
    elsewhere. -> (gradient tensors, the step's metrics)."""
    cfg, policy, samples, batch, old, _ = _setup(["optim.micro_batch_size=5"] + ARMS[arm])
    batch.engine_logp = (old - delta * _perturbed(batch.mask)) * batch.mask
    metrics = update_policy(policy, torch.optim.SGD(policy.parameters(), lr=0.0), batch, old, None, cfg)
    return [p.grad.clone() for p in policy.parameters()], metrics


def _norm(grads):
    return math.sqrt(sum(float((g.double() ** 2).sum()) for g in grads))


def test_perturbed_behaviour_masked_update_is_bounded():
    """Deterministic by construction (fixed weights, tokens and offsets). Plain IS multiplies the perturbed
    tokens' terms by exp(delta): its gradient grows without bound. TIS caps them at 2: bounded, but those
    off-policy tokens still move the policy (its update differs from the clean tokens' one). The token mask
    removes them once exp(delta) > 2: the update is the same for every delta >= 1, the clean tokens' alone;
    the geometric sequence mask removes their whole sequences, likewise independent of delta."""
    runs = {arm: [_perturbed_grads(arm, d) for d in DELTAS] for arm in ARMS}
    norms = {arm: [_norm(g) for g, _ in runs[arm]] for arm in ARMS}
    base = norms["plain_is"][0]  # delta 0: every arm is the on-policy update
    for arm in ARMS:
        assert norms[arm][0] == pytest.approx(base, rel=1e-6)
    plain = norms["plain_is"]
    assert all(b > a for a, b in zip(plain, plain[1:])) and plain[-1] > 100 * base
    tis = norms["tis"]
    assert tis[1] == pytest.approx(tis[-1], rel=1e-6) and tis[-1] < 3 * base  # capped, not growing
    for arm in ("token_mask", "icepop", "geometric"):
        grads = [g for g, _ in runs[arm]]
        for later in grads[2:]:
            assert all(torch.equal(a, b) for a, b in zip(grads[1], later)), arm  # independent of delta
        assert norms[arm][-1] < 3 * base
    # the masked update is the clean tokens' alone (the formula with the 3 tokens' weight 0); TIS's still
    # carries the perturbed tokens
    cfg, policy, samples, batch, old, _ = _setup([])
    engine = _rows(batch, samples, (old - 8.0 * _perturbed(batch.mask)) * batch.mask)
    want = _reference_grads(policy, samples, engine, band=(0.5, 2.0))
    assert all(torch.allclose(a, b, atol=1e-6, rtol=1e-4) for a, b in zip(runs["token_mask"][-1][0], want))
    assert not all(torch.allclose(a, b, atol=1e-6) for a, b in zip(runs["tis"][-1][0], runs["token_mask"][-1][0]))
    _, metrics = runs["token_mask"][-1]
    assert metrics["correction/tokens_masked"] == pytest.approx(3 / 13)  # 3 of the batch's 13 sampled tokens
    assert metrics["correction/ratio_max"] == pytest.approx(math.exp(8.0), rel=1e-5)
    assert runs["geometric"][-1][1]["correction/seqs_masked"] == pytest.approx(3 / 5)
