"""Task registry: ``task.name`` in a config -> a factory ``(TaskConfig, seed, tokenizer) -> Task``, and the
``task`` section of a run's config (:class:`TaskConfig`), declared beside the factories that read it.

``TaskConfig`` validates its ``name`` against :data:`TASKS`, so a task registered here is accepted by
configs and CLI overrides with no other change; what a kind needs besides its name (a file, a command) is
its entry in :data:`NEEDS`. The agent, Harbor, OpenEnv and verifiers tasks import their modules only when chosen
(the gateway's server and Harbor's sandboxes load only then); a name written as an import path
(``my_pkg.tasks:make_task``) is imported instead, so a user's task needs no edit of this file.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Literal

from trajkit.config import Checked
from trajkit.errors import ConfigError
from trajkit.envs.data import DatasetTask
from trajkit.envs.imports import import_object, is_import_path
from trajkit.envs.base import Task
from trajkit.envs.single_turn import ChatArithmeticTask, StringTask
from trajkit.envs.toolenv import CalculatorTask

TaskFactory = Callable[[Any, int, Any], Task]  # (TaskConfig, seed, tokenizer) -> Task


def _string(op: str) -> TaskFactory:
    return lambda c, seed, tok: StringTask(op, seed, tok, c.min_len, c.max_len, c.alphabet)


TASKS: dict[str, TaskFactory | str] = {
    "copy": _string("copy"), "rev": _string("rev"), "sort": _string("sort"), "add": _string("add"),
    "rep": _string("rep"),
    "calculator": lambda c, seed, tok: CalculatorTask(seed, tok, c.max_len, c.max_turns, c.tool_timeout_s),
    "arith": lambda c, seed, tok: ChatArithmeticTask(seed, tok, c.min_len, c.max_len),
    "arith_explain": lambda c, seed, tok: ChatArithmeticTask(seed, tok, c.min_len, c.max_len, style="explain"),
    "dataset": lambda c, seed, tok: DatasetTask(c.path, tok, c.eval_path, seed=seed, eval_fraction=c.eval_fraction,
                                                strict=c.strict, shuffle=c.shuffle),
    "agent": lambda c, seed, tok: _agent(c, seed, tok),
    "harbor": lambda c, seed, tok: _harbor(c, seed, tok),
    "openenv": lambda c, seed, tok: _openenv(c, seed, tok),
    "verifiers": lambda c, seed, tok: _verifiers(c, seed, tok),
}


_ROWS = "task.path=FILE (.jsonl or .parquet with a 'prompt' column)"
# kind -> {TaskConfig key it cannot run without: what to set}
NEEDS: dict[str, dict[str, str]] = {
    "dataset": {"path": _ROWS},
    "agent": {"path": _ROWS, "command": "task.command: the harness's shell command, with {base_url}, {api_key}, "
                                        "{model} and {task} filled in per run"},
    "harbor": {"path": "task.path=DIR (a Harbor task folder or a folder of them)"},
    "verifiers": {"env": "task.env=TASKSET_ID (a verifiers.v1 taskset importable in the verifiers venv, e.g. "
                         "vf-sum; task.path=DIR adds a folder to its import path)"},
}


@dataclass
class TaskConfig(Checked):
    """Which task: a name in :data:`trajkit.envs.registry.TASKS` or an import path ``pkg.mod:make_task`` (a
    factory ``(TaskConfig, seed, tokenizer) -> Task``). ``dataset`` reads prompts from ``path`` (JSONL or
    Parquet with a ``prompt`` column; held-out ``eval_path`` or the last ``eval_fraction`` of the rows).
    ``agent`` reads its tasks the same way and runs the harness ``command`` once per group member against a
    gateway over the policy's engine (:mod:`trajkit.envs.agent`), each run limited to ``harness_timeout_s``.
    ``harbor`` runs Harbor tasks from the folder ``path`` as trials in a ``sandbox`` with trajkit's shell agent
    (at most ``max_turns`` replies) through the gateway (:mod:`trajkit.envs.harbor.rltask`); with ``judge_url`` (an
    OpenAI-compatible ``.../v1``) and ``judge_model`` the reward is Polar's rubric reward; ``timeout_multiplier``
    scales every Harbor task's agent time limit (Harbor's ``--timeout-multiplier``: a slow or shared CPU).
    ``openenv`` plays episodes of an OpenEnv environment, ``env`` (``pkg.module:Class``, in process) or ``url``
    (a local server's ``ws://127.0.0.1:PORT``), the observations as user turns (after ``system_prompt``), the
    replies made actions by ``adapter`` (``pkg.module:obj``; default: the action's one text field, or
    ``action_field``, with the observation's text field, or ``observation_field``), at most ``max_turns``
    replies; ``path`` a folder put first on the import path before ``env`` and ``adapter`` are imported
    (:mod:`trajkit.envs.openenv.rltask`).
    ``verifiers`` runs episodes of the ``verifiers.v1`` taskset ``env`` (its id; ``path`` a folder added to the
    verifiers venv's import path; ``env_config`` a JSON object of the taskset's config fields) with verifiers'
    ``null`` harness and subprocess runtime against the gateway, at most ``max_turns`` model turns
    (:mod:`trajkit.envs.verifiers.rltask`).
    ``shuffle``: a dataset's train rows in a fresh order every epoch (by run seed), else in file order
    (TRL's ``shuffle_dataset``). ``latency_median_s`` > 0 adds a lognormal wait (that median, ``latency_sigma``)
    to every episode, the batch waiting for its slowest (:mod:`trajkit.envs.latency`: long-tailed tool
    calls for benchmarks). The rest are the built-in tasks' size knobs."""

    name: str = "rep"
    path: str | None = None
    eval_path: str | None = None
    eval_fraction: float = 0.0
    strict: bool = False
    shuffle: bool = True
    min_len: int = 4
    max_len: int = 8
    alphabet: str = "abcdefgh"
    max_turns: int = 3
    tool_timeout_s: float = 0.5
    command: str | None = None
    harness_timeout_s: float = 300.0
    sandbox: Literal["namespace", "docker"] = "namespace"
    judge_url: str | None = None
    judge_model: str = "judge"
    timeout_multiplier: float = 1.0
    latency_median_s: float = 0.0
    latency_sigma: float = 1.0
    env: str | None = None
    url: str | None = None
    adapter: str | None = None
    system_prompt: str | None = None
    env_config: str | None = None
    action_field: str | None = None
    observation_field: str | None = None

    __section__ = "task"
    __ranges__ = {"min_len": "[1, inf)", "max_len": "[1, inf)", "max_turns": "[1, inf)", "tool_timeout_s": "(0, inf)",
                  "eval_fraction": "[0, 1)", "harness_timeout_s": "(0, inf)", "latency_median_s": "[0, inf)",
                  "timeout_multiplier": "(0, inf)",
                  "latency_sigma": "[0, inf)"}

    def validate(self) -> None:
        if self.name not in TASKS and not is_import_path(self.name):
            raise ConfigError(f"task.name must be one of {sorted(TASKS)} or an import path 'pkg.module:factory', "
                              f"got {self.name!r}")
        for key, what in NEEDS.get(self.name, {}).items():
            if not getattr(self, key):
                raise ConfigError(f"task.name={self.name} needs {what}")
        if self.name == "openenv" and (self.env is None) == (self.url is None):
            raise ConfigError("task.name=openenv needs exactly one of task.env=pkg.module:Class (the environment in "
                              "process) or task.url=ws://127.0.0.1:PORT (a local OpenEnv server)")
        for key in ("action_field", "observation_field"):
            if getattr(self, key) is not None and self.name != "openenv":
                raise ConfigError(f"task.{key} is read by task.name=openenv's default adapter only, got "
                                  f"task.name={self.name}; unset it")
            if getattr(self, key) is not None and self.adapter is not None:
                raise ConfigError(f"task.{key} configures the default adapter, but task.adapter={self.adapter} "
                                  "is given: unset one of them")
        if self.min_len > self.max_len:
            raise ConfigError(f"task.min_len ({self.min_len}) must be <= task.max_len ({self.max_len})")


def _agent(c, seed: int, tokenizer) -> Task:
    # imported here: the gateway (FastAPI, uvicorn) loads only when an agent task runs
    from trajkit.envs.agent import AgentTask

    return AgentTask(c.path, tokenizer, c.command, c.eval_path, seed=seed, eval_fraction=c.eval_fraction,
                     timeout_s=c.harness_timeout_s, strict=c.strict)


def _harbor(c, seed: int, tokenizer) -> Task:
    from trajkit.envs.harbor.rltask import make_task as harbor_task

    return harbor_task(c, seed, tokenizer)


def _openenv(c, seed: int, tokenizer) -> Task:
    # imported here: openenv-core (fastmcp at import) and the gateway load only when an OpenEnv task runs
    from trajkit.envs.openenv.rltask import make_task as openenv_task

    return openenv_task(c, seed, tokenizer)


def _verifiers(c, seed: int, tokenizer) -> Task:
    # imported here: the verifiers driver (a child process in the verifiers venv) starts only when chosen
    from trajkit.envs.verifiers.rltask import make_task as verifiers_task

    return verifiers_task(c, seed, tokenizer)


def make_task(cfg, seed: int, tokenizer) -> Task:
    """The task ``cfg.name`` (already validated by ``TaskConfig``) for ``seed``, encoding with ``tokenizer``."""
    if is_import_path(cfg.name):
        factory = import_object(cfg.name, "task.name")
        if not callable(factory):
            raise ConfigError(f"task.name: {cfg.name!r} is not callable (a task factory takes "
                              "(TaskConfig, seed, tokenizer))")
        return factory(cfg, seed, tokenizer)
    factory = TASKS[cfg.name]
    if isinstance(factory, str):
        factory = import_object(factory, "task.name")
    return factory(cfg, seed, tokenizer)
