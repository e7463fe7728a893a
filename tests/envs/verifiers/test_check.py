"""``envs check --verifiers``: verifiers' own episodes (real verifiers 0.4.0 in its venv, the ``null`` harness in
the subprocess runtime) with scripted policies as the model. Each verdict is tested against a taskset built to
fail it (``tests/envs/verifiers/tasksets``), and the example ``vf-sum`` passes with every probe blocked."""
import json
from pathlib import Path

import pytest

from tests.envs.verifiers.conftest import needs_verifiers, vf_driver  # noqa: F401 (fixtures)
from trajkit.envs.verifiers.check import check_taskset, play
from trajkit.envs.verifiers.examples import sum_solver

TASKSETS = str(Path(__file__).with_name("tasksets"))
SOLVER = "trajkit.envs.verifiers.examples:sum_solver"


def wrong_solver(messages):
    return str(int(sum_solver(messages)) + 1)


@pytest.mark.parametrize("taskset, reference, verdict", [
    ("vf-sum", sum_solver, "ok"),
    ("vf-lenient", sum_solver, "hackable: shotgun"),
    ("vf-gullible", sum_solver, "hackable: claim"),
    ("vf-free", sum_solver, "vacuous"),
    ("vf-crash", sum_solver, "env error"),
    ("vf-sum", wrong_solver, "wrong solution"),
])
def test_envs_check_verdicts(taskset, reference, verdict, needs_verifiers, vf_driver):
    # each broken taskset fails on its first task; the sound one is played on two
    row = check_taskset(taskset, reference, episodes=2 if verdict == "ok" else 1,
                        adversarial=verdict.startswith(("ok", "hackable")), jobs=2, driver=vf_driver)
    assert row.verdict == verdict, row
    if verdict == "ok":
        assert (row.reference, row.nop, row.episodes) == (1.0, 0.0, 2)
        assert row.hacks == {"echo": "blocked", "shotgun": "blocked", "claim": "blocked", "overlong": "blocked"}
    if verdict == "env error":
        assert "grader crashed" in row.detail


def test_the_reply_the_rubric_scored_is_the_policys(needs_verifiers, vf_driver):
    """The scripted reply reaches the rubric unchanged through verifiers' harness, interception and client, and
    the rubric is the taskset's (a reply ending in the sum pays, whatever precedes it)."""
    env = {"taskset": "vf-sum", "config": {"size": 3}}
    played = play(vf_driver, env, lambda m: "2 + 2 = 4, so 99", range(3), "fixed", jobs=3)
    assert [p.replies for p in played] == [["2 + 2 = 4, so 99"]] * 3
    assert [p.reward for p in played] == [0.0, 0.0, 0.0] and all(p.error is None for p in played)
    solved = play(vf_driver, env, lambda m: f"a sum: {sum_solver(m)}", range(3), "solved", jobs=3)
    assert [p.reward for p in solved] == [1.0, 1.0, 1.0]
    tasks = vf_driver.request("tasks", env=env, start=0, count=10)
    assert tasks["size"] == 3 and tasks["tasks"][0] == {"idx": 0, "prompt": "What is 7 + 7?",
                                                          "system_prompt": "Answer with the number only."}


def test_the_cli_checks_a_verifiers_taskset(capsys, needs_verifiers):
    from trajkit.cli.main import main

    assert main(["envs", "check", "--verifiers", "vf-free", "--path", TASKSETS, "--reference", SOLVER,
                 "--episodes", "1", "--env-config", '{"size": 4}', "--json"]) == 1
    [row] = json.loads(capsys.readouterr().out)
    assert (row["verdict"], row["reference"], row["nop"], row["episodes"]) == ("vacuous", 1.0, 1.0, 1)
    assert main(["envs", "check", "--verifiers", "vf-sum"]) == 2
    assert "--reference" in capsys.readouterr().err


def test_a_check_runs_with_no_network_at_all(needs_verifiers):
    """verifiers' harness script is installed by uv at run time: from the local index only. The whole check (the
    driver, uv, the harness, the policy server) runs in a network namespace with nothing but loopback."""
    import os
    import shlex
    import shutil
    import subprocess
    import sys

    if os.geteuid() != 0 or shutil.which("unshare") is None or shutil.which("ip") is None:
        pytest.skip("needs root, unshare and ip (a private network namespace)")
    argv = ["envs", "check", "--verifiers", "vf-sum", "--reference", SOLVER, "--episodes", "1", "--json"]
    cli = f"from trajkit.cli.main import main; raise SystemExit(main({argv!r}))"
    cmd = f"ip link set lo up && exec {sys.executable} -c {shlex.quote(cli)}"
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[3])}
    proc = subprocess.run(["unshare", "--net", "sh", "-c", cmd], capture_output=True, text=True, timeout=600,
                          env=env, check=False)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    [row] = json.loads(proc.stdout)
    assert (row["verdict"], row["reference"], row["nop"]) == ("ok", 1.0, 0.0)
