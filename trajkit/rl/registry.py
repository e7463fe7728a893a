"""Task registry: ``task.name`` in a config -> a factory ``(TaskConfig, seed, tokenizer) -> Task``.

``TaskConfig`` validates its ``name`` against :data:`TASKS`, so a task registered here is accepted by
configs and CLI overrides with no other change.
"""
from __future__ import annotations

from typing import Any, Callable

from trajkit.rl.tasks import StringTask, Task
from trajkit.rl.toolenv import CalculatorTask

# (TaskConfig, seed, tokenizer) -> Task; TaskConfig is not imported: it validates names against TASKS
TaskFactory = Callable[[Any, int, Any], Task]


def _string(op: str) -> TaskFactory:
    return lambda c, seed, tok: StringTask(op, seed, tok, c.min_len, c.max_len, c.alphabet)


TASKS: dict[str, TaskFactory] = {
    "copy": _string("copy"), "rev": _string("rev"), "sort": _string("sort"), "add": _string("add"),
    "rep": _string("rep"),
    "calculator": lambda c, seed, tok: CalculatorTask(seed, tok, c.max_len, c.max_turns, c.tool_timeout_s),
}


def make_task(cfg, seed: int, tokenizer) -> Task:
    """The task ``cfg.name`` (already validated by ``TaskConfig``) for ``seed``, encoding with ``tokenizer``."""
    return TASKS[cfg.name](cfg, seed, tokenizer)
