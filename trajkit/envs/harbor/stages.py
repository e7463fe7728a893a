"""Resumable stages of a pipeline (``trainer: sft``, ``trajkit demo agent``): each finished stage's result, its
seconds and the config it ran under are recorded in one JSON file; a rerun with the same config takes the
recorded result instead of running the stage again, so a killed run resumes after its last finished stage.

Example: ``stages = Stages(Path("out/stages.json"), {"lr": 1e-4}, print, "sft")``; ``stages.run("tasks", fn)``
runs ``fn()`` and records ``{"tasks": {"config": {"lr": 1e-4}, "result": ..., "seconds": 1.2}}``; a second
``Stages`` on the same file and config prints ``sft: tasks already done (out/stages.json)`` and returns the
recorded result. A stage recorded under another config runs again (and replaces the record).
"""
from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path

from trajkit.atomic import write_atomic


class Stages:
    """The stage records of one pipeline folder (module docstring). ``on_stage(name, seconds, skipped)`` is told
    each stage as it finishes or is taken from the record (a progress bar)."""

    def __init__(self, path: Path, config: dict, log: Callable[[str], None], prefix: str,
                 on_stage: Callable[[str, float, bool], None] | None = None) -> None:
        self.path, self.config, self.log, self.prefix, self.on_stage = Path(path), config, log, prefix, on_stage
        self.finished = json.loads(self.path.read_text(encoding="utf-8")) if self.path.exists() else {}
        self.seconds: dict[str, float] = {}

    def done(self, name: str) -> bool:
        return name in self.finished and self.finished[name]["config"] == self.config

    def run(self, name: str, fn: Callable, *args):
        """``fn(*args)``, or its recorded result when the stage finished under this config."""
        if self.done(name):
            record = self.finished[name]
            self.seconds[name] = record["seconds"]
            self.log(f"{self.prefix}: {name} already done ({self.path})")
            if self.on_stage is not None:
                self.on_stage(name, record["seconds"], True)
            return record["result"]
        t0 = time.perf_counter()
        self.log(f"{self.prefix}: {name} ...")
        result = fn(*args)
        self.seconds[name] = round(time.perf_counter() - t0, 1)
        self.finished[name] = {"config": self.config, "result": result, "seconds": self.seconds[name]}
        write_atomic(self.path, json.dumps(self.finished))
        self.log(f"{self.prefix}: {name} done in {self.seconds[name]} s")
        if self.on_stage is not None:
            self.on_stage(name, self.seconds[name], False)
        return result
