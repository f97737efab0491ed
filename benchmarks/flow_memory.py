"""``privgraph run`` of a partitioned graph on 2 Dask workers: the flow process's own peak memory
against the graph's size, at several graph sizes.

For each ``--nodes`` value a synthetic generic graph is written (``benchmarks/ingest_scale.py``'s
generator: ``--features`` float32 features, 10 labels, ``--degree`` edges per node on average, 20%
private), ingested with ``privgraph ingest``, then published by ``privgraph run --no-evaluate``
with ``dataset: {name: partitioned}``, ``partitions: {layout: files}``, FeatureRR (eps 1) and DPRR
(eps 1), ``executor: dask`` with 2 workers: the path on which the flow process never reads the
graph (``flows/privatize_at_scale.py``). The run's CLI process IS the flow process (the temporary
Prefect server and the Dask workers are processes of their own); its ``VmHWM`` is read at exit.

One JSON line per size: ``graph_mb`` (the graph's arrays: features, labels, edges as int64
pairs), ``run_s``, ``flow_peak_mb``; the last line: each size's growth of the flow's peak over the
smallest size's, as a share of the graph's size (the issue's bound: 10%).

``--evaluate``: the same run WITH the evaluation at scale (Cluster-GCN over the staged version's
parts on the workers, ``flows/privatize_at_scale.py``), on a graph with a signal to learn: a
stochastic block model (``sbm_graph``: 10 classes, homophily 0.8, label-correlated features, a
random 50/25/25 split; 20% of its edges private) written as the generic files plus a split file.
Each line then adds the metrics the run published (the GNN over the release, the feature-only
floor, the public-only reference, the value of the release) and ``stages_s``: each flow task's
seconds, read from the run's own log lines (from one task's end to the next one's: the flow runs
its tasks one after another).

Run: ``python benchmarks/flow_memory.py [--nodes 20000 1000000 3000000] [--degree 20]
[--evaluate --runs 2 --epochs 20]``
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "benchmarks"))

from ingest_scale import _child  # noqa: E402  (the generator, in a child process)

#: the CLI in this process, its VmHWM written to $FLOW_PEAK_FILE at exit
WRAPPER = """
import atexit, os
def _peak():
    with open("/proc/self/status") as f:
        kb = next(int(line.split()[1]) for line in f if line.startswith("VmHWM:"))
    with open(os.environ["FLOW_PEAK_FILE"], "w") as out:
        out.write(str(kb / 1024))
atexit.register(_peak)
from privgraph.cli import main
main()
"""


def _sbm_files(d: str, n: int, degree: float, features: int) -> dict[str, Any]:
    """An SBM graph's generic files under ``d`` (see the module): edges.parquet with the private
    flag, features.npy, labels.npy, split.json."""
    import numpy as np
    import pandas as pd

    from privgraph.ingest.datasets import sbm_graph, split_public_private

    g = split_public_private(sbm_graph(n, num_classes=10, avg_degree=degree, num_features=features, seed=0), 0.2, seed=1)
    root = Path(d)
    e = np.concatenate([g.edges_public, g.edges_private], axis=1)
    flag = np.r_[np.zeros(g.edges_public.shape[1], bool), np.ones(g.edges_private.shape[1], bool)]
    pd.DataFrame({"src": e[0], "dst": e[1], "private": flag}).to_parquet(root / "edges.parquet")
    np.save(root / "features.npy", g.x)
    np.save(root / "labels.npy", g.y)
    (root / "split.json").write_text(json.dumps({k: np.flatnonzero(getattr(g, f"{k}_mask")).tolist()
                                                 for k in ("train", "val", "test")}))
    return {"edges": str(root / "edges.parquet"), "features": str(root / "features.npy"),
            "labels": str(root / "labels.npy"), "split": str(root / "split.json"), "num_edges": int(e.shape[1]),
            "graph_mb": (g.x.nbytes + g.y.nbytes + e.shape[1] * 16) / 2**20}


#: a Prefect log line of the run: its time and the task run that finished
FINISHED = re.compile(r"^(\d\d:\d\d:\d\d\.\d+) \| \w+ +\| Task run '([^']+)' - Finished in state (\w+)")
STARTED = re.compile(r"^(\d\d:\d\d:\d\d\.\d+) \| ")


def _stage_seconds(log: str) -> dict[str, float]:
    """Each task's seconds from the run's log: from the previous task's end (the first: the first
    log line) to its own end. A task name's run suffix (``-abc``) is dropped."""
    times = [m.group(1) for m in map(STARTED.match, log.splitlines()) if m]
    if not times:
        return {}
    t = lambda s: dt.datetime.strptime(s, "%H:%M:%S.%f")  # noqa: E731
    last, out = t(times[0]), {}
    for m in filter(None, map(FINISHED.match, log.splitlines())):
        now = t(m.group(1))
        name = re.sub(r"-[0-9a-z]{3,}$", "", m.group(2))
        out[name] = round(out.get(name, 0.0) + (now - last).total_seconds() % 86400, 2)
        last = now
    return out


