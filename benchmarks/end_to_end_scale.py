"""The flow at scale, stage by stage, on Dask workers: ingest -> partition -> privatize -> digests
-> checkpoint -> store [-> evaluate].

The synthetic generic files of ``benchmarks/ingest_scale.py`` (its generator, imported: ``--nodes``
nodes, ``--features`` float32 features, 10 label classes, ``--degree`` edges per node on average,
20% private) are written once; with ``--evaluate``, the stochastic block model of
``benchmarks/flow_memory.py`` instead (a signal to learn and a split). Then, for each ``--workers``
count, a fresh child process (the client: the flow process's part) opens a Dask LocalCluster of
that many workers (1 thread each) and runs the library calls of ``flows/privatize_at_scale.py``,
timed stage by stage:

* ``ingest``: :func:`~privgraph.ingest.partitioned_writer.write_partitioned_graph`, ``privgraph
  ingest``'s streaming writer (in the client, bounded memory; done once per graph, not per run);
* ``partition``: :func:`~privgraph.privatize.partitioned_input.partition_partitioned_graph` alone (one
  task), into a scratch directory; shown on its own, not added (``privatize`` partitions again as
  its first task);
* ``privatize``: :func:`~privgraph.privatize.partitioned_release.privatize_partitioned_graph`, FeatureRR
  eps 1 + DPRR eps 1: partition, the owner's staged input, the mechanisms, the version's objects
  written by the tasks into a local store's parts area;
* ``digests``: the manifest's public fingerprint and the owner's keyed identity of the input
  (:func:`~privgraph.publish.input_digests.input_digests`: the fingerprint a task, the identity
  in the client, where the owner's key stays, side by side);
* ``checkpoint``: :func:`~privgraph.validate.run_checkpoint_from_summaries` over the partitions'
  summaries (in the client, as in the flow);
* ``store``: :func:`~privgraph.publish.release_parts.commit_release_parts` and the manifest
  written last (the parts are committed unread);
* ``evaluate`` (``--evaluate``): :func:`~privgraph.evaluate.scale_metrics.version_metrics_at_scale`
  over the published version, ``--runs`` runs of ``--epochs`` epochs, a task per run
  (``--sample-parts K``: over an evaluation sample of K parts, ``evaluate.sample_parts``).

Per stage: ``seconds`` and ``client_peak_growth_mb``, the client's peak resident set during the
stage above its resident set before (``VmHWM`` reset through ``/proc/self/clear_refs`` before each
stage; the workers are processes of their own; the LocalCluster's scheduler lives in the client);
``workers_peak_mb``, the largest peak resident set of a worker process during the stage (reset the
same way in each worker, through ``Client.run``), and ``worker_rss_before_mb``; the bytes Dask's
TCP comms wrote during the stage: ``scheduler_bytes``, to or from the scheduler (task graphs,
results, heartbeats, the client's requests; each message counted once, at its writer) and
``worker_to_worker_bytes``, between workers (task inputs fetched from another worker), counted by
wrapping ``distributed.comm.tcp.TCP.write`` in the client and in every worker (the benchmark's
own measuring calls add a few kB); and the CPU seconds (user + system, all threads; a worker's
child processes too: METIS runs in one) the client
(``client_cpu_s``) and the workers (``workers_cpu_s``, summed) spent in the stage, with
``cores_busy`` = their sum over ``seconds``: how much of the machine the stage used. A run on one
worker that already keeps more than one core busy (Arrow's and the numerical libraries' own
threads, the client and its scheduler beside it) bounds what a second worker can gain on a
machine with two cores.

``end_to_end_s`` is every stage but ``partition``; ``flow_s`` is that less ``ingest`` (a run of
the flow over a graph ingested before). The last line holds the ratio of the first worker count's
seconds to each other's, for both.

Run: ``python benchmarks/end_to_end_scale.py [--nodes 1000000] [--workers 1 2] [--method metis]
[--evaluate --runs 1 --epochs 20 [--sample-parts 2]]``
"""

from __future__ import annotations

import argparse
import functools
import json
import resource
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

PIPE = "scale"


def _status_mb(key: str) -> float:
    """``key`` (``VmRSS``, ``VmHWM``) of this process, in MiB."""
    for line in open("/proc/self/status"):
        if line.startswith(key + ":"):
            return int(line.split()[1]) / 1024
    return float("nan")


