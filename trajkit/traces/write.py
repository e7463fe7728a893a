"""Streaming row writers: JSONL (plain, ``.gz`` or ``.xz``) or Parquet, chosen by the output suffix.

Compressed JSONL is deterministic (gzip with mtime 0 and no file name), so the same rows give the same
bytes. Use ``.xz`` for shipped data: gzip's 32 KiB window cannot share a ~26k-character system prompt
between rows, xz's can (the bundled sample is ~14x smaller as ``.xz``).
"""
from __future__ import annotations

import gzip
import lzma
from pathlib import Path
from typing import Any, BinaryIO

import orjson

from trajkit.errors import ConfigError

SUFFIXES = (".jsonl", ".jsonl.gz", ".jsonl.xz", ".parquet")


def output_format(path: Path) -> str:
    """One of :data:`SUFFIXES` for ``path``, or a :class:`ConfigError` saying how to name it."""
    name = path.name.lower()
    for suffix in (".jsonl.gz", ".jsonl.xz", ".jsonl", ".parquet"):
        if name.endswith(suffix):
            return suffix
    raise ConfigError(f"cannot tell the output format of {str(path)!r}: name it *.jsonl, *.jsonl.gz, "
                      "*.jsonl.xz or *.parquet")


def _open_jsonl(path: Path, kind: str, level: int | None) -> BinaryIO:
    if kind == ".jsonl.gz":
        return gzip.GzipFile(filename="", mode="wb", fileobj=open(path, "wb"), compresslevel=level or 6, mtime=0)
    if kind == ".jsonl.xz":
        return lzma.open(path, "wb", preset=level if level is not None else 6)
    return open(path, "wb")


class RowWriter:
    """``with RowWriter(path) as w: w.write(row)`` (or ``open()`` / ``close()``); Parquet rows are buffered
    and written in groups.

    ``schema`` (a ``pyarrow.Schema``) fixes the Parquet column types; otherwise the first batch decides.
    """

    def __init__(self, path: str | Path, *, schema=None, level: int | None = None, parquet_batch: int = 256) -> None:
        self.path = Path(path)
        self.kind = output_format(self.path)
        self.schema, self.level, self._batch_size = schema, level, parquet_batch
        self._batch: list[dict[str, Any]] = []
        self._pq_writer = None
        self._fh: BinaryIO | None = None
        self.rows = 0

    def open(self) -> "RowWriter":
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if self.kind != ".parquet":
            self._fh = _open_jsonl(self.path, self.kind, self.level)
        return self

    def __enter__(self) -> "RowWriter":
        return self.open()

    def write(self, row: dict[str, Any]) -> None:
        self.rows += 1
        if self._fh is not None:
            self._fh.write(orjson.dumps(row, option=orjson.OPT_SERIALIZE_NUMPY) + b"\n")
            return
        self._batch.append(row)
        if len(self._batch) >= self._batch_size:
            self._flush()

    def _flush(self) -> None:
        import pyarrow as pa
        import pyarrow.parquet as pq

        if not self._batch and self._pq_writer is not None:
            return
        table = pa.Table.from_pylist(self._batch, schema=self.schema)
        if self._pq_writer is None:
            self._pq_writer = pq.ParquetWriter(self.path, self.schema or table.schema, compression="zstd")
        self._pq_writer.write_table(table.cast(self._pq_writer.schema))
        self._batch = []

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        if self._fh is not None:
            fileobj = getattr(self._fh, "fileobj", None)
            self._fh.close()
            if fileobj is not None:  # GzipFile does not close a file object it was given
                fileobj.close()
            return
        self._flush()
        if self._pq_writer is not None:
            self._pq_writer.close()
