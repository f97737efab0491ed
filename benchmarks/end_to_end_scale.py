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
stage; the workers are processes of their own; the LocalCluster's scheduler lives in the client);
``workers_peak_mb``, the largest peak resident set of a worker process during the stage (reset the
same way in each worker, through ``Client.run``), and ``worker_rss_before_mb``; and the bytes
Dask's TCP comms wrote during the stage: ``scheduler_bytes``, to or from the scheduler (task
graphs, results, heartbeats, the client's requests; each message counted once, at its writer) and
``worker_to_worker_bytes``, between workers (task inputs fetched from another worker). They are
counted by wrapping ``distributed.comm.tcp.TCP.write`` in the client and in every worker (the
benchmark's own measuring calls add a few kB).
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


def _count_comm_bytes(scheduler: str, workers: list[str]) -> None:
    """Wrap ``TCP.write`` in this process: each message's bytes are added to the counters
    ``TCP.written_bytes`` (an attribute of the class, not a global: this function and the two below
    reach the workers pickled by value), as ``scheduler`` when either end of the comm is the
    scheduler's address, ``worker_to_worker`` when an end is a worker's address (and none the
    scheduler's), else ``other`` (a worker and its nanny)."""
    from distributed.comm.tcp import TCP

    if hasattr(TCP, "written_bytes"):
        return
    TCP.written_bytes = {"scheduler": 0, "worker_to_worker": 0, "other": 0}  # type: ignore[attr-defined]
    ends = set(workers)
    write = TCP.write

    async def counted(self: Any, msg: Any, serializers: Any = None, on_error: str = "message") -> int:
        n = await write(self, msg, serializers=serializers, on_error=on_error)
        here = {self.local_address, self.peer_address}
        key = "scheduler" if scheduler in here else "worker_to_worker" if here & ends else "other"
        TCP.written_bytes[key] += n  # type: ignore[attr-defined]
        return n

    TCP.write = counted  # type: ignore[method-assign]


def _reset_process() -> float:
    """Reset this process's peak resident set and byte counters; its resident set now, MiB."""
    from distributed.comm.tcp import TCP

    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")  # VmHWM := VmRSS
    for k in TCP.written_bytes:  # type: ignore[attr-defined]
        TCP.written_bytes[k] = 0  # type: ignore[attr-defined]
    return _status_mb("VmRSS")


def _read_process() -> dict[str, float]:
    """This process's peak resident set (MiB) and bytes written since :func:`_reset_process`."""
    from distributed.comm.tcp import TCP

    return {"peak_mb": _status_mb("VmHWM"), **TCP.written_bytes}  # type: ignore[attr-defined]


def _stage(name: str, run: Callable[[], Any], common: dict[str, Any], client: Any) -> float:
    """Run one stage, print its JSON line, return its seconds."""
    workers_before = client.run(_reset_process)
    before = _reset_process()
    t0 = time.perf_counter()
    run()
    seconds = time.perf_counter() - t0
    growth = _status_mb("VmHWM") - before
    here, there = _read_process(), list(client.run(_read_process).values())
    print(json.dumps({
        "stage": name, "seconds": round(seconds, 2), "client_peak_growth_mb": round(growth, 1),
        "client_rss_before_mb": round(before, 1),
        "workers_peak_mb": round(max(w["peak_mb"] for w in there), 1),
        "worker_rss_before_mb": round(max(workers_before.values()), 1),
        "scheduler_bytes": int(here["scheduler"] + sum(w["scheduler"] for w in there)),
        "worker_to_worker_bytes": int(sum(w["worker_to_worker"] for w in there)),
        **common}), flush=True)
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
        scheduler = ex.client.scheduler.address
        workers = list(ex.client.scheduler_info()["workers"])
        _count_comm_bytes(scheduler, workers)
        ex.client.run(_count_comm_bytes, scheduler, workers)
        total = _stage("ingest", lambda: graph.append(write_partitioned_graph(
            args["edges"], features=args["features"], labels=args["labels"], destination=d / "graph",
            range_size=args["range_size"])), common, ex.client)
        _stage("partition", lambda: partition_partitioned_graph(graph[0], args["parts"], args["method"],
                                                                d / "partition", executor=ex), common, ex.client)
        total += _stage("input", lambda: partitioned_input_from_graph(graph[0], args["parts"], args["method"],
                                                                      d / "input", executor=ex), common, ex.client)
        total += _stage("privatize", lambda: privatize_partitioned(
            d / "input", d / "release", root_seed=np.random.SeedSequence(7), executor=ex, **mechs), common, ex.client)
    print(json.dumps({"stage": "end_to_end", "end_to_end_s": round(total, 2), **common}), flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=1_000_000)
    ap.add_argument("--degree", type=float, default=10.0)
    ap.add_argument("--features", type=int, default=64)
    ap.add_argument("--range-size", type=int, default=100_000)
    ap.add_argument("--parts", type=int, default=8)
    ap.add_argument("--method", choices=("metis", "hash", "ldg"), default="metis")
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
