"""Timings of the foundation mechanisms, as JSON lines.

FeatureRR on a 100,000 x 128 float32 uniform matrix (eps_f = 1, bins 2 and 8) and DPRR on a
100,000-node sparse graph (average degree 10, 20 % of the edges private). Each mechanism runs
alternately with its baseline ``rng.random(number_of_output_entries)`` (mechanism, baseline,
mechanism, baseline, ...: ``PAIRS`` = 3 of each, after an untimed warm-up run): ``seconds`` and
``baseline_uniform_seconds`` are the medians of each side, and ``ratio_to_uniform``, the median of
the per-pair ratios, says how many uniform draws' worth of time one output entry costs. For DPRR
the output entries are the directed reports of ``privatize_nodes``.

Run: ``python benchmarks/foundation_mechanisms.py``
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import numpy as np

# the benchmarks' one way to time a ratio: the thing and its baseline interleaved
from interleaved import paired_times  # type: ignore[import-not-found]

from privgraph.graph import GraphData
from privgraph.mechanisms import DPRR, FeatureRR
from privgraph.mechanisms.edges import private_csr

PAIRS = 3
SEED = 12345


def emit(bench: str, n: int, run: Callable[[], Any], entries: int, *, warmup: bool = True, **extra: Any) -> None:
    """``run`` and ``rng.random(entries)`` timed alternately, then one JSON line."""
    rng = np.random.default_rng(SEED)
    t = paired_times(run, lambda: rng.random(entries), pairs=PAIRS, warmup=warmup)
    seconds = t["a_seconds"]
    print(
        json.dumps(
            {
                "bench": bench,
                "n": n,
                "seconds": round(seconds, 4),
                "entries_per_s": round(entries / seconds),
                "baseline_uniform_seconds": round(t["b_seconds"], 4),
                "ratio_to_uniform": round(t["ratio"], 2),
                "pairs": t["pairs"],
                **extra,
            }
        ),
        flush=True,
    )


def sparse_graph(num_nodes: int, avg_degree: float, rho: float) -> tuple[GraphData, str]:
    """privgraph's SBM generator and public/private split when present, else uniform O(m) edges."""
    try:
        from privgraph.ingest.datasets.split import split_public_private
        from privgraph.ingest.datasets.synthetic import sbm_graph

        g = sbm_graph(num_nodes, avg_degree=avg_degree, num_features=0, seed=SEED)
        return split_public_private(g, rho, seed=SEED + 1), "sbm_graph+split_public_private"
    except ImportError:
        rng = np.random.default_rng(SEED)
        m = int(num_nodes * avg_degree / 2 * 1.01)
        e = rng.integers(0, num_nodes, size=(2, m))
        e = e[:, e[0] != e[1]]
        private = rng.random(e.shape[1]) < rho
        return GraphData.from_edges(num_nodes, e, private=private, deduplicate=True), "uniform_random_edges"


def bench_feature_rr() -> None:
    rows, d = 100_000, 128
    x = np.random.default_rng(SEED).random((rows, d), dtype=np.float32)
    for bins in (2, 8):
        mech = FeatureRR(epsilon=1.0, bins=bins)
        rng = np.random.default_rng(SEED)
        emit(f"feature_rr_bins{bins}", rows, lambda: mech.privatize_rows(x, rng), rows * d, d=d, epsilon=1.0)


def bench_dprr() -> None:
    n = 100_000
    graph, generator = sparse_graph(n, avg_degree=10.0, rho=0.2)
    mech = DPRR(epsilon=1.0)
    cand = graph.private_nodes()
    indptr, indices = private_csr(graph.edges_private, n)
    rng = np.random.default_rng(SEED)
    reports = mech.privatize_nodes(cand, indptr, indices, cand, rng)  # the entries' count; the warm-up
    extra = {
        "generator": generator,
        "edges_private": int(graph.edges_private.shape[1]),
        "v_pri": int(cand.size),
        "epsilon": 1.0,
    }
    emit("dprr_privatize_nodes", n, lambda: mech.privatize_nodes(cand, indptr, indices, cand, rng),
         int(reports.shape[1]), warmup=False, **extra)
    out = mech.privatize(graph, rng)  # the output's size; the warm-up
    emit(
        "dprr_privatize_graph",
        n,
        lambda: mech.privatize(graph, rng),
        int(reports.shape[1]),
        warmup=False,
        noisy_edges_private=int(out.edges_private.shape[1]),
        **extra,
    )


if __name__ == "__main__":
    bench_feature_rr()
    bench_dprr()
