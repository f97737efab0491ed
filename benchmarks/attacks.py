"""What the attacks cost, as JSON lines: LinkTeller queries/s and pairs/s, link stealing pairs/s.

LinkTeller answers each query (node u's features scaled by 1 + delta) by scaling row u of the
model's prepared input in place; the reference in the same run prepares the whole perturbed
feature matrix again per query (what a naive API call costs). Both give identical scores (a test
checks it). Datasets: Cora and MUSAE Facebook from ``$PRIVGRAPH_DATA_ROOT`` (20% of edges private),
a GCN trained for 50 epochs; CPU, or CUDA when present (``device`` in each line).

Run: ``PRIVGRAPH_DATA_ROOT=../../shared/datasets python benchmarks/attacks.py [--pairs 200] [--datasets cora facebook]``
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np

from privgraph.attacks import link_stealing_unsupervised, linkteller_scores, private_edge_pairs
from privgraph.datasets import data_root, load_dataset
from privgraph.training import fit_node_classifier


def _emit(record: dict) -> None:
    print(json.dumps(record), flush=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--pairs", type=int, default=200, help="private edges attacked (and as many non-edges)")
    ap.add_argument("--datasets", nargs="+", default=["cora", "facebook"])
    args = ap.parse_args()
    for name in args.datasets:
        g = load_dataset(name, root=data_root(), rho=0.2)
        model = fit_node_classifier(g, seed=0, epochs=50, patience=None)
        sample = private_edge_pairs(g, np.random.default_rng(0), max_positive=args.pairs)
        queries = int(np.unique(sample.pairs[0]).size)
        times = {}
        for label, reuse in (("in-place row", True), ("full re-query (reference)", False)):
            t0 = time.perf_counter()
            linkteller_scores(model, sample.pairs, reuse_input=reuse)
            times[label] = time.perf_counter() - t0
        for label, t in times.items():
            _emit({"bench": "attacks/linkteller", "dataset": name, "nodes": g.num_nodes, "method": label,
                   "queries": queries, "pairs": int(sample.labels.size), "seconds": round(t, 3),
                   "queries_per_s": round(queries / t, 1), "pairs_per_s": round(sample.labels.size / t, 1),
                   "speedup_vs_reference": round(times["full re-query (reference)"] / t, 2),
                   "device": str(model.device)})
        post = model.query()
        big = private_edge_pairs(g, np.random.default_rng(1), max_positive=None)
        t0 = time.perf_counter()
        link_stealing_unsupervised(post, big, np.random.default_rng(0))
        t = time.perf_counter() - t0
        _emit({"bench": "attacks/link_stealing", "dataset": name, "pairs": int(big.labels.size),
               "seconds": round(t, 3), "pairs_per_s": round(big.labels.size / t, 1),
               "note": "8 distances + 200 bootstrap replicates of the AUC"})


if __name__ == "__main__":
    main()
