"""Load a graph from plain files: an edge list (CSV or Parquet), optional features and labels.

Every problem with the files raises :class:`~privgraph.errors.GraphValidationError` naming the
file and the offending rows: 1-based *line numbers* for CSV files (the header is line 1) and
0-based *row indices* for Parquet and ``.npy`` files. Messages say which of the two they use,
and never quote a value of the files (any row may be private): the values of the offending rows
are the error's ``private_detail`` (:func:`~privgraph.errors.data_refusal`), for the owner's
refusal record.
"""

from __future__ import annotations

import csv
import numbers
import re
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from privgraph.ingest.datasets.table import _list, _suffix, _Table
from privgraph.errors import ConfigError, DatasetNotFoundError, GraphValidationError, data_refusal
from privgraph.graph import MAX_CLASSES, MAX_NODES, UNLABELLED, GraphData, check_edge_list

__all__ = ["check_generic_files", "load_generic"]


def _check_exists(path: Path, what: str) -> Path:
    uri = re.match(r"([A-Za-z][A-Za-z0-9+.-]+):/", str(path))  # a URI, or one a Path collapsed (s3:/...)
    if uri:  # never named: it may hold credentials
        raise ConfigError(f"{what} file: a URI ({uri[1]}://...) where a local file is expected; copy the file here first")
    path = Path(path).expanduser()
    if not path.is_file():
        raise DatasetNotFoundError(f"{what} file not found: {path}")
    return path


# -- edges ------------------------------------------------------------------------------------
def _read_edges(path: Path, private_column: str) -> tuple[_Table, np.ndarray, np.ndarray | None]:
    typed = {"src": "int", "dst": "int", private_column: "bool"}
    tab = _Table.read(path, typed=typed)
    tab.require("src", "dst")
    e = np.stack([tab.int_column("src"), tab.int_column("dst")]) if len(tab.df) else np.zeros(
        (2, 0), np.int64
    )
    private = tab.bool_column(private_column) if private_column in tab.df.columns else None
    return tab, e, private


def _check_edges(tab: _Table, e: np.ndarray, n: int) -> None:
    """Range, self-loops and (both-direction) duplicates, reported with the file's rows."""
    check_edge_list(e, n, prefix="", where=tab.where)


# -- features and labels ---------------------------------------------------------------------
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


def _npy_header(path: Path) -> tuple[tuple[int, ...], np.dtype]:
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


def _check_features_meta(path: Path, shape: tuple[int, ...], dtype: np.dtype) -> None:
    """A ``.npy`` feature matrix's shape and dtype (from the array, or its header before reading)."""
    if len(shape) != 2:
        raise GraphValidationError(f"{path}: expected a 2-D array [n, d], got shape {list(shape)}")
    if not (np.issubdtype(dtype, np.number) or dtype == np.bool_) or np.issubdtype(dtype, np.complexfloating):
        raise GraphValidationError(f"{path}: expected real numbers, got dtype {dtype}")


def _check_feature_width(path: Path, shape: tuple[int, ...]) -> None:
    if shape[1] == 0:
        raise GraphValidationError(f"{path}: the features have no columns (shape {list(shape)}); expected [n, d] with d >= 1")


def _unsupported(path: Path, what: str, expected: str) -> GraphValidationError:
    return GraphValidationError(f"{path}: unsupported {what} file type {_suffix(path) or '(none)'!r}; expected {expected}")


def _check_row_counts(rows: dict[str, tuple[Path, int]], num_nodes: int | None) -> None:
    """Features and labels (``what -> (file, rows)``) of one row per node, and ``num_nodes`` rows."""
    if "features" in rows and "labels" in rows and rows["features"][1] != rows["labels"][1]:
        (fp, fn), (lp, ln) = rows["features"], rows["labels"]
        raise GraphValidationError(f"features {fp} have {fn} rows but labels {lp} have {ln} rows")
    if num_nodes is not None:
        for what, (p, n) in rows.items():
            if n != num_nodes:
                raise GraphValidationError(f"{what} {p} have {n} rows but num_nodes is {num_nodes}")


def _check_private_column(path: Path, columns: list[str], private_column: str | None) -> None:
    if private_column is not None and private_column not in columns:
        raise GraphValidationError(f"{path}: no column {private_column!r} (private_column); columns: {columns}")


def _check_edge_types(path: Path, private_column: str | None) -> None:
    """A Parquet edge list's column types, from its schema (a typed format stores ids as
    integers and the private flag as booleans or 0/1): what the loader would refuse later."""
    schema = pq.ParquetFile(path, pre_buffer=False).schema_arrow
    for col in ("src", "dst"):
        t = schema.field(col).type
        if not pa.types.is_integer(t):
            raise GraphValidationError(f"{path}: column {col!r} has type {t}, expected integers")
    flag = private_column or "private"  # the loader's default column, when present
    if flag in schema.names:
        t = schema.field(flag).type
        if not (pa.types.is_boolean(t) or pa.types.is_integer(t)):
            raise GraphValidationError(
                f"{path}: column {flag!r} has type {t}, expected booleans (true/false or 1/0)")


