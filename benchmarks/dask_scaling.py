"""``privatize_graph`` serially and on a Dask LocalCluster of 1, 2, ... workers, with where the time goes.

The graph of issue 28's measurement: a stochastic block model (``--nodes``, default 10^6; average
degree 10, 20% of the edges private, ``--features`` 128), FeatureRR at eps 1 and DPRR at eps 1 over
``--parts`` node partitions. Each executor is timed best of ``--repeats`` after a warm-up run (the
workers import privgraph and numba compiles), and the executor is wrapped so that each line also
says where the time went:

* ``client_s``: the calling process's own work outside the partition maps (slicing the partitions'
  rows, assembling the output, the private CSR, DPRR's symmetrisation of the reports, the merge
  with the public edges, the graph's validation);
* ``map_s``: the time spent inside the maps (the payloads shipped to the workers, the tasks run,
  their results gathered back);
* ``task_s``: the tasks' own compute, summed over partitions (measured inside each task).

``speedup`` is the serial time over the executor's; the output is checked byte-identical to the
serial run's for every worker count (the same seeds, any scheduler). One JSON line per executor.

Run: ``python benchmarks/dask_scaling.py [--nodes 1000000] [--workers 1 2] [--parts 8]``
"""

from __future__ import annotations

import argparse
import functools
import hashlib
import json
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np


def _timed(fn: Callable[..., Any], payload: Any, seed: Any, **shared: Any) -> tuple[float, Any]:
    start = time.perf_counter()
    out = fn(payload, seed, **shared)
    return time.perf_counter() - start, out


class _Measured:
    """An executor wrapped so that each map's wall time and its tasks' own compute are recorded."""

    def __init__(self, inner: Any) -> None:
        self.inner, self.name = inner, inner.name
        self.map_s = self.task_s = 0.0

    def map(self, fn: Callable[..., Any], payloads: Sequence[Any], seeds: Sequence[Any], shared: dict[str, Any]) -> list[Any]:
        start = time.perf_counter()
        pairs = self.inner.map(functools.partial(_timed, fn), payloads, seeds, shared)
        self.map_s += time.perf_counter() - start
        self.task_s += sum(t for t, _ in pairs)
        return [out for _, out in pairs]

    def describe(self) -> dict[str, Any]:
        return self.inner.describe()


def _digest(graph: Any) -> str:
    h = hashlib.sha256()
    for a in (graph.x, graph.edges_public, graph.edges_private):
        h.update(np.ascontiguousarray(a).tobytes())
    return h.hexdigest()[:16]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=1_000_000)
    ap.add_argument("--features", type=int, default=128)
    ap.add_argument("--parts", type=int, default=8)
    ap.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--repeats", type=int, default=2)
    args = ap.parse_args()

    from privgraph.datasets.split import split_public_private
    from privgraph.datasets.synthetic import sbm_graph
    from privgraph.mechanisms import build_mechanism
    from privgraph.parallel import SerialExecutor
    from privgraph.partition import partition_graph
    from privgraph.privatize import privatize_graph
    from tasks.dask_executor import DaskExecutor

    graph = split_public_private(sbm_graph(args.nodes, avg_degree=10.0, num_features=args.features, seed=0), 0.2, seed=1)
    partitioning = partition_graph(graph, args.parts, "hash")
    features = build_mechanism("feature_rr", {"epsilon": 1.0})
    edges = build_mechanism("dprr", {"epsilon": 1.0})
    base = {"nodes": graph.num_nodes, "public_edges": int(graph.edges_public.shape[1]),
            "private_edges": int(graph.edges_private.shape[1]), "features": args.features, "parts": args.parts,
            "mechanisms": "feature_rr eps 1 + dprr eps 1"}

    def measure(executor: Any) -> dict[str, Any]:
        best: dict[str, Any] | None = None
        for i in range(args.repeats + 1):  # the first run warms the workers up
            wrapped = _Measured(executor)
            start = time.perf_counter()
            out = privatize_graph(graph, features=features, edges=edges, partitioning=partitioning,
                                  root_seed=np.random.SeedSequence(7), executor=wrapped)
            total = time.perf_counter() - start
            rec = {"seconds": round(total, 3), "client_s": round(total - wrapped.map_s, 3),
                   "map_s": round(wrapped.map_s, 3), "task_s": round(wrapped.task_s, 3), "output": _digest(out.graph)}
            if i and (best is None or rec["seconds"] < best["seconds"]):
                best = rec
            del out
        assert best is not None
        return best

    serial = measure(SerialExecutor())
    print(json.dumps({**base, "executor": "serial", "workers": 0, **serial, "speedup": 1.0}), flush=True)
    for n in args.workers:
        with DaskExecutor(n_workers=n, threads_per_worker=1) as ex:
            rec = measure(ex)
        rec["speedup"] = round(serial["seconds"] / rec["seconds"], 2)
        rec["same_output"] = rec["output"] == serial["output"]
        print(json.dumps({**base, "executor": "dask", "workers": n, **rec}), flush=True)


if __name__ == "__main__":
    main()
