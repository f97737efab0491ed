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

A PARTITIONED version (written by the partitions' tasks, :func:`privgraph.publish.release_parts.write_release_parts`)
holds per partition ``i`` the objects of :func:`part_to_objects` under the prefix ``part-<i>.``:
``nodes.npy`` (its node ids, sorted: a function of the public edges), ``features.npy``,
``labels.npy``, ``splits.npz`` (its rows) and ``edges.parquet`` (the edges whose smaller end it
holds, public rows then private rows, each sorted), and a ``graph.json`` of format
``privgraph.graph/2`` with ``parts``. :func:`objects_to_graph` assembles it (:func:`assemble_parts`)
into the graph the whole version of the same release holds.

CANONICAL OBJECTS. Every object of a version is exactly the bytes that this module's own encoder
writes for the content that loads from it: decoding an object and encoding what it holds again
gives the same bytes, so no object can carry anything beside its content (free metadata, extra
array, zip or parquet entries, extra columns, trailing bytes, another memory order, other
compression settings or entry times). The readers refuse anything else with an
:class:`~privgraph.errors.ArtifactError` naming the object and the problem (never a data
value): :func:`objects_to_graph` and :func:`part_from_objects` as they decode, and
:func:`check_objects` (used by :meth:`~privgraph.storage.base.ArtifactStore.verify_version`)
without assembling the graph. Per object:

* ``.npy``: the documented dtype and number of dimensions (``features`` float32 2-D,
  ``labels`` int64 1-D or 2-D, ``aggregates`` float32 3-D, ``nodes`` int64 1-D and strictly
  increasing), and :func:`_npy_bytes` of the array is the object;
* ``splits.npz``: only the entries ``train_mask.npy`` / ``val_mask.npy`` / ``test_mask.npy``, each
  bool 1-D, at least one, and :func:`_npz_bytes` of them is the object;
* ``edges.parquet``: exactly the columns ``src`` int64, ``dst`` int64, ``kind`` string, no nulls,
  ``0 <= src < dst``, kinds ``public`` / ``private`` only, public rows first, each kind strictly
  increasing in ``(src, dst)`` (so no duplicate edge), and :func:`_edges_bytes` of the rows is the
  object. A file whose ``created_by`` is not this pyarrow's (written by another Parquet writer
  version, whose bytes may differ) is checked field by field instead (:func:`_check_foreign_edges`:
  that path cannot pin the other writer's page layout, encodings or zstd level);
* ``graph.json``: exactly the documented keys and types, its ``objects`` sorted, and the bytes
  are those :func:`graph_to_objects` / :func:`partitioned_graph_info` write;
* the names: a version holds exactly the objects its ``graph.json`` lists, plus ``graph.json``
  (:func:`check_object_names`): an unlisted or unknown object is refused, not ignored.
"""

from __future__ import annotations

import dataclasses
import functools
import io
import json
import re
import zipfile
from collections.abc import Collection, Mapping
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from privgraph.storage.arrow_io import read_parquet_bytes, read_parquet_footer
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
    "check_objects",
    "check_object_names",
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
    """``e`` in ``(src, dst)`` order; as it is when it is in that order already (a stable sort
    would not move it: a reader re-encoding the sorted rows it checked skips the sort)."""
    s, d = e[0], e[1]
    if not np.any((s[1:] < s[:-1]) | ((s[1:] == s[:-1]) & (d[1:] < d[:-1]))):
        return e
    order = np.lexsort((d, s))
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


def _graph_info_bytes(info: Mapping[str, Any]) -> bytes:
    """``graph.json``: key-sorted JSON and a newline (both formats)."""
    return (json.dumps(info, sort_keys=True) + "\n").encode()


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
    objects[GRAPH_INFO] = _graph_info_bytes(
        {"format": GRAPH_FORMAT, "num_nodes": graph.num_nodes, "objects": sorted(objects)})
    return objects


def read_graph_info(blob: bytes) -> dict:
    """Parse and check ``graph.json``: exactly ``{"format", "num_nodes", "objects"}`` and, for a
    partitioned version (format ``privgraph.graph/2``), ``parts``; its bytes exactly those the
    writer gives that content (key order, whitespace, escapes; ``objects`` sorted, no repeat).

    Raises:
        ArtifactError: not JSON, not such a record, or not its canonical bytes.
    """
    try:
        info = json.loads(blob)
    except (UnicodeDecodeError, ValueError):
        raise ArtifactError(f"{GRAPH_INFO}: not valid JSON") from None
    fmt = info.get("format") if isinstance(info, dict) else None
    keys = {"format", "num_nodes", "objects"} | ({"parts"} if fmt == PARTITIONED_GRAPH_FORMAT else set())
    ok = (
        fmt in (GRAPH_FORMAT, PARTITIONED_GRAPH_FORMAT)
        and set(info) == keys
        and type(info["num_nodes"]) is int and info["num_nodes"] >= 0
        and isinstance(info["objects"], list)
        and all(isinstance(n, str) for n in info["objects"])
        and (fmt == GRAPH_FORMAT or (type(info["parts"]) is int and info["parts"] >= 1))
    )
    if not ok:
        raise ArtifactError(f"{GRAPH_INFO}: not a {GRAPH_FORMAT!r} or {PARTITIONED_GRAPH_FORMAT!r} record "
                            f"(its keys, their types or values)")
    if fmt == PARTITIONED_GRAPH_FORMAT:
        canonical = partitioned_graph_info(info["num_nodes"], info["parts"],
                                           sorted(set(info["objects"]) - {GRAPH_INFO}))
    else:
        canonical = _graph_info_bytes({**info, "objects": sorted(set(info["objects"]))})
    if canonical != blob:
        raise ArtifactError(f"{GRAPH_INFO}: not the bytes privgraph writes for its content "
                            f"(key order, whitespace, escapes or the order of its objects differ)")
    return info


_WHOLE_NAMES = frozenset((FEATURES, LABELS, EDGES, SPLITS, AGGREGATES))
_PART_NAMES = frozenset((NODES, FEATURES, LABELS, SPLITS, EDGES))
_PART_NAME_RE = re.compile(r"^part-(\d{5,})\.(.+)$")


def check_object_names(names: Collection[str], info: Mapping[str, Any] | None) -> None:
    """Refuse a version whose objects (``names``) are not exactly what its ``graph.json``
    (``info``, :func:`read_graph_info`) lists plus ``graph.json``: a whole version lists
    ``edges.parquet`` and any of ``features.npy``, ``labels.npy``, ``splits.npz``,
    ``aggregates.npy``; a partitioned one lists ``graph.json`` and per part ``i < parts``
    ``part-<i>.nodes.npy`` and ``part-<i>.edges.parquet`` and the same ones of ``.features.npy``,
    ``.labels.npy``, ``.splits.npz`` in every part. Without ``info`` (objects passed with
    ``num_nodes``, no ``graph.json``) the names must be a whole version's.

    Raises:
        ArtifactError: an object listed but missing, an unlisted object, an unknown name.
    """
    stored = set(names)
    listed = set(stored) if info is None else set(info["objects"])
    if info is None or not info.get("parts"):
        unknown = listed - _WHOLE_NAMES
        if unknown:
            raise ArtifactError(f"{len(unknown)} object(s) that a {GRAPH_FORMAT!r} version never holds"
                                + (f", listed in {GRAPH_INFO}" if info is not None else ""))
        required = {EDGES}
    else:
        if GRAPH_INFO not in listed:
            raise ArtifactError(f"{GRAPH_INFO} of a partitioned version does not list itself")
        bases: dict[int, set[str]] = {i: set() for i in range(info["parts"])}
        unknown = 0
        for name in listed - {GRAPH_INFO}:
            m = _PART_NAME_RE.match(name)
            if m is None or int(m.group(1)) not in bases or m.group(2) not in _PART_NAMES \
                    or part_prefix(int(m.group(1))) + m.group(2) != name:
                unknown += 1
            else:
                bases[int(m.group(1))].add(m.group(2))
        if unknown:
            raise ArtifactError(f"{GRAPH_INFO} lists {unknown} object(s) that are no part's of a "
                                f"{info['parts']}-part version")
        required = {part_prefix(i) + b for i in bases for b in (NODES, EDGES)}
        if len({frozenset(b) for b in bases.values()}) > 1:
            raise ArtifactError(f"{GRAPH_INFO}: the parts hold different objects")
    missing = sorted((required - listed) | (listed - stored))
    if missing:
        raise ArtifactError(f"the version lacks {missing[0]!r}"
                            + (f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""))
    extra = stored - listed - {GRAPH_INFO}
    if extra:
        raise ArtifactError(f"{len(extra)} object(s) of the version are not listed in {GRAPH_INFO}")


def check_objects(objects: Mapping[str, bytes]) -> None:
    """Check every object of a version as the readers do (see the module docstring: each the
    canonical encoding of its content, the documented fields and dtypes, the names exactly those
    ``graph.json`` lists, rows as many as the nodes), without assembling the graph: what
    :meth:`~privgraph.storage.base.ArtifactStore.verify_version` runs.

    Raises:
        ArtifactError: naming the object and the problem.
    """
    if GRAPH_INFO not in objects:
        raise ArtifactError(f"the version lacks {GRAPH_INFO!r}")
    info = read_graph_info(objects[GRAPH_INFO])
    check_object_names(objects, info)
    if info.get("parts"):
        for i in range(info["parts"]):
            part_from_objects(i, objects)
        return
    edges_public, edges_private = _decode_edges(objects[EDGES], EDGES)
    if max(edges_public.max(initial=-1), edges_private.max(initial=-1)) >= info["num_nodes"]:
        raise ArtifactError(f"{EDGES}: a node id beyond the {GRAPH_INFO}'s num_nodes")
    _check_rows(_row_fields(objects), info["num_nodes"], "")


# -- decoders: each refuses what is not the canonical encoding of what it returns ---------------
#: name -> (dtype, numbers of dimensions) of the .npy objects
_NPY_FORMS: dict[str, tuple[np.dtype, tuple[int, ...]]] = {
    FEATURES: (np.dtype(np.float32), (2,)),
    LABELS: (np.dtype(np.int64), (1, 2)),
    AGGREGATES: (np.dtype(np.float32), (3,)),
    NODES: (np.dtype(np.int64), (1,)),
}
_MASK_ENTRIES = {f"{m}.npy": m for m in SPLIT_MASKS}
_EDGES_SCHEMA = pa.schema([("src", pa.int64()), ("dst", pa.int64()), ("kind", pa.string())])


def _load_npy(blob: bytes, name: str) -> np.ndarray:
    try:
        return np.load(io.BytesIO(blob), allow_pickle=False)
    except (ValueError, OSError, EOFError) as err:
        raise ArtifactError(f"{name}: not a readable .npy array ({type(err).__name__})") from None


def _decode_npy(blob: bytes, name: str, base: str) -> np.ndarray:
    """The array of the .npy object ``name`` (of kind ``base``, e.g. ``features.npy``)."""
    a = _load_npy(blob, name)
    dtype, ndims = _NPY_FORMS[base]
    if a.dtype != dtype or a.ndim not in ndims:
        raise ArtifactError(f"{name}: {a.dtype} with {a.ndim} dimensions, expected {dtype} with "
                            f"{' or '.join(map(str, ndims))}")
    if _npy_bytes(a) != blob:
        raise ArtifactError(f"{name}: not the bytes privgraph writes for its array "
                            f"(its header, memory order or trailing bytes differ)")
    return a


def _decode_splits(blob: bytes, name: str) -> dict[str, np.ndarray]:
    """The masks of a ``splits.npz`` object."""
    try:
        with zipfile.ZipFile(io.BytesIO(blob)) as zf:
            entries = zf.namelist()
            if not entries or len(set(entries)) != len(entries) or not set(entries) <= set(_MASK_ENTRIES):
                raise ArtifactError(f"{name}: its entries are not distinct ones of "
                                    f"{sorted(_MASK_ENTRIES)} ({len(entries)} entries)")
            masks = {_MASK_ENTRIES[e]: np.load(io.BytesIO(zf.read(e)), allow_pickle=False) for e in entries}
    except (ValueError, OSError, EOFError, zipfile.BadZipFile, NotImplementedError) as err:
        raise ArtifactError(f"{name}: not a readable .npz archive ({type(err).__name__})") from None
    for m, a in masks.items():
        if a.dtype != np.bool_ or a.ndim != 1:
            raise ArtifactError(f"{name}: {m} is {a.dtype} with {a.ndim} dimensions, expected bool with 1")
    if _npz_bytes(masks) != blob:
        raise ArtifactError(f"{name}: not the bytes privgraph writes for its masks (zip comment, "
                            f"entry order, times, attributes, compression or trailing bytes differ)")
    return masks


@functools.cache
def _own_created_by() -> str:
    """The ``created_by`` of the Parquet files this process writes (``parquet-cpp-arrow version
    <pyarrow>``), measured on one."""
    empty = np.zeros((2, 0), np.int64)
    return read_parquet_footer(_edges_bytes(empty, empty)).created_by


def _decode_edges(blob: bytes, name: str) -> tuple[np.ndarray, np.ndarray]:
    """``(edges_public, edges_private)``, each ``[2, m]`` in ``(src, dst)`` order, of an
    ``edges.parquet`` object: its columns exactly ``src`` int64, ``dst`` int64, ``kind`` string,
    no nulls, ``0 <= src < dst``, kinds ``public`` / ``private`` only, public rows first, each kind
    strictly increasing (no duplicate edge); and the bytes :func:`_edges_bytes` writes for these
    rows, unless its ``created_by`` is another writer's: then :func:`_check_foreign_edges`."""
    try:
        footer = read_parquet_footer(blob)
        schema = footer.schema.to_arrow_schema()
    except (pa.ArrowException, OSError) as err:
        raise ArtifactError(f"{name}: not a readable parquet table ({type(err).__name__})") from None
    if not schema.equals(_EDGES_SCHEMA):
        raise ArtifactError(f"{name}: its columns are not exactly src int64, dst int64, kind string "
                            f"({len(schema)} columns)")
    try:
        table = read_parquet_bytes(blob, columns=_EDGES_SCHEMA.names)
    except (pa.ArrowException, OSError) as err:
        raise ArtifactError(f"{name}: not a readable parquet table ({type(err).__name__})") from None
    if any(table.column(c).null_count for c in _EDGES_SCHEMA.names):
        raise ArtifactError(f"{name}: null values")
    kind = table.column("kind")
    unknown = len(set(pc.unique(kind).to_pylist()) - set(_KINDS))
    if unknown:
        raise ArtifactError(f"{name}: {unknown} unknown edge kind(s) (expected {list(_KINDS)})")
    src = table.column("src").to_numpy()
    dst = table.column("dst").to_numpy()
    if src.size and (src.min() < 0 or np.any(src >= dst)):
        raise ArtifactError(f"{name}: a row with a negative node id or src >= dst (one row per edge, src < dst)")
    is_pub = pc.equal(kind, "public").to_numpy(zero_copy_only=False)
    n_pub = int(np.count_nonzero(is_pub))
    if is_pub[n_pub:].any():
        raise ArtifactError(f"{name}: a public row after a private one (public rows come first)")
    for lo, hi in ((0, n_pub), (n_pub, src.size)):
        s, d = src[lo:hi], dst[lo:hi]
        if np.any((s[1:] < s[:-1]) | ((s[1:] == s[:-1]) & (d[1:] <= d[:-1]))):
            raise ArtifactError(f"{name}: the {_KINDS[lo > 0]} rows are not strictly increasing in "
                                f"(src, dst) (unsorted or a repeated edge)")
    edges = np.stack([src, dst])
    pub, pri = edges[:, :n_pub], edges[:, n_pub:]
    if _edges_bytes(pub, pri) != blob:
        if footer.created_by == _own_created_by():
            raise ArtifactError(f"{name}: not the bytes privgraph writes for its rows (metadata, "
                                f"compression, layout or trailing bytes differ)")
        _check_foreign_edges(footer, name)
    return pub, pri


def _check_foreign_edges(footer: pq.FileMetaData, name: str) -> None:
    """The part of the canonical form that an ``edges.parquet`` written by another Parquet writer
    (another ``created_by``; its bytes may differ from this pyarrow's for the same rows) must
    still have, field by field, beside what :func:`_decode_edges` checked of its rows: no
    key-value metadata but ``ARROW:schema``, no schema or column metadata in it, every column
    chunk zstd-compressed, every row group but the last of the same length. The writer's other
    layout choices (page sizes, encodings, statistics, the zstd level, the row-group length) are
    not pinned on this path."""
    extra = set(footer.metadata or {}) - {b"ARROW:schema"}
    if extra:
        raise ArtifactError(f"{name}: {len(extra)} key-value metadata entries besides ARROW:schema")
    if not footer.schema.to_arrow_schema().equals(_EDGES_SCHEMA, check_metadata=True):
        raise ArtifactError(f"{name}: schema or column metadata")
    groups = [footer.row_group(g) for g in range(footer.num_row_groups)]
    if any(g.column(c).compression != "ZSTD" for g in groups for c in range(g.num_columns)):
        raise ArtifactError(f"{name}: a column chunk that is not zstd-compressed")
    if len({g.num_rows for g in groups[:-1]}) > 1 or (len(groups) > 1 and groups[-1].num_rows > groups[0].num_rows):
        raise ArtifactError(f"{name}: row groups of uneven lengths")


def _row_fields(objects: Mapping[str, bytes], prefix: str = "") -> dict[str, np.ndarray]:
    """The per-node arrays among ``objects`` (names after ``prefix``): x, y, aggregates, masks."""
    out: dict[str, np.ndarray] = {}
    for field, name in (("x", FEATURES), ("y", LABELS), ("aggregates", AGGREGATES)):
        if prefix + name in objects:
            out[field] = _decode_npy(objects[prefix + name], prefix + name, name)
    if prefix + SPLITS in objects:
        out.update(_decode_splits(objects[prefix + SPLITS], prefix + SPLITS))
    return out


def _check_rows(fields: Mapping[str, np.ndarray], rows: int, prefix: str) -> None:
    """Each per-node array has ``rows`` rows (``aggregates``: along its second axis)."""
    for field, a in fields.items():
        got = a.shape[1] if field == "aggregates" else a.shape[0]
        if got != rows:
            raise ArtifactError(f"{prefix}{field}: {got} rows for {rows} nodes")


def objects_to_graph(objects: Mapping[str, bytes], num_nodes: int | None = None) -> GraphData:
    """Rebuild a :class:`GraphData` from the objects of :func:`graph_to_objects` (or of a
    partitioned version, :func:`part_to_objects`: its parts assembled by :func:`assemble_parts`),
    each decoded with the canonical checks of the module docstring.

    Args:
        objects: objects by name: exactly those ``graph.json`` lists, plus ``graph.json``
            (:func:`check_object_names`; an extra name is refused); ``edges.parquet`` is required.
        num_nodes (int, optional): the number of nodes; read from ``graph.json`` when not given
            (default: ``None``).

    Raises:
        ArtifactError: an object is missing, unlisted, unreadable or not in its canonical form
            (e.g. an unknown edge kind); the number of nodes is unknown or disagrees with
            ``graph.json``; a part's nodes, rows or edges do not fit the others.
        GraphValidationError: the arrays do not form a valid graph.
    """
    info = read_graph_info(objects[GRAPH_INFO]) if GRAPH_INFO in objects else None
    if info is not None:
        if num_nodes is not None and num_nodes != info["num_nodes"]:
            raise ArtifactError(f"num_nodes={num_nodes} but {GRAPH_INFO} says {info['num_nodes']}")
        num_nodes = info["num_nodes"]
    check_object_names(objects, info)
    if num_nodes is None:
        raise ArtifactError(f"the number of nodes is unknown: pass num_nodes or include {GRAPH_INFO}")
    if info is not None and info.get("parts"):
        parts = [part_from_objects(i, objects) for i in range(info["parts"])]
        return assemble_parts(parts, num_nodes)
    edges_public, edges_private = _decode_edges(objects[EDGES], EDGES)
    return GraphData(num_nodes=num_nodes, edges_public=edges_public, edges_private=edges_private,
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
        if field in part.fields:  # in the documented dtype, as GraphData holds it
            objects[pre + name] = _npy_bytes(np.asarray(part.fields[field], dtype=_NPY_FORMS[name][0]))
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
    return _graph_info_bytes(info)


def part_from_objects(i: int, objects: Mapping[str, bytes]) -> GraphPart:
    """Partition ``i`` read back from its objects (see :func:`part_to_objects`), each decoded
    with the canonical checks of the module docstring (its node ids strictly increasing).

    Raises:
        ArtifactError: an object of the part is missing, unreadable or not in its canonical
            form, or its rows are not one per node.
    """
    pre = part_prefix(i)
    for name in (NODES, EDGES):
        if pre + name not in objects:
            raise ArtifactError(f"the partitioned version lacks {pre + name!r}")
    nodes = _decode_npy(objects[pre + NODES], pre + NODES, NODES)
    if np.any(nodes[1:] <= nodes[:-1]):
        raise ArtifactError(f"{pre + NODES}: the node ids are not strictly increasing")
    fields = _row_fields(objects, pre)
    _check_rows(fields, nodes.size, pre)
    edges_public, edges_private = _decode_edges(objects[pre + EDGES], pre + EDGES)
    return GraphPart(index=i, nodes=nodes, fields=fields, edges_public=edges_public, edges_private=edges_private)


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


