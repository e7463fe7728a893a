"""``tokenizers.reencoded``: trained samples whose ids are not the ids the engine generated.

Retokenization drift (:func:`trajkit.audit.tokenizers.drift`) says which ids *would* change if text were
re-encoded; this check says which trained samples *were* changed. The evidence is the gateway's record of
generation: ``records.jsonl`` (``trajkit serve --save-dir``, :mod:`trajkit.gateway.persist`) holds, per
call, the ``prompt_ids`` the server rendered and each choice's sampled ``token_ids``. A trained sample that
came from the gateway names its calls in ``metadata`` (``{"session": S, "calls": [[call, choice], ...]}``,
as :mod:`trajkit.gateway.stitch` writes them). For such a sample the stitcher's contract gives two
references computed from the records alone:

- its whole sequence ``prompt_ids + completion_ids`` is the last call's ``prompt_ids`` + that choice's
  ``token_ids`` (every earlier call's prompt and completion are a prefix of the last prompt);
- its sampled tokens (``loss_mask`` 1), in order, are the concatenation of each named call's ``token_ids``.

A sample that breaks either is a FAIL, named ``FILE:LINE (session S)`` with the first position that
differs. With a tokenizer folder the check also says *why* when it can: a sample equal to
``encode(decode(generated ids))`` was **re-encoded from text** (a pipeline kept the text and tokenized it
again; the policy is then trained on ids it never sampled, the mismatch verl and NeMo RL avoid by keeping
rollout ids).

What the check cannot see: a re-encoding that gives back the same ids (canonical tokenizations survive
``encode(decode(ids))``, so nothing changed and nothing is wrong); samples without gateway provenance
(counted in the detail, not checked); records that were themselves edited.
"""
from __future__ import annotations

import json
from pathlib import Path

from trajkit.audit.report import Check
from trajkit.errors import InputError


def read_records(path: str) -> dict[tuple[str, int], dict]:
    """``{(session, call index): record}`` of a gateway ``records.jsonl``; a bad line raises naming it
    (a last line cut short by a kill is skipped, as the gateway's own reader does)."""
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise InputError(f"cannot read the records ({exc.strerror})", path=path) from None
    last = max((n for n, line in enumerate(lines, 1) if line.strip()), default=0)
    out = {}
    for lineno, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except json.JSONDecodeError as exc:
            if lineno == last:
                continue  # the torn last line of a killed server
            raise InputError(f"not JSON ({exc.msg})", path=path, row=lineno) from None
        if (not isinstance(rec, dict) or not isinstance(rec.get("session"), str) or not isinstance(rec.get("index"), int)
                or not isinstance(rec.get("prompt_ids"), list) or not isinstance(rec.get("choices"), list)):
            raise InputError("expected a gateway call record {session, index, prompt_ids, choices}", path=path,
                             row=lineno, hint="the records.jsonl of trajkit serve --save-dir")
        out[(rec["session"], rec["index"])] = rec
    if not out:
        raise InputError("no records", path=path)
    return out


def _first_difference(a: list[int], b: list[int]) -> int:
    return next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))


def expected_ids(records: dict, session: str, calls: list) -> tuple[list[int], list[int]]:
    """(whole sequence, sampled tokens) a stitched sample of ``calls`` must hold, from the records;
    KeyError/IndexError when a call is not recorded."""
    sampled: list[int] = []
    for call, choice in calls:
        sampled += records[(session, call)]["choices"][choice]["token_ids"]
    last_call, last_choice = calls[-1]
    last = records[(session, last_call)]
    return list(last["prompt_ids"]) + list(last["choices"][last_choice]["token_ids"]), sampled


def sample_problem(row: dict, records: dict, tokenizer=None) -> str | None:
    """What is wrong with one provenance-carrying sample row, or None when its ids are the generated ones."""
    meta = row["metadata"]
    try:
        whole, sampled = expected_ids(records, meta["session"], meta["calls"])
    except (KeyError, IndexError, TypeError, ValueError):
        return f"calls {meta['calls']} of session {meta['session']} are not in the records"
    ids = list(row["prompt_ids"]) + list(row["completion_ids"])
    trained = [t for t, m in zip(row["completion_ids"], row["loss_mask"]) if m]
    if ids == whole and trained == sampled:
        return None
    if ids == whole:
        return f"trained tokens differ from the sampled ones at sampled token {_first_difference(trained, sampled)}"
    what = f"ids differ from the generated ones at token {_first_difference(ids, whole)} of {len(whole)}"
    if tokenizer is not None and ids == tokenizer.encode(tokenizer.decode(whole), add_special_tokens=False):
        what += ": re-encoded from text (the ids equal encode(decode(generated ids)))"
    return what


def _sample_rows(paths: list[str]):
    from trajkit.traces.load import iter_raw

    for path in paths:
        for raw in iter_raw(path):
            v = raw.value
            if raw.error is not None or not isinstance(v, dict):
                raise InputError(raw.error or "expected an object", path=raw.path, row=raw.row)
            if not all(isinstance(v.get(k), list) for k in ("prompt_ids", "completion_ids", "loss_mask")):
                raise InputError("needs prompt_ids, completion_ids and loss_mask lists", path=raw.path, row=raw.row,
                                 hint="trained samples as the gateway writes them (samples.jsonl)")
            if isinstance(v.get("metadata"), str):  # the gateway's Parquet samples hold metadata as JSON text
                try:
                    v = {**v, "metadata": json.loads(v["metadata"])}
                except json.JSONDecodeError:
                    raise InputError("metadata is not JSON", path=raw.path, row=raw.row, field="metadata") from None
            yield f"{raw.path}:{raw.row}", v


def reencoded_check(sample_paths: list[str], records_path: str, tokenizer=None) -> Check:
    """``tokenizers.reencoded`` (see the module docstring): FAIL for any sample whose ids are not the
    generated ones; statistic = their share of the samples that carry gateway provenance."""
    records = read_records(records_path)
    checked, unchecked, found = 0, 0, []
    for where, row in _sample_rows(sample_paths):
        meta = row.get("metadata")
        if not isinstance(meta, dict) or not isinstance(meta.get("session"), str) or not meta.get("calls"):
            unchecked += 1
            continue
        checked += 1
        problem = sample_problem(row, records, tokenizer)
        if problem is not None:
            found.append(f"{where} (session {meta['session']}): {problem}")
    if not checked:
        raise InputError(f"none of the {unchecked} samples names its gateway calls (metadata.session, metadata.calls)",
                         path=", ".join(sample_paths), hint="samples.jsonl of trajkit serve --save-dir")
    detail = (f"{len(found)} of {checked} samples with gateway provenance hold ids the engine did not generate "
              f"(reference: {records_path})" + (f"; {unchecked} samples without provenance not checked" if unchecked else ""))
    return Check("tokenizers.reencoded", "FAIL" if found else "PASS", len(found) / checked, 0, detail, found)
