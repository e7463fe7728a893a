"""The one trainer door (:mod:`trajkit.trainers.door`): each config kind maps to its trainer's own entry and
stepper, a kind that cannot step from one process is refused by name, and the command line, the benchmark and
the demos choose through it (no second copy of the choice)."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

import trajkit
from trajkit.errors import ConfigError
from trajkit.trainers.door import TRAINERS, load_training_config, stepper_for, trainer_for, trainer_kind

ROOT = Path(trajkit.__file__).resolve().parent


@pytest.mark.parametrize("overrides, kind", [
    ([], "in_process"), (["policy.fsdp=true", "draft.distill=false"], "fsdp"), (["cluster.ray=true"], "ray"),
    (["cluster.ray=true", "policy.fsdp=true", "draft.distill=false", "cluster.policy_workers=2"], "ray"),  # a Ray gang shards the policy on its actors
])
def test_an_rl_config_runs_on_the_trainer_its_sections_name(overrides, kind):
    from trajkit.cluster.trainer import ClusterTrainer, train as ray_train
    from trajkit.rl.sharded import train as sharded_train
    from trajkit.rl.trainer import Trainer, train as local_train

    cfg = load_training_config("rep", overrides)
    assert trainer_kind(cfg) == kind
    assert trainer_for(cfg) is {"in_process": local_train, "fsdp": sharded_train, "ray": ray_train}[kind]
    if kind == "fsdp":
        with pytest.raises(ConfigError, match="torchrun"):
            stepper_for(cfg)
    else:
        assert stepper_for(cfg) is {"in_process": Trainer, "ray": ClusterTrainer}[kind]


def test_a_trainer_sft_yaml_is_the_sft_trainer_and_is_not_stepped():
    from trajkit.trainers.sft import SFTConfig, run_sft

    cfg = load_training_config("sft_harbor_smollm2", ["steps=3"])
    assert isinstance(cfg, SFTConfig) and cfg.steps == 3
    assert trainer_kind(cfg) == "sft" and trainer_for(cfg) is run_sft
    with pytest.raises(ConfigError, match="SFT warm start"):
        stepper_for(cfg)


def test_every_entry_resolves():
    import importlib

    for entry in TRAINERS.values():
        for path in filter(None, (entry.run, entry.stepper)):
            module, name = path.split(":")
            assert callable(getattr(importlib.import_module(module), name)), path


CALLERS = ("cli/train.py", "bench/train.py", "demo.py", "demo_agent.py")
TRAINER_NAMES = {"train", "run_sft", "ClusterTrainer", "ShardedTrainer"}


@pytest.mark.parametrize("caller", CALLERS)
def test_the_callers_choose_through_the_door(caller):
    """No caller imports a trainer's entry itself, nor reads ``cluster.ray`` / ``policy.fsdp`` to pick one
    (the benchmark reads ``cluster.ray`` only to start the shared local Ray, after the door chose)."""
    tree = ast.parse((ROOT / caller).read_text())
    imported = {(node.module, a.name) for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)
                for a in node.names}
    assert ("trajkit.trainers.door", "trainer_for") in imported or ("trajkit.trainers.door", "stepper_for") in imported
    own = {(m, n) for m, n in imported if n in TRAINER_NAMES
           and m in ("trajkit.rl", "trajkit.rl.trainer", "trajkit.rl.sharded", "trajkit.cluster",
                     "trajkit.cluster.trainer", "trajkit.trainers.sft")}
    assert not own, own
    fsdp_reads = [n for n in ast.walk(tree) if isinstance(n, ast.Attribute) and n.attr == "fsdp"]
    assert not fsdp_reads
