"""The partitioned graph format ``privgraph-partitioned-graph/1``: a graph on disk in node ranges,
read one range at a time (a worker's unit of work), or whole for small graphs.

Layout of a graph directory (the exact format: docs/partitioned-input.md, Format)::

    graph.json                   the metadata, written last: a directory without it is no graph
    nodes/range-00000.parquet    nodes [i * range_size, min((i + 1) * range_size, n)): id, x, y,
                                 train, val, test (x, y and the masks only when the graph has them)
    edges/range-00000.parquet    every undirected edge once as src = min(u, v) < dst = max(u, v),
                                 in the range of src, sorted by (src, dst): src, dst, private

:func:`~privgraph.ingest.partitioned_writer.write_partitioned_graph` writes one from the generic
loader's files in bounded memory; a user's own ETL may write one too. The reader checks what a
range holds against ``graph.json`` (ids, types, order) and its rows as GraphData and the generic
loader check them (finite features, labels below ``num_classes``, the split; edges in range, in
order, once), and names the file (and the row and column, never a value) in a one-line
:class:`~privgraph.errors.GraphValidationError` otherwise. Paths: local directories or URIs
that ``pyarrow.fs.FileSystem.from_uri`` opens (tested: ``s3://bucket/prefix?endpoint_override=...``
against an S3 server); the writer writes local directories only. Every message, ``repr`` and
``meta`` names a URI as :func:`~privgraph.guarantee.redaction.redact_uri` shows it (no
credentials, no query string).
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from privgraph.errors import DatasetNotFoundError, GraphValidationError, data_refusal
from privgraph.graph import MAX_CLASSES, MAX_NODES, SPLIT_MASKS, UNLABELLED, GraphData
from privgraph.guarantee.redaction import redact_uri
from privgraph.ingest.filesystems import filesystem_of

__all__ = [
    "DEFAULT_RANGE_SIZE",
    "EDGE_SCHEMA",
    "FORMAT",
    "GRAPH_FILE",
    "NODE_COLUMNS",
    "PartitionedGraph",
    "graph_meta",
    "load_partitioned_graph",
    "node_schema",
    "open_partitioned_graph",
    "range_file",
    "read_edge_range",
    "read_node_range",
    "row_refusal",
]

#: the value of ``format`` in ``graph.json``
FORMAT = "privgraph-partitioned-graph/1"
#: the metadata file, written last
GRAPH_FILE = "graph.json"
#: nodes per range unless the writer is told otherwise
DEFAULT_RANGE_SIZE = 100_000
#: the node columns, in file order (``x``, ``y`` and the split only when the graph has them)
NODE_COLUMNS = ("id", "x", "y", "train", "val", "test")
#: the split columns and the GraphData masks they become
SPLIT_COLUMNS = dict(zip(("train", "val", "test"), SPLIT_MASKS, strict=True))
#: the edge columns of every edge range
EDGE_SCHEMA = pa.schema([("src", pa.int64()), ("dst", pa.int64()), ("private", pa.bool_())])


def range_file(kind: str, i: int) -> str:
    """The relative path of range ``i``'s file of ``kind`` (``"nodes"`` or ``"edges"``)."""
    return f"{kind}/range-{i:05d}.parquet"


def node_schema(num_features: int, has_labels: bool, has_split: bool) -> pa.Schema:
    """The node columns of a graph with ``num_features`` features (0: no ``x``), labels, a split."""
    fields = [pa.field("id", pa.int64(), nullable=False)]
    if num_features:
        fields.append(pa.field("x", pa.list_(pa.float32(), num_features), nullable=False))
    if has_labels:
        fields.append(pa.field("y", pa.int64(), nullable=False))
    if has_split:
        fields += [pa.field(c, pa.bool_(), nullable=False) for c in SPLIT_COLUMNS]
    return pa.schema(fields)


