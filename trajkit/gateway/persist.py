"""Sessions on disk as they happen: what ``trajkit serve --save-dir DIR`` writes.

:class:`SessionLog` appends each call to ``DIR/records.jsonl`` the moment its response is built (one JSON
line ``{"session": id, **CallRecord}``, flushed to the OS before the response is sent), so a server killed
with SIGKILL, the OOM killer or a crash loses at most the calls still being generated. On an orderly stop
(SIGINT, SIGTERM: :func:`trajkit.gateway.server.serve` turns SIGTERM into ``SystemExit(143)`` so the
stop runs like Ctrl-C) :meth:`SessionLog.close` adds the derived files, ``samples.jsonl`` (stitched
samples) and ``hermes.jsonl`` (Hermes ShareGPT rows). After a hard kill the records alone rebuild them:
``save_sessions(sessions_from_records("DIR/records.jsonl"), "DIR")``.

A directory that already holds records from an earlier run is refused (appending a second run's calls
under the same session ids would stitch two runs into one chain).
"""
from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

from trajkit.errors import ConfigError
from trajkit.gateway.export import session_hermes_rows, session_samples, write_hermes, write_samples
from trajkit.gateway.sessions import CallRecord, ChoiceRecord, Session, record_line


class SessionLog:
    """The append-only ``records.jsonl`` of one server run under ``out_dir`` (see the module docstring)."""

    def __init__(self, out_dir: str | Path):
        self.dir = Path(out_dir)
        self.path = self.dir / "records.jsonl"
        if self.path.exists() and self.path.stat().st_size > 0:
            raise ConfigError(f"--save-dir {out_dir}: {self.path} already holds an earlier run's records; "
                              "choose a new directory (or move that one away)")
        self.dir.mkdir(parents=True, exist_ok=True)
        self._file = open(self.path, "a", encoding="utf-8")  # noqa: SIM115 (open for the server's lifetime)
        self._lock = threading.Lock()
        self.calls = 0

    def append(self, session_id: str, record: CallRecord) -> None:
        """Write one finished call and flush it (a SIGKILL after this returns does not lose it)."""
        line = record_line(session_id, record)
        with self._lock:
            self._file.write(line)
            self._file.flush()
            self.calls += 1

    def close(self, sessions: list[Session]) -> int:
        """Close the log and write ``samples.jsonl`` and ``hermes.jsonl`` beside it; returns the session count."""
        with self._lock:
            self._file.close()
        write_samples([row for s in sessions for row in session_samples(s)], self.dir / "samples.jsonl")
        write_hermes([row for s in sessions for row in session_hermes_rows(s)], self.dir / "hermes.jsonl")
        return len(sessions)


def sessions_from_records(path: str | Path) -> list[Session]:
    """The sessions of a ``records.jsonl`` (a live log or a saved one), records in file order. A last line
    cut short by a kill mid-write is skipped; any other bad line is an error naming it."""
    sessions: dict[str, Session] = {}
    lines = Path(path).read_text(encoding="utf-8").splitlines()
    for n, line in enumerate(lines, 1):
        try:
            row = json.loads(line)
        except ValueError:
            if n == len(lines):
                break
            raise ConfigError(f"{path}:{n}: not a JSON record line") from None
        sid = row.pop("session")
        record = _record(row)
        session = sessions.setdefault(sid, Session(sid, record.model))
        session.records.append(record)
    return list(sessions.values())


def _record(row: dict[str, Any]) -> CallRecord:
    choices = [ChoiceRecord(**c) for c in row.pop("choices")]
    return CallRecord(**row, choices=choices)
