"""The trainer's side of the engine: inference copies, weight sync, and grouped generation.

The engine (:class:`trajkit.engine.Engine`) owns an *inference copy* of the policy, separate from the
weights the optimiser updates; the ``weight_sync`` stage pushes the policy's ``state_dict`` into it
(``Engine.update_weights``) and, with a draft model, copies the trained draft into the drafter's own
copy (the "draft refresh"). Generation repeats each prompt ``G`` times (a group) and runs the task's
environment; every row's random stream is derived by the engine from the step's seed and the row index,
so a step's rollouts are a pure function of (weights, prompts, seed).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import torch

from trajkit.engine import Engine, GenerationStats, SamplingParams
from trajkit.engine.drafters.registry import draft_kind
from trajkit.rl.build import frozen_copy
from trajkit.rl.config import TrainConfig
from trajkit.rl.sample import Sample
from trajkit.rl.tasks import Prompt, Task

STAT_KEYS = ("new_tokens", "target_calls", "draft_calls", "row_steps", "step_tokens", "proposed", "accepted",
             "overlap_sum", "seconds", "target_seconds", "draft_seconds")


@dataclass
class GenStats:
    """Engine counters summed over the generate calls of one step (a tool episode makes several)."""

    calls: int = 0
    k: int = 0
    totals: dict = field(default_factory=lambda: {k: 0.0 for k in STAT_KEYS})
    tried: int = 0

    def add(self, s: GenerationStats) -> None:
        self.calls += 1
        self.k = max(self.k, s.num_draft_tokens)
        for key in STAT_KEYS:
            self.totals[key] += getattr(s, key)
        self.tried += sum(s.position_tried)

    def to_dict(self) -> dict:
        t = self.totals
        return {"gen/acceptance_length": t["step_tokens"] / t["row_steps"] if t["row_steps"] else 0.0,
                "gen/acceptance_rate": t["accepted"] / t["proposed"] if t["proposed"] else 0.0,
                "gen/alpha": t["overlap_sum"] / self.tried if self.tried else 0.0,
                "gen/tokens": t["new_tokens"], "gen/target_calls": t["target_calls"],
                "gen/tokens_per_s": t["new_tokens"] / t["seconds"] if t["seconds"] else 0.0,
                "gen/k": self.k, "gen/calls": self.calls}


class Rollout:
    """Engine + drafter built from inference copies of ``policy`` and ``draft``."""

    def __init__(self, cfg: TrainConfig, policy, draft=None):
        self.cfg = cfg
        self.draft_infer = frozen_copy(draft) if draft is not None else None
        kind = draft_kind(cfg.draft.kind)
        drafter = kind.drafter(self.draft_infer) if kind is not None else None
        k = cfg.draft.num_draft_tokens if drafter is not None else None
        self.engine = Engine(frozen_copy(policy), drafter=drafter, num_draft_tokens=k)
        self.stats = GenStats()

    def sync(self, policy, draft=None) -> None:
        """The ``weight_sync`` stage: policy -> engine copy; trained draft -> drafter copy."""
        self.engine.update_weights(policy.state_dict())
        if draft is not None and self.draft_infer is not None:
            with torch.no_grad():
                self.draft_infer.load_state_dict(draft.state_dict())

    def generate(self, prompt_ids: list[list[int]], params: SamplingParams):
        out = self.engine.generate(prompt_ids, params)
        self.stats.add(out.stats)
        return out

    def run(self, task: Task, rows: list[Prompt], group_size: int, params: SamplingParams) -> list[Sample]:
        """One episode per row; rows ``g*G .. g*G+G-1`` (the same prompt repeated) form group ``g``."""
        self.stats = GenStats()
        samples = task.env.rollout(self.generate, rows, params)
        for i, s in enumerate(samples):
            s.group = i // group_size
            s.policy_version = self.engine.policy_version
        return samples

    def metrics(self) -> dict:
        """The engine's counters over this step's generate calls, as ``gen/*`` metrics."""
        return self.stats.to_dict()
