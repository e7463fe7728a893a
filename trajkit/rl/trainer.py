"""The RL trainer: builds every component from a :class:`TrainConfig` and runs five-stage steps.

    trainer = Trainer(load_config("examples/rl_rep.yaml", ["steps=10"]))
    for _ in range(trainer.cfg.steps):
        result = trainer.step_once()          # one step of trajkit.rl.step.rl_step, logged
    trainer.save(); trainer.close()

Everything a step needs lives here: the task and its prompt stream, the policy and its optimiser, the
frozen reference (when ``loss.kl_coef > 0``), the draft and its optimiser (when distilled), the
:class:`~trajkit.rl.rollout.Rollout` that owns the engine, the mismatch alarm and the logger.
"""
from __future__ import annotations

import os

import torch

from trajkit.errors import ConfigError
from trajkit.rl.checkpoint import load_checkpoint, save_checkpoint
from trajkit.rl.codec import ByteCodec
from trajkit.rl.config import TrainConfig, to_dict
from trajkit.rl.logs import RunLogger
from trajkit.rl.mismatch import MismatchAlarm
from trajkit.rl.models import build_models, frozen_copy
from trajkit.rl.registry import make_task
from trajkit.rl.rollout import Rollout
from trajkit.rl.step import StepResult, rl_step, rollout_params
from trajkit.rl.tasks import Task
from trajkit.rl.update import make_optimizer

EVAL_SEED = 987_654


class PromptStream:
    """Prompts ``cursor, cursor+1, ...`` of a task's train split; the state is the cursor."""

    def __init__(self, task: Task):
        self.task, self.cursor = task, 0

    def take(self, n: int):
        out = [self.task.prompt(i) for i in range(self.cursor, self.cursor + n)]
        self.cursor += n
        return out

    def state_dict(self) -> dict:
        return {"cursor": self.cursor}

    def load_state_dict(self, state: dict) -> None:
        self.cursor = int(state["cursor"])


class Trainer:
    def __init__(self, cfg: TrainConfig, logger: bool = True):
        self.cfg = cfg
        if cfg.threads > 0:
            torch.set_num_threads(cfg.threads)
        self.codec = ByteCodec()
        self.task = make_task(cfg.task, cfg.seed)
        self.policy, self.draft = build_models(cfg)
        if self.policy.config.vocab_size != self.codec.vocab_size:
            raise ConfigError(f"policy: vocabulary {self.policy.config.vocab_size} != the byte codec's "
                              f"{self.codec.vocab_size}")
        self.reference = frozen_copy(self.policy) if cfg.loss.kl_coef > 0 else None
        self.rollout = Rollout(cfg, self.policy, self.draft)
        self.optimizer = make_optimizer(self.policy.parameters(), cfg)
        self.draft_optimizer = (make_optimizer(self.draft.parameters(), cfg, lr=cfg.draft.distill_lr)
                                if cfg.draft.distill else None)
        self.stream = PromptStream(self.task)
        m = cfg.mismatch
        self.alarm = MismatchAlarm(m.abs_threshold, m.jump_factor, m.min_jump)
        self.step = 0
        if cfg.checkpoint.resume_from:
            load_checkpoint(self, cfg.checkpoint.resume_from)
        self.logger = RunLogger(cfg.log.out_dir, to_dict(cfg), cfg.log.tensorboard, cfg.log.dump_samples) \
            if logger else None

    def step_once(self) -> StepResult:
        """One RL step, logged (metrics, samples) and checkpointed on schedule."""
        result = rl_step(self)
        if self.cfg.eval.every and result.step % self.cfg.eval.every == 0:
            result.metrics.update(self.evaluate())
        if self.logger is not None:
            self.logger.log(result.step, result.metrics)
            self.logger.samples(result.step, result.samples, self.codec)
        every = self.cfg.checkpoint.every
        if every and result.step % every == 0:
            self.save()
        return result

    def evaluate(self) -> dict:
        """Mean reward on the fixed ``eval`` prompts (the same for every run seed), one sample each; the
        sampling seed depends on the run seed only, so the same run evaluates the same way every time."""
        self.rollout.sync(self.policy, self.draft)
        prompts = [self.task.prompt(i, split="eval") for i in range(self.cfg.eval.num_prompts)]
        params = rollout_params(self.cfg, EVAL_SEED + self.cfg.seed, self.codec.eos_id, self.cfg.eval.temperature)
        samples = self.task.env.rollout(self.rollout.engine.generate, prompts, params)
        rewards = self.task.reward(samples)
        return {"eval/reward": sum(rewards) / len(rewards)}

    def save(self, path: str | None = None) -> str:
        path = path or os.path.join(self.cfg.log.out_dir, "checkpoints", f"step_{self.step:06d}")
        return save_checkpoint(self, path)

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
