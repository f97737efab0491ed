"""Split the nodes of a graph into P disjoint parts (METIS via pymetis, or a hash fallback).

The partition is computed from the PUBLIC edges only, so it never depends on private data; the
ledger may then compose mechanisms applied per part in parallel (disjoint node sets). For per-node
mechanisms the output distribution does not depend on the partition at all; a seeded run's output
depends only on the seed and the partition (see :mod:`privgraph.seeding`).
"""

from __future__ import annotations

import dataclasses
from typing import Literal

import numpy as np

from privgraph.graph import GraphData

__all__ = ["Partitioning", "partition_graph"]


@dataclasses.dataclass(frozen=True)
class Partitioning:
    """``assignment[v]`` is the part of node ``v``; ``parts[i]`` the sorted node ids of part ``i``."""

    assignment: np.ndarray
    method: str

    @property
    def num_parts(self) -> int:
        return int(self.assignment.max()) + 1 if self.assignment.size else 0

    @property
    def parts(self) -> list[np.ndarray]:
        order = np.argsort(self.assignment, kind="stable")
        bounds = np.searchsorted(self.assignment[order], np.arange(self.num_parts + 1))
        return [order[bounds[i] : bounds[i + 1]] for i in range(self.num_parts)]

    def sizes(self) -> list[int]:
        return np.bincount(self.assignment, minlength=self.num_parts).tolist()


def _hash_parts(num_nodes: int, num_parts: int) -> np.ndarray:
    # a fixed multiplicative hash (Knuth) spreads consecutive ids; deterministic, no randomness
    ids = np.arange(num_nodes, dtype=np.uint64)
    h = (ids * np.uint64(2654435761)) & np.uint64(0xFFFFFFFF)
    return (h % np.uint64(num_parts)).astype(np.int64)


def _metis_parts(graph: GraphData, num_parts: int) -> np.ndarray:
    import pymetis

    n = graph.num_nodes
    e = graph.edges_public
    src = np.concatenate([e[0], e[1]])
    dst = np.concatenate([e[1], e[0]])
    order = np.argsort(src, kind="stable")
    adjncy = dst[order].astype(np.int32)
    xadj = np.zeros(n + 1, dtype=np.int32)
    np.cumsum(np.bincount(src, minlength=n), out=xadj[1:])
    _, membership = pymetis.part_graph(num_parts, adjacency=pymetis.CSRAdjacency(xadj, adjncy))
    assignment = np.asarray(membership, dtype=np.int64)
    # METIS may leave a part empty on tiny or edgeless graphs: relabel to 0..P'-1 densely
    _, dense = np.unique(assignment, return_inverse=True)
    return dense.astype(np.int64)


def partition_graph(
    graph: GraphData, num_parts: int, method: Literal["metis", "hash"] = "metis"
) -> Partitioning:
    """Partition the nodes of ``graph`` into at most ``num_parts`` non-empty parts.

    Args:
        graph: the input graph; only its public edges are read.
        num_parts: the number of parts P (>= 1); capped at ``num_nodes``.
        method: ``"metis"`` (pymetis on the public edges, few cut edges) or ``"hash"``
            (a fixed hash of the node id; no dependency on edges at all).

    Runtime: O(n + m_pub) for both methods (METIS is near-linear).
    """
    if isinstance(num_parts, bool) or not isinstance(num_parts, (int, np.integer)) or num_parts < 1:
        raise ValueError(f"num_parts must be an int >= 1, got {num_parts!r}")
    if method not in ("metis", "hash"):
        raise ValueError(f"method must be 'metis' or 'hash', got {method!r}")
    n = graph.num_nodes
    p = int(min(num_parts, max(n, 1)))
    if p == 1 or n == 0:
        return Partitioning(np.zeros(n, dtype=np.int64), method)
    if method == "hash":
        assignment = _hash_parts(n, p)
        _, assignment = np.unique(assignment, return_inverse=True)
        return Partitioning(assignment.astype(np.int64), method)
    if graph.edges_public.shape[1] == 0:
        # METIS needs edges to be meaningful; with none, a hash split is as good and defined
        return Partitioning(_hash_parts(n, p), "hash")
    return Partitioning(_metis_parts(graph, p), method)
