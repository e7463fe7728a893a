"""``update_policy`` metrics are averages over the optimiser steps that actually ran (hand-derived)."""
import pytest
import torch

from trajkit.rl.batching import batch_logprobs, collate
from trajkit.rl.build import random_model
from trajkit.rl.config import load_config
from trajkit.envs.sample import Sample
from trajkit.rl.update import update_policy

from .conftest import TINY


def test_pg_loss_is_averaged_over_the_slices_that_ran():
    # 5 rows in 4 minibatches: ceil(5/4) = 2 rows per slice -> slices of 2, 2 and 1 rows (3 steps, not 4)
    cfg = load_config(None, TINY + ["optim.minibatches=4", "optim.lr=1e-30"])
    policy = random_model(cfg.policy, vocab_size=259)
    samples = [Sample([1, 2], [3, 4, 5][:n], [-1.0] * n, [1] * n) for n in (1, 2, 3, 2, 1)]
    adv = torch.tensor([0.5, -1.0, 2.0, 0.25, -0.75])
    batch = collate(samples, adv, pad_id=0)
    old, _ = batch_logprobs(policy, batch, cfg.rollout.temperature, 8)
    optimizer = torch.optim.SGD(policy.parameters(), lr=0.0)  # the policy stays put: ratio 1 in every slice
    metrics = update_policy(policy, optimizer, batch, old, None, cfg)
    # GRPO at ratio 1: every token's surrogate is -A, so a slice's loss is -mean(A over its rows)
    a = adv.tolist()
    expected = (-(a[0] + a[1]) / 2 - (a[2] + a[3]) / 2 - a[4]) / 3
    assert metrics["loss/pg"] == pytest.approx(expected, abs=1e-6)
