"""A session's records as training data: stitched samples and Hermes ShareGPT rows.

- :func:`session_samples`: one dict per stitched chain (:mod:`~trajkit.gateway.stitch`) with the fields of
  :class:`trajkit.envs.sample.Sample` (``trajkit.rl.gateway_task.sample_from_dict`` builds the object), written as
  JSONL or Parquet by :func:`write_samples`.
- :func:`session_hermes_rows`: one Hermes ShareGPT row per chain (``trajkit traces stats`` reads them), in the
  one Hermes layout of :mod:`trajkit.traces.hermes_text` (the layout of ``lambda/hermes-agent-reasoning-traces``,
  which the Hermes Agent's ``trajectory_samples.jsonl`` holds): a ``system`` turn (the request's system prompt,
  then the Hermes function-calling prompt with the tools in ``<tools>``; none without tools or a system
  prompt), ``human`` turns, ``gpt`` turns as the text the model wrote (think block, content, one
  ``<tool_call>`` per call), and the results after each call turn as ONE ``tool`` turn of ``<tool_response>``
  envelopes ``{"tool_call_id", "name", "content"}``. The conversation is the chain's last request's messages
  plus the message the gateway returned for it. A ``gpt`` turn is the model's own text: rendered inline, the
  row's turns are the very text the gateway trained on, and ``trajkit traces export`` of the row gives the
  trained tokens back (``tests/gateway/test_hermes_round_trip.py``). Under a template that renders reasoning
  itself with other glue after ``</think>`` (trajkit's own, Qwen3: ``\\n\\n``), the row has Hermes text's one
  newline there, and ``traces export`` renders the template's glue again. Unlike the Hermes Agent, no empty think
  block is added to a turn without reasoning and no turn is stripped (the model did not write those bytes).
"""
from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from trajkit.gateway.sessions import Session, record_line
from trajkit.gateway.stitch import stitch
from trajkit.traces.hermes_text import HERMES_SYSTEM, hermes_conversation

__all__ = ["HERMES_SYSTEM", "hermes_conversation", "save_sessions", "session_hermes_rows", "session_samples",
           "write_hermes", "write_samples"]


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
