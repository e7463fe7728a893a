"""``trajkit audit tokenizers``: do two stages (export, trainer, engine, gateway) tokenize the same way?

A tokenizer folder (Hugging Face layout: ``tokenizer.json``, ``tokenizer_config.json``, optionally
``chat_template.jinja`` / ``chat_template.json``, ``generation_config.json``) is split into components,
each fingerprinted as the SHA-1 of its canonical JSON (keys sorted), so two folders that differ only in
file formatting or key order fingerprint the same:

=================  ==========================================================================
component           what it holds
=================  ==========================================================================
``vocab``           the model's token -> id table and model type
``merges``          BPE merges, in order (their order is their priority)
``model_options``   the rest of the model section (byte fallback, unk token, dropout, ...)
``normalizer``      text normalisation before pre-tokenisation
``pre_tokenizer``   the split before the model (ByteLevel, Metaspace, regex, ...)
``added_tokens``    added tokens: content, id, special, lstrip / rstrip / normalized / single_word
``special_tokens``  bos / eos / pad / unk / extra special tokens named by the config, with their ids
``chat_template``   the Jinja chat template (config key, or the ``chat_template.*`` file)
``eos_ids``         the eos token's id and ``generation_config.json``'s ``eos_token_id``
``bos_policy``      the post-processor (what ``add_special_tokens=True`` adds) and add_bos/eos flags
``decoder``         ids -> text
=================  ==========================================================================

Every folder is compared with the first: each component that differs is a FAIL (``decoder``: a WARN)
naming what differs (tokens re-numbered, the first differing template line, ...). With ``--samples``
(token export rows), the **retokenization drift** of each tokenizer: the share of rows whose ids do not
survive a text round trip, ``encode(decode(ids)) != ids`` — ids a trainer would change if it re-encoded
text (verl and NeMo RL keep token ids from the rollout for this reason). Drift is a WARN. With
``--records`` and ``--trained`` (the gateway's record of generation and the samples trained on), the
samples whose ids were changed after generation, re-encoded from text or otherwise
(:mod:`trajkit.audit.reencoded`): a FAIL.
"""
from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path

from trajkit.audit.report import Check
from trajkit.errors import InputError

COMPONENTS = ("vocab", "merges", "model_options", "normalizer", "pre_tokenizer", "added_tokens",
              "special_tokens", "chat_template", "eos_ids", "bos_policy", "decoder")
WARN_ONLY = ("decoder",)
SPECIAL_KEYS = ("bos_token", "eos_token", "pad_token", "unk_token", "extra_special_tokens",
                "additional_special_tokens")


def _read_json(path: str, required: bool):
    if not os.path.isfile(path):
        if required:
            raise InputError("missing", path=path, hint="a Hugging Face tokenizer folder holds tokenizer.json")
        return None
    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise InputError(f"not JSON ({exc.msg})", path=path, row=exc.lineno) from None


def _token_text(value):
    return value.get("content") if isinstance(value, dict) else value


def _chat_template(folder: str, config: dict) -> str | None:
    jinja = os.path.join(folder, "chat_template.jinja")
    if os.path.isfile(jinja):
        return Path(jinja).read_text(encoding="utf-8")
    data = _read_json(os.path.join(folder, "chat_template.json"), required=False)
    if isinstance(data, dict) and "chat_template" in data:
        return data["chat_template"]
    return config.get("chat_template")