@dataclasses.dataclass(frozen=True)
class PartitionedGraph:
    """A partitioned graph: its ``graph.json`` and where it lies (``path``: a directory or URI).
    Small and picklable: a worker gets one and reads its range with :func:`read_node_range`."""

    path: str
    num_nodes: int
    num_features: int
    feature_dtype: str
    has_labels: bool
    num_classes: int | None
    has_split: bool
    range_size: int
    num_ranges: int
    private_column: str | None
    source: dict[str, Any]

    def node_range(self, i: int) -> tuple[int, int]:
        """The node ids ``[start, stop)`` of range ``i``."""
        if isinstance(i, bool) or not isinstance(i, (int, np.integer)) or not 0 <= i < self.num_ranges:
            raise IndexError(f"{redact_uri(self.path)}: range {i!r} outside 0..{self.num_ranges - 1}")
        return int(i) * self.range_size, min((int(i) + 1) * self.range_size, self.num_nodes)

    def node_columns(self) -> tuple[str, ...]:
        """The columns this graph's node ranges hold."""
        return tuple(node_schema(self.num_features, self.has_labels, self.has_split).names)

    def __repr__(self) -> str:  # the path as every message shows it: a worker's log may print a task's arguments
        shown = {f.name: redact_uri(self.path) if f.name == "path" else getattr(self, f.name) for f in dataclasses.fields(self)}
        return f"PartitionedGraph({', '.join(f'{k}={v!r}' for k, v in shown.items())})"

    def metadata(self) -> dict[str, Any]:
        """The content of ``graph.json``."""
        meta = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name != "path"}
        return {"format": FORMAT, **meta}


def _file_of(path: str, name: str) -> str:
    """``name`` inside the graph at ``path``, for a message (the path redacted)."""
    return f"{redact_uri(path).rstrip('/')}/{name}"


def _read_metadata(path: str) -> dict[str, Any]:
    """``graph.json`` of the graph at ``path``, parsed (one-line errors naming the file)."""
    fs, root = filesystem_of(path)
    where = _file_of(path, GRAPH_FILE)
    info = fs.get_file_info(root)
    if info.type == pafs.FileType.NotFound:
        raise DatasetNotFoundError(f"partitioned graph not found: {redact_uri(path)}")
    try:
        with fs.open_input_stream(f"{root}/{GRAPH_FILE}") as f:
            raw = f.read()
    except FileNotFoundError:
        raise GraphValidationError(
            f"{where}: no such file; {redact_uri(path)} is not a partitioned graph (an interrupted ingest "
            "leaves none)") from None
    try:
        doc = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise GraphValidationError(f"{where}: not valid JSON: {exc}") from None
    if not isinstance(doc, dict):
        raise GraphValidationError(f"{where}: expected a JSON object, got {type(doc).__name__}")
    if doc.get("format") != FORMAT:
        raise GraphValidationError(f"{where}: format {doc.get('format')!r}; expected {FORMAT!r}")
    return doc


def _int_field(doc: dict[str, Any], key: str, where: str, low: int, *, null: bool = False) -> int | None:
    """``doc[key]``: an int ``>= low`` (or null where ``null``), else a one-line error."""
    v = doc.get(key)
    if v is None and null:
        return None
    if isinstance(v, bool) or not isinstance(v, int) or v < low or v > MAX_NODES:
        want = f"an integer in {low}..{MAX_NODES}" + (" or null" if null else "")
        raise GraphValidationError(f"{where}: {key!r} is {v!r}; expected {want}")
    return v


def _typed_field(doc: dict[str, Any], key: str, where: str, types: tuple[type, ...], what: str) -> Any:
    v = doc.get(key)
    if not isinstance(v, types):
        raise GraphValidationError(f"{where}: {key!r} is {v!r}; expected {what}")
    return v


def _classes_field(doc: dict[str, Any], where: str, has_labels: bool) -> int | None:
    """``num_classes``: an int in ``0..MAX_CLASSES`` with labels, null without. The declared class
    count: every label is below it (each range's reader checks), and it may exceed the largest (a
    class no node has). Its value is not shown (a user's ETL may write the largest label + 1)."""
    v = doc.get("num_classes")
    if not has_labels:
        if v is not None:
            raise GraphValidationError(f"{where}: 'num_classes' is set but 'has_labels' is false; expected null")
        return None
    if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v <= MAX_CLASSES:
        raise GraphValidationError(f"{where}: 'num_classes' is not an integer in 0..{MAX_CLASSES} (labels are "
                                   f"0..C-1 with C <= {MAX_CLASSES}; -1 marks an unlabelled node)")
    return v


