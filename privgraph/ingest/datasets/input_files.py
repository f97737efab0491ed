"""An input graph's node files and the checks both readers of them share: the in-memory generic
loader (:mod:`privgraph.ingest.datasets.generic`) and the partitioned ingest
(:mod:`privgraph.ingest.partitioned_writer`, :mod:`privgraph.ingest.input_batches`).

A file exists and is local (:func:`check_exists`); a ``.npy`` file's header (:func:`npy_header`);
features and labels read whole (:func:`read_features`, :func:`read_labels`) or checked a block of
rows at a time (:func:`check_finite_features`, :func:`npy_label_rows`); an ``id,label`` table placed
once the node count is known (:func:`place_labels`); row counts that must agree
(:func:`check_row_counts`) and ids that must number the nodes (:func:`check_ids_number_nodes`).
Every problem is one :class:`~privgraph.errors.GraphValidationError` naming the file and the
offending rows (0-based row indices for ``.npy`` and Parquet, 1-based lines for CSV); no message
quotes a value of the files: the offending rows' values are the error's ``private_detail``.
"""

from __future__ import annotations

import numbers
import re
from pathlib import Path
from typing import Any

import numpy as np

from privgraph.errors import ConfigError, DatasetNotFoundError, GraphValidationError, data_refusal
from privgraph.graph import MAX_CLASSES, MAX_NODES, UNLABELLED
from privgraph.ingest.datasets.table import Table, file_suffix, short_list

__all__ = [
    "INFERRED_COUNT_CHECKED_ABOVE", "LABEL_TABLE_SHAPES", "check_exists", "check_feature_width",
    "check_features_meta", "check_finite_features", "check_ids_number_nodes", "check_labels_meta",
    "check_load_arguments", "check_row_counts", "label_columns_error", "npy_header", "npy_label_rows",
    "place_labels", "read_features", "read_labels", "unsupported_file_type",
]


# -- files and arguments ----------------------------------------------------------------------
def check_exists(path: Path, what: str) -> Path:
    """``path`` (``~`` expanded) when it is an existing local file; a URI is a ``ConfigError`` that does
    not repeat it, a missing file a ``DatasetNotFoundError``; ``what`` names the file's role."""
    uri = re.match(r"([A-Za-z][A-Za-z0-9+.-]+):/", str(path))  # a URI, or one a Path collapsed (s3:/...)
    if uri:  # never named: it may hold credentials
        raise ConfigError(f"{what} file: a URI ({uri[1]}://...) where a local file is expected; copy the file here first")
    path = Path(path).expanduser()
    if not path.is_file():
        raise DatasetNotFoundError(f"{what} file not found: {path}")
    return path


def check_load_arguments(num_nodes: Any, private_column: Any) -> None:
    """``num_nodes`` a non-negative int (or None) and ``private_column`` a column name (or None)."""
    if num_nodes is not None and (
        isinstance(num_nodes, bool) or not isinstance(num_nodes, numbers.Integral) or num_nodes < 0
    ):
        raise GraphValidationError(f"num_nodes must be a non-negative int, got {num_nodes!r}")
    if private_column is not None and (not isinstance(private_column, str) or not private_column):
        raise GraphValidationError(f"private_column must be a column name, got {private_column!r}")


def unsupported_file_type(path: Path, what: str, expected: str) -> GraphValidationError:
    """The error for a ``what`` file (features, labels) whose type is none of ``expected``."""
    return GraphValidationError(f"{path}: unsupported {what} file type {file_suffix(path) or '(none)'!r}; expected {expected}")


def check_row_counts(rows: dict[str, tuple[Path, int]], num_nodes: int | None) -> None:
    """Features and labels (``what -> (file, rows)``) of one row per node, and ``num_nodes`` rows."""
    if "features" in rows and "labels" in rows and rows["features"][1] != rows["labels"][1]:
        (fp, fn), (lp, ln) = rows["features"], rows["labels"]
        raise GraphValidationError(f"features {fp} have {fn} rows but labels {lp} have {ln} rows")
    if num_nodes is not None:
        for what, (p, n) in rows.items():
            if n != num_nodes:
                raise GraphValidationError(f"{what} {p} have {n} rows but num_nodes is {num_nodes}")


# -- .npy files ----------------------------------------------------------------------------------
def _open_npy(fh: Any, path: Path) -> None:
    """Check that ``fh`` (at its start) is in the .npy format: an empty file, a ``.npz`` archive (or
    any other format) under a ``.npy`` name are one-line errors naming the file."""
    head = fh.read(6)
    if head != b"\x93NUMPY":
        what = "an empty file" if not head else (
            "a .npz archive (zip)" if head.startswith(b"PK") else "not in the .npy format")
        raise GraphValidationError(f"{path}: cannot read as a .npy array: {what}; write it with numpy.save")
    fh.seek(0)


