"""``trajkit envs eval``: pass rates with standard errors (against the hand-derived worked example), and a real
run — the scripted policy behind the gateway, the shell agent in the sandbox — whose pass rates are what the
policy was built to do: solve hello-file, fail count-errors."""
import json
import math
import shutil

import pytest

from tests.envs.harbor.conftest import SHIPPED
from trajkit.cli.main import main
from trajkit.envs.harbor.evaluate import TaskScore, mean_se, summarize
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
    assert out["families"] == {"file": {"pass_rate": 1.0, "stderr": None, "n": 1},
                               "text": {"pass_rate": 0.0, "stderr": None, "n": 1}}
    rows = [json.loads(line) for line in (save / "hermes.jsonl").read_text().splitlines()]
    assert len(rows) == 4  # one conversation per trial
    solved = [r for r in rows if "Hello, Harbor!" in r["conversations"][1]["value"]]
    assert len(solved) == 2 and all("printf 'Hello, Harbor!" in r["conversations"][2]["value"] for r in solved)
    assert main(["traces", "stats", str(save / "hermes.jsonl")]) == 0
