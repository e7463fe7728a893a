"""A train/rollout mismatch alarm is reported once: one ``MismatchWarning``, no log record or printed copy
of the same message (it used to be both logged and warned, so a terminal showed it twice)."""
import logging
import warnings

import torch

from trajkit.rl.mismatch import MismatchWarning
from trajkit.rl.trainer import Trainer

MARK = "TRAIN/ROLLOUT MISMATCH"


def test_a_broken_sync_is_reported_once(tiny, caplog, capfd):
    trainer = Trainer(tiny(), logger=False)
    trainer.step_once()
    s = trainer.state
    s.rollout.sync = lambda *a, **k: None  # the engine keeps the weights it has now
    g = torch.Generator().manual_seed(0)
    with torch.no_grad():  # the policy moves on (as an update would): the engine is now stale
        for p in s.side.policy.parameters():
            p.add_(0.5 * torch.randn(p.shape, generator=g))
    caplog.set_level(logging.DEBUG)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        metrics = trainer.step_once().metrics
    assert metrics["mismatch/alarm"] == 1.0
    warned = [w for w in caught if MARK in str(w.message)]
    assert len(warned) == 1 and warned[0].category is MismatchWarning and "at step 2" in str(warned[0].message)
    logged = [r for r in caplog.records if MARK in r.getMessage()]
    out, err = capfd.readouterr()
    assert (len(logged), out.count(MARK), err.count(MARK)) == (0, 0, 0)
