"""``trajkit envs check`` and the trials under it: every shipped task scores Oracle 1 / NOP 0; every broken task
is flagged with its own reason; reward files are read as Harbor reads them."""
import json
import math
import shutil

import pytest

from tests.envs.harbor.conftest import BROKEN, SHIPPED
from trajkit.cli.main import main
from trajkit.envs.harbor.check import check_tasks
from trajkit.envs.harbor.task import load_task
from trajkit.envs.harbor.trial import AGENTS, AgentResult, RewardError, parse_reward, run_trial

EXPECTED = {"bad-toml": "invalid", "nan-reward": "no reward", "needs-network": "needs network",
            "no-reward-file": "no reward", "reward-outside": "reward outside /logs/verifier",
            "slow-verifier": "timeout", "vacuous": "vacuous test", "wrong-solution": "wrong solution"}


def test_every_shipped_task_scores_oracle_one_and_nop_zero(needs_sandbox, capsys):
    assert main(["envs", "check", str(SHIPPED), "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert len(rows) >= 8 and {r["verdict"] for r in rows} == {"ok"}
    assert all(r["oracle"] == 1.0 and r["nop"] == 0.0 for r in rows)
    phases = {k.split("/")[1] for r in rows for k in r["timings"]}
    assert phases == {"sandbox", "agent", "verifier", "stop"}


def test_every_broken_task_is_flagged_with_its_reason(needs_sandbox, capsys):
    rows = {r.task: r for r in check_tasks(BROKEN)}
    assert {name: r.verdict for name, r in rows.items()} == EXPECTED
    assert "field agent.timeout_sec" in rows["bad-toml"].detail
    assert "'Network is unreachable'" in rows["needs-network"].detail
    assert "[verifier] timeout_sec = 1 s" in rows["slow-verifier"].detail
    assert "key 'reward' must be a finite number" in rows["nan-reward"].detail
    assert (rows["vacuous"].oracle, rows["vacuous"].nop) == (1.0, 1.0)
    assert main(["envs", "check", str(BROKEN / "vacuous")]) == 1
    out = capsys.readouterr().out
    assert "vacuous test" in out and out.rstrip().endswith("0 of 1 tasks ok; 1 failed")
    assert main(["envs", "check", str(BROKEN), "--strict"]) == 2
    assert "bad-toml/task.toml: field agent.timeout_sec" in capsys.readouterr().err


def test_a_planted_reward_is_wiped_before_the_verifier_runs(needs_sandbox, tmp_path):
    """An agent that writes reward.txt (and a fake /tests/test.sh) itself gets the real verifier's reward."""
    task = load_task(shutil.copytree(BROKEN / "wrong-solution", tmp_path / "t"))

    def cheat(task, box):
        return AgentResult([box.exec("echo 1 > /logs/verifier/reward.txt; mkdir -p /tests; "
                                     "echo 'echo 1 > /logs/verifier/reward.txt' > /tests/test.sh", timeout_s=30)])
    result = run_trial(task, cheat, "cheat")
    assert result.ok and result.reward == 0.0


def test_an_agent_past_its_timeout_fails_the_trial_with_reward_zero(needs_sandbox, tmp_path):
    task_dir = shutil.copytree(SHIPPED / "hello-file", tmp_path / "t")
    toml = task_dir / "task.toml"
    toml.write_text(toml.read_text().replace("[agent]\ntimeout_sec = 60.0", "[agent]\ntimeout_sec = 0.5"))
    (task_dir / "solution" / "solve.sh").write_text("bomb() { bomb | bomb & }; bomb; sleep 60\n")
    result = run_trial(load_task(task_dir), AGENTS["oracle"], "oracle")
    assert (result.reward, result.failed_phase) == (0.0, "agent")
    assert result.error == "task hello-file: the agent ran past [agent] timeout_sec = 0.5 s"
    assert "verifier" not in result.seconds and result.seconds["agent"] < 30


@pytest.mark.parametrize("text, name, message", [
    ("", "reward.txt", "is empty"),
    ("nan", "reward.txt", "must hold a finite number"),
    ("1 2", "reward.txt", "must hold one number"),
    ('{"reward": Infinity}', "reward.json", "key 'reward' must be a finite number"),
    ('{"reward": true}', "reward.json", "key 'reward' must be a finite number"),
    ("[1]", "reward.json", "must be a non-empty object of numbers"),
    ("{}", "reward.json", "must be a non-empty object of numbers"),
    ("{reward: 1}", "reward.json", "is not JSON"),
])
def test_unusable_reward_files_are_errors_naming_the_task(text, name, message):
    with pytest.raises(RewardError, match=f"^task demo: /logs/verifier/{name}.*{message}"):
        parse_reward(text, name, "demo")


def test_reward_files_are_read_as_harbor_reads_them():
    assert parse_reward('{"reward": 0.5, "style": 1}', "reward.json") == {"reward": 0.5, "style": 1.0}
    assert parse_reward("-0.25\n", "reward.txt") == {"reward": -0.25}
    assert math.isclose(parse_reward("1e-3", "reward.txt")["reward"], 0.001)


def test_the_readmes_envs_check_commands_run(needs_sandbox, capsys):
    import re
    import shlex
    from pathlib import Path

    readme = (Path(__file__).resolve().parents[3] / "README.md").read_text()
    block = re.search(r"## Harbor environments.*?```bash\n(.*?)```", readme, re.S).group(1)
    commands = [line.split("#")[0].strip() for line in block.splitlines() if line.startswith("trajkit envs")]
    assert len(commands) == 2
    codes = [main(shlex.split(c)[1:] + ["--jobs", "4"]) for c in commands]
    assert codes == [0, 1]  # the shipped tasks pass, the broken ones fail
    capsys.readouterr()
