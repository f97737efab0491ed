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

Run: ``python benchmarks/flow_memory.py [--nodes 20000 1000000 3000000] [--degree 20]``
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


def _pipeline(graph: Path, tmp: Path, method: str, parts: int) -> Path:
    cfg = tmp / "pipelines.yaml"
    cfg.write_text(json.dumps({"pipelines": {"scale": {
        "dataset": {"name": "partitioned", "root": str(graph.parent), "options": {"path": graph.name}},
        "features": {"mechanism": "feature_rr", "epsilon": 1.0, "bins": 2, "lower": 0.0, "upper": 1.0},
        "edges": {"mechanism": "dprr", "epsilon": 1.0},
        "budget": {"features": 1.0, "edges": 2.0},
        "partitions": {"num_parts": parts, "method": method, "layout": "files"},
        "executor": "dask", "dask": {"n_workers": 2, "threads_per_worker": 1},
        "storage": str(tmp / "store"), "private_records": str(tmp / "private"),
    }}}))
    return cfg


def _measure(n: int, args: argparse.Namespace) -> dict[str, float]:
    with tempfile.TemporaryDirectory(dir=args.tmp) as d:
        tmp = Path(d)
        files = _child("write_files", d=d, n=n, degree=args.degree, features=args.features, edges_format="parquet")
        graph = tmp / "graph"
        cli = [sys.executable, "-m", "privgraph.cli"]
        subprocess.run([*cli, "ingest", files["edges"], str(graph), "--features", files["features"],
                        "--labels", files["labels"]], check=True, capture_output=True)
        env = {**os.environ, "FLOW_PEAK_FILE": str(tmp / "peak")}
        start = time.perf_counter()
        r = subprocess.run([sys.executable, "-c", WRAPPER, "run", "scale", "--config",
                            str(_pipeline(graph, tmp, args.method, args.parts)), "--no-evaluate"],
                           env=env, capture_output=True, text=True, check=False)
        seconds = time.perf_counter() - start
        if r.returncode:
            raise SystemExit(f"run failed ({r.returncode}): {r.stdout[-2000:]}{r.stderr[-2000:]}")
        return {"nodes": n, "edges": files["num_edges"], "graph_mb": round(files["graph_mb"], 1),
                "run_s": round(seconds, 2), "flow_peak_mb": round(float((tmp / "peak").read_text()), 1)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, nargs="+", default=[20_000, 1_000_000, 3_000_000])
    ap.add_argument("--degree", type=float, default=20.0)
    ap.add_argument("--features", type=int, default=64)
    ap.add_argument("--method", choices=("metis", "hash"), default="hash")
    ap.add_argument("--parts", type=int, default=8)
    ap.add_argument("--tmp", default=None, help="where the graphs are written (default: the system's)")
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
