"""The Ray trainer: one controller (this process) running :func:`trajkit.rl.step.rl_step` over Ray actors.

The controller holds what the step's data and generation stages need (the tokenizer, the task and its
prompt stream, the reward functions, the mismatch alarm, the step counter) and a
:class:`~trajkit.rl.rollout.Rollout` whose backend is :class:`~trajkit.cluster.split.RayRollouts`, the
``cluster.rollout_workers`` rollout workers; its learner is :class:`~trajkit.cluster.learner.RemoteLearner`,
the one policy worker. So the step is the in-process one, stage for stage, with the same timers and
metrics (NeMo RL's single-process controller over ``RayWorkerGroup``s, verl's single controller)::

    trainer = ClusterTrainer(load_config("grpo_smollm2", ["cluster.ray=true", "cluster.rollout_workers=2"]))
    history = trainer.train()            # or step_once(); evaluate(); save(); close()

Same seed, same config, trajkit backend: the samples, the losses and the weights equal the in-process
trainer's bit for bit (tests/cluster/test_cluster_step.py), because every actor builds its modules with the
in-process functions and a row's sample does not depend on which worker drew it (:mod:`trajkit.cluster.split`).
Checkpoints have the in-process layout and are written and read by the policy worker. Not on Ray: a
policy given as a module, a backend given as an object.

Agent-style tasks (``agent``, ``harbor``, any environment with ``serves_generation``) run their episodes on
the rollout workers, not here: each worker holds the task (built from the config by the registry, or the
given object, pickled) and runs its contiguous slice of every round's rows with a gateway over its own
backend, so the harness processes and Harbor sandboxes live on the workers' nodes
(:meth:`~trajkit.rl.rollout.Rollout.episodes`, :meth:`~trajkit.cluster.split.RayRollouts.episodes`). A run
keeps its in-process session id and seed key, and so its seeds; the controller gets the finished samples, the
calls' counters and versions, and judges the round (every run failed: an error; Harbor: failed trials masked).
A worker that raises or dies fails the step naming the worker and the task.
"""
from __future__ import annotations

import os
from dataclasses import dataclass

from trajkit.backends.actors import ensure_ray, require_ray, start_actor
from trajkit.cluster.errors import ClusterError, gather
from trajkit.cluster.gang import GangLearner, start_gang
from trajkit.cluster.learner import RemoteLearner
from trajkit.cluster.placement import Placement, place
from trajkit.cluster.split import RayRollouts
from trajkit.cluster.workers import PolicyWorker, RolloutWorker
from trajkit.errors import ConfigError
from trajkit.rl.build import build_tokenizer
from trajkit.rl.config import TrainConfig
from trajkit.envs.latency import with_latency
from trajkit.envs.registry import make_task
from trajkit.rl.rollout import Rollout
from trajkit.rl.state import PromptStream, TrainState
from trajkit.rl.trainer import Trainer, make_alarm, make_rewards

PASSED_ENV = ("HF_", "TRANSFORMERS_", "TRAJKIT_", "TOKENIZERS_")  # settings the actors must see as we do


def actor_env() -> dict:
    return {k: v for k, v in os.environ.items() if k.startswith(PASSED_ENV)}


def start_rollouts(cfg: TrainConfig, placement: Placement, first_bundle: int = 1) -> RayRollouts:
    """``cluster.rollout_workers`` rollout workers in bundles ``first_bundle...`` of ``placement``, started
    at once and waited for together (each builds its backend from ``cfg``: the policy as configured, its
    weights replaced at the first sync)."""
    c = cfg.cluster
    workers = [start_actor(RolloutWorker, (cfg, i), python=c.rollout_python, env=actor_env(),
                           **placement.options(first_bundle + i)) for i in range(c.rollout_workers)]
    try:
        infos = gather([w.info.remote() for w in workers],
                       [f"rollout worker {i} start" for i in range(len(workers))], c.timeout_s)
    except BaseException:
        for w in workers:
            require_ray().kill(w)
        raise
    return RayRollouts(workers, infos, c.timeout_s)


def connect_nccl(policy, rollouts: RayRollouts, timeout_s: float, gang: list | None = None) -> None:
    """Open the NCCL groups between the policy worker and every rollout worker's vLLM engine (CUDA only); a
    sharded ``gang``'s every actor makes its engine (rank 0 opens the group on its node)."""
    handles = gather([w.vllm_actor.remote() for w in rollouts.workers],
                     [f"rollout worker {i} vLLM actor" for i in range(len(rollouts.workers))], timeout_s)
    import socket

    with socket.socket() as sock:  # a free port for the rendezvous (on this node; fine for a local group)
        sock.bind(("", 0))
        port = sock.getsockname()[1]
    if not gang:
        gather([policy.init_nccl.remote(handles, port)], ["policy worker NCCL init"], timeout_s)
        return
    address = gather([gang[0].address.remote()], ["policy worker 0 address"], timeout_s)[0]
    host = address.removeprefix("tcp://").rsplit(":", 1)[0]
    gather([a.init_nccl.remote(handles, port, host) for a in gang],
           [f"policy worker {r} NCCL init" for r in range(len(gang))], timeout_s)


