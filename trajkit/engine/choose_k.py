"""Choosing the number of draft tokens ``k`` from measured costs and acceptance.

Model (Leviathan et al. 2023, section 3.4, with the verification cost measured instead of assumed):
with per-token acceptance ``alpha`` (i.i.d.), a round emits on average ``(1 - alpha^(k+1)) / (1 - alpha)``
tokens and costs ``k * c + v(k)`` target-token units, where ``c`` = (drafter time per draft token) /
(target time for one token) and ``v(k)`` = (target time to score ``k + 1`` tokens) / (time for one). The
predicted speedup over plain decoding is

    S(k) = (1 - alpha^(k+1)) / ((1 - alpha) * (k * c + v(k)))

and we pick the ``k`` maximising it, or plain decoding (``k = 0``) when no ``k`` gives ``S > 1`` -- e.g.
large, compute-bound batches where ``v(k)`` grows like ``k + 1``, or a weak drafter.

``alpha`` is measured as ``E[sum_v min(p, q)] = 1 - TV(p, q)`` over verified positions
(``GenerationStats.alpha``), which does not depend on the ``k`` it was measured with.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field

import torch

from trajkit.engine.active import ActiveBatch
from trajkit.engine.drafters import Drafter
from trajkit.engine.features import feature_layers, observe_prefill
from trajkit.engine.kvstate import KVState
from trajkit.engine.params import SamplingParams


def predicted_speedup(alpha: float, k: int, c: float, v_k: float) -> float:
    """``S(k)`` above; ``k = 0`` is plain decoding (1.0)."""
    if k == 0:
        return 1.0
    tokens = (k + 1) if alpha >= 1.0 else (1.0 - alpha ** (k + 1)) / (1.0 - alpha)
    return tokens / (k * c + v_k)


def choose_k(alpha: float, c: float, v: dict[int, float]) -> tuple[int, float]:
    """Best ``(k, predicted speedup)`` over the measured ``v: {k: v(k)}``; ``(0, 1.0)`` if none beats plain."""
    best = (0, 1.0)
    for k in sorted(v):
        s = predicted_speedup(alpha, k, c, v[k])
        if k >= 1 and s > best[1]:
            best = (k, s)
    return best


@dataclass
class CostProfile:
    """Measured at one batch size: ``t1`` seconds per one-token target step, ``c``, and ``v: {k: v(k)}``."""

    batch_size: int
    t1: float
    c: float
    v: dict[int, float] = field(default_factory=dict)

    def to_dict(self) -> dict:
        return {"batch_size": self.batch_size, "t1_ms": self.t1 * 1e3, "c": self.c,
                "v": {str(k): x for k, x in self.v.items()}}


@torch.inference_mode()
def measure_costs(model, drafter: Drafter | None, prompts: list[list[int]], k_max: int = 4,
                  repeats: int = 7, warmup: int = 2) -> CostProfile:
    """Time the target scoring ``1..k_max+1`` tokens and the drafter proposing ``k_max`` tokens on
    ``prompts``. The candidates are timed round-robin, ``repeats`` times after ``warmup`` rounds, and each
    keeps its fastest time: background load only ever adds time, so the minimum is the least noisy
    estimate of the intrinsic cost. The target's cache is rolled back after each timing."""
    # each forward's time is its device time; a feature drafter's layers are captured, as in generation
    state = KVState(model, sync_timing=True, capture=feature_layers(drafter))
    state.prefill(prompts)
    batch = len(prompts)
    jobs = {}
    for t in range(1, k_max + 2):
        tokens = torch.tensor([p[-t:] if len(p) >= t else p[-1:] * t for p in prompts], device=state.device)
        jobs[t] = (lambda tok: lambda: _score_and_rollback(state, tok))(tokens)
    if drafter is not None:
        rows = ActiveBatch(prompts, [SamplingParams(seed=0)] * batch, True, state.device)
        drafter.begin([p[:-1] or p for p in prompts])
        observe_prefill(drafter, state, prompts)  # features of every prompt token (a superset)
        u = torch.rand(batch, k_max, dtype=torch.float64, device=state.device)
        jobs["draft"] = lambda: drafter.propose(prompts, k_max, rows.warp, u)
    best = _fastest(jobs, repeats, warmup)
    t1 = best[1]
    v = {k: best[k + 1] / t1 for k in range(1, k_max + 1)}
    c = best["draft"] / k_max / t1 if drafter is not None else 0.0
    return CostProfile(batch_size=batch, t1=t1, c=c, v=v)


def _score_and_rollback(state: KVState, tokens: torch.Tensor) -> None:
    state.extend(tokens)
    state.truncate(state.lengths - tokens.shape[1])


def _fastest(jobs: dict, repeats: int, warmup: int) -> dict:
    """Minimum wall time of each job, timing the jobs round-robin."""
    best = {name: float("inf") for name in jobs}
    for round_ in range(warmup + repeats):
        for name, fn in jobs.items():
            start = time.perf_counter()
            fn()
            elapsed = time.perf_counter() - start
            if round_ >= warmup:
                best[name] = min(best[name], elapsed)
    return best
