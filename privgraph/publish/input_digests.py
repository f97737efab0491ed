"""The manifest's public input fingerprint and the owner's keyed identity of a PARTITIONED graph,
computed by streaming its ranges, one range at a time:

* :func:`public_fingerprint_of` equals ``disclosure.fingerprint(load_partitioned_graph(path))``
  (:meth:`~privgraph.config.disclosure.Disclosure.fingerprint`);
* :func:`keyed_identity_of` equals ``load_partitioned_graph(path).keyed_digest(key)``
  (:meth:`~privgraph.graph.GraphData.keyed_digest`; ``"hmac-sha256:" +`` it is the private
  record's ``input_identity``).

The fingerprint (public inputs only) runs as ONE task through
:func:`~privgraph.parts.executor.map_partitions` (serially without an executor, on a Dask
worker with one). The keyed identity is computed in the CALLING process, always: the owner's
HMAC key never leaves it (no task, no executor, no wire receives it or any HMAC under it; a
per-run derived key would not do: whoever saw it and the digest on a cleartext link could test
candidate graphs). :func:`input_digests`, the flow's call, submits the fingerprint's task first and
streams the identity here meanwhile, side by side. Both hash the same bytes in the same order as
the in-memory definitions: an array's header needs its shape, so counts come from a first pass
over the ranges; a ``[2, m]`` edge array in C order is every first end, then every second end
(two passes). Memory: one range at a time, plus the arrays that the definition makes O(n)
anyway: a boolean ``[n]`` of V_pri (``private_nodes``) and, under a ``scores.public_nodes`` rule
with a features mechanism, the rule's selection, which is computed by the same code as
:class:`~privgraph.config.disclosure.Disclosure` on the node table WITHOUT features or edges
(labels and split: 11 bytes a node) and kept as the selected ids. The rows of ``x`` are read only
in ranges holding a public feature row.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Protocol

import numpy as np

from privgraph.config.disclosure import FINGERPRINT_FORMAT, Disclosure, public_input_header
from privgraph.errors import GraphValidationError
from privgraph.graph import SPLIT_MASKS, GraphData
from privgraph.ingest.partitioned_graph import PartitionedGraph, read_edge_range, read_node_range
from privgraph.parts.executor import Executor, map_partitions

__all__ = ["input_digests", "keyed_identity_of", "public_fingerprint_of"]

#: the node columns of the split, in the order of :data:`~privgraph.graph.SPLIT_MASKS`
_SPLIT_COLUMNS = ("train", "val", "test")


class _Hash(Protocol):
    def update(self, data: bytes, /) -> None: ...


# -- reading, one range at a time --------------------------------------------------------------------
def _node_range(graph: PartitionedGraph, i: int, columns: Iterable[str]) -> GraphData:
    """Range ``i``'s nodes as a GraphData of its ``k`` nodes (ids ``0 .. k-1``) holding the
    ``columns`` asked for (``x``, ``y``, the split), checked by :func:`read_node_range` (which
    names the file and the row)."""
    cols = [c for c in columns if c in graph.node_columns()]
    start, stop = graph.node_range(i)
    data = read_node_range(graph, i, cols) if cols else {}
    masks = {m: data[c] for c, m in zip(_SPLIT_COLUMNS, SPLIT_MASKS, strict=True) if c in data}
    return GraphData(num_nodes=stop - start, x=data.get("x"), y=data.get("y"), **masks)


def _edge_counts(graph: PartitionedGraph, private_nodes: np.ndarray | None = None) -> tuple[int, int]:
    """The numbers of public and of private edges (one pass); marks V_pri in ``private_nodes``."""
    public = private = 0
    for i in range(graph.num_ranges):
        e, p = read_edge_range(graph, i)
        private += int(p.sum())
        public += int(p.size - p.sum())
        if private_nodes is not None:
            private_nodes[e[:, p].ravel()] = True
    return public, private


def _edge_ends(graph: PartitionedGraph, private: bool, row: int) -> Iterator[np.ndarray]:
    """Row ``row`` (0: the smaller ends, 1: the larger) of the public or private edges, by range:
    the order of ``GraphData.from_edges`` on the ranges' edges concatenated."""
    for i in range(graph.num_ranges):
        e, p = read_edge_range(graph, i)
        yield e[row, p if private else ~p]


