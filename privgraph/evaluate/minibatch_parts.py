"""Mini-batch training over a STORED partitioned version, one part at a time.

:class:`VersionPartsSource` is a :class:`~privgraph.evaluate.minibatch_source.ClusterSource` over a
partitioned version of an artifact store (local or S3; written by
:func:`~privgraph.publish.release_parts.write_release_parts`, e.g. by ``flows/privatize_at_scale.py``):
cluster ``i`` is the version's part ``i``, whose nodes the partitioning made from the PUBLIC edges
(METIS over them, or a hash of the node id), so the clusters are the release's own public
partitioning. Every object is read through :meth:`~privgraph.storage.base.ArtifactStore.read_object`
(checked against the manifest's sha256, itself pinned by the version id) and decoded by
:func:`~privgraph.storage.graph_io.part_from_objects` (the canonical checks), never by path.

What a version holds per part (:mod:`privgraph.storage.graph_io`): ``nodes.npy``,
``features.npy`` (the released features), ``labels.npy`` (the released labels: privatized by the
labels mechanism where the pipeline sets one, the rest declared public by
:func:`~privgraph.config.disclosure.declare_public`), ``splits.npz`` (the node split, always public)
and ``edges.parquet``: the released edges (public, then the edge mechanism's output) whose SMALLER
end is in the part, once each. The reverse direction of an edge whose larger end is in another part
is therefore stored only in the part of its smaller end: no part can be served from its own objects
alone. The source makes one streamed pass over the parts when it is built (:func:`_spill_reverse_edges`)
and writes, per part, the reverse edges that other parts hold into a spill file of a private
temporary directory; :meth:`VersionPartsSource.cluster` then reads its part from the store and its
spill file. Memory: one part (its objects, their decoded arrays), the decoded parts it keeps (at
most ``cache_bytes``, 256 MiB by default), O(num_parts) metadata, and while
it is built an int32 ``[n]`` node -> part map and one spill bucket; disk: 24 bytes per edge
between two parts. Reasoning and figures: docs/evaluation-cost.md, "Evaluating a partitioned version".
"""

from __future__ import annotations

import dataclasses
import numbers
import os
import shutil
import tempfile
import weakref
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp

from privgraph.errors import ArtifactError, ArtifactIntegrityError, one_line
from privgraph.evaluate.minibatch_source import Cluster, local_ids, sampled_parts
from privgraph.evaluate.sparsity import mostly_zero
from privgraph.graph import SPLIT_MASKS, GraphData
from privgraph.storage import ArtifactStore, open_store
from privgraph.storage.graph_io import (
    EDGES,
    FEATURES,
    GRAPH_INFO,
    LABELS,
    NODES,
    SPLITS,
    GraphPart,
    check_object_names,
    part_from_objects,
    part_prefix,
    read_graph_info,
)

__all__ = ["VersionPartsSource", "version_public_graph"]

_WHO = "VersionPartsSource"
#: decoded parts a source keeps after their first read, by default (the module docstring)
CACHE_BYTES = 256 * 2**20
_SPILL_DTYPE = np.int64  # a spilled edge: (u, v, private) with u < v, u in another part, v in this one


@dataclasses.dataclass(frozen=True)
class _Survey:
    """What the pass over the parts learned: per part its node count; the largest label; the
    feature width."""

    sizes: list[int]
    max_label: int
    feature_dim: int


