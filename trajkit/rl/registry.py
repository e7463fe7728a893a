"""Task registry: ``task.name`` in a config -> a factory ``(TaskConfig, seed) -> Task``."""
from __future__ import annotations

from typing import Callable

from trajkit.errors import ConfigError
from trajkit.rl.config import TaskConfig
from trajkit.rl.tasks import StringTask, Task
from trajkit.rl.toolenv import CalculatorTask


def _string(op: str) -> Callable[[TaskConfig, int], Task]:
    return lambda c, seed: StringTask(op, seed, c.min_len, c.max_len, c.alphabet)


TASKS: dict[str, Callable[[TaskConfig, int], Task]] = {
    "copy": _string("copy"), "rev": _string("rev"), "sort": _string("sort"), "add": _string("add"),
    "rep": _string("rep"),
    "calculator": lambda c, seed: CalculatorTask(seed, c.max_len, c.max_turns, c.tool_timeout_s),
}


def make_task(cfg: TaskConfig, seed: int) -> Task:
    if cfg.name not in TASKS:
        raise ConfigError(f"task.name must be one of {sorted(TASKS)}, got {cfg.name!r}")
    return TASKS[cfg.name](cfg, seed)