def _stream(h: _Hash, chunks: Iterable[np.ndarray], dtype: Any, nbytes: int, what: str) -> None:
    """Hash the chunks' bytes (as ``dtype``, C order), which must add up to ``nbytes``."""
    got = 0
    for c in chunks:
        b = np.ascontiguousarray(c, dtype=dtype)
        h.update(memoryview(b.reshape(-1)).cast("B"))  # its bytes, not copied
        got += b.nbytes
    if got != nbytes:
        raise GraphValidationError(f"{what}: {got} bytes read where a first pass counted {nbytes}; the graph "
                                   "changed while it was read")


def _nbytes(dtype: Any, shape: tuple[int, ...]) -> int:
    return int(np.dtype(dtype).itemsize * np.prod(shape, dtype=np.int64))


# -- the public input fingerprint --------------------------------------------------------------------
def _public_array(h: _Hash, name: str, dtype: Any, shape: tuple[int, ...], chunks: Iterable[np.ndarray]) -> None:
    """One entry of :meth:`Disclosure.public_inputs`: its header, then its bytes streamed."""
    h.update(public_input_header(name, dtype, shape))
    _stream(h, chunks, dtype, _nbytes(dtype, shape), name)


def _rule_selection(graph: PartitionedGraph, disclosure: Disclosure) -> np.ndarray | None:
    """The public feature rows (sorted ids) when a ``scores.public_nodes`` rule chooses them (a
    whole-graph rule: a draw, a count check), by :meth:`Disclosure.public_feature_rows` on the node
    table without features or edges; ``None`` when the rows follow row by row."""
    if not (graph.num_features and disclosure.feature_mechanism and disclosure.public_nodes is not None):
        return None
    parts = [_node_range(graph, i, ("y", *_SPLIT_COLUMNS)) for i in range(graph.num_ranges)]
    masks = {m: np.concatenate([getattr(p, m) for p in parts]) for m in SPLIT_MASKS if graph.has_split}
    y = np.concatenate([p.y for p in parts]) if graph.has_labels else None
    del parts
    table = GraphData(num_nodes=graph.num_nodes, y=y, **masks)
    return np.flatnonzero(disclosure.public_feature_rows(table)).astype(np.int64)


def _row_sets(graph: PartitionedGraph, disclosure: Disclosure, selection: np.ndarray | None,
              i: int) -> dict[str, np.ndarray]:
    """Range ``i``'s public row sets as local booleans (``features``, ``unlabelled``, ``labels``)
    and its labels ``y``, by the declaration's own per-row code on the range."""
    start, stop = graph.node_range(i)
    rg = _node_range(graph, i, ("y", *_SPLIT_COLUMNS))
    out: dict[str, np.ndarray] = {}
    if graph.num_features:
        if selection is None:
            out["features"] = disclosure.public_feature_rows(rg)
        else:
            local = np.zeros(stop - start, dtype=bool)
            local[selection[np.searchsorted(selection, start):np.searchsorted(selection, stop)] - start] = True
            out["features"] = local
    if rg.y is not None:
        out["unlabelled"] = ~rg.labelled()
        out["labels"] = ~disclosure.private_label_rows(rg)
        out["y"] = rg.y
    return out


def _row_chunks(graph: PartitionedGraph, sets: Callable[[int], dict[str, np.ndarray]], name: str,
                values: Callable[[int, dict[str, np.ndarray]], np.ndarray] | None = None) -> Iterator[np.ndarray]:
    """By range: the ids of row set ``name`` (global), or ``values(i, sets)`` at those rows."""
    for i in range(graph.num_ranges):
        s = sets(i)
        rows = np.flatnonzero(s[name])
        if values is None:
            yield rows.astype(np.int64) + graph.node_range(i)[0]
        elif rows.size:
            yield values(i, s)[rows]


