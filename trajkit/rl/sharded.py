"""The sharded trainer: ``policy.fsdp=true`` under ``torchrun``, the policy split over N ranks with FSDP2.

Rank 0 is the controller and the only rollout side: it runs the whole five-stage step of
:func:`trajkit.rl.step.rl_step` (data, weight sync, generation with the engine, rewards, logs, evaluation,
checkpoints), like the in-process trainer, with a :class:`ShardedLearner` as its learner. Every call of
that learner is first broadcast to the other ranks (:func:`follow` runs them), so all N ranks run the
``logprob`` and ``policy_update`` stages together on their shards (:class:`ShardWorker`):

    weight_sync    every rank gathers the policy parameter by parameter; rank 0 keeps the full tensors
                   (on the CPU) and loads them into the engine's inference copy
    logprob        the collated batch goes to every rank; each computes the policy's (and the sharded
                   reference's) log-probs on its rows; the old log-probs are summed into the whole
                   (row-disjoint, so exact) for the mismatch metrics and TIS
    policy_update  each optimiser slice's rows split into N blocks; a rank backs its block's loss
                   (normalised by the slice's counts), FSDP2 sums the gradients, each rank steps AdamW on
                   its shard; the loss statistics are summed over the ranks

Every rank but 0 builds the policy and reference on the meta device and receives its shards from rank 0
(:func:`build_side`): only rank 0, which generates with the whole policy anyway, loads it whole.

The single-controller shape of :mod:`trajkit.cluster` (one controller, workers behind the
:class:`~trajkit.rl.learner.Learner` seam), with ``torch.distributed`` as the transport. Same seed and
config: the samples, metrics and gathered weights equal the in-process trainer's up to float32 summation
order (tests/rl/test_fsdp.py). Checkpoints: :mod:`trajkit.rl.sharded_checkpoint`.

Failure: an exception on rank 0 outside a collective is sent to every rank, which raises it as a
:class:`ShardError` naming rank 0's message; a rank that dies breaks the collective the others wait in
(gloo sees the closed connection; torchrun also stops the other ranks), and a rank that hangs makes its
peers' collectives time out after ``cluster.timeout_s``.
"""
from __future__ import annotations

import os

import torch

from trajkit.errors import ConfigError, TrajkitError
from trajkit.rl.batching import Batch, batch_logprobs, chunks
from trajkit.rl.build import build_models, build_tokenizer, frozen_copy, policy_skeleton
from trajkit.rl.config import TrainConfig
from trajkit.rl.learner import PolicySide
from trajkit.rl.fsdp import Shard, close_group, full_state, init_group, load_from_rank0, shard_model
from trajkit.rl.mismatch import mismatch_metrics
from trajkit.rl.precision import DTYPES, model_device, resolve_device
from trajkit.envs.registry import make_task
from trajkit.rl.rollout import Rollout
from trajkit.rl.state import PromptStream, TrainState
from trajkit.rl.trainer import Trainer, make_alarm, make_rewards
from trajkit.rl.update import make_optimizer, set_lr, update_policy

STOP, FAILED = "stop", "failed"


class ShardError(TrajkitError, RuntimeError):
    """Another rank of a sharded run failed; the message is that rank's."""


def build_side(cfg: TrainConfig, tokenizer, rank: int, keep=None) -> PolicySide:
    """This rank's share of the policy side: its shard of the policy and reference, the optimiser over the
    shards, and (rank 0) the draft. Rank 0 builds the models whole as in process and calls
    ``keep(policy, draft)`` on them (a torchrun rank 0 makes the engine's inference copies there); every
    other rank builds them on the meta device (:func:`trajkit.rl.build.policy_skeleton`, no draft). Both are
    sharded, then every rank receives its rows of rank 0's weights (:func:`trajkit.rl.fsdp.load_from_rank0`):
    only rank 0 ever holds the whole."""
    if rank == 0:
        policy, draft = build_models(cfg, tokenizer)
    else:
        policy, draft = policy_skeleton(cfg, tokenizer), None
    reference = frozen_copy(policy) if cfg.loss.kl_coef > 0 else None
    if keep is not None:
        keep(policy, draft)
    dtype, device = DTYPES[cfg.policy.dtype], resolve_device(cfg.policy.device)
    for model in (policy, reference):
        if model is not None:
            whole = model.state_dict() if rank == 0 else None
            shard_model(model, dtype)
            load_from_rank0(model, whole, device)
            del whole
    return PolicySide(cfg, policy, make_optimizer(policy, cfg), draft=draft, reference=reference)