def components(folder: str) -> dict:
    """``{component: its value}`` of one tokenizer folder (see the module docstring)."""
    if not os.path.isdir(folder):
        raise InputError("not a folder", path=folder, hint="name a tokenizer folder (tokenizer.json inside)")
    tok = _read_json(os.path.join(folder, "tokenizer.json"), required=True)
    config = _read_json(os.path.join(folder, "tokenizer_config.json"), required=False) or {}
    gen = _read_json(os.path.join(folder, "generation_config.json"), required=False) or {}
    model = dict(tok.get("model") or {})
    vocab, merges = model.pop("vocab", {}), model.pop("merges", [])
    added = sorted(tok.get("added_tokens") or [], key=lambda t: t.get("id", -1))
    ids = {**(vocab if isinstance(vocab, dict) else {}), **{t.get("content"): t.get("id") for t in added}}
    specials = {}
    for key in SPECIAL_KEYS:
        value = config.get(key)
        names = value if isinstance(value, list) else [value]
        for name in (_token_text(v) for v in names if v is not None):
            specials[f"{key}:{name}"] = ids.get(name)
    eos = _token_text(config.get("eos_token"))
    return {"vocab": {"type": model.get("type"), "vocab": vocab}, "merges": merges, "model_options": model,
            "normalizer": tok.get("normalizer"), "pre_tokenizer": tok.get("pre_tokenizer"), "added_tokens": added,
            "special_tokens": specials, "chat_template": _chat_template(folder, config),
            "eos_ids": {"eos_token": ids.get(eos), "generation_config": gen.get("eos_token_id")},
            "bos_policy": {"post_processor": tok.get("post_processor"), "add_bos_token": config.get("add_bos_token"),
                           "add_eos_token": config.get("add_eos_token")},
            "decoder": tok.get("decoder")}


def fingerprint(value) -> str:
    """12 hex digits of the SHA-1 of the canonical JSON of ``value``."""
    return hashlib.sha1(json.dumps(value, sort_keys=True, ensure_ascii=False).encode()).hexdigest()[:12]


@dataclass
class Fingerprint:
    folder: str
    parts: dict[str, str]

    @property
    def whole(self) -> str:
        return fingerprint(self.parts)


def _vocab_diff(a: dict, b: dict) -> str:
    va, vb = a.get("vocab") or {}, b.get("vocab") or {}
    moved = sorted(t for t in va.keys() & vb.keys() if va[t] != vb[t])
    out = [f"{len(vb.keys() - va.keys())} tokens added, {len(va.keys() - vb.keys())} removed, {len(moved)} re-numbered"]
    out += [f"{t!r} {va[t]}->{vb[t]}" for t in moved[:3]]
    if a.get("type") != b.get("type"):
        out.append(f"model {a.get('type')} -> {b.get('type')}")
    return ", ".join(out)


def _added_diff(a: list, b: list) -> str:
    da, db = {t.get("content"): t for t in a}, {t.get("content"): t for t in b}
    out = [f"{c!r} only in the reference" for c in sorted(da.keys() - db.keys())]
    out += [f"{c!r} new" for c in sorted(db.keys() - da.keys())]
    for c in sorted(da.keys() & db.keys()):
        changed = [k for k in sorted(da[c].keys() | db[c].keys()) if da[c].get(k) != db[c].get(k)]
        out += [f"{c!r} {k} {da[c].get(k)}->{db[c].get(k)}" for k in changed]
    return ", ".join(out[:6]) + (f" (+{len(out) - 6} more)" if len(out) > 6 else "")


def _template_diff(a: str | None, b: str | None) -> str:
    if a is None or b is None:
        return "no chat template in " + ("the reference" if a is None else "this folder")
    la, lb = a.splitlines(), b.splitlines()
    line = next((i for i, (x, y) in enumerate(zip(la, lb)) if x != y), min(len(la), len(lb)))
    show = lambda xs: repr(xs[line][:60]) if line < len(xs) else "(end)"  # noqa: E731
    return f"first difference at line {line + 1}: {show(la)} -> {show(lb)}"


def _dict_diff(a, b) -> str:
    if isinstance(a, dict) and isinstance(b, dict):
        keys = sorted(k for k in a.keys() | b.keys() if a.get(k) != b.get(k))
        return ", ".join(f"{k}: {json.dumps(a.get(k))[:60]} -> {json.dumps(b.get(k))[:60]}" for k in keys[:4])
    return f"{json.dumps(a)[:60]} -> {json.dumps(b)[:60]}"