def _hash_public_nodes(h: _Hash, graph: PartitionedGraph, disclosure: Disclosure) -> None:
    """The node part of :meth:`Disclosure.public_inputs`: split, public feature rows and features,
    unlabelled nodes, public label rows and labels."""
    n = graph.num_nodes
    if graph.has_split:
        for col, name in zip(_SPLIT_COLUMNS, SPLIT_MASKS, strict=True):
            chunks = (read_node_range(graph, i, [col])[col] for i in range(graph.num_ranges))
            _public_array(h, name, np.bool_, (n,), chunks)
    if not (graph.num_features or graph.has_labels):
        return
    selection = _rule_selection(graph, disclosure)

    def sets(i: int) -> dict[str, np.ndarray]:
        return _row_sets(graph, disclosure, selection, i)

    counts: dict[str, int] = {}
    for i in range(graph.num_ranges):
        for k, v in sets(i).items():
            if k != "y":
                counts[k] = counts.get(k, 0) + int(v.sum())
    if graph.num_features:
        k, d = counts["features"], graph.num_features
        _public_array(h, "public_feature_rows", np.int64, (k,), _row_chunks(graph, sets, "features"))
        x = _row_chunks(graph, sets, "features", lambda i, s: _node_range(graph, i, ("x",)).x)
        _public_array(h, "public_features", np.float32, (k, d), x)
    if graph.has_labels:
        if counts["unlabelled"]:
            _public_array(h, "unlabelled_nodes", np.int64, (counts["unlabelled"],),
                          _row_chunks(graph, sets, "unlabelled"))
        k = counts["labels"]
        _public_array(h, "public_label_rows", np.int64, (k,), _row_chunks(graph, sets, "labels"))
        _public_array(h, "public_labels", np.int64, (k,), _row_chunks(graph, sets, "labels", lambda i, s: s["y"]))


def _fingerprint_task(payload: tuple[PartitionedGraph, Disclosure], seed: Any) -> str:
    """The task: :meth:`Disclosure.fingerprint` of the whole graph, streamed (``seed`` unused)."""
    graph, disclosure = payload
    n = graph.num_nodes
    h = hashlib.sha256(FINGERPRINT_FORMAT.encode())
    _public_array(h, "num_nodes", np.int64, (1,), [np.array([n])])
    _public_array(h, "num_features", np.int64, (1,), [np.array([graph.num_features])])
    vpri = np.zeros(n, dtype=bool) if disclosure.private_edges_by is not None else None
    m_public, _ = _edge_counts(graph, vpri)
    h.update(public_input_header("edges_public", np.int64, (2, m_public)))
    for row in (0, 1):
        _stream(h, _edge_ends(graph, False, row), np.int64, 8 * m_public, "edges_public")
    if vpri is not None:
        chunks = (np.flatnonzero(vpri[a:b]) + a for a, b in map(graph.node_range, range(graph.num_ranges)))
        _public_array(h, "private_nodes", np.int64, (int(vpri.sum()),), chunks)
        del vpri
    _hash_public_nodes(h, graph, disclosure)
    return h.hexdigest()


def public_fingerprint_of(graph: PartitionedGraph, disclosure: Disclosure, *, executor: Executor | None = None) -> str:
    """The manifest's ``public_input_fingerprint`` of a partitioned graph: SHA-256 over the public
    inputs that ``disclosure`` declares, computed on a worker by streaming the ranges.

    Equals ``disclosure.fingerprint(load_partitioned_graph(graph.path))`` and raises what it raises
    (a node range's validation error names the range). ``executor``: None runs the one task here.
    """
    _check_graph(graph)
    _check_disclosure(disclosure)
    return map_partitions(_fingerprint_task, [(graph, disclosure)], [np.random.SeedSequence(0)],
                          executor=executor)[0]


def _check_graph(graph: Any) -> None:
    if not isinstance(graph, PartitionedGraph):
        raise TypeError(f"graph must be a PartitionedGraph (open_partitioned_graph), got {type(graph).__name__}")