@dataclass
class Cluster:
    """The actors of a run and their placement group; :meth:`close` releases them (and a Ray it started)."""

    placement: Placement
    policy: object
    rollouts: RayRollouts
    learner: object  # RemoteLearner, or a sharded gang's GangLearner
    policy_info: dict
    owns_ray: bool
    gang: tuple = ()  # the policy workers of a sharded gang (cluster.policy_workers > 1); policy is rank 0

    @classmethod
    def start(cls, cfg: TrainConfig) -> "Cluster":
        c = cfg.cluster
        owns = ensure_ray(c.num_cpus or None, c.address)
        placement = place(c.layout, c.rollout_workers, c.worker_cpus, c.worker_gpus, c.timeout_s,
                          c.policy_workers)
        try:
            # first the policy worker(s): a warm start built there is cached before the rollout workers read it
            if c.policy_workers > 1:
                gang, info = start_gang(cfg, placement, actor_env())
                policy, learner = gang[0], GangLearner(gang, c.timeout_s, c.weight_transfer)
            else:
                gang = []
                policy = start_actor(PolicyWorker, (cfg,), python=c.policy_python, env=actor_env(),
                                     **placement.options(0))
                info = gather([policy.info.remote()], ["policy worker start"], c.timeout_s)[0]
                learner = RemoteLearner(policy, c.timeout_s, c.weight_transfer)
            rollouts = start_rollouts(cfg, placement, first_bundle=c.policy_workers)
            if c.weight_transfer == "nccl":
                connect_nccl(policy, rollouts, c.timeout_s, gang)
        except BaseException:
            placement.remove()  # its actors go with it
            if owns:
                require_ray().shutdown()
            raise
        return cls(placement, policy, rollouts, learner, info, owns, tuple(gang))

    def close(self) -> None:
        ray = require_ray()
        self.rollouts.close()
        for actor in self.gang or (self.policy,):
            ray.kill(actor)
        self.placement.remove()
        if self.owns_ray:
            ray.shutdown()


def _shippable(task):
    """A task given as an object, in Ray's object store for the rollout workers (they run its episodes)."""
    ray = require_ray()
    try:
        return ray.put(task)
    except Exception as exc:  # noqa: BLE001 - whatever pickling raises, the same advice
        raise ConfigError(f"task={type(task).__name__}: an agent-style task runs its episodes on the rollout "
                          f"workers, so a task given as an object must pickle (cloudpickle); it does not "
                          f"({type(exc).__name__}: {exc}). Give its harness as an importable function or a "
                          "command, or set task.name and the task.* keys so each worker builds it") from None


def check_cluster_config(cfg: TrainConfig, given: dict) -> None:
    if not cfg.cluster.ray:
        raise ConfigError("ClusterTrainer runs a Ray run: set cluster.ray=true (the in-process run is "
                          "trajkit.rl.Trainer)")
    for name in ("policy", "backend"):
        if given.get(name) is not None:
            raise ConfigError(f"cluster.ray=true: {name}= cannot be given as an object (the actors build their "
                              "own from the config); use policy.source=path with policy.path=DIR")


class ClusterTrainer(Trainer):
    """:class:`trajkit.rl.Trainer` with its state on Ray actors (same arguments; ``model`` only as a folder)."""

    def build(self, cfg: TrainConfig, **given) -> TrainState:
        check_cluster_config(cfg, given)
        tokenizer = given["tokenizer"] if given.get("tokenizer") is not None else build_tokenizer(cfg)
        task = with_latency(given["task"] if given.get("task") is not None else make_task(cfg.task, cfg.seed, tokenizer),
                            cfg.task, cfg.seed)
        self.cluster = Cluster.start(cfg)
        try:
            vocab = self.cluster.policy_info["vocab_size"]
            if vocab < len(tokenizer):
                raise ConfigError(f"policy: its vocabulary ({vocab}) is smaller than the tokenizer's ({len(tokenizer)})")
            state = TrainState(
                cfg=cfg, tokenizer=tokenizer, task=task,
                rewards=make_rewards(task, cfg, given.get("reward_funcs"), given.get("reward_weights")),
                stream=PromptStream(task), side=None,
                rollout=Rollout(cfg, None, None, self.cluster.rollouts), alarm=make_alarm(cfg),
                learner=self.cluster.learner)
            if getattr(task.env, "serves_generation", False):  # agent, harbor: the episodes run on the workers
                self.cluster.rollouts.set_task(_shippable(task) if given.get("task") is not None else None)
            if cfg.checkpoint.resume_from:
                self._resume(state, cfg.checkpoint.resume_from)
        except BaseException:
            self.cluster.close()
            raise
        return state

    @staticmethod
    def _resume(state: TrainState, path: str) -> None:
        state.restore(state.learner.load(path))

    def save(self, path: str | None = None) -> str:
        path = path or os.path.join(self.cfg.log.out_dir, "checkpoints", f"step_{self.step:06d}")
        s = self.state
        return s.learner.save(os.path.abspath(path), s.counters())

    def close(self) -> None:
        try:
            super().close()
        finally:
            cluster = getattr(self, "cluster", None)
            if cluster is not None:
                self.cluster = None
                cluster.close()


def train(cfg: TrainConfig, progress=None) -> list[dict]:
    """:func:`trajkit.rl.trainer.train` on Ray (``cluster.ray=true``)."""
    return ClusterTrainer(cfg).train(progress)


__all__ = ["Cluster", "ClusterError", "ClusterTrainer", "train"]