def _pipeline(graph: Path, tmp: Path, method: str, parts: int, evaluate: dict[str, Any] | None = None) -> Path:
    cfg = tmp / "pipelines.yaml"
    cfg.write_text(json.dumps({"pipelines": {"scale": {
        "dataset": {"name": "partitioned", "root": str(graph.parent), "options": {"path": graph.name}},
        "features": {"mechanism": "feature_rr", "epsilon": 1.0, "bins": 2, "lower": 0.0, "upper": 1.0},
        "edges": {"mechanism": "dprr", "epsilon": 1.0},
        "budget": {"features": 1.0, "edges": 2.0},
        "partitions": {"num_parts": parts, "method": method, "layout": "files"},
        "executor": "dask", "dask": {"n_workers": 2, "threads_per_worker": 1},
        "storage": str(tmp / "store"), "private_records": str(tmp / "private"),
        **({"evaluate": evaluate} if evaluate else {}),
    }}}))
    return cfg


def _measure(n: int, args: argparse.Namespace) -> dict[str, float]:
    with tempfile.TemporaryDirectory(dir=args.tmp) as d:
        tmp = Path(d)
        if args.evaluate:
            files = _sbm_files(d, n, args.degree, args.features)
        else:
            files = _child("write_files", d=d, n=n, degree=args.degree, features=args.features, edges_format="parquet")
        graph = tmp / "graph"
        cli = [sys.executable, "-m", "privgraph.cli"]
        split = ["--split", files["split"]] if args.evaluate else []
        subprocess.run([*cli, "ingest", files["edges"], str(graph), "--features", files["features"],
                        "--labels", files["labels"], *split], check=True, capture_output=True)
        env = {**os.environ, "FLOW_PEAK_FILE": str(tmp / "peak")}
        evaluate = {"runs": args.runs, "epochs": args.epochs} if args.evaluate else None
        start = time.perf_counter()
        r = subprocess.run([sys.executable, "-c", WRAPPER, "run", "scale", "--config",
                            str(_pipeline(graph, tmp, args.method, args.parts, evaluate)),
                            *(["--json"] if args.evaluate else ["--no-evaluate"])],
                           env=env, capture_output=True, text=True, check=False)
        seconds = time.perf_counter() - start
        if r.returncode:
            raise SystemExit(f"run failed ({r.returncode}): {r.stdout[-2000:]}{r.stderr[-2000:]}")
        row = {"nodes": n, "edges": files["num_edges"], "graph_mb": round(files["graph_mb"], 1),
               "run_s": round(seconds, 2), "flow_peak_mb": round(float((tmp / "peak").read_text()), 1)}
        if args.evaluate:
            m = json.loads(r.stdout.strip().splitlines()[-1])["metrics"]
            row.update(stages_s=_stage_seconds(r.stderr), runs=m["runs"], gnn=m["private"]["test_acc_mean"],
                       feature_only=m["feature_only"]["test_acc_mean"], public_only=m["public_only"]["test_acc_mean"],
                       value_of_release=m["value_of_release"], evaluation=m["evaluation"])
        return row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, nargs="+", default=[20_000, 1_000_000, 3_000_000])
    ap.add_argument("--degree", type=float, default=20.0)
    ap.add_argument("--features", type=int, default=64)
    ap.add_argument("--method", choices=("metis", "hash", "ldg"), default="hash")
    ap.add_argument("--parts", type=int, default=8)
    ap.add_argument("--tmp", default=None, help="where the graphs are written (default: the system's)")
    ap.add_argument("--evaluate", action="store_true", help="run with the evaluation at scale, on an SBM graph")
    ap.add_argument("--runs", type=int, default=2, help="--evaluate: evaluation runs")
    ap.add_argument("--epochs", type=int, default=20, help="--evaluate: epochs per training")
    args = ap.parse_args()
    rows = []
    for n in args.nodes:
        rows.append(_measure(n, args))
        print(json.dumps(rows[-1]), flush=True)
    base = rows[0]
    print(json.dumps({"growth_over_smallest": [
        {"nodes": r["nodes"], "flow_peak_growth_mb": round(r["flow_peak_mb"] - base["flow_peak_mb"], 1),
         "share_of_graph": round((r["flow_peak_mb"] - base["flow_peak_mb"]) / r["graph_mb"], 4)} for r in rows[1:]]}))


if __name__ == "__main__":
    main()
