"""``AutoK``: the engine's controller for ``num_draft_tokens="auto"``.

It keeps what the choice of ``k`` needs across generate calls (:mod:`trajkit.engine.choose_k` has the
model): ``alpha``, a running estimate of the expected acceptance ``1 - TV(p, q)`` (a short probe run
measures it the first time, then every speculative call updates it by exponential smoothing), and one
``CostProfile`` (``c`` and ``v(k)``) per batch size, measured the first time that batch size is seen.
For a call it picks the ``k <= max_k`` that maximises the predicted speedup, or 0 (plain decoding) when
none beats plain decoding. ``last_choice`` records the last decision and its inputs
(``engine.auto_k.last_choice``).

The prediction can be wrong (``c`` and ``v(k)`` measured once on a busy CPU, an ``alpha`` that drifts), so
every speculative call is also *checked*: its realised tokens per second against plain decoding's,
``batch / t1`` from the same cost profile. A call that came out slower than plain switches that batch
size to plain decoding for the rest of the run (``plain_only``), so a wrong prediction costs one call,
not every step.
"""
from __future__ import annotations

from dataclasses import replace

from trajkit.engine.choose_k import CostProfile, choose_k, measure_costs, predicted_speedup
from trajkit.engine.drafters import Drafter
from trajkit.engine.params import SamplingParams, per_row
from trajkit.engine.speculative import generate_speculative
from trajkit.engine.types import GenerationStats
from trajkit.errors import ConfigError


class AutoK:
    """State of "auto" mode for one engine: ``alpha``, ``costs`` by batch size, ``last_choice``."""

    def __init__(self, model, drafter: Drafter | None, max_k: int = 4, probe_tokens: int = 32,
                 smoothing: float = 0.5, sync_timing: bool = False):
        self.model, self.drafter = model, drafter
        self.max_k, self.probe_tokens, self.smoothing = max_k, probe_tokens, smoothing
        self.sync_timing = sync_timing  # for the probe run's GenerationStats timings
        self.alpha: float | None = None
        self.costs: dict[int, CostProfile] = {}
        self.last_choice: dict | None = None
        self.plain_only: dict[int, float] = {}  # batch size -> the realised speedup that ruled k out

    def pick(self, prompts: list[list[int]], rows: list[SamplingParams], shared: bool) -> int:
        """``k`` for a call on ``prompts`` (0 = plain decoding); measures what it does not know yet."""
        batch = len(prompts)
        if self.alpha is None:
            self.calibrate(prompts, rows[0] if shared else SamplingParams(seed=0))
        elif batch not in self.costs:
            self.costs[batch] = measure_costs(self.model, self.drafter, prompts, self.max_k)
        return self.choice(batch)["k"]

    def calibrate(self, prompts: list[list[int]], params: SamplingParams) -> dict:
        """Measure ``c``, ``v(k)`` at this batch size and ``alpha`` by a short probe; choose ``k``."""
        if self.drafter is None:
            raise ConfigError("drafter: calibrate needs a drafter (the engine has none)")
        self.costs[len(prompts)] = measure_costs(self.model, self.drafter, prompts, self.max_k)
        probe = replace(params, max_new_tokens=self.probe_tokens)
        _, stats = generate_speculative(self.model, self.drafter, self.max_k, prompts,
                                        per_row(probe, len(prompts)), True, self.sync_timing)
        self.alpha = stats.alpha
        return self.choice(len(prompts))

    def choice(self, batch: int) -> dict:
        """The best ``k`` for ``batch`` rows from the current ``alpha`` and costs (also ``last_choice``)."""
        cost = self.costs[batch]
        k, speedup = choose_k(self.alpha, cost.c, cost.v)
        if batch in self.plain_only:
            k, speedup = 0, 1.0
        self.last_choice = {"k": k, "predicted_speedup": speedup, "alpha": self.alpha, **cost.to_dict(),
                            "predicted_by_k": {kk: predicted_speedup(self.alpha, kk, cost.c, vv)
                                               for kk, vv in cost.v.items()}}
        return self.last_choice

    def observe(self, stats: GenerationStats, batch: int | None = None) -> None:
        """Fold a speculative call's measured ``alpha`` into the running estimate, and check the call's
        realised speed against plain decoding at its batch size (see the module docstring)."""
        if sum(stats.position_tried) == 0:
            return
        w = self.smoothing
        self.alpha = stats.alpha if self.alpha is None else (1 - w) * self.alpha + w * stats.alpha
        cost = self.costs.get(batch) if batch is not None else None
        if cost is not None and cost.t1 > 0 and stats.seconds > 0:
            realised = (stats.new_tokens / stats.seconds) / (batch / cost.t1)
            if realised < 1.0:
                self.plain_only[batch] = realised
