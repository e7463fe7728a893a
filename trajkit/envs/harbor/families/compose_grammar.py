"""The grammar of composed kinds (:mod:`.compose`): the primitives by role, the kinds, :func:`parse_kind` and
its rules, the held-out classes, and :func:`evaluate`, each step's Python twin that computes the expected
answer of a :class:`Plan`."""
from __future__ import annotations

from dataclasses import dataclass, field

SELECT = ("lines", "match", "exclude", "column", "first", "last")
MAP = ("upper", "lower", "replace", "strip")
ORDER = ("sort", "dedupe", "reverse")
AGGREGATE = ("count", "sum", "max", "min")
FORMAT = ("text", "json", "csv")
FILE = ("append", "copy", "move", "rename")
NUMERIC = ("sum", "max", "min")
HELDOUT_PRIMITIVES = ("lower", "reverse", "min")  # never in a training kind

TRAIN_KINDS = (
    "match-sort-text", "match-sort-json", "match-dedupe-text", "match-upper-text", "match-count-text",
    "match-count-json", "match-csv", "match-text-move", "exclude-text", "exclude-sort-dedupe-json",
    "exclude-count-text", "exclude-replace-text", "exclude-upper-sort-csv", "lines-sort-dedupe-text",
    "lines-dedupe-json", "lines-dedupe-count-text", "lines-strip-text", "lines-strip-dedupe-text",
    "lines-strip-sort-json", "lines-replace-json", "lines-upper-csv", "lines-sum-text", "lines-max-json",
    "lines-sort-text-append", "lines-upper-text-copy", "column-text", "column-sort-json", "column-sum-text",
    "column-sum-json", "column-max-text", "column-dedupe-count-json", "column-upper-text", "first-text",
    "first-sort-csv", "first-sum-text", "last-text", "last-max-text", "column-sum-text-rename",
    "last-replace-text-append", "first-upper-json-copy",
)
HELDOUT_COMPOSITIONS = (  # trained primitives, pipelines never generated for train
    "match-replace-json", "exclude-sort-text-append", "column-max-json", "first-upper-sort-text",
    "last-sum-json", "match-sort-dedupe-csv", "exclude-dedupe-text-move", "column-strip-sort-text",
)
HELDOUT_PRIMITIVE_KINDS = (
    "lines-reverse-text", "match-reverse-json", "lines-lower-text", "column-lower-sort-csv", "lines-min-text",
    "column-min-json", "lines-sort-reverse-text", "first-lower-text-append",
)
KINDS = TRAIN_KINDS + HELDOUT_COMPOSITIONS + HELDOUT_PRIMITIVE_KINDS



@dataclass(frozen=True)
class Kind:
    """A parsed kind: its steps by role (:func:`parse_kind`)."""

    name: str
    select: str
    map: str | None
    order: tuple[str, ...]
    aggregate: str | None
    format: str
    file: str | None

    @property
    def steps(self) -> tuple[str, ...]:
        return tuple(self.name.split("-"))

    @property
    def numeric(self) -> bool:
        return self.aggregate in NUMERIC


def parse_kind(name: str) -> Kind:
    """``name`` (steps joined by ``-``) as a :class:`Kind`; ValueError naming the rule it breaks.

    >>> k = parse_kind("exclude-upper-sort-csv"); (k.select, k.map, k.order, k.aggregate, k.format, k.file)
    ('exclude', 'upper', ('sort',), None, 'csv', None)
    >>> parse_kind("lines-upper-sum-text")
    Traceback (most recent call last):
    ...
    ValueError: lines-upper-sum-text: sum reads the selected numbers as they are (no map or order before it)
    """
    steps, at = name.split("-"), 0

    def take(pool: tuple[str, ...], most: int) -> list[str]:
        nonlocal at
        got = []
        while at < len(steps) and steps[at] in pool and len(got) < most:
            got.append(steps[at])
            at += 1
        return got

    select, mapped, order, agg, fmt, file = (take(SELECT, 1), take(MAP, 1), take(ORDER, 2), take(AGGREGATE, 1),
                                             take(FORMAT, 1), take(FILE, 1))
    if at != len(steps) or not select or not fmt or list(order) != [o for o in ORDER if o in order]:
        raise ValueError(f"{name}: steps are select, [map], [order...], [aggregate], format, [file], in the "
                         f"roles' order ({', '.join(SELECT + MAP + ORDER + AGGREGATE + FORMAT + FILE)})")
    kind = Kind(name, select[0], (mapped or [None])[0], tuple(order), (agg or [None])[0], fmt[0], (file or [None])[0])
    _check_rules(kind)
    return kind


