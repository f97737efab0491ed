"""``privatize_graph`` serially and on a Dask LocalCluster of 1, 2, ... workers, with where the time goes.

The graph of issue 28's measurement: a stochastic block model (``--nodes``, default 10^6;
``--degree``, default 10; 20% of the edges private; ``--features``, default 128), FeatureRR at eps 1 and DPRR at eps 1 over
``--parts`` node partitions. The executor is wrapped so that each line also says where the time
went:

* ``client_s``: the calling process's own work outside the partition maps (slicing the partitions'
  rows, assembling the output, the private CSR, DPRR's symmetrisation of the reports, the merge
  with the public edges, the graph's validation);
* ``map_s``: the time spent inside the maps (the payloads shipped to the workers, the tasks run,
  their results gathered back);
* ``task_s``: the tasks' own compute, summed over partitions (measured inside each task).

Every executor (serial, and one Dask LocalCluster per ``--workers`` count, all up at once) first
privatizes a small graph of the same kind (``--warmup-nodes``) in both layouts, so that its
workers have imported privgraph and numba has compiled; then ``--repeats`` rounds (3 by default),
each timing every executor and layout once in turn (serial in memory, serial partitioned, then
each worker count), so that machine load slows the runs of a round alike. ``seconds`` and the
breakdown are the medians over the rounds.

``speedup`` is the serial in-memory time over the executor's, the median of the per-round ratios;
the output is checked byte-identical to the serial run's for every worker count (the same seeds,
any scheduler). One JSON line per executor and layout.

``--layout partitioned`` (or ``both``) times :func:`privgraph.privatize.partitioned.privatize_partitioned`
instead: the graph is written once as a partitioned input (``ingest_s``, not counted), then each
task reads its partition's files and writes its part of the release; ``client_peak_mb`` is the
calling process's peak of traced allocations during one further run (tracemalloc; numpy's arrays
included), against the in-memory layout's. Its output, read back, is checked equal to the serial
in-memory run's, and ``speedup_vs_1`` is its 1-worker time over its n-worker time (the median of
the per-round ratios). Then the
tasks write their part of the VERSION into a LocalStore's parts area (``store_write_s``) and the
client commits it (``store_commit_s``: the id from the parts' checksums, hard links, graph.json;
``store_client_peak_mb``: its traced peak over both); the stored version, loaded, must be the
same graph again (``same_output`` covers all three).

Run: ``python benchmarks/dask_scaling.py [--nodes 1000000] [--workers 1 2] [--parts 8] [--layout both]``
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import hashlib
import json
import shutil
import statistics
import tempfile
import time
import tracemalloc
from pathlib import Path
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

# the benchmarks' one way to time a ratio: the thing and its baseline interleaved
from interleaved import median_ratio  # type: ignore[import-not-found]


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
    """The release's features and edges (public edges in ``(u, v)`` order, as the partitioned
    layout reads them back)."""
    h = hashlib.sha256()
    pub = graph.edges_public
    pub = pub[:, np.argsort(pub[0] * np.int64(graph.num_nodes) + pub[1], kind="stable")]
    for a in (graph.x, pub, graph.edges_private):
        h.update(np.ascontiguousarray(a).tobytes())
    return h.hexdigest()[:16]


def _client_peak_mb(run: Callable[[], Any]) -> float:
    """The calling process's peak of traced allocations (MB) while ``run`` runs."""
    tracemalloc.start()
    try:
        run()
        return round(tracemalloc.get_traced_memory()[1] / 2**20, 1)
    finally:
        tracemalloc.stop()


