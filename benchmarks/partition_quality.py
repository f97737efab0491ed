"""The partitioning methods (METIS, streaming LDG, hash): cut edges, balance, seconds and memory.

Two measurements, each printed as JSON lines:

* ``in_memory``: :func:`~privgraph.parts.partition.partition_graph` on real graphs (Cora and
  MUSAE Facebook under ``PRIVGRAPH_DATA_ROOT``, 20% of the edges private; only the public edges
  are read) for ``--parts``: the fraction of public edges cut, the largest part over ``n / P``,
  and seconds (the methods interleaved, ``--rounds`` rounds after a warm-up, medians), with
  METIS's seconds over LDG's as the median of the per-round ratios;
* ``partitioned``: the partition task of the flow at scale
  (:func:`~privgraph.privatize.partitioned_input.partition_partitioned_graph`, run in this process)
  on a partitioned graph written by ``privgraph ingest`` from ``ingest_scale.py``'s synthetic
  files (``--nodes`` nodes, 10 edges per node on average drawn uniformly: no community to find),
  each method in a fresh child process: seconds, the child's peak resident set above its
  resident set before the task (``VmHWM`` reset through ``/proc/self/clear_refs``, after LDG's
  compiled kernel is loaded: the data's memory, not the compiler's), and the cut.

Run: ``PRIVGRAPH_DATA_ROOT=../shared/datasets python benchmarks/partition_quality.py [--nodes 1000000]``
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "benchmarks"))
sys.path.insert(0, str(REPO))

import ingest_scale  # noqa: E402  (the generator of the synthetic files)
from interleaved import interleaved_times, median_ratio  # noqa: E402

METHODS = ("metis", "ldg", "hash")


def _cut(assignment: np.ndarray, edges: np.ndarray) -> float:
    return float(np.mean(assignment[edges[0]] != assignment[edges[1]])) if edges.shape[1] else 0.0


def _in_memory(root: str, parts: list[int], rounds: int) -> None:
    from privgraph.ingest.datasets import load_dataset
    from privgraph.parts.partition import partition_graph

    for name in ("cora", "facebook"):
        g = load_dataset(name, root=root, rho=0.2)
        e = g.edges_public
        for p in parts:
            t = interleaved_times({m: (lambda m=m: partition_graph(g, p, m)) for m in METHODS}, rounds=rounds)
            line: dict[str, Any] = {"measure": "in_memory", "graph": name, "nodes": g.num_nodes,
                                    "public_edges": int(e.shape[1]), "parts": p}
            for m in METHODS:
                part = partition_graph(g, p, m)
                line[m] = {"cut": round(_cut(part.assignment, e), 4),
                           "largest_over_mean": round(max(part.sizes()) * p / g.num_nodes, 3),
                           "seconds": round(t["seconds"][m], 4)}
            line["metis_s_over_ldg_s"] = round(median_ratio(t["samples"]["metis"], t["samples"]["ldg"]), 2)
            print(json.dumps(line), flush=True)


def _status_mb(key: str) -> float:
    for line in open("/proc/self/status"):
        if line.startswith(key + ":"):
            return int(line.split()[1]) / 1024
    return float("nan")


def _child(args: dict[str, Any]) -> None:
    """One method's partition task on the partitioned graph, in this (fresh) process."""
    from privgraph.ingest.partitioned_graph import open_partitioned_graph, read_edge_range
    from privgraph.privatize.partitioned_input import partition_partitioned_graph

    from privgraph.parts.partition import ldg_parts

    graph = open_partitioned_graph(args["graph"])
    ldg_parts(2, 2, [(0, 2, np.array([0, 1, 1]), np.array([1]))])  # the compiled kernel loaded before the reset
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")  # VmHWM := VmRSS
    before = _status_mb("VmRSS")
    t0 = time.perf_counter()
    out = partition_partitioned_graph(graph, args["parts"], args["method"], args["out"])
    seconds = time.perf_counter() - t0
    growth = _status_mb("VmHWM") - before
    assignment = np.load(Path(args["out"]) / "assignment.npy")
    cut = total = 0
    for i in range(graph.num_ranges):
        edges, private = read_edge_range(graph, i)
        pub = edges[:, ~private]
        cut += int(np.count_nonzero(assignment[pub[0]] != assignment[pub[1]]))
        total += pub.shape[1]
    print(json.dumps({"measure": "partitioned", "method": args["method"], "used": out["method"], "nodes": graph.num_nodes,
                      "public_edges": total, "parts": out["num_parts"], "seconds": round(seconds, 2),
                      "peak_growth_mb": round(growth, 1), "cut": round(cut / max(total, 1), 4),
                      "largest_over_mean": round(max(out["sizes"]) * out["num_parts"] / graph.num_nodes, 3)}), flush=True)


def _partitioned(nodes: int, parts: int) -> None:
    from privgraph.ingest.partitioned_writer import write_partitioned_graph

    with tempfile.TemporaryDirectory(prefix="partition-quality-") as tmp:
        files = ingest_scale._child("write_files", d=tmp, n=nodes, degree=10.0, features=1, edges_format="parquet")
        write_partitioned_graph(files["edges"], features=files["features"], labels=files["labels"],
                                destination=Path(tmp) / "graph", range_size=100_000)
        for m in METHODS:
            child = {"graph": str(Path(tmp) / "graph"), "parts": parts, "method": m, "out": str(Path(tmp) / f"p-{m}")}
            r = subprocess.run([sys.executable, __file__, "--child", json.dumps(child)], capture_output=True, text=True,
                               check=False)
            if r.returncode:
                raise SystemExit(f"{m} failed: {r.stderr[-3000:]}")
            sys.stdout.write(r.stdout)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--parts", type=int, nargs="+", default=[8, 32])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--nodes", type=int, default=1_000_000, help="the partitioned graph's nodes (0: skip it)")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        _child(json.loads(a.child))
        return
    _in_memory(os.environ.get("PRIVGRAPH_DATA_ROOT", str(REPO.parent / "shared" / "datasets")), a.parts, a.rounds)
    if a.nodes:
        _partitioned(a.nodes, a.parts[0])


if __name__ == "__main__":
    main()
