"""``TrainState``: everything one RL step reads and advances, typed, shared by the step, the checkpoints
and the trainer (no component reaches into an untyped trainer)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from trajkit.errors import ConfigError
from trajkit.rl.config import TrainConfig
from trajkit.rl.learner import LocalLearner, PolicySide
from trajkit.rl.mismatch import MismatchAlarm
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
    """A run's live state. ``step`` counts finished steps; ``side`` is the policy side
    (:class:`~trajkit.rl.learner.PolicySide`: the policy, its optimiser, the frozen reference, the draft and its
    optimiser, the float16 loss scaler, the distillation teacher); ``rewards`` scores the task's episodes (the
    task's own reward functions unless the run replaced them); ``learner`` runs the step's policy side
    (:mod:`trajkit.rl.learner`): a :class:`~trajkit.rl.learner.LocalLearner` over ``side`` unless given. A
    sharded run's rank 0 holds its own shard as ``side`` and a learner over every rank; a Ray run's controller
    (:mod:`trajkit.cluster`) holds no policy side (``side`` None): its learner is the policy worker."""

    cfg: TrainConfig
    tokenizer: Any
    task: Task
    rewards: RewardSet
    stream: PromptStream  # or a trajkit.rl.sampler.DifficultySampler (the same interface)
    side: PolicySide | None
    rollout: Rollout
    alarm: MismatchAlarm
    step: int = 0
    learner: Any = None  # a trajkit.rl.learner.Learner; LocalLearner(self.side) when not given

    def __post_init__(self) -> None:
        if self.learner is None:
            self.learner = LocalLearner(self.side)

    def counters(self) -> dict:
        """What a checkpoint keeps of the run besides the policy side: ``{"step", "stream", "alarm"}``
        (the last two as state dicts)."""
        return {"step": self.step, "stream": self.stream.state_dict(), "alarm": self.alarm.state_dict()}

    def restore(self, counters: dict) -> None:
        """The inverse of :meth:`counters` (a checkpoint's, on resume)."""
        self.stream.load_state_dict(counters["stream"])
        self.alarm.load_state_dict(counters["alarm"])
        self.step = int(counters["step"])

    def __getattr__(self, name: str):
        if name in _MOVED_TO_SIDE:
            raise AttributeError(f"TrainState.{name} is now TrainState.side.{name} (the policy side, "
                                 f"trajkit.rl.learner.PolicySide; None on a Ray run's controller)")
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")


_MOVED_TO_SIDE = frozenset({"policy", "optimizer", "draft", "draft_optimizer", "reference", "grad_scaler", "teacher"})
