"""The RL trainer: builds every component from a :class:`TrainConfig` and runs five-stage steps.

From Python, as TRL's ``GRPOTrainer`` is used (model folder or module, a dataset with a ``prompt`` column,
reward functions)::

    from trajkit.rl import Trainer
    trainer = Trainer(model="path/to/hf-folder", train_dataset=ds, reward_funcs=[exact, fmt],
                      config={"steps": 50, "rollout": {"group_size": 8}})
    history = trainer.train()

or from a config file (``trajkit train CONFIG``)::

    trainer = Trainer(load_config("examples/rl_rep.yaml", ["steps=10"]))
    for _ in range(trainer.cfg.steps):
        result = trainer.step_once()          # one step of trajkit.rl.step.rl_step, logged
    trainer.save(); trainer.close()

Everything a step needs lives in one typed :class:`~trajkit.rl.state.TrainState` built by
:func:`build_state`: the tokenizer, the task and its prompt stream, the reward functions, the policy and
its optimiser, the frozen reference (when ``loss.kl_coef > 0``), the draft and its optimiser (when
distilled), the :class:`~trajkit.rl.rollout.Rollout` that owns the engine and the mismatch alarm. The
trainer adds the logger, evaluation and checkpoint schedule.
"""
from __future__ import annotations

import math
import os
from dataclasses import replace

import torch

from trajkit.config import from_dict
from trajkit.errors import ConfigError
from trajkit.models.chat import stop_token_ids
from trajkit.models.hub import is_hub_name
from trajkit.models.load import load_tokenizer
from trajkit.rl.build import build_tokenizer
from trajkit.rl.checkpoint import load_checkpoint, save_checkpoint
from trajkit.rl.config import TrainConfig, load_config, to_dict
from trajkit.envs.data import DatasetTask
from trajkit.rl.evalitems import append_eval_items
from trajkit.envs.latency import with_latency
from trajkit.rl.learner import build_policy_side
from trajkit.rl.logs import RunLogger
from trajkit.rl.mismatch import MismatchAlarm
from trajkit.envs.registry import make_task
from trajkit.envs.rewards import RewardSet, resolve
from trajkit.rl.producer import Producer, async_step
from trajkit.rl.rollout import Rollout
from trajkit.rl.sampler import make_stream, rollout_profiler
from trajkit.rl.state import TrainState
from trajkit.rl.step import StepResult, rl_step, rollout_params
from trajkit.envs.base import Task

EVAL_SEED = 987_654


def make_rewards(task: Task, cfg: TrainConfig, reward_funcs=None, reward_weights=None) -> RewardSet:
    """The run's rewards: ``reward_funcs`` (callables or import paths) if given, else ``cfg.rewards``, else the
    task's own; weights from ``reward_weights`` or ``cfg.reward_weights`` (default 1 each)."""
    if reward_funcs is not None:
        funcs = [reward_funcs] if callable(reward_funcs) or isinstance(reward_funcs, str) else list(reward_funcs)
    else:
        funcs = list(cfg.rewards) or list(getattr(task, "reward_funcs", []))
    if not funcs:
        raise ConfigError(f"task {getattr(task, 'name', task)!r} has no reward functions; give rewards: "
                          "[pkg.mod:func] in the config or reward_funcs=[...] to Trainer")
    funcs = [resolve(f, f"rewards[{i}]") for i, f in enumerate(funcs)]
    weights = reward_weights if reward_weights is not None else cfg.reward_weights
    return RewardSet.build(funcs, weights)


def make_alarm(cfg: TrainConfig) -> MismatchAlarm:
    m = cfg.mismatch
    return MismatchAlarm(m.abs_threshold, m.jump_factor, m.min_jump)


def build_state(cfg: TrainConfig, *, tokenizer=None, policy=None, task: Task | None = None, reward_funcs=None,
                reward_weights=None, backend=None) -> TrainState:
    """Every component of a run, built from ``cfg`` (and restored from ``checkpoint.resume_from``); a given
    ``tokenizer``, ``policy`` (an HF causal LM module), ``task``, ``reward_funcs`` or ``backend`` (a running
    :mod:`trajkit.backends` backend of kind ``rollout.backend``, which the run then uses but never closes)
    replaces what ``cfg`` would build."""
    tokenizer = tokenizer if tokenizer is not None else build_tokenizer(cfg)
    side = build_policy_side(cfg, tokenizer, policy)
    policy, draft = side.policy, side.draft
    if policy.config.vocab_size < len(tokenizer):
        raise ConfigError(f"policy: its vocabulary ({policy.config.vocab_size}) is smaller than the "
                          f"tokenizer's ({len(tokenizer)})")
    task = with_latency(task if task is not None else make_task(cfg.task, cfg.seed, tokenizer), cfg.task, cfg.seed)
    state = TrainState(
        cfg=cfg, tokenizer=tokenizer, task=task, rewards=make_rewards(task, cfg, reward_funcs, reward_weights),
        stream=make_stream(cfg, task), side=side, rollout=Rollout(cfg, policy, draft, backend),
        alarm=make_alarm(cfg))
    if cfg.rollout.sampler == "difficulty":
        state.stream.profiler = rollout_profiler(state)
    if cfg.checkpoint.resume_from:
        state.restore(load_checkpoint(side, cfg.checkpoint.resume_from))
    return state


