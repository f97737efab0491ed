"""The input files of ``privgraph ingest`` read a piece at a time, in bounded memory: a ``.npy``
array's rows at their file offsets (:class:`NpyRows`) and the edge list in batches
(:func:`edge_batches`: Parquet row batches, or CSV through ``pyarrow.csv.open_csv`` with Python's
csv module taking over where the fast read cannot name lines exactly), each batch checked and typed
by the generic loader's table (its messages)."""

from __future__ import annotations

import csv
import dataclasses
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

from privgraph.errors import GraphValidationError
from privgraph.ingest.datasets.input_files import npy_header
from privgraph.ingest.datasets.table import Table, file_suffix, header_columns

__all__ = ["BATCH_ROWS", "CSV_BLOCK_BYTES", "EdgeBatch", "NpyRows", "edge_batches"]

#: rows per edge batch (Parquet), bytes per CSV block (about a million rows either way)
BATCH_ROWS = 1 << 18
CSV_BLOCK_BYTES = 1 << 22


class NpyRows:
    """A ``.npy`` array (checked by the generic loader's header checks) whose rows are read on
    demand at their file offset: no memory map, so finished ranges leave no resident pages."""

    def __init__(self, path: Path) -> None:
        npy_header(path)  # an empty file, a .npz or a pickle: the loader's one-line errors
        mm = np.load(path, mmap_mode="r", allow_pickle=False)
        self.path, self.shape, self.dtype = path, tuple(mm.shape), mm.dtype
        self._offset, self._c_order = int(mm.offset), bool(mm.flags.c_contiguous)
        del mm

    def rows(self, start: int, stop: int) -> np.ndarray:
        """Rows ``start .. stop - 1``."""
        if not self._c_order:  # Fortran order: rows are not contiguous in the file
            return np.array(np.load(self.path, mmap_mode="r", allow_pickle=False)[start:stop])
        width = int(np.prod(self.shape[1:], dtype=np.int64))
        flat = np.fromfile(self.path, self.dtype, count=(stop - start) * width,
                           offset=self._offset + start * width * self.dtype.itemsize)
        return flat.reshape((stop - start, *self.shape[1:]))


@dataclasses.dataclass
class EdgeBatch:
    """A batch of the edge list: int64 ``[2, b]`` as given, the private flags, the source rows
    (1-based CSV line numbers or 0-based Parquet row indices)."""

    edges: np.ndarray
    private: np.ndarray | None
    rows: np.ndarray


class _OffsetTable(Table):
    """A batch of a Parquet file whose messages name the file's rows (the batch starts at ``offset``)."""

    def __init__(self, path: Path, df: pd.DataFrame, offset: int) -> None:
        super().__init__(path, df, None)
        self.offset = offset

    def positions(self, rows: np.ndarray) -> np.ndarray:
        return np.asarray(rows, dtype=np.int64) + self.offset


def _table_batch(tab: Table, flag: str, rows: np.ndarray) -> EdgeBatch:
    """A batch's columns checked and typed by the generic loader's table (its messages)."""
    e = np.stack([tab.int_column("src"), tab.int_column("dst")]) if len(tab.df) else np.zeros((2, 0), np.int64)
    private = tab.bool_column(flag) if flag in tab.df.columns else None
    return EdgeBatch(e, private, rows)


def _parquet_batches(path: Path, flag: str) -> Iterator[EdgeBatch]:
    try:
        pf = pq.ParquetFile(path, pre_buffer=False)
        cols = ["src", "dst"] + ([flag] if flag in pf.schema_arrow.names else [])
        offset = 0
        for rb in pf.iter_batches(batch_size=BATCH_ROWS, columns=cols, use_threads=False):
            tab = _OffsetTable(path, rb.to_pandas(), offset)
            yield _table_batch(tab, flag, np.arange(offset, offset + rb.num_rows, dtype=np.int64))
            offset += rb.num_rows
    except (pa.ArrowException, OSError) as exc:  # pyarrow raises several unrelated types
        raise GraphValidationError(f"{path}: cannot read as Parquet: {exc}") from exc


