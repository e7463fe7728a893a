"""The two Ray actor classes of a run: the policy worker (one) and the rollout workers (N).

Both run trajkit itself (this python, or ``cluster.rollout_python`` for the rollout workers) and are built
from the run's :class:`~trajkit.rl.config.TrainConfig` by the same functions the in-process trainer uses,
so a Ray run and an in-process run hold the same modules:

- :class:`PolicyWorker` holds a :class:`~trajkit.rl.learner.PolicySide` (policy, optimiser, reference,
  draft and its optimiser; :func:`~trajkit.rl.learner.build_policy_side`) behind a
  :class:`~trajkit.rl.learner.LocalLearner`: the ``logprob`` and ``policy_update`` stages run here on the
  batch the controller collated. It also writes and reads checkpoints (the weights live here).
- :class:`RolloutWorker` holds a :class:`~trajkit.rl.rollout.Rollout`, i.e. one backend of
  ``rollout.backend`` from the registry (trajkit's engine over an inference copy of the policy; or vLLM,
  itself an actor in the vLLM venv); weights arrive as object-store refs (:meth:`RolloutWorker.load`).
  For an agent-style task (``agent``, ``harbor``: an environment that serves generation) it also holds the
  task and runs its slice of every round's episodes here (:meth:`RolloutWorker.episodes`): the gateway over
  this worker's backend, the harness processes and Harbor trials on this worker's node.

Each actor sets torch's thread count to ``threads`` when the config sets it (Ray sets ``OMP_NUM_THREADS``
from the actor's CPUs otherwise), so its float results are those of an in-process run with the same setting.
"""
from __future__ import annotations

import os


def _threads(cfg) -> None:
    import torch

    if cfg.threads > 0:
        torch.set_num_threads(cfg.threads)


class PolicyWorker:
    """The policy side of a run, as a Ray actor."""

    def __init__(self, cfg):
        from trajkit.rl.build import build_tokenizer
        from trajkit.rl.learner import LocalLearner, build_policy_side

        _threads(cfg)
        self.cfg = cfg
        self.tokenizer = build_tokenizer(cfg)
        self.side = build_policy_side(cfg, self.tokenizer)
        self.learner = LocalLearner(self.side)

    def info(self) -> dict:
        p = self.side.policy
        return {"pid": os.getpid(), "vocab_size": int(p.config.vocab_size),
                "num_params": sum(t.numel() for t in p.parameters()), "device": str(next(p.parameters()).device)}

    def weights(self) -> dict:
        """``{"policy": ..., "draft": ...}`` state dicts on the CPU (Ray copies them into the object store)."""
        out = self.learner.weights()
        return {k: None if sd is None else {n: t.detach().to("cpu") for n, t in sd.items()} for k, sd in out.items()}

    def init_nccl(self, handles: list, port: int) -> None:
        """Open the NCCL groups to the vLLM engines ``handles`` (:mod:`trajkit.cluster.nccl`; CUDA only)."""
        from trajkit.cluster.nccl import NcclSender

        self.senders = [NcclSender(self.side.policy, handles, port)]
        if self.side.draft_optimizer is not None:  # a trained draft: vLLM's drafter refit, its own group
            self.senders.append(NcclSender(self.side.draft, handles, port + 1, draft=True))

    def send_nccl(self) -> None:
        for sender in self.senders:
            sender.send()

    def logprobs(self, batch, step: int) -> dict:
        return self.learner.logprobs(batch, step)

    def update(self, step: int) -> dict:
        return self.learner.update(step)

    def save(self, path: str, counters: dict) -> str:
        """A checkpoint of :mod:`trajkit.rl.checkpoint`'s layout, the controller's counters given."""
        from trajkit.rl.checkpoint import save_checkpoint

        return save_checkpoint(self.side, self.tokenizer, counters, path)

    def load(self, path: str) -> dict:
        """Restore a checkpoint's weights and optimisers here; -> the controller's counters (step, stream, alarm)."""
        from trajkit.rl.checkpoint import load_checkpoint

        return load_checkpoint(self.side, path)


class RolloutWorker:
    """One rollout backend of a run, as a Ray actor."""

    def __init__(self, cfg, index: int):
        from trajkit.rl.build import build_models, build_tokenizer
        from trajkit.rl.rollout import Rollout

        _threads(cfg)
        self.cfg, self.index = cfg, index
        self.tokenizer = build_tokenizer(cfg)
        policy, draft = build_models(cfg, self.tokenizer)
        self.rollout = Rollout(cfg, policy, draft)  # its backend holds inference copies; weights come by load
        self.task = None  # an agent-style task whose episodes run here (set_task)

    def info(self) -> dict:
        b = self.rollout.backend  # with what a gateway over the workers needs: the window, the stop ids
        return {"pid": os.getpid(), "index": self.index, "backend": b.name, "guarantees": b.guarantees,
                "vocab_size": b.vocab_size, "num_params": b.num_params, "context_window": b.context_window,
                "generation_config": b.generation_config}

    def load(self, weights: dict) -> int:
        """``weights``: :meth:`PolicyWorker.weights` (Ray resolves the ref it was passed as); -> the version."""
        return self.rollout.load(weights["policy"], weights["draft"])

    def vllm_actor(self):
        """The vLLM engine's actor handle (for NCCL weight transfer), None for another backend."""
        b = self.rollout.backend
        return b.actor if b.capabilities.actor else None

    def arrived(self) -> int:
        return self.rollout.backend.weights_arrived()

    def generate(self, prompt_ids, params):
        return self.rollout.backend.generate(prompt_ids, params)

    def set_task(self, task=None) -> dict:
        """The task whose episodes this worker runs (:meth:`episodes`): ``task`` as the controller gave it
        (Ray pickled it), or None: built here from the config (the registry, as the controller builds its
        own), so the harness commands, sandboxes and trial files are this node's. -> its name and this pid."""
        if task is None:
            from trajkit.envs.latency import with_latency
            from trajkit.envs.registry import make_task

            task = with_latency(make_task(self.cfg.task, self.cfg.seed, self.tokenizer), self.cfg.task, self.cfg.seed)
        self.task = task
        return {"task": task.name, "pid": os.getpid()}

    def episodes(self, rows: list, params, round_no: int, first: int) -> tuple[list, list, list[int]]:
        """Round ``round_no``'s episodes of rows ``first ..`` (``rows``: the controller's prompts) by the task's
        environment, with a gateway over this worker's backend (:meth:`trajkit.envs.agent.GatewayEnv.rollout_part`)
        -> (samples, the :class:`~trajkit.engine.types.GenerationStats` of their calls, the calls' versions).
        Every sample's ``metadata["rollout_worker"]`` is this worker's index."""
        if self.task is None:
            raise RuntimeError(f"rollout worker {self.index}: episodes asked before set_task")
        r = self.rollout
        client = r.client  # one client for every round: the gateway stays up between rounds
        client.calls.clear()
        client.versions.clear()
        samples = self.task.env.rollout_part(client, rows, params, round_no, first)
        for s in samples:
            s.metadata["rollout_worker"] = self.index
        return samples, list(client.calls), list(client.versions)

    def degraded(self) -> list[str]:
        """What this worker's gateway degraded for its backend (``Gateway.degraded``; [] before any episode)."""
        gateway = getattr(self.task.env, "gateway", None) if self.task is not None else None
        return list(gateway.degraded) if gateway is not None else []

    def stats(self) -> dict:
        return self.rollout.backend.stats()

    def close(self) -> None:
        if self.task is not None and hasattr(self.task.env, "close"):
            self.task.env.close()  # its gateway's server
        self.rollout.close()
