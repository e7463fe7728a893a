"""Harbor's Agent Trajectory Interchange Format (ATIF, harborframework.com/docs/trajectory-format, RFC 0001)
<-> OpenAI chat messages, so ``trajkit traces`` reads ATIF trajectories and trajkit's rollouts can be written
for tools that read ATIF.

An ATIF trajectory is one JSON object: ``schema_version`` (``"ATIF-v1.N"``), ``session_id``, ``agent``
(``name``, ``version``, ``model_name``), ``steps`` and optional ``notes``, ``final_metrics``, ``extra``. Each
step has ``step_id`` (1, 2, ... in order), ``source`` (``system``, ``user`` or ``agent``) and ``message``; an
agent step may add ``reasoning_content``, ``tool_calls`` (``tool_call_id``, ``function_name``, ``arguments``:
an object) and ``observation`` (``results``: ``source_call_id``, ``content``).

The mapping, both ways (lossless for OpenAI messages whose tool messages follow the assistant turn that called
them, the layout every trajkit writer produces):

==========================================  =====================================================
OpenAI message                              ATIF
==========================================  =====================================================
``system`` / ``user``                       a ``system`` / ``user`` step
``assistant`` (content, reasoning, calls)   an ``agent`` step (message, reasoning_content, tool_calls)
``tool`` messages after it                  that step's ``observation.results``
==========================================  =====================================================

A ``message`` given as a list of content parts (ATIF 1.6+) is read as the concatenation of its text parts.
Where we deviate: per-step ``metrics``, ``timestamp`` and subagent trajectories are not produced; on reading
they are ignored.
"""
from __future__ import annotations

import json
from typing import Any

from trajkit.errors import InputError

SCHEMA_VERSION = "ATIF-v1.4"


def is_atif(value: Any) -> bool:
    return isinstance(value, dict) and isinstance(value.get("steps"), list) and \
        str(value.get("schema_version", "")).startswith("ATIF")


def to_atif(messages: list[dict], session_id: str, agent: dict | None = None, extra: dict | None = None) -> dict:
    """OpenAI ``messages`` -> an ATIF trajectory (module docstring).

    >>> doc = to_atif([{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}], "s1")
    >>> [(s["step_id"], s["source"], s["message"]) for s in doc["steps"]]
    [(1, 'user', 'hi'), (2, 'agent', 'hello')]
    """
    steps: list[dict] = []
    for i, m in enumerate(messages):
        role = m.get("role")
        if role == "tool":
            if not steps or steps[-1]["source"] != "agent":
                raise InputError("a tool message that follows no assistant turn", field=f"messages[{i}]")
            results = steps[-1].setdefault("observation", {"results": []})["results"]
            results.append({"source_call_id": m.get("tool_call_id"), "content": m.get("content") or ""})
            continue
        if role not in ("system", "user", "assistant"):
            raise InputError(f"unknown role {role!r}", field=f"messages[{i}].role")
        step = {"step_id": len(steps) + 1, "source": "agent" if role == "assistant" else role,
                "message": m.get("content") or ""}
        if role == "assistant":
            if m.get("reasoning_content"):
                step["reasoning_content"] = m["reasoning_content"]
            if m.get("tool_calls"):
                step["tool_calls"] = [_atif_call(c) for c in m["tool_calls"]]
        steps.append(step)
    doc = {"schema_version": SCHEMA_VERSION, "session_id": session_id,
           "agent": agent or {"name": "trajkit", "version": "0"}, "steps": steps}
    if extra:
        doc["extra"] = extra
    return doc


def _atif_call(call: dict) -> dict:
    fn = call.get("function") or {}
    args = fn.get("arguments")
    if isinstance(args, str):
        try:
            args = json.loads(args)
        except ValueError:
            args = {"_raw": args}
    return {"tool_call_id": call.get("id"), "function_name": fn.get("name"), "arguments": args or {}}


def from_atif(doc: dict) -> list[dict]:
    """An ATIF trajectory -> OpenAI messages; a bad step raises :class:`InputError` naming ``steps[i]``."""
    out: list[dict] = []
    for i, step in enumerate(doc["steps"]):
        where = f"steps[{i}]"
        if not isinstance(step, dict):
            raise InputError(f"a step is a {type(step).__name__}", field=where)
        if step.get("step_id") != i + 1:
            raise InputError(f"step_id {step.get('step_id')!r}, expected {i + 1} (sequential from 1)",
                             field=f"{where}.step_id")
        source = step.get("source")
        if source not in ("system", "user", "agent"):
            raise InputError(f"source {source!r}", field=f"{where}.source", hint="system, user or agent")
        text = _text(step.get("message"), f"{where}.message")
        if source != "agent":
            out.append({"role": source, "content": text})
            continue
        msg: dict[str, Any] = {"role": "assistant", "content": text}
        if step.get("reasoning_content"):
            msg["reasoning_content"] = step["reasoning_content"]
        if step.get("tool_calls"):
            msg["tool_calls"] = [{"id": c.get("tool_call_id"), "type": "function",
                                  "function": {"name": c.get("function_name"),
                                               "arguments": json.dumps(c.get("arguments") or {})}}
                                 for c in step["tool_calls"]]
        out.append(msg)
        for r in (step.get("observation") or {}).get("results") or []:
            out.append({"role": "tool", "tool_call_id": r.get("source_call_id"),
                        "content": _text(r.get("content"), f"{where}.observation")})
    return out


def _text(value: Any, where: str) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return "".join(p.get("text", "") for p in value if isinstance(p, dict))
    raise InputError(f"a {type(value).__name__}, expected text or content parts", field=where)
