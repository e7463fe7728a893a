"""Per-item eval logging and ``leak.clean_metric``: the trainer writes each eval item's scores (their mean
is the run's own eval/reward), and a run whose eval set holds leaked items gets its metric re-computed
without them: a planted leak that carries the number FAILs, the same leak within noise WARNs, the clean
twin PASSes; numbers derived by hand."""
from __future__ import annotations

import json
import math

import pytest

from tests.audit.corpora import corpus, write_jsonl
from tests.audit.test_leaks import LONG, TRAIN, planted_eval
from trajkit.audit.leaks import audit_data
from trajkit.audit.runs import read_metrics
from trajkit.cli.main import main
from trajkit.errors import InputError
from trajkit.rl.trainer import Trainer

ROWS = [{"id": f"t{i}", "prompt": f"say the number {i} twice", "answer": str(i)} for i in range(6)]
EVAL_ROWS = [{"id": f"e{i}", "prompt": f"repeat the word {w} now", "answer": w} for i, w in enumerate(["ab", "cd", "ef"])]


def length_reward(completions, **kwargs):
    """Varied, deterministic scores for a random policy (exact match would score 0 everywhere)."""
    return [float(len(c) % 3) / 2 for c in completions]


@pytest.fixture
def tiny(tmp_path):
    from tests.rl.conftest import TINY
    from trajkit.rl.config import load_config

    return lambda *overrides: load_config(None, TINY + [f"log.out_dir={tmp_path / 'run'}", *overrides])


def _rows(path):
    return [json.loads(line) for line in open(path, encoding="utf-8")]


def test_the_trainer_logs_every_eval_item_and_their_mean_is_eval_reward(tiny, tmp_path):
    cfg = tiny("steps=2", "eval.every=2", "eval.num_prompts=3", "eval.samples=2", "rollout.group_size=2")
    Trainer(cfg, train_dataset=ROWS, eval_dataset=EVAL_ROWS, reward_funcs=[length_reward]).train()
    folder = cfg.log.out_dir
    items = _rows(f"{folder}/eval_items.jsonl")
    metrics = {m["step"]: m for m in read_metrics(folder) if "eval/reward" in m}
    assert sorted(metrics) == [0, 2] and [r["step"] for r in items] == [0, 0, 0, 2, 2, 2]
    for step in (0, 2):
        rows = [r for r in items if r["step"] == step]
        assert [(r["id"], r["prompt"], r["answer"]) for r in rows] == [(e["id"], e["prompt"], e["answer"])
                                                                        for e in EVAL_ROWS]
        scores = [s for r in rows for s in r["scores"]]
        assert len(scores) == 6 and all(s in (0.0, 0.5, 1.0) for s in scores)
        assert sum(scores) / 6 == pytest.approx(metrics[step]["eval/reward"], abs=1e-12)

    # the run's own eval items as the eval set; e1 planted into the train data
    train = write_jsonl(tmp_path / "train.jsonl", ROWS + [dict(EVAL_ROWS[1], id="copy-of-e1")])
    checks = {c.id: c for c in audit_data([train], None, run=folder).checks}
    assert checks["leak.exact"].items == ["e1 = copy-of-e1 (prompt+answer)"]
    last = [r for r in items if r["step"] == 2]
    clean = [s for r in last if r["id"] != "e1" for s in r["scores"]]
    gap = metrics[2]["eval/reward"] - sum(clean) / len(clean)
    assert checks["leak.clean_metric"].statistic == pytest.approx(gap, abs=1e-12)
    assert checks["leak.clean_metric"].items[0].startswith("e1 (mean score")
    twin = audit_data([write_jsonl(tmp_path / "twin.jsonl", ROWS)], None, run=folder).checks
    assert [c.verdict for c in twin] == ["PASS"] * 4 and twin[-1].statistic == 0.0


def _write_items(folder, rows, scores_of, steps=(0, 4)) -> str:
    """A run folder's eval_items.jsonl: per step, ``scores_of(row)`` for each eval row; ids ``eval:N`` (not
    the rows' ids), so the audit must match them by prompt."""
    folder.mkdir()
    lines = [json.dumps({"step": s, "id": f"eval:{n}", "prompt": r["question"], "answer": r["answer"],
                         "scores": scores_of(r)}) for s in steps for n, r in enumerate(rows)]
    (folder / "eval_items.jsonl").write_text("\n".join(lines) + "\n")
    return str(folder)