def _label_columns_error(path: Path, columns: list[str]) -> GraphValidationError:
    return GraphValidationError(f"{path}: cannot read labels from columns {columns}; expected {' or '.join(LABEL_TABLE_SHAPES)}")


def _check_labels_meta(path: Path, shape: tuple[int, ...], dtype: np.dtype) -> None:
    """A ``.npy`` label array's shape and dtype (from the array, or its header before reading)."""
    if len(shape) not in (1, 2):
        raise GraphValidationError(f"{path}: expected labels of shape [n] or [n, C], got {list(shape)}")
    if dtype == np.bool_ or not np.issubdtype(dtype, np.number) or np.issubdtype(dtype, np.complexfloating):
        raise GraphValidationError(f"{path}: expected integer labels, got dtype {dtype}")


def _read_features(path: Path) -> np.ndarray:
    suffix = _suffix(path)
    if suffix == ".npy":
        x = _load_npy(path)
        _check_features_meta(path, x.shape, x.dtype)
    elif suffix in (".parquet", ".pq"):
        tab = _Table.read(path)
        from pandas.api.types import is_bool_dtype, is_numeric_dtype

        bad_cols = [
            c
            for c in tab.df.columns
            if not (is_numeric_dtype(tab.df[c]) or is_bool_dtype(tab.df[c]))
        ]
        if bad_cols:
            raise GraphValidationError(
                f"{path}: every feature column must be numeric; non-numeric columns "
                f"{_list([f'{c!r} ({tab.df[c].dtype})' for c in bad_cols])}"
            )
        x = tab.df.to_numpy(dtype=np.float64, na_value=np.nan)
    else:
        raise _unsupported(path, "features", ".npy or .parquet")
    _check_feature_width(path, x.shape)
    x = np.ascontiguousarray(x, dtype=np.float32)
    _check_finite_features(path, x)
    return x


def _check_finite_features(path: Path, x: np.ndarray, first_row: int = 0) -> None:
    """Refuse NaN or infinite float32 feature rows; ``x`` holds rows ``first_row ..`` of the file."""
    finite = np.isfinite(x)
    if not finite.all():
        bad = np.flatnonzero(~finite.all(1))
        col = int(np.flatnonzero(~finite[bad[0]])[0])
        raise data_refusal(
            f"{path}: NaN, missing or infinite (or beyond float32) feature values at "
            f"rows {_list((bad + first_row).tolist())} (0-based row indices); first: row {int(bad[0]) + first_row}, "
            f"column {col}", file=str(path), rows=bad + first_row, first_row_values=x[bad[0]])


#: the shapes a labels table may take (docs/your-own-graph.md shows each with a two-line example)
LABEL_TABLE_SHAPES = (
    "one column (row i is node i)",
    "columns id,label (matched by id, any order; ids not listed are unlabelled)",
)


def _read_labels(path: Path) -> np.ndarray | tuple[_Table, np.ndarray, np.ndarray]:
    """Labels by row (``[n]`` or ``[n, C]``, -1 or an empty cell: unlabelled), or, for an
    ``id,label`` table, ``(table, ids, labels)`` to place once the node count is known."""
    suffix = _suffix(path)
    if suffix == ".npy":
        y = _load_npy(path)
        _check_labels_meta(path, y.shape, y.dtype)
        return _npy_label_rows(path, y)
    if suffix not in (".csv", ".parquet", ".pq"):
        raise _unsupported(path, "labels", ".npy, .csv or .parquet")
    tab = _Table.read(path, typed={"id": "int", "label": "int"})
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
    raise _label_columns_error(path, cols)


def _npy_label_rows(path: Path, y: np.ndarray, first_row: int = 0) -> np.ndarray:
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
    return data_refusal(f"{path}: {what} at rows {_list(rows.tolist())} (0-based row indices){rule}",
                        file=str(path), rows=rows, labels=labels)


def _check_label_values(tab: _Table, col: str, y: np.ndarray) -> None:
    """A labels table's column: labels ``-1 .. MAX_CLASSES - 1`` (-1 or empty: unlabelled)."""
    bad = np.flatnonzero(y < UNLABELLED)
    if bad.size:
        raise tab.refuse(col, "labels below -1", bad, "; labels are 0..C-1, and -1 or an empty cell marks an "
                         "unlabelled node")
    bad = np.flatnonzero(y >= MAX_CLASSES)
    if bad.size:
        raise tab.refuse(col, f"class ids of {MAX_CLASSES} or more", bad, _CLASS_RULE)