def _warm_up(executor: Any, small: Any, features: Any, edges: Any, scratch: Path) -> None:
    """Privatize a small graph of the same kind once in both layouts, so that the executor's
    workers have imported privgraph and numba has compiled before anything is timed."""
    from privgraph.parts.partition import partition_graph
    from privgraph.privatize.partitioned import privatize_through_files
    from privgraph.privatize.release import privatize_graph

    parts = partition_graph(small, 4, "hash")
    for run in (privatize_graph, functools.partial(privatize_through_files, staging=scratch / "warm-up")):
        run(small, features=features, edges=edges, partitioning=parts, root_seed=np.random.SeedSequence(1),
            executor=executor)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=1_000_000)
    ap.add_argument("--degree", type=float, default=10.0, help="average degree (20% of the edges private)")
    ap.add_argument("--features", type=int, default=128)
    ap.add_argument("--parts", type=int, default=8)
    ap.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--layout", choices=["memory", "partitioned", "both"], default="both")
    ap.add_argument("--scratch", default=None, help="where the partitioned input and releases go (default: a temp dir)")
    ap.add_argument("--repeats", type=int, default=3,
                    help="rounds, each timing every executor and layout once in turn (medians kept), after a warm-up")
    ap.add_argument("--warmup-nodes", type=int, default=20_000, help="the warm-up graph's size")
    ap.add_argument("--no-peak-memory", action="store_true", help="skip the extra run that traces the client's memory")
    ap.add_argument("--skip-serial-partitioned", action="store_true", help="time the partitioned layout on Dask only")
    args = ap.parse_args()

    from privgraph.ingest.datasets.split import split_public_private
    from privgraph.ingest.datasets.synthetic import sbm_graph
    from privgraph.mechanisms import build_mechanism
    from privgraph.parts.executor import SerialExecutor
    from privgraph.parts.partition import partition_graph
    from privgraph.privatize.partitioned import load_partitioned_release, privatize_partitioned, write_partitioned_input
    from privgraph.publish.release_parts import commit_release_parts, write_release_parts
    from privgraph.storage import LocalStore
    from privgraph.storage.parts import open_parts_area
    from privgraph.privatize.release import privatize_graph
    from tasks.dask_executor import DaskExecutor

    def make(n: int) -> Any:
        return split_public_private(sbm_graph(n, avg_degree=args.degree, num_features=args.features, seed=0), 0.2, seed=1)

    start = time.perf_counter()
    graph, small = make(args.nodes), make(args.warmup_nodes)
    partitioning = partition_graph(graph, args.parts, "hash")
    features = build_mechanism("feature_rr", {"epsilon": 1.0})
    edges = build_mechanism("dprr", {"epsilon": 1.0})
    base = {"nodes": graph.num_nodes, "public_edges": int(graph.edges_public.shape[1]),
            "private_edges": int(graph.edges_private.shape[1]), "features": args.features, "parts": args.parts,
            "mechanisms": "feature_rr eps 1 + dprr eps 1"}
    print(json.dumps({**base, "generated_s": round(time.perf_counter() - start, 1)}), flush=True)
    scratch = Path(tempfile.mkdtemp(prefix="privgraph-dask-scaling-", dir=args.scratch))
    seed = np.random.SeedSequence(7)

    def peak(run: Callable[[], Any]) -> dict[str, float]:
        return {} if args.no_peak_memory else {"client_peak_mb": _client_peak_mb(run)}

    def run_memory(executor: Any, digest: bool) -> dict[str, Any]:
        """One timed in-memory run, with where its time went (and the output's digest)."""
        wrapped = _Measured(executor)
        start = time.perf_counter()
        out = privatize_graph(graph, features=features, edges=edges, partitioning=partitioning,
                              root_seed=seed, executor=wrapped)
        total = time.perf_counter() - start
        rec = {"seconds": total, "client_s": total - wrapped.map_s, "map_s": wrapped.map_s, "task_s": wrapped.task_s}
        if digest:
            rec["output"] = _digest(out.graph)
        del out
        return rec

    def finish_memory(executor: Any, runs: list[dict[str, Any]]) -> dict[str, Any]:
        """The medians of the rounds, then the client's peak in one further run."""
        rec: dict[str, Any] = {k: round(statistics.median(r[k] for r in runs), 3)
                               for k in ("seconds", "client_s", "map_s", "task_s")}
        rec["output"] = runs[0]["output"]
        return {**rec, **peak(lambda: privatize_graph(graph, features=features, edges=edges,
                                                       partitioning=partitioning, root_seed=seed, executor=executor))}

    source, release = scratch / "input", scratch / "release"

    def run_partitioned(executor: Any) -> dict[str, Any]:
        """One timed run of the partitioned layout (the input written once, before the rounds)."""
        shutil.rmtree(release, ignore_errors=True)
        start = time.perf_counter()
        privatize_partitioned(source, release, features=features, edges=edges, root_seed=seed, executor=executor)
        return {"seconds": time.perf_counter() - start}

    def finish_partitioned(executor: Any, runs: list[dict[str, Any]]) -> dict[str, Any]:
        """The median of the rounds; then one further run (traced for the client's peak), its output
        read back, and its parts written into a store."""
        rec: dict[str, Any] = {"seconds": round(statistics.median(r["seconds"] for r in runs), 3)}
        if args.no_peak_memory:
            run_partitioned(executor)
        else:
            rec.update(peak(lambda: run_partitioned(executor)))
        rec["output"] = _digest(load_partitioned_release(source, release))
        rec.update(store_parts(executor, source, release))
        shutil.rmtree(release, ignore_errors=True)
        return rec

    def store_parts(executor: Any, source: Path, out: Path) -> dict[str, Any]:
        """The release's parts written into a LocalStore by the tasks, then committed by the client."""
        store = LocalStore(scratch / "store")
        times: dict[str, float] = {}

        def run() -> Any:
            area = open_parts_area(store, "bench")
            start = time.perf_counter()
            parts = write_release_parts(source, out, area, executor=executor)
            times["store_write_s"] = time.perf_counter() - start
            start = time.perf_counter()
            pending = commit_release_parts(area, parts, graph.num_nodes)
            times["store_commit_s"] = time.perf_counter() - start
            return pending

        pending = run()
        stored = _digest(store.load_graph("bench", pending.version, staged=True)[0])
        pending.abort()
        traced = {} if args.no_peak_memory else {"store_client_peak_mb": _client_peak_mb(lambda: run().abort())}
        return {**{k: round(v, 3) for k, v in times.items()}, **traced, "store_objects": len(pending.objects),
                "stored_output": stored}

    layouts = ["memory", "partitioned"] if args.layout == "both" else [args.layout]
    # every executor up at once, so that the rounds can run them in turn
    configs: list[tuple[str, str, int]] = [("memory", "serial", 0)]
    for layout in layouts:
        if layout == "partitioned" and not args.skip_serial_partitioned:
            configs.append((layout, "serial", 0))
        configs += [(layout, "dask", n) for n in args.workers]
    try:
        with contextlib.ExitStack() as stack:
            executors: dict[int, Any] = {0: SerialExecutor()}
            for n in args.workers:
                executors[n] = stack.enter_context(DaskExecutor(n_workers=n, threads_per_worker=1))
            for ex in executors.values():
                _warm_up(ex, small, features, edges, scratch)
            if "partitioned" in layouts:
                start = time.perf_counter()
                write_partitioned_input(graph, partitioning, source)
                base["ingest_s"] = round(time.perf_counter() - start, 3)
            runs: dict[tuple[str, str, int], list[dict[str, Any]]] = {c: [] for c in configs}
            for r in range(args.repeats):  # each round: every executor and layout once, in turn
                for c in configs:
                    layout, _, n = c
                    runs[c].append(run_memory(executors[n], digest=r == 0) if layout == "memory"
                                   else run_partitioned(executors[n]))
            secs = {c: [x["seconds"] for x in v] for c, v in runs.items()}
            serial_c = ("memory", "serial", 0)
            serial = finish_memory(executors[0], runs[serial_c])
            print(json.dumps({**base, "layout": "memory", "executor": "serial", "workers": 0, **serial, "speedup": 1.0,
                              "rounds": args.repeats}), flush=True)
            first: dict[str, tuple[str, str, int]] = {}  # each layout's first worker count on Dask
            for c in configs[1:]:
                layout, kind, n = c
                rec = finish_memory(executors[n], runs[c]) if layout == "memory" else finish_partitioned(executors[n], runs[c])
                rec["speedup"] = round(median_ratio(secs[serial_c], secs[c]), 2)
                if kind == "dask":
                    ref = first.setdefault(layout, c)
                    rec["speedup_vs_1"] = round(median_ratio(secs[ref], secs[c]), 2)
                rec["same_output"] = rec["output"] == serial["output"] == rec.get("stored_output", rec["output"])
                print(json.dumps({**base, "layout": layout, "executor": kind, "workers": n, **rec,
                                  "rounds": args.repeats}), flush=True)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)

if __name__ == "__main__":
    main()
