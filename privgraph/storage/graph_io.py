"""A (privatized) graph as artifact objects, and back.

Objects written by :func:`graph_to_objects`:

* ``features.npy``: ``x``, float32 ``[n, d]`` (only when the graph has features)
* ``labels.npy``: ``y``, int64 ``[n]`` or ``[n, C]`` (only when the graph has labels)
* ``edges.parquet``: one row per undirected edge (``src < dst``), int64 columns ``src``, ``dst``
  and a string column ``kind``:

  - ``"public"``: a public edge, released as it is;
  - ``"private"``: an edge of the PRIVATIZED replacement of the private edges (the output of
    an edge mechanism), never a raw private edge: the raw graph is never stored.

  Public rows come first, then private rows, each sorted by ``(src, dst)``, so the order of the
  rows cannot reveal the order in which a mechanism produced its edges (e.g. true edges first).
* ``splits.npz``: the boolean ``train_mask`` / ``val_mask`` / ``test_mask`` present.
* ``aggregates.npy``: float32 ``[K + 1, n, d]``, the hop-wise noisy aggregates of an
  aggregation-perturbation release (GAP), only when the graph has them.
* ``graph.json``: ``{"format": "privgraph.graph/1", "num_nodes": n, "objects": [...]}``, so that
  the objects describe themselves (an artifact without features cannot tell ``n`` otherwise,
  and a staged version without a manifest can still be read).

The bytes depend only on the graph (no timestamps), so the same graph always gives the same
content hash. ``GraphData.meta`` is not written: public metadata belongs in the manifest.

A PARTITIONED version (written by the partitions' tasks, :func:`privgraph.partitioned.write_release_parts`)
holds per partition ``i`` the objects of :func:`part_to_objects` under the prefix ``part-<i>.``:
``nodes.npy`` (its node ids, sorted: a function of the public edges), ``features.npy``,
``labels.npy``, ``splits.npz`` (its rows) and ``edges.parquet`` (the edges whose smaller end it
holds, public rows then private rows, each sorted), and a ``graph.json`` of format
``privgraph.graph/2`` with ``parts``. :func:`objects_to_graph` assembles it (:func:`assemble_parts`)
into the graph the whole version of the same release holds.
"""

from __future__ import annotations

import dataclasses
import io
import json
import zipfile
from collections.abc import Mapping

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from privgraph.arrow_io import read_parquet_bytes
from privgraph.errors import ArtifactError
from privgraph.graph import SPLIT_MASKS, GraphData

__all__ = [
    "graph_to_objects",
    "objects_to_graph",
    "read_graph_info",
    "FEATURES",
    "LABELS",
    "EDGES",
    "SPLITS",
    "AGGREGATES",
    "GRAPH_INFO",
    "GraphPart",
    "assemble_parts",
    "part_from_objects",
    "part_prefix",
    "part_to_objects",
    "partitioned_graph_info",
]

FEATURES = "features.npy"
LABELS = "labels.npy"
EDGES = "edges.parquet"
SPLITS = "splits.npz"
AGGREGATES = "aggregates.npy"
GRAPH_INFO = "graph.json"
NODES = "nodes.npy"
GRAPH_FORMAT = "privgraph.graph/1"
#: a partitioned version's graph.json (with ``parts``): a reader that knows only /1 refuses it
#: with its format named, instead of missing objects
PARTITIONED_GRAPH_FORMAT = "privgraph.graph/2"

_KINDS = ("public", "private")
_ZIP_EPOCH = (1980, 1, 1, 0, 0, 0)  # fixed zip entry time: deterministic bytes