def _place_labels(tab: _Table, y: np.ndarray, n: int) -> np.ndarray:
    """An ``id,label`` table as labels ``[n]`` (ids not listed: -1), refusing ids out of range
    and ids listed twice with the file's lines (:meth:`_Table.node_ids`)."""
    out = np.full(n, UNLABELLED, dtype=np.int64)
    out[tab.node_ids(n)] = y
    return out


def _check_inferred_node_count(tab: _Table, e: np.ndarray, n: int) -> None:
    """With no features and no labels the node count is the largest id + 1: refuse ids that do not
    number the nodes ``0 .. n-1`` (beyond :data:`MAX_NODES`, or fewer than half of a count over a
    million used) before anything of that size is allocated."""
    if not e.size or n <= INFERRED_COUNT_CHECKED_ABOVE:
        return
    col, row = divmod(int(np.argmax(e)), e.shape[1])
    _check_ids_number_nodes(n, np.unique(e).size, ("src", "dst")[col], tab.where(np.array([row])))


#: an inferred node count above this is checked to number the nodes (:func:`_check_inferred_node_count`)
INFERRED_COUNT_CHECKED_ABOVE = 1_000_000


def _check_ids_number_nodes(n: int, used: int, name: str, where: str) -> None:
    """Refuse an inferred count of ``n`` nodes of which only ``used`` are in an edge (fewer than
    half), or beyond :data:`MAX_NODES`; ``name``/``where``: the column and place of the largest id."""
    if n > MAX_NODES or used < n // 2:
        why = (f"beyond {MAX_NODES - 1}: privgraph handles at most {MAX_NODES} nodes" if n > MAX_NODES else
               "makes a node count (the largest id + 1) of which fewer than half are in an edge")
        raise data_refusal(
            f"column {name!r}: the largest node id, at {where}, is {why}; node ids must number the nodes 0..n-1 "
            "(renumber them, or give features or labels with one row per node)",
            at=where, largest_id=n - 1, nodes_in_edges=used)


def _columns(path: Path) -> list[str]:
    """The column names of a ``.csv`` (its header line) or ``.parquet`` file (its schema), read
    without the data."""
    suffix = _suffix(path)
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


def check_generic_files(
    edges: Path | str,
    *,
    features: Path | str | None = None,
    labels: Path | str | None = None,
    num_nodes: int | None = None,
    private_column: str | None = None,
) -> None:
    """What :func:`load_generic` would refuse that the files' headers already show, checked without
    reading their data (a run checks this before it starts Prefect): the edge list's columns
    (``src``, ``dst``, the configured private column), a features or labels ``.npy`` that is not
    one (empty, a ``.npz``) or has the wrong shape or dtype, a features table's column types, a
    labels table's columns, and row counts that disagree. The messages are the loader's.

    Raises:
        GraphValidationError: naming the file.
    """
    edges_path, feat_path = Path(edges), None if features is None else Path(features)
    label_path = None if labels is None else Path(labels)
    cols = _columns(edges_path)
    missing = [c for c in ("src", "dst") if c not in cols]
    if missing:
        raise GraphValidationError(f"{edges_path}: missing column(s) {missing}; found columns {cols}")
    _check_private_column(edges_path, cols, private_column)
    if _suffix(edges_path) in (".parquet", ".pq"):
        _check_edge_types(edges_path, private_column)
    rows: dict[str, tuple[Path, int]] = {}
    if feat_path is not None:
        suffix = _suffix(feat_path)
        if suffix == ".npy":
            shape, dtype = _npy_header(feat_path)
            _check_features_meta(feat_path, shape, dtype)
            _check_feature_width(feat_path, shape)
            rows["features"] = (feat_path, shape[0])
        elif suffix in (".parquet", ".pq"):
            schema = pq.ParquetFile(feat_path, pre_buffer=False).schema_arrow
            bad = [f"{f.name!r} ({f.type})" for f in schema
                   if not (pa.types.is_integer(f.type) or pa.types.is_floating(f.type) or pa.types.is_boolean(f.type))]
            if bad:
                raise GraphValidationError(
                    f"{feat_path}: every feature column must be numeric; non-numeric columns {_list(bad)}")
        else:
            raise _unsupported(feat_path, "features", ".npy or .parquet")
    if label_path is not None:
        suffix = _suffix(label_path)
        if suffix == ".npy":
            shape, dtype = _npy_header(label_path)
            _check_labels_meta(label_path, shape, dtype)
            rows["labels"] = (label_path, shape[0])
        elif suffix in (".csv", ".parquet", ".pq"):
            lcols = _columns(label_path)
            if len(lcols) != 1 and sorted(lcols) != ["id", "label"]:
                raise _label_columns_error(label_path, lcols)
        else:
            raise _unsupported(label_path, "labels", ".npy, .csv or .parquet")
    _check_row_counts(rows, num_nodes)


