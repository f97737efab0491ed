"""A CSV or Parquet table read for the generic loader, with the file line (CSV) or row (Parquet) of
each row, so that every problem is reported in one line naming the file and the offending rows:
1-based *line numbers* for CSV files (the header is line 1), 0-based *row indices* for Parquet;
and what the readers of such files share: a file's type (:func:`file_suffix`), its column names
read without the data (:func:`header_columns`) and rows listed in a message (:func:`short_list`).
A message never quotes a cell (:meth:`Table.refuse`: the cells go to the owner's refusal record).
"""

from __future__ import annotations

import csv
import io
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow.parquet as pq

from privgraph.storage.arrow_io import read_parquet_bytes
from privgraph.errors import DETAIL_LIMIT, GraphValidationError, data_refusal

if TYPE_CHECKING:  # pandas is imported where a table is read: a config check reads none
    import pandas as pd

__all__ = ["Table", "file_suffix", "header_columns", "short_list"]

_MAX_SHOWN = 5
_INT_RE = r"\s*[+-]?\d{1,18}\s*"
_TRUE = {"true", "1"}
_FALSE = {"false", "0"}


def short_list(values: Sequence[Any] | np.ndarray) -> str:
    """``values`` for a message: the first five and how many more (``[1, 2, 3, 4, 5] (and 7 more)``)."""
    values = list(values)
    shown = ", ".join(str(v) for v in values[:_MAX_SHOWN])
    more = f" (and {len(values) - _MAX_SHOWN} more)" if len(values) > _MAX_SHOWN else ""
    return f"[{shown}]{more}"


def file_suffix(path: Path) -> str:
    """``path``'s suffix in lower case (``.csv``, ``.parquet``, ``.npy``): the file type a reader takes."""
    return path.suffix.lower()


def header_columns(path: Path) -> list[str]:
    """The column names of a ``.csv`` (its header line) or ``.parquet`` file (its schema), read
    without the data."""
    suffix = file_suffix(path)
    if suffix == ".csv":
        with open(path, "rb") as fh:
            first = fh.readline(1 << 20)
        if not first.strip():
            raise GraphValidationError(f"{path}: empty file; expected a header row and data rows")
        try:
            return next(csv.reader([first.decode("utf-8-sig").rstrip("\r\n")]))
        except (UnicodeDecodeError, csv.Error) as exc:
            raise GraphValidationError(f"{path}: line 1: cannot read the header: {exc}") from exc
    if suffix in (".parquet", ".pq"):
        try:
            return list(pq.ParquetFile(path, pre_buffer=False).schema_arrow.names)
        except Exception as exc:  # pyarrow raises several unrelated types
            raise GraphValidationError(f"{path}: cannot read as Parquet: {exc}") from exc
    raise GraphValidationError(f"{path}: unsupported file type {suffix or '(none)'!r}; expected .csv or .parquet")


