"""Training on releases of tens of millions of edges, as JSON lines: seconds and peak memory.

Two parts, each measurement in its own child process (its peak resident memory is the child's
``ru_maxrss``):

* ``build``: the sparse propagation operator and its transpose (``P``, ``P^T``, CSR) of a random
  edge set on Facebook's 22,470 nodes, built by privgraph's counting-sort route
  (:func:`privgraph.evaluate.models.sparse.propagation_pair`) and by the reference route it replaced
  (``sparse_coo_tensor(...).coalesce().to_sparse_csr()`` of each, with a flipped copy of the
  edges): edges -> seconds and peak GiB of each, and the ratios. The two routes' children run
  alternately (counting sort, coalesce, counting sort, ...: ``--pairs`` of each, 3 by default), so
  that machine load slows both alike: the seconds are the medians of each route, ``speedup`` the
  median of the per-pair ratios, the peaks the first pair's.
* ``propagate``: the normalised operator's build (:func:`privgraph.evaluate.label_propagation.propagation_operator`
  against the former three-key lexsort and COO route, the same matrix checked), then label
  propagation's 50 products (eq. 4 of Zhou et al.; Correct and Smooth runs
  two such per base model and option) with 12 columns over the normalised operator of a random edge
  set on Facebook's nodes: :func:`privgraph.evaluate.label_propagation.propagate` (torch CSR products, on
  ``--device``) against the plain scipy loop it replaced, in the same process: seconds, ratio,
  largest difference. Each route and its reference alternate in that process (``--pairs`` of
  each): the seconds are the medians, ``build_speedup`` and ``speedup`` the medians of the
  per-pair ratios.
* ``train``: a real release: MUSAE Facebook as the ``facebook`` pipeline ingests it (20% of the
  edges private, raw features), only the private edges privatized by ``--mechanisms`` at
  ``--epsilons`` (Warner RR and EdgeRand release about half of the 127 million pairs of private
  nodes), then one GCN (the evaluation's, 64 hidden, mean aggregation) trained on every released
  edge for ``--epochs``: released edges, seconds to privatize, seconds per epoch, test accuracy on
  the raw labels, peak GiB.

With ``--post-processing`` the ``train`` part then times a cell's post-processing candidates (label
propagation and Correct and Smooth over the public and released edges, with three base models as a
comparison's cells have). With ``--attack-queries N`` the ``train`` part then attacks the model as a comparison does: link
stealing on every candidate pair, LinkTeller on the pairs of ``N`` queried nodes (seconds per
query, and the time all of the queried nodes would take), with the peak memory after the attacks.

Run: ``PRIVGRAPH_DATA_ROOT=../shared/datasets python benchmarks/large_release.py [--part build propagate
train] [--edges 1e6 4e6 16e6] [--mechanisms warner_rr edge_rand] [--epsilons 1 0.5 0.1] [--epochs 20]
[--device cuda] [--attack-queries 3] [--pairs 3]``
"""

from __future__ import annotations

import argparse
import json
import statistics
import resource
import subprocess
import sys
import time
from typing import Any

# the benchmarks' one way to time a ratio: the thing and its baseline interleaved
from interleaved import median_ratio, paired_times  # type: ignore[import-not-found]

NODES = 22_470  # MUSAE Facebook


def _peak_gib() -> float:
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20, 2)


def _child_build(route: str, edges: int) -> dict[str, Any]:
    import torch

    from privgraph.evaluate.models.sparse import propagation_pair, quiet_sparse_beta

    g = torch.Generator().manual_seed(0)
    und = torch.randint(0, NODES, (2, edges), generator=g)
    ei = torch.cat([und, und.flip(0)], dim=1)  # both directions, as training passes them
    del und
    w = torch.rand(ei.shape[1], generator=g)
    before = _peak_gib()
    start = time.perf_counter()
    if route == "counting_sort":
        op, op_t = propagation_pair(ei, w, NODES)
    else:
        with quiet_sparse_beta():
            shape = (NODES, NODES)
            op = torch.sparse_coo_tensor(ei.flip(0), w, shape).coalesce().to_sparse_csr()
            op_t = torch.sparse_coo_tensor(ei, w, shape).coalesce().to_sparse_csr()
    seconds = time.perf_counter() - start
    return {"seconds": round(seconds, 4), "peak_gib": _peak_gib(), "inputs_gib": before,
            "nnz": int(op._nnz()), "nnz_t": int(op_t._nnz())}


