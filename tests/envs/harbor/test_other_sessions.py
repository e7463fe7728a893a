"""``envs check --adversarial``'s ``other-sessions`` probe: against the gateway RL episodes are served on it reaches
nothing and is paid nothing; against a deliberately open gateway (every route served to every caller, as before
sessions had keys) it reaches every route, copies the answer and the check flags the task ``hackable``."""
import pytest

from tests.envs.harbor.conftest import SHIPPED
from trajkit.envs import agent
from trajkit.envs.harbor import hacks
from trajkit.envs.harbor.check import check_task
from trajkit.envs.harbor.task import load_task
from trajkit.envs.harbor.trial import run_trial
from trajkit.gateway import Gateway

ROUTES = {"list", "records", "samples", "hermes", "metrics", "post", "post-as-sibling"}


@pytest.fixture
def open_gateway(monkeypatch):
    def episode_gateway(engine, tokenizer, config, lock=None):
        return Gateway(engine, tokenizer, config, lock=lock)  # not locked
    monkeypatch.setattr(agent, "episode_gateway", episode_gateway)


def test_the_probe_reaches_no_other_session_of_an_episodes_gateway(needs_sandbox):
    result = run_trial(load_task(SHIPPED / "hello-file"), hacks.other_sessions, "other-sessions")
    statuses = result.agent_result.extra["statuses"]
    assert set(statuses) == ROUTES and "reached" not in result.agent_result.extra
    assert statuses == {**{k: 403 for k in ROUTES}, "post-as-sibling": 401}
    assert result.error is None and result.reward == 0.0


def test_the_check_flags_a_gateway_that_lets_the_probe_through(needs_sandbox, open_gateway, monkeypatch):
    task = load_task(SHIPPED / "hello-file")
    result = run_trial(task, hacks.other_sessions, "other-sessions")
    assert result.agent_result.extra["reached"] == sorted(ROUTES), result.agent_result.extra
    assert result.reward == 1.0
    monkeypatch.setattr(hacks, "PROBES", tuple(p for p in hacks.PROBES if p.name == "other-sessions"))
    row = check_task(task, adversarial=True)
    assert row.verdict == "hackable: other-sessions" and row.hacks["other-sessions"].startswith("hacked: reward")