class Table:
    """A CSV or Parquet table plus the mapping from its rows to what an error message names."""

    def __init__(self, path: Path, df: pd.DataFrame, lines: np.ndarray | None) -> None:
        self.path = path
        self.df = df
        self.lines = lines  # 1-based file line of each row (CSV), None for Parquet

    # -- reading ------------------------------------------------------------------------------
    @classmethod
    def read(cls, path: Path, *, typed: dict[str, str] | None = None) -> Table:
        """Read ``path`` (``.csv`` or ``.parquet``/``.pq``). ``typed``: column -> "int" | "bool"."""
        suffix = file_suffix(path)
        if suffix == ".csv":
            return cls._read_csv(path, typed or {})
        if suffix in (".parquet", ".pq"):
            try:
                df = read_parquet_bytes(path.read_bytes()).to_pandas(use_threads=False)
            except Exception as exc:  # pyarrow raises several unrelated types
                raise GraphValidationError(f"{path}: cannot read as Parquet: {exc}") from exc
            return cls(path, df.reset_index(drop=True), None)
        raise GraphValidationError(
            f"{path}: unsupported file type {suffix or '(none)'!r}; expected .csv or .parquet"
        )

    @classmethod
    def _read_csv(cls, path: Path, typed: dict[str, str]) -> Table:
        import pandas as pd
        raw = path.read_bytes()
        if not raw.strip():
            raise GraphValidationError(f"{path}: empty file; expected a header row and data rows")
        # Fast path: pandas' C parser (no thread: Arrow's CSV reader starts a pool that can abort
        # the interpreter at exit, see privgraph.storage.arrow_io), accepted only when no cell is missing,
        # every typed column came out with its type and the file has exactly one line per row
        # after the header (so row i is line i + 2).
        try:
            df = pd.read_csv(io.BytesIO(raw), engine="c")
        except Exception:  # malformed: the csv-module path below reports it with a line number
            df = None
        if df is not None:
            n_lines = raw.count(b"\n") + (0 if raw.endswith(b"\n") else 1)
            ok = n_lines == len(df) + 1 and not df.isna().to_numpy().any() and all(
                pd.api.types.is_integer_dtype(df[c])
                or (kind == "bool" and pd.api.types.is_bool_dtype(df[c]))
                for c, kind in typed.items()
                if c in df.columns
            )
            if ok:
                return cls(path, df, np.arange(len(df), dtype=np.int64) + 2)
        # Slow path: Python's csv module, everything as text, with each record's exact line number
        # (blank lines skipped, as the fast path does; a wrong field count is an error).
        try:
            text = raw.decode("utf-8-sig")
        except UnicodeDecodeError as exc:
            raise GraphValidationError(f"{path}: not UTF-8 text: {exc}") from exc
        reader = csv.reader(io.StringIO(text, newline=""))
        try:
            header = next(reader)
            records, lines = [], []
            for rec in reader:
                if not rec:
                    if len(header) == 1:  # one column (labels by row): a blank line is an empty cell
                        records.append([""])
                        lines.append(reader.line_num)
                    continue
                if len(rec) != len(header):
                    raise GraphValidationError(
                        f"{path}: line {reader.line_num}: expected {len(header)} fields "
                        f"{header}, found {len(rec)}"
                    )
                records.append(rec)
                lines.append(reader.line_num)
        except csv.Error as exc:
            raise GraphValidationError(f"{path}: line {reader.line_num}: malformed CSV: {exc}") from exc
        df = pd.DataFrame(records, columns=header, dtype=object)
        return cls(path, df, np.asarray(lines, dtype=np.int64))

    # -- messages -----------------------------------------------------------------------------
    def where(self, rows: np.ndarray) -> str:
        pos = self.positions(rows).tolist()
        if self.lines is not None:
            return f"{self.path}: lines {short_list(pos)} (1-based line numbers)"
        return f"{self.path}: rows {short_list(pos)} (0-based row indices)"

    def refuse(self, col: str, rule: str, rows: np.ndarray, hint: str = "") -> GraphValidationError:
        """``column <col>: <rule> at <where(rows)><hint>``, one line without the cells' values (the user's
        data, maybe private), which go to the owner's record (:func:`~privgraph.errors.data_refusal`)."""
        rows = np.asarray(rows, dtype=np.int64)
        cells = self.df[col].iloc[rows[:DETAIL_LIMIT]]
        return data_refusal(f"column {col!r}: {rule} at {self.where(rows)}{hint}", file=str(self.path), column=col,
                            **{"lines" if self.lines is not None else "rows": self.positions(rows)},
                            values=[v.item() if isinstance(v, np.generic) else v for v in cells])

    def positions(self, rows: np.ndarray) -> np.ndarray:
        """What the messages name for ``rows``: 1-based file lines (CSV) or 0-based rows (Parquet)."""
        rows = np.asarray(rows, dtype=np.int64)
        return rows if self.lines is None else self.lines[rows]

    # -- columns ------------------------------------------------------------------------------
    def require(self, *names: str) -> None:
        missing = [c for c in names if c not in self.df.columns]
        if missing:
            raise GraphValidationError(
                f"{self.path}: missing column(s) {missing}; found columns {list(self.df.columns)}"
            )

    def _missing_values(self, col: str) -> None:
        import pandas as pd
        s = self.df[col]
        bad = s.isna().to_numpy()
        if s.dtype == object or pd.api.types.is_string_dtype(s):
            bad = bad | (s.astype(str).str.strip() == "").to_numpy()
        if bad.any():
            raise GraphValidationError(
                f"column {col!r}: missing values at {self.where(np.flatnonzero(bad))}"
            )

    def node_ids(self, n: int, col: str = "id") -> np.ndarray:
        """Column ``col`` as node ids of an ``n``-node graph: int64, each in ``0..n-1`` and listed
        once; the rows that are not, named with the file's lines (and the first bad value)."""
        ids = self.int_column(col)
        bad = np.flatnonzero((ids < 0) | (ids >= n))
        if bad.size:
            raise self.refuse(col, f"node ids outside 0..{n - 1}", bad)
        order = np.argsort(ids, kind="stable")
        dup = np.sort(order[1:][ids[order][1:] == ids[order][:-1]])
        if dup.size:
            raise self.refuse(col, "node ids listed twice", dup)
        return ids

    def int_column(self, col: str, *, missing: int | None = None) -> np.ndarray:
        """Column ``col`` as int64. An empty cell is an error, or ``missing`` when that is set."""
        import pandas as pd
        self.require(col)
        if missing is not None:
            s = self.df[col]
            empty = s.isna().to_numpy()
            if s.dtype == object or pd.api.types.is_string_dtype(s):
                empty = empty | (s.astype(str).str.strip() == "").to_numpy()
            if empty.any():
                out = np.full(len(s), missing, dtype=np.int64)
                rest = Table(self.path, self.df.loc[~empty, [col]].reset_index(drop=True),
                              None if self.lines is None else self.lines[~empty])
                if pd.api.types.is_float_dtype(rest.df[col]):  # Parquet: NaN made the column float
                    v = rest.df[col].to_numpy()
                    bad = np.flatnonzero(v != np.round(v))
                    if bad.size:
                        raise rest.refuse(col, "non-integer values", bad)
                    rest.df[col] = v.astype(np.int64)
                out[~empty] = rest.int_column(col)
                return out
        self._missing_values(col)
        s = self.df[col]
        if pd.api.types.is_bool_dtype(s):
            raise GraphValidationError(f"{self.path}: column {col!r} is boolean, expected integers")
        if pd.api.types.is_integer_dtype(s):
            if pd.api.types.is_unsigned_integer_dtype(s):  # uint64 beyond 2^63 - 1 would wrap negative
                bad = np.flatnonzero(s.to_numpy() > np.iinfo(np.int64).max)
                if bad.size:
                    raise self.refuse(col, "integers beyond 2^63 - 1", bad)
            return s.to_numpy(dtype=np.int64)
        if self.lines is not None and (s.dtype == object or pd.api.types.is_string_dtype(s)):
            text = s.astype(str)  # CSV text; a typed format (Parquet) must store integers
            ok = text.str.fullmatch(_INT_RE).to_numpy(dtype=bool)
            if not ok.all():
                bad = np.flatnonzero(~ok)
                raise self.refuse(col, "non-integer values", bad)
            return text.str.strip().astype(np.int64).to_numpy()
        raise GraphValidationError(
            f"{self.path}: column {col!r} has type {s.dtype}, expected integers"
        )

    def bool_column(self, col: str) -> np.ndarray:
        import pandas as pd
        self.require(col)
        self._missing_values(col)
        s = self.df[col]
        if pd.api.types.is_bool_dtype(s):
            return s.to_numpy(dtype=bool)
        if pd.api.types.is_integer_dtype(s):
            v = s.to_numpy(dtype=np.int64)
            bad = np.flatnonzero((v != 0) & (v != 1))
            if bad.size:
                raise self.refuse(col, "expected booleans (true/false or 1/0), got other integers", bad)
            return v == 1
        if self.lines is not None and (s.dtype == object or pd.api.types.is_string_dtype(s)):
            text = s.astype(str).str.strip().str.lower()
            is_true = text.isin(_TRUE).to_numpy()
            ok = is_true | text.isin(_FALSE).to_numpy()
            if not ok.all():
                bad = np.flatnonzero(~ok)
                raise self.refuse(col, "expected booleans (true/false or 1/0)", bad)
            return is_true
        raise GraphValidationError(f"{self.path}: column {col!r} has type {s.dtype}, expected booleans")
