"""The flow at scale: ingest -> partition -> partitioned input -> privatize, on Dask workers.

The synthetic generic files of ``benchmarks/ingest_scale.py`` (its generator, imported: ``--nodes``
nodes, ``--features`` float32 features, 10 label classes, ``--degree`` edges per node on average,
20% private) are written once. Then, for each ``--workers`` count, a fresh child process (the
client) opens a Dask LocalCluster of that many workers (1 thread each) and runs, timed stage by
stage:

* ``ingest``: :func:`~privgraph.ingest.partitioned_writer.write_partitioned_graph` (in the client:
  the streaming writer, bounded memory);
* ``partition``: :func:`~privgraph.ingest.partitioned_stage.partition_partitioned_graph` alone
  (one task), into a scratch directory;
* ``input``: :func:`~privgraph.ingest.partitioned_stage.partitioned_input_from_graph` (which
  partitions again as its first task: ``partition`` is shown on its own, not added);
* ``privatize``: :func:`~privgraph.privatize.partitioned.privatize_partitioned`, FeatureRR eps 1 +
  DPRR eps 1.

Per stage: ``seconds`` and ``client_peak_growth_mb``, the client's peak resident set during the
stage above its resident set before (``VmHWM`` reset through ``/proc/self/clear_refs`` before each
stage; the workers are processes of their own; the LocalCluster's scheduler lives in the client).
``end_to_end_s`` is ingest + input + privatize; the last line holds the ratio of the first worker
count's end-to-end seconds to each other's.

Run: ``python benchmarks/end_to_end_scale.py [--nodes 1000000] [--workers 1 2]``
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "benchmarks"))
sys.path.insert(0, str(REPO))

import ingest_scale  # noqa: E402  (the generator of the synthetic files)


def _status_mb(key: str) -> float:
    """``key`` (``VmRSS``, ``VmHWM``) of this process, in MiB."""
    for line in open("/proc/self/status"):
        if line.startswith(key + ":"):
            return int(line.split()[1]) / 1024
    return float("nan")


def _stage(name: str, run: Callable[[], Any], common: dict[str, Any]) -> float:
    """Run one stage, print its JSON line, return its seconds."""
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")  # VmHWM := VmRSS
    before = _status_mb("VmRSS")
    t0 = time.perf_counter()
    run()
    seconds = time.perf_counter() - t0
    growth = _status_mb("VmHWM") - before
    print(json.dumps({"stage": name, "seconds": round(seconds, 2), "client_peak_growth_mb": round(growth, 1),
                      "client_rss_before_mb": round(before, 1), **common}), flush=True)
    return seconds


def _client(args: dict[str, Any]) -> None:
    """One end-to-end run on a LocalCluster of ``args["workers"]`` workers (a child process)."""
    import numpy as np

    from privgraph.ingest.partitioned_stage import partition_partitioned_graph, partitioned_input_from_graph
    from privgraph.ingest.partitioned_writer import write_partitioned_graph
    from privgraph.privatize.mechanisms import build_mechanism
    from privgraph.privatize.partitioned import privatize_partitioned
    from tasks.dask_executor import DaskExecutor

    d = Path(args["scratch"])
    common = {"workers": args["workers"], "nodes": args["nodes"], "parts": args["parts"], "method": args["method"]}
    mechs = {"features": build_mechanism("feature_rr", {"epsilon": 1.0}),
             "edges": build_mechanism("dprr", {"epsilon": 1.0})}
    graph: list[Any] = []
    with DaskExecutor(n_workers=args["workers"], threads_per_worker=1) as ex:
        ex.client.run(lambda: None)  # the workers up before the clock starts
        total = _stage("ingest", lambda: graph.append(write_partitioned_graph(
            args["edges"], features=args["features"], labels=args["labels"], destination=d / "graph",
            range_size=args["range_size"])), common)
        _stage("partition", lambda: partition_partitioned_graph(graph[0], args["parts"], args["method"],
                                                                d / "partition", executor=ex), common)
        total += _stage("input", lambda: partitioned_input_from_graph(graph[0], args["parts"], args["method"],
                                                                      d / "input", executor=ex), common)
        total += _stage("privatize", lambda: privatize_partitioned(
            d / "input", d / "release", root_seed=np.random.SeedSequence(7), executor=ex, **mechs), common)
    print(json.dumps({"stage": "end_to_end", "end_to_end_s": round(total, 2), **common}), flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=1_000_000)
    ap.add_argument("--degree", type=float, default=10.0)
    ap.add_argument("--features", type=int, default=64)
    ap.add_argument("--range-size", type=int, default=100_000)
    ap.add_argument("--parts", type=int, default=8)
    ap.add_argument("--method", choices=("metis", "hash"), default="metis")
    ap.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--child", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        _client(json.loads(a.child))
        return
    with tempfile.TemporaryDirectory(prefix="end-to-end-scale-") as tmp:
        t0 = time.perf_counter()
        files = ingest_scale._child("write_files", d=tmp, n=a.nodes, degree=a.degree, features=a.features,
                                    edges_format="parquet")
        print(json.dumps({"stage": "write_files", "seconds": round(time.perf_counter() - t0, 2), "nodes": a.nodes,
                          "num_edges": files["num_edges"], "features": a.features,
                          "graph_mb": round(files["graph_mb"], 1)}), flush=True)
        ends = {}
        for w in a.workers:
            scratch = Path(tmp) / f"run-{w}"
            scratch.mkdir()
            child = {"workers": w, "nodes": a.nodes, "parts": a.parts, "method": a.method, "scratch": str(scratch),
                     "range_size": a.range_size, **{k: files[k] for k in ("edges", "features", "labels")}}
            r = subprocess.run([sys.executable, __file__, "--child", json.dumps(child)], capture_output=True,
                               text=True, check=False)
            sys.stdout.write(r.stdout)
            if r.returncode:
                raise SystemExit(f"the run on {w} worker(s) failed: {r.stderr[-3000:]}")
            ends[w] = json.loads(r.stdout.strip().splitlines()[-1])["end_to_end_s"]
        first = a.workers[0]
        print(json.dumps({"stage": "ratios", **{f"end_to_end_{first}_over_{w}": round(ends[first] / ends[w], 2)
                                                for w in a.workers[1:]}, "nodes": a.nodes}), flush=True)


if __name__ == "__main__":
    main()
