"""``trajkit audit labels``: what a token export (``input_ids`` + ``labels`` rows) actually trains.

Checks, over every row (format (b) of :mod:`trajkit.traces.export.token_export`, or any rows with ``input_ids``
and ``labels``, -100 = not trained):

``labels.alignment``
    At every trained position ``labels[i] == input_ids[i]`` (the Hugging Face convention: the model
    shifts inside its loss). Labels equal to ``input_ids[i + 1]`` were shifted already and will be
    shifted again (a double shift: the model learns to predict two tokens ahead): FAIL, as is any other
    mismatch.
``labels.roles`` (needs the tokenizer)
    Every trained token attributed to the chat turn it sits in, found from the token ids alone: the chat
    template renders a probe conversation with one marker per turn; the text between two markers is the
    end of one turn plus the opener of the next; the part every such glue shares, cut at its last special
    token (else where the first turn's glue holds its end), gives each role's opener (ChatML ``<|im_start|>user``, Llama 3
    ``<|start_header_id|>user<|end_header_id|>``). Trailing whitespace tokens are dropped from an opener
    (they can merge with the content). A turn runs from its opener to the next, so an assistant's
    end-of-turn token belongs to the assistant. The openers are verified on the probe itself (each marker
    must land in its own role) before any row is judged. Trained tokens in a system or user turn (tool
    results render inside user turns in ChatML tool templates) are a FAIL; a row that trains fewer
    assistant turns than its ``turns`` field names is a WARN (rows without the field: an assistant turn
    with 0 trained tokens while the row trains something).
``labels.empty``
    Rows with no trained token (truncated to nothing): WARN.
``labels.duplicates``
    Rows whose ``input_ids`` and ``labels`` equal an earlier row's (trained twice per epoch): WARN.

Deviation: the trainer does not log row ids yet, so "rows seen twice" is checked
over the export, not over what a run fed; templates with a separate tool-turn header (Llama 3's
``ipython``) have tool turns attributed to the turn before them.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass

from trajkit.audit.report import Check
from trajkit.errors import InputError

IGNORE = -100
PROBE = [("system", "auditsysmark"), ("user", "audituserone"), ("assistant", "auditasstone"),
         ("user", "auditusertwo"), ("assistant", "auditassttwo")]


@dataclass
class Row:
    """One export row: where it is, its ids and labels, and the assistant turns it means to train."""

    where: str
    input_ids: list[int]
    labels: list[int]
    turns: list[int] | None = None


def _common_prefix(texts: list[str]) -> str:
    out = texts[0]
    for t in texts[1:]:
        while not t.startswith(out):
            out = out[:-1]
    return out


def _opener_start(shared: str, first: str, specials: list[str]) -> str:
    """Where the openers start inside ``shared`` (the text every turn switch shares): at the last special
    token in it (ChatML ``<|im_start|>``, Llama 3 ``<|start_header_id|>``), else the longest end of it
    that the first turn's glue also holds."""
    at = max((shared.rfind(t) for t in specials if t and t in shared), default=-1)
    if at >= 0:
        return shared[at:]
    return next((shared[k:] for k in range(len(shared) + 1) if shared[k:] in first), "")


def _opener_texts(text: str, specials: list[str]) -> dict[str, str]:
    glues, pos = [], 0
    for _, marker in PROBE:
        at = text.find(marker, pos)
        if at < 0:
            raise InputError(f"the chat template drops the probe turn {marker!r}", field="chat_template",
                             hint="labels.roles needs a template that renders system, user and assistant turns")
        glues.append(text[pos:at])
        pos = at + len(marker)
    shared = _common_prefix(glues[1:])  # end of a turn + the start every opener shares
    start = _opener_start(shared, glues[0], specials)
    out = {"system": glues[0][glues[0].find(start):] if start else glues[0]}
    for (role, _), glue in zip(PROBE[1:], glues[1:]):
        out.setdefault(role, start + glue[len(shared):])
    return out


def _trim(tokenizer, text: str) -> list[int]:
    ids = tokenizer.encode(text, add_special_tokens=False)
    while ids and not tokenizer.decode(ids[-1:]).strip():
        ids = ids[:-1]
    return ids