class VersionPartsSource:
    """A :class:`~privgraph.evaluate.minibatch_source.ClusterSource` over the partitioned version
    ``pipeline``/``version`` of ``store`` (an :class:`~privgraph.storage.base.ArtifactStore`
    or its URI, :func:`~privgraph.storage.open_store`): cluster ``i`` is part ``i``.

    A cluster holds the part's nodes, their released features (scipy CSR where at most 1/10 of the
    part's values are non-zero, else dense float32), their released labels and split, and every
    RELEASED edge (public and privatized) at one of its nodes once per direction, in the order of
    :class:`~privgraph.evaluate.minibatch_source.GraphClusterSource` over the version loaded whole
    (forward public, forward private, then the reverse ones, each in ``(u, v)`` order), so training
    over both gives the same result for the same seed.

    Labels and split come from the version only: its ``labels.npy`` is the release's (the labels
    mechanism's output, or labels the pipeline declares public) and its split is public, so what is
    trained and scored here is post-processing of the release, as
    :func:`~privgraph.evaluate.metrics.version_metrics` on the version loaded whole (the shareable
    metrics; the owner's clean figures need the raw labels, which a version never holds).
    ``num_classes``: the largest label + 1, or ``label_classes`` (the labels mechanism's public
    ``num_classes``) when larger, as :func:`~privgraph.evaluate.training.output_classes`.

    Building it reads every part's nodes, labels, split and edges once, one part at a time (and
    part 0's features, for ``feature_dim``), and spills the reverse edges that cross parts to a
    private temporary directory under ``spill_dir`` (default: the system's), removed by
    :meth:`close` (or when the source is collected). ``staged``: the checksums of a version whose
    manifest is not written yet (``PendingVersion.objects``: the privatize flow evaluates before it
    publishes); its objects are verified against them instead of a manifest. ``cache_bytes``
    (default :data:`CACHE_BYTES`, 256 MiB; 0: none): the decoded parts kept after their first read
    with features, first come first kept, so a version that fits is read and verified once per
    source and a larger one in part (an epoch visits every part: no eviction would help). ``part_sizes``: the parts' node counts;
    ``calls`` counts the calls of :meth:`cluster`, ``nodes_served`` the nodes handed out.

    Raises:
        ArtifactError: no such version, or it is not partitioned.
        ArtifactIntegrityError: an object fails its checksum or is not the canonical encoding of its
            content, or the parts do not fit together (nodes not a partition of ``0..n-1``, an
            edge in the part of its larger end); at build time, or in :meth:`cluster` for what it
            reads again.
        ValueError: the version has no features, no labels, multi-label labels, or not the three
            split masks; ``label_classes`` is not an int >= 0.
    """

    def __init__(self, store: ArtifactStore | str | os.PathLike[str], pipeline: str, version: str, *,
                 label_classes: int | None = None, spill_dir: str | os.PathLike[str] | None = None,
                 staged: Mapping[str, Mapping[str, Any]] | None = None, cache_bytes: int = CACHE_BYTES) -> None:
        if isinstance(cache_bytes, bool) or not isinstance(cache_bytes, numbers.Integral) or cache_bytes < 0:
            raise ValueError(f"{_WHO}: cache_bytes must be an int >= 0, got {cache_bytes!r}")
        if label_classes is not None and (isinstance(label_classes, bool) or not isinstance(label_classes, numbers.Integral)
                                          or label_classes < 0):
            raise ValueError(f"{_WHO}: label_classes must be None or an int >= 0, got {label_classes!r}")
        self.store = store if isinstance(store, ArtifactStore) else open_store(store)
        self.pipeline, self.version = pipeline, version
        self._staged = None if staged is None else {str(k): dict(v) for k, v in staged.items()}
        self._num_nodes, self._num_parts = _partitioned_info(self.store, pipeline, version, self._staged)
        self._spill = Path(tempfile.mkdtemp(prefix="privgraph-parts-", dir=spill_dir))
        self._cleanup = weakref.finalize(self, shutil.rmtree, str(self._spill), True)
        try:
            survey = _spill_reverse_edges(self._read_part, self._num_nodes, self._num_parts, self._spill)
        except BaseException:
            self.close()
            raise
        self.part_sizes = survey.sizes
        self._feature_dim = survey.feature_dim
        self._num_classes = max(survey.max_label + 1, int(label_classes or 0))
        self.calls = 0
        self.nodes_served = 0
        self._cache: dict[int, Cluster] = {}
        self._cache_left = int(cache_bytes)

    # -- the protocol --------------------------------------------------------------------------------
    @property
    def num_nodes(self) -> int:
        return self._num_nodes

    @property
    def num_clusters(self) -> int:
        return self._num_parts

    @property
    def num_classes(self) -> int:
        return self._num_classes

    @property
    def feature_dim(self) -> int:
        return self._feature_dim

    def cluster(self, i: int, *, features: bool = True) -> Cluster:
        """Part ``i`` (``0 <= i < num_clusters``) as a cluster, read from the store (verified) and
        its spill file; ``x`` is ``None`` without ``features`` (the features are then not read)."""
        if isinstance(i, bool) or not isinstance(i, numbers.Integral) or not 0 <= int(i) < self._num_parts:
            raise ValueError(f"{_WHO}.cluster: i must be an int in [0, {self._num_parts}), got {i!r}")
        i = int(i)
        self.calls += 1
        cached = self._cache.get(i)
        if cached is not None:
            self.nodes_served += cached.size
            return cached if features else dataclasses.replace(cached, x=None)
        part = self._read_part(i, (NODES, LABELS, SPLITS, EDGES) + ((FEATURES,) if features else ()))
        self.nodes_served += int(part.nodes.size)
        x = _cluster_features(part.fields["x"]) if features else None
        c = Cluster(nodes=part.nodes, x=x, y=part.fields["y"].astype(np.int64, copy=False),
                    train_mask=part.fields["train_mask"], val_mask=part.fields["val_mask"],
                    test_mask=part.fields["test_mask"], edges=self._cluster_edges(i, part))
        size = _cluster_bytes(c)
        if features and size <= self._cache_left:  # kept: read once, served again from memory
            self._cache[i] = c
            self._cache_left -= size
        return c

    # -- lifetime ------------------------------------------------------------------------------------
    def close(self) -> None:
        """Remove the spill directory (the source cannot serve clusters after)."""
        self._cleanup()

    def __enter__(self) -> VersionPartsSource:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # -- reading ---------------------------------------------------------------------------------------
    def _read_part(self, i: int, bases: tuple[str, ...]) -> GraphPart:
        return _read_version_part(self.store, self.pipeline, self.version, self._staged, i, bases)

    def _cluster_edges(self, i: int, part: GraphPart) -> np.ndarray:
        """int64 ``[2, e]``: the part's edges forward (public, private), then the reverse
        direction of every edge whose larger end is in the part (public, private), each in
        ``(u, v)`` order: those of the part itself and those spilled from the others."""
        spill = _read_spill(self._spill, i)
        bounds = np.searchsorted(spill[2], [0, 1, 2])  # the spill is sorted by (kind, u, v)
        own = [part.edges_public, part.edges_private]
        reverse = []
        for kind, e in enumerate(own):
            inside = e[:, local_ids(part.nodes, e[1])[1]]  # (u, v) order, as the part stores them
            both = np.concatenate([inside, spill[:2, bounds[kind]:bounds[kind + 1]]], axis=1)
            order = np.argsort(both[0] * np.int64(self._num_nodes) + both[1], kind="stable")  # merges two sorted runs
            reverse.append(both[::-1, order])
        return np.ascontiguousarray(np.concatenate(own + reverse, axis=1), dtype=np.int64)


