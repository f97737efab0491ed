"""Cluster-GCN over a stored partitioned version: seconds per epoch and peak memory as the graph grows.

For each ``--nodes`` count (default 10^5 and 10^6), the synthetic generic files of
``benchmarks/ingest_scale.py`` (its generator, imported: 64 float32 features, 10 label classes,
``--degree`` edges per node on average, 20% private) are written, plus a random node split
(``--train`` / ``--val`` of the nodes, the rest test). A child process then makes a partitioned
version as ``flows/privatize_at_scale.py`` does, serially: ingest
(:func:`~privgraph.ingest.partitioned_writer.write_partitioned_graph`), then
:func:`~privgraph.privatize.partitioned_release.privatize_partitioned_graph` (``--parts`` partitions by
``--method`` over the public edges; FeatureRR eps 1 + DPRR eps 1), committed into a local store and
published. A fresh child (the trainer) then builds a
:class:`~privgraph.evaluate.minibatch_parts.VersionPartsSource` over the version and runs
:func:`~privgraph.evaluate.minibatch.fit_cluster_gcn` for ``--epochs`` epochs (no early stop, CPU,
``--clusters-per-batch``, ``--inference``).

Per trainer, one JSON line: ``build_s`` (the source's pass over the parts), ``fit_s`` and
``seconds_per_epoch`` (``fit_s / epochs``: an epoch's training steps and its inference over every
node; ``fit_s`` also holds the trainer's one checking pass), ``cpu_s_per_epoch`` (the trainer's CPU seconds, all
threads: less moved by other load than the wall clock), ``read_s`` / ``read_cpu_s`` (the time spent in
the source's ``cluster`` calls: the store's verified reads, decoding, the spill), ``peak_rss_mb`` (the
trainer's ``VmHWM``), ``import_floor_mb`` (a child that imports the same modules and does nothing),
``train_floor_mb`` (the same child after one epoch over a 2,000-node graph in memory: torch's
thread pools and allocator, the scripted model; the floor the peaks are compared with) and ``graph_mb``, the released graph's in-memory size (features float32, labels int64, the three
masks, the released edges as int64 pairs). With ``--in-memory`` a second trainer loads the version
whole (``store.load_graph``) and trains over
:class:`~privgraph.evaluate.minibatch_source.GraphClusterSource` with the same clusters: the
reference.

Run: ``python benchmarks/minibatch_scale.py [--nodes 100000 1000000] [--epochs 3] [--in-memory]``
"""

from __future__ import annotations

import argparse
import functools
import io
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "benchmarks"))
sys.path.insert(0, str(REPO))

import ingest_scale  # noqa: E402  (the generator of the synthetic files)

PIPE = "synthetic-parts"


def _peak_mb() -> float:
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def _write_split(path: Path, n: int, train: float, val: float) -> None:
    """A random node split as a ``.json`` split file (the ids of each part)."""
    import numpy as np

    order = np.random.default_rng(1).permutation(n)
    a, b = int(n * train), int(n * (train + val))
    path.write_text(json.dumps({"train": sorted(order[:a].tolist()), "val": sorted(order[a:b].tolist()),
                                "test": sorted(order[b:].tolist())}))


