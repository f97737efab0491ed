"""Where mini-batch training reads a graph from: clusters of nodes, one at a time.

:func:`~privgraph.evaluate.minibatch.fit_cluster_gcn` never sees a whole graph, only the clusters
a :class:`ClusterSource` hands out (:class:`Cluster`: the cluster's nodes, their features,
labels and split masks, and every edge that starts at one of them). :class:`GraphClusterSource`
serves them from an in-memory :class:`~privgraph.graph.GraphData` and a node -> cluster
assignment, normally the public partitioning (:func:`public_clusters`: METIS over the PUBLIC
edges only, or a hash of the node id), so the clusters are a function of public data.
"""

from __future__ import annotations

import dataclasses
import numbers
from typing import Any, Protocol, runtime_checkable

import numpy as np
import scipy.sparse as sp

from privgraph.evaluate.sparsity import mostly_zero
from privgraph.graph import SPLIT_MASKS, GraphData
from privgraph.parts.partition import check_partition_arguments, partition_assignment

__all__ = ["Cluster", "ClusterSource", "EdgelessSource", "GraphClusterSource", "SampledSource", "SourceView", "public_clusters",
           "sampled_parts"]


@dataclasses.dataclass(frozen=True)
class Cluster:
    """One cluster of a :class:`ClusterSource`, ``k`` nodes.

    Attributes:
        nodes: int64 ``[k]``, the nodes' global ids in ``[0, num_nodes)``, ascending, distinct.
        x: float32 ``[k, feature_dim]``, their features (row ``j``: node ``nodes[j]``): a dense
            array, or a ``scipy.sparse`` CSR array (bag-of-words features, never densified);
            ``None`` when :meth:`ClusterSource.cluster` was asked for no features.
        y: int64 ``[k]``, their labels (``-1``: unlabelled).
        train_mask, val_mask, test_mask: bool ``[k]``, their split.
        edges: int64 ``[2, e]``, global ids: every edge of the graph whose first end (row 0) is a
            node of the cluster, once per direction (an undirected edge inside the cluster is
            there twice, ``(u, v)`` and ``(v, u)``; one to another cluster once, from this side).
            Row 1 may name nodes of other clusters. No self-loop, no duplicate.
    """

    nodes: np.ndarray
    x: np.ndarray | sp.csr_array | None
    y: np.ndarray
    train_mask: np.ndarray
    val_mask: np.ndarray
    test_mask: np.ndarray
    edges: np.ndarray

    @property
    def size(self) -> int:
        return int(self.nodes.size)


@runtime_checkable
class ClusterSource(Protocol):
    """What mini-batch training reads: ``num_clusters`` disjoint clusters that together hold the
    ``num_nodes`` nodes of one graph, served one at a time by :meth:`cluster`. ``num_classes`` is
    the output layer's size (a PUBLIC count, as :func:`~privgraph.evaluate.training.output_classes`),
    ``feature_dim`` the width of every cluster's ``x``. A source may read each cluster from disk
    on every call: the trainer holds at most one batch of clusters at a time, and asks for
    ``features=False`` where it reads only the nodes, labels, masks and edges (then ``x`` may be
    ``None``: a source need not read the features)."""

    @property
    def num_nodes(self) -> int: ...

    @property
    def num_clusters(self) -> int: ...

    @property
    def num_classes(self) -> int: ...

    @property
    def feature_dim(self) -> int: ...

    def cluster(self, i: int, *, features: bool = True) -> Cluster: ...


class SourceView:
    """A :class:`ClusterSource` over another ``source``: its nodes, clusters, classes and feature
    width; a subclass changes what :meth:`cluster` hands out (e.g. no edges, propagated features)."""

    def __init__(self, source: ClusterSource) -> None:
        self.source = source

    @property
    def num_nodes(self) -> int:
        return self.source.num_nodes

    @property
    def num_clusters(self) -> int:
        return self.source.num_clusters

    @property
    def num_classes(self) -> int:
        return self.source.num_classes

    @property
    def feature_dim(self) -> int:
        return self.source.feature_dim

    def cluster(self, i: int, *, features: bool = True) -> Cluster:
        """Cluster ``i`` of the source, as it is."""
        return self.source.cluster(i, features=features)


class EdgelessSource(SourceView):
    """``source``'s clusters without their edges: the feature-only floor's input (each node sees
    itself only), over the same clusters and batches."""

    def cluster(self, i: int, *, features: bool = True) -> Cluster:
        """Cluster ``i`` of the source, its edges dropped."""
        return dataclasses.replace(self.source.cluster(i, features=features), edges=np.zeros((2, 0), dtype=np.int64))