def _find_all(ids: list[int], pattern: list[int]) -> list[int]:
    k = len(pattern)
    return [i for i in range(len(ids) - k + 1) if ids[i:i + k] == pattern]


def turn_spans(ids: list[int], openers: dict[str, list[int]]) -> list[tuple[str, int, int]]:
    """``[(role, first content token, end)]`` of every turn in ``ids``, in order."""
    marks = sorted((i, i + len(p), role) for role, p in openers.items() for i in _find_all(ids, p))
    return [(role, end, marks[j + 1][0] if j + 1 < len(marks) else len(ids)) for j, (_, end, role) in enumerate(marks)]


def role_openers(tokenizer) -> dict[str, list[int]]:
    """``{role: ids opening a turn of that role}`` from the tokenizer's chat template, verified on the probe."""
    text = tokenizer.apply_chat_template([{"role": r, "content": m} for r, m in PROBE], tokenize=False)
    specials = list(tokenizer.all_special_tokens) + list(tokenizer.get_added_vocab())
    openers = {role: _trim(tokenizer, t) for role, t in _opener_texts(text, specials).items()}
    ids = tokenizer.encode(text, add_special_tokens=False)
    spans = turn_spans(ids, openers)
    got = [role for role, a, b in spans for r, m in PROBE if m in tokenizer.decode(ids[a:b])]
    if got != [r for r, _ in PROBE] or len(spans) != len(PROBE) or not all(openers.values()):
        raise InputError("cannot find the turn openers of this chat template (the probe's turns came out as "
                         f"{got})", field="chat_template", hint="labels.roles supports templates whose turns "
                         "each start with a role header (ChatML, Llama 3, Mistral-style headers)")
    return openers


def _label_problem(row: Row) -> str | None:
    trained = [i for i, lab in enumerate(row.labels) if lab != IGNORE]
    wrong = [i for i in trained if row.labels[i] != row.input_ids[i]]
    if not wrong:
        return None
    shifted = sum(1 for i in trained if i + 1 < len(row.input_ids) and row.labels[i] == row.input_ids[i + 1])
    kind = "labels already shifted (double shift)" if shifted >= len(trained) - 1 else "labels differ from input_ids"
    return f"{row.where}: {kind} at {len(wrong)} of {len(trained)} trained positions (first {wrong[0]})"


def alignment_check(rows: list[Row]) -> Check:
    bad = [p for p in (_label_problem(r) for r in rows) if p]
    ok = sum(1 for r in rows for i, lab in enumerate(r.labels) if lab != IGNORE and lab == r.input_ids[i])
    total = sum(1 for r in rows for lab in r.labels if lab != IGNORE)
    return Check("labels.alignment", "FAIL" if bad else "PASS", ok / total if total else 1.0, 1.0,
                 f"share of trained positions with labels[i] == input_ids[i]; {len(bad)} of {len(rows)} rows differ",
                 bad)


def _row_roles(row: Row, openers: dict[str, list[int]], tokenizer) -> tuple[list[str], list[str]]:
    fails, warns, assistant = [], [], []
    for role, a, b in turn_spans(row.input_ids, openers):
        n = sum(1 for lab in row.labels[a:b] if lab != IGNORE)
        if role == "assistant":
            assistant.append(n)
        elif n:
            first = next(i for i in range(a, b) if row.labels[i] != IGNORE)
            text = tokenizer.decode(row.input_ids[first:min(b, first + 8)])
            fails.append(f"{row.where}: {n} trained tokens in a {role} turn (token {first}: {text!r}...)")
    trained_turns = sum(1 for n in assistant if n)
    expected = len(row.turns) if row.turns is not None else (len(assistant) if trained_turns else 0)
    if trained_turns < expected:
        warns.append(f"{row.where}: {trained_turns} of {expected} assistant turns meant to train have trained tokens")
    return fails, warns