def _load_npy(path: Path) -> np.ndarray:
    """One array from a ``.npy`` file (see :func:`_open_npy`; pickled objects are refused too)."""
    with open(path, "rb") as fh:
        _open_npy(fh, path)
        try:
            return np.load(fh, allow_pickle=False)
        except (ValueError, EOFError, OSError) as exc:
            raise GraphValidationError(f"{path}: cannot read as a numeric .npy array: {exc}") from exc


def npy_header(path: Path) -> tuple[tuple[int, ...], np.dtype]:
    """The shape and dtype a ``.npy`` file declares, from its header (the data is memory-mapped,
    not read)."""
    with open(path, "rb") as fh:
        _open_npy(fh, path)
    try:
        a = np.load(path, mmap_mode="r", allow_pickle=False)
    except (ValueError, EOFError, OSError) as exc:
        raise GraphValidationError(f"{path}: cannot read as a numeric .npy array: {exc}") from exc
    shape, dtype = tuple(a.shape), a.dtype
    del a
    return shape, dtype


def check_features_meta(path: Path, shape: tuple[int, ...], dtype: np.dtype) -> None:
    """A ``.npy`` feature matrix's shape and dtype (from the array, or its header before reading)."""
    if len(shape) != 2:
        raise GraphValidationError(f"{path}: expected a 2-D array [n, d], got shape {list(shape)}")
    if not (np.issubdtype(dtype, np.number) or dtype == np.bool_) or np.issubdtype(dtype, np.complexfloating):
        raise GraphValidationError(f"{path}: expected real numbers, got dtype {dtype}")


def check_labels_meta(path: Path, shape: tuple[int, ...], dtype: np.dtype) -> None:
    """A ``.npy`` label array's shape and dtype (from the array, or its header before reading)."""
    if len(shape) not in (1, 2):
        raise GraphValidationError(f"{path}: expected labels of shape [n] or [n, C], got {list(shape)}")
    if dtype == np.bool_ or not np.issubdtype(dtype, np.number) or np.issubdtype(dtype, np.complexfloating):
        raise GraphValidationError(f"{path}: expected integer labels, got dtype {dtype}")


# -- features -------------------------------------------------------------------------------------
def read_features(path: Path) -> np.ndarray:
    """A ``.npy`` or Parquet feature matrix as float32 ``[n, d]``, refusing other types, non-numeric
    columns, no columns and non-finite values."""
    suffix = file_suffix(path)
    if suffix == ".npy":
        x = _load_npy(path)
        check_features_meta(path, x.shape, x.dtype)
    elif suffix in (".parquet", ".pq"):
        tab = Table.read(path)
        from pandas.api.types import is_bool_dtype, is_numeric_dtype

        bad_cols = [
            c
            for c in tab.df.columns
            if not (is_numeric_dtype(tab.df[c]) or is_bool_dtype(tab.df[c]))
        ]
        if bad_cols:
            raise GraphValidationError(
                f"{path}: every feature column must be numeric; non-numeric columns "
                f"{short_list([f'{c!r} ({tab.df[c].dtype})' for c in bad_cols])}"
            )
        x = tab.df.to_numpy(dtype=np.float64, na_value=np.nan)
    else:
        raise unsupported_file_type(path, "features", ".npy or .parquet")
    check_feature_width(path, x.shape)
    x = np.ascontiguousarray(x, dtype=np.float32)
    check_finite_features(path, x)
    return x


def check_feature_width(path: Path, shape: tuple[int, ...]) -> None:
    """Refuse features of no columns."""
    if shape[1] == 0:
        raise GraphValidationError(f"{path}: the features have no columns (shape {list(shape)}); expected [n, d] with d >= 1")


def check_finite_features(path: Path, x: np.ndarray, first_row: int = 0) -> None:
    """Refuse NaN or infinite float32 feature rows; ``x`` holds rows ``first_row ..`` of the file."""
    finite = np.isfinite(x)
    if not finite.all():
        bad = np.flatnonzero(~finite.all(1))
        col = int(np.flatnonzero(~finite[bad[0]])[0])
        raise data_refusal(
            f"{path}: NaN, missing or infinite (or beyond float32) feature values at "
            f"rows {short_list((bad + first_row).tolist())} (0-based row indices); first: row {int(bad[0]) + first_row}, "
            f"column {col}", file=str(path), rows=bad + first_row, first_row_values=x[bad[0]])


# -- labels ---------------------------------------------------------------------------------------
#: the shapes a labels table may take (docs/your-own-graph.md shows each with a two-line example)
LABEL_TABLE_SHAPES = (
    "one column (row i is node i)",
    "columns id,label (matched by id, any order; ids not listed are unlabelled)",
)


def label_columns_error(path: Path, columns: list[str]) -> GraphValidationError:
    """The error for a labels table whose ``columns`` are none of :data:`LABEL_TABLE_SHAPES`."""
    return GraphValidationError(f"{path}: cannot read labels from columns {columns}; expected {' or '.join(LABEL_TABLE_SHAPES)}")