def _cluster_bytes(c: Cluster) -> int:
    """The bytes a decoded cluster holds (its arrays; a CSR matrix's three)."""
    x = 0 if c.x is None else (c.x.data.nbytes + c.x.indices.nbytes + c.x.indptr.nbytes if sp.issparse(c.x)
                               else c.x.nbytes)
    return x + sum(a.nbytes for a in (c.nodes, c.y, c.train_mask, c.val_mask, c.test_mask, c.edges))


def _cluster_features(x: np.ndarray) -> np.ndarray | sp.csr_array:
    """A part's features as a cluster hands them out: CSR where sparse, as GraphClusterSource."""
    return sp.csr_array(x) if mostly_zero(x) else x


def version_public_graph(store: ArtifactStore | str | os.PathLike[str], pipeline: str, version: str, *,
                         staged: Mapping[str, Mapping[str, Any]] | None = None,
                         sample: int | None = None) -> tuple[GraphData, int]:
    """``(graph, num_parts)``: the labels, split and PUBLIC edges of the partitioned version
    ``pipeline``/``version`` of ``store`` (``staged``: a staged version's checksums), without
    features or released edges, and its number of parts: what the public-only reference reads
    (:func:`~privgraph.evaluate.public_reference.public_only_reference`). ``sample``: only the
    parts of that evaluation sample (:func:`~privgraph.evaluate.minibatch_source.sampled_parts`),
    as the graph of their own that :class:`~privgraph.evaluate.minibatch_source.SampledSource`
    serves (their nodes renumbered in ascending order, the public edges between two of them).

    One pass over the parts, no features read and nothing spilled (what building a
    :class:`VersionPartsSource` adds), with the same checks: each object verified and decoded
    canonically, the parts' nodes a partition of ``0..n-1`` (of the parts read), each public edge
    in the part of its smaller end, single-label labels and the three masks. Holds ``[n]`` labels
    and masks and the public edges, int64 ``[2, m_pub]``: the public adjacency, the memory of a
    METIS partitioning.

    Raises:
        ArtifactError, ArtifactIntegrityError, ValueError: as :class:`VersionPartsSource`;
            ValueError: ``sample`` not an int >= 1.
    """
    store = store if isinstance(store, ArtifactStore) else open_store(store)
    checked = None if staged is None else {str(k): dict(v) for k, v in staged.items()}
    n, num_parts = _partitioned_info(store, pipeline, version, checked)
    chosen = sampled_parts(num_parts, sample)
    y = np.full(n, -1, dtype=np.int64)
    masks = {m: np.zeros(n, dtype=bool) for m in SPLIT_MASKS}
    owner = np.full(n, -1, dtype=np.int32)
    edges = []
    for i in map(int, chosen):
        part = _read_version_part(store, pipeline, version, checked, i, (NODES, LABELS, SPLITS, EDGES))
        _check_part_rows(part, part_prefix(i).rstrip("."))
        _check_part_layout(part, i, owner, n)
        y[part.nodes] = part.fields["y"]
        for m in SPLIT_MASKS:
            masks[m][part.nodes] = part.fields[m]
        edges.append(part.edges_public)
    public = np.concatenate(edges, axis=1) if edges else np.zeros((2, 0), dtype=np.int64)
    if chosen.size == num_parts:  # no sample, or one of every part: the whole graph
        _check_covered(owner, n)
        return GraphData(num_nodes=n, y=y, edges_public=np.ascontiguousarray(public, dtype=np.int64),
                         **masks), num_parts
    nodes = np.flatnonzero(owner >= 0)  # the sample's nodes, ascending: SampledSource's numbering
    dst, inside = local_ids(nodes, public[1])
    src, _ = local_ids(nodes, public[0][inside])
    return GraphData(num_nodes=int(nodes.size), y=y[nodes], **{m: v[nodes] for m, v in masks.items()},
                     edges_public=np.ascontiguousarray(np.stack([src, dst[inside]]), dtype=np.int64)), num_parts


