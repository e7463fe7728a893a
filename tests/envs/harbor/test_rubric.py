"""Polar's rubric reward: hand-derived values, the judge served by the gateway (a scripted model that gives the
expected run SCORE 4), and the outcome fallback whenever the judge fails."""
import json

import pytest

from tests.envs.harbor.conftest import JUDGE_REPLY, SHELL_OUTPUT, SHIPPED
from trajkit.engine import Engine
from trajkit.envs.harbor.rubric import ChatModel, parse_score, polar_reward, rubric_reward
from trajkit.envs.harbor.task import load_task
from trajkit.gateway import Gateway, GatewayConfig, running


@pytest.mark.parametrize("outcome, score, reward", [(1.0, 5.0, 1.2), (1.0, -5.0, 0.8), (0.0, 2.5, 0.1),
                                                    (0.5, 0.0, 0.5), (1.0, None, 1.0)])
def test_polar_formula(outcome, score, reward):
    assert polar_reward(outcome, score) == pytest.approx(reward, abs=1e-12)


def test_the_score_is_the_last_in_range_score_line():
    assert parse_score("SCORE: 1\non reflection\nSCORE: -2.5") == -2.5
    assert parse_score("SCORE: 5.5") is None and parse_score("score 3") is None and parse_score("") is None


@pytest.fixture
def judge_url(scripted_policy):
    model, tokenizer = scripted_policy
    gateway = Gateway(Engine(model), tokenizer, GatewayConfig(model_name="judge", default_max_tokens=64))
    with running(gateway) as url:
        yield url
    gateway.close()


def test_a_judge_behind_the_gateway_scores_the_run(judge_url):
    task = load_task(SHIPPED / "hello-file")
    result = rubric_reward(task, 1.0, SHELL_OUTPUT, ChatModel(judge_url))
    assert (result.score, result.fallback, result.outcome) == (4.0, None, 1.0)
    assert result.reward == pytest.approx(1.0 + 0.2 * 4 / 5)
    assert parse_score(JUDGE_REPLY) == 4.0


def test_the_outcome_stands_when_the_judge_fails(judge_url, tmp_path):
    task = load_task(SHIPPED / "hello-file")
    unreachable = rubric_reward(task, 1.0, SHELL_OUTPUT, ChatModel("http://127.0.0.1:9/v1", timeout_s=2))
    assert (unreachable.reward, unreachable.score) == (1.0, None) and "the judge failed: ConnectError" in unreachable.fallback
    from trajkit.models.spec import TinySpec, build_model
    from trajkit.models.tokenizer import byte_tokenizer

    babbler = Gateway(Engine(build_model(TinySpec(vocab_size=259, hidden_size=32, max_positions=4096), seed=0)),
                      byte_tokenizer(), GatewayConfig(model_name="judge", default_max_tokens=6))
    with running(babbler) as url:  # six bytes cannot hold "SCORE: n"
        babble = rubric_reward(task, 1.0, SHELL_OUTPUT, ChatModel(url))
    babbler.close()
    assert (babble.reward, babble.score) == (1.0, None) and babble.fallback.startswith("no SCORE in [-5, 5]")
    no_rubric = rubric_reward(load_task(SHIPPED / "python-fib"), 1.0, "", ChatModel(judge_url))
    assert (no_rubric.reward, no_rubric.fallback) == (1.0, "the task has no tests/rubric.md")