def _check_rules(kind: Kind) -> None:
    if kind.numeric and (kind.map or kind.order):
        raise ValueError(f"{kind.name}: {kind.aggregate} reads the selected numbers as they are (no map or order "
                         "before it)")
    if kind.numeric and kind.select in ("match", "exclude"):
        raise ValueError(f"{kind.name}: {kind.aggregate} reads numbers: select lines, first, last or column")
    if kind.aggregate == "count" and (kind.map or kind.order not in ((), ("dedupe",))):
        raise ValueError(f"{kind.name}: count follows a select and at most dedupe (a map or a sort changes no count)")
    if kind.file == "append" and kind.format != "text":
        raise ValueError(f"{kind.name}: append adds text lines to a file; use the text format")


def heldout_kind(name: str) -> str | None:
    """``primitive``, ``composition``, or None for a training kind."""
    if any(step in HELDOUT_PRIMITIVES for step in name.split("-")):
        return "primitive"
    return "composition" if name in HELDOUT_COMPOSITIONS else None


@dataclass
class Plan:
    """One instance's inputs and step parameters, before the instruction and checks are made from it."""

    kind: Kind
    src: str
    lines: list[str]  # the source file's lines (a CSV: its header first)
    out: str
    params: dict = field(default_factory=dict)  # needle, n, col (1-based), head, old/new, key, dest, existing


def select(plan: Plan, step: str) -> list[str]:
    p, lines = plan.params, plan.lines
    if step == "lines":
        return list(lines)
    if step == "match":
        return [x for x in lines if p["needle"] in x]
    if step == "exclude":
        return [x for x in lines if p["needle"] not in x]
    if step == "column":
        return [row.split(",")[p["col"] - 1] for row in lines[1:]]
    return lines[:p["n"]] if step == "first" else lines[-p["n"]:]


def apply(plan: Plan, step: str, values: list[str]) -> list[str]:
    """One map or order step on the lines (the Python twin of its shell stage)."""
    p = plan.params
    table = {"upper": lambda: [v.upper() for v in values], "lower": lambda: [v.lower() for v in values],
             "replace": lambda: [v.replace(p["old"], p["new"]) for v in values],
             "strip": lambda: [v.strip(" ") for v in values], "sort": lambda: sorted(values),
             "dedupe": lambda: list(dict.fromkeys(values)), "reverse": lambda: values[::-1]}
    return table[step]()


def evaluate(plan: Plan, skip: str | None = None) -> list[str] | int:
    """The kind's answer on the plan's data: the lines, or the aggregate's number; ``skip`` leaves one step
    out (a ``select`` skipped reads every line) — the answer of a policy that forgets that step."""
    k = plan.kind
    values = select(plan, "lines" if skip == k.select and k.select != "column" else k.select)
    for step in ([k.map] if k.map else []) + list(k.order):
        if step != skip:
            values = apply(plan, step, values)
    if k.aggregate is None:
        return values
    if k.aggregate == "count":
        return len(values)
    numbers = [int(v) for v in values]
    return {"sum": sum, "max": max, "min": min}[k.aggregate](numbers)


def every_step_matters(plan: Plan) -> bool:
    want = evaluate(plan)
    skippable = [plan.kind.map, *plan.kind.order] + ([plan.kind.select] if plan.kind.select != "column" else [])
    return bool(want) and all(evaluate(plan, skip=s) != want for s in skippable if s and s != "lines")


