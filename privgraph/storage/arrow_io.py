"""Parquet reads that start no Arrow thread.

Arrow's thread pools (``pq.read_table``, ``pd.read_parquet``, ``pd.read_csv(engine="pyarrow")``)
can abort the interpreter at exit ("terminate called without an active exception", exit -6) when
a worker thread is still joinable as the process ends (apache/arrow#34314). A command that
printed its result and then died that way is a failed command, so every Parquet read of
privgraph goes through :func:`read_parquet_bytes`: one in-memory buffer, one thread. The files
read here (an artifact's edge list, a user's tables) are read whole in any case.
"""

from __future__ import annotations

from collections.abc import Sequence

import pyarrow as pa
import pyarrow.parquet as pq

__all__ = ["read_parquet_bytes", "read_parquet_footer"]


def read_parquet_bytes(blob: bytes, columns: Sequence[str] | None = None) -> pa.Table:
    """The Parquet file ``blob`` as an Arrow table, read on the calling thread only.

    Raises:
        pyarrow.ArrowException, OSError: ``blob`` is not a readable Parquet file or lacks a column.
    """
    reader = pq.ParquetFile(pa.BufferReader(blob), pre_buffer=False)
    return reader.read(columns=list(columns) if columns is not None else None, use_threads=False)


def read_parquet_footer(blob: bytes) -> pq.FileMetaData:
    """The footer of the Parquet file ``blob`` (its schema, key-value metadata, row groups and
    ``created_by``), read on the calling thread; no column is read.

    Raises:
        pyarrow.ArrowException, OSError: ``blob`` is not a readable Parquet file.
    """
    return pq.ParquetFile(pa.BufferReader(blob), pre_buffer=False).metadata
