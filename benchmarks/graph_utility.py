"""The graph-utility report's cost, as JSON lines: privgraph's sparse implementation against
NetworkX (the reference, measured in the same run on a graph NetworkX finishes), then privgraph
alone on a 10^6-node graph.

Each line: the graph (an SBM from privgraph.ingest.datasets.synthetic, average degree 10, its private
half released by DPRR-like random flips is not needed: the report compares the graph with a copy
whose edges are 10% rewired), the seconds of the whole report, and for the reference size the
ratio NetworkX / privgraph over the statistics both compute (triangles, transitivity, average
clustering, assortativity, eigenvector centrality, label-propagation communities and modularity,
90th-percentile distance from 64 BFS sources). After a warm-up report on a 1,000-node graph
(untimed), at the reference size the two run alternately
(NetworkX, privgraph, NetworkX, privgraph, ...: ``--pairs`` of each, 3 by default), so that
machine load slows both alike: the seconds are the medians of each side (privgraph's: half a
report, which computes every statistic on both graphs), the ratio the median of the per-pair
ratios.

Run: ``python benchmarks/graph_utility.py [--big 1000000] [--reference 20000] [--pairs 3]``
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np

# the benchmarks' one way to time a ratio: the thing and its baseline interleaved
from interleaved import paired_times  # type: ignore[import-not-found]

from privgraph.ingest.datasets.synthetic import sbm_graph
from privgraph.evaluate.graph_utility import graph_utility_report


def _emit(record: dict) -> None:
    print(json.dumps(record), flush=True)


def _pair(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    g = sbm_graph(n, avg_degree=10.0, num_features=1, seed=seed)
    e = g.edges("all")
    rng = np.random.default_rng(seed)
    rewired = e.copy()
    pick = rng.random(e.shape[1]) < 0.1
    rewired[1, pick] = rng.integers(0, n, int(pick.sum()))
    return e, rewired


def _networkx(e: np.ndarray, n: int, rng: np.random.Generator) -> float:
    import networkx as nx

    t0 = time.perf_counter()
    g = nx.Graph()
    g.add_nodes_from(range(n))
    g.add_edges_from(e.T.tolist())
    nx.triangles(g)
    nx.transitivity(g)
    nx.average_clustering(g)
    nx.degree_assortativity_coefficient(g)
    nx.eigenvector_centrality_numpy(g)
    comms = nx.community.label_propagation_communities(g)
    nx.community.modularity(g, comms)
    for s in rng.choice(n, 64, replace=False):
        d = np.fromiter(nx.single_source_shortest_path_length(g, int(s)).values(), float)
        np.percentile(d[d > 0], 90)
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--big", type=int, default=1_000_000)
    ap.add_argument("--reference", type=int, default=20_000)
    ap.add_argument("--pairs", type=int, default=3, help="timed runs of NetworkX and privgraph, interleaved")
    args = ap.parse_args()
    e, r = _pair(args.reference, 0)
    graph_utility_report(*_pair(1000, 2), 1000, np.random.default_rng(0))  # warm-up on a small graph (compiles)
    t = paired_times(lambda: _networkx(e, args.reference, np.random.default_rng(0)),
                     lambda: graph_utility_report(e, r, args.reference, np.random.default_rng(0)),
                     pairs=args.pairs, warmup=False)
    ours, ref = t["b_seconds"] / 2, t["a_seconds"]  # the report computes every statistic on both graphs
    _emit({"bench": "graph_utility/one_graph", "nodes": args.reference, "edges": int(e.shape[1]),
           "privgraph_s": round(ours, 3), "networkx_s": round(ref, 3),
           "networkx_over_privgraph": round(2 * t["ratio"], 1), "pairs": t["pairs"]})
    e, r = _pair(args.big, 1)
    t0 = time.perf_counter()
    rep = graph_utility_report(e, r, args.big, np.random.default_rng(0))
    _emit({"bench": "graph_utility/report", "nodes": args.big, "edges": int(e.shape[1]),
           "seconds": round(time.perf_counter() - t0, 1), "degree_ks": round(rep["degree_ks"], 4),
           "community_nmi": round(rep["community_nmi"], 3),
           "triangles_relative_error": round(rep["triangles"]["relative_error"], 3)})


if __name__ == "__main__":
    main()