def describe_difference(component: str, a, b) -> str:
    """What differs in one component between the reference ``a`` and ``b``, in a few words."""
    if component == "vocab":
        return _vocab_diff(a, b)
    if component == "added_tokens":
        return _added_diff(a, b)
    if component == "chat_template":
        return _template_diff(a, b)
    if component == "merges":
        n = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
        return f"{len(a)} -> {len(b)} merges, first difference at merge {n}"
    return _dict_diff(a, b)


def component_checks(folders: list[str]) -> list[Check]:
    """``tokenizers.fingerprint`` over all folders, then (two or more) one check per component against the first."""
    parts = [components(f) for f in folders]
    prints = [Fingerprint(f, {c: fingerprint(p[c]) for c in COMPONENTS}) for f, p in zip(folders, parts)]
    distinct = len({p.whole for p in prints})
    checks = [Check("tokenizers.fingerprint", "PASS" if distinct == 1 else "FAIL", distinct, 1,
                    f"{distinct} distinct tokenizer(s) among {len(folders)} folders",
                    [f"{p.folder}: {p.whole} ({', '.join(f'{c}={p.parts[c][:6]}' for c in COMPONENTS)})" for p in prints])]
    for c in COMPONENTS if len(folders) > 1 else ():
        diffs = [f"{f} vs {folders[0]}: {describe_difference(c, parts[0][c], p[c])}"
                 for f, p, fp in zip(folders[1:], parts[1:], prints[1:]) if fp.parts[c] != prints[0].parts[c]]
        bad = "WARN" if c in WARN_ONLY else "FAIL"
        checks.append(Check(f"tokenizers.{c}", bad if diffs else "PASS", len(diffs), 0,
                            f"{len(diffs)} of {len(folders) - 1} folders differ from {folders[0]}", diffs))
    return checks


def drift(tokenizer, rows) -> list[tuple[str, int]]:
    """``[(row, first differing position)]`` of rows whose ids change in ``encode(decode(ids))``."""
    out = []
    for r in rows:
        again = tokenizer.encode(tokenizer.decode(r.input_ids), add_special_tokens=False)
        if again != r.input_ids:
            out.append((r.where, next((i for i, (x, y) in enumerate(zip(again, r.input_ids)) if x != y),
                                      min(len(again), len(r.input_ids)))))
    return out


def drift_check(folders: list[str], rows) -> Check:
    from trajkit.models.load import load_tokenizer

    worst, items = 0.0, []
    for f in folders:
        found = drift(load_tokenizer(f, what="tokenizer"), rows)
        worst = max(worst, len(found) / len(rows))
        items += [f"{f}: {where} changes at token {at}" for where, at in found]
    return Check("tokenizers.drift", "WARN" if items else "PASS", worst, 0,
                 f"highest share of the {len(rows)} sample rows whose ids change in encode(decode(ids))", items)


def audit_tokenizers(folders: list[str], samples: list[str] | None = None, records: str | None = None,
                     trained: list[str] | None = None):
    """``trajkit audit tokenizers``: fingerprints, component diff, (with ``samples``) drift and (with the
    gateway ``records`` and the ``trained`` samples) re-encoded samples -> AuditReport."""
    from trajkit.audit.report import AuditReport

    checks = component_checks(folders)
    if samples:
        from trajkit.audit.labels import load_rows

        checks.append(drift_check(folders, load_rows(samples)))
    if bool(records) != bool(trained):
        raise InputError("--records and --trained go together", hint="the gateway's records.jsonl and the "
                                                                     "samples trained on")
    if records:
        from trajkit.audit.reencoded import reencoded_check
        from trajkit.models.load import load_tokenizer

        checks.append(reencoded_check(trained, records, load_tokenizer(folders[0], what="tokenizer")))
    return AuditReport(checks)
