"""``leak.kind``: a held-out *kind* trained on, which no lexical check sees.

The composed generator (:mod:`trajkit.envs.harbor.families.compose`) holds out whole kinds: new compositions of
trained primitives and kinds using a primitive never trained; each such held-out manifest row says so
(``heldout_kind``: ``composition`` or ``primitive``). A training manifest that holds rows of one of those kinds
(its ``family``) trains on what the held-out class claims is unseen, even when every held-out row's text is new
(other names, other wording): ``leak.exact``/``leak.ngram``/``leak.near`` compare text, so they pass. This check
compares the kinds: FAIL when a held-out row of either class has a family that also appears in train.
Manifests without ``heldout_kind`` (any other data) get no such check.
"""
from __future__ import annotations

import json
from pathlib import Path

UNSEEN = ("composition", "primitive")


def _rows(paths: list[str]):
    for path in paths:
        p = Path(path)
        if p.suffix != ".jsonl" or not p.is_file():
            continue
        for line in p.read_text(encoding="utf-8").splitlines():
            try:
                row = json.loads(line)
            except ValueError:
                continue  # the other checks name unreadable rows
            if isinstance(row, dict):
                yield row


def kind_check(train_paths: list[str], eval_paths: list[str]):
    """The ``leak.kind`` :class:`~trajkit.audit.report.Check`, or None when no eval row declares a held-out class."""
    from trajkit.audit.report import Check

    unseen = {}
    for row in _rows(eval_paths):
        if row.get("heldout_kind") in UNSEEN and isinstance(row.get("family"), str):
            unseen.setdefault(row["family"], row["heldout_kind"])
    if not unseen:
        return None
    trained = {row["family"] for row in _rows(train_paths) if isinstance(row.get("family"), str)}
    leaked = sorted(set(unseen) & trained)
    detail = (f"{len(leaked)} of {len(unseen)} held-out kinds (unseen compositions / primitives) are in the "
              f"training data: {', '.join(leaked[:5])}" if leaked else
              f"none of the {len(unseen)} held-out kinds (unseen compositions / primitives) is in the training data")
    return Check("leak.kind", "FAIL" if leaked else "PASS", len(leaked), 0, detail,
                 [f"{f} ({unseen[f]})" for f in leaked])
