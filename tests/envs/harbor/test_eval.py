"""``trajkit envs eval``: pass rates with standard errors (against the hand-derived worked example), and a real
run — the scripted policy behind the gateway, the shell agent in the sandbox — whose pass rates are what the
policy was built to do: solve hello-file, fail count-errors."""
import itertools
import json
import math
import shutil

import pytest

from tests.envs.harbor.conftest import SHIPPED
from trajkit.cli.main import main
from trajkit.envs.harbor.evaluate import TaskScore, mean_se, pass_at_k, pass_ks, summarize
from trajkit.errors import ConfigError


def test_rates_match_the_worked_example():
    report = summarize([TaskScore("a", "f", [1.0, 0.0]), TaskScore("b", "f", [1.0, 1.0]),
                        TaskScore("c", "g", [0.0, 0.0])], samples=2)
    out = report.to_json()
    assert out["pass_rate"] == 0.5 and out["stderr"] == pytest.approx(math.sqrt(0.25 / 3))
    assert out["families"] == {"f": {"pass_rate": 0.75, "stderr": 0.25, "n": 2},
                               "g": {"pass_rate": 0.0, "stderr": None, "n": 1}}
    assert [(t["task"], t["pass_rate"], t["stderr"]) for t in out["tasks"]] == [("a", 0.5, 0.5), ("b", 1.0, 0.0),
                                                                               ("c", 0.0, 0.0)]
    assert mean_se([1.0]).stderr is None


def test_pass_at_k_is_the_share_of_k_subsets_holding_a_solution():
    """The estimator against its definition: every k-subset of n samples (c solved) enumerated."""
    for n in range(1, 7):
        for c in range(n + 1):
            outcomes = [1] * c + [0] * (n - c)
            for k in range(1, n + 1):
                subsets = list(itertools.combinations(outcomes, k))
                assert pass_at_k(n, c, k) == pytest.approx(sum(any(s) for s in subsets) / len(subsets), abs=1e-12)
    with pytest.raises(ValueError, match="1 <= k <= n"):
        pass_at_k(4, 1, 5)


def test_pass_at_k_of_a_report_matches_the_worked_example():
    """Module docstring: [1, 0, 0, 1] gives pass@1 0.5, pass@2 5/6, pass@4 1; with a never- and an always-solved
    task the folder's pass@k is the mean over the three tasks; a partial score counts only from --pass-reward."""
    tasks = [TaskScore("a", "f", [1.0, 0.0, 0.0, 1.0]), TaskScore("b", "f", [0.0, 0.5, 0.0, 0.0]),
             TaskScore("c", "g", [1.0, 1.0, 1.0, 1.0])]
    out = summarize(tasks, samples=4).to_json()
    assert list(out["pass_at_k"]) == ["1", "2", "4"]
    assert out["pass_at_k"]["1"]["pass_rate"] == pytest.approx(1.5 / 3)
    assert out["pass_at_k"]["2"]["pass_rate"] == pytest.approx((5 / 6 + 0 + 1) / 3)
    assert out["pass_at_k"]["2"]["stderr"] == pytest.approx(mean_se([5 / 6, 0.0, 1.0]).stderr)
    assert out["pass_at_k"]["4"]["pass_rate"] == pytest.approx(2 / 3)
    lenient = summarize(tasks, samples=4)
    lenient.pass_reward = 0.5
    assert lenient.to_json()["pass_at_k"]["4"]["pass_rate"] == pytest.approx(1.0)  # b's 0.5 now solves it
    assert out["pass_rate"] == pytest.approx((0.5 + 0.125 + 1) / 3)  # the pass rate stays the mean score
    assert pass_ks(1) == [] and pass_ks(8) == [1, 2, 4, 8] and pass_ks(6) == [1, 2, 4, 6]
    assert "pass_at_k" in summarize(tasks[:1], samples=1).to_json()


def test_bad_flags_are_refused_before_any_model_loads(tmp_path):
    from trajkit.envs.harbor.evaluate import ModelEval

    with pytest.raises(ConfigError, match="samples"):
        ModelEval(samples=0)
    assert main(["envs", "eval", str(tmp_path), "--model", str(tmp_path)]) == 2  # no task here


def test_the_scripted_policy_passes_the_task_it_solves_and_no_other(needs_sandbox, policy_folder, tmp_path, capsys):
    tasks = tmp_path / "tasks"
    for name in ("hello-file", "count-errors"):
        shutil.copytree(SHIPPED / name, tasks / name)
    save = tmp_path / "saved"
    code = main(["envs", "eval", str(tasks), "--model", str(policy_folder), "--samples", "2", "--json",
                 "--save-dir", str(save), "--jobs", "2"])
    out = json.loads(capsys.readouterr().out)
    assert code == 0
    assert {t["task"]: t["scores"] for t in out["tasks"]} == {"count-errors": [0.0, 0.0], "hello-file": [1.0, 1.0]}
    assert out["pass_rate"] == 0.5 and out["stderr"] == 0.5 and out["errors"] == 0
    assert {k: r["pass_rate"] for k, r in out["pass_at_k"].items()} == {"1": 0.5, "2": 0.5}
    assert out["families"] == {"file": {"pass_rate": 1.0, "stderr": None, "n": 1},
                               "text": {"pass_rate": 0.0, "stderr": None, "n": 1}}
    rows = [json.loads(line) for line in (save / "hermes.jsonl").read_text().splitlines()]
    assert len(rows) == 4  # one conversation per trial
    solved = [r for r in rows if "Hello, Harbor!" in r["conversations"][1]["value"]]
    assert len(solved) == 2 and all("printf 'Hello, Harbor!" in r["conversations"][2]["value"] for r in solved)
    assert main(["traces", "stats", str(save / "hermes.jsonl")]) == 0