def sampled_parts(num_parts: int, sample: int | None) -> np.ndarray:
    """The clusters (a version's parts) that an evaluation sample of ``sample`` parts trains and
    scores on: ``sample`` distinct indices evenly spaced over ``0 .. num_parts - 1``, ascending;
    every part for ``None``, or for a ``sample`` of at least ``num_parts`` (METIS may leave fewer
    parts than ``partitions.num_parts``, which the configuration check bounds ``sample`` by). A
    function of the two counts alone, both public: the sample draws no randomness and reads no
    data.

    Raises:
        ValueError: ``sample`` is not None or an int >= 1.
    """
    if sample is not None and (isinstance(sample, bool) or not isinstance(sample, numbers.Integral) or sample < 1):
        raise ValueError(f"evaluate.sample_parts: must be an int >= 1, got {sample!r}")
    if sample is None or sample >= num_parts:
        return np.arange(num_parts, dtype=np.int64)
    return np.unique(np.round(np.linspace(0, num_parts - 1, int(sample))).astype(np.int64))


class SampledSource(SourceView):
    """The ``parts`` clusters of ``source`` as a graph of their own: its nodes are the chosen
    clusters' nodes, renumbered ``0 .. k-1`` in ascending global order, and its edges those of
    the source between two of them (the induced subgraph; an edge to a node outside the sample is
    dropped). Cluster ``j`` is the source's cluster ``parts[j]``. Building it reads the chosen
    clusters once without features, for their nodes (``int64 [k]`` held); ``nodes`` holds the
    global ids of the local ones. Post-processing of whatever the source serves.

    Raises:
        ValueError: ``parts`` is empty, not distinct, or names a cluster outside the source.
    """

    def __init__(self, source: ClusterSource, parts: Any) -> None:
        super().__init__(source)
        chosen = np.asarray(parts, dtype=np.int64).reshape(-1)
        if not chosen.size or np.unique(chosen).size != chosen.size or chosen.min() < 0 \
                or chosen.max() >= source.num_clusters:
            raise ValueError(f"SampledSource: parts must be distinct clusters in [0, {source.num_clusters}), "
                             f"got {chosen.tolist()}")
        self.parts = chosen
        self.nodes = np.sort(np.concatenate([source.cluster(int(i), features=False).nodes for i in chosen]))

    @property
    def num_nodes(self) -> int:
        return int(self.nodes.size)

    @property
    def num_clusters(self) -> int:
        return int(self.parts.size)

    def cluster(self, i: int, *, features: bool = True) -> Cluster:
        """The source's cluster ``parts[i]``, renumbered, without its edges that leave the sample."""
        c = self.source.cluster(int(self.parts[i]), features=features)
        dst, inside = local_ids(self.nodes, c.edges[1])
        src, _ = local_ids(self.nodes, c.edges[0][inside])
        return dataclasses.replace(c, nodes=local_ids(self.nodes, c.nodes)[0],
                                   edges=np.ascontiguousarray(np.stack([src, dst[inside]]), dtype=np.int64))


