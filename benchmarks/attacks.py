"""What the attacks cost, as JSON lines: LinkTeller queries/s and pairs/s, link stealing pairs/s,
the AUC bootstrap and attribute inference's ridge penalty search.

LinkTeller answers each query (node u's features scaled by 1 + delta) from the rows of a GCN that
the perturbation reaches (``local``, the default); the in-place path scales row u of the model's
prepared input and runs a full forward pass; the reference in the same run prepares the whole
perturbed feature matrix again per query (what a naive API call costs). All give the same scores
to float64 rounding (tests check it; each line prints the largest difference). Datasets: Cora and MUSAE Facebook from ``$PRIVGRAPH_DATA_ROOT`` (20% of edges private),
a GCN trained for 50 epochs; CPU, or CUDA when present (``device`` in each line).

The AUC bootstrap sorts once and counts each replicate's wins from multiplicities; the reference
ranks every resample (``roc_auc`` per replicate); the intervals are identical. The ridge search
factorises the smaller Gram matrix once per fold for the whole penalty grid; the reference solves
the (d + 1) x (d + 1) normal equations per penalty and fold (Cora's public rows: [released, neighbour mean] -> raw row).

Every ``speedup_vs_reference`` is the median of per-round ratios of runs interleaved with the
reference, so machine load slows both sides alike: the bootstrap and its reference alternate
(``--rounds`` of each, 3 by default; ``seconds`` the medians); the ridge search and its reference
alternate fold by fold (3 folds: 3 pairs; ``seconds`` the sums over the folds, as one search);
LinkTeller's three paths run in turn on each of ``--rounds`` slices of the queried nodes (each
path once over all pairs, as before, after one untimed query each; ``seconds`` the sums, each
slice's call paying its setup).

Run: ``PRIVGRAPH_DATA_ROOT=../../shared/datasets python benchmarks/attacks.py [--pairs 200] [--datasets cora facebook] [--only linkteller|bootstrap|ridge] [--rounds 3]``
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np

# the benchmarks' one way to time a ratio: the thing and its baseline interleaved
from interleaved import median_ratio, paired_times  # type: ignore[import-not-found]

from privgraph.evaluate.attacks import bootstrap_auc_ci, link_stealing_unsupervised, linkteller_scores, private_edge_pairs, roc_auc
from privgraph.evaluate.attacks.attribute import RIDGE_GRID, _fold_errors, _predict
from privgraph.ingest.datasets import data_root, load_dataset
from privgraph.evaluate.training import fit_node_classifier


def _emit(record: dict) -> None:
    print(json.dumps(record), flush=True)


def _bootstrap_reference(s: np.ndarray, y: np.ndarray, rng: np.random.Generator, replicates: int = 200) -> tuple[float, float]:
    pos, neg = np.flatnonzero(y), np.flatnonzero(~y)
    aucs = [roc_auc(s[i], y[i]) for i in
            (np.concatenate([rng.choice(pos, pos.size), rng.choice(neg, neg.size)]) for _ in range(replicates))]
    lo, hi = np.quantile(aucs, [0.025, 0.975])
    return float(lo), float(hi)


def _normal_equations(f: np.ndarray, y: np.ndarray, lam: float) -> np.ndarray:
    """The reference ridge: the (d + 1) x (d + 1) normal equations, intercept unpenalized."""
    f1 = np.hstack([f, np.ones((f.shape[0], 1))])
    reg = lam * np.eye(f1.shape[1])
    reg[-1, -1] = 0.0
    return np.linalg.solve(f1.T @ f1 + reg, f1.T @ y)


def bench_bootstrap(sizes: tuple[int, ...] = (10_000, 200_000), rounds: int = 3) -> None:
    rng = np.random.default_rng(0)
    for n in sizes:
        y = rng.random(n) < 0.5
        s = np.round(rng.normal(size=n) + 0.3 * y, 2)  # ties, as attack scores have
        out: dict[str, tuple[float, float]] = {}

        def fast() -> None:
            out["fast"] = bootstrap_auc_ci(s, y, np.random.default_rng(1))

        def ref() -> None:
            out["ref"] = _bootstrap_reference(s, y, np.random.default_rng(1))

        t = paired_times(ref, fast, pairs=rounds, warmup=False)
        _emit({"bench": "attacks/bootstrap_auc_ci", "candidates": n, "replicates": 200,
               "seconds": round(t["b_seconds"], 3), "reference_seconds": round(t["a_seconds"], 3),
               "speedup_vs_reference": round(t["ratio"], 2), "pairs": t["pairs"], "identical": out["fast"] == out["ref"]})


def bench_ridge_search(name: str, row_counts: tuple[int, ...] = (140, 1000)) -> None:
    """Rows: as many public rows as Cora's training nodes (``public_nodes: train_mask``) and more."""
    g = load_dataset(name, root=data_root(), rho=0.2)
    x = np.asarray(g.x, dtype=np.float64)
    rng = np.random.default_rng(0)
    for n_rows in row_counts:
        rows = np.sort(rng.choice(g.num_nodes, n_rows, replace=False))
        flipped = np.where(rng.random(x[rows].shape) < 0.27, 1 - x[rows], x[rows])  # a released-like copy
        f, y = np.hstack([flipped, x[rows]]), x[rows]
        folds = rng.permutation(n_rows) % 3
        # fold by fold, the search and its reference in turn (the reference takes minutes on
        # Facebook: the folds are the pairs, at the cost of one search each as before)
        fast, ref = np.zeros(len(RIDGE_GRID)), np.zeros(len(RIDGE_GRID))
        t_fast, t_ref = [], []
        for k in range(3):
            fit, held = folds != k, folds == k
            t0 = time.perf_counter()
            fast += _fold_errors(f[fit], y[fit], f[held], y[held], RIDGE_GRID)
            t_fast.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            ref += np.array([float(((_predict(f[held], _normal_equations(f[fit], y[fit], lam)) - y[held]) ** 2).sum())
                             for lam in RIDGE_GRID])
            t_ref.append(time.perf_counter() - t0)
        _emit({"bench": "attacks/ridge_penalty_search", "dataset": name, "rows": n_rows, "columns": int(f.shape[1]),
               "targets": int(y.shape[1]), "penalties": len(RIDGE_GRID), "seconds": round(sum(t_fast), 3),
               "reference_seconds": round(sum(t_ref), 3), "speedup_vs_reference": round(median_ratio(t_ref, t_fast), 2),
               "pairs": 3,
               "max_relative_difference": float(np.max(np.abs(fast - ref) / ref)),
               "same_penalty": int(np.argmin(fast)) == int(np.argmin(ref))})


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--pairs", type=int, default=200, help="private edges attacked (and as many non-edges)")
    ap.add_argument("--datasets", nargs="+", default=["cora", "facebook"])
    ap.add_argument("--only", choices=["linkteller", "bootstrap", "ridge"], default=None)
    ap.add_argument("--rounds", type=int, default=3,
                    help="bootstrap: timed runs of it and its reference; LinkTeller: slices of the queried nodes")
    args = ap.parse_args()
    if args.only in (None, "bootstrap"):
        bench_bootstrap(rounds=args.rounds)
    if args.only in (None, "ridge"):
        for name in args.datasets:
            bench_ridge_search(name)
    if args.only not in (None, "linkteller"):
        return
    for name in args.datasets:
        g = load_dataset(name, root=data_root(), rho=0.2)
        model = fit_node_classifier(g, seed=0, epochs=50, patience=None)
        sample = private_edge_pairs(g, np.random.default_rng(0), max_positive=args.pairs)
        queries = int(np.unique(sample.pairs[0]).size)
        methods = (("local rows (GCN)", {}), ("in-place row, full forward", {"local": False}),
                   ("full re-query (reference)", {"reuse_input": False}))
        times: dict[str, list[float]] = {label: [] for label, _ in methods}
        scores = {label: np.empty(sample.pairs.shape[1]) for label, _ in methods}
        # the three paths in turn on each slice of the queried nodes: each path answers every
        # query once, as before, and each slice is one round of the ratios
        slices = [c for c in np.array_split(np.unique(sample.pairs[0]), args.rounds) if c.size]
        for _, kw in methods:  # warm-up, untimed: one query per path (numba's compile, the first allocations)
            linkteller_scores(model, sample.pairs[:, :1], **kw)
        for chunk in slices:
            cols = np.flatnonzero(np.isin(sample.pairs[0], chunk))
            for label, kw in methods:
                t0 = time.perf_counter()
                scores[label][cols] = linkteller_scores(model, sample.pairs[:, cols], **kw)
                times[label].append(time.perf_counter() - t0)
        ref, ref_times = scores["full re-query (reference)"], times["full re-query (reference)"]
        for label, ts in times.items():
            t = sum(ts)
            _emit({"bench": "attacks/linkteller", "dataset": name, "nodes": g.num_nodes, "method": label,
                   "queries": queries, "pairs": int(sample.labels.size), "seconds": round(t, 3),
                   "queries_per_s": round(queries / t, 1), "pairs_per_s": round(sample.labels.size / t, 1),
                   "speedup_vs_reference": round(median_ratio(ref_times, ts), 2), "rounds": len(slices),
                   "max_abs_difference": float(np.max(np.abs(scores[label] - ref))), "device": str(model.device)})
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
