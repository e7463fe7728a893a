"""Where a run's per-step metrics go: ``log.report_to`` names entries of :data:`REPORTERS`.

==============  ===========================================================================================
name            writes
==============  ===========================================================================================
``jsonl``       ``out_dir/metrics.jsonl``, one JSON object per step with every metric. Always on: the
                benchmarks and the tests read it; naming it in ``report_to`` changes nothing.
``tensorboard`` ``out_dir/tensorboard/``: event files of the numeric metrics (``SummaryWriter``), one
                scalar per metric name, ``global_step`` = the RL step. ``tensorboard --logdir out_dir``.
``wandb``       a Weights & Biases run (``wandb.init(dir=out_dir, project=log.wandb_project)``, the whole
                config as the run config, name = the folder name of ``out_dir``) with the numeric metrics
                at ``step`` = the RL step. Online or offline as wandb itself decides: ``WANDB_MODE=offline``
                keeps it under ``out_dir/wandb/offline-run-*`` (``wandb sync`` uploads it later).
==============  ===========================================================================================

Each reporter is built by a factory ``(out_dir, config, log) -> Reporter`` and takes the step's whole
metrics dict; the non-JSONL ones keep the numbers (booleans and strings are JSONL-only). As in TRL's
``report_to``, the name ``none`` (or an empty list) means no extra reporter.
"""
from __future__ import annotations

import json
import math
import os
from collections.abc import Callable
from typing import Any, Protocol

from trajkit.errors import ConfigError

METRICS_FILE = "metrics.jsonl"


class Reporter(Protocol):
    def log(self, step: int, metrics: dict[str, Any]) -> None: ...

    def close(self) -> None: ...


def numeric(metrics: dict[str, Any]) -> dict[str, float]:
    """The metrics a scalar dashboard can plot: finite ints and floats (not booleans)."""
    return {k: float(v) for k, v in metrics.items()
            if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)}


class JsonlReporter:
    def __init__(self, out_dir: str, config: dict, log) -> None:
        self.path = os.path.join(out_dir, METRICS_FILE)

    def log(self, step: int, metrics: dict[str, Any]) -> None:
        with open(self.path, "a", encoding="utf-8") as fh:
            fh.write(json.dumps({"step": step, **metrics}) + "\n")

    def close(self) -> None:
        """Each line is written and closed at once."""


class TensorBoardReporter:
    def __init__(self, out_dir: str, config: dict, log) -> None:
        try:
            from torch.utils.tensorboard import SummaryWriter
        except ImportError as exc:
            raise ConfigError("log.report_to=[tensorboard] needs the tensorboard package (pip install tensorboard); "
                              "or leave tensorboard out of log.report_to") from exc
        self.writer = SummaryWriter(os.path.join(out_dir, "tensorboard"))

    def log(self, step: int, metrics: dict[str, Any]) -> None:
        for key, value in numeric(metrics).items():
            self.writer.add_scalar(key, value, step)
        self.writer.flush()

    def close(self) -> None:
        self.writer.close()


class WandbReporter:
    def __init__(self, out_dir: str, config: dict, log) -> None:
        try:
            import wandb
        except ImportError as exc:
            raise ConfigError("log.report_to=[wandb] needs the wandb package (pip install wandb); or leave wandb "
                              "out of log.report_to") from exc
        name = os.path.basename(os.path.abspath(out_dir))
        try:
            self.run = wandb.init(project=log.wandb_project, dir=out_dir, name=name, config=config,
                                  job_type="train", reinit="create_new")
        except wandb.errors.Error as exc:  # not logged in, no network, bad settings
            raise ConfigError(f"log.report_to=[wandb]: wandb could not start a run ({' '.join(str(exc).split())}); "
                              "run `wandb login`, or set WANDB_MODE=offline to keep the run on disk") from exc

    def log(self, step: int, metrics: dict[str, Any]) -> None:
        self.run.log(numeric(metrics), step=step)

    def close(self) -> None:
        self.run.finish()


ReporterFactory = Callable[[str, dict, Any], Reporter]
REPORTERS: dict[str, ReporterFactory] = {"jsonl": JsonlReporter, "tensorboard": TensorBoardReporter,
                                         "wandb": WandbReporter}


def report_names(value: list[str] | str) -> list[str]:
    """``log.report_to`` as a list of known names, duplicates dropped: a single name or ``none`` is
    accepted as in TRL; anything unknown is a :class:`ConfigError` listing the choices."""
    names = [value] if isinstance(value, str) else list(value) if isinstance(value, (list, tuple)) else None
    if names is None or not all(isinstance(n, str) for n in names):
        raise ConfigError(f"log.report_to must be a list of names from {sorted(REPORTERS)}, got {value!r}")
    if names == ["none"]:
        return []
    unknown = [n for n in names if n not in REPORTERS]
    if unknown:
        raise ConfigError(f"log.report_to: unknown reporter(s) {unknown}; choose from {sorted(REPORTERS)} "
                          "(e.g. log.report_to=[tensorboard,wandb]; [] or none for metrics.jsonl only)")
    return list(dict.fromkeys(names))


def make_reporters(out_dir: str, config: dict, log) -> list[Reporter]:
    """The always-on JSONL reporter, then one per other name in ``log.report_to``."""
    names = ["jsonl", *(n for n in report_names(log.report_to) if n != "jsonl")]
    reporters: list[Reporter] = []
    try:
        for name in names:
            reporters.append(REPORTERS[name](out_dir, config, log))
    except BaseException:
        for r in reporters:
            r.close()
        raise
    return reporters