def _check_disclosure(disclosure: Any) -> None:
    if not isinstance(disclosure, Disclosure):
        raise TypeError(f"disclosure must be a Disclosure (disclosure_of), got {type(disclosure).__name__}")


def _check_key(key: Any) -> None:
    if not isinstance(key, (bytes, bytearray)) or len(key) < 16:
        raise ValueError("keyed_digest: key must be at least 16 bytes")


# -- the owner's keyed identity ------------------------------------------------------------------------
def _keyed_array(h: _Hash, name: str, dtype: Any, shape: tuple[int, ...], chunks: Iterable[np.ndarray]) -> None:
    """One array of :meth:`GraphData.keyed_digest`: its name, dtype and shape, then its bytes."""
    h.update(name.encode())
    h.update(str((np.dtype(dtype).str, tuple(int(s) for s in shape))).encode())
    _stream(h, chunks, dtype, _nbytes(dtype, shape), name)


def _keyed_identity(graph: PartitionedGraph, key: bytes) -> str:
    """:meth:`GraphData.keyed_digest` of the whole graph, streamed in this process."""
    n, ranges = graph.num_nodes, range(graph.num_ranges)
    h = hmac.new(key, digestmod=hashlib.sha256)
    h.update(f"n={n}".encode())
    if graph.num_features:
        _keyed_array(h, "x", np.float32, (n, graph.num_features), (_node_range(graph, i, ("x",)).x for i in ranges))
    else:
        h.update(b"x")
    if graph.has_labels:
        _keyed_array(h, "y", np.int64, (n,), (_node_range(graph, i, ("y",)).y for i in ranges))
    else:
        h.update(b"y")
    counts = dict(zip((False, True), _edge_counts(graph), strict=True))
    for private in (False, True):
        name = "edges_private" if private else "edges_public"
        h.update(name.encode())
        h.update(str(("<i8", (2, counts[private]))).encode())
        for row in (0, 1):
            _stream(h, _edge_ends(graph, private, row), np.int64, 8 * counts[private], name)
    for col, name in zip(_SPLIT_COLUMNS, SPLIT_MASKS, strict=True):
        if graph.has_split:
            _keyed_array(h, name, np.bool_, (n,), (read_node_range(graph, i, [col])[col] for i in ranges))
        else:
            h.update(name.encode())
    return h.hexdigest()


def keyed_identity_of(graph: PartitionedGraph, key: bytes) -> str:
    """HMAC-SHA256 under ``key`` over every array of a partitioned graph (private ones included),
    computed in THIS process by streaming the ranges (one at a time): equals
    ``load_partitioned_graph(graph.path).keyed_digest(key)``. Private-record material only
    (``"hmac-sha256:" +`` it is the record's ``input_identity``); ``key`` never leaves this process."""
    _check_graph(graph)
    _check_key(key)
    return _keyed_identity(graph, bytes(key))


# -- both, side by side ----------------------------------------------------------------------------------
def input_digests(graph: PartitionedGraph, disclosure: Disclosure, key: bytes, *,
                  executor: Executor | None = None) -> tuple[str, str]:
    """``(public_fingerprint_of(graph, disclosure, executor=executor), keyed_identity_of(graph, key))``
    side by side: the fingerprint's task is submitted first (from a thread of this process), the
    identity streamed here meanwhile, then the fingerprint gathered. The executor receives the
    graph's metadata and the declaration only: never ``key``, never an HMAC. Raises what the two
    functions raise (the fingerprint's error first), before any range is read for a bad argument."""
    _check_graph(graph)
    _check_disclosure(disclosure)
    _check_key(key)
    pool = ThreadPoolExecutor(1, thread_name_prefix="privgraph-fingerprint")
    try:
        fingerprint = pool.submit(public_fingerprint_of, graph, disclosure, executor=executor)
        try:
            identity = _keyed_identity(graph, bytes(key))
        except Exception:
            if (failed := fingerprint.exception()) is not None:
                raise failed from None
            raise
        return fingerprint.result(), identity
    finally:  # an interrupt does not wait for the task (closing the executor ends its wait)
        pool.shutdown(wait=False)
