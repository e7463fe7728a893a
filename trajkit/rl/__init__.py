"""trajkit.rl: a five-stage synchronous GRPO-family trainer with speculative rollouts from trajkit.engine.

    from trajkit.rl import Trainer, load_config, train
    history = train(load_config("examples/rl_rep.yaml", ["steps=20"]))

See docs/rl.md. Pure pieces: :mod:`~trajkit.rl.losses` (LOSSES registry), :mod:`~trajkit.rl.advantages`,
:mod:`~trajkit.rl.shaping`, :mod:`~trajkit.rl.mismatch`; records: :class:`Sample`, :class:`TrainState`; stages:
:data:`STAGES`. The tasks it trains on live in :mod:`trajkit.envs` (``trajkit.rl.Sample`` is
:class:`trajkit.envs.sample.Sample`).
"""

from trajkit._lazy import lazy_getattr, moved_modules

# Environment modules that lived here; their imports fail naming the new module (docs/architecture.md)
moved_modules({"trajkit.rl.tasks": "trajkit.envs.single_turn", "trajkit.rl.toolenv": "trajkit.envs.toolenv",
               "trajkit.rl.sandbox": "trajkit.envs.calculator", "trajkit.rl.agent": "trajkit.envs.agent",
               "trajkit.rl.data": "trajkit.envs.data", "trajkit.rl.registry": "trajkit.envs.registry",
               "trajkit.rl.sample": "trajkit.envs.sample", "trajkit.rl.rewards": "trajkit.envs.rewards",
               "trajkit.rl.imports": "trajkit.envs.imports"})

# Lazy exports (PEP 562): importing the package does not import torch; the first use does.
_EXPORTS = {
    "TrainConfig": "trajkit.rl.config",
    "load_config": "trajkit.rl.config",
    "LOSSES": "trajkit.rl.losses",
    "policy_loss": "trajkit.rl.losses",
    "Sample": "trajkit.envs.sample",
    "validate_sample": "trajkit.envs.sample",
    "STAGES": "trajkit.rl.stages",
    "TrainState": "trajkit.rl.state",
    "Trainer": "trajkit.rl.trainer",
    "train": "trajkit.rl.trainer",
}

__all__ = list(_EXPORTS)


__getattr__ = lazy_getattr(__name__, _EXPORTS)