def trl_args_config(args, config, train_dataset) -> TrainConfig:
    """``Trainer(args=GRPOConfig(...))``: TRL's settings as a :class:`TrainConfig` (not with ``config=``)."""
    from trajkit.envs.data import read_rows
    from trajkit.rl.trl_config import from_trl

    if config is not None:
        raise ConfigError("give Trainer either config= (trajkit's sections) or args= (TRL's GRPOConfig), not both")
    return from_trl(args, num_prompts=len(read_rows(train_dataset)) if train_dataset is not None else None)


def as_config(config) -> TrainConfig:
    """A :class:`TrainConfig` from itself, a dict of sections, a YAML path or a packaged config's name, or
    None (defaults)."""
    if isinstance(config, TrainConfig):
        return config
    if config is None or isinstance(config, dict):
        return from_dict(TrainConfig, config or {})
    if isinstance(config, (str, os.PathLike)):
        return load_config(os.fspath(config))
    raise ConfigError(f"config must be a TrainConfig, a dict, a YAML path or None, got {type(config).__name__}")


class Trainer:
    """A :class:`TrainState` plus its logger: steps, evaluation, checkpoints.

    ``config``: a :class:`TrainConfig`, a dict of sections, a YAML path or packaged config name, or None;
    or ``args``: TRL's ``GRPOConfig`` or a dict of its fields instead (:mod:`trajkit.rl.trl_config`).
    ``model``: a local HF folder (sets ``policy.source=path``), a hub name in the local Hugging Face cache
    (``policy.source=hub``) or a causal LM module (then ``tokenizer`` is required); ``tokenizer``: a
    tokenizer or its folder. ``train_dataset``/``eval_dataset``: a
    ``datasets.Dataset``, a list of rows, or a JSONL/Parquet path with a ``prompt`` column (the task becomes
    :class:`~trajkit.envs.data.DatasetTask`); or any ``task`` object. ``reward_funcs``: TRL-style reward
    callables or import paths, weighted by ``reward_weights``.
    """

    def __init__(self, config=None, *, model=None, tokenizer=None, train_dataset=None, eval_dataset=None,
                 reward_funcs=None, reward_weights=None, task: Task | None = None, logger: bool = True,
                 backend=None, args=None):
        cfg = as_config(config) if args is None else trl_args_config(args, config, train_dataset)
        policy = None
        if isinstance(model, (str, os.PathLike)):
            source = "hub" if is_hub_name(os.fspath(model)) else "path"
            cfg = replace(cfg, policy=replace(cfg.policy, source=source, path=os.fspath(model)))
        elif model is not None:
            if tokenizer is None:
                raise ConfigError("Trainer(model=<module>) needs tokenizer= (a tokenizer or its folder)")
            policy = model
        if isinstance(tokenizer, (str, os.PathLike)):
            tokenizer = load_tokenizer(os.fspath(tokenizer), what="tokenizer")
        self.cfg = cfg
        if cfg.threads > 0:
            torch.set_num_threads(cfg.threads)
        if train_dataset is not None:
            if task is not None:
                raise ConfigError("give Trainer either train_dataset= or task=, not both")
            tok = tokenizer if tokenizer is not None else build_tokenizer(cfg)
            task = DatasetTask(train_dataset, tok, eval_dataset, seed=cfg.seed, eval_fraction=cfg.task.eval_fraction,
                               strict=cfg.task.strict, shuffle=cfg.task.shuffle)
            tokenizer = tok
        elif eval_dataset is not None:
            raise ConfigError("eval_dataset= needs train_dataset=")
        self.state = self.build(cfg, tokenizer=tokenizer, policy=policy, task=task, reward_funcs=reward_funcs,
                                backend=backend, reward_weights=reward_weights)
        self.logger = RunLogger(cfg.log, to_dict(cfg)) if logger else None
        self.producer: Producer | None = None  # rollout.mode=async: started by the first step

    def build(self, cfg: TrainConfig, **given) -> TrainState:
        """The run's :class:`TrainState` (:func:`build_state`); :class:`trajkit.cluster.ClusterTrainer` builds
        a Ray run's instead."""
        if cfg.cluster.ray:
            raise ConfigError("cluster.ray=true runs the step on Ray actors: use trajkit.cluster.ClusterTrainer "
                              "(what `trajkit train` runs for it), or set cluster.ray=false")
        if cfg.policy.fsdp:
            raise ConfigError("policy.fsdp=true shards the policy over torchrun's ranks: use trajkit.rl.sharded.train "
                              "(what `torchrun ... -m trajkit.cli.main train` runs), or set policy.fsdp=false")
        return build_state(cfg, **given)

    @property
    def step(self) -> int:
        return self.state.step

    def _next(self) -> StepResult:
        """``rl_step``, or with ``rollout.mode=async`` the producer's next batch (started on first use, after
        pushing the current policy; :mod:`trajkit.rl.producer`)."""
        if self.cfg.rollout.mode == "sync":
            return rl_step(self.state)
        if self.producer is None:
            self.state.rollout.push(self.state.learner, self.state.step)
            self.producer = Producer(self.state, self.state.step)
        return async_step(self.state, self.producer)

    def step_once(self) -> StepResult:
        """One RL step, logged (metrics, samples) and checkpointed on schedule."""
        result = self._next()
        if self.cfg.eval.every and result.step % self.cfg.eval.every == 0:
            result.metrics.update(self.evaluate())
        if self.logger is not None:
            self.logger.log(result.step, result.metrics)
            self.logger.samples(result.step, result.samples, self.state.tokenizer)
        every = self.cfg.checkpoint.every
        if every and result.step % every == 0:
            self.save()
        return result

    def evaluate(self) -> dict:
        """Mean reward on the fixed ``eval`` prompts (the same for every run seed), ``eval.samples`` each; the
        sampling seed depends on the run seed only, so the same run evaluates the same way every time. A
        dataset task evaluates on at most its eval split's rows. A logged run also appends each item's
        scores to ``eval_items.jsonl`` (:mod:`trajkit.rl.evalitems`)."""
        s = self.state
        s.rollout.push(s.learner, s.step)
        count = self.cfg.eval.num_prompts
        if hasattr(s.task, "num_prompts"):
            count = min(count, s.task.num_prompts("eval"))
        prompts = [s.task.prompt(i, split="eval") for i in range(count) for _ in range(self.cfg.eval.samples)]
        params = rollout_params(self.cfg, EVAL_SEED + self.cfg.seed, stop_token_ids(s.tokenizer),
                                self.cfg.eval.temperature)
        samples = s.rollout.episodes(s.task, prompts, params, s.rollout.eval_client)  # not in the gen/* counters
        rewards, per = s.rewards(samples)
        if self.logger is not None:
            append_eval_items(self.logger.out_dir, s.step, prompts, rewards)
        scored = [r for r in rewards if not math.isnan(r)]
        out = {"eval/reward": sum(scored) / len(scored) if scored else math.nan}
        out.update({f"eval/{k}": v for k, v in per.items()})
        return out

    def save(self, path: str | None = None) -> str:
        path = path or os.path.join(self.cfg.log.out_dir, "checkpoints", f"step_{self.step:06d}")
        s = self.state
        return save_checkpoint(s.side, s.tokenizer, s.counters(), path)

    def stop_rollouts(self) -> None:
        """Stop an asynchronous run's producer (its unfinished batches are dropped; the next step starts it
        again from the first prompt not yet trained)."""
        if self.producer is not None:
            self.producer.close()
            self.producer = None
            self.state.stream.cursor = self.state.stream.committed

    def close(self) -> None:
        self.stop_rollouts()
        if self.logger is not None:
            self.logger.close()
        self.state.rollout.close()
        close_env = getattr(self.state.task.env, "close", None)  # an agent task's gateway server
        if close_env is not None:
            close_env()
        close_task = getattr(self.state.task, "close", None)  # a task's own processes (the verifiers driver)
        if close_task is not None:
            close_task()


    def train(self, progress=None) -> list[dict]:
        """Run to ``cfg.steps`` steps (a resumed run does the rest), evaluating first when ``eval.every`` is
        set; saves a final checkpoint and closes the logger. -> the metrics of every step (step 0: the
        initial evaluation)."""
        history = []
        try:
            if self.cfg.eval.every and self.step == 0:
                initial = self.evaluate()
                if self.logger is not None:
                    self.logger.log(0, initial)
                history.append({"step": 0, **initial})
            while self.step < self.cfg.steps:
                result = self.step_once()
                history.append({"step": result.step, **result.metrics})
                if progress is not None:
                    progress(result)
            self.save()
        finally:
            self.close()
        return history


def train(cfg: TrainConfig, progress=None) -> list[dict]:
    """Run ``cfg.steps`` steps (minus those a resumed checkpoint already did); returns their metrics (a Ray
    run, ``cluster.ray=true``: :func:`trajkit.cluster.train`; a sharded one, ``policy.fsdp=true`` under
    torchrun: :func:`trajkit.rl.sharded.train`)."""
    return Trainer(cfg).train(progress)
