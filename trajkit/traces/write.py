"""Streaming row writers: JSONL (optionally gzipped) or Parquet, chosen by the output suffix."""
from __future__ import annotations

import gzip
from pathlib import Path
from typing import Any

import orjson


class RowWriter:
    """``with RowWriter(path) as w: w.write(row)``; Parquet rows are buffered and written in groups."""

    def __init__(self, path: str | Path, parquet_batch: int = 512) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.parquet = self.path.suffix == ".parquet"
        self._batch: list[dict[str, Any]] = []
        self._batch_size = parquet_batch
        self._pq_writer = None
        self._fh = None
        self.rows = 0

    def __enter__(self) -> "RowWriter":
        if not self.parquet:
            self._fh = gzip.open(self.path, "wb") if self.path.suffix == ".gz" else open(self.path, "wb")
        return self

    def write(self, row: dict[str, Any]) -> None:
        self.rows += 1
        if self.parquet:
            self._batch.append(row)
            if len(self._batch) >= self._batch_size:
                self._flush()
        else:
            self._fh.write(orjson.dumps(row, option=orjson.OPT_SERIALIZE_NUMPY) + b"\n")

    def _flush(self) -> None:
        import pyarrow as pa
        import pyarrow.parquet as pq

        if not self._batch:
            return
        table = pa.Table.from_pylist(self._batch)
        if self._pq_writer is None:
            self._pq_writer = pq.ParquetWriter(self.path, table.schema)
        self._pq_writer.write_table(table.cast(self._pq_writer.schema))
        self._batch = []

    def __exit__(self, *exc) -> None:
        if self.parquet:
            self._flush()
            if self._pq_writer is not None:
                self._pq_writer.close()
            elif self.rows == 0:
                import pyarrow as pa
                import pyarrow.parquet as pq
                pq.write_table(pa.table({}), self.path)
        elif self._fh is not None:
            self._fh.close()
