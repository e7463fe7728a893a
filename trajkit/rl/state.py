"""``TrainState``: everything one RL step reads and advances, typed, shared by the step, the checkpoints
and the trainer (no component reaches into an untyped trainer)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from trajkit.errors import ConfigError
from trajkit.rl.config import TrainConfig
from trajkit.rl.learner import LocalLearner
from trajkit.rl.mismatch import MismatchAlarm
from trajkit.rl.precision import DTYPES, grad_scaler, model_device
from trajkit.envs.rewards import RewardSet
from trajkit.rl.rollout import Rollout
from trajkit.envs.base import Prompt, Task


class PromptStream:
    """Prompts ``cursor, cursor+1, ...`` of a task's train split; the state is the cursor. ``rows``: the
    dataset rows (``Prompt.meta["row"]``) taken since the last :meth:`drain_rows`, for the step's log."""

    def __init__(self, task: Task):
        self.task, self.cursor, self.rows = task, 0, []
        self.committed: int | None = None  # async: the cursor after the last trained batch (producer ahead)

    def take(self, n: int) -> list[Prompt]:
        out = [self.task.prompt(i) for i in range(self.cursor, self.cursor + n)]
        self.cursor += n
        self.rows.extend(p.meta["row"] for p in out if "row" in p.meta)
        return out

    def drain_rows(self) -> list[int]:
        rows, self.rows = self.rows, []
        return rows

    def observe(self, indices: list[int], rewards: list[float], group_size: int) -> None:
        """The step's groups (prompt indices, raw rewards): the uniform stream does not use them
        (:class:`trajkit.rl.sampler.DifficultySampler` does)."""

    def metrics(self) -> dict:
        return {}

    def state_dict(self) -> dict:
        """The cursor of the first prompt not yet trained (``rollout.mode=async``: the producer's cursor runs
        ahead of it; what it drew beyond is regenerated on resume)."""
        return {"cursor": self.cursor if self.committed is None else self.committed}

    def load_state_dict(self, state: dict) -> None:
        if state.get("kind", "uniform") != "uniform":
            raise ConfigError(f"checkpoint.resume_from: the checkpoint was written with rollout.sampler="
                              f"{state['kind']}; resume it with rollout.sampler={state['kind']}")
        self.cursor = int(state["cursor"])
        self.committed = None


@dataclass
class TrainState:
    """A run's live state. ``step`` counts finished steps; the reference is the frozen initial policy
    (when ``loss.kl_coef > 0``); ``draft``/``draft_optimizer`` exist for trainable draft kinds; ``rewards``
    scores the task's episodes (the task's own reward functions unless the run replaced them);
    ``teacher`` scores the rollouts for on-policy distillation (when ``distill.teacher`` is set);
    ``grad_scaler`` for float16 policies (:mod:`trajkit.rl.precision`); ``learner`` runs the step's policy
    side (:mod:`trajkit.rl.learner`): a :class:`~trajkit.rl.learner.LocalLearner` over this state's own
    modules unless given. A Ray run's controller (:mod:`trajkit.cluster`) holds no policy (``policy``,
    ``optimizer`` None): its learner is the policy worker."""

    cfg: TrainConfig
    tokenizer: Any
    task: Task
    rewards: RewardSet
    stream: PromptStream  # or a trajkit.rl.sampler.DifficultySampler (the same interface)
    policy: torch.nn.Module | None
    optimizer: torch.optim.Optimizer | None
    rollout: Rollout
    alarm: MismatchAlarm
    draft: torch.nn.Module | None = None
    draft_optimizer: torch.optim.Optimizer | None = None
    reference: torch.nn.Module | None = None
    step: int = 0
    grad_scaler: Any = None  # torch.amp.GradScaler for policy.dtype=float16; made from cfg when not given
    learner: Any = None  # a trajkit.rl.learner.Learner; LocalLearner(self) when not given
    teacher: torch.nn.Module | None = None  # on-policy distillation's frozen teacher (distill.teacher)

    def __post_init__(self) -> None:
        if self.grad_scaler is None and self.policy is not None:
            self.grad_scaler = grad_scaler(model_device(self.policy), DTYPES[self.cfg.policy.dtype])
        if self.learner is None:
            self.learner = LocalLearner(self)
