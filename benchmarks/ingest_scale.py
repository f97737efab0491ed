"""``privgraph ingest``'s streaming writer against ``load_generic``: seconds and peak memory.

A synthetic generic graph is written in a temporary directory: ``--nodes`` nodes (default 10^6),
``--features`` float32 features per node (default 64, ``features.npy``), labels of 10 classes
(``labels.npy``), ``--degree`` (default 10) edges per node on average, i.e. ``nodes * degree / 2``
distinct undirected edges drawn uniformly, 20% of them marked private, in ``edges.parquet``
(``--edges-format csv`` for ``edges.csv``). The files are written by a child process, and each
measurement runs in a fresh child of its own that reports its seconds and its peak resident set
size: ``peak_rss_mb`` is ``VmHWM`` of ``/proc/self/status`` (the child's own address space),
``ru_maxrss_mb`` its ``ru_maxrss``, which on Linux also counts the parent's peak before ``exec``
(hence the parent writes nothing itself and stays small):

* ``import``: the child that imports the library and does nothing else (the floor of the others);
* ``ingest``: :func:`~privgraph.ingest.partitioned_writer.write_partitioned_graph` into a new
  directory (``--range-size``, default 100,000 nodes);
* ``load_generic``: :func:`~privgraph.ingest.datasets.generic.load_generic` on the same files (the
  whole graph in memory, the reference).

``graph_mb`` is the graph's in-memory size (its arrays as GraphData holds them: features, labels,
the edges as int64 pairs). The last line holds the ratios: the ingest's peak over the graph's size
and over ``load_generic``'s peak, and the same with the import floor subtracted.

Run: ``python benchmarks/ingest_scale.py [--nodes 1000000] [--edges-format parquet]``
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[1]

CHILD = """
import json, resource, sys, time
sys.path.insert(0, {repo!r})
from privgraph.ingest.partitioned_writer import write_partitioned_graph
from privgraph.ingest.datasets.generic import load_generic
args = json.loads(sys.argv[1])
t0 = time.perf_counter()
if args["what"] == "ingest":
    g = write_partitioned_graph(args["edges"], features=args["features"], labels=args["labels"],
                                destination=args["destination"], range_size=args["range_size"])
    extra = {{"num_ranges": g.num_ranges}}
elif args["what"] == "load_generic":
    g = load_generic(args["edges"], features=args["features"], labels=args["labels"])
    extra = {{}}
else:
    extra = {{}}
seconds = time.perf_counter() - t0
hwm = [line.split()[1] for line in open("/proc/self/status") if line.startswith("VmHWM:")]
print(json.dumps({{"seconds": seconds, "peak_rss_mb": int(hwm[0]) / 1024 if hwm else None,
                  "ru_maxrss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, **extra}}))
"""


def _write_graph(d: str, n: int, degree: float, features: int, edges_format: str) -> dict[str, Any]:
    """The synthetic generic files under ``d``; returns their paths and the graph's sizes."""
    import pandas as pd

    d = Path(d)
    rng = np.random.default_rng(0)
    np.save(d / "features.npy", rng.random((n, features), dtype=np.float32))
    np.save(d / "labels.npy", rng.integers(0, 10, n))
    m = int(n * degree / 2)
    keys = np.empty(0, np.int64)
    while keys.size < m:  # distinct pairs u < v, drawn uniformly
        u, v = rng.integers(0, n, (2, int((m - keys.size) * 1.1) + 16))
        lo, hi = np.minimum(u, v), np.maximum(u, v)
        keys = np.unique(np.concatenate([keys, (lo * n + hi)[lo != hi]]))
    keys = rng.permutation(keys)[:m]
    lo, hi = keys // n, keys % n
    flip = rng.random(m) < 0.5  # either direction, as users' files have them
    df = pd.DataFrame({"src": np.where(flip, hi, lo), "dst": np.where(flip, lo, hi), "private": rng.random(m) < 0.2})
    edges = d / f"edges.{edges_format}"
    df.to_parquet(edges) if edges_format == "parquet" else df.to_csv(edges, index=False)
    graph_bytes = n * features * 4 + n * 8 + m * 16
    return {"edges": str(edges), "features": str(d / "features.npy"), "labels": str(d / "labels.npy"),
            "num_edges": m, "graph_mb": graph_bytes / 2**20, "edges_file_mb": edges.stat().st_size / 2**20}


def _child(what: str, **args: Any) -> dict[str, Any]:
    """Run one measurement (or, for ``write_files``, write the files) in a fresh process; its JSON line."""
    code = (f"import json, sys; sys.path.insert(0, {str(REPO / 'benchmarks')!r}); import ingest_scale as b; "
            "print(json.dumps(b._write_graph(**json.loads(sys.argv[1]))))") if what == "write_files" else CHILD.format(
            repo=str(REPO))
    r = subprocess.run([sys.executable, "-c", code, json.dumps(args if what == "write_files" else {"what": what, **args})],
                       capture_output=True, text=True, check=False)
    if r.returncode:
        raise SystemExit(f"{what} failed: {r.stderr[-2000:]}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=1_000_000)
    ap.add_argument("--degree", type=float, default=10.0)
    ap.add_argument("--features", type=int, default=64)
    ap.add_argument("--range-size", type=int, default=100_000)
    ap.add_argument("--edges-format", choices=("parquet", "csv"), default="parquet")
    ap.add_argument("--skip-load-generic", action="store_true", help="measure the ingest only")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="ingest-scale-") as tmp:
        d = Path(tmp)
        t0 = time.perf_counter()
        files = _child("write_files", d=tmp, n=a.nodes, degree=a.degree, features=a.features,
                       edges_format=a.edges_format)
        common = {"nodes": a.nodes, "num_edges": files["num_edges"], "features": a.features,
                  "edges_format": a.edges_format, "graph_mb": round(files["graph_mb"], 1)}
        print(json.dumps({"step": "write_files", "seconds": round(time.perf_counter() - t0, 2),
                          "edges_file_mb": round(files["edges_file_mb"], 1), **common}), flush=True)
        paths = {k: files[k] for k in ("edges", "features", "labels")}
        res = {"import": _child("import")}
        res["ingest"] = _child("ingest", destination=str(d / "graph"), range_size=a.range_size, **paths)
        if not a.skip_load_generic:
            res["load_generic"] = _child("load_generic", **paths)
        for what, r in res.items():
            print(json.dumps({"step": what, **{k: round(v, 2) if isinstance(v, float) else v for k, v in r.items()},
                              **common}), flush=True)
        floor = res["import"]["peak_rss_mb"]
        ing = res["ingest"]["peak_rss_mb"]
        ratios = {"ingest_peak_over_graph": round(ing / files["graph_mb"], 3),
                  "ingest_peak_above_import_over_graph": round((ing - floor) / files["graph_mb"], 3)}
        if "load_generic" in res:
            gen = res["load_generic"]["peak_rss_mb"]
            ratios |= {"ingest_peak_over_load_generic_peak": round(ing / gen, 3),
                       "ingest_over_load_generic_above_import": round((ing - floor) / (gen - floor), 3),
                       "ingest_seconds_over_load_generic": round(res["ingest"]["seconds"] / res["load_generic"]["seconds"], 2)}
        print(json.dumps({"step": "ratios", **ratios, **common}), flush=True)


if __name__ == "__main__":
    main()