def local_ids(nodes: np.ndarray, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(local, inside)``: the position of each of ``ids`` in the sorted, distinct ``nodes``
    (``local``, int64; meaningful where ``inside``) and whether it is there."""
    pos = np.searchsorted(nodes, ids)
    inside = pos < nodes.size
    inside[inside] = nodes[pos[inside]] == ids[inside]
    return pos.astype(np.int64, copy=False), inside


def public_clusters(graph: GraphData, num_clusters: int, method: str = "metis") -> np.ndarray:
    """The public partitioning of ``graph`` into at most ``num_clusters`` clusters (int64 ``[n]``):
    :func:`~privgraph.parts.partition.partition_assignment`, METIS over the PUBLIC edges only
    (or ``method="ldg"``: one streaming pass over them; ``"hash"``: a fixed hash of the node id),
    so the clusters read no private edge."""
    check_partition_arguments(num_clusters, method)
    return partition_assignment(graph.num_nodes, int(num_clusters), method, lambda: graph.edges_public)[0]


class GraphClusterSource:
    """A :class:`ClusterSource` over an in-memory ``graph`` (needs ``x``, single-label ``y`` and
    the three masks) and ``assignment`` (int ``[n]``, node -> cluster in ``[0, C)``; a cluster may
    be empty): e.g. :func:`public_clusters`. ``edges``: the edge set the clusters carry,
    ``"all"``, ``"public"`` or ``"private"`` (default ``"all"``, as full-batch training).
    ``num_classes``: :func:`~privgraph.evaluate.training.output_classes` of the graph.

    Holds the graph, once both directions of its edges grouped by cluster (``O(n + m)`` int64)
    and, where at most 1/10 of the features are non-zero, their CSR form (``O(nnz)``), which
    :meth:`cluster` hands out (copying a dense row block of a wide bag-of-words matrix on every
    call cost more than the training). ``calls`` counts its calls and ``nodes_served`` the nodes
    handed out (what tests of a bounded batch read)."""

    def __init__(self, graph: GraphData, assignment: Any, *, edges: str = "all") -> None:
        _check_graph(graph)
        if edges not in ("all", "public", "private"):
            raise ValueError(f"GraphClusterSource: edges must be 'all', 'public' or 'private', got {edges!r}")
        a = _check_assignment(assignment, graph.num_nodes)
        self.graph = graph
        self._num_clusters = int(a.max()) + 1 if a.size else 0
        self._order = np.argsort(a, kind="stable")  # within a cluster: ascending node ids
        self._node_bounds = np.searchsorted(a[self._order], np.arange(self._num_clusters + 1))
        e = graph.edges(edges)
        src, dst = np.concatenate([e[0], e[1]]), np.concatenate([e[1], e[0]])
        by = np.argsort(a[src], kind="stable")
        self._src, self._dst = src[by], dst[by]
        self._edge_bounds = np.searchsorted(a[self._src], np.arange(self._num_clusters + 1))
        # lazy: torch, only for a source over an in-memory graph (importing the protocol loads none)
        from privgraph.evaluate.training import output_classes

        self._num_classes = output_classes(graph)
        self._x_csr = sp.csr_array(graph.x) if mostly_zero(graph.x) else None
        self.calls = 0
        self.nodes_served = 0

    @classmethod
    def from_partition(cls, graph: GraphData, num_clusters: int, method: str = "metis", *,
                       edges: str = "all") -> GraphClusterSource:
        """The source over ``graph``'s public partitioning (:func:`public_clusters`)."""
        return cls(graph, public_clusters(graph, num_clusters, method), edges=edges)

    @property
    def num_nodes(self) -> int:
        return self.graph.num_nodes

    @property
    def num_clusters(self) -> int:
        return self._num_clusters

    @property
    def num_classes(self) -> int:
        return self._num_classes

    @property
    def feature_dim(self) -> int:
        return int(self.graph.x.shape[1])

    def cluster(self, i: int, *, features: bool = True) -> Cluster:
        """Cluster ``i`` (``0 <= i < num_clusters``), its arrays copied out of the graph (``x``:
        CSR where the features are sparse; ``None`` without ``features``)."""
        if isinstance(i, bool) or not isinstance(i, numbers.Integral) or not 0 <= int(i) < self._num_clusters:
            raise ValueError(f"GraphClusterSource.cluster: i must be an int in [0, {self._num_clusters}), got {i!r}")
        i = int(i)
        nodes = self._order[self._node_bounds[i]:self._node_bounds[i + 1]]
        lo, hi = self._edge_bounds[i], self._edge_bounds[i + 1]
        g = self.graph
        self.calls += 1
        self.nodes_served += int(nodes.size)
        x = None if not features else g.x[nodes] if self._x_csr is None else self._x_csr[nodes]
        return Cluster(nodes=nodes.copy(), x=x, y=np.asarray(g.y)[nodes].astype(np.int64),
                       train_mask=g.train_mask[nodes], val_mask=g.val_mask[nodes], test_mask=g.test_mask[nodes],
                       edges=np.stack([self._src[lo:hi], self._dst[lo:hi]]))


def _check_graph(graph: Any) -> None:
    if not isinstance(graph, GraphData):
        raise TypeError(f"GraphClusterSource: expected a GraphData, got {type(graph).__name__}")
    missing = [name for name in ("x", "y", *SPLIT_MASKS) if getattr(graph, name) is None]
    if missing:
        raise ValueError(f"GraphClusterSource: the graph has no {', '.join(missing)}; node classification "
                         "needs features x, labels y and train/val/test masks")
    if np.asarray(graph.y).ndim != 1:
        raise ValueError("GraphClusterSource: multi-label y is not supported (single-label int64 y [n] only)")


def _check_assignment(assignment: Any, num_nodes: int) -> np.ndarray:
    a = np.asarray(assignment)
    if a.shape != (num_nodes,) or not np.issubdtype(a.dtype, np.integer):
        raise ValueError(f"GraphClusterSource: assignment must be integers of shape [{num_nodes}], "
                         f"got dtype {a.dtype} shape {list(a.shape)}")
    if a.size and a.min() < 0:
        raise ValueError(f"GraphClusterSource: assignment must be >= 0, got {int(a.min())}")
    return a.astype(np.int64)
