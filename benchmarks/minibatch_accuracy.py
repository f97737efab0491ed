"""Cluster-GCN mini-batch evaluation against full batch, as JSON lines: test accuracy, seconds
and peak memory of :func:`~privgraph.evaluate.training.fit_node_classifier` (full batch) and
:func:`~privgraph.evaluate.minibatch.fit_cluster_gcn` over the public partitioning (``--method``:
METIS by default, streaming LDG or hash), paired
by seed (each seed trains full batch, then Cluster-GCN, so machine load slows both alike).

Lines: one per (dataset, seed) (``"kind": "run"``: both test accuracies, their difference, the
seconds of each, Cluster-GCN's best epoch and largest batch); one per dataset (``"summary"``: the
mean difference with its 95% confidence interval, Student's t over the paired seeds, and whether
the issue's target ``|mean difference| <= 0.01`` is met); one per (dataset, method)
(``"memory"``: a child process loads the graph, then trains seed 0; ``train_peak_mib`` is its
peak resident memory during the training above its resident memory before it, from
``/proc/self/status`` after resetting the peak (``/proc/self/clear_refs``); ``ru_maxrss_mib``
the process's whole peak, graph loading included).

Both methods: the GCN's defaults (hidden 64, 200 epochs, patience 25, lr 0.01, weight decay
5e-4, dropout 0.5, average aggregation), all edges public, the datasets' own split. One torch
thread by default (``--threads``): on a shared 2-core machine two threads contend.

Run: ``PRIVGRAPH_DATA_ROOT=../shared/datasets python benchmarks/minibatch_accuracy.py [--datasets cora facebook] [--seeds 5] [--clusters cora=16 facebook=64] [--per-batch cora=4 facebook=8] [--method metis] [--no-memory]``
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

DEFAULT_CLUSTERS = {"cora": 16, "facebook": 64}
DEFAULT_PER_BATCH = {"cora": 4, "facebook": 8}


def _emit(record: dict[str, Any]) -> None:
    print(json.dumps(record), flush=True)


def _pairs(values: list[str], defaults: dict[str, int]) -> dict[str, int]:
    out = dict(defaults)
    for v in values:
        name, _, number = v.partition("=")
        out[name] = int(number)
    return out


def _load(name: str, root: Path) -> Any:
    from privgraph.ingest.datasets import load_dataset

    return load_dataset(name, root=root)


def _fit(method: str, graph: Any, source: Any, seed: int, q: int, device: str) -> dict[str, Any]:
    from privgraph.evaluate.minibatch import fit_cluster_gcn
    from privgraph.evaluate.training import fit_node_classifier

    if method == "full":
        return fit_node_classifier(graph, seed=seed, device=device).result
    return fit_cluster_gcn(source, seed=seed, clusters_per_batch=q, device=device)


def _timed(fn: Any) -> tuple[Any, float]:
    t0 = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t0


def _status_kib(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise KeyError(field)


def child(spec: dict[str, Any]) -> None:
    """One training in a process of its own: its peak memory above what the loaded graph holds."""
    import torch

    from privgraph.evaluate.minibatch import GraphClusterSource

    torch.set_num_threads(spec["threads"])
    graph = _load(spec["dataset"], Path(spec["root"]))
    source = (GraphClusterSource.from_partition(graph, spec["clusters"], spec["partition"])
              if spec["method"] == "cluster" else None)
    reset = True
    try:
        Path("/proc/self/clear_refs").write_text("5")  # reset VmHWM to the current resident size
    except OSError:
        reset = False
    before = _status_kib("VmRSS")
    _fit(spec["method"], graph, source, 0, spec["per_batch"], spec["device"])
    peak = _status_kib("VmHWM")
    _emit({"kind": "memory", "dataset": spec["dataset"], "method": spec["method"], "peak_reset": reset,
           "rss_before_mib": round(before / 1024, 1),
           "train_peak_mib": round((peak - before) / 1024, 1) if reset else None,
           "ru_maxrss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)})


def _summary(name: str, runs: list[dict[str, Any]], graph: Any) -> dict[str, Any]:
    from scipy.stats import t

    d = np.array([r["diff"] for r in runs])
    half = float(t.ppf(0.975, d.size - 1) * d.std(ddof=1) / np.sqrt(d.size)) if d.size > 1 else float("nan")
    mean = float(d.mean())
    return {"kind": "summary", "dataset": name, "nodes": graph.num_nodes, "runs": d.size,
            "full_test_acc": round(float(np.mean([r["full_test_acc"] for r in runs])), 4),
            "cluster_test_acc": round(float(np.mean([r["cluster_test_acc"] for r in runs])), 4),
            "mean_diff": round(mean, 4), "ci95": [round(mean - half, 4), round(mean + half, 4)],
            "target_met": abs(mean) <= 0.01,
            "full_s": round(float(np.mean([r["full_s"] for r in runs])), 2),
            "cluster_s": round(float(np.mean([r["cluster_s"] for r in runs])), 2),
            "peak_batch_nodes": max(r["peak_batch_nodes"] for r in runs)}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--datasets", nargs="+", default=["cora", "facebook"])
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--clusters", nargs="*", default=[], help="name=count, the public parts per dataset")
    ap.add_argument("--method", choices=("metis", "ldg", "hash"), default="metis", help="the public partitioning")
    ap.add_argument("--per-batch", nargs="*", default=[], help="name=q, the clusters of one step")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--no-memory", action="store_true")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        return child(json.loads(args.child))
    import torch

    from privgraph.evaluate.minibatch import GraphClusterSource
    from privgraph.ingest.datasets import data_root

    torch.set_num_threads(args.threads)
    clusters, per_batch = _pairs(args.clusters, DEFAULT_CLUSTERS), _pairs(args.per_batch, DEFAULT_PER_BATCH)
    root = data_root()
    for name in args.datasets:
        graph = _load(name, root)
        source, part_s = _timed(lambda: GraphClusterSource.from_partition(graph, clusters[name], args.method))
        _emit({"kind": "setup", "dataset": name, "nodes": graph.num_nodes, "clusters": source.num_clusters,
               "method": args.method,
               "per_batch": per_batch[name], "partition_s": round(part_s, 2), "threads": args.threads,
               "device": args.device})
        runs = []
        for seed in range(args.seeds):
            full, full_s = _timed(lambda: _fit("full", graph, None, seed, 0, args.device))
            mini, mini_s = _timed(lambda: _fit("cluster", graph, source, seed, per_batch[name], args.device))
            runs.append({"kind": "run", "dataset": name, "seed": seed, "full_test_acc": full["test_acc"],
                         "cluster_test_acc": mini["test_acc"], "diff": round(mini["test_acc"] - full["test_acc"], 4),
                         "full_s": round(full_s, 2), "cluster_s": round(mini_s, 2), "full_best_epoch": full["best_epoch"],
                         "cluster_best_epoch": mini["best_epoch"], "peak_batch_nodes": mini["peak_batch_nodes"]})
            _emit(runs[-1])
        _emit(_summary(name, runs, graph))
        if args.no_memory:
            continue
        for method in ("full", "cluster"):
            spec = {"dataset": name, "root": str(root), "method": method, "clusters": clusters[name], "partition": args.method,
                    "per_batch": per_batch[name], "device": args.device, "threads": args.threads}
            r = subprocess.run([sys.executable, __file__, "--child", json.dumps(spec)], capture_output=True, text=True)
            lines = [ln for ln in r.stdout.splitlines() if ln.startswith("{")]
            _emit(json.loads(lines[-1]) if r.returncode == 0 and lines else
                  {"kind": "memory", "dataset": name, "method": method, "error": r.stderr.strip().splitlines()[-1:]})


if __name__ == "__main__":
    main()
