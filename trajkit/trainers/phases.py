"""Resumable phases of a training pipeline (``trainer: sft``, ``trajkit demo agent``): each finished phase's
result, its seconds and the config it ran under are recorded in one JSON file; a rerun with the same config
takes the recorded result instead of running the phase again, so a killed run resumes after its last finished
phase. (Not the RL step's stages: those are the five timed parts of one step, :mod:`trajkit.rl.stages`.)

Example: ``phases = Phases(Path("out/phases.json"), {"lr": 1e-4}, print, "sft")``; ``phases.run("tasks", fn)``
runs ``fn()`` and records ``{"tasks": {"config": {"lr": 1e-4}, "result": ..., "seconds": 1.2}}``; a second
``Phases`` on the same file and config prints ``sft: tasks already done (out/phases.json)`` and returns the
recorded result. A phase recorded under another config runs again (and replaces the record). A folder
written before the records were renamed holds ``stages.json`` (the same records): it is read when
``phases.json`` is absent, so such a run resumes too.
"""
from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path

from trajkit.atomic import write_atomic


LEGACY_NAME = "stages.json"  # the records' file name before trajkit.trainers.phases (envs/harbor/stages.py)


class Phases:
    """The phase records of one pipeline folder (module docstring). ``on_phase(name, seconds, skipped)`` is told
    each phase as it finishes or is taken from the record (a progress bar)."""

    def __init__(self, path: Path, config: dict, log: Callable[[str], None], prefix: str,
                 on_phase: Callable[[str, float, bool], None] | None = None) -> None:
        self.path, self.config, self.log, self.prefix, self.on_phase = Path(path), config, log, prefix, on_phase
        record = self.path if self.path.exists() else self.path.with_name(LEGACY_NAME)
        self.finished = json.loads(record.read_text(encoding="utf-8")) if record.exists() else {}
        self.seconds: dict[str, float] = {}

    def done(self, name: str) -> bool:
        return name in self.finished and self.finished[name]["config"] == self.config

    def run(self, name: str, fn: Callable, *args):
        """``fn(*args)``, or its recorded result when the phase finished under this config."""
        if self.done(name):
            record = self.finished[name]
            self.seconds[name] = record["seconds"]
            self.log(f"{self.prefix}: {name} already done ({self.path})")
            if self.on_phase is not None:
                self.on_phase(name, record["seconds"], True)
            return record["result"]
        t0 = time.perf_counter()
        self.log(f"{self.prefix}: {name} ...")
        result = fn(*args)
        self.seconds[name] = round(time.perf_counter() - t0, 1)
        self.finished[name] = {"config": self.config, "result": result, "seconds": self.seconds[name]}
        write_atomic(self.path, json.dumps(self.finished))
        self.log(f"{self.prefix}: {name} done in {self.seconds[name]} s")
        if self.on_phase is not None:
            self.on_phase(name, self.seconds[name], False)
        return result
