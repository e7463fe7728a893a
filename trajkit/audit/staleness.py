"""``run.staleness``: did an asynchronous run (``rollout.mode=async``) train within its staleness bound, and
did its importance ratios stay sane?

Each asynchronous step logs its bound (``async/max_staleness``), the stalest sample it trained on
(``async/staleness_max``: steps between the weights that sampled the sample's first token and the update)
and its ratio statistics: ``loss/ratio`` (mean ``pi_theta / pi_old`` over the update's tokens),
``decoupled/weight_mean`` (mean behaviour -> proximal weight, ``loss.decoupled``) or ``tis/weight_mean``.
A step over its bound is a FAIL (the trainer's admission control is broken); so is a non-finite loss or a
mean ratio outside ``[1 / RATIO_LIMIT, RATIO_LIMIT]`` (a ratio blow-up: stale behaviour log-probs, a
broken weight push). Runs without ``async/*`` metrics get no check.
"""
from __future__ import annotations

import math

from trajkit.audit.report import Check

RATIO_LIMIT = 2.0
RATIOS = ("loss/ratio", "decoupled/weight_mean", "tis/weight_mean")
MAX_ITEMS = 50


def _over_bound(row: dict) -> str | None:
    worst, bound = row.get("async/staleness_max"), row.get("async/max_staleness")
    if isinstance(worst, (int, float)) and isinstance(bound, (int, float)) and worst > bound:
        return f"step {row['step']}: trained a sample {worst:g} versions stale (bound {bound:g})"
    return None


def _ratio_problems(row: dict) -> list[str]:
    out = []
    loss = row.get("loss/pg")
    if isinstance(loss, (int, float)) and not math.isfinite(loss):
        out.append(f"step {row['step']}: loss/pg is {loss}")
    for key in RATIOS:
        value = row.get(key)
        if isinstance(value, (int, float)) and not (1 / RATIO_LIMIT <= value <= RATIO_LIMIT):
            out.append(f"step {row['step']}: {key} {value:.4g} outside [{1 / RATIO_LIMIT:g}, {RATIO_LIMIT:g}]")
    return out


def staleness_check(name: str, rows: list[dict]) -> Check | None:
    """``run.staleness`` of one run's metrics rows, or None when the run is not asynchronous."""
    steps = [r for r in rows if isinstance(r.get("async/staleness_max"), (int, float))]
    if not steps:
        return None
    problems = [p for r in steps for p in ([_over_bound(r)] if _over_bound(r) else []) + _ratio_problems(r)]
    worst = max(r["async/staleness_max"] for r in steps)
    bounds = sorted({r.get("async/max_staleness") for r in steps if r.get("async/max_staleness") is not None})
    shown = [f"{name}: {p}" for p in problems[:MAX_ITEMS]]
    if len(problems) > MAX_ITEMS:
        shown.append(f"{name}: +{len(problems) - MAX_ITEMS} more")
    return Check("run.staleness", "FAIL" if problems else "PASS", worst, bounds[0] if len(bounds) == 1 else None,
                 f"{name}: {len(steps)} asynchronous steps, stalest trained sample {worst:g} versions "
                 f"(bound {', '.join(f'{b:g}' for b in bounds) or '?'}); {len(problems)} steps over the bound "
                 f"or with a ratio outside [{1 / RATIO_LIMIT:g}, {RATIO_LIMIT:g}]", shown)
