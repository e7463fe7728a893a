"""Mismatch metrics by hand, and the alarm firing on a weight sync broken on purpose."""
import math
import warnings

import pytest
import torch

from trajkit.rl.mismatch import MismatchAlarm, MismatchWarning, mismatch_metrics
from trajkit.envs.rewards import RewardSet
from trajkit.rl.trainer import Trainer


def test_metrics_hand_derived():
    engine = torch.tensor([[-1.0, -2.0, -3.0]])
    policy = torch.tensor([[-1.1, -2.0, -9.0]])
    mask = torch.tensor([[1.0, 1.0, 0.0]])  # the third token is forced: ignored
    m = mismatch_metrics(engine, policy, mask)
    # delta = log p - log q = [-0.1, 0]; k3 = mean(exp(d) - 1 - d) = (e^-0.1 - 0.9) / 2
    assert m["mean_abs"] == pytest.approx(0.05, abs=1e-7)
    assert m["kl"] == pytest.approx((math.exp(-0.1) - 0.9) / 2, abs=1e-7)
    assert m["max_abs"] == pytest.approx(0.1, abs=1e-7)


def test_alarm_thresholds():
    alarm = MismatchAlarm(abs_threshold=0.05, jump_factor=20.0, min_jump=1e-3)
    quiet = {"kl": 0.0}
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert not alarm.check({"mean_abs": 1e-7, **quiet}, 1)
        assert not alarm.check({"mean_abs": 5e-6, **quiet}, 2)  # 50x but below min_jump: numerics
    with pytest.warns(MismatchWarning, match="step 3"):
        assert alarm.check({"mean_abs": 2e-3, **quiet}, 3)  # a jump from ~1e-6
    with pytest.warns(MismatchWarning, match="above 0.05"):
        assert alarm.check({"mean_abs": 0.2, **quiet}, 4)


def varied_reward(completion_ids, **kwargs):
    """A reward that differs within groups (fraction of even token ids), so the update moves."""
    return [sum(t % 2 == 0 for t in ids) / len(ids) for ids in completion_ids]


def _run(trainer, steps):
    trainer.state.rewards = RewardSet.build([varied_reward])
    return [trainer.step_once().metrics for _ in range(steps)]


def test_alarm_fires_when_the_weight_sync_is_broken(tiny):
    trainer = Trainer(tiny("optim.lr=0.05", "draft.kind=model"), logger=False)
    first = _run(trainer, 1)[0]
    assert first["mismatch/mean_abs"] < 1e-4  # engine and policy share weights before any update
    trainer.state.rollout.sync = lambda *a, **k: None  # break the sync: the engine keeps stale weights
    with pytest.warns(MismatchWarning, match="weight sync"):
        second = _run(trainer, 1)[0]
    assert second["mismatch/alarm"] == 1.0
    assert second["mismatch/mean_abs"] > 100 * max(first["mismatch/mean_abs"], 1e-6)
    assert second["mismatch/kl"] > 0


def test_alarm_quiet_when_the_sync_works(tiny):
    trainer = Trainer(tiny("optim.lr=0.05"), logger=False)
    with warnings.catch_warnings():
        warnings.simplefilter("error", MismatchWarning)
        metrics = _run(trainer, 3)
    assert all(m["mismatch/alarm"] == 0.0 and m["mismatch/mean_abs"] < 1e-4 for m in metrics)