def _check_vocabulary(rows: list[Row], tokenizer, openers: dict[str, list[int]]) -> list[Row]:
    """Rows in which no turn opener occurs; :class:`InputError` when the ids cannot be this tokenizer's
    (an id beyond its vocabulary, or no opener in any row): the wrong ``--tokenizer``."""
    size = len(tokenizer)
    for r in rows:
        if r.input_ids and max(r.input_ids) >= size:
            raise InputError(f"token id {max(r.input_ids)} is beyond this tokenizer's {size} ids", path=r.where,
                             field="input_ids", hint="pass the tokenizer the export was made with")
    unfound = [r for r in rows if not turn_spans(r.input_ids, openers)]
    if unfound and len(unfound) == len(rows):
        raise InputError("no turn opener of this tokenizer's chat template occurs in any row",
                         path=rows[0].where.split(" (")[0], hint="pass the tokenizer the export was made with")
    return unfound


def roles_check(rows: list[Row], tokenizer) -> Check:
    openers = role_openers(tokenizer)
    unfound = _check_vocabulary(rows, tokenizer, openers)
    fails, warns = [], [f"{r.where}: no turn opener found" for r in unfound]
    for r in rows:
        f, w = _row_roles(r, openers, tokenizer)
        fails += f
        warns += w
    verdict = "FAIL" if fails else "WARN" if warns else "PASS"
    return Check("labels.roles", verdict, len(fails), 0,
                 f"{len(fails)} rows train system/user/tool tokens; {len(warns)} rows leave an assistant turn "
                 "untrained", fails + warns)


def empty_check(rows: list[Row]) -> Check:
    empty = [r.where for r in rows if all(lab == IGNORE for lab in r.labels)]
    return Check("labels.empty", "WARN" if empty else "PASS", len(empty), 0,
                 f"{len(empty)} of {len(rows)} rows have no trained token", empty)


def duplicates_check(rows: list[Row]) -> Check:
    seen, dup = {}, []
    for r in rows:
        key = hashlib.sha1(repr((r.input_ids, r.labels)).encode()).hexdigest()
        if key in seen:
            dup.append(f"{r.where} = {seen[key]}")
        else:
            seen[key] = r.where
    return Check("labels.duplicates", "WARN" if dup else "PASS", len(dup), 0,
                 f"{len(dup)} rows repeat an earlier row (trained twice per epoch)", dup)


def label_checks(rows: list[Row], tokenizer=None) -> list[Check]:
    """The label checks; ``labels.roles`` only with a tokenizer."""
    checks = [alignment_check(rows)]
    if tokenizer is not None:
        checks.append(roles_check(rows, tokenizer))
    return checks + [empty_check(rows), duplicates_check(rows)]


def load_rows(paths: list[str]) -> list[Row]:
    """Token export rows of ``paths``; a row without equal-length int lists ``input_ids``/``labels`` raises."""
    from trajkit.traces.load import iter_raw

    rows = []
    for path in paths:
        for raw in iter_raw(path):
            v = raw.value
            if raw.error is not None or not isinstance(v, dict):
                raise InputError(raw.error or "expected an object", path=raw.path, row=raw.row)
            ids, labels = v.get("input_ids"), v.get("labels")
            if not isinstance(ids, list) or not isinstance(labels, list) or len(ids) != len(labels):
                raise InputError("needs input_ids and labels, lists of the same length", path=raw.path, row=raw.row,
                                 field="labels", hint="a token export of trajkit traces export --format tokens")
            where = f"{raw.path}:{raw.row}"
            if "conversation" in v:
                where += f" (conversation {v['conversation']}, window {v.get('window_index', 0)})"
            turns = v.get("turns") if isinstance(v.get("turns"), list) else None
            rows.append(Row(where, [int(x) for x in ids], [int(x) for x in labels], turns))
    if not rows:
        raise InputError("no rows", path=", ".join(paths))
    return rows


def audit_labels(paths: list[str], tokenizer_dir: str | None = None):
    """``trajkit audit labels``: the label checks over export files -> :class:`AuditReport`."""
    from trajkit.audit.report import AuditReport

    tokenizer = None
    if tokenizer_dir is not None:
        from trajkit.models.load import load_tokenizer

        tokenizer = load_tokenizer(tokenizer_dir, what="--tokenizer")
    return AuditReport(label_checks(load_rows(paths), tokenizer))
