"""The five stages of one synchronous RL step, as shared constants, and the timer that measures them.

NeMo RL splits every synchronous GRPO step into data loading, weight synchronisation ("prepare"),
rollout generation, log-probability recomputation and policy optimisation, and reports each stage's
share of the step. trajkit uses the same five names everywhere: the trainer, the JSONL/TensorBoard logs
and ``trajkit bench train`` all key their numbers by these constants.
"""
from __future__ import annotations

import time
from contextlib import contextmanager

DATA = "data"  # sample prompts, form groups of G completions
WEIGHT_SYNC = "weight_sync"  # push policy (and draft) weights into the engine's inference copies
GENERATION = "generation"  # roll out with the engine, speculative or plain
LOGPROB = "logprob"  # recompute policy (and reference) log-probs on the rollout tokens
POLICY_UPDATE = "policy_update"  # loss, backward, optimiser step (and draft distillation)

STAGES: tuple[str, ...] = (DATA, WEIGHT_SYNC, GENERATION, LOGPROB, POLICY_UPDATE)
REWARD = "reward"  # sub-stage of generation: the task's reward functions


class StageTimer:
    """Wall-clock seconds per stage of one step; ``with timer.stage(GENERATION): ...``.

    >>> t = StageTimer()
    >>> with t.stage(DATA):
    ...     pass
    >>> sorted(t.seconds) == sorted(STAGES) and t.seconds[DATA] >= 0.0
    True
    """

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {name: 0.0 for name in STAGES}
        self.sub: dict[str, float] = {}  # "parent/name" -> seconds, already inside the parent's time

    @contextmanager
    def substage(self, parent: str, name: str):
        """Time a part of stage ``parent`` (logged as ``time/parent/name``; not added to the step)."""
        if parent not in self.seconds:
            raise KeyError(f"unknown stage {parent!r}; stages are {STAGES}")
        key = f"{parent}/{name}"
        start = time.perf_counter()
        try:
            yield
        finally:
            self.sub[key] = self.sub.get(key, 0.0) + time.perf_counter() - start

    @contextmanager
    def stage(self, name: str):
        if name not in self.seconds:
            raise KeyError(f"unknown stage {name!r}; stages are {STAGES}")
        start = time.perf_counter()
        try:
            yield
        finally:
            self.seconds[name] += time.perf_counter() - start

    @property
    def total(self) -> float:
        return sum(self.seconds.values())

    def shares(self) -> dict[str, float]:
        """Fraction of the step spent in each stage (sums to 1 when the step took any time)."""
        total = self.total
        return {k: (v / total if total > 0 else 0.0) for k, v in self.seconds.items()}

    def to_dict(self) -> dict[str, float]:
        out = {f"time/{k}": v for k, v in self.seconds.items()}
        out.update({f"share/{k}": v for k, v in self.shares().items()})
        out.update({f"time/{k}": v for k, v in self.sub.items()})
        out["time/step"] = self.total
        return out

    def line(self) -> str:
        """``step 1.23s | data 0.01s (1%) | ...`` for the console."""
        shares = self.shares()
        parts = [f"{k} {self.seconds[k]:.2f}s ({100 * shares[k]:.0f}%)" for k in STAGES]
        return f"step {self.total:.2f}s | " + " | ".join(parts)
