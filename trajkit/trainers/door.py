"""The one trainer door: which trainer runs a config, for ``trajkit train``, ``trajkit bench train`` and
``trajkit demo agent`` alike.

    cfg = load_training_config("grpo_smollm2", ["cluster.ray=true"])   # an SFTConfig or a TrainConfig
    trainer_kind(cfg)                   # "ray"
    history = trainer_for(cfg)(cfg, progress)   # runs it: the kind's entry function
    stepper = stepper_for(cfg)(cfg, logger=False)   # a Trainer stepped here (bench train), in process or Ray

The kinds (:data:`TRAINERS`):

- ``sft``: a YAML that says ``trainer: sft`` (:mod:`trajkit.trainers.sft`: the supervised warm start of the
  agentic loop); its entry is ``run_sft(cfg, log, on_phase) -> report``;
- ``ray``: ``cluster.ray=true`` (:mod:`trajkit.cluster`: the controller here, the policy and the rollouts on
  Ray actors; ``cluster.policy_workers=N`` shards the policy over a gang of them);
- ``fsdp``: ``policy.fsdp=true`` without Ray (:mod:`trajkit.rl.sharded`: this rank of a torchrun launch);
- ``in_process``: everything else (:mod:`trajkit.rl.trainer`).

An RL kind's entry is ``train(cfg, progress) -> [metrics of each step]``. Only the in-process and Ray kinds
step from one process (``stepper_for``); a sharded run's other ranks must run the same calls, so
``trajkit bench train`` refuses it naming ``torchrun``.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Literal

from trajkit.envs.imports import import_object
from trajkit.errors import ConfigError

Kind = Literal["sft", "in_process", "fsdp", "ray"]


@dataclass(frozen=True)
class TrainerEntry:
    """A trainer kind: ``run`` (``module:function``, its entry), ``stepper`` (``module:Class`` a caller can
    step one RL step at a time in this process, or None) and ``what`` (a line for messages)."""

    run: str
    stepper: str | None
    what: str


TRAINERS: dict[str, TrainerEntry] = {
    "sft": TrainerEntry("trajkit.trainers.sft:run_sft", None, "the SFT warm start (trainer: sft)"),
    "in_process": TrainerEntry("trajkit.rl.trainer:train", "trajkit.rl.trainer:Trainer", "RL in this process"),
    "fsdp": TrainerEntry("trajkit.rl.sharded:train", None,
                         "RL with the policy sharded by FSDP2 over torchrun's ranks (policy.fsdp=true)"),
    "ray": TrainerEntry("trajkit.cluster.trainer:train", "trajkit.cluster.trainer:ClusterTrainer",
                        "RL on Ray actors (cluster.ray=true)"),
}


def load_training_config(config: str | None, overrides: list[str] = ()):
    """A YAML file or packaged config name + ``key=value`` overrides -> its validated config: an
    :class:`~trajkit.trainers.sft.SFTConfig` when the YAML says ``trainer: sft``, else a
    :class:`~trajkit.rl.config.TrainConfig`."""
    from trajkit.trainers.sft import is_sft_config, load_sft_config

    if is_sft_config(config):
        return load_sft_config(config, list(overrides))
    from trajkit.rl.config import load_config

    return load_config(config, list(overrides))


def trainer_kind(cfg) -> Kind:
    """The kind of trainer ``cfg`` (an SFT or an RL config) runs on (module docstring)."""
    from trajkit.trainers.sft import SFTConfig

    if isinstance(cfg, SFTConfig):
        return "sft"
    if cfg.cluster.ray:
        return "ray"
    return "fsdp" if cfg.policy.fsdp else "in_process"


def trainer_for(cfg) -> Callable:
    """The entry function of ``cfg``'s trainer kind (imported only now: Ray loads only for a Ray run)."""
    return import_object(TRAINERS[trainer_kind(cfg)].run, "trainer")


def stepper_for(cfg) -> type:
    """The trainer class that steps ``cfg`` one RL step at a time in this process (``Trainer`` or
    ``ClusterTrainer``); a :class:`ConfigError` for a kind that cannot (SFT, a sharded run)."""
    kind = trainer_kind(cfg)
    entry = TRAINERS[kind]
    if entry.stepper is None:
        steppable = ", ".join(k for k, e in TRAINERS.items() if e.stepper is not None)
        hint = (" (launch it with torchrun: trajkit train CONFIG policy.fsdp=true)" if kind == "fsdp" else "")
        raise ConfigError(f"{entry.what} is not stepped one step at a time from one process{hint}; "
                          f"this needs a trainer of kind {steppable}")
    return import_object(entry.stepper, "trainer")