def _operator_reference(e: Any, w: Any) -> Any:
    """Zhou et al.'s normalised adjacency as privgraph built it before: a three-key lexsort, a COO
    conversion, two diagonal products (the reference of the operator's build)."""
    import numpy as np
    import scipy.sparse as sp

    keep = e[0] != e[1]
    lo, hi, w = np.minimum(e[0], e[1])[keep], np.maximum(e[0], e[1])[keep], w[keep]
    order = np.lexsort((-w, hi, lo))
    lo, hi, w = lo[order], hi[order], w[order]
    first = np.ones(lo.size, dtype=bool)
    first[1:] = (lo[1:] != lo[:-1]) | (hi[1:] != hi[:-1])
    lo, hi, w = lo[first], hi[first], w[first]
    a = sp.csr_matrix((np.concatenate([w, w]), (np.concatenate([lo, hi]), np.concatenate([hi, lo]))), shape=(NODES, NODES))
    deg = np.asarray(a.sum(axis=1)).ravel()
    inv_sqrt = np.zeros(NODES)
    inv_sqrt[deg > 0] = deg[deg > 0] ** -0.5
    return (sp.diags(inv_sqrt) @ a @ sp.diags(inv_sqrt)).tocsr()


def _child_propagate(edges: int, device: str, pairs: int) -> dict[str, Any]:
    import numpy as np
    import torch

    from privgraph.evaluate.label_propagation import propagate, propagation_operator

    rng = np.random.default_rng(0)
    e = rng.integers(0, NODES, (2, edges))
    w = np.where(rng.random(edges) < 0.01, 1.0, 0.5)  # a release: 1% public edges (weight 1), the rest released
    out: dict[str, Any] = {}

    def reference_build() -> None:
        out["ref_op"] = _operator_reference(e, w)

    def build() -> None:
        out["s"] = propagation_operator(NODES, e, w)

    tb = paired_times(reference_build, build, pairs=pairs, warmup=False)
    s, ref_op = out.pop("s"), out.pop("ref_op")
    same_operator = bool(abs(s - ref_op).max() < 1e-15 and s.nnz == ref_op.nnz)
    del ref_op
    f0 = rng.random((NODES, 12))  # Correct and Smooth's three base models of four classes, side by side

    def scipy_loop() -> None:
        ref = f0.copy()
        for _ in range(50):  # the reference: the plain scipy loop of eq. 4 (one thread)
            ref = 0.9 * (s @ ref) + 0.1 * f0
        out["ref"] = ref

    def torch_products() -> None:
        out["got"] = propagate(s, f0, device=device)

    propagate(s, f0, iterations=1, device=device)  # warm-up (a GPU's context, the transfer's allocator)
    tp = paired_times(scipy_loop, torch_products, pairs=pairs, warmup=False)
    return {"nnz": int(s.nnz), "device": device, "threads": torch.get_num_threads(),
            "build_s": round(tb["b_seconds"], 2), "reference_build_s": round(tb["a_seconds"], 2),
            "build_speedup": round(tb["ratio"], 2), "same_operator": same_operator,
            "scipy_s": round(tp["a_seconds"], 2),
            "propagate_s": round(tp["b_seconds"], 3), "speedup": round(tp["ratio"], 2), "pairs": pairs,
            "max_abs_difference": float(np.abs(out["got"] - out["ref"]).max())}