class ShardWorker:
    """What every rank runs for the learner's calls (every rank must make the same calls in order)."""

    def __init__(self, cfg: TrainConfig, shard: Shard, side: PolicySide):
        self.cfg, self.shard, self.side = cfg, shard, side
        self._last: tuple | None = None  # (batch, whole old log-probs, reference log-probs at own rows)

    def own_rows(self, rows: int) -> torch.Tensor:
        """This rank's rows of a batch of ``rows``: its block of every optimiser slice."""
        per_step = -(-rows // self.cfg.optim.minibatches)
        return torch.cat([self.shard.rows(r) for r in chunks(rows, per_step)])

    def weights(self) -> dict:
        return full_state(self.side.policy)

    def _logprobs(self, model, batch: Batch, rows: torch.Tensor) -> torch.Tensor:
        """``[B, L-1]`` log-probs of ``model`` at ``rows`` (zeros elsewhere)."""
        cfg = self.cfg
        part, _ = batch_logprobs(model, batch.select(rows), cfg.rollout.temperature, cfg.optim.micro_batch_size,
                                 dtype=DTYPES[cfg.policy.dtype])
        out = torch.zeros_like(batch.engine_logp)
        out[rows, :part.shape[1]] = part
        return out

    def logprobs(self, batch: Batch, step: int) -> dict:
        b = batch.input_ids.shape[0]
        if b % (self.cfg.optim.minibatches * self.shard.world):
            raise ConfigError(f"policy.fsdp: a batch of {b} rows does not split over optim.minibatches="
                              f"{self.cfg.optim.minibatches} x {self.shard.world} ranks")
        batch = batch.to(model_device(self.side.policy))
        rows = self.own_rows(b)
        old = self.shard.combine(self._logprobs(self.side.policy, batch, rows))
        ref = self._logprobs(self.side.reference, batch, rows) if self.side.reference is not None else None
        self._last = (batch, old, ref)
        return mismatch_metrics(batch.engine_logp, old, batch.mask)

    def update(self, step: int) -> dict:
        if self._last is None:
            raise RuntimeError("ShardWorker.update before logprobs: the update needs this step's log-probs")
        (batch, old, ref), self._last = self._last, None
        s, cfg, metrics = self.side, self.cfg, {}
        if cfg.optim.lr_schedule != "constant" or cfg.optim.warmup_steps:
            metrics["optim/lr_factor"] = set_lr(s.optimizer, cfg, step)
        metrics.update(update_policy(s.policy, s.optimizer, batch, old, ref, cfg, shard=self.shard))
        return metrics

    def save(self, folder: str) -> dict:
        from trajkit.rl.fsdp import save_shards

        save_shards(self.side.policy, self.side.optimizer if self.cfg.log.save_optimizer else None, folder)
        return full_state(self.side.policy)

    def load(self, folder: str) -> None:
        from trajkit.rl.fsdp import load_shards

        load_shards(self.side.policy, self.side.optimizer, folder)


def _broadcast(message: list) -> list:
    import torch.distributed as dist

    dist.broadcast_object_list(message, src=0)
    return message


class ShardedLearner:
    """Rank 0's :class:`~trajkit.rl.learner.Learner`: each call is broadcast, then run here like everywhere."""

    def __init__(self, worker: ShardWorker):
        self.worker = worker
        self.busy = False  # inside a call every rank runs (a collective may be in flight)

    def run(self, name: str, *args):
        _broadcast([name, args])
        self.busy = True
        out = getattr(self.worker, name)(*args)
        self.busy = False
        return out

    def push_weights(self, rollout) -> None:
        rollout.load(self.run("weights"))

    def logprobs(self, batch: Batch, step: int) -> dict:
        return self.run("logprobs", batch, step)

    def update(self, step: int) -> dict:
        return self.run("update", step)

    def stop(self, error: BaseException | None = None) -> None:
        """Release the other ranks: done, or failed with ``error``'s message (not sent from inside a call,
        where the peers wait in a collective: they fail on its timeout or closed connection instead)."""
        if error is None:
            _broadcast([STOP, ()])
        elif not self.busy:
            _broadcast([FAILED, (f"{type(error).__name__}: {error}",)])


def follow(worker: ShardWorker) -> None:
    """A rank > 0: run rank 0's calls until it stops; raise :class:`ShardError` when rank 0 failed."""
    while True:
        name, args = _broadcast([None, None])
        if name == STOP:
            return
        if name == FAILED:
            raise ShardError(f"rank 0 failed: {args[0]}")
        getattr(worker, name)(*args)


def build_sharded_state(cfg: TrainConfig, shard: Shard, *, tokenizer=None, policy=None, task=None,
                        reward_funcs=None, reward_weights=None, backend=None) -> TrainState:
    """Rank 0's :class:`~trajkit.rl.state.TrainState` (as :func:`trajkit.rl.trainer.build_state`): the rollout's
    inference copies made from the whole policy before it is sharded, the learner over every rank."""
    if policy is not None or backend is not None:
        raise ConfigError("policy.fsdp=true builds its policy and backend from the config on every rank; give "
                          "policy.path / rollout.backend instead of a module or a backend object")
    tokenizer = tokenizer if tokenizer is not None else build_tokenizer(cfg)
    made = {}
    side = build_side(cfg, tokenizer, shard.rank, keep=lambda p, d: made.setdefault("rollout", Rollout(cfg, p, d)))
    task = task if task is not None else make_task(cfg.task, cfg.seed, tokenizer)
    state = TrainState(
        cfg=cfg, tokenizer=tokenizer, task=task, rewards=make_rewards(task, cfg, reward_funcs, reward_weights),
        stream=PromptStream(task), side=side, rollout=made["rollout"], alarm=make_alarm(cfg),
        learner=ShardedLearner(ShardWorker(cfg, shard, side)))
    if cfg.checkpoint.resume_from:
        from trajkit.rl.sharded_checkpoint import load_checkpoint

        state.restore(load_checkpoint(side, cfg.checkpoint.resume_from,
                                      lambda folder: state.learner.run("load", folder)))
    return state


class ShardedTrainer(Trainer):
    """:class:`~trajkit.rl.trainer.Trainer` on rank 0 of a sharded run (``shard``: its place): the state's
    learner is the :class:`ShardedLearner` over every rank; checkpoints are
    :mod:`trajkit.rl.sharded_checkpoint`'s."""

    def __init__(self, config, shard: Shard, **given):
        self.shard = shard
        super().__init__(config, **given)

    def build(self, cfg: TrainConfig, **given) -> TrainState:
        return build_sharded_state(cfg, self.shard, **given)

    def save(self, path: str | None = None) -> str:
        from trajkit.rl.sharded_checkpoint import save_checkpoint

        path = path or os.path.join(self.cfg.log.out_dir, "checkpoints", f"step_{self.step:06d}")
        s = self.state
        return save_checkpoint(s.side, s.tokenizer, s.counters(), path,
                               lambda folder: s.learner.run("save", folder))


def train(cfg: TrainConfig, progress=None) -> list[dict]:
    """Run a sharded training on this rank of a torchrun launch (rank 0: -> the metrics of every step, as
    :func:`trajkit.rl.trainer.train`; other ranks: -> []). A process group the caller made stays open
    (several runs in one launch); one made here is closed once every rank is done."""
    if cfg.threads > 0:
        torch.set_num_threads(cfg.threads)
    shard, made = init_group(cfg)
    if shard.rank != 0:
        side = build_side(cfg, build_tokenizer(cfg), shard.rank)
        follow(ShardWorker(cfg, shard, side))  # a resumed run's load comes as rank 0's first call
        if made:
            close_group()
        return []
    trainer = None
    try:
        trainer = ShardedTrainer(cfg, shard)
        history = trainer.train(progress)
    except BaseException as exc:
        learner = getattr(getattr(trainer, "state", None), "learner", None)
        (learner or ShardedLearner(None)).stop(exc)
        raise
    trainer.state.learner.stop()
    if made:
        close_group()
    return history
