"""The compositional task generator (``trajkit envs generate --families compose``): a few primitives over a
file's lines, composed into multi-step kinds, each kind a family of its own.

A *kind* is a pipeline named by its steps, ``match-sort-json``: take the lines of a file that contain a
string, sort them, write them as a JSON list. The steps come in a fixed order, one role each:

=============  ==========================================================  ===================================
role           primitives                                                  shell (the Oracle's stage)
=============  ==========================================================  ===================================
select (1)     ``lines`` ``match`` ``exclude`` ``column`` ``first``         ``cat``, ``grep -F``, ``grep -vF``,
               ``last``                                                    ``awk -F, -v col=NAME`` (by header),
                                                                           ``head -n N``, ``tail -n N``
map (0-1)      ``upper`` ``lower`` ``replace`` ``strip``                   ``tr``, ``tr``, ``sed s///g``, ``sed``
order (0-2)    ``sort`` ``dedupe`` ``reverse`` (in this order)             ``LC_ALL=C sort``, ``awk '!seen[$0]++'``,
                                                                           ``tac``
aggregate      ``count`` ``sum`` ``max`` ``min``                           ``wc -l``, ``awk``, ``sort -n | tail``,
(0-1)                                                                      ``sort -n | head``
format (1)     ``text`` ``json`` ``csv``                                   ``>``, ``python3 -c json.dumps``, ``awk``
file (0-1)     ``append`` ``copy`` ``move`` ``rename``                     ``>>``, ``cp``, ``mkdir -p && mv``, ``mv``
=============  ==========================================================  ===================================

Composition rules (:func:`parse_kind` refuses the rest): a numeric aggregate (``sum``/``max``/``min``) reads
numbers (``lines``/``first``/``last`` of a file of integers, or a number ``column`` of a CSV) with no map and
no order before it; ``count`` follows a select and at most ``dedupe`` (it counts distinct lines then);
``append`` writes text. An instance's data is drawn again until **every step matters**: without any one
map, order or select step the answer would differ (so the answer of a policy that skips a step is wrong).

The expected answer is computed here, in Python (:func:`evaluate`), and written into the verifier as a
literal (:mod:`.spec`). Sorting is bytewise (``LC_ALL=C``; the data are single words of one case, whose
order any locale agrees with).

Held out (:func:`heldout_kind`): ``primitive`` kinds use a primitive of :data:`HELDOUT_PRIMITIVES`, never
in any training kind; ``composition`` kinds (:data:`HELDOUT_COMPOSITIONS`) are new pipelines of trained
primitives. A solution names every step, so no held-out kind's solution can equal a training kind's; and every
held-out instance (of any kind) names only held-out files, keys, headers and replacement words
(:data:`.compose_data.NAMES`: each pool split in two), so its solution is no train solution even within a
trained kind, and no 13 words of it are train text (``trajkit audit data``'s ``leak.ngram``; a hash split on the
solution, as the hand-written families', left held-out commands covered by the 13-grams of two train ones).
The idea of training on compositions of a few primitives and testing on unseen ones is SCAN's
(Lake & Baroni 2018, "Generalization without systematicity") and COGS's (Kim & Linzen 2020), here for shell.
"""
from __future__ import annotations

import random

from trajkit.envs.harbor.families import compose_data, compose_words as words
from trajkit.envs.harbor.families.compose_grammar import (  # noqa: F401 (the generator's public names)
    AGGREGATE, FILE, FORMAT, HELDOUT_COMPOSITIONS, HELDOUT_PRIMITIVE_KINDS, HELDOUT_PRIMITIVES, KINDS, MAP,
    NUMERIC, ORDER, SELECT, TRAIN_KINDS, Kind, Plan, evaluate, every_step_matters, heldout_kind, parse_kind)
from trajkit.envs.harbor.families.spec import Check, TaskSpec

DRAWS = 200  # data draws per instance before a kind is called unsatisfiable (never reached by the kinds above)


def draw_plan(rng: random.Random, kind: Kind, split: str) -> Plan:
    """Data and parameters for ``kind`` in ``split``, drawn until every step matters (:func:`every_step_matters`)."""
    for _ in range(DRAWS):
        plan = compose_data.draw(rng, kind, split)
        if plan is not None and every_step_matters(plan):
            return plan
    raise ValueError(f"{kind.name}: no data in {DRAWS} draws where every step matters")


def solution(plan: Plan) -> str:
    """The Oracle: one shell pipeline, then the file operation."""
    return compose_data.command(plan)


def checks(plan: Plan) -> list[Check]:
    return compose_data.checks(plan, evaluate(plan))


def plan_of(spec: TaskSpec) -> Plan:
    """The :class:`Plan` a composed instance was made from, rebuilt from its parameters (``spec.params``)."""
    p = dict(spec.params)
    kind, src, out, lines = parse_kind(p.pop("kind")), p.pop("src"), p.pop("out"), p.pop("lines")
    return Plan(kind, src, lines, out, p)


def make(name: str):
    """The generator of kind ``name``: ``(rng, wording, split, phrasings) -> TaskSpec``, like the hand-written
    families' with the split, which chooses the name pools (:data:`.compose_data.NAMES`), and the count of train
    phrasings a clause draws from (:func:`.compose_words.instruction`)."""
    kind = parse_kind(name)

    def generator(rng: random.Random, wording: int, split: str,
                  phrasings: int = words.DEFAULT_PHRASINGS) -> TaskSpec:
        plan = draw_plan(rng, kind, split)
        files = {plan.src: "\n".join(plan.lines) + "\n"}
        if "existing" in plan.params:
            files[plan.out] = "\n".join(plan.params["existing"]) + "\n"
        params = {"kind": name, "src": plan.src, "out": plan.out, "lines": plan.lines, **plan.params}
        text = words.instruction(plan, wording, rng if split == "train" else None, phrasings)
        return TaskSpec(name, params, text, files, solution(plan), checks(plan), wording=wording)

    generator.__name__ = name.replace("-", "_")
    return generator


COMPOSE = {name: make(name) for name in KINDS}