def _child_train(mechanism: str, epsilon: float, epochs: int, device: str, queries: int, post: bool) -> dict[str, Any]:
    import numpy as np
    import torch

    from privgraph.evaluate.attacks.link_stealing import pair_distances
    from privgraph.evaluate.attacks.linkteller import linkteller_scores
    from privgraph.evaluate.attacks.pairs import private_edge_pairs
    from privgraph.evaluate.attacks.scoring import roc_auc
    from privgraph.ingest.datasets import load_dataset
    from privgraph.mechanisms import build_mechanism
    from privgraph.parts.partition import partition_graph
    from privgraph.privatize.release import privatize_graph
    from privgraph.evaluate.training import fit_node_classifier

    graph = load_dataset("facebook", rho=0.2)
    start = time.perf_counter()
    result = privatize_graph(graph, features=None, edges=build_mechanism(mechanism, {"epsilon": epsilon}),
                             partitioning=partition_graph(graph, 8), root_seed=np.random.SeedSequence(0))
    privatize_s = time.perf_counter() - start
    version = result.graph
    released = int(version.edges_private.shape[1])
    # the attacks' candidate pairs (private edges of the raw graph and as many non-edges), as a
    # comparison draws them; LinkTeller queries the first `queries` distinct sources only
    sample = private_edge_pairs(graph, np.random.default_rng(0))
    del result, graph
    start = time.perf_counter()
    fit = fit_node_classifier(version, seed=0, epochs=epochs, patience=None, device=device)
    if device != "cpu":
        torch.cuda.synchronize()
    train_s = time.perf_counter() - start
    rec = {"device": device, "released_private_edges": released, "public_edges": int(version.edges_public.shape[1]),
           "privatize_s": round(privatize_s, 1), "train_s": round(train_s, 1),
           "s_per_epoch": round(train_s / fit.result["epochs_run"], 3), "test_acc": round(fit.result["test_acc"], 4),
           "peak_gib": _peak_gib()}
    if device != "cpu":
        rec["gpu_peak_gib"] = round(torch.cuda.max_memory_allocated() / 2**30, 2)
    if post:  # the evaluation's post-processing candidates of a cell (three base models, as a comparison's)
        from privgraph.evaluate.correct_and_smooth import release_correct_and_smooth
        from privgraph.evaluate.label_propagation import release_propagation

        start = time.perf_counter()
        lp = release_propagation(version, 4, device=device)
        cs = release_correct_and_smooth(version, {k: fit.posteriors for k in ("feature_only", "public_edges", "gnn")},
                                        4, device=device)
        rec["post_processing_s"] = round(time.perf_counter() - start, 1)
        rec["release_propagation_acc"] = round(lp["test_acc"], 4)
        rec["correct_and_smooth_acc"] = round(cs["test_acc"], 4)
        rec["peak_gib_post_processing"] = _peak_gib()
    if queries:
        model = fit  # the trained classifier is the attacks' API
        start = time.perf_counter()
        post = model.query()
        distances = pair_distances(post, sample.pairs, "correlation")
        rec["link_stealing_s"] = round(time.perf_counter() - start, 2)
        rec["link_stealing_auc"] = round(roc_auc(-distances, sample.labels), 4)
        keep = np.isin(sample.pairs[0], np.unique(sample.pairs[0])[:queries])
        done: list[float] = []  # the time each query finished
        start = time.perf_counter()
        linkteller_scores(model, sample.pairs[:, keep], progress=lambda k, n: done.append(time.perf_counter()))
        rec["linkteller_queries"] = len(done)
        # the first query carries the setup (the float64 activations and operators, built once)
        per_query = (done[-1] - done[0]) / max(len(done) - 1, 1)
        rec["linkteller_setup_s"] = round(done[0] - start - per_query, 2)
        rec["linkteller_s_per_query"] = round(per_query, 4)
        rec["linkteller_full_s"] = round(rec["linkteller_setup_s"] + per_query * np.unique(sample.pairs[0]).size, 1)
        rec["peak_gib_attacked"] = _peak_gib()
        if device != "cpu":
            rec["gpu_peak_gib_attacked"] = round(torch.cuda.max_memory_allocated() / 2**30, 2)
    return rec