def _cpu_s(children: bool) -> float:
    """This process's CPU seconds so far, user + system, all its threads; with ``children``, also
    its child processes', ended or alive (a worker's METIS server process). The client's children
    are the workers, counted on their own."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    if not children:
        return own.ru_utime + own.ru_stime
    import psutil

    ended = resource.getrusage(resource.RUSAGE_CHILDREN)
    alive = 0.0
    for child in psutil.Process().children(recursive=True):
        try:
            t = child.cpu_times()
            alive += t.user + t.system
        except psutil.Error:  # ended since listed: counted in RUSAGE_CHILDREN once reaped
            pass
    return own.ru_utime + own.ru_stime + ended.ru_utime + ended.ru_stime + alive


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


def _reset_process(children: bool = True) -> dict[str, float]:
    """Reset this process's peak resident set and byte counters; its resident set (MiB) and CPU
    seconds now (:func:`_cpu_s`)."""
    from distributed.comm.tcp import TCP

    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")  # VmHWM := VmRSS
    for k in TCP.written_bytes:  # type: ignore[attr-defined]
        TCP.written_bytes[k] = 0  # type: ignore[attr-defined]
    return {"rss_mb": _status_mb("VmRSS"), "cpu_s": _cpu_s(children)}


def _read_process(children: bool = True) -> dict[str, float]:
    """This process's peak resident set (MiB), CPU seconds (:func:`_cpu_s`) and bytes written
    since :func:`_reset_process`."""
    from distributed.comm.tcp import TCP

    return {"peak_mb": _status_mb("VmHWM"), "cpu_s": _cpu_s(children), **TCP.written_bytes}  # type: ignore[attr-defined]


def _stage(name: str, run: Callable[[], Any], common: dict[str, Any], client: Any) -> float:
    """Run one stage, print its JSON line, return its seconds."""
    workers_before = client.run(_reset_process)
    before = _reset_process(children=False)
    t0 = time.perf_counter()
    run()
    seconds = time.perf_counter() - t0
    here, there = _read_process(children=False), client.run(_read_process)
    client_cpu = here["cpu_s"] - before["cpu_s"]
    workers_cpu = sum(there[w]["cpu_s"] - workers_before[w]["cpu_s"] for w in there)
    print(json.dumps({
        "stage": name, "seconds": round(seconds, 2),
        "client_peak_growth_mb": round(here["peak_mb"] - before["rss_mb"], 1),
        "client_rss_before_mb": round(before["rss_mb"], 1),
        "workers_peak_mb": round(max(w["peak_mb"] for w in there.values()), 1),
        "worker_rss_before_mb": round(max(w["rss_mb"] for w in workers_before.values()), 1),
        "scheduler_bytes": int(here["scheduler"] + sum(w["scheduler"] for w in there.values())),
        "worker_to_worker_bytes": int(sum(w["worker_to_worker"] for w in there.values())),
        "client_cpu_s": round(client_cpu, 2), "workers_cpu_s": round(workers_cpu, 2),
        "cores_busy": round((client_cpu + workers_cpu) / max(seconds, 1e-9), 2),
        **common}), flush=True)
    return seconds


def _config(d: Path, args: dict[str, Any]) -> Any:
    """The pipeline the stages run (as ``flows/privatize_at_scale.py`` reads it)."""
    from privgraph.config.loader import load_config

    path = d / "pipelines.yaml"
    path.write_text(json.dumps({"pipelines": {PIPE: {
        "dataset": {"name": "partitioned", "root": str(d), "options": {"path": "graph"}},
        "features": {"mechanism": "feature_rr", "epsilon": 1.0, "bins": 2, "lower": 0.0, "upper": 1.0},
        "edges": {"mechanism": "dprr", "epsilon": 1.0},
        "budget": {"features": 1.0, "edges": 2.0},
        "partitions": {"num_parts": args["parts"], "method": args["method"], "layout": "files"},
        "storage": str(d / "store"), "private_records": str(d / "private"),
        "evaluate": {"runs": args["runs"], "epochs": args["epochs"], "sample_parts": args["sample_parts"]},
    }}}))
    return load_config(path)


def _client(args: dict[str, Any]) -> None:
    """One end-to-end run on a LocalCluster of ``args["workers"]`` workers (a child process)."""
    import datetime as dt

    import numpy as np

    from privgraph.config.disclosure import disclosure_of
    from privgraph.evaluate.metrics import evaluation_entropy
    from privgraph.guarantee.budget import BudgetPolicy
    from privgraph.privatize.partitioned_release import privatize_partitioned_graph
    from privgraph.privatize.partitioned_input import partition_partitioned_graph
    from privgraph.ingest.partitioned_writer import write_partitioned_graph
    from privgraph.mechanisms import build_mechanism
    from privgraph.publish.input_digests import input_digests
    from privgraph.publish.release_parts import commit_release_parts, write_release_parts
    from privgraph.storage import LocalStore, code_version
    from privgraph.storage.parts import open_parts_area
    from privgraph.validate import run_checkpoint_from_summaries
    from tasks.dask_executor import DaskExecutor

    d = Path(args["scratch"])
    cfgs = _config(d, args)
    cfg, disclosure = cfgs.get(PIPE), disclosure_of(cfgs, PIPE)
    common = {"workers": args["workers"], "nodes": args["nodes"], "parts": args["parts"], "method": args["method"]}
    mechs = {"features": build_mechanism("feature_rr", cfg.features.params()),
             "edges": build_mechanism("dprr", cfg.edges.params())}
    store = LocalStore(d / "store")
    area = open_parts_area(store, PIPE, dt.datetime.now(dt.timezone.utc))
    got: dict[str, Any] = {}
    with DaskExecutor(n_workers=args["workers"], threads_per_worker=1) as ex:
        ex.client.run(lambda: None)  # the workers up before the clock starts
        scheduler = ex.client.scheduler.address
        workers = list(ex.client.scheduler_info()["workers"])
        _count_comm_bytes(scheduler, workers)
        ex.client.run(_count_comm_bytes, scheduler, workers)

        def ingest() -> None:
            got["graph"] = write_partitioned_graph(args["edges"], features=args["features"], labels=args["labels"],
                                                   split=args.get("split"), destination=d / "graph",
                                                   range_size=args["range_size"])

        def privatize() -> None:
            got["release"] = privatize_partitioned_graph(
                got["graph"], num_parts=args["parts"], method=args["method"], staging=d / "private" / "staging",
                root_seed=np.random.SeedSequence(7), executor=ex, **mechs,
                write_parts=functools.partial(write_release_parts, area=area, executor=ex))

        def digests() -> None:
            got["fingerprint"], _ = input_digests(got["graph"], disclosure, b"\x01" * 32, executor=ex)

        def checkpoint() -> None:
            r = got["release"]
            rng = r.stats.get("feature_range")
            got["report"] = run_checkpoint_from_summaries(r.summaries, r.ledger, BudgetPolicy(cfg.budget, cfg.budget_delta),
                                                          feature_range=None if rng is None else tuple(rng))
            assert got["report"].success, got["report"].to_dict()

        def publish() -> None:
            r = got["release"]
            manifest = {"pipeline": PIPE, "ledger": r.ledger.to_dict(), "public_input_fingerprint": got["fingerprint"],
                        "mechanisms": [{"name": "feature_rr", "params": cfg.features.params()},
                                       {"name": "dprr", "params": cfg.edges.params()}],
                        "public": {}, "code_version": code_version(), "validation": got["report"].to_dict(),
                        "num_nodes": r.num_nodes}
            got["version"] = commit_release_parts(area, r.parts, r.num_nodes).publish(manifest)

        def evaluate() -> None:
            from privgraph.evaluate.scale_metrics import version_metrics_at_scale

            got["metrics"] = version_metrics_at_scale(str(store.root), PIPE, got["version"], cfg.evaluate,
                                                      evaluation_entropy(cfg.seed), disclosure, ex)

        ingest_s = _stage("ingest", ingest, common, ex.client)
        _stage("partition", lambda: partition_partitioned_graph(got["graph"], args["parts"], args["method"],
                                                                d / "partition", executor=ex), common, ex.client)
        total = ingest_s
        for name, run in (("privatize", privatize), ("digests", digests), ("checkpoint", checkpoint),
                          ("store", publish), *((("evaluate", evaluate),) if args["evaluate"] else ())):
            total += _stage(name, run, common, ex.client)
    m = got.get("metrics")
    accuracy = {} if m is None else {"gnn": m["private"]["test_acc_mean"], "public_only": m["public_only"]["test_acc_mean"],
                                     "value_of_release": m["value_of_release"]}
    print(json.dumps({"stage": "end_to_end", "end_to_end_s": round(total, 2), "flow_s": round(total - ingest_s, 2),
                      **accuracy, **common}), flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=1_000_000)
    ap.add_argument("--degree", type=float, default=10.0)
    ap.add_argument("--features", type=int, default=64)
    ap.add_argument("--range-size", type=int, default=100_000)
    ap.add_argument("--parts", type=int, default=8)
    ap.add_argument("--method", choices=("metis", "hash", "ldg"), default="metis")
    ap.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--evaluate", action="store_true", help="add the evaluation at scale (an SBM graph with a split)")
    ap.add_argument("--runs", type=int, default=1, help="--evaluate: evaluation runs")
    ap.add_argument("--epochs", type=int, default=20, help="--evaluate: epochs per training")
    ap.add_argument("--sample-parts", type=int, default=None,
                    help="--evaluate: an evaluation sample of this many parts (evaluate.sample_parts)")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        _client(json.loads(a.child))
        return
    with tempfile.TemporaryDirectory(prefix="end-to-end-scale-") as tmp:
        t0 = time.perf_counter()
        if a.evaluate:
            from flow_memory import _sbm_files

            files = _sbm_files(tmp, a.nodes, a.degree, a.features)
        else:
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
                     "range_size": a.range_size, "evaluate": a.evaluate, "runs": a.runs, "epochs": a.epochs,
                     "sample_parts": a.sample_parts,
                     **{k: files[k] for k in ("edges", "features", "labels", "split") if k in files}}
            r = subprocess.run([sys.executable, __file__, "--child", json.dumps(child)], capture_output=True,
                               text=True, check=False)
            sys.stdout.write(r.stdout)
            if r.returncode:
                raise SystemExit(f"the run on {w} worker(s) failed: {r.stderr[-3000:]}")
            ends[w] = json.loads(r.stdout.strip().splitlines()[-1])
        first = a.workers[0]
        print(json.dumps({"stage": "ratios", "nodes": a.nodes, "method": a.method,
                          **{f"{k}_{first}_over_{w}": round(ends[first][k] / ends[w][k], 2)
                             for w in a.workers[1:] for k in ("end_to_end_s", "flow_s")}}), flush=True)


if __name__ == "__main__":
    main()