def _read_version_part(store: ArtifactStore, pipeline: str, version: str,
                       staged: Mapping[str, Mapping[str, Any]] | None, i: int, bases: tuple[str, ...]) -> GraphPart:
    """Part ``i``'s objects ``bases`` (names after the part's prefix), each read verified against
    the manifest (or ``staged``), decoded with the canonical checks."""
    pre = part_prefix(i)
    objects = {pre + b: _read_verified(store, pipeline, version, pre + b, staged) for b in bases}
    try:
        return part_from_objects(i, objects)
    except ArtifactError as exc:
        raise ArtifactIntegrityError(f"{pipeline}/{version}: {one_line(exc)}") from None


def _check_part_layout(part: GraphPart, i: int, owner: np.ndarray, n: int) -> None:
    """Part ``i``'s nodes are in ``[0, n)`` and no earlier part's (``owner``, updated), and each
    of its edges is in the part of its smaller end."""
    where = part_prefix(i).rstrip(".")
    if part.nodes.size and (part.nodes[0] < 0 or part.nodes[-1] >= n or np.any(owner[part.nodes] >= 0)):
        raise ArtifactIntegrityError(f"{where}: node ids outside [0, {n}) or held by an earlier part")
    owner[part.nodes] = i
    for e in (part.edges_public, part.edges_private):
        if e.size and (not local_ids(part.nodes, e[0])[1].all() or e[1].max() >= n):
            raise ArtifactIntegrityError(f"{where}: an edge whose smaller end is another part's, or beyond "
                                         f"the {n} nodes")


def _check_covered(owner: np.ndarray, n: int) -> None:
    """Every node is in some part."""
    if np.any(owner < 0):
        raise ArtifactIntegrityError(f"the parts cover {int(np.count_nonzero(owner >= 0))} of {n} nodes")


def _read_verified(store: ArtifactStore, pipeline: str, version: str, name: str,
                   staged: Mapping[str, Mapping[str, Any]] | None) -> bytes:
    """One object, verified against the manifest, or against ``staged`` (a staged version's checksums)."""
    if staged is None:
        return store.read_object(pipeline, version, name)
    return store.read_staged_object(pipeline, version, name, staged)


def _partitioned_info(store: ArtifactStore, pipeline: str, version: str,
                      staged: Mapping[str, Mapping[str, Any]] | None = None) -> tuple[int, int]:
    """``(num_nodes, num_parts)`` of a partitioned version: its ``graph.json`` read verified, its
    object names checked against the manifest, or the staging's checksums (as
    :meth:`~privgraph.storage.base.ArtifactStore.iter_parts`)."""
    manifest = store.read_manifest(pipeline, version) if staged is None else {"objects": staged}
    blob = _read_verified(store, pipeline, version, GRAPH_INFO, staged)
    try:
        info = read_graph_info(blob)
        if info.get("parts"):
            check_object_names(manifest["objects"], info)
    except ArtifactError as exc:
        raise ArtifactIntegrityError(f"{pipeline}/{version}: {one_line(exc)}") from None
    if not info.get("parts"):
        raise ArtifactError(f"{pipeline}/{version} is not a partitioned version; serve it with GraphClusterSource "
                            f"over store.load_graph(...)")
    names = {n[len(part_prefix(0)):] for n in manifest["objects"] if n.startswith(part_prefix(0))}
    missing = [what for base, what in ((FEATURES, "features"), (LABELS, "labels"), (SPLITS, "split")) if base not in names]
    if missing:
        raise ValueError(f"{_WHO}: {pipeline}/{version} has no {', '.join(missing)}; node classification needs "
                         f"features, labels and a train/val/test split")
    return int(info["num_nodes"]), int(info["parts"])