def read_labels(path: Path) -> np.ndarray | tuple[Table, np.ndarray, np.ndarray]:
    """Labels by row (``[n]`` or ``[n, C]``, -1 or an empty cell: unlabelled), or, for an
    ``id,label`` table, ``(table, ids, labels)`` to place once the node count is known."""
    suffix = file_suffix(path)
    if suffix == ".npy":
        y = _load_npy(path)
        check_labels_meta(path, y.shape, y.dtype)
        return npy_label_rows(path, y)
    if suffix not in (".csv", ".parquet", ".pq"):
        raise unsupported_file_type(path, "labels", ".npy, .csv or .parquet")
    tab = Table.read(path, typed={"id": "int", "label": "int"})
    cols = [str(c) for c in tab.df.columns]
    if len(cols) == 1:
        y = tab.int_column(tab.df.columns[0], missing=UNLABELLED)
        _check_label_values(tab, tab.df.columns[0], y)
        return y
    if sorted(cols) == ["id", "label"]:
        ids = tab.int_column("id")
        y = tab.int_column("label", missing=UNLABELLED)
        _check_label_values(tab, "label", y)
        return tab, ids, y
    raise label_columns_error(path, cols)


def npy_label_rows(path: Path, y: np.ndarray, first_row: int = 0) -> np.ndarray:
    """Rows ``first_row ..`` of a ``.npy`` label array as int64, refusing non-integer labels and
    labels below -1 (below 0 for multi-label ``[n, C]``)."""
    if not np.issubdtype(y.dtype, np.integer):
        ok = (np.isfinite(y) & (y == np.round(y))).reshape(len(y), -1).all(1)
        if not ok.all():
            bad = np.flatnonzero(~ok)
            raise _label_refusal(path, "non-integer labels", bad, first_row, y[bad])
    y = np.ascontiguousarray(y, dtype=np.int64)
    low = UNLABELLED if y.ndim == 1 else 0
    if y.size and (y < low).any():
        bad = np.flatnonzero((y < low).reshape(len(y), -1).any(1))
        raise _label_refusal(path, f"labels below {low}", bad, first_row, y[bad], "; -1 marks an unlabelled node")
    if y.ndim == 1 and y.size and y.max() >= MAX_CLASSES:
        bad = np.flatnonzero(y >= MAX_CLASSES)
        raise _label_refusal(path, f"class ids of {MAX_CLASSES} or more", bad, first_row, y[bad], _CLASS_RULE)
    return y


#: the rule a class id of :data:`~privgraph.graph.MAX_CLASSES` or more breaks (as GraphData words it)
_CLASS_RULE = f"; labels are 0..C-1 with C <= {MAX_CLASSES}"


def _label_refusal(path: Path, what: str, bad: np.ndarray, first_row: int, labels: np.ndarray,
                   rule: str = "") -> GraphValidationError:
    """``<path>: <what> at rows [..] (0-based row indices)<rule>``; the labels: the owner's record."""
    rows = bad + first_row
    return data_refusal(f"{path}: {what} at rows {short_list(rows.tolist())} (0-based row indices){rule}",
                        file=str(path), rows=rows, labels=labels)


def _check_label_values(tab: Table, col: str, y: np.ndarray) -> None:
    """A labels table's column: labels ``-1 .. MAX_CLASSES - 1`` (-1 or empty: unlabelled)."""
    bad = np.flatnonzero(y < UNLABELLED)
    if bad.size:
        raise tab.refuse(col, "labels below -1", bad, "; labels are 0..C-1, and -1 or an empty cell marks an "
                         "unlabelled node")
    bad = np.flatnonzero(y >= MAX_CLASSES)
    if bad.size:
        raise tab.refuse(col, f"class ids of {MAX_CLASSES} or more", bad, _CLASS_RULE)


def place_labels(tab: Table, y: np.ndarray, n: int) -> np.ndarray:
    """An ``id,label`` table as labels ``[n]`` (ids not listed: -1), refusing ids out of range
    and ids listed twice with the file's lines (:meth:`Table.node_ids`)."""
    out = np.full(n, UNLABELLED, dtype=np.int64)
    out[tab.node_ids(n)] = y
    return out


# -- the node count -------------------------------------------------------------------------------
#: an inferred node count above this is checked to number the nodes (:func:`check_ids_number_nodes`)
INFERRED_COUNT_CHECKED_ABOVE = 1_000_000


def check_ids_number_nodes(n: int, used: int, name: str, where: str) -> None:
    """Refuse an inferred count of ``n`` nodes of which only ``used`` are in an edge (fewer than
    half), or beyond :data:`MAX_NODES`; ``name``/``where``: the column and place of the largest id."""
    if n > MAX_NODES or used < n // 2:
        why = (f"beyond {MAX_NODES - 1}: privgraph handles at most {MAX_NODES} nodes" if n > MAX_NODES else
               "makes a node count (the largest id + 1) of which fewer than half are in an edge")
        raise data_refusal(
            f"column {name!r}: the largest node id, at {where}, is {why}; node ids must number the nodes 0..n-1 "
            "(renumber them, or give features or labels with one row per node)",
            at=where, largest_id=n - 1, nodes_in_edges=used)