def open_partitioned_graph(path: str | os.PathLike[str]) -> PartitionedGraph:
    """The partitioned graph at ``path``, from its ``graph.json`` (checked; the ranges are read by
    :func:`read_node_range` and :func:`read_edge_range`).

    Raises:
        DatasetNotFoundError: nothing at ``path``.
        GraphValidationError: no ``graph.json``, another format, or a field of the wrong type or
            inconsistent with the others (``num_classes`` above :data:`~privgraph.graph.MAX_CLASSES`
            too); one line naming the file.
    """
    path = os.fspath(path)
    doc = _read_metadata(path)
    where = _file_of(path, GRAPH_FILE)
    n = _int_field(doc, "num_nodes", where, 1)
    size = _int_field(doc, "range_size", where, 1)
    ranges = _int_field(doc, "num_ranges", where, 1)
    if ranges != math.ceil(n / size):
        raise GraphValidationError(f"{where}: 'num_ranges' is {ranges}; {n} nodes in ranges of {size} make "
                                   f"{math.ceil(n / size)}")
    if doc.get("feature_dtype") != "float32":
        raise GraphValidationError(f"{where}: 'feature_dtype' is {doc.get('feature_dtype')!r}; expected 'float32'")
    has_labels = _typed_field(doc, "has_labels", where, (bool,), "true or false")
    classes = _classes_field(doc, where, has_labels)
    private_column = doc.get("private_column")
    if private_column is not None and not isinstance(private_column, str):
        raise GraphValidationError(f"{where}: 'private_column' is {private_column!r}; expected a column name or null")
    return PartitionedGraph(
        path=path, num_nodes=n, num_features=_int_field(doc, "num_features", where, 0), feature_dtype="float32",
        has_labels=has_labels, num_classes=classes,
        has_split=_typed_field(doc, "has_split", where, (bool,), "true or false"), range_size=size,
        num_ranges=ranges, private_column=private_column,
        source=dict(_typed_field(doc, "source", where, (dict,), "an object (the source file names)")),
    )


def _read_range_table(graph: PartitionedGraph, kind: str, i: int, columns: Sequence[str]) -> tuple[pa.Table, str]:
    """Range ``i``'s ``kind`` file as a table of ``columns`` (read on this thread), and its name."""
    fs, root = filesystem_of(graph.path)
    name = range_file(kind, i)
    where = _file_of(graph.path, name)
    try:
        with fs.open_input_file(f"{root}/{name}") as f:
            pf = pq.ParquetFile(f, pre_buffer=False)
            missing = [c for c in columns if c not in pf.schema_arrow.names]
            if missing:
                raise GraphValidationError(f"{where}: missing column(s) {missing}; found {pf.schema_arrow.names}")
            return pf.read(columns=list(columns), use_threads=False), where
    except FileNotFoundError:
        raise GraphValidationError(f"{where}: no such file; the graph has {graph.num_ranges} ranges") from None
    except (pa.ArrowException, OSError) as exc:
        raise GraphValidationError(f"{where}: cannot read as Parquet: {' '.join(str(exc).split())}") from None


def _column(table: pa.Table, name: str, want: pa.DataType, where: str) -> np.ndarray:
    """Column ``name`` as a NumPy array, refusing another type or a null (one line naming the file)."""
    col = table.column(name)
    if not col.type.equals(want):
        raise GraphValidationError(f"{where}: column {name!r} has type {col.type}, expected {want}")
    if col.null_count:
        first = int(np.flatnonzero(col.is_null().to_numpy(zero_copy_only=False))[0])
        raise GraphValidationError(f"{where}: row {first} (0-based), column {name!r}: a null value; the column "
                                   "holds none")
    arr = col.combine_chunks()
    if pa.types.is_fixed_size_list(want):
        values = arr.flatten().to_numpy(zero_copy_only=False)
        return values.reshape(len(arr), want.list_size)
    return arr.to_numpy(zero_copy_only=False)