def _build(args: dict[str, Any]) -> dict[str, Any]:
    """The child that makes the partitioned version; returns its id, the stages' seconds, the size."""
    import datetime as dt

    import numpy as np

    from privgraph.privatize.partitioned_release import privatize_partitioned_graph
    from privgraph.ingest.partitioned_writer import write_partitioned_graph
    from privgraph.mechanisms import build_mechanism
    from privgraph.publish.release_parts import commit_release_parts, write_release_parts
    from privgraph.storage import LocalStore, code_version
    from privgraph.storage.parts import open_parts_area

    d = Path(args["scratch"])
    _write_split(d / "split.json", args["nodes"], args["train"], args["val"])
    t0 = time.perf_counter()
    graph = write_partitioned_graph(args["edges"], features=args["features"], labels=args["labels"],
                                    split=d / "split.json", destination=d / "graph", range_size=args["range_size"])
    t1 = time.perf_counter()
    store = LocalStore(d / "store")
    area = open_parts_area(store, PIPE, dt.datetime.now(dt.timezone.utc))
    release = privatize_partitioned_graph(
        graph, num_parts=args["parts"], method=args["method"], staging=d / "staging",
        features=build_mechanism("feature_rr", {"epsilon": 1.0}), edges=build_mechanism("dprr", {"epsilon": 1.0}),
        root_seed=np.random.SeedSequence(7), write_parts=functools.partial(write_release_parts, area=area))
    manifest = {"pipeline": PIPE, "ledger": release.ledger.to_dict(), "public_input_fingerprint": "0" * 64,
                "mechanisms": [{"name": "feature_rr", "params": {"epsilon": 1.0}}, {"name": "dprr", "params": {"epsilon": 1.0}}],
                "public": {}, "code_version": code_version(), "validation": {"success": True},
                "num_nodes": release.num_nodes}
    version = commit_release_parts(area, release.parts, release.num_nodes).publish(manifest)
    s = release.graph_summary
    m = int(s["num_edges_public"]) + int(s["num_edges_private"])
    n, f = int(s["num_nodes"]), int(s["num_features"])
    return {"version": version, "ingest_s": round(t1 - t0, 2), "privatize_s": round(time.perf_counter() - t1, 2),
            "released_edges": m, "graph_mb": round((n * f * 4 + n * 8 + 3 * n + m * 16) / 2**20, 1)}


class _Timed:
    """A ClusterSource that times its inner source's ``cluster`` calls."""

    def __init__(self, inner: Any) -> None:
        self.inner, self.read_s, self.read_cpu_s = inner, 0.0, 0.0
        self.num_nodes, self.num_clusters = inner.num_nodes, inner.num_clusters
        self.num_classes, self.feature_dim = inner.num_classes, inner.feature_dim

    def cluster(self, i: int, *, features: bool = True) -> Any:
        t0, c0 = time.perf_counter(), time.process_time()
        try:
            return self.inner.cluster(i, features=features)
        finally:
            self.read_s += time.perf_counter() - t0
            self.read_cpu_s += time.process_time() - c0


def _train(args: dict[str, Any]) -> dict[str, Any]:
    """The trainer child: the source over the stored version (or, ``in_memory``, the version loaded
    whole), then ``fit_cluster_gcn``; the import floor child when ``what`` is ``import``."""
    import numpy as np
    import torch

    from privgraph.evaluate.minibatch import GraphClusterSource, fit_cluster_gcn
    from privgraph.evaluate.minibatch_parts import VersionPartsSource
    from privgraph.storage import LocalStore
    from privgraph.storage.graph_io import NODES, part_prefix

    if args["what"] == "import":
        floor = {"import_floor_mb": round(_peak_mb(), 1)}
        from privgraph.ingest.datasets.synthetic import sbm_graph

        tiny = sbm_graph(2000, num_classes=10, avg_degree=10.0, homophily=0.5, num_features=args.get("num_features", 64),
                         feature_signal=0.5, seed=0)
        fit_cluster_gcn(GraphClusterSource.from_partition(tiny, 8, "hash"), seed=0, epochs=1, patience=None,
                        device="cpu", clusters_per_batch=2, inference=args["inference"])
        return {**floor, "train_floor_mb": round(_peak_mb(), 1)}
    store = LocalStore(Path(args["scratch"]) / "store")
    t0 = time.perf_counter()
    if args["what"] == "in_memory":
        graph, _ = store.load_graph(PIPE, args["version"])
        assignment = np.empty(graph.num_nodes, dtype=np.int64)
        for i in range(args["parts"]):  # the version's parts as the clusters
            blob = store.read_object(PIPE, args["version"], f"{part_prefix(i)}{NODES}")
            assignment[np.load(io.BytesIO(blob))] = i
        source = GraphClusterSource(graph, assignment)
    else:
        source = VersionPartsSource(store, PIPE, args["version"], spill_dir=args["scratch"])
    build_s = time.perf_counter() - t0
    timed = _Timed(source)
    t1, c1 = time.perf_counter(), time.process_time()
    res = fit_cluster_gcn(timed, seed=0, epochs=args["epochs"], patience=None, device="cpu",
                          clusters_per_batch=args["clusters_per_batch"], inference=args["inference"])
    fit_s, fit_cpu_s = time.perf_counter() - t1, time.process_time() - c1
    return {"build_s": round(build_s, 2), "fit_s": round(fit_s, 2), "seconds_per_epoch": round(fit_s / args["epochs"], 2),
            "cpu_s_per_epoch": round(fit_cpu_s / args["epochs"], 2), "read_s": round(timed.read_s, 2),
            "read_cpu_s": round(timed.read_cpu_s, 2), "peak_rss_mb": round(_peak_mb(), 1), "test_acc": round(res["test_acc"], 4),
            "peak_batch_nodes": res["peak_batch_nodes"], "torch_threads": torch.get_num_threads()}


