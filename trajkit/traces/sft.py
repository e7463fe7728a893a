"""SFT export, format (a): one row per trace with OpenAI ``messages`` and ``tools``.

The rows load with ``datasets.load_dataset("json", data_files=...)`` and train with TRL's ``SFTTrainer``
(conversational format with a ``tools`` column). Tool-call ``arguments`` stay JSON strings as in the
OpenAI API, which also keeps Arrow's inferred schema uniform across rows.

Traces whose calls cannot be OpenAI ``tool_calls`` (malformed bodies) are skipped and counted by default
(``malformed="skip"``), or kept with the raw block as assistant text (``"as_text"``).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable, Iterator, Literal

from trajkit.errors import InputError
from trajkit.traces.model import Trace
from trajkit.traces.openai import SystemPolicy, to_openai

MalformedExport = Literal["skip", "as_text", "error"]


@dataclass
class OpenAIExportReport:
    traces: int = 0
    written: int = 0
    skipped_malformed: int = 0
    skipped_rows: int = 0
    skipped: list[str] = field(default_factory=list)  # the first few reasons

    def as_dict(self) -> dict[str, Any]:
        return {"traces": self.traces, "written": self.written, "skipped_malformed": self.skipped_malformed,
                "skipped_rows": self.skipped_rows, "first_skipped": self.skipped[:5]}


def openai_row(trace: Trace, *, system: SystemPolicy = "auto", malformed: MalformedExport = "skip") -> dict[str, Any]:
    """The export row of one trace (raises :class:`InputError` for malformed calls unless ``as_text``)."""
    messages, tools = to_openai(trace, system=system, malformed="as_text" if malformed == "as_text" else "error")
    row: dict[str, Any] = {"id": trace.id, "messages": messages, "tools": tools}
    for key in ("category", "subcategory", "task", "source"):
        if getattr(trace, key) is not None:
            row[key] = getattr(trace, key)
    return row


def iter_openai_rows(traces: Iterable[Trace], report: OpenAIExportReport, *, system: SystemPolicy = "auto",
                     malformed: MalformedExport = "skip") -> Iterator[dict[str, Any]]:
    """Rows for every exportable trace; skipped traces are counted in ``report``."""
    for trace in traces:
        report.traces += 1
        try:
            row = openai_row(trace, system=system, malformed=malformed)
        except InputError as exc:
            if malformed == "error":
                raise InputError(exc.message, path=trace.source, field=exc.field, hint=exc.hint) from None
            report.skipped_malformed += 1
            if len(report.skipped) < 5:
                report.skipped.append(f"{trace.id}: {exc}")
            continue
        report.written += 1
        yield row


def export_openai(traces: Iterable[Trace], out: str, *, system: SystemPolicy = "auto",
                  malformed: MalformedExport = "skip", progress: bool = True) -> OpenAIExportReport:
    """Write one OpenAI-messages row per exportable trace to ``out`` (JSONL, .gz/.xz, or Parquet)."""
    from trajkit.progress import progress_bar
    from trajkit.traces.write import RowWriter

    report = OpenAIExportReport()
    rows = iter_openai_rows(traces, report, system=system, malformed=malformed)
    with RowWriter(out) as writer, progress_bar(desc="export", unit=" rows", enabled=progress) as bar:
        for row in rows:
            writer.write(row)
            bar.update()
    return report
