"""Task registry: ``task.name`` in a config -> a factory ``(TaskConfig, seed, tokenizer) -> Task``.

``TaskConfig`` validates its ``name`` against :data:`TASKS`, so a task registered here is accepted by
configs and CLI overrides with no other change. An entry may be an import path of a factory (``harbor``: the
Harbor task of :mod:`trajkit.envs`, a package above this one, loaded only when chosen); a name written as an import path
(``my_pkg.tasks:make_task``) is imported instead, so a user's task needs no edit of this file.
"""
from __future__ import annotations

from typing import Any, Callable

from trajkit.errors import ConfigError
from trajkit.rl.data import DatasetTask
from trajkit.rl.imports import import_object, is_import_path
from trajkit.rl.tasks import ChatArithmeticTask, StringTask, Task
from trajkit.rl.toolenv import CalculatorTask

# (TaskConfig, seed, tokenizer) -> Task; TaskConfig is not imported: it validates names against TASKS
TaskFactory = Callable[[Any, int, Any], Task]  # or an import path 'pkg.module:factory' to one


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
    "harbor": "trajkit.envs.rltask:make_task",  # trajkit.envs sits above trajkit.rl: named, not imported
    "openenv": "trajkit.envs.openenv.rltask:make_task",
}


def _agent(c, seed: int, tokenizer) -> Task:
    # imported here: the gateway (FastAPI, uvicorn) loads only when an agent task runs
    from trajkit.rl.agent import AgentTask

    return AgentTask(c.path, tokenizer, c.command, c.eval_path, seed=seed, eval_fraction=c.eval_fraction,
                     timeout_s=c.harness_timeout_s, strict=c.strict)


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
