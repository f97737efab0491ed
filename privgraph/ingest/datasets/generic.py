"""Load a graph from plain files: an edge list (CSV or Parquet), optional features and labels.

Every problem with the files raises :class:`~privgraph.errors.GraphValidationError` naming the
file and the offending rows: 1-based *line numbers* for CSV files (the header is line 1) and
0-based *row indices* for Parquet and ``.npy`` files. Messages say which of the two they use,
and never quote a value of the files (any row may be private): the values of the offending rows
are the error's ``private_detail`` (:func:`~privgraph.errors.data_refusal`), for the owner's
refusal record.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from privgraph.errors import GraphValidationError
from privgraph.graph import GraphData, check_edge_list
from privgraph.ingest.datasets.input_files import (
    INFERRED_COUNT_CHECKED_ABOVE, check_exists, check_feature_width, check_features_meta, check_ids_number_nodes,
    check_labels_meta, check_load_arguments, check_row_counts, label_columns_error, npy_header, place_labels,
    read_features, read_labels, unsupported_file_type)
from privgraph.ingest.datasets.table import Table, file_suffix, header_columns, short_list

__all__ = ["check_generic_files", "load_generic"]


# -- edges ------------------------------------------------------------------------------------
def _read_edges(path: Path, private_column: str) -> tuple[Table, np.ndarray, np.ndarray | None]:
    typed = {"src": "int", "dst": "int", private_column: "bool"}
    tab = Table.read(path, typed=typed)
    tab.require("src", "dst")
    e = np.stack([tab.int_column("src"), tab.int_column("dst")]) if len(tab.df) else np.zeros(
        (2, 0), np.int64
    )
    private = tab.bool_column(private_column) if private_column in tab.df.columns else None
    return tab, e, private


def _check_edges(tab: Table, e: np.ndarray, n: int) -> None:
    """Range, self-loops and (both-direction) duplicates, reported with the file's rows."""
    check_edge_list(e, n, prefix="", where=tab.where)


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


def _check_inferred_node_count(tab: Table, e: np.ndarray, n: int) -> None:
    """With no features and no labels the node count is the largest id + 1: refuse ids that do not
    number the nodes ``0 .. n-1`` (beyond :data:`~privgraph.graph.MAX_NODES`, or fewer than half of a count over a
    million used) before anything of that size is allocated."""
    if not e.size or n <= INFERRED_COUNT_CHECKED_ABOVE:
        return
    col, row = divmod(int(np.argmax(e)), e.shape[1])
    check_ids_number_nodes(n, np.unique(e).size, ("src", "dst")[col], tab.where(np.array([row])))


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
    cols = header_columns(edges_path)
    missing = [c for c in ("src", "dst") if c not in cols]
    if missing:
        raise GraphValidationError(f"{edges_path}: missing column(s) {missing}; found columns {cols}")
    _check_private_column(edges_path, cols, private_column)
    if file_suffix(edges_path) in (".parquet", ".pq"):
        _check_edge_types(edges_path, private_column)
    rows: dict[str, tuple[Path, int]] = {}
    if feat_path is not None:
        suffix = file_suffix(feat_path)
        if suffix == ".npy":
            shape, dtype = npy_header(feat_path)
            check_features_meta(feat_path, shape, dtype)
            check_feature_width(feat_path, shape)
            rows["features"] = (feat_path, shape[0])
        elif suffix in (".parquet", ".pq"):
            schema = pq.ParquetFile(feat_path, pre_buffer=False).schema_arrow
            bad = [f"{f.name!r} ({f.type})" for f in schema
                   if not (pa.types.is_integer(f.type) or pa.types.is_floating(f.type) or pa.types.is_boolean(f.type))]
            if bad:
                raise GraphValidationError(
                    f"{feat_path}: every feature column must be numeric; non-numeric columns {short_list(bad)}")
        else:
            raise unsupported_file_type(feat_path, "features", ".npy or .parquet")
    if label_path is not None:
        suffix = file_suffix(label_path)
        if suffix == ".npy":
            shape, dtype = npy_header(label_path)
            check_labels_meta(label_path, shape, dtype)
            rows["labels"] = (label_path, shape[0])
        elif suffix in (".csv", ".parquet", ".pq"):
            lcols = header_columns(label_path)
            if len(lcols) != 1 and sorted(lcols) != ["id", "label"]:
                raise label_columns_error(label_path, lcols)
        else:
            raise unsupported_file_type(label_path, "labels", ".npy, .csv or .parquet")
    check_row_counts(rows, num_nodes)


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
    edges_path = check_exists(Path(edges), "edges")
    feat_path = None if features is None else check_exists(Path(features), "features")
    label_path = None if labels is None else check_exists(Path(labels), "labels")
    check_load_arguments(num_nodes, private_column)
    tab, e, private = _read_edges(edges_path, private_column or "private")
    _check_private_column(edges_path, list(tab.df.columns), private_column)
    x = None if feat_path is None else read_features(feat_path)
    y = None if label_path is None else read_labels(label_path)
    keyed = y if isinstance(y, tuple) else None  # an id,label table: placed once n is known
    if keyed is not None:
        y = None

    check_row_counts({what: (p, len(a)) for what, a, p in (("features", x, feat_path), ("labels", y, label_path))
                       if a is not None}, None if num_nodes is None else int(num_nodes))
    n = _node_count(num_nodes, x, y, keyed, tab, e)
    if keyed is not None:
        y = place_labels(keyed[0], keyed[2], n)

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


def _node_count(
    num_nodes: int | None, x: np.ndarray | None, y: np.ndarray | None,
    keyed: tuple[Table, np.ndarray, np.ndarray] | None, tab: Table, e: np.ndarray,
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
