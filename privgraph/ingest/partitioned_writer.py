"""Write a partitioned graph (``privgraph-partitioned-graph/1``) from the generic loader's files in
bounded memory: :func:`write_partitioned_graph`.

The edge list is read in batches (:mod:`privgraph.ingest.input_batches`), each edge routed by its
smaller end to a spill fragment of its range on disk, with its source row
(:mod:`privgraph.ingest.edge_spill`); then each range's fragment is checked (duplicates in either
direction, named by source rows), sorted, given the dataset options
(:mod:`privgraph.ingest.partitioned_options`: cut edges dropped, rho's marking) and written beside
the range's node rows, which are read from the ``.npy`` files at their offsets. Peak memory: one
batch plus one range's nodes and edges (with ``--rho``, 8 bytes per edge while the private edges
are drawn). Every check and message is the generic loader's
(:mod:`privgraph.ingest.datasets.generic`, :mod:`privgraph.ingest.datasets.input_files`); a problem found in one batch or range lists
the rows of that batch or range. All or nothing: the graph is written into ``.<name>.tmp`` beside
the destination, ``graph.json`` last, and renamed; any failure removes it. A destination URI
(``s3://bucket/prefix``, any file system pyarrow opens) must hold no object yet: each range is
uploaded as soon as it is written (the local spill and range files live in a private temporary
directory), ``graph.json`` last; any failure deletes what was uploaded. The numbers given are
checked against the format's bounds before anything is read (:func:`_check_layout`); a disk that
fills is one line, exit code 4, naming the destination and the disk (:func:`_full_disk`).
Reasoning, memory bound and figures: docs/partitioned-input.md.
"""

from __future__ import annotations

import dataclasses
import errno
import json
import math
import numbers
import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from privgraph.errors import ConfigError, DiskFullError, GraphValidationError
from privgraph.graph import MAX_NODES, UNLABELLED, check_edge_list
from privgraph.guarantee.private_files import mkdir_private, write_private_file
from privgraph.guarantee.redaction import redact_uri
from privgraph.ingest.datasets.generic import check_generic_files
from privgraph.ingest.datasets.input_files import (
    INFERRED_COUNT_CHECKED_ABOVE, check_exists, check_finite_features, check_ids_number_nodes, check_load_arguments,
    check_row_counts, npy_label_rows, place_labels, read_features, read_labels)
from privgraph.ingest.datasets.split import node_parts, read_node_split
from privgraph.ingest.datasets.table import Table, file_suffix, header_columns
from privgraph.ingest.edge_spill import EdgeSpill
from privgraph.ingest.ingest_claims import open_destination, release_claim
from privgraph.ingest.input_batches import NpyRows, edge_batches
from privgraph.ingest.partitioned_destination import RemoteDestination, refuse_existing, resolve_destination
from privgraph.ingest.partitioned_graph import (
    DEFAULT_RANGE_SIZE, EDGE_SCHEMA, GRAPH_FILE, PartitionedGraph, node_schema, range_file)
from privgraph.ingest.partitioned_options import EdgePlan, IngestOptions, plan_edges

__all__ = ["MAX_RANGES", "write_partitioned_graph"]

#: the most ranges an ingest writes: the range files keep their five-digit names (``range-00000``
#: .. ``range-99999``), two files and one task of a run at scale per range; the format's largest
#: graph (MAX_NODES nodes) takes ranges of 21,475 nodes or more
MAX_RANGES = 100_000
#: a disk or quota that filled under a write: the ingest ends (exit 4), never retried
_FULL_ERRNOS = (errno.ENOSPC, errno.EDQUOT)


@dataclasses.dataclass
class _Inputs:
    """The checked arguments of one ingest."""

    edges: Path
    features: Path | None
    labels: Path | None
    split: Path | None
    num_nodes: int | None
    private_column: str | None
    destination: Path | str  # a local directory, or a URI (str)
    range_size: int
    options: IngestOptions  # the dataset options applied while writing (checked)


