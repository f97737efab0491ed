"""Cluster-GCN's batch induction: the edges between a batch's nodes, in local ids.

A Cluster-GCN step trains on the union of ``q`` clusters and the edges between their nodes
(``privgraph.evaluate.minibatch._induced_batch``). Each cluster hands its edges out with the first
end its own node and the second anywhere; the batch keeps those whose second end is in the batch
and maps both ends to local ids. Two ways, timed interleaved (``interleaved.paired_times``) on the
same clusters, their results compared for equality:

* ``dense_map`` (privgraph's ``_local_edges``): an int64 ``[n]`` map, -1 but for the batch's nodes, one lookup per
  edge end (O(batch + edges), the map allocated once per training);
* ``sorted_search`` (the reference it replaced): ``np.searchsorted`` of every edge end in the
  batch's nodes through an argsort (O(edges log batch), random access).

The graph: ``--nodes`` nodes, ``--degree`` undirected edges per node on average drawn uniformly
(each stored once per direction, as the clusters hand them out), ``--clusters`` clusters of
consecutive ids (a partitioning's shape; the ratio depends on sizes, not on which nodes), a batch
of ``--per-batch`` of them. One JSON line: both medians and ``sorted_search_over_dense_map``.

Run: ``python benchmarks/induced_batch.py [--nodes 1000000] [--degree 10] [--clusters 8] [--per-batch 4]``
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from interleaved import paired_times  # noqa: E402

from privgraph.evaluate.minibatch import _local_edges as dense_map  # noqa: E402


def _clusters(n: int, degree: float, clusters: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """``(nodes, edges)`` per cluster: consecutive ids, and every edge at one of its nodes, that
    node first."""
    rng = np.random.default_rng(0)
    m = int(n * degree / 2)
    u, v = rng.integers(0, n, (2, m))
    both = np.concatenate([np.stack([u, v]), np.stack([v, u])], axis=1)
    bounds = np.linspace(0, n, clusters + 1).astype(np.int64)
    owner = np.searchsorted(bounds, both[0], side="right") - 1
    order = np.argsort(owner, kind="stable")
    cuts = np.searchsorted(owner[order], np.arange(clusters + 1))
    return [(np.arange(bounds[i], bounds[i + 1], dtype=np.int64), both[:, order[cuts[i]:cuts[i + 1]]])
            for i in range(clusters)]


def sorted_search(nodes: np.ndarray, edges: np.ndarray) -> np.ndarray:
    """The reference: both ends searched in the batch's sorted nodes."""
    sorter = np.argsort(nodes, kind="stable")
    pos = np.minimum(np.searchsorted(nodes, edges, sorter=sorter), nodes.size - 1)
    local = sorter[pos]
    return local[:, nodes[local[1]] == edges[1]]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=1_000_000)
    ap.add_argument("--degree", type=float, default=10.0)
    ap.add_argument("--clusters", type=int, default=8)
    ap.add_argument("--per-batch", type=int, default=4)
    ap.add_argument("--pairs", type=int, default=5)
    a = ap.parse_args()
    parts = _clusters(a.nodes, a.degree, a.clusters)[: a.per_batch]
    nodes = np.concatenate([p[0] for p in parts])
    edges = np.concatenate([p[1] for p in parts], axis=1)
    local_of = np.full(a.nodes, -1, dtype=np.int64)
    if not np.array_equal(dense_map(nodes, edges, local_of), sorted_search(nodes, edges)):
        raise SystemExit("the two ways disagree")
    t = paired_times(lambda: sorted_search(nodes, edges), lambda: dense_map(nodes, edges, local_of), pairs=a.pairs)
    print(json.dumps({"nodes": a.nodes, "batch_nodes": int(nodes.size), "batch_edge_ends": int(edges.shape[1]),
                      "sorted_search_s": round(t["a_seconds"], 4), "dense_map_s": round(t["b_seconds"], 4),
                      "sorted_search_over_dense_map": round(t["ratio"], 2), "pairs": a.pairs}))


if __name__ == "__main__":
    main()
