"""``task.KIND.gateway_max_batch`` / ``task.KIND.gateway_prefix_cache`` for the kinds whose episodes run through
the gateway (agent, harbor, openenv, verifiers): the gateway's own defaults, range-checked, and handed to the
environment each kind builds (the agent kind's behaviour through a served step: tests/envs/test_agent.py)."""
import dataclasses
from pathlib import Path

import pytest

from tests.rl.conftest import TINY
from trajkit.envs import registry
from trajkit.errors import ConfigError
from trajkit.gateway import GatewayConfig
from trajkit.models.tokenizer import byte_tokenizer
from trajkit.rl.config import load_config

SHIPPED = Path(registry.__file__).with_name("tasks")  # the Harbor tasks trajkit ships
KNOBS = ("gateway_max_batch", "gateway_prefix_cache")


def test_the_defaults_are_the_gateways_own():
    defaults = {f.name: f.default for f in dataclasses.fields(GatewayConfig)}
    for kind in ("agent", "harbor", "openenv", "verifiers"):
        section = {f.name: f.default for f in dataclasses.fields(registry.OPTIONS[kind])}
        assert {k: section[k] for k in KNOBS} == {"gateway_max_batch": defaults["max_batch"],
                                                   "gateway_prefix_cache": defaults["prefix_cache"]}, kind


def test_a_batch_of_no_rows_is_refused_naming_the_key():
    with pytest.raises(ConfigError, match="task.harbor.gateway_max_batch must be >= 1, got 0"):
        load_config(None, TINY + ["task.name=harbor", f"task.path={SHIPPED}", "task.harbor.gateway_max_batch=0"])


def _built(*keys: str):
    cfg = load_config(None, TINY + list(keys))
    return registry.make_task(cfg.task, 0, byte_tokenizer())


def _served_as(task) -> tuple[int, bool]:
    return task.env.config.max_batch, task.env.config.prefix_cache


def test_a_harbor_task_serves_its_trials_with_the_configs_gateway():
    assert _served_as(_built("task.name=harbor", f"task.path={SHIPPED}")) == (64, True)
    task = _built("task.name=harbor", f"task.path={SHIPPED}", "task.harbor.gateway_max_batch=1",
                  "task.harbor.gateway_prefix_cache=false")
    assert _served_as(task) == (1, False)


def test_an_openenv_task_serves_its_episodes_with_the_configs_gateway():
    pytest.importorskip("openenv.core", reason="openenv-core is not installed (pip install -e '.[test]')")
    env = "task.openenv.env=tests.envs.openenv.envs:LengthEnv"
    assert _served_as(_built("task.name=openenv", env)) == (64, True)
    task = _built("task.name=openenv", env, "task.openenv.gateway_max_batch=3",
                  "task.openenv.gateway_prefix_cache=false")
    assert _served_as(task) == (3, False)


def test_a_verifiers_task_is_built_with_the_configs_gateway(monkeypatch):
    """The taskset itself needs the verifiers venv (tests/envs/verifiers); here only what ``make_task`` hands
    the task, the environment being built by the same ``GatewayEnv`` as the others'."""
    from trajkit.envs.verifiers import rltask

    built = {}
    monkeypatch.setattr(rltask, "VerifiersTask", lambda *args, **kwargs: built.update(kwargs))
    _built("task.name=verifiers", "task.verifiers.env=vf-sum", "task.verifiers.gateway_max_batch=2",
           "task.verifiers.gateway_prefix_cache=false")
    assert (built["gateway"].max_batch, built["gateway"].prefix_cache) == (2, False)