def _check_part_rows(part: GraphPart, where: str) -> int:
    """The part's labels and masks as training needs them; returns its largest label (-1: none)."""
    y = part.fields["y"]
    if y.ndim != 1:
        raise ValueError(f"{_WHO}: {where}: multi-label labels are not supported (single-label int64 y [n] only)")
    absent = [m for m in SPLIT_MASKS if m not in part.fields]
    if absent:
        raise ValueError(f"{_WHO}: {where} has no {', '.join(absent)}; node classification needs "
                         f"train/val/test masks")
    return int(y.max()) if y.size else -1


def _spill_reverse_edges(read_part: Any, n: int, num_parts: int, spill: Path) -> _Survey:
    """The one pass over the parts (each read once, alone): checks that their nodes partition
    ``0..n-1`` and that every edge is in the part of its smaller end; collects the sizes, the
    largest label and (from part 0) the feature width; and writes, for each part ``j``, the edges
    ``(u, v)`` with ``v`` in ``j`` and ``u`` in another part to ``rev-<j>.i64``, sorted by
    ``(kind, u, v)``.

    While a part is read its edges to other parts go to range buckets by ``v`` (the node -> part
    map is complete only after the pass); each bucket is then routed to the parts' spill files."""
    owner = np.full(n, -1, dtype=np.int32)
    width = max(1, -(-n // num_parts))  # the node range of one bucket
    sizes, max_label, feature_dim = [], -1, 0
    for i in range(num_parts):
        part = read_part(i, (NODES, LABELS, SPLITS, EDGES) + ((FEATURES,) if i == 0 else ()))
        where = part_prefix(i).rstrip(".")
        max_label = max(max_label, _check_part_rows(part, where))
        if i == 0:
            feature_dim = int(part.fields["x"].shape[1])
        _check_part_layout(part, i, owner, n)
        sizes.append(int(part.nodes.size))
        for kind, e in enumerate((part.edges_public, part.edges_private)):
            out = e[:, ~local_ids(part.nodes, e[1])[1]]
            rows = np.vstack([out, np.full((1, out.shape[1]), kind, dtype=np.int64)]).astype(_SPILL_DTYPE)
            _append_by(rows, out[1] // width, lambda b: spill / f"bucket-{b:05d}.i64")
        del part
    _check_covered(owner, n)
    for bucket in sorted(spill.glob("bucket-*.i64")):
        rows = np.fromfile(bucket, dtype=_SPILL_DTYPE).reshape(-1, 3).T
        bucket.unlink()
        _append_by(rows, owner[rows[1]], lambda j: spill / f"rev-{j:05d}.i64")
    del owner
    for path in spill.glob("rev-*.i64"):  # each part's spill sorted by (kind, u, v), once
        rows = np.fromfile(path, dtype=_SPILL_DTYPE).reshape(-1, 3).T
        rows[:, np.lexsort((rows[1], rows[0], rows[2]))].T.tofile(path)
    return _Survey(sizes=sizes, max_label=max_label, feature_dim=feature_dim)


def _append_by(rows: np.ndarray, keys: np.ndarray, path: Any) -> None:
    """Append the columns of ``rows`` ``[3, k]`` to the file ``path(key)`` of each one's key, as
    ``(u, v, kind)`` triples, keeping their order within a key."""
    if not keys.size:
        return
    order = np.argsort(keys, kind="stable")
    targets, starts = np.unique(keys[order], return_index=True)
    bounds = np.append(starts, order.size)
    for k, key in enumerate(targets.tolist()):
        chunk = np.ascontiguousarray(rows[:, order[bounds[k]:bounds[k + 1]]].T, dtype=_SPILL_DTYPE)
        with open(path(key), "ab") as f:
            f.write(chunk.tobytes())


def _read_spill(spill: Path, i: int) -> np.ndarray:
    """Part ``i``'s spilled edges, int64 ``[3, k]`` rows ``u``, ``v``, ``kind`` (0 public, 1 private)."""
    if not spill.is_dir():
        raise ValueError(f"{_WHO}: the source is closed")
    path = spill / f"rev-{i:05d}.i64"
    if not path.is_file():
        return np.zeros((3, 0), dtype=np.int64)
    return np.fromfile(path, dtype=_SPILL_DTYPE).reshape(-1, 3).T
