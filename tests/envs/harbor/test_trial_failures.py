"""Failing loudly does not pay: a failure the agent or the task can cause scores the task's minimum (not masked)
with its ``cause``; only an infrastructure failure is masked (None) and counted per step (``env/failed``);
``run_trial`` raises on nothing a task or an agent can leave, a reward file of any shape included."""
import json

import pytest

from tests.envs.harbor.test_verifier_state import command_agent, make_task
from trajkit.envs.harbor.rltask import trial_reward
from trajkit.envs.harbor.trial import AGENTS, run_trial

ANSWER = '[ "$(cat /app/answer.txt)" = 42 ] && echo 1 > /logs/verifier/reward.txt || echo 0 > /logs/verifier/reward.txt'


def masked(result) -> float | None:
    """What RL trains on for this trial: ``trial_reward`` of its record, as the episode stores it."""
    return trial_reward([""], [json.dumps(result.to_dict())])[0]


@pytest.mark.parametrize("case", ["agent-timeout", "fifo-answer", "agent-raises", "disk-full"])
def test_agent_caused_failures_score_zero_and_are_not_masked(needs_sandbox, tmp_path, case):
    task = make_task(tmp_path, "t", ANSWER if case != "fifo-answer" else
                     'read -r a < /app/answer.txt; [ "$a" = 42 ] && echo 1 > /logs/verifier/reward.txt', "true")
    if case == "agent-timeout":
        task.agent.timeout_sec = 0.5
        agent = command_agent("echo 41 > /app/answer.txt; sleep 30")
    elif case == "fifo-answer":
        task.verifier.timeout_sec = 1.0
        agent = command_agent("mkfifo /app/answer.txt")
    elif case == "disk-full":  # the trial's tmpfs (storage_mb = 64) full: /tests cannot be uploaded
        agent = command_agent("echo 41 > /app/answer.txt; head -c 80M /dev/zero > /app/fill")
    else:
        def agent(task, box):
            box.exec("echo 41 > /app/answer.txt", timeout_s=10.0)
            return json.loads("the harness's summary line, shaped by the policy")
    result = run_trial(task, agent, case)
    assert result.error is not None and result.cause == "agent", result.to_dict()
    assert result.reward == 0.0 and masked(result) == 0.0
    if case == "fifo-answer":
        assert result.failed_phase == "verifier" and "timeout_sec = 1 s" in result.error


REWARDS = {  # what test.sh leaves in /logs/verifier -> the start of the error
    "none": ("true", "tests/test.sh wrote no /logs/verifier/reward.json or reward.txt"),
    "malformed": ("echo '{reward: 1}' > /logs/verifier/reward.json", "/logs/verifier/reward.json is not JSON"),
    "5000-digit int": ("python3 -c \"print('{\\\"reward\\\": ' + '9' * 5000 + '}')\" > /logs/verifier/reward.json",
                       "/logs/verifier/reward.json is not JSON"),
    "400-digit int": ("python3 -c \"print('{\\\"reward\\\": ' + '9' * 400 + '}')\" > /logs/verifier/reward.json",
                      "/logs/verifier/reward.json: key 'reward' must be a finite number, got an integer of"),
    "deep nesting": ("python3 -c \"print('{\\\"reward\\\": ' + '[' * 20000 + ']' * 20000 + '}')\" "
                     "> /logs/verifier/reward.json", "/logs/verifier/reward.json is not JSON"),
    "1e308": ("echo 1e308 > /logs/verifier/reward.txt", "/logs/verifier/reward.txt: key 'reward' = 1e+308 is outside"),
    "-1e308": ("echo '{\"reward\": -1e308}' > /logs/verifier/reward.json", "key 'reward' = -1e+308 is outside"),
    "nan": ("echo nan > /logs/verifier/reward.txt", "/logs/verifier/reward.txt: must hold a finite number"),
    "1e400": ("echo '{\"reward\": 1e400}' > /logs/verifier/reward.json", "key 'reward' must be a finite number"),
    "out of range": ("echo 1.5 > /logs/verifier/reward.txt", "[verifier] reward_range = [0, 1]"),
    "fifo": ("mkfifo /logs/verifier/reward.txt", "tests/test.sh wrote no"),
    "folder": ("mkdir /logs/verifier/reward.json", "tests/test.sh wrote no"),
    "huge": ("head -c 2000000 /dev/zero | tr '\\0' 1 > /logs/verifier/reward.txt", "reward.txt is larger than 65536 bytes"),
}


@pytest.mark.parametrize("case", sorted(REWARDS))
def test_an_unusable_reward_file_is_the_tasks_error_never_a_raise(needs_sandbox, tmp_path, case):
    script, message = REWARDS[case]
    result = run_trial(make_task(tmp_path, "r", script, "true"), AGENTS["nop"], "nop")
    assert (result.cause, result.failed_phase, result.reward, result.rewards) == ("task", "reward", 0.0, {})
    assert result.error.startswith("task r: ") and message in result.error, result.error
    assert masked(result) == 0.0


def test_a_declared_reward_range_admits_its_rewards_and_rejects_the_rest(needs_sandbox, tmp_path):
    task = make_task(tmp_path, "wide", "echo 1.5 > /logs/verifier/reward.txt", "true",
                     toml="reward_range = [0, 2]\n")
    assert task.verifier.reward_range == (0.0, 2.0)
    assert run_trial(task, AGENTS["nop"], "nop").rewards == {"reward": 1.5}
    task = make_task(tmp_path / "b", "wide", "echo 2.5 > /logs/verifier/reward.txt", "true",
                     toml="reward_range = [0, 2]\n")
    assert run_trial(task, AGENTS["nop"], "nop").cause == "task"


def test_a_sandbox_that_cannot_start_is_masked_and_counted(tmp_path, monkeypatch):
    from trajkit.envs.sandbox.base import SandboxError
    from trajkit.envs.sandbox.namespace import NamespaceSandbox
    from trajkit.envs.sample import Sample
    from trajkit.rl.config import load_config
    from trajkit.rl.scoring import score

    def refuse(self):
        raise SandboxError("namespace sandbox: no free slot")
    monkeypatch.setattr(NamespaceSandbox, "start", refuse)
    result = run_trial(make_task(tmp_path, "i", ANSWER, "true"), AGENTS["nop"], "nop")
    assert (result.cause, result.failed_phase) == ("infra", "sandbox")
    assert result.error == "task i: namespace sandbox: no free slot"
    assert masked(result) is None
    records = [json.dumps(result.to_dict()), json.dumps({**result.to_dict(), "cause": "agent", "reward": 0.0})]
    samples = [Sample([1], [5], [-0.1], [1], metadata={"columns": {"harness_output": r}}) for r in records]
    rewards = [float("nan") if r is None else r for r in trial_reward(["", ""], records)]
    _, metrics = score(samples, rewards, load_config(None, ["rollout.group_size=2"]))
    assert (metrics["reward/unscorable"], metrics["env/failed"]) == (0.5, 0.5)


@pytest.mark.parametrize("bounds", ["[1, 0]", "[0]", '["0", 1]', "[0, inf]", "[true, 1]"])
def test_a_reward_range_that_is_not_two_finite_ordered_numbers_makes_the_task_invalid(tmp_path, bounds):
    from trajkit.envs.harbor.task import TaskError

    with pytest.raises(TaskError, match=r"verifier\.reward_range.*must be \[low, high\] with finite low < high"):
        make_task(tmp_path, "bad", "true", "true", toml=f"reward_range = {bounds}\n")