# -- arguments, destination -----------------------------------------------------------------------
def _check_arguments(edges: Any, features: Any, labels: Any, split: Any, num_nodes: Any, private_column: Any,
                     destination: Any, range_size: Any, options: IngestOptions | None) -> _Inputs:
    """The numbers typed are in the format's bounds (:func:`_check_layout`), the files exist, the
    arguments (and the dataset options) have their types and the headers pass
    :func:`check_generic_files`; all before any row is read or anything is written."""
    _check_layout(num_nodes, range_size)
    ins = _Inputs(
        edges=check_exists(Path(edges), "edges"),
        features=None if features is None else check_exists(Path(features), "features"),
        labels=None if labels is None else check_exists(Path(labels), "labels"),
        split=None if split is None else check_exists(Path(split), "split"),
        num_nodes=num_nodes, private_column=private_column,
        destination=resolve_destination(destination),
        range_size=int(range_size),
        options=(options or IngestOptions()).checked(split_file=split is not None),
    )
    check_load_arguments(num_nodes, private_column)
    check_generic_files(ins.edges, features=ins.features, labels=ins.labels, num_nodes=num_nodes,
                        private_column=private_column)
    if ins.options.rho is not None and (private_column or "private") in header_columns(ins.edges):
        raise ConfigError(f"--rho: {ins.edges} marks its private edges itself (column "
                          f"{private_column or 'private'!r}); give --rho or the column, not both")
    return ins


def _check_layout(num_nodes: Any, range_size: Any) -> None:
    """``--range-size`` and ``--num-nodes`` within the format's bounds (1 .. :data:`MAX_NODES`, what
    the reader takes), and the ranges they make at most :data:`MAX_RANGES`; one line naming the flag.

    Raises:
        ConfigError: exit code 2, before anything is read or written.
    """
    for flag, value in (("--range-size", range_size), ("--num-nodes", num_nodes)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, numbers.Integral)
                                  or not 1 <= value <= MAX_NODES):
            raise ConfigError(f"{flag}: expected an integer in 1..{MAX_NODES} (the format's bound, 2^31 - 1), "
                              f"got {value!r}")
    if num_nodes is not None:
        _check_node_count(int(num_nodes), int(range_size), "--num-nodes")


