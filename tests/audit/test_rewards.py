"""Reward-hacking checks: a reward that pays an empty answer (or an echo, or a bare format) is caught by
the null probes on a real task, its clean twin passes; a run whose train reward rises while held-out
falls is flagged; a log-prob mismatch above NeMo RL's 1.05 fails."""
from __future__ import annotations

import math

import pytest

from trajkit.audit.rewards import (kendall, mismatch_check, null_probe_check, probe_prompt,
                                   reward_divergence_check, run_checks)
from trajkit.cli.main import main
from trajkit.errors import InputError
from trajkit.models.tokenizer import byte_tokenizer
from trajkit.envs.rewards import RewardSet
from trajkit.envs.single_turn import StringTask, exact_match


def contains_answer(completions, answer, **kwargs):
    """A buggy reward: 'the answer appears in the completion' -- the empty string is in every answer."""
    return [float(str(c).strip() in a or a in str(c)) for c, a in zip(completions, answer)]


def think_format(completions, **kwargs):
    """A format reward that pays for the tags alone."""
    return [0.5 * float("<think>" in c and "</think>" in c) for c in completions]


TOK = byte_tokenizer()


def _probe(funcs, op="copy", n=3):
    task = StringTask(op, 0, TOK)
    prompts = [probe_prompt(f"{s} prompt {i}", task.prompt(i, split=s)) for s in ("train", "eval") for i in range(n)]
    return null_probe_check(RewardSet.build(funcs), prompts, lambda t: TOK.encode(t, add_special_tokens=False))


def test_exact_match_pays_no_null_completion():
    check = _probe([exact_match])
    assert (check.verdict, check.statistic, check.items) == ("PASS", 0, [])
    assert "0 of 36 (function, null completion) scores" in check.detail  # 6 prompts x 6 probes x 1 function


def test_a_reward_that_pays_the_empty_answer_fails():
    check = _probe([exact_match, contains_answer])
    assert check.verdict == "FAIL" and check.statistic == 1.0
    assert "contains_answer pays 1 to the empty completion of train prompt 0" in check.items
    # the copy task's prompt "copy WORD=" holds its answer, so echoing the prompt is paid too
    assert "contains_answer pays 1 to the echo completion of eval prompt 2" in check.items
    assert not any(i.startswith("exact_match") for i in check.items)


def test_a_format_only_reward_fails_on_the_think_skeleton():
    check = _probe([think_format], op="rev", n=1)
    assert check.verdict == "FAIL"
    assert check.items == ["think_format pays 0.5 to the format:think completion of train prompt 0",
                           "think_format pays 0.5 to the format:think completion of eval prompt 0"]


def test_kendall_by_hand():
    """n = 5, perfectly ordered: τ = 1 and the exact one-sided p is 1/5! = 1/120."""
    assert kendall([1, 2, 3, 4, 5], [1, 2, 3, 4, 5]) == pytest.approx((1.0, 1 / 120))
    tau, _ = kendall([1, 2, 3, 4, 5], [1, 3, 2, 4, 5])  # one discordant pair of 10: (9 - 1) / 10
    assert tau == pytest.approx(0.8)