def _csv_data_lines(path: Path) -> int:
    """The lines after the header (each a row of the fast read, blank ones included)."""
    count, last = 0, b"\n"
    with open(path, "rb") as fh:
        while block := fh.read(CSV_BLOCK_BYTES):
            count += block.count(b"\n")
            last = block[-1:]
    return count - 1 + (last != b"\n")


def _csv_fast(path: Path, flag: str) -> Iterator[EdgeBatch | None]:
    """Arrow's streaming CSV read, typed; row ``i`` is line ``i + 2``. Yields None (and stops) at
    anything it cannot type or place exactly (an empty cell, a blank line, a value to report, a
    quoted line break): the exact read takes over."""
    cols = ["src", "dst"] + ([flag] if flag in header_columns(path) else [])
    types = {"src": pa.int64(), "dst": pa.int64(), flag: pa.bool_()}
    line = 2
    try:
        reader = pacsv.open_csv(
            str(path), read_options=pacsv.ReadOptions(use_threads=False, block_size=CSV_BLOCK_BYTES),
            parse_options=pacsv.ParseOptions(ignore_empty_lines=False),
            convert_options=pacsv.ConvertOptions(include_columns=cols, column_types={c: types[c] for c in cols}))
        for rb in reader:
            if any(c.null_count for c in rb.columns):
                yield None
                return
            e = np.stack([rb.column(c).to_numpy() for c in ("src", "dst")]).astype(np.int64, copy=False)
            private = rb.column(flag).to_numpy(zero_copy_only=False) if flag in cols else None
            yield EdgeBatch(e, private, np.arange(line, line + rb.num_rows, dtype=np.int64))
            line += rb.num_rows
    except pa.ArrowInvalid:
        yield None
        return
    if line - 2 != _csv_data_lines(path):
        yield None


def _csv_exact(path: Path, flag: str) -> Iterator[EdgeBatch]:
    """Python's csv module, as the generic loader's exact path reads a CSV file (each record's line
    number; blank lines skipped; a wrong field count is an error), a batch at a time."""
    with open(path, encoding="utf-8-sig", newline="") as fh:
        reader = csv.reader(fh)
        try:
            header = next(reader)
            cols = ["src", "dst"] + ([flag] if flag in header else [])
            idx = [header.index(c) for c in cols]
            records: list[list[str]] = []
            lines: list[int] = []
            for rec in reader:
                if not rec:
                    continue
                if len(rec) != len(header):
                    raise GraphValidationError(
                        f"{path}: line {reader.line_num}: expected {len(header)} fields {header}, found {len(rec)}")
                records.append([rec[j] for j in idx])
                lines.append(reader.line_num)
                if len(records) == BATCH_ROWS:
                    yield _csv_batch(path, flag, cols, records, lines)
                    records, lines = [], []
        except csv.Error as exc:
            raise GraphValidationError(f"{path}: line {reader.line_num}: malformed CSV: {exc}") from exc
        except UnicodeDecodeError as exc:
            raise GraphValidationError(f"{path}: not UTF-8 text: {exc}") from exc
    yield _csv_batch(path, flag, cols, records, lines)


def _csv_batch(path: Path, flag: str, cols: list[str], records: list[list[str]], lines: list[int]) -> EdgeBatch:
    rows = np.asarray(lines, dtype=np.int64)
    return _table_batch(Table(path, pd.DataFrame(records, columns=cols, dtype=object), rows), flag, rows)


def edge_batches(path: Path, flag: str, *, exact: bool) -> Iterator[EdgeBatch | None]:
    """The edge list ``path`` in batches; None from the fast CSV read means: read again with ``exact``."""
    if file_suffix(path) != ".csv":
        return _parquet_batches(path, flag)
    return _csv_exact(path, flag) if exact else _csv_fast(path, flag)
