"""Edge mechanisms in Blink's setting, as JSON lines: every edge private, features and labels public,
row-normalised features, Blink's 50/25/25 node split; each cell beside Blink's published accuracy.

Blink's setting (Zhu, Tan, Xiao, CCS 2023; github zhxchd/Blink_GNN): ``src/data/split.py`` splits
``range(n)`` with scikit-learn's ``train_test_split(test_size=0.5, random_state=42)`` (train, rest)
and the rest again with the same call (val, test); that is ``RandomState(42).permutation`` taken
twice (:func:`blink_split`, no scikit-learn needed). Its loaders apply PyG's ``NormalizeFeatures``
(each feature row divided by its sum). Blink's graphs are PyG's: Cora is the same graph here
(Planetoid); Facebook here is MUSAE's raw form (4,714 bag-of-words features, not PyG's 128
processed ones), so its figures compare the mechanisms, not the feature sets.

Each cell runs :func:`privgraph.evaluate.comparison.run_comparison` (scope ``edges``, paired runs:
run ``i`` of every cell trains with the same seed) and prints, per mechanism and epsilon, the GNN
over the release, the feature-only floor, the model chosen by validation accuracy among every
candidate (:data:`~privgraph.evaluate.candidates.CANDIDATES`), the value of the release over the
public data alone (here the floor: nothing else is public) with its paired test, the raw graph's
GNN, and Blink's published accuracy of its three variants (GCN, mean of 30 runs; its ``None`` row
is the raw graph and its MLP row the floor). The GNN is privgraph's GCN at its defaults (hidden
64, Adam 0.01, weight decay 5e-4, dropout 0.5, the epoch of best validation accuracy); Blink's
is a 16-wide GCN whose learning rate, weight decay, dropout and degree share it tunes per cell on
validation loss.

Run: ``PRIVGRAPH_DATA_ROOT=../shared/datasets python benchmarks/blink_setting.py cora --eps 4 6
[--mechanisms blink_hard blink_hybrid dprr] [--runs 5] [--device auto]``

``--release-seconds`` times one Blink-hard release (``degree_share`` 0.1, Blink's prior) per
epsilon instead: ``seconds`` of ``privatize_edges`` as it runs (``path``: ``reach`` where it draws
only the pairs within reach of a posterior of 1/2, ``reports`` where it draws every report), and,
where the reports are at most ``--reference-max-arcs`` (expected), the reports path as the
reference, alternated with it (``--pairs`` of each): ``ratio_to_reports`` is the median per-pair
ratio.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from privgraph.evaluate.candidates import CANDIDATES  # noqa: E402
from privgraph.evaluate.comparison import run_comparison  # noqa: E402
from privgraph.evaluate.comparison_report import summarize  # noqa: E402
from privgraph.graph import GraphData  # noqa: E402
from privgraph.ingest.datasets import load_dataset  # noqa: E402
from privgraph.parts.partition import partition_graph  # noqa: E402

#: the mechanisms a cell can run: label -> parameters other than epsilon
MECHANISMS: dict[str, dict[str, Any]] = {
    "blink_hard": {"mechanism": "blink", "variant": "hard", "degree_share": 0.1},
    "blink_hybrid": {"mechanism": "blink", "variant": "hybrid", "degree_share": 0.1},
    # beyond Blink: the prior shifted for pairs of similar (public) features, shifts fitted by EM
    "blink_hard_features": {"mechanism": "blink", "variant": "hard", "prior": "features"},
    "blink_hybrid_features": {"mechanism": "blink", "variant": "hybrid", "prior": "features"},
    "blink_hard_features_d05": {"mechanism": "blink", "variant": "hard", "prior": "features", "degree_share": 0.05},
    "blink_hybrid_features_d05": {"mechanism": "blink", "variant": "hybrid", "prior": "features",
                                  "degree_share": 0.05},
    # beyond Blink: a second estimate with the pairs the first joins through common neighbours as classes
    "blink_hard_closure": {"mechanism": "blink", "variant": "hard", "closure": True},
    "blink_hard_features_closure_d05": {"mechanism": "blink", "variant": "hard", "prior": "features",
                                        "closure": True, "degree_share": 0.05},
    "blink_hybrid_features_closure_d05": {"mechanism": "blink", "variant": "hybrid", "prior": "features",
                                          "closure": True, "degree_share": 0.05},
    "dprr": {},
    "warner_rr": {},
}

#: Blink's published test accuracy (GCN, mean over 30 runs, to 4 decimals), github zhxchd/Blink_GNN,
#: scripts/output/results.json (the same figures at e55cb7b and 947ec30): variant -> dataset ->
#: epsilon -> accuracy; the key "None" is the raw graph; MLP is the floor (the file's mlp entry)
BLINK_PUBLISHED: dict[str, dict[str, dict[str, float]]] = {
    "hard": {
        "cora": {"1": 0.7116, "2": 0.7121, "3": 0.7103, "4": 0.7701, "5": 0.8445, "6": 0.8637, "7": 0.8673,
                 "8": 0.8707, "None": 0.8682},
        "facebook": {"1": 0.7623, "2": 0.7619, "3": 0.7622, "4": 0.7650, "5": 0.8391, "6": 0.8818, "7": 0.8944,
                     "8": 0.8972, "None": 0.8973},
    },
    "soft": {
        "cora": {"1": 0.6360, "2": 0.6422, "3": 0.7223, "4": 0.8101, "5": 0.8567, "6": 0.8642, "7": 0.8666,
                 "8": 0.8661},
        "facebook": {"1": 0.4984, "2": 0.5085, "3": 0.6777, "4": 0.7986, "5": 0.8568, "6": 0.8857, "7": 0.8939,
                     "8": 0.8964},
    },
    "hybrid": {
        "cora": {"1": 0.7040, "2": 0.7037, "3": 0.6995, "4": 0.7902, "5": 0.8392, "6": 0.8637, "7": 0.8658,
                 "8": 0.8654},
        "facebook": {"1": 0.7424, "2": 0.7446, "3": 0.7425, "4": 0.7887, "5": 0.8361, "6": 0.8758, "7": 0.8933,
                     "8": 0.8962},
    },
}


def blink_split(n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Blink's ``train_val_test_split(n)``: scikit-learn's ``train_test_split(range(n),
    test_size=0.5, random_state=42)`` is ``RandomState(42).permutation(n)``, its first
    ``ceil(n / 2)`` the held-out part and the rest train; the held-out part is split the same way
    (its first ``ceil(k / 2)`` test, the rest val). Returns the three boolean masks."""
    perm = np.random.RandomState(42).permutation(n)
    held = perm[: -(-n // 2)]
    train = perm[-(-n // 2):]
    inner = np.random.RandomState(42).permutation(held.size)
    test, val = held[inner[: -(-held.size // 2)]], held[inner[-(-held.size // 2):]]
    masks = tuple(np.zeros(n, bool) for _ in range(3))
    for mask, ids in zip(masks, (train, val, test), strict=True):
        mask[ids] = True
    return masks


def blink_graph(dataset: str) -> GraphData:
    """The dataset with every edge private, row-normalised features and Blink's split."""
    g = load_dataset(dataset, rho=1.0)
    x = np.asarray(g.x, dtype=np.float64)
    x = (x / np.maximum(x.sum(axis=1, keepdims=True), 1e-12)).astype(np.float32)
    train, val, test = blink_split(g.num_nodes)
    return g.replace(x=x, train_mask=train, val_mask=val, test_mask=test)


def release_seconds(graph: GraphData, args: argparse.Namespace) -> None:
    """One JSON line per epsilon: Blink-hard's release as it runs, against drawing every report."""
    from interleaved import paired_times

    from privgraph.mechanisms.edges.blink import Blink
    from privgraph.mechanisms.edges.edge_arrays import private_csr
    from privgraph.mechanisms.edges.link_posterior import LinkPosterior

    cand = graph.private_nodes()
    indptr, indices = private_csr(graph.edges_private, graph.num_nodes)
    for eps in args.eps:
        m = Blink(epsilon=eps)
        calls: list[str] = []
        as_runs = m.hard_in_reach
        m.hard_in_reach = lambda *a: calls.append("reach") or as_runs(*a)  # type: ignore[method-assign]

        def reports(m: Blink = m) -> np.ndarray:
            rng = np.random.default_rng(args.seed)
            deg = m.noisy_degrees(cand, indptr, indices, cand, rng)
            arcs = m.link_reports(cand, indptr, indices, cand, rng)
            return LinkPosterior(cand, deg, arcs, graph.num_nodes, m.allocate()[1]).hard()

        def release(m: Blink = m) -> np.ndarray:
            return m.privatize_edges(graph, np.random.default_rng(args.seed))

        released = release()
        q = 1.0 / (1.0 + np.exp(m.allocate()[1]))
        expected_arcs = float(q * cand.size * (cand.size - 1))
        deg = m.noisy_degrees(cand, indptr, indices, cand, np.random.default_rng(args.seed))
        reach = LinkPosterior(cand, deg, np.zeros((2, 0), np.int64), graph.num_nodes, m.allocate()[1]).reach_size()
        line: dict[str, Any] = {"dataset": args.dataset, "epsilon": eps, "released_pairs": int(released.shape[1]),
                                "path": "reach" if calls else "reports", "pairs_within_reach": reach,
                                "expected_false_arcs": round(expected_arcs)}
        if expected_arcs <= args.reference_max_arcs:
            t = paired_times(release, reports, pairs=args.pairs, warmup=False)
            line.update(seconds=round(t["a_seconds"], 3), reports_seconds=round(t["b_seconds"], 3),
                        ratio_to_reports=round(t["ratio"], 4))
        else:
            t0 = time.perf_counter()
            release()
            line.update(seconds=round(time.perf_counter() - t0, 3), reports_seconds=None, ratio_to_reports=None)
        print(json.dumps(line), flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dataset", choices=("cora", "facebook"))
    ap.add_argument("--eps", type=float, nargs="+", default=[1, 2, 3, 4, 5, 6, 7, 8])
    ap.add_argument("--mechanisms", nargs="+", default=["blink_hard", "blink_hybrid"], choices=sorted(MECHANISMS))
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--epochs", type=int, default=200)
    ap.add_argument("--device", default="auto")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--release-seconds", action="store_true", help="time one Blink-hard release per epsilon")
    ap.add_argument("--reference-max-arcs", type=float, default=4e7)
    ap.add_argument("--pairs", type=int, default=3)
    args = ap.parse_args()

    graph = blink_graph(args.dataset)
    if args.release_seconds:
        release_seconds(graph, args)
        return
    for eps in args.eps:  # one comparison per epsilon: a line as soon as its cells are done
        t0 = time.perf_counter()
        result = run_comparison(
            graph, scope="edges", mechanisms={m: MECHANISMS[m] for m in args.mechanisms}, epsilons=[eps],
            runs=args.runs, target=args.mechanisms[0], partitioning=partition_graph(graph, 1, "hash"),
            root_seed=np.random.SeedSequence(args.seed),
            train_kwargs={"epochs": args.epochs, "patience": 50, "device": args.device},
        )
        seconds = time.perf_counter() - t0
        summary = summarize(result)
        key = f"{int(eps)}" if float(eps).is_integer() else repr(eps)
        published = {v: BLINK_PUBLISHED[v][args.dataset].get(key) for v in BLINK_PUBLISHED}
        for name in args.mechanisms:
            cell = summary["cells"][name][repr(float(eps))]
            value = cell.get("value_of_release", {})
            print(json.dumps({
                "dataset": args.dataset, "mechanism": name, "epsilon": eps, "runs": args.runs,
                "gnn": round(cell["mean"], 4), "floor": round(cell["feature_only"]["mean"], 4),
                "chosen": round(cell["selected"]["mean"], 4), "chosen_std": round(cell["selected"]["std"], 4),
                "chosen_models": cell["selected"]["models"],
                "candidates": {c.name: round(cell[c.name]["mean"], 4) for c in CANDIDATES if c.name in cell},
                "value_over_public": value.get("mean_difference"), "value_p": value.get("pvalue"),
                "raw_graph": round(summary["clean"]["mean"], 4),
                "blink_published": published, "blink_published_best": max(v for v in published.values() if v),
                "blink_published_raw": BLINK_PUBLISHED["hard"][args.dataset]["None"],
                "seconds_all_cells": round(seconds, 1),
            }), flush=True)


if __name__ == "__main__":
    main()