def load_generic(
    edges: Path | str,
    *,
    features: Path | str | None = None,
    labels: Path | str | None = None,
    num_nodes: int | None = None,
    private_column: str | None = None,
) -> GraphData:
    """Load a graph from an edge list and optional feature and label files.

    Files:
        - ``edges``: ``.csv`` (header row) or ``.parquet`` with integer columns ``src``, ``dst``
          (one undirected edge per row, in either direction, node ids ``0 .. n-1``) and an optional
          boolean column marking private edges (``true``/``false`` or ``1``/``0``): ``private``,
          or the column named by ``private_column``, which must then exist. Without such a
          column every edge is public.
        - ``features``: ``.npy`` ``[n, d]`` or ``.parquet`` whose columns are all numeric; row ``i``
          is node ``i``.
        - ``labels``: ``.npy`` ``[n]`` (or ``[n, C]``), or a ``.csv`` / ``.parquet`` table with
          one column (row ``i`` is node ``i``) or the columns ``id,label`` (matched by id, any
          order). Labels are ``0 .. C-1``; ``-1``, an empty cell or an id not listed marks an
          unlabelled node (in no split mask, never touched by label RR).

    ``num_nodes`` defaults to the row count of the features (else of the labels, else the largest
    edge id + 1). No feature bounds are implied: configure public bounds before privatizing.

    Raises:
        DatasetNotFoundError: a file does not exist.
        GraphValidationError: missing columns, wrong types, missing values, ids out of range,
            self-loops, duplicate edges (also ``(u, v)`` next to ``(v, u)``), NaN/inf features, or
            row counts that disagree; naming the file and the offending lines/rows.
    """
    edges_path = _check_exists(Path(edges), "edges")
    feat_path = None if features is None else _check_exists(Path(features), "features")
    label_path = None if labels is None else _check_exists(Path(labels), "labels")
    _check_load_arguments(num_nodes, private_column)
    tab, e, private = _read_edges(edges_path, private_column or "private")
    _check_private_column(edges_path, list(tab.df.columns), private_column)
    x = None if feat_path is None else _read_features(feat_path)
    y = None if label_path is None else _read_labels(label_path)
    keyed = y if isinstance(y, tuple) else None  # an id,label table: placed once n is known
    if keyed is not None:
        y = None

    _check_row_counts({what: (p, len(a)) for what, a, p in (("features", x, feat_path), ("labels", y, label_path))
                       if a is not None}, None if num_nodes is None else int(num_nodes))
    n = _node_count(num_nodes, x, y, keyed, tab, e)
    if keyed is not None:
        y = _place_labels(keyed[0], keyed[2], n)

    if n == 0:
        raise GraphValidationError(
            f"{edges_path}: empty graph: no nodes (no edge rows"
            + (", and the features/labels have no rows)" if x is not None or y is not None else ")")
        )
    _check_edges(tab, e, n)
    meta: dict[str, Any] = {
        "name": "generic",
        "source": f"edge list {edges_path}",
        "files": {
            "edges": str(edges_path),
            "features": None if feat_path is None else str(feat_path),
            "labels": None if label_path is None else str(label_path),
        },
        "private_column": (private_column or "private") if private is not None else None,
        "feature_bounds": None,
        "feature_bounds_source": "none: the files define no bounds; configure public bounds",
    }
    return GraphData.from_edges(n, e, private, x=x, y=y, meta=meta)


def _check_load_arguments(num_nodes: Any, private_column: Any) -> None:
    """``num_nodes`` a non-negative int (or None) and ``private_column`` a column name (or None)."""
    if num_nodes is not None and (
        isinstance(num_nodes, bool) or not isinstance(num_nodes, numbers.Integral) or num_nodes < 0
    ):
        raise GraphValidationError(f"num_nodes must be a non-negative int, got {num_nodes!r}")
    if private_column is not None and (not isinstance(private_column, str) or not private_column):
        raise GraphValidationError(f"private_column must be a column name, got {private_column!r}")


def _node_count(
    num_nodes: int | None, x: np.ndarray | None, y: np.ndarray | None,
    keyed: tuple[_Table, np.ndarray, np.ndarray] | None, tab: _Table, e: np.ndarray,
) -> int:
    """``num_nodes``, else the features' row count, else the labels' (by row), else the largest id
    (of the edges and of an ``id,label`` table) + 1, checked to number the nodes."""
    if num_nodes is not None:
        return int(num_nodes)
    if x is not None:
        return len(x)
    if y is not None:
        return len(y)
    n = max(int(e.max()) + 1, 0) if e.size else 0
    if keyed is not None and keyed[1].size:
        n = max(n, int(keyed[1].max()) + 1)
    _check_inferred_node_count(tab, e, n)
    return n
