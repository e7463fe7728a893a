"""A long-tailed episode wall time around any environment (``task.latency_median_s``, ``task.latency_sigma``).

Agent episodes wait on tools, sandboxes and verifiers whose times are long-tailed; a synchronous step waits
for the slowest episode of its batch. :class:`LatencyEnv` reproduces that on any task: after the inner
environment's episodes, each episode ``i`` of a batch "waits" ``median * exp(sigma * z_i)`` seconds (a
lognormal with that median; ``z_i`` standard normal, seeded by the run seed, the prompt's stream index and
its row in the group), all of a batch's episodes concurrently, so the batch takes the longest of them.
The waits are real sleeps (they release the interpreter, as a tool's subprocess would). It is what
``trajkit bench train --arm sync= --arm async="rollout.mode=async"`` measures asynchronous rollouts on.
"""
from __future__ import annotations

import math
import random
import time
from typing import Sequence


def episode_latency(seed: int, index: int, row: int, median_s: float, sigma: float) -> float:
    """The wait of episode ``row`` of prompt ``index``: ``median_s * exp(sigma * z)``, ``z ~ N(0, 1)``.

    >>> episode_latency(0, 3, 1, 0.5, 0.0)
    0.5
    >>> episode_latency(0, 3, 1, 0.5, 1.0) == episode_latency(0, 3, 1, 0.5, 1.0) != episode_latency(0, 3, 2, 0.5, 1.0)
    True
    """
    z = random.Random(f"latency:{seed}:{index}:{row}").gauss(0.0, 1.0)
    return median_s * math.exp(sigma * z)


class LatencyEnv:
    """``inner``'s episodes, then the batch's longest lognormal wait (module docstring); ``sleep`` is the
    clock's (a test passes a recorder)."""

    def __init__(self, inner, seed: int, median_s: float, sigma: float, sleep=time.sleep):
        self.inner, self.seed, self.median_s, self.sigma, self.sleep = inner, seed, median_s, sigma, sleep

    def __getattr__(self, name: str):  # close, serves_generation, ...: the inner environment's
        if name.startswith("__") or name == "inner":  # unpickling looks these up before __dict__ is filled
            raise AttributeError(name)
        return getattr(self.inner, name)

    def rollout(self, generate, prompts: Sequence, params):
        return self._wait(prompts, self.inner.rollout(generate, prompts, params))

    def rollout_part(self, generate, prompts: Sequence, params, round_no: int, first: int):
        """The inner environment's :meth:`~trajkit.envs.agent.GatewayEnv.rollout_part`, then the waits of its
        rows (a row's place in its group counted within the part: a Ray worker's slice holds whole groups
        when the group size divides it, the case where the waits equal the in-process run's)."""
        return self._wait(prompts, self.inner.rollout_part(generate, prompts, params, round_no, first))

    def _wait(self, prompts: Sequence, samples):
        rows: dict[int, int] = {}
        waits = []
        for p, s in zip(prompts, samples):
            row = rows[p.index] = rows.get(p.index, -1) + 1
            waits.append(episode_latency(self.seed, p.index, row, self.median_s, self.sigma))
            s.metadata["latency_s"] = waits[-1]
        if waits:
            self.sleep(max(waits))
        return samples


class LatencyTask:
    """``task`` with its environment wrapped in :class:`LatencyEnv`; everything else is ``task``'s."""

    def __init__(self, task, env: LatencyEnv):
        self.task, self.env = task, env

    def __getattr__(self, name: str):
        if name.startswith("__") or name == "task":  # unpickling looks these up before __dict__ is filled
            raise AttributeError(name)
        return getattr(self.task, name)


def with_latency(task, cfg, seed: int):
    """``task`` unchanged when ``cfg.latency_median_s`` is 0, else wrapped (:class:`LatencyTask`)."""
    if cfg.latency_median_s <= 0:
        return task
    return LatencyTask(task, LatencyEnv(task.env, seed, cfg.latency_median_s, cfg.latency_sigma))
