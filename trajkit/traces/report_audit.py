"""The report's audit section: the verdict tables of ``trajkit audit … --json`` files, embedded as read.

``trajkit traces report SOURCES --out DIR --audit AUDIT.json …`` puts one table per audit file at the top
of the page (a verdict is what a reader needs first): check, verdict (coloured), statistic, threshold,
detail, and the items each check names in a closed ``<details>`` list. The file is read as the JSON
contract of :mod:`trajkit.audit.report` (``{"verdict", "checks": [{"id", "verdict", "statistic",
"threshold", "detail", "items"}]}``), not through the audit package: the report sits below it. Every value
is escaped, like trace text (an item may quote a data row).

Example of one file's table (``audit.json`` holding one failing leak check)::

    audit.json                                        verdict FAIL
    check       verdict  statistic  threshold  detail
    leak.exact  FAIL     1          0          1 of 40 eval items equal a train item …   [1 item]
"""
from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from trajkit.errors import InputError
from trajkit.traces.report_viewer import esc, esc_name

VERDICTS = ("PASS", "WARN", "FAIL")
COLUMNS = ("id", "verdict", "statistic", "threshold", "detail")


def read_audit(path: str) -> dict[str, Any]:
    """One ``trajkit audit --json`` file, checked against the contract; :class:`InputError` names the
    file and the field that is wrong."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise InputError(f"cannot read the audit file ({exc.strerror})", path=path) from None
    except json.JSONDecodeError as exc:
        raise InputError(f"not JSON ({exc.msg}, line {exc.lineno})", path=path,
                         hint="the output of trajkit audit ... --json") from None
    checks = data.get("checks") if isinstance(data, dict) else None
    if not isinstance(checks, list):
        raise InputError("no checks list", path=path, field="checks", hint="the output of trajkit audit ... --json")
    for n, c in enumerate(checks):
        if not isinstance(c, dict) or not isinstance(c.get("id"), str) or c.get("verdict") not in VERDICTS:
            raise InputError(f"check {n} needs an id and a verdict in {VERDICTS}", path=path, field=f"checks[{n}]")
        if not isinstance(c.get("items", []), list):
            raise InputError(f"check {n}: items must be a list", path=path, field=f"checks[{n}].items")
    return data


def _number(x: Any) -> str:
    if x is None:
        return "–"
    if isinstance(x, float) and math.isfinite(x):
        return f"{x:.4g}"
    return str(x)


def _worst(checks: list[dict]) -> str:
    return max((c["verdict"] for c in checks), key=VERDICTS.index, default="PASS")


def _row(c: dict) -> str:
    items = c.get("items") or []
    listed = ""
    if items:
        lis = "".join(f"<li>{esc_name(i)}</li>" for i in items)
        listed = (f'<details class="a-items"><summary>{len(items):,} item{"" if len(items) == 1 else "s"}</summary>'
                  f"<ul>{lis}</ul></details>")
    v = c["verdict"]
    return (f'<tr data-key="{esc(c["id"])}"><th scope="row"><code>{esc_name(c["id"])}</code></th>'
            f'<td class="verdict v-{v.lower()}">{v}</td><td>{esc(_number(c.get("statistic")))}</td>'
            f'<td>{esc(_number(c.get("threshold")))}</td><td class="a-detail">{esc(c.get("detail", ""))}{listed}</td></tr>')


def audit_table(path: str, data: dict[str, Any]) -> str:
    """One audit file as a heading (its name and overall verdict) and a table, one row per check."""
    checks = data["checks"]
    v = _worst(checks)
    head = "".join(f"<th>{h}</th>" for h in ("check", "verdict", "statistic", "threshold", "detail"))
    return (f'<div class="audit" data-file="{esc(path)}"><h3><span class="a-file">{esc_name(path)}</span> '
            f'<span class="verdict v-{v.lower()}">{v}</span></h3>'
            f'<div class="table-wrap"><table class="t-audit"><thead><tr>{head}</tr></thead>'
            f'<tbody>{"".join(_row(c) for c in checks)}</tbody></table></div></div>')


def audit_section(paths: list[str]) -> str:
    """The page's audit section for ``paths`` ('' when none are given)."""
    if not paths:
        return ""
    tables = "".join(audit_table(p, read_audit(p)) for p in paths)
    return ('<section id="audit"><h2>Audit</h2><p class="note">Verdicts of <code>trajkit audit</code> '
            "(PASS / WARN / FAIL; method and sources in docs/audit.md). Open a check's items to see what it "
            f"names.</p>{tables}</section>")