def read_node_range(graph: PartitionedGraph, i: int, columns: Sequence[str] | None = None) -> dict[str, np.ndarray]:
    """Range ``i``'s nodes: ``id`` int64 ``[k]``, ``x`` float32 ``[k, d]``, ``y`` int64 ``[k]``,
    ``train``/``val``/``test`` bool ``[k]`` (those the graph has; ``columns`` picks some).

    The rows read are checked as GraphData and the generic loader check them (on the columns
    read: :func:`_check_node_rows`), at the cost of one pass over them.

    Raises:
        IndexError: ``i`` is not a range of the graph.
        ValueError: a column the graph does not have.
        GraphValidationError: the file is missing, of another type or shape, or its ids are not
            the range's (one line naming the file); a NaN or infinite feature, a label outside
            ``-1 .. num_classes - 1``, a node in two split parts or an unlabelled node in one
            (one line naming the file, the row and the column, never a value).
    """
    start, stop = graph.node_range(i)
    have = graph.node_columns()
    wanted = list(have) if columns is None else list(columns)
    unknown = [c for c in wanted if c not in have]
    if unknown:
        raise ValueError(f"{redact_uri(graph.path)}: no node column(s) {unknown}; this graph has {list(have)}")
    table, where = _read_range_table(graph, "nodes", i, sorted(set(wanted) | {"id"}, key=have.index))
    if table.num_rows != stop - start:
        raise GraphValidationError(f"{where}: {table.num_rows} rows; range {i} holds nodes {start}..{stop - 1}")
    ids = _column(table, "id", pa.int64(), where)
    if ids.size and (ids[0] != start or (np.diff(ids) != 1).any()):
        raise GraphValidationError(f"{where}: column 'id' is not {start}..{stop - 1} in order")
    schema = node_schema(graph.num_features, graph.has_labels, graph.has_split)
    rows = {c: _column(table, c, schema.field(c).type, where) for c in wanted}
    _check_node_rows(graph, rows, where)
    return rows


def _first(bad: np.ndarray) -> int:
    return int(np.flatnonzero(bad)[0])


def _check_node_rows(graph: PartitionedGraph, rows: dict[str, np.ndarray], where: str) -> None:
    """What GraphData and the generic loader refuse, on the columns in ``rows`` (a range's rows):
    a NaN or infinite feature, a label outside ``-1 .. num_classes - 1`` (``graph.json``'s
    declared count), a node in two split parts, an unlabelled node in a part. The first such
    row, by :func:`row_refusal` (features and labels: the owner's record); the split and which
    nodes are labelled are public, so those refusals are plain one-liners."""
    x, y = rows.get("x"), rows.get("y")
    if x is not None and x.size and not (np.isfinite(x.min()) and np.isfinite(x.max())):  # min, max: NaN propagates
        finite = np.isfinite(x)
        r = _first(~finite.all(axis=1))
        raise row_refusal(where, r, f"column 'x' (feature {_first(~finite[r])})",
                          "a NaN or infinite value; features are finite", features=x[r])
    if y is not None and y.size and (y.min() < UNLABELLED or y.max() >= graph.num_classes):
        r = _first((y < UNLABELLED) | (y >= graph.num_classes))
        raise row_refusal(where, r, "column 'y'", f"a label outside -1..num_classes - 1 (num_classes: {GRAPH_FILE}'s "
                          "declared class count; -1 marks an unlabelled node)", label=y[r], num_classes=graph.num_classes)
    parts = [c for c in SPLIT_COLUMNS if c in rows]
    if not parts:
        return
    count = sum((rows[c].astype(np.int8) for c in parts), np.zeros(rows[parts[0]].shape, np.int8))
    if len(parts) > 1 and count.max(initial=0) > 1:
        r = _first(count > 1)
        raise GraphValidationError(f"{where}: row {r} (0-based), columns {', '.join(map(repr, parts))}: a node in "
                                   "more than one split part; the parts are disjoint")
    if y is not None and (unlabelled_in := (count > 0) & (y == UNLABELLED)).any():
        r = _first(unlabelled_in)
        raise GraphValidationError(f"{where}: row {r} (0-based), columns 'y', {', '.join(map(repr, parts))}: an "
                                   "unlabelled node (y = -1) in a split part; a node without a label can be in no part")