def _child(what: str, args: dict[str, Any]) -> dict[str, Any]:
    r = subprocess.run([sys.executable, __file__, "--child", json.dumps({"what": what, **args})],
                       capture_output=True, text=True, check=False)
    if r.returncode:
        raise SystemExit(f"{what} failed: {r.stderr[-3000:]}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def _one_size(a: argparse.Namespace, n: int) -> None:
    """Files, version and trainers for ``n`` nodes; one JSON line per step."""
    with tempfile.TemporaryDirectory(prefix="minibatch-scale-") as tmp:
        t0 = time.perf_counter()
        files = ingest_scale._child("write_files", d=tmp, n=n, degree=a.degree, features=a.features,
                                    edges_format="parquet")
        common = {"nodes": n, "parts": a.parts, "method": a.method, "epochs": a.epochs,
                  "clusters_per_batch": a.clusters_per_batch, "inference": a.inference}
        print(json.dumps({"step": "write_files", "seconds": round(time.perf_counter() - t0, 2),
                          "input_edges": files["num_edges"], **common}), flush=True)
        args = {"scratch": tmp, "nodes": n, "num_features": a.features, "parts": a.parts, "method": a.method, "range_size": a.range_size,
                "train": a.train, "val": a.val, "epochs": a.epochs, "clusters_per_batch": a.clusters_per_batch,
                "inference": a.inference, **{k: files[k] for k in ("edges", "features", "labels")}}
        built = _child("build", args)
        print(json.dumps({"step": "version", **built, **common}), flush=True)
        floors = _child("import", args)
        for what in ("parts", "in_memory") if a.in_memory else ("parts",):
            r = _child(what, {**args, "version": built["version"]})
            above = r["peak_rss_mb"] - floors["train_floor_mb"]
            print(json.dumps({"step": f"train_{what}", **r, **floors, "graph_mb": built["graph_mb"],
                              "peak_above_train_floor_mb": round(above, 1),
                              "peak_above_train_floor_over_graph": round(above / built["graph_mb"], 3), **common}), flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, nargs="+", default=[100_000, 1_000_000])
    ap.add_argument("--degree", type=float, default=10.0)
    ap.add_argument("--features", type=int, default=64)
    ap.add_argument("--range-size", type=int, default=100_000)
    ap.add_argument("--parts", type=int, default=8)
    ap.add_argument("--method", choices=("metis", "hash", "ldg"), default="metis")
    ap.add_argument("--train", type=float, default=0.1)
    ap.add_argument("--val", type=float, default=0.1)
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--clusters-per-batch", type=int, default=2)
    ap.add_argument("--inference", choices=("layerwise", "batch"), default="layerwise")
    ap.add_argument("--in-memory", action="store_true", help="also train over the version loaded whole")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        args = json.loads(a.child)
        print(json.dumps(_build(args) if args["what"] == "build" else _train(args)), flush=True)
        return
    for n in a.nodes:
        _one_size(a, n)


if __name__ == "__main__":
    main()
