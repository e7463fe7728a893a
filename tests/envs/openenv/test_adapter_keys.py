"""The OpenEnv default adapter's keys: ``task.openenv.action_field`` / ``task.openenv.observation_field`` (checked
against the
environment's schema, refused where nothing reads them), the one warning when an observation is rendered as
JSON (naming the environment and the fields it could show), and ``task.path`` on the import path before
``task.openenv.env`` is imported."""
import json
import logging
import sys
from typing import Any, Optional

import pytest

pytest.importorskip("openenv.core", reason="openenv-core is not installed (pip install -e '.[test]')")

from openenv.core.env_server.interfaces import Environment  # noqa: E402
from openenv.core.env_server.types import Action, Observation, State  # noqa: E402

from tests.rl.conftest import TINY  # noqa: E402
from trajkit.envs.openenv.episode import TextAdapter, run_episode  # noqa: E402
from trajkit.envs.registry import make_task  # noqa: E402
from trajkit.errors import ConfigError  # noqa: E402
from trajkit.models.tokenizer import byte_tokenizer  # noqa: E402
from trajkit.rl.config import load_config  # noqa: E402

TWO = "tests.envs.openenv.test_adapter_keys:TwoFieldEnv"
LOGGER = "trajkit.envs.openenv"


class TwoFieldAction(Action):
    answer: str
    note: str = ""


class BoardObservation(Observation):
    board: str
    hint: str
    score: str


class TwoFieldEnv(Environment):
    """One step: reward 1 when the action's ``answer`` is "7"; an observation of three string fields, none of
    them a known text name (the default adapter falls back to JSON)."""

    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self):
        super().__init__()
        self._state = State(step_count=0)

    def reset(self, seed: Optional[int] = None, episode_id: Optional[str] = None, **kwargs: Any) -> BoardObservation:
        self._state = State(episode_id=episode_id, step_count=0)
        return BoardObservation(board="3 . 4", hint="add them", score="0")

    def step(self, action: TwoFieldAction, timeout_s: Optional[float] = None, **kwargs: Any) -> BoardObservation:
        self._state.step_count += 1
        return BoardObservation(board="", hint="", score="1", done=True, reward=float(action.answer == "7"))

    @property
    def state(self) -> State:
        return self._state


def _task(*keys: str):
    cfg = load_config(None, TINY + ["task.name=openenv", *keys])
    return make_task(cfg.task, 0, byte_tokenizer())


def test_two_string_fields_name_the_keys_that_exist():
    with pytest.raises(ConfigError, match=r"2 string fields \(answer, note\).*task\.openenv\.action_field=NAME.*"
                                          r"task\.openenv\.adapter"):
        _task(f"task.openenv.env={TWO}")
    with pytest.raises(ConfigError, match="task.openenv.action_field=nope: the action has no such field"):
        _task(f"task.openenv.env={TWO}", "task.openenv.action_field=nope")


def test_action_field_routes_the_reply_and_the_json_fallback_is_said_once(caplog):
    task = _task(f"task.openenv.env={TWO}", "task.openenv.action_field=answer")
    assert task.adapter.action_field == "answer"
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        first = task.prompt(0).source[-1]["content"]
        task.prompt(1)
        ep = run_episode(task.connect, task.adapter, lambda messages: "7", 0, 3)
    assert first == json.dumps({"board": "3 . 4", "hint": "add them", "score": "0"}, sort_keys=True)
    assert ep.reward == 1.0 and ep.error is None  # the reply went into `answer`
    said = [r.getMessage() for r in caplog.records if r.name == LOGGER]
    assert len(said) == 1, said
    assert TWO in said[0] and "board, hint, score" in said[0] and "task.openenv.observation_field=board" in said[0]


def test_observation_field_picks_the_user_turn(caplog):
    task = _task(f"task.openenv.env={TWO}", "task.openenv.action_field=answer",
                 "task.openenv.observation_field=hint")
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        assert task.prompt(0).source[-1]["content"] == "add them"
    assert not [r for r in caplog.records if r.name == LOGGER]
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        adapter = TextAdapter(observation_field="missing", env="E")
        assert adapter.render({"a": "x"}) == "" and adapter.render({"a": "y"}) == ""
    said = [r.getMessage() for r in caplog.records if r.name == LOGGER]
    assert len(said) == 1 and "no field 'missing'" in said[0] and "fields: a" in said[0]


def test_the_adapter_keys_are_refused_with_an_adapter_and_unread_elsewhere(caplog):
    with pytest.raises(ConfigError, match="task.openenv.observation_field configures the default adapter"):
        load_config(None, TINY + ["task.name=openenv", f"task.openenv.env={TWO}",
                                  "task.openenv.observation_field=hint",
                                  "task.openenv.adapter=trajkit.envs.openenv.episode:TextAdapter"])
    # another kind's section (a config file's, its task.name switched on the command line) reaches nothing
    with caplog.at_level(logging.WARNING, logger="trajkit.config"):
        cfg = load_config(None, TINY + ["task.openenv.action_field=answer"])
    assert cfg.task.name == "copy" and not hasattr(cfg.task.options, "action_field")
    said = [r.getMessage() for r in caplog.records if r.name == "trajkit.config"]
    assert [line for line in said if line.startswith("task.openenv")] == [
        "task.openenv is the section of task.name=openenv, but task.name=copy; ignored"]


def test_task_path_puts_a_folder_on_the_import_path(tmp_path, monkeypatch):
    monkeypatch.setattr(sys, "path", list(sys.path))
    name = "trajkit_test_openenv_path_env"
    (tmp_path / f"{name}.py").write_text("from trajkit.envs.openenv.examples import SumEnv as PathEnv\n")
    monkeypatch.delitem(sys.modules, name, raising=False)
    with pytest.raises(ConfigError, match=f"task.openenv.env: cannot import module '{name}'"):
        _task(f"task.openenv.env={name}:PathEnv")
    task = _task(f"task.openenv.env={name}:PathEnv", f"task.path={tmp_path}")
    assert task.adapter.action_field == "message"
    assert "What is" in task.prompt(0).source[-1]["content"]
    monkeypatch.delitem(sys.modules, name, raising=False)
    with pytest.raises(ConfigError, match="task.path=.*not a folder"):
        _task(f"task.openenv.env={name}:PathEnv", f"task.path={tmp_path / 'absent'}")