def read_edge_range(graph: PartitionedGraph, i: int) -> tuple[np.ndarray, np.ndarray]:
    """Range ``i``'s edges (those whose smaller end is in the range): int64 ``[2, k]`` with
    ``src < dst``, sorted by ``(src, dst)``, and the private flags, bool ``[k]``.

    Raises:
        IndexError: ``i`` is not a range of the graph.
        GraphValidationError: the file is missing, of another type, or an edge is outside the
            range, not ``src < dst < num_nodes``, repeated or out of order (naming file and row).
    """
    start, stop = graph.node_range(i)
    table, where = _read_range_table(graph, "edges", i, EDGE_SCHEMA.names)
    src, dst = (_column(table, c, pa.int64(), where) for c in ("src", "dst"))
    private = _column(table, "private", pa.bool_(), where)
    bad_src = (src < start) | (src >= stop)
    bad = np.flatnonzero(bad_src | (dst <= src) | (dst >= graph.num_nodes))
    if bad.size:
        r = int(bad[0])
        column = "'src'" if bad_src[r] else "'dst'"
        raise row_refusal(where, r, f"column {column}", f"an edge outside range {i} (which holds the edges with src in "
                          f"{start}..{stop - 1}, src < dst < {graph.num_nodes})", edge=[src[r], dst[r]])
    if src.size > 1:
        ds, dd = np.diff(src), np.diff(dst)
        bad = np.flatnonzero((ds < 0) | ((ds == 0) & (dd <= 0)))
        if bad.size:
            r = int(bad[0]) + 1
            raise row_refusal(where, r, "columns 'src', 'dst'", f"the edge repeats row {r - 1} or is out of "
                              "(src, dst) order", edge=[src[r], dst[r]], previous=[src[r - 1], dst[r - 1]])
    return np.stack([src, dst]), private


def row_refusal(where: str, row: int, columns: str, rule: str, **values: Any) -> GraphValidationError:
    """The refusal of a range file's row: ``<where>: row <row> (0-based), <columns>: <rule>``, one
    line naming the file, the row and the column(s) (``"column 'y'"``) and the rule broken, never
    a value (a range's rows may be private); ``values`` go to the owner's refusal record
    (:func:`~privgraph.errors.data_refusal`)."""
    return data_refusal(f"{where}: row {row} (0-based), {columns}: {rule}", file=where, row=row, **values)


def graph_meta(graph: PartitionedGraph) -> dict[str, Any]:
    """The ``meta`` of the GraphData that :func:`load_partitioned_graph` builds (the generic
    loader's, with the partitioned graph as its source), from ``graph.json`` alone."""
    meta: dict[str, Any] = {
        "name": "partitioned",
        "source": f"partitioned graph {redact_uri(graph.path)}",
        "files": dict(graph.source),
        "private_column": graph.private_column,
        "feature_bounds": None,
        "feature_bounds_source": "none: the files define no bounds; configure public bounds",
    }
    if graph.has_split:
        meta["split"] = f"split file {graph.source.get('split')}"
    return meta


def load_partitioned_graph(path: str | os.PathLike[str]) -> GraphData:
    """The whole partitioned graph at ``path`` as one GraphData (small graphs and tests): the same
    arrays as :func:`~privgraph.ingest.datasets.generic.load_generic` on the files it was written
    from (and the split file), edges in ``(u, v)`` order.

    Raises:
        DatasetNotFoundError, GraphValidationError: as :func:`open_partitioned_graph`,
            :func:`read_node_range` and :func:`read_edge_range`.
    """
    graph = open_partitioned_graph(path)
    nodes = [read_node_range(graph, i) for i in range(graph.num_ranges)]
    edges = [read_edge_range(graph, i) for i in range(graph.num_ranges)]
    column = {c: np.concatenate([r[c] for r in nodes]) for c in graph.node_columns()}
    masks = {SPLIT_COLUMNS[c]: column[c] for c in SPLIT_COLUMNS if c in column}
    return GraphData.from_edges(
        graph.num_nodes, np.concatenate([e for e, _ in edges], axis=1), np.concatenate([p for _, p in edges]),
        x=column.get("x"), y=column.get("y"), meta=graph_meta(graph), **masks,
    )
