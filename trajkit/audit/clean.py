"""``leak.clean_metric``: a run's eval metric re-computed without the eval items found in the train data.

A leak check says *that* eval items are in the train data; this one says what the leak did to the
claimed number. The run's ``eval_items.jsonl`` (written by the trainer, :mod:`trajkit.rl.evalitems`:
one line per eval item and evaluation with its ``id``, ``prompt`` and per-sample ``scores``) is matched
to the audited eval items, by ``id`` when it equals the item's name (a row's ``id`` field), else by the
normalised prompt (the ``leak.exact`` normalisation). For every evaluation: the metric over all items
(the mean of every score: the run's own ``eval/reward``) and over the *clean* items (those no leak check
flagged). Reported for the last evaluation:

- statistic: full - clean (how much of the number the leaked items carry);
- PASS when no leaked item was evaluated; FAIL when every evaluated item leaked, or when
  |full - clean| exceeds ``2 x`` the standard error of the clean mean (sample standard deviation of the
  clean scores / sqrt(their count): the leak moved the metric by more than its sampling noise);
  WARN otherwise (items leaked, but the number moved within noise).

Evaluated items that match no audited eval item are counted in the detail (they are kept as clean: the
audit has no evidence against them); a run none of whose items match is unusable input.
"""
from __future__ import annotations

import math
import os

from trajkit.audit.items import Item
from trajkit.audit.report import Check
from trajkit.audit.runs import jsonl_rows
from trajkit.errors import InputError

EVAL_ITEMS_FILE = "eval_items.jsonl"  # trajkit.rl.evalitems
NOISE_SE = 2.0  # |full - clean| above this many standard errors of the clean mean: FAIL


def read_eval_items(run: str) -> dict[int, list[dict]]:
    """``{step: rows}`` of a run folder's ``eval_items.jsonl``; :class:`InputError` names a bad line."""
    path = os.path.join(run, EVAL_ITEMS_FILE)
    if not os.path.isfile(path):
        raise InputError(f"no {EVAL_ITEMS_FILE} here", path=run,
                         hint="a trajkit train run folder with eval.every set (trainers before per-item "
                              "eval logging did not write it)")
    steps: dict[int, list[dict]] = {}
    for lineno, row in jsonl_rows(path):
        if (not isinstance(row, dict) or not isinstance(row.get("step"), int) or not isinstance(row.get("id"), str)
                or not isinstance(row.get("prompt"), str) or not isinstance(row.get("scores"), list)):
            raise InputError("expected {step: int, id: str, prompt: str, scores: [...]}", path=path, row=lineno)
        if not all(s is None or isinstance(s, (int, float)) for s in row["scores"]):
            raise InputError("scores must be numbers or null", path=path, row=lineno, field="scores")
        steps.setdefault(row["step"], []).append(row)
    if not steps:
        raise InputError("no rows", path=path)
    return steps


def run_items(steps: dict[int, list[dict]]) -> list[Item]:
    """The run's eval items as audit items (name = ``id``), from its first evaluation."""
    return [Item(r["id"], r["prompt"], r.get("answer") or "") for r in steps[min(steps)]]


def _mean_se(scores: list[float]) -> tuple[float, float]:
    n = len(scores)
    mean = sum(scores) / n
    var = sum((x - mean) ** 2 for x in scores) / (n - 1) if n > 1 else 0.0
    return mean, math.sqrt(var / n)


def clean_metric_check(run: str, steps: dict[int, list[dict]], leaked: set[str], unmatched: int) -> Check:
    """``leak.clean_metric`` of one run (see the module docstring): ``leaked``, the ids of its eval items a
    leak check flagged; ``unmatched``, how many of its last evaluation's items match no audited item
    (:func:`trajkit.audit.leaks.leaked_ids` finds both)."""
    last = max(steps)
    rows = steps[last]
    if unmatched == len(rows):
        raise InputError(f"none of the run's {len(rows)} eval items is an audited eval item (by id or prompt)",
                         path=os.path.join(run, EVAL_ITEMS_FILE), hint="give the --eval files this run evaluated on")
    every, clean = _scores(rows, leaked)
    full = _mean_or_nan(every)
    names = [f"{r['id']} (mean score {_mean_or_nan(r['scores']):.3g})" for r in rows if r["id"] in leaked]
    where = f"at step {last} of {run}"
    if not leaked:
        return Check("leak.clean_metric", "PASS", 0.0, NOISE_SE,
                     f"none of the {len(rows)} evaluated items leaked: metric {full:.4g} {where}"
                     + (f" ({unmatched} items not among the audited eval items)" if unmatched else ""))
    if not clean:
        return Check("leak.clean_metric", "FAIL", None, NOISE_SE,
                     f"every evaluated item leaked ({len(leaked)} of {len(rows)}): metric {full:.4g} on no clean item "
                     f"{where}", names)
    mean, se = _mean_se(clean)
    gap = full - mean
    verdict = "FAIL" if abs(gap) > NOISE_SE * se else "WARN"
    history = ", ".join(f"step {s}: {_full_clean(steps[s], leaked)}" for s in sorted(steps))
    return Check("leak.clean_metric", verdict, gap, NOISE_SE,
                 f"metric {full:.4g} on all {len(rows)} items, {mean:.4g} on the {len(rows) - len(leaked)} clean "
                 f"items (SE {se:.3g}) {where}; full - clean is {gap / se if se else math.inf:.2g} SE "
                 f"(threshold {NOISE_SE:g}); by evaluation (full/clean): {history}"
                 + (f"; {unmatched} items not among the audited eval items" if unmatched else ""), names)


def _scores(rows: list[dict], leaked: set[str]) -> tuple[list[float], list[float]]:
    """Every non-null score of one evaluation, and those of its clean items."""
    every = [s for r in rows for s in r["scores"] if s is not None]
    clean = [s for r in rows if r["id"] not in leaked for s in r["scores"] if s is not None]
    return every, clean


def _mean_or_nan(scores: list) -> float:
    kept = [s for s in scores if s is not None]
    return sum(kept) / len(kept) if kept else math.nan


def _full_clean(rows: list[dict], leaked: set[str]) -> str:
    every, clean = _scores(rows, leaked)
    return f"{_mean_or_nan(every):.3g}/{_mean_or_nan(clean):.3g}"
