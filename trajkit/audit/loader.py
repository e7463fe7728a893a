"""``run.rows``: did the loader feed every dataset row once per epoch?

A run of a dataset task logs, each step, the rows it drew (``data/rows``, refill rounds included) and
the size of the train split (``data/num_rows``) in ``metrics.jsonl`` (:mod:`trajkit.rl.step`). Read in
order, draw ``t`` belongs to epoch ``t // n``. A row drawn twice within one epoch is a FAIL (a loader that
repeats rows: the run trains on some rows twice as often as on others); a finished epoch with rows never
drawn is a FAIL too (the two come together when rows repeat). The last, unfinished epoch is checked for
repeats only. Runs of synthetic tasks (an endless stream of generated prompts) log no rows: no check.
"""
from __future__ import annotations

from trajkit.audit.report import Check

MAX_ITEMS = 50


def epoch_problems(draws: list[tuple[int, int]], n: int) -> list[str]:
    """``draws``: ``[(step, row)]`` in order; ``n`` rows per epoch -> one message per repeat or unseen row."""
    out = []
    for start in range(0, len(draws), n):
        epoch, chunk = start // n, draws[start:start + n]
        first: dict[int, int] = {}
        for step, row in chunk:
            if row in first:
                out.append(f"row {row} drawn twice in epoch {epoch} (steps {first[row]} and {step})")
            else:
                first[row] = step
        if len(chunk) == n:
            missing = sorted(set(range(n)) - first.keys())
            out += [f"row {r} never drawn in epoch {epoch}" for r in missing]
    return out


def rows_check(name: str, metrics: list[dict]) -> Check | None:
    """``run.rows`` of one run's metrics rows, or None when the run logs no ``data/rows``."""
    draws = [(m["step"], int(r)) for m in metrics if isinstance(m.get("data/rows"), list) for r in m["data/rows"]]
    sizes = {m["data/num_rows"] for m in metrics if isinstance(m.get("data/num_rows"), int)}
    if not draws or len(sizes) != 1:
        return None
    n = sizes.pop()
    problems = epoch_problems(draws, n)
    shown = [f"{name}: {p}" for p in problems[:MAX_ITEMS]]
    if len(problems) > MAX_ITEMS:
        shown.append(f"{name}: +{len(problems) - MAX_ITEMS} more")
    return Check("run.rows", "FAIL" if problems else "PASS", len(problems), 0,
                 f"{name}: {len(draws)} draws over {n} rows ({len(draws) / n:.2f} epochs); "
                 f"{len(problems)} repeats or unseen rows within an epoch", shown)
