"""A session's records as training data: stitched samples and Hermes ShareGPT rows.

- :func:`session_samples`: one dict per stitched chain (:mod:`~trajkit.gateway.stitch`) with the fields of
  :class:`trajkit.envs.sample.Sample` (``trajkit.rl.gateway_task.sample_from_dict`` builds the object), written as
  JSONL or Parquet by :func:`write_samples`.
- :func:`session_hermes_rows`: one Hermes ShareGPT row per chain (``trajkit traces stats`` reads them), in the
  layout the Hermes Agent itself saves (``trajectory_samples.jsonl``, the format of the
  ``lambda/hermes-agent-reasoning-traces`` data): a ``system`` turn with the Hermes function-calling prompt
  and the tools in ``<tools>``, ``human`` turns, ``gpt`` turns as ``<think>\\n{reasoning}\\n</think>\\n`` (an
  empty think block when there was none) + content + one ``<tool_call>\\n{json}\\n</tool_call>`` per call,
  and the tool results after each call turn as ONE ``tool`` turn of ``<tool_response>`` blocks holding
  ``{"tool_call_id", "name", "content"}``. The conversation is the chain's last request's messages plus the
  message the gateway returned for it; the request's own system prompt is not part of that layout.
"""
from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from trajkit.gateway.sessions import Session, record_line
from trajkit.gateway.stitch import stitch

HERMES_SYSTEM = (
    "You are a function calling AI model. You are provided with function signatures within <tools> </tools> "
    "XML tags. You may call one or more functions to assist with the user query. If available tools are not "
    "relevant in assisting with user query, just respond in natural conversational language. Don't make "
    "assumptions about what values to plug into functions. After calling & executing the functions, you will "
    "be provided with function results within <tool_response> </tool_response> XML tags. Here are the "
    "available tools:\n<tools>\n{tools}\n</tools>\nFor each function call return a JSON object, with the "
    "following pydantic model json schema for each:\n{{'title': 'FunctionCall', 'type': 'object', "
    "'properties': {{'name': {{'title': 'Name', 'type': 'string'}}, 'arguments': {{'title': 'Arguments', "
    "'type': 'object'}}}}, 'required': ['name', 'arguments']}}\nEach function call should be enclosed within "
    "<tool_call> </tool_call> XML tags.\nExample:\n<tool_call>\n{{'name': <function-name>,'arguments': "
    "<args-dict>}}\n</tool_call>")


def session_samples(session: Session) -> list[dict[str, Any]]:
    return [c.as_sample_dict(session.id) for c in stitch(session.records)]


def session_hermes_rows(session: Session) -> list[dict[str, Any]]:
    rows = []
    for n, chain in enumerate(stitch(session.records)):
        call, k = chain.calls[-1]
        rec = session.records[call]
        if rec.endpoint != "chat" or rec.choices[k].message is None:
            continue
        messages = list(rec.messages or []) + [rec.choices[k].message]
        rows.append({"id": f"{session.id}-{n}", "conversations": hermes_conversation(messages, rec.tools),
                     "model": rec.model, "session": session.id})
    return rows


def hermes_conversation(messages: list[dict], tools: list[dict] | None) -> list[dict[str, str]]:
    """OpenAI messages -> Hermes turns in the Hermes Agent's saved layout (see the module docstring)."""
    listed = [{"name": t["function"]["name"], "description": t["function"].get("description", ""),
               "parameters": t["function"].get("parameters", {}), "required": None} for t in tools or []]
    turns = [{"from": "system", "value": HERMES_SYSTEM.format(tools=json.dumps(listed, ensure_ascii=False)
                                                             if listed else "[]")}]
    i = 0
    while i < len(messages):
        m = messages[i]
        if m["role"] == "user":
            turns.append({"from": "human", "value": m.get("content") or ""})
        elif m["role"] == "assistant":
            turns.append({"from": "gpt", "value": _gpt_value(m)})
            j = i + 1
            while j < len(messages) and messages[j]["role"] == "tool" and m.get("tool_calls"):
                j += 1
            if j > i + 1:
                turns.append({"from": "tool", "value": "\n".join(
                    _tool_block(messages[t], m["tool_calls"], t - i - 1) for t in range(i + 1, j))})
                i = j - 1
        i += 1
    return turns


def _gpt_value(m: dict) -> str:
    reasoning = m.get("reasoning_content")
    out = f"<think>\n{reasoning}\n</think>\n" if reasoning and reasoning.strip() else ""
    content = m.get("content") or ""
    calls = m.get("tool_calls") or []
    if calls:
        if content.strip():
            out += content + "\n"
        for c in calls:
            out += "<tool_call>\n" + _call_json(c["function"]) + "\n</tool_call>\n"
    else:
        out += content
    if "<think>" not in out:
        out = "<think>\n</think>\n" + out
    return out.rstrip() if calls else out.strip()


def _call_json(fn: dict) -> str:
    """A call as the Hermes JSON; arguments that are not JSON are written as they were sent (the row keeps
    them, and ``trajkit traces`` reports the call as malformed, instead of an invented ``{}``)."""
    try:
        args = json.loads(fn["arguments"])
    except ValueError:
        return '{"name": ' + json.dumps(fn["name"], ensure_ascii=False) + ', "arguments": ' + fn["arguments"] + "}"
    return json.dumps({"name": fn["name"], "arguments": args}, ensure_ascii=False)


def _tool_block(m: dict, calls: list[dict], index: int) -> str:
    content: Any = m.get("content") or ""
    if content.strip().startswith(("{", "[")):
        try:
            content = json.loads(content)
        except ValueError:
            pass
    name = calls[index]["function"]["name"] if index < len(calls) else "unknown"
    return "<tool_response>\n" + json.dumps({"tool_call_id": m.get("tool_call_id", ""), "name": name,
                                             "content": content}, ensure_ascii=False) + "\n</tool_response>"


def write_samples(rows: Iterable[dict[str, Any]], path: str | Path) -> int:
    """Stitched samples to ``path``: Parquet when it ends in ``.parquet``, else JSONL; returns the count."""
    from trajkit.atomic import write_atomic

    rows = list(rows)
    if str(path).endswith(".parquet"):
        import pyarrow as pa
        import pyarrow.parquet as pq

        flat = [{**{k: v for k, v in r.items() if k != "metadata"}, "metadata": json.dumps(r["metadata"])}
                for r in rows]
        pq.write_table(pa.Table.from_pylist(flat), str(path))
    else:
        write_atomic(path, "".join(json.dumps(r) + "\n" for r in rows))
    return len(rows)


def write_hermes(rows: Iterable[dict[str, Any]], path: str | Path) -> int:
    from trajkit.atomic import write_atomic

    rows = list(rows)
    write_atomic(path, "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))
    return len(rows)


def save_sessions(sessions: Iterable[Session], out_dir: str | Path) -> int:
    """Every session's records, stitched samples and Hermes rows under ``out_dir``; returns the session count."""
    from trajkit.atomic import write_atomic

    sessions = list(sessions)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    write_atomic(out / "records.jsonl", "".join(record_line(s.id, r) for s in sessions for r in s.records))
    write_samples([row for s in sessions for row in session_samples(s)], out / "samples.jsonl")
    write_hermes([row for s in sessions for row in session_hermes_rows(s)], out / "hermes.jsonl")
    return len(sessions)
