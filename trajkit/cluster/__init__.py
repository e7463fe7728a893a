"""trajkit.cluster: the RL step on Ray, one controller over a policy worker and N rollout workers.

    trajkit train grpo_smollm2 cluster.ray=true cluster.rollout_workers=2

    from trajkit.cluster import ClusterTrainer
    trainer = ClusterTrainer(load_config("grpo_smollm2", ["cluster.ray=true", "cluster.rollout_workers=2"]))
    trainer.train()

The controller runs :func:`trajkit.rl.step.rl_step` unchanged (:mod:`trajkit.cluster.trainer`); rollout
workers wrap a backend of the registry each (:mod:`trajkit.cluster.workers`, :mod:`trajkit.cluster.split`)
and run the episodes of agent-style tasks (agent, Harbor, OpenEnv: a gateway over each worker's backend);
the policy worker owns the policy, optimiser, reference and draft (:mod:`trajkit.rl.learner`); actors are
placed colocated or split (:mod:`trajkit.cluster.placement`); weights travel through Ray's object store
(CPU state dicts), or by NCCL broadcast on CUDA (:mod:`trajkit.cluster.nccl`). See docs/cluster.md.
"""

from trajkit._lazy import lazy_getattr

_EXPORTS = {
    "ClusterTrainer": "trajkit.cluster.trainer",
    "ClusterError": "trajkit.cluster.errors",
    "train": "trajkit.cluster.trainer",
    "place": "trajkit.cluster.placement",
    "RayRollouts": "trajkit.cluster.split",
}

__all__ = list(_EXPORTS)

__getattr__ = lazy_getattr(__name__, _EXPORTS)