PLANTED = {"copied", "rewritten", "near"}  # tests.audit.test_leaks.planted_eval: each flagged by a leak check
CLEAN_ONES = {f"eval{i}" for i in range(10)}  # 10 of the 40 clean items score one sample in four


def _scores(row):
    return [1.0] * 4 if row["id"] in PLANTED else [1.0, 0.0, 0.0, None] if row["id"] in CLEAN_ONES else [0.0] * 3 + [None]


def test_a_leak_that_carries_the_metric_fails_with_hand_derived_numbers(tmp_path):
    evals = planted_eval()
    run = _write_items(tmp_path / "run", evals, _scores)
    train, eval_file = write_jsonl(tmp_path / "train.jsonl", TRAIN), write_jsonl(tmp_path / "eval.jsonl", evals)
    check = audit_data([train], [eval_file], run=run).checks[-1]
    # all: 3 x 4 ones + 10 ones in 40 x 3 scored samples -> 22/132; clean: 10/120
    full, clean = 22 / 132, 10 / 120
    se = math.sqrt((10 * (1 - clean) ** 2 + 110 * clean ** 2) / 119 / 120)
    assert (check.id, check.verdict) == ("leak.clean_metric", "FAIL")
    assert check.statistic == pytest.approx(full - clean, abs=1e-12) and full - clean > 2 * se
    assert f"{full:.4g} on all 43 items, {clean:.4g} on the 40 clean items (SE {se:.3g})" in check.detail
    assert sorted(i.split(" ")[0] for i in check.items) == ["eval:40", "eval:41", "eval:42"]
    assert "step 0: 0.167/0.0833, step 4: 0.167/0.0833" in check.detail


def test_a_leak_within_noise_warns_and_the_clean_twin_passes(tmp_path):
    evals = planted_eval()
    flat = _write_items(tmp_path / "flat", evals, lambda r: [1.0, 0.0, 0.0, None])  # leaked items score alike
    train, eval_file = write_jsonl(tmp_path / "train.jsonl", TRAIN), write_jsonl(tmp_path / "eval.jsonl", evals)
    check = audit_data([train], [eval_file], run=flat).checks[-1]
    assert (check.verdict, check.statistic) == ("WARN", pytest.approx(0.0, abs=1e-12))
    twin_train = write_jsonl(tmp_path / "twin.jsonl", [r for i, r in enumerate(TRAIN) if i not in (3, 7, LONG)])
    run = _write_items(tmp_path / "run", evals, _scores)
    report = audit_data([twin_train], [eval_file], run=run)
    assert [(c.id, c.verdict) for c in report.checks] == [
        ("leak.exact", "PASS"), ("leak.ngram", "PASS"), ("leak.near", "PASS"), ("leak.clean_metric", "PASS")]
    assert f"metric {22 / 132:.4g}" in report.checks[-1].detail


def test_every_item_leaked_fails_and_bad_runs_are_unusable(tmp_path, capsys):
    leaked = [dict(r, id=f"ev{i}") for i, r in enumerate(TRAIN[:5])]
    run = _write_items(tmp_path / "run", leaked, lambda r: [1.0])
    train = write_jsonl(tmp_path / "train.jsonl", TRAIN)
    check = audit_data([train], None, run=run).checks[-1]
    assert (check.verdict, check.statistic) == ("FAIL", None) and "every evaluated item leaked (5 of 5)" in check.detail
    other = write_jsonl(tmp_path / "other.jsonl", corpus(seed=9, n=5, prefix="x"))
    with pytest.raises(InputError, match="none of the run's 5 eval items"):
        audit_data([train], [other], run=run)
    with pytest.raises(InputError, match="no eval_items.jsonl"):
        audit_data([train], None, run=str(tmp_path))
    (tmp_path / "run" / "eval_items.jsonl").write_text('{"step": 0, "id": "a", "prompt": "p", "scores": ["x"]}\n')
    assert main(["audit", "data", "--train", train, "--run", run]) == 2
    assert "eval_items.jsonl:1: field scores: scores must be numbers or null" in capsys.readouterr().err
    assert main(["audit", "data", "--train", train]) == 2
    assert "give --eval FILE..., or --run RUN" in capsys.readouterr().err
