"""SFT export, format (a): one row per trace with OpenAI ``messages`` and ``tools``.

The rows load with ``datasets.load_dataset("json", data_files=...)`` and train with TRL's ``SFTTrainer``
(conversational format with a ``tools`` column). Tool-call ``arguments`` stay JSON strings as in the
OpenAI API, which also keeps Arrow's inferred schema uniform across rows.

Traces whose calls cannot be OpenAI ``tool_calls`` (malformed bodies) are skipped and counted by default
(``malformed="skip"``), or kept with the raw block as assistant text (``"as_text"``).

Every row passes the source check of :mod:`trajkit.traces.export.source_check`: each assistant message holds its
source turn's reasoning (``reasoning_content``), narration (``content``) and every tool call with
JSON-equal arguments; a row that does not is skipped and counted (``--strict``: an error). Whether a chat
template then renders those fields is the template's business: ``trajkit traces template-info`` tells.

As Parquet, ``tools`` is stored as a JSON string (TRL's ``SFTTrainer`` parses it): as an Arrow column the
tools of all rows would become one struct holding the union of every schema's keys, and every tool would
come back with dozens of null properties that a chat template then renders. ``messages`` get a fixed
schema (:func:`openai_parquet_schema`). JSONL keeps ``tools`` as a list (``datasets`` >= 4.8 reads it with
its ``Json`` type, keeping schemas apart).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Iterator, Literal

from trajkit.errors import InputError
from trajkit.traces.model import Trace
from trajkit.traces.openai import SystemPolicy, to_openai
from trajkit.traces.export.source_check import SourceTurn, check_turn

MalformedExport = Literal["skip", "as_text", "error"]


@dataclass
class OpenAIExportReport:
    traces: int = 0
    written: int = 0
    skipped_malformed: int = 0
    skipped_rows: int = 0
    skipped_source_check: int = 0
    skipped: list[str] = field(default_factory=list)  # the first few reasons

    def as_dict(self) -> dict[str, Any]:
        return {"traces": self.traces, "written": self.written, "skipped_malformed": self.skipped_malformed,
                "skipped_source_check": self.skipped_source_check, "skipped_rows": self.skipped_rows,
                "first_skipped": self.skipped[:5]}

    def skip(self, trace: Trace, exc: Exception) -> None:
        if len(self.skipped) < 5:
            self.skipped.append(f"{trace.id}: {exc}")


def _message_text(msg: dict[str, Any]) -> str:
    """An exported assistant message as text for the source check: reasoning, content, each call."""
    import json

    calls = [json.dumps({"name": c["function"]["name"], "arguments": c["function"]["arguments"]})
             for c in msg.get("tool_calls") or []]
    return "\n".join([msg.get("reasoning_content") or "", msg.get("content") or "", *calls])


def check_openai_row(row: dict[str, Any], trace: Trace) -> None:
    """InputError unless every assistant message of ``row`` holds its source turn (module docstring)."""
    exported = [m for m in row["messages"] if m["role"] == "assistant"]
    sources = [m for m in trace.messages if m.role == "assistant"]
    if len(exported) != len(sources):
        raise InputError(f"{len(exported)} assistant messages exported for {len(sources)} in the source",
                         field="messages")
    for k, (msg, src) in enumerate(zip(exported, sources)):
        missing = check_turn(_message_text(msg), SourceTurn.of(src), True).missing
        if missing:
            raise InputError("the exported assistant message lacks " + "; ".join(missing),
                             field=f"assistant message {k}")


def openai_row(trace: Trace, *, system: SystemPolicy = "auto", malformed: MalformedExport = "skip") -> dict[str, Any]:
    """The export row of one trace (raises :class:`InputError` for malformed calls unless ``as_text``)."""
    messages, tools = to_openai(trace, system=system, malformed="as_text" if malformed == "as_text" else "error")
    row: dict[str, Any] = {"id": trace.id, "messages": messages, "tools": tools}
    for key in ("category", "subcategory", "task", "source"):
        if getattr(trace, key) is not None:
            row[key] = getattr(trace, key)
    return row


def iter_openai_rows(traces: Iterable[Trace], report: OpenAIExportReport, *, system: SystemPolicy = "auto",
                     malformed: MalformedExport = "skip", strict: bool = False) -> Iterator[dict[str, Any]]:
    """Rows for every exportable trace that passes the source check; skipped traces are counted in
    ``report`` (``strict``: a failed source check raises)."""
    for trace in traces:
        report.traces += 1
        try:
            row = openai_row(trace, system=system, malformed=malformed)
        except InputError as exc:
            if malformed == "error":
                raise InputError(exc.message, path=trace.source, field=exc.field, hint=exc.hint) from None
            report.skipped_malformed += 1
            report.skip(trace, exc)
            continue
        try:
            check_openai_row(row, trace)
        except InputError as exc:
            if strict:
                raise InputError(exc.message, path=trace.source, field=exc.field) from None
            report.skipped_source_check += 1
            report.skip(trace, exc)
            continue
        report.written += 1
        yield row


def openai_parquet_schema():
    """Column types of an OpenAI-messages row in Parquet (``tools`` as a JSON string)."""
    import pyarrow as pa

    call = pa.struct([("id", pa.string()), ("type", pa.string()),
                      ("function", pa.struct([("name", pa.string()), ("arguments", pa.string())]))])
    message = pa.struct([("role", pa.string()), ("content", pa.string()), ("reasoning_content", pa.string()),
                         ("tool_calls", pa.list_(call)), ("tool_call_id", pa.string()), ("name", pa.string())])
    return pa.schema([("id", pa.string()), ("messages", pa.list_(message)), ("tools", pa.string()),
                      ("category", pa.string()), ("subcategory", pa.string()), ("task", pa.string()),
                      ("source", pa.string())])


def export_openai(traces: Iterable[Trace], out: str, *, system: SystemPolicy = "auto",
                  malformed: MalformedExport = "skip", progress: bool = True,
                  strict: bool = False) -> OpenAIExportReport:
    """Write one OpenAI-messages row per exportable trace to ``out`` (JSONL, .gz/.xz, or Parquet)."""
    from trajkit.progress import progress_bar
    from trajkit.traces.jsonvalue import dumps
    from trajkit.traces.write import RowWriter, output_format

    report = OpenAIExportReport()
    rows = iter_openai_rows(traces, report, system=system, malformed=malformed, strict=strict)
    parquet = output_format(Path(out)) == ".parquet"
    schema = openai_parquet_schema() if parquet else None
    with RowWriter(out, schema=schema) as writer, progress_bar(desc="export", unit=" rows", enabled=progress) as bar:
        for row in rows:
            if parquet:
                row["tools"] = dumps(row["tools"]).decode()
            writer.write(row)
            bar.update()
    return report
