"""``run.rows``: the trainer logs the dataset rows it draws, and the audit finds a loader that repeats
rows (a real run with a planted loader bug) while the real loader passes; epochs checked by hand."""
from __future__ import annotations

import pytest

from trajkit.audit.loader import epoch_problems, rows_check
from trajkit.audit.runs import read_metrics
from trajkit.envs.data import DatasetTask
from trajkit.rl.trainer import Trainer

ROWS = [{"prompt": f"say {i}", "answer": str(i)} for i in range(6)]


@pytest.fixture
def tiny(tmp_path):
    """``tiny(*overrides)``: the RL tests' tiny random-policy config, logging under tmp_path."""
    from tests.rl.conftest import TINY
    from trajkit.rl.config import load_config

    return lambda *overrides: load_config(None, TINY + [f"log.out_dir={tmp_path / 'run'}", *overrides])


def test_epochs_by_hand():
    draws = [(1, 2), (1, 0), (2, 1), (2, 0), (3, 2), (3, 1)]  # n = 3: two permutations
    assert epoch_problems(draws, 3) == []
    repeat = [(1, 2), (1, 2), (2, 1), (2, 0)]  # epoch 0 = rows 2, 2, 1: row 2 twice, row 0 never
    assert epoch_problems(repeat, 3) == ["row 2 drawn twice in epoch 0 (steps 1 and 1)", "row 0 never drawn in epoch 0"]
    assert epoch_problems([(1, 0), (1, 0)], 3) == ["row 0 drawn twice in epoch 0 (steps 1 and 1)"]  # unfinished epoch


def exact(completions, answer, **kwargs):
    return [float(c == a) for c, a in zip(completions, answer)]


class RepeatingTask(DatasetTask):
    """A loader bug: the shuffle of each epoch maps two positions to the same row."""

    def _row_index(self, index: int, split: str) -> int:
        pos = super()._row_index(index, split)
        return 0 if split == "train" and pos == 1 else pos


def _train(tiny, task=None):
    cfg = tiny("steps=6", "rollout.prompts_per_step=2", "rollout.group_size=2")
    if task is None:
        trainer = Trainer(cfg, train_dataset=ROWS, reward_funcs=[exact])
    else:
        trainer = Trainer(cfg, task=task)
    trainer.train()
    return cfg.log.out_dir


def test_the_trainer_logs_rows_and_a_clean_loader_passes(tiny):
    folder = _train(tiny)
    metrics = read_metrics(folder)
    drawn = [r for m in metrics if "data/rows" in m for r in m["data/rows"]]
    assert len(drawn) == 12 and sorted(drawn[:6]) == sorted(drawn[6:]) == list(range(6))  # two permutations
    assert {m["data/num_rows"] for m in metrics if "data/num_rows" in m} == {6}
    check = rows_check(folder, metrics)
    assert (check.verdict, check.statistic) == ("PASS", 0) and "12 draws over 6 rows (2.00 epochs)" in check.detail


def test_a_loader_that_repeats_rows_fails(tiny):
    from trajkit.models.tokenizer import byte_tokenizer

    task = RepeatingTask(ROWS, byte_tokenizer(), reward_funcs=[exact])
    folder = _train(tiny, task)
    check = rows_check(folder, read_metrics(folder))
    assert check.verdict == "FAIL" and check.statistic == 4  # per epoch: row 0 twice, the row it hid never
    assert any("row 0 drawn twice in epoch 0" in i for i in check.items)
    assert any("never drawn in epoch 1" in i for i in check.items)


def test_synthetic_tasks_log_no_rows(tiny):
    cfg = tiny("steps=1")
    Trainer(cfg).train()
    assert rows_check(cfg.log.out_dir, read_metrics(cfg.log.out_dir)) is None