def _check_node_count(n: int, range_size: int, source: str | None) -> None:
    """``n`` nodes (given by ``source``: a flag or a file's rows; None: the largest id of the edges,
    a value of the data that the message leaves out) are at most :data:`MAX_NODES` and make at most
    :data:`MAX_RANGES` ranges of ``range_size``."""
    count = f"{n} nodes ({source})" if source else "the node count the edges give"
    if n > MAX_NODES:
        raise ConfigError(f"{count}: more than the partitioned format holds, {MAX_NODES} (2^31 - 1)")
    ranges = -(-n // range_size)
    if ranges > MAX_RANGES:
        made, fix = (f"make {ranges} ranges", f"give --range-size {-(-n // MAX_RANGES)} or more") if source else (
            f"makes more than {MAX_RANGES} ranges",
            f"give a larger --range-size ({-(-MAX_NODES // MAX_RANGES)} or more takes any graph)")
        raise ConfigError(f"--range-size {range_size}: {count} {made}; an ingest writes at most {MAX_RANGES} "
                          f"(two files each): {fix}")


# -- nodes ----------------------------------------------------------------------------------------
@dataclasses.dataclass
class _Nodes:
    """The node rows' sources: ``.npy`` files read at offsets, or tables read whole."""

    features: NpyRows | np.ndarray | None = None
    labels: NpyRows | np.ndarray | None = None
    keyed: tuple[Table, np.ndarray, np.ndarray] | None = None  # an id,label table, placed once n is known
    num_classes: int | None = None

    @property
    def num_features(self) -> int:
        return 0 if self.features is None else int(self.features.shape[1])

    def rows(self) -> int | None:
        """The node count the features or labels (by row) give, if any."""
        for a in (self.features, self.labels):
            if a is not None:
                return int(a.shape[0])
        return None


def _open_nodes(ins: _Inputs) -> _Nodes:
    """Features and labels opened (``.npy``) or read whole (tables), labels checked range by range
    (the generic loader's messages) and counted; row counts checked against each other."""
    nodes = _Nodes()
    if ins.features is not None:
        nodes.features = NpyRows(ins.features) if file_suffix(ins.features) == ".npy" else read_features(ins.features)
    if ins.labels is not None:
        if file_suffix(ins.labels) == ".npy":
            nodes.labels = NpyRows(ins.labels)
        else:
            y = read_labels(ins.labels)
            if isinstance(y, tuple):
                nodes.keyed = y
            else:
                nodes.labels = y
    if nodes.labels is not None and len(nodes.labels.shape) != 1:
        raise GraphValidationError(f"{ins.labels}: labels of shape {list(nodes.labels.shape)}; the partitioned "
                                   "format holds one label per node ([n]), not multi-label [n, C]")
    rows = {what: (p, int(a.shape[0])) for what, a, p in (("features", nodes.features, ins.features),
                                                          ("labels", nodes.labels, ins.labels)) if a is not None}
    check_row_counts(rows, ins.num_nodes)
    if nodes.labels is not None:
        nodes.num_classes = _check_labels(ins.labels, nodes.labels, ins.range_size)
    return nodes


def _label_rows(path: Path, labels: NpyRows | np.ndarray, start: int, stop: int) -> np.ndarray:
    """Labels ``start .. stop - 1`` as int64, checked as the generic loader checks them."""
    if isinstance(labels, NpyRows):
        return npy_label_rows(path, labels.rows(start, stop), first_row=start)
    return labels[start:stop]


def _check_labels(path: Path, labels: NpyRows | np.ndarray, step: int) -> int:
    """Check every label (by ranges of ``step`` rows) and return the largest + 1. The generic
    loader's readers refuse what GraphData refuses (class ids of ``MAX_CLASSES`` or more too),
    naming the file's rows: ``.npy`` rows here, range by range; tables when they are read."""
    top = UNLABELLED
    for start in range(0, labels.shape[0], step):
        y = _label_rows(path, labels, start, min(start + step, labels.shape[0]))
        top = max(top, int(y.max()) if y.size else top)
    return top + 1


def _labelled(nodes: _Nodes, path: Path | None, n: int, step: int) -> np.ndarray | None:
    """Which nodes carry a label (for the split's check), built range by range."""
    if nodes.labels is None:
        return None
    return np.concatenate([_label_rows(path, nodes.labels, s, min(s + step, n)) != UNLABELLED
                           for s in range(0, n, step)])


# -- edges ----------------------------------------------------------------------------------------
def _spill_edges(ins: _Inputs, root: Path, known_n: int | None) -> tuple[EdgeSpill, Callable[[np.ndarray], str]]:
    """Read the edge list in batches into per-range fragments under ``root`` (restarted on the
    exact path when the fast CSV read cannot name lines); returns the spill and ``where(rows)``."""
    flag = ins.private_column or "private"
    for exact in (False, True):
        shutil.rmtree(root, ignore_errors=True)
        mkdir_private(root)
        spill = EdgeSpill(root, ins.range_size, known_n)
        batches = edge_batches(ins.edges, flag, exact=exact)
        for batch in batches:
            if batch is None:  # the fast read gave up: read again on the exact path
                break
            spill.add(batch)
        else:
            return spill, _where(ins.edges)
    raise AssertionError("the exact path never gives up")  # pragma: no cover


def _where(path: Path) -> Callable[[np.ndarray], str]:
    """``where(rows)``: source rows (CSV lines or Parquet rows) worded as the generic loader does."""
    if file_suffix(path) == ".csv":
        return lambda rows: Table(path, None, np.asarray(rows, np.int64)).where(np.arange(np.size(rows)))
    return Table(path, None, None).where


def _node_count(ins: _Inputs, nodes: _Nodes, spill: EdgeSpill, where: Callable[[np.ndarray], str]) -> int:
    """The node count as the generic loader finds it (``num_nodes``, the features', the labels', or
    the largest id + 1, refused when the ids do not number the nodes)."""
    if ins.num_nodes is not None:
        return int(ins.num_nodes)
    if nodes.rows() is not None:
        return nodes.rows()
    n = max(spill.max_id[0] + 1, 0) if spill.max_id is not None else 0
    if nodes.keyed is not None and nodes.keyed[1].size:
        n = max(n, int(nodes.keyed[1].max()) + 1)
    if spill.max_id is not None and n > INFERRED_COUNT_CHECKED_ABOVE:
        used = spill.distinct_ids(n) if n <= MAX_NODES else 0
        check_ids_number_nodes(n, used, ("src", "dst")[spill.max_id[1]], where(np.array([spill.max_id[2]])))
    return n


def _check_empty(ins: _Inputs, n: int) -> None:
    if n == 0:
        raise GraphValidationError(
            f"{ins.edges}: empty graph: no nodes (no edge rows"
            + (", and the features/labels have no rows)" if ins.features or ins.labels else ")"))


# -- ranges ---------------------------------------------------------------------------------------
def _write_parquet(path: Path, table: pa.Table) -> None:
    """One range file, private to the owner (0600 from creation on)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as f:
        pq.write_table(table, f)


def _node_table(ins: _Inputs, nodes: _Nodes, part: np.ndarray | None, start: int, stop: int) -> pa.Table:
    """Range ``[start, stop)``'s node columns, each checked as the generic loader checks it."""
    cols: dict[str, pa.Array] = {"id": pa.array(np.arange(start, stop, dtype=np.int64))}
    if nodes.features is not None:
        if isinstance(nodes.features, NpyRows):
            x = np.ascontiguousarray(nodes.features.rows(start, stop), dtype=np.float32)
            check_finite_features(ins.features, x, first_row=start)
        else:
            x = nodes.features[start:stop]
        cols["x"] = pa.FixedSizeListArray.from_arrays(pa.array(x.reshape(-1)), x.shape[1])
    if nodes.labels is not None:
        cols["y"] = pa.array(_label_rows(ins.labels, nodes.labels, start, stop))
    if part is not None:
        for k, name in enumerate(("train", "val", "test")):
            cols[name] = pa.array(part[start:stop] == k)
    schema = node_schema(nodes.num_features, nodes.labels is not None, part is not None)
    return pa.Table.from_arrays(list(cols.values()), schema=schema)


def _edge_table(spill: EdgeSpill, i: int, n: int, where: Callable[[np.ndarray], str], plan: EdgePlan) -> pa.Table:
    """Range ``i``'s edges: duplicates (either direction) refused with their source rows, then
    each as ``src = min < dst = max``, sorted, then the dataset options' ``plan`` applied (cut
    edges dropped, rho's marking)."""
    rec = spill.read(i)
    e = np.stack([rec["u"], rec["v"]])
    check_edge_list(e, n, prefix="", where=lambda idx: where(rec["row"][idx]))
    lo, hi = np.minimum(e[0], e[1]), np.maximum(e[0], e[1])
    order = np.lexsort((hi, lo))
    lo, hi, private = plan.apply(i, lo[order], hi[order], rec["p"][order])
    return pa.Table.from_arrays([pa.array(lo), pa.array(hi), pa.array(private)], schema=EDGE_SCHEMA)


def _split_parts(ins: _Inputs, nodes: _Nodes, n: int) -> np.ndarray | None:
    """Each node's split part (:func:`~privgraph.ingest.datasets.split.node_parts`: 0 train, 1 val,
    2 test, 3 none) from the split file or the seeded random fractions, if either is given."""
    if ins.split is None and ins.options.fractions is None:
        return None
    labelled = _labelled(nodes, ins.labels, n, ins.range_size)
    if ins.split is None:
        return ins.options.random_split(n, labelled)
    return node_parts(n, read_node_split(ins.split, n, labelled))


def _metadata(ins: _Inputs, nodes: _Nodes, n: int, has_flag: bool, has_split: bool) -> PartitionedGraph:
    """The graph's ``graph.json``: public layout and shapes, the source files' names only."""
    return PartitionedGraph(
        path=str(ins.destination), num_nodes=n, num_features=nodes.num_features, feature_dtype="float32",
        has_labels=ins.labels is not None, num_classes=nodes.num_classes, has_split=has_split,
        range_size=ins.range_size, num_ranges=math.ceil(n / ins.range_size),
        private_column=(ins.private_column or "private") if has_flag else None,
        source={**{k: None if p is None else p.name for k, p in (
            ("edges", ins.edges), ("features", ins.features), ("labels", ins.labels), ("split", ins.split))},
            **ins.options.source_notes()},
    )


def _write_ranges(ins: _Inputs, tmp: Path, remote: RemoteDestination | None, say: Callable[[str], None]) -> PartitionedGraph:
    """Read, check and write every range into ``tmp`` (uploaded to ``remote`` as it is written);
    returns the graph's metadata, which is written after this."""
    nodes = _open_nodes(ins)
    known = ins.num_nodes if ins.num_nodes is not None else nodes.rows()
    if known:  # the rows of the features or labels: refused before the edges are read
        _check_node_count(known, ins.range_size, "--num-nodes" if ins.num_nodes is not None else
                          f"the rows of {ins.features if nodes.features is not None else ins.labels}")
    spill, where = _spill_edges(ins, tmp / ".spill", known)
    say("edges read and routed to their ranges")
    n = _node_count(ins, nodes, spill, where)
    if not known:
        _check_node_count(n, ins.range_size, None)
    if nodes.keyed is not None:
        nodes.labels = place_labels(nodes.keyed[0], nodes.keyed[2], n)
        nodes.num_classes = _check_labels(ins.labels, nodes.labels, ins.range_size)
    _check_empty(ins, n)
    spill.check_invalid(n, where)
    part = _split_parts(ins, nodes, n)
    has_flag = (ins.private_column or "private") in header_columns(ins.edges)
    graph = _metadata(ins, nodes, n, has_flag, part is not None)
    plan = plan_edges(ins.options, part, graph.num_ranges, spill.range_ends)
    for sub in ("nodes", "edges"):
        mkdir_private(tmp / sub)
    for i in range(graph.num_ranges):
        start, stop = graph.node_range(i)
        _write_parquet(tmp / range_file("nodes", i), _node_table(ins, nodes, part, start, stop))
        _write_parquet(tmp / range_file("edges", i), _edge_table(spill, i, n, where, plan))
        spill.fragment(i).unlink(missing_ok=True)
        if remote is not None:
            for kind in ("nodes", "edges"):
                remote.put(tmp / range_file(kind, i), range_file(kind, i))
    say(f"{graph.num_ranges} ranges of up to {graph.range_size} nodes written")
    shutil.rmtree(tmp / ".spill")
    return graph


def write_partitioned_graph(
    edges: Path | str,
    *,
    features: Path | str | None = None,
    labels: Path | str | None = None,
    split: Path | str | None = None,
    num_nodes: int | None = None,
    private_column: str | None = None,
    destination: Path | str,
    range_size: int = DEFAULT_RANGE_SIZE,
    options: IngestOptions | None = None,
    progress: Callable[[str], None] | None = None,
    private_records: Path | str | None = None,
) -> PartitionedGraph:
    """Write the graph of the generic loader's files (and a split file) as a partitioned graph at
    ``destination``, in memory bounded by one batch and one range (docs/partitioned-input.md).

    Args:
        edges, features, labels, num_nodes, private_column: as
            :func:`~privgraph.ingest.datasets.generic.load_generic` takes them.
        split: a ``.json`` / ``.csv`` split file, as :func:`~privgraph.ingest.datasets.split.read_node_split` reads it.
        destination: a local directory that must not exist, or a URI (``s3://bucket/prefix``;
            credentials and endpoint as pyarrow reads them) under which no object exists yet.
        range_size: nodes per range (the last may be shorter).
        options: the dataset options applied while writing (a seeded random node split, cut edges
            dropped, rho's private edges: :mod:`~privgraph.ingest.partitioned_options`), as the
            in-memory loader applies them.
        progress: called with one line per finished stage (public metadata only).
        private_records: the owner's records, where the ingest is claimed while it runs (:mod:`~privgraph.ingest.ingest_claims`).

    Returns:
        PartitionedGraph: the graph written (loaded, it equals ``load_generic`` on the files, with the split).

    Raises:
        ConfigError: ``num_nodes`` or ``range_size`` outside 1 .. MAX_NODES, more than
            :data:`MAX_RANGES` ranges, the destination (or ``.<name>.tmp`` beside it) exists, or a
            URI destination cannot be opened, written or cleaned up (exit code 2).
        DatasetNotFoundError, GraphValidationError: as ``load_generic`` and ``read_node_split``,
            naming the file and rows.
        DiskFullError: a disk or quota filled (exit code 4), naming the destination and the disk.
        DestinationUnavailableError: a URI destination's endpoint does not answer (exit code 4).
        Nothing is left at the destination.
    """
    say = progress or (lambda line: None)
    ins = _check_arguments(edges, features, labels, split, num_nodes, private_column, destination, range_size, options)
    try:
        remote, tmp, claim = open_destination(ins.destination, private_records)
    except OSError as exc:  # no room for the temporary directory
        full = _full_disk(exc, ins)
        if full is None:
            raise
        raise full from None
    try:
        graph = _write_ranges(ins, tmp, remote, say)
        _put_in_place(ins, graph, tmp, remote)
    except BaseException as exc:
        if remote is not None:
            remote.abort()
        shutil.rmtree(tmp, ignore_errors=True)
        full = _full_disk(exc, ins) if isinstance(exc, OSError) else None
        if full is not None:
            raise full from None
        raise
    finally:
        release_claim(claim)
    return graph


def _put_in_place(ins: _Inputs, graph: PartitionedGraph, tmp: Path, remote: RemoteDestination | None) -> None:
    """``graph.json`` last: uploaded (a URI; the local ranges in ``tmp`` removed), or written into
    ``tmp``, which is then renamed to the destination (refused if something appeared there)."""
    meta = (json.dumps(graph.metadata(), indent=2) + "\n").encode()
    if remote is not None:
        remote.put_bytes(GRAPH_FILE, meta)  # the graph exists from here on: nothing below may abort it
        shutil.rmtree(tmp, ignore_errors=True)
        return
    write_private_file(tmp / GRAPH_FILE, meta)
    if os.path.lexists(ins.destination):
        refuse_existing(ins.destination)
    os.rename(tmp, ins.destination)


def _full_disk(exc: OSError, ins: _Inputs) -> DiskFullError | None:
    """The one-line refusal (exit code 4) of a local disk or quota that filled under the ingest
    (ENOSPC, EDQUOT: the spill, a range, ``graph.json``), naming the destination and the disk
    (the destination's, where ``.<name>.tmp`` lies beside it; for a URI, the local temporary
    directory); None for another error. Called once everything written is removed."""
    if exc.errno not in _FULL_ERRNOS:
        return None
    why = exc.strerror or os.strerror(exc.errno)
    if isinstance(ins.destination, Path):
        tmp = ins.destination.with_name(f".{ins.destination.name}.tmp")
        return DiskFullError(f"{ins.destination}: {why} on the destination's disk (the ingest writes into {tmp}, "
                             "beside it); nothing was left: free space there and run again")
    return DiskFullError(f"{redact_uri(ins.destination).rstrip('/')}: {why} in the local temporary directory "
                         f"{tempfile.gettempdir()} (the spill and each range before its upload); nothing was left, "
                         "the objects uploaded were deleted: free space there, or set TMPDIR to a larger disk, "
                         "and run again")
