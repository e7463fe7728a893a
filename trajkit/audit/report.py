"""Verdicts and their report: one :class:`Check` per statistic, PASS / WARN / FAIL, as a table or JSON.

A check carries the statistic it measured, the threshold it compared it with, a one-line ``detail`` and
the ``items`` it concerns: each a place a user can open (a row's ``id`` when the row has one, else
``FILE:LINE``, or a run folder). The JSON form (the contract other tools read)::

    {"checks": [{"id": "leak.exact", "verdict": "FAIL", "statistic": 1, "threshold": 0,
                 "detail": "1 eval item equals a train item", "items": ["eval.jsonl:3 = train.jsonl:7"]}]}

Exit codes (trajkit's convention): 0 when no check fails, 1 when one does, 2 for unusable input (raised
as :class:`trajkit.errors.TrajkitError` by the library and printed as one line by the CLI).

Example::

    >>> r = AuditReport([Check("a", "PASS", 0, 0, "fine"), Check("b", "WARN", 0.9, 0.8, "close")])
    >>> r.verdict, r.exit_code
    ('WARN', 0)
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Literal

Verdict = Literal["PASS", "WARN", "FAIL"]
VERDICTS: tuple[Verdict, ...] = ("PASS", "WARN", "FAIL")  # in order of severity
MAX_ITEMS_SHOWN = 5  # per check in the terminal table; the JSON keeps every item


@dataclass
class Check:
    """One statistic and its verdict. ``statistic``/``threshold`` are numbers (or None where a check
    refuses to compute one, e.g. too few seeds); ``items`` name what to look at."""

    id: str
    verdict: Verdict
    statistic: float | int | None
    threshold: float | int | str | None
    detail: str
    items: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        if self.verdict not in VERDICTS:
            raise ValueError(f"Check {self.id}: verdict must be one of {VERDICTS}, got {self.verdict!r}")

    def as_dict(self) -> dict:
        return {"id": self.id, "verdict": self.verdict, "statistic": _jsonable(self.statistic),
                "threshold": _jsonable(self.threshold), "detail": self.detail, "items": list(self.items)}


def _jsonable(x):
    """NaN and infinities are not JSON: they become None."""
    if isinstance(x, float) and not math.isfinite(x):
        return None
    return x


def worst(verdicts) -> Verdict:
    """The most severe verdict of ``verdicts`` (PASS for none)."""
    return max(verdicts, key=VERDICTS.index, default="PASS")


@dataclass
class AuditReport:
    checks: list[Check]

    @property
    def verdict(self) -> Verdict:
        return worst(c.verdict for c in self.checks)

    @property
    def exit_code(self) -> int:
        return 1 if self.verdict == "FAIL" else 0

    def as_dict(self) -> dict:
        return {"verdict": self.verdict, "checks": [c.as_dict() for c in self.checks]}

    def to_json(self) -> str:
        return json.dumps(self.as_dict(), indent=1)

    def table(self, max_items: int = MAX_ITEMS_SHOWN) -> str:
        """A fixed-width table, one line per check, then the items of every check that is not PASS."""
        rows = [(c.id, c.verdict, format_number(c.statistic), format_number(c.threshold), c.detail)
                for c in self.checks]
        head = ("check", "verdict", "statistic", "threshold", "detail")
        widths = [max(len(r[i]) for r in [head, *rows]) for i in range(4)]
        lines = ["  ".join(h.ljust(w) for h, w in zip(head[:4], widths)) + "  " + head[4]]
        lines += ["  ".join(v.ljust(w) for v, w in zip(r[:4], widths)) + "  " + r[4] for r in rows]
        for c in self.checks:
            if c.verdict != "PASS" and c.items:
                shown = c.items[:max_items]
                more = f" (+{len(c.items) - len(shown)} more, all in --json)" if len(c.items) > len(shown) else ""
                lines.append(f"{c.id} {c.verdict}: " + "; ".join(shown) + more)
        lines.append(f"verdict: {self.verdict}")
        return "\n".join(lines)


def format_number(x) -> str:
    if x is None:
        return "-"
    if isinstance(x, bool) or isinstance(x, int) or isinstance(x, str):
        return str(x)
    if not math.isfinite(x):
        return str(x)
    return f"{x:.4g}"
