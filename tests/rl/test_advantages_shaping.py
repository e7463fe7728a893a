"""Group advantages and length shaping against hand-derived values."""
import math

import pytest
import torch

from trajkit.rl.advantages import group_advantages
from trajkit.rl.config import load_config
from trajkit.envs.sample import Sample
from trajkit.rl.scoring import score
from trajkit.rl.shaping import group_length_penalty, overlong_penalty


def test_advantages_with_and_without_std():
    r = torch.tensor([[1.0, 0.0, 0.0, 1.0], [1.0, 1.0, 1.0, 1.0]])
    # mean 0.5; unbiased std = sqrt(4 * 0.25 / 3) = sqrt(1/3)
    scaled = group_advantages(r, scale="group")
    a = 0.5 / (math.sqrt(1 / 3) + 1e-4)  # eps 1e-4, DeepSeekMath's and TRL's
    assert scaled[0].tolist() == pytest.approx([a, -a, -a, a], rel=1e-6)
    assert scaled[1].tolist() == [0.0, 0.0, 0.0, 0.0]  # all-equal group: no signal
    assert group_advantages(r, scale="none")[0].tolist() == [0.5, -0.5, -0.5, 0.5]


def test_batch_scaled_advantages_divide_by_the_whole_batch_std():
    r = torch.tensor([[1.0, 0.0, 0.0, 1.0], [1.0, 1.0, 1.0, 1.0]])
    # batch mean 0.75; unbiased std over the 8 rewards = sqrt((6 * 0.0625 + 2 * 0.5625) / 7) = sqrt(1.5 / 7)
    a = 0.5 / (math.sqrt(1.5 / 7) + 1e-4)
    out = group_advantages(r, scale="batch")
    assert out[0].tolist() == pytest.approx([a, -a, -a, a], rel=1e-6)
    assert out[1].tolist() == [0.0, 0.0, 0.0, 0.0]  # still centred on the group's own mean


def test_overlong_penalty_dapo():
    # L_max 16, buffer 4: free up to 12, linear to -1 at 16, -1 beyond
    out = overlong_penalty(torch.tensor([10, 12, 14, 15, 16, 17]), max_len=16, buffer=4)
    assert out.tolist() == pytest.approx([0.0, 0.0, -0.5, -0.75, -1.0, -1.0])


def test_group_length_penalty_only_among_correct():
    lengths = torch.tensor([[4, 6, 8, 5], [3, 9, 3, 3]])
    correct = torch.tensor([[True, True, False, True], [True, False, False, False]])
    # group 0: correct lengths 4, 6, 5 -> lambda = 0.5 - (L - 4) / 2 -> 0.5, -0.5, 0 (x weight 0.2)
    # group 1: a single correct answer -> no spread -> 0
    out = group_length_penalty(lengths, correct, weight=0.2)
    assert out.flatten().tolist() == pytest.approx([0.1, -0.1, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0])


def test_score_keeps_raw_beside_shaped_and_counts_model_tokens_only():
    cfg = load_config(None, ["rollout.group_size=2", "rollout.max_new_tokens=8", "shaping.overlong_buffer=4",
                             "shaping.length_penalty=0.2", "loss.scale_rewards=none"])
    # sample 0: 6 tokens but 3 forced -> 3 model tokens; sample 1: 8 model tokens (inside the buffer)
    s0 = Sample([1], [5] * 6, [-0.1, 0, 0, 0, -0.1, -0.1], [1, 0, 0, 0, 1, 1])
    s1 = Sample([1], [5] * 8, [-0.1] * 8, [1] * 8)
    adv, metrics = score([s0, s1], [1.0, 1.0], cfg)
    # overlong: L=3 -> 0 ; L=8 -> (4 - 8) / 4 = -1. Length penalty among the two correct: +0.1, -0.1
    assert [s0.raw_reward, s1.raw_reward] == [1.0, 1.0]
    assert s0.reward == pytest.approx(1.1)
    assert s1.reward == pytest.approx(1.0 - 1.0 - 0.1)
    assert adv.tolist() == pytest.approx([0.6, -0.6])
    assert metrics["reward/raw"] == 1.0 and metrics["reward/shaped"] == pytest.approx(0.5)
