"""The RL trainer: builds every component from a :class:`TrainConfig` and runs five-stage steps.

    trainer = Trainer(load_config("examples/rl_rep.yaml", ["steps=10"]))
    for _ in range(trainer.cfg.steps):
        result = trainer.step_once()          # one step of trajkit.rl.step.rl_step, logged
    trainer.save(); trainer.close()

Everything a step needs lives in one typed :class:`~trajkit.rl.state.TrainState` built by
:func:`build_state`: the tokenizer, the task and its prompt stream, the policy and its optimiser, the
frozen reference (when ``loss.kl_coef > 0``), the draft and its optimiser (when distilled), the
:class:`~trajkit.rl.rollout.Rollout` that owns the engine and the mismatch alarm. The trainer adds the
logger, evaluation and checkpoint schedule.
"""
from __future__ import annotations

import os

import torch

from trajkit.errors import ConfigError
from trajkit.rl.build import build_models, build_tokenizer, frozen_copy
from trajkit.rl.checkpoint import load_checkpoint, save_checkpoint
from trajkit.rl.config import TrainConfig, to_dict
from trajkit.rl.logs import RunLogger
from trajkit.rl.mismatch import MismatchAlarm
from trajkit.rl.registry import make_task
from trajkit.rl.rollout import Rollout
from trajkit.rl.state import PromptStream, TrainState
from trajkit.rl.step import StepResult, rl_step, rollout_params
from trajkit.rl.update import make_optimizer

EVAL_SEED = 987_654


def build_state(cfg: TrainConfig) -> TrainState:
    """Every component of a run, built from ``cfg`` (and restored from ``checkpoint.resume_from``)."""
    tokenizer = build_tokenizer(cfg)
    policy, draft = build_models(cfg, tokenizer)
    if policy.config.vocab_size < len(tokenizer):
        raise ConfigError(f"policy: its vocabulary ({policy.config.vocab_size}) is smaller than the "
                          f"tokenizer's ({len(tokenizer)})")
    task = make_task(cfg.task, cfg.seed, tokenizer)
    m = cfg.mismatch
    distill = cfg.draft.distill and draft is not None
    state = TrainState(
        cfg=cfg, tokenizer=tokenizer, task=task, stream=PromptStream(task), policy=policy,
        optimizer=make_optimizer(policy, cfg), rollout=Rollout(cfg, policy, draft),
        alarm=MismatchAlarm(m.abs_threshold, m.jump_factor, m.min_jump), draft=draft,
        draft_optimizer=make_optimizer(draft, cfg, lr=cfg.draft.distill_lr, name="adamw") if distill else None,
        reference=frozen_copy(policy) if cfg.loss.kl_coef > 0 else None)
    if cfg.checkpoint.resume_from:
        load_checkpoint(state, cfg.checkpoint.resume_from)
    return state


class Trainer:
    """A :class:`TrainState` plus its logger: steps, evaluation, checkpoints."""

    def __init__(self, cfg: TrainConfig, logger: bool = True):
        self.cfg = cfg
        if cfg.threads > 0:
            torch.set_num_threads(cfg.threads)
        self.state = build_state(cfg)
        self.logger = RunLogger(cfg.log.out_dir, to_dict(cfg), cfg.log.tensorboard, cfg.log.dump_samples) \
            if logger else None

    @property
    def step(self) -> int:
        return self.state.step

    def step_once(self) -> StepResult:
        """One RL step, logged (metrics, samples) and checkpointed on schedule."""
        result = rl_step(self.state)
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
        """Mean reward on the fixed ``eval`` prompts (the same for every run seed), one sample each; the
        sampling seed depends on the run seed only, so the same run evaluates the same way every time."""
        s = self.state
        s.rollout.sync(s.policy, s.draft)
        prompts = [s.task.prompt(i, split="eval") for i in range(self.cfg.eval.num_prompts)]
        params = rollout_params(self.cfg, EVAL_SEED + self.cfg.seed, s.tokenizer.eos_token_id,
                                self.cfg.eval.temperature)
        samples = s.task.env.rollout(s.rollout.engine.generate, prompts, params)
        rewards = s.task.reward(samples)
        return {"eval/reward": sum(rewards) / len(rewards)}

    def save(self, path: str | None = None) -> str:
        path = path or os.path.join(self.cfg.log.out_dir, "checkpoints", f"step_{self.step:06d}")
        return save_checkpoint(self.state, path)

    def close(self) -> None:
        if self.logger is not None:
            self.logger.close()


def train(cfg: TrainConfig, progress=None) -> list[dict]:
    """Run ``cfg.steps`` steps (minus those a resumed checkpoint already did); returns their metrics."""
    trainer = Trainer(cfg)
    history = []
    try:
        if cfg.eval.every and trainer.step == 0:
            initial = trainer.evaluate()
            trainer.logger.log(0, initial)
            history.append({"step": 0, **initial})
        while trainer.step < cfg.steps:
            result = trainer.step_once()
            history.append({"step": result.step, **result.metrics})
            if progress is not None:
                progress(result)
        trainer.save()
    finally:
        trainer.close()
    return history
