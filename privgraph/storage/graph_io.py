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
"""

from __future__ import annotations

import io
import json
import zipfile
from collections.abc import Mapping

import numpy as np
import pyarrow as pa
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
]

FEATURES = "features.npy"
LABELS = "labels.npy"
EDGES = "edges.parquet"
SPLITS = "splits.npz"
AGGREGATES = "aggregates.npy"
GRAPH_INFO = "graph.json"
GRAPH_FORMAT = "privgraph.graph/1"

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


def _edges_bytes(graph: GraphData) -> bytes:
    pub = _sorted_edges(graph.edges_public)
    pri = _sorted_edges(graph.edges_private)
    src = np.concatenate([pub[0], pri[0]]).astype(np.int64)
    dst = np.concatenate([pub[1], pri[1]]).astype(np.int64)
    kind = ["public"] * pub.shape[1] + ["private"] * pri.shape[1]
    table = pa.table(
        {
            "src": pa.array(src, type=pa.int64()),
            "dst": pa.array(dst, type=pa.int64()),
            "kind": pa.array(kind, type=pa.string()),
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
    objects[EDGES] = _edges_bytes(graph)
    masks = {m: getattr(graph, m) for m in SPLIT_MASKS if getattr(graph, m) is not None}
    if masks:
        objects[SPLITS] = _npz_bytes(masks)
    if graph.aggregates is not None:
        objects[AGGREGATES] = _npy_bytes(graph.aggregates)
    info = {"format": GRAPH_FORMAT, "num_nodes": graph.num_nodes, "objects": sorted(objects)}
    objects[GRAPH_INFO] = (json.dumps(info, sort_keys=True) + "\n").encode()
    return objects


def read_graph_info(blob: bytes) -> dict:
    """Parse and check ``graph.json``: ``{"format", "num_nodes", "objects"}``."""
    try:
        info = json.loads(blob)
    except (UnicodeDecodeError, ValueError) as err:
        raise ArtifactError(f"{GRAPH_INFO}: not valid JSON: {err}") from None
    ok = (
        isinstance(info, dict)
        and info.get("format") == GRAPH_FORMAT
        and isinstance(info.get("num_nodes"), int)
        and not isinstance(info.get("num_nodes"), bool)
        and isinstance(info.get("objects"), list)
        and all(isinstance(n, str) for n in info["objects"])
    )
    if not ok:
        raise ArtifactError(f"{GRAPH_INFO}: not a {GRAPH_FORMAT!r} record: {info!r}")
    return info


def _load_npy(blob: bytes, name: str) -> np.ndarray:
    try:
        return np.load(io.BytesIO(blob), allow_pickle=False)
    except (ValueError, OSError, EOFError) as err:
        raise ArtifactError(f"{name}: not a readable .npy array: {err}") from None


def objects_to_graph(objects: Mapping[str, bytes], num_nodes: int | None = None) -> GraphData:
    """Rebuild a :class:`GraphData` from the objects of :func:`graph_to_objects`.

    Args:
        objects: objects by name (extra names are ignored); ``edges.parquet`` is required.
        num_nodes (int, optional): the number of nodes; read from ``graph.json`` when not given
            (default: ``None``).

    Raises:
        ArtifactError: ``edges.parquet`` is missing or unreadable, an edge kind is unknown, or
            the number of nodes is unknown or disagrees with ``graph.json``.
        GraphValidationError: the arrays do not form a valid graph.
    """
    if GRAPH_INFO in objects:
        info_n = read_graph_info(objects[GRAPH_INFO])["num_nodes"]
        if num_nodes is not None and num_nodes != info_n:
            raise ArtifactError(f"num_nodes={num_nodes} but {GRAPH_INFO} says {info_n}")
        num_nodes = info_n
    if num_nodes is None:
        raise ArtifactError(f"the number of nodes is unknown: pass num_nodes or include {GRAPH_INFO}")
    if EDGES not in objects:
        raise ArtifactError(f"artifact objects lack {EDGES!r}; got {sorted(objects)}")
    try:
        table = read_parquet_bytes(objects[EDGES], columns=["src", "dst", "kind"])
    except (pa.ArrowException, OSError) as err:
        raise ArtifactError(f"{EDGES}: not a readable parquet table with src, dst, kind: {err}") from None
    src = table.column("src").to_numpy().astype(np.int64, copy=False)
    dst = table.column("dst").to_numpy().astype(np.int64, copy=False)
    kind = np.asarray(table.column("kind").to_pylist(), dtype=object)
    unknown = sorted(set(kind.tolist()) - set(_KINDS))
    if unknown:
        raise ArtifactError(f"{EDGES}: unknown edge kinds {unknown} (expected {list(_KINDS)})")
    edges = np.stack([src, dst])
    is_pub = kind == "public"

    kwargs = {}
    if FEATURES in objects:
        kwargs["x"] = _load_npy(objects[FEATURES], FEATURES)
    if LABELS in objects:
        kwargs["y"] = _load_npy(objects[LABELS], LABELS)
    if AGGREGATES in objects:
        kwargs["aggregates"] = _load_npy(objects[AGGREGATES], AGGREGATES)
    if SPLITS in objects:
        try:
            with np.load(io.BytesIO(objects[SPLITS]), allow_pickle=False) as npz:
                for m in SPLIT_MASKS:
                    if m in npz.files:
                        kwargs[m] = npz[m]
        except (ValueError, OSError, zipfile.BadZipFile) as err:
            raise ArtifactError(f"{SPLITS}: not a readable .npz archive: {err}") from None
    return GraphData(
        num_nodes=num_nodes,
        edges_public=edges[:, is_pub],
        edges_private=edges[:, ~is_pub],
        **kwargs,
    )