def _in_child(args: list[str]) -> dict[str, Any]:
    out = subprocess.run([sys.executable, __file__, "--child", *args], capture_output=True, text=True)
    if out.returncode:
        tail = out.stderr.strip().splitlines()[-1:] or [f"killed (exit {out.returncode})"]
        return {"error": tail[0]}
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--part", nargs="+", choices=("build", "propagate", "train"), default=["build", "propagate", "train"])
    ap.add_argument("--edges", nargs="+", type=float, default=[1e6, 4e6, 16e6], help="undirected, for build and propagate")
    ap.add_argument("--mechanisms", nargs="+", default=["warner_rr", "edge_rand"])
    ap.add_argument("--epsilons", nargs="+", type=float, default=[1.0, 0.5, 0.1])
    ap.add_argument("--epochs", type=int, default=20)
    ap.add_argument("--device", default="cpu", help="training device of the train part (cpu, cuda)")
    ap.add_argument("--attack-queries", type=int, default=0,
                    help="train part: then attack the model: link stealing on every candidate pair, LinkTeller on "
                         "the pairs of this many queried nodes (seconds per query, peak memory)")
    ap.add_argument("--post-processing", action="store_true",
                    help="train part: then time the evaluation's post-processing candidates of a cell (label propagation "
                         "and Correct and Smooth over the release, three base models)")
    ap.add_argument("--pairs", type=int, default=3,
                    help="build and propagate: interleaved timed runs of each route and its reference")
    ap.add_argument("--child", nargs="+", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        kind, *rest = args.child
        rec = (_child_build(rest[0], int(rest[1])) if kind == "build"
               else _child_propagate(int(rest[0]), rest[1], int(rest[2])) if kind == "propagate"
               else _child_train(rest[0], float(rest[1]), int(rest[2]), rest[3], int(rest[4]), rest[5] == "1"))
        print(json.dumps(rec))
        return
    if "build" in args.part:
        for m in args.edges:
            line: dict[str, Any] = {"part": "build", "undirected_edges": int(m), "nodes": NODES}
            runs: dict[str, list[dict[str, Any]]] = {"counting_sort": [], "coalesce": []}
            for _ in range(args.pairs):  # the two routes' children in turn
                for route, done in runs.items():
                    done.append(_in_child(["build", route, str(int(m))]))
            for route, done in runs.items():
                failed = [r for r in done if "error" in r]
                line[route] = failed[0] if failed else {
                    **done[0], "seconds": round(statistics.median(r["seconds"] for r in done), 2)}
            a, b = line["counting_sort"], line["coalesce"]
            if "error" not in a and "error" not in b:
                line["speedup"] = round(median_ratio([r["seconds"] for r in runs["coalesce"]],
                                                     [r["seconds"] for r in runs["counting_sort"]]), 2)
                line["pairs"] = args.pairs
                line["extra_peak_ratio"] = round((b["peak_gib"] - b["inputs_gib"]) / max(a["peak_gib"] - a["inputs_gib"], 1e-3), 2)
            print(json.dumps(line), flush=True)
    if "propagate" in args.part:
        for m in args.edges:
            rec = {"part": "propagate", "undirected_edges": int(m), "nodes": NODES, "iterations": 50, "columns": 12}
            rec.update(_in_child(["propagate", str(int(m)), args.device, str(args.pairs)]))
            print(json.dumps(rec), flush=True)
    if "train" in args.part:
        for mech in args.mechanisms:
            for eps in args.epsilons:
                rec = {"part": "train", "dataset": "facebook", "mechanism": mech, "epsilon": eps, "epochs": args.epochs}
                rec.update(_in_child(["train", mech, str(eps), str(args.epochs), args.device, str(args.attack_queries),
                                      str(int(args.post_processing))]))
                print(json.dumps(rec), flush=True)


if __name__ == "__main__":
    main()
