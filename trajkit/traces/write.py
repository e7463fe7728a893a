"""Streaming row writers: JSONL (plain, ``.gz`` or ``.xz``) or Parquet, chosen by the output suffix.

Every file is written atomically (:class:`trajkit.atomic.AtomicFile`): rows go to a temporary file
beside the target, which replaces the target only when ``close()`` is reached without an error; an error or
an interrupt (``abort()``, or leaving the ``with`` block by an exception) leaves the old file untouched.
``-`` writes JSONL to standard output.

Compressed JSONL is deterministic (gzip with mtime 0 and no file name), so the same rows give the same
bytes. Use ``.xz`` for shipped data: gzip's 32 KiB window cannot share a ~26k-character system prompt
between rows, xz's can (the bundled sample is ~14x smaller as ``.xz``).
"""
from __future__ import annotations

import gzip
import lzma
import sys
from pathlib import Path
from typing import Any, BinaryIO

import orjson

from trajkit.errors import ConfigError
from trajkit.atomic import AtomicFile, is_stdout

SUFFIXES = (".jsonl", ".jsonl.gz", ".jsonl.xz", ".parquet")


def output_format(path: Path) -> str:
    """One of :data:`SUFFIXES` for ``path``, or a :class:`ConfigError` saying how to name it."""
    if is_stdout(path):
        return ".jsonl"
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


def _schema_paths(schema) -> set[str]:
    """Dotted paths of every field of an Arrow schema (list items share their list's path)."""
    import pyarrow as pa

    out: set[str] = set()

    def walk(t, prefix: str) -> None:
        if pa.types.is_struct(t):
            for f in t:
                out.add(prefix + f.name)
                walk(f.type, prefix + f.name + ".")
        elif pa.types.is_list(t) or pa.types.is_large_list(t):
            walk(t.value_type, prefix)
    for f in schema:
        out.add(f.name)
        walk(f.type, f.name + ".")
    return out


def _row_paths(value: Any, prefix: str = "", out: set[str] | None = None) -> set[str]:
    """Dotted paths of the non-null entries of a row (a list of scalars is not walked)."""
    out = set() if out is None else out
    if isinstance(value, dict):
        for k, v in value.items():
            if v is not None:
                out.add(prefix + str(k))
                _row_paths(v, prefix + str(k) + ".", out)
    elif isinstance(value, (list, tuple)):
        for item in value:
            if not isinstance(item, (dict, list, tuple)):
                break
            _row_paths(item, prefix, out)
    return out


class _Stdout:
    """Standard output as a binary JSONL sink that ``close()`` flushes but leaves open."""

    def write(self, data: bytes) -> None:
        sys.stdout.buffer.write(data)

    def close(self) -> None:
        sys.stdout.flush()


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
        self._atomic: AtomicFile | None = None
        self.rows = 0

    def open(self) -> "RowWriter":
        if is_stdout(self.path):
            self._fh = _Stdout()
            return self
        self._atomic = AtomicFile(self.path)
        if self.kind != ".parquet":
            self._fh = _open_jsonl(self._atomic.tmp, self.kind, self.level)
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

    def write_line(self, line: bytes) -> None:
        """Write one JSONL line byte for byte (a newline is added when it has none); JSONL outputs only."""
        if self._fh is None:
            raise ConfigError(f"{str(self.path)!r}: rows can be copied byte for byte only into JSONL outputs")
        self.rows += 1
        self._fh.write(line if line.endswith(b"\n") else line + b"\n")

    def _flush(self) -> None:
        import pyarrow as pa
        import pyarrow.parquet as pq

        if not self._batch and self._pq_writer is not None:
            return
        table = self._conform(pa.Table.from_pylist(self._batch, schema=self.schema))
        if self._pq_writer is None:
            self._pq_writer = pq.ParquetWriter(self._atomic.tmp, self.schema or table.schema, compression="zstd")
        self._pq_writer.write_table(table)
        self._batch = []

    def _conform(self, table):
        """``table`` in the file's schema, or a ConfigError when that would change a row (see the class):
        every key path of every row must exist in the schema (checked on the rows, not on a round trip
        through Arrow, so long token lists cost nothing), and Arrow must accept every value's type."""
        import pyarrow as pa

        target = self.schema or (self._pq_writer.schema if self._pq_writer is not None else None)
        first = self.rows - len(self._batch) + 1
        if target is None:
            return table
        try:
            cast = table if table.schema == target else table.cast(target)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as exc:
            raise ConfigError(f"{str(self.path)!r}: rows {first}-{self.rows} do not fit the Parquet schema "
                              f"({exc}); write .jsonl instead") from None
        known = _schema_paths(target)
        for k, row in enumerate(self._batch):
            extra = sorted(_row_paths(row) - known)
            if extra:
                raise ConfigError(f"{str(self.path)!r}: row {first + k} has {', '.join(extra[:3])}, which the "
                                  "Parquet schema fixed by the earlier rows cannot hold (they would be dropped); "
                                  "write .jsonl, or store that column as a JSON string")
        return cast

    def __exit__(self, exc_type, *exc) -> None:
        if exc_type is None:
            self.close()
        else:
            self.abort()

    def _close_handles(self) -> None:
        if self._fh is not None:
            fh, self._fh = self._fh, None
            fileobj = getattr(fh, "fileobj", None)
            fh.close()
            if fileobj is not None:  # GzipFile does not close a file object it was given
                fileobj.close()
        if self._pq_writer is not None:
            writer, self._pq_writer = self._pq_writer, None
            writer.close()

    def close(self) -> None:
        """Write what is buffered and publish the file under its name (on an error: :meth:`abort`)."""
        try:
            if self.kind == ".parquet" and self._atomic is not None and not self._atomic.done:
                self._flush()
            self._close_handles()
        except BaseException:
            self.abort()
            raise
        if self._atomic is not None:
            self._atomic.commit()

    def abort(self) -> None:
        """Drop everything written: the target keeps what it held before ``open()``."""
        try:
            self._close_handles()
        finally:
            if self._atomic is not None:
                self._atomic.abort()