def _npy_bytes(a: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.save(buf, np.ascontiguousarray(a), allow_pickle=False)
    return buf.getvalue()


def _npz_bytes(arrays: Mapping[str, np.ndarray]) -> bytes:
    """Like ``np.savez_compressed`` but with fixed entry times (``np.savez`` stamps the clock)."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for name in sorted(arrays):
            info = zipfile.ZipInfo(f"{name}.npy", date_time=_ZIP_EPOCH)
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            zf.writestr(info, _npy_bytes(arrays[name]))
    return buf.getvalue()


def _sorted_edges(e: np.ndarray) -> np.ndarray:
    order = np.lexsort((e[1], e[0]))
    return e[:, order]


def _edges_bytes(edges_public: np.ndarray, edges_private: np.ndarray) -> bytes:
    pub = _sorted_edges(edges_public)
    pri = _sorted_edges(edges_private)
    src = np.concatenate([pub[0], pri[0]]).astype(np.int64)
    dst = np.concatenate([pub[1], pri[1]]).astype(np.int64)
    codes = np.repeat(np.array([0, 1], dtype=np.int8), [pub.shape[1], pri.shape[1]])
    kind = pa.DictionaryArray.from_arrays(pa.array(codes), pa.array(_KINDS, type=pa.string())).cast(pa.string())
    table = pa.table(
        {
            "src": pa.array(src, type=pa.int64()),
            "dst": pa.array(dst, type=pa.int64()),
            "kind": kind,  # a plain string column, built without one Python string per row
        }
    )
    buf = io.BytesIO()
    pq.write_table(table, buf, compression="zstd")
    return buf.getvalue()


def graph_to_objects(graph: GraphData) -> dict[str, bytes]:
    """The artifact objects of a (privatized) graph; see the module docstring.

    Args:
        graph (GraphData): the graph to store; its ``edges_private`` must already be the
            privatized edges.

    Returns:
        dict[str, bytes]: ``edges.parquet`` and ``graph.json`` always; ``features.npy``,
        ``labels.npy`` and ``splits.npz`` when the graph has them.
    """
    if not isinstance(graph, GraphData):
        raise TypeError(f"graph must be a GraphData, got {type(graph).__name__}")
    objects: dict[str, bytes] = {}
    if graph.x is not None:
        objects[FEATURES] = _npy_bytes(graph.x)
    if graph.y is not None:
        objects[LABELS] = _npy_bytes(graph.y)
    objects[EDGES] = _edges_bytes(graph.edges_public, graph.edges_private)
    masks = {m: getattr(graph, m) for m in SPLIT_MASKS if getattr(graph, m) is not None}
    if masks:
        objects[SPLITS] = _npz_bytes(masks)
    if graph.aggregates is not None:
        objects[AGGREGATES] = _npy_bytes(graph.aggregates)
    info = {"format": GRAPH_FORMAT, "num_nodes": graph.num_nodes, "objects": sorted(objects)}
    objects[GRAPH_INFO] = (json.dumps(info, sort_keys=True) + "\n").encode()
    return objects


def read_graph_info(blob: bytes) -> dict:
    """Parse and check ``graph.json``: ``{"format", "num_nodes", "objects"}`` and, for a
    partitioned version (format ``privgraph.graph/2``), ``parts``."""
    try:
        info = json.loads(blob)
    except (UnicodeDecodeError, ValueError) as err:
        raise ArtifactError(f"{GRAPH_INFO}: not valid JSON: {err}") from None
    ok = (
        isinstance(info, dict)
        and info.get("format") in (GRAPH_FORMAT, PARTITIONED_GRAPH_FORMAT)
        and isinstance(info.get("num_nodes"), int)
        and not isinstance(info.get("num_nodes"), bool)
        and isinstance(info.get("objects"), list)
        and all(isinstance(n, str) for n in info["objects"])
    and (info.get("parts") is None if info.get("format") == GRAPH_FORMAT
         else type(info.get("parts")) is int and info["parts"] >= 1)
    )
    if not ok:
        raise ArtifactError(f"{GRAPH_INFO}: not a {GRAPH_FORMAT!r} or {PARTITIONED_GRAPH_FORMAT!r} record: {info!r}")
    return info


def _load_npy(blob: bytes, name: str) -> np.ndarray:
    try:
        return np.load(io.BytesIO(blob), allow_pickle=False)
    except (ValueError, OSError, EOFError) as err:
        raise ArtifactError(f"{name}: not a readable .npy array: {err}") from None


def _read_edges(blob: bytes, name: str) -> tuple[np.ndarray, np.ndarray]:
    """``(edges [2, m], is_public [m])`` of an edges table."""
    try:
        table = read_parquet_bytes(blob, columns=["src", "dst", "kind"])
    except (pa.ArrowException, OSError) as err:
        raise ArtifactError(f"{name}: not a readable parquet table with src, dst, kind: {err}") from None
    src = table.column("src").to_numpy().astype(np.int64, copy=False)
    dst = table.column("dst").to_numpy().astype(np.int64, copy=False)
    kind = table.column("kind")
    unknown = sorted(set(pc.unique(kind).to_pylist()) - set(_KINDS))
    if unknown:
        raise ArtifactError(f"{name}: unknown edge kinds {unknown} (expected {list(_KINDS)})")
    return np.stack([src, dst]), pc.equal(kind, "public").to_numpy(zero_copy_only=False).astype(bool, copy=False)


def _row_fields(objects: Mapping[str, bytes], prefix: str = "") -> dict[str, np.ndarray]:
    """The per-node arrays among ``objects`` (names after ``prefix``): x, y, aggregates, masks."""
    out: dict[str, np.ndarray] = {}
    for field, name in (("x", FEATURES), ("y", LABELS), ("aggregates", AGGREGATES)):
        if prefix + name in objects:
            out[field] = _load_npy(objects[prefix + name], prefix + name)
    if prefix + SPLITS in objects:
        try:
            with np.load(io.BytesIO(objects[prefix + SPLITS]), allow_pickle=False) as npz:
                out.update({m: npz[m] for m in SPLIT_MASKS if m in npz.files})
        except (ValueError, OSError, zipfile.BadZipFile) as err:
            raise ArtifactError(f"{prefix + SPLITS}: not a readable .npz archive: {err}") from None
    return out


def objects_to_graph(objects: Mapping[str, bytes], num_nodes: int | None = None) -> GraphData:
    """Rebuild a :class:`GraphData` from the objects of :func:`graph_to_objects` (or of a
    partitioned version, :func:`part_to_objects`: its parts assembled by :func:`assemble_parts`).

    Args:
        objects: objects by name (extra names are ignored); ``edges.parquet`` is required.
        num_nodes (int, optional): the number of nodes; read from ``graph.json`` when not given
            (default: ``None``).

    Raises:
        ArtifactError: ``edges.parquet`` is missing or unreadable, an edge kind is unknown, or
            the number of nodes is unknown or disagrees with ``graph.json``; a part is missing
            or its nodes, rows or edges do not fit the others.
        GraphValidationError: the arrays do not form a valid graph.
    """
    info = read_graph_info(objects[GRAPH_INFO]) if GRAPH_INFO in objects else None
    if info is not None:
        if num_nodes is not None and num_nodes != info["num_nodes"]:
            raise ArtifactError(f"num_nodes={num_nodes} but {GRAPH_INFO} says {info['num_nodes']}")
        num_nodes = info["num_nodes"]
    if num_nodes is None:
        raise ArtifactError(f"the number of nodes is unknown: pass num_nodes or include {GRAPH_INFO}")
    if info is not None and info.get("parts"):
        parts = [part_from_objects(i, objects) for i in range(info["parts"])]
        return assemble_parts(parts, num_nodes, _row_fields(objects))
    if EDGES not in objects:
        raise ArtifactError(f"artifact objects lack {EDGES!r}; got {sorted(objects)}")
    edges, is_pub = _read_edges(objects[EDGES], EDGES)
    return GraphData(num_nodes=num_nodes, edges_public=edges[:, is_pub], edges_private=edges[:, ~is_pub],
                     **_row_fields(objects))


# -- partitioned versions ------------------------------------------------------------------------
def part_prefix(i: int) -> str:
    """The name prefix of partition ``i``'s objects: ``part-00000.``."""
    return f"part-{i:05d}."


@dataclasses.dataclass(frozen=True)
class GraphPart:
    """One partition of a partitioned version: its node ids (sorted), their rows (``fields``:
    ``x``, ``y``, the split masks present) and the edges whose smaller end is one of them."""

    index: int
    nodes: np.ndarray
    fields: dict[str, np.ndarray]
    edges_public: np.ndarray
    edges_private: np.ndarray


def part_to_objects(part: GraphPart) -> dict[str, bytes]:
    """The objects of one partition (what its worker writes): ``part-<i>.nodes.npy``,
    ``.features.npy``, ``.labels.npy``, ``.splits.npz`` (those present) and ``.edges.parquet``
    (public rows, then private rows, each sorted: the order of a mechanism's output is not kept)."""
    pre = part_prefix(part.index)
    objects = {pre + NODES: _npy_bytes(np.asarray(part.nodes, dtype=np.int64))}
    for field, name in (("x", FEATURES), ("y", LABELS)):
        if field in part.fields:
            objects[pre + name] = _npy_bytes(part.fields[field])
    masks = {m: part.fields[m] for m in SPLIT_MASKS if m in part.fields}
    if masks:
        objects[pre + SPLITS] = _npz_bytes(masks)
    objects[pre + EDGES] = _edges_bytes(part.edges_public, part.edges_private)
    return objects


def partitioned_graph_info(num_nodes: int, num_parts: int, names: list[str]) -> bytes:
    """``graph.json`` of a partitioned version: format ``privgraph.graph/2``, ``parts`` (their
    number) beside the usual keys."""
    info = {"format": PARTITIONED_GRAPH_FORMAT, "num_nodes": int(num_nodes), "objects": sorted([*names, GRAPH_INFO]),
            "parts": int(num_parts)}
    return (json.dumps(info, sort_keys=True) + "\n").encode()


def part_from_objects(i: int, objects: Mapping[str, bytes]) -> GraphPart:
    """Partition ``i`` read back from its objects (see :func:`part_to_objects`)."""
    pre = part_prefix(i)
    for name in (NODES, EDGES):
        if pre + name not in objects:
            raise ArtifactError(f"the partitioned version lacks {pre + name!r}")
    nodes = _load_npy(objects[pre + NODES], pre + NODES)
    fields = _row_fields(objects, pre)
    for field, rows in fields.items():
        if rows.shape[:1] != nodes.shape:
            raise ArtifactError(f"{pre}{field}: {rows.shape[0]} rows for {nodes.size} nodes")
    edges, is_pub = _read_edges(objects[pre + EDGES], pre + EDGES)
    return GraphPart(index=i, nodes=nodes, fields=fields, edges_public=edges[:, is_pub], edges_private=edges[:, ~is_pub])


def assemble_parts(parts: list[GraphPart], num_nodes: int, extra: Mapping[str, np.ndarray] | None = None) -> GraphData:
    """The whole graph of a partitioned version: rows placed by node id, edges of each kind in
    ``(src, dst)`` order (so it equals the graph of the same release stored whole).

    Raises:
        ArtifactError: the parts' nodes do not cover ``0 .. n-1`` exactly once, the parts hold
            different fields, or a part holds an edge whose smaller end is not its own.
    """
    owner = np.full(num_nodes, -1, dtype=np.int64)
    for p in parts:
        if p.nodes.ndim != 1 or (p.nodes.size and (p.nodes.min() < 0 or p.nodes.max() >= num_nodes)) \
                or np.any(owner[p.nodes] >= 0) or np.unique(p.nodes).size != p.nodes.size:
            raise ArtifactError(f"{part_prefix(p.index)}nodes: not disjoint node ids in [0, {num_nodes})")
        owner[p.nodes] = p.index
    if np.any(owner < 0):
        raise ArtifactError(f"the parts cover {int(np.count_nonzero(owner >= 0))} of {num_nodes} nodes")
    names = {frozenset(p.fields) for p in parts}
    if len(names) > 1:
        raise ArtifactError(f"the parts hold different fields: {sorted(sorted(n) for n in names)}")
    fields: dict[str, np.ndarray] = dict(extra or {})
    for field in (names.pop() if names else ()):
        first = parts[0].fields[field]
        full = np.empty((num_nodes, *first.shape[1:]), dtype=first.dtype)
        for p in parts:
            full[p.nodes] = p.fields[field]
        fields[field] = full
    kinds = {}
    for kind in ("edges_public", "edges_private"):
        for p in parts:
            e = getattr(p, kind)
            if e.size and np.any(owner[np.minimum(e[0], e[1]).clip(0, num_nodes - 1)] != p.index):
                raise ArtifactError(f"{part_prefix(p.index)}{EDGES}: an edge whose smaller end is another part's")
        e = np.concatenate([getattr(p, kind) for p in parts], axis=1) if parts else np.zeros((2, 0), np.int64)
        kinds[kind] = _sorted_edges(e.astype(np.int64, copy=False))
    return GraphData(num_nodes=num_nodes, **kinds, **fields)