def _rows(train, evals, every=10, mismatch=None):
    rows = [{"step": 0, "eval/reward": 0.5}]
    for step in range(1, every * len(evals) + 1):
        row = {"step": step, "reward/raw": train[(step - 1) // every]}
        if mismatch is not None:
            row["mismatch/mean_abs"] = mismatch(step)
        if step % every == 0:
            row["eval/reward"] = evals[step // every - 1]
        rows.append(row)
    return rows


def test_train_rising_while_held_out_falls_fails():
    rows = _rows([0.2, 0.3, 0.4, 0.5, 0.6], [0.50, 0.48, 0.45, 0.41, 0.40])
    c = reward_divergence_check("runs/a", rows)
    assert c.verdict == "FAIL" and c.statistic == pytest.approx(-1.0) and c.items == ["runs/a: steps 10-50"]


def test_both_rising_passes_and_a_weak_divergence_warns():
    assert reward_divergence_check("r", _rows([0.2, 0.3, 0.4, 0.5, 0.6], [0.5, 0.52, 0.55, 0.6, 0.61])).verdict == "PASS"
    weak = reward_divergence_check("r", _rows([0.2, 0.3, 0.25, 0.5, 0.6], [0.5, 0.45, 0.52, 0.47, 0.46]))
    assert weak.verdict == "WARN"  # τ_train +0.8 (p 0.042), τ_eval -0.2 (p 0.41): diverging, eval not significant
    assert weak.statistic == pytest.approx(-0.2)
    assert reward_divergence_check("r", _rows([0.2, 0.3], [0.5, 0.4])).statistic is None


def test_mismatch_history():
    flat = _rows([0.3] * 3, [0.5] * 3, mismatch=lambda s: 1e-7)
    assert mismatch_check("r", flat).verdict == "PASS"
    spike = _rows([0.3] * 3, [0.5] * 3, mismatch=lambda s: 0.06 if s == 17 else 1e-7)
    c = mismatch_check("r", spike)
    assert c.verdict == "FAIL" and c.items == [f"r: step 17 exp(mean_abs) {math.exp(0.06):.4f}"]
    rising = _rows([0.3] * 3, [0.5] * 3, mismatch=lambda s: 1e-6 * s)
    assert mismatch_check("r", rising).verdict == "WARN"
    alarm = [dict(r, **{"mismatch/alarm": 1.0}) if r["step"] == 5 else r for r in flat]
    assert mismatch_check("r", alarm).items == ["r: mismatch alarm at step 5"]
    assert mismatch_check("r", _rows([0.3], [0.5])) is None


def test_cli(tmp_path, capsys):
    assert main(["audit", "rewards", "copy", "--prompts", "2"]) == 2  # not a config name: one line, exit 2
    capsys.readouterr()
    assert main(["audit", "rewards", "rep", "--prompts", "2"]) == 0
    assert main(["audit", "rewards", "rep", "--prompts", "2", "rewards=[tests.audit.test_rewards:contains_answer]"]) == 1
    assert "contains_answer pays 1 to the empty completion" in capsys.readouterr().out
    import json

    folder = tmp_path / "run"
    folder.mkdir()
    rows = _rows([0.2, 0.3, 0.4, 0.5, 0.6], [0.50, 0.48, 0.45, 0.41, 0.40])
    (folder / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert [c.id for c in run_checks([str(folder)])] == ["run.reward_divergence"]
    assert main(["audit", "run", str(folder)]) == 1


def _bench_record(rows):
    """One seed of a ``trajkit bench train --out`` file holding the same metrics as ``rows``."""
    steps = [{k: v for k, v in r.items() if k not in ("step", "eval/reward")} for r in rows if r["step"] > 0]
    return {"steps": steps, "eval": [[r["step"], r["eval/reward"]] for r in rows if "eval/reward" in r]}


def test_run_checks_read_each_seed_of_a_bench_result_as_its_folder(tmp_path):
    import json

    seeds = [_rows([0.2, 0.3, 0.4, 0.5, 0.6], [0.5, 0.52, 0.55, 0.6, 0.61], mismatch=lambda s: 1e-7),
             _rows([0.2, 0.3, 0.4, 0.5, 0.6], [0.50, 0.48, 0.45, 0.41, 0.40], mismatch=lambda s: 0.06 if s == 17 else 0)]
    bench = tmp_path / "train.json"
    bench.write_text(json.dumps({"runs": [{"plain": _bench_record(r), "other": {}} for r in seeds]}))
    got = run_checks([f"{bench}:plain"])
    want = []
    for seed, rows in enumerate(seeds):
        name = f"{bench}:plain:seed{seed}"
        want += [reward_divergence_check(name, rows), mismatch_check(name, rows)]
    assert got == want and [c.verdict for c in got] == ["PASS", "PASS", "FAIL", "FAIL"]
    with pytest.raises(InputError, match="no arm 'nope' in seed 0"):
        run_checks([f"{bench}:nope"])
    with pytest.raises(InputError, match="neither a run folder nor FILE.json:ARM"):
        run_checks([str(tmp_path / "missing.json:plain")])
