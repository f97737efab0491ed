"""Reading artifacts and users' tables starts no Arrow thread.

CI once failed on the README's read-back script: it printed the graph and then died at exit with
"terminate called without an active exception" (-6), an Arrow thread-pool worker still joinable
as the interpreter ended (apache/arrow#34314). The reads run here in a fresh interpreter, the only
place where "no pool was started" can be seen; ``pq.read_table`` or ``pd.read_csv(engine=
"pyarrow")`` in their place start 2-3 threads and fail the check.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pandas as pd

from privgraph.graph import GraphData
from privgraph.storage import graph_to_objects

SCRIPT = textwrap.dedent("""
    import os, sys
    from pathlib import Path

    def threads():
        return len(os.listdir("/proc/self/task"))

    import pyarrow.parquet, pandas
    from privgraph.storage.arrow_io import read_parquet_bytes
    from privgraph.ingest.datasets.generic import load_generic
    from privgraph.storage import objects_to_graph
    d = Path(sys.argv[1])
    before = threads()
    objects = {p.name: p.read_bytes() for p in (d / "artifact").iterdir()}
    g = objects_to_graph(objects)
    a = load_generic(d / "edges.csv", num_nodes=50)
    b = load_generic(d / "edges.parquet", num_nodes=50)
    {mode}
    print(threads() - before, g.num_edges, a.num_edges, b.num_edges)
""")


def _files(tmp_path: Path) -> int:
    rng = np.random.default_rng(0)
    pairs = {(int(min(u, v)), int(max(u, v))) for u, v in rng.integers(0, 50, (200, 2)) if u != v}
    e = np.array(sorted(pairs)).T
    (tmp_path / "artifact").mkdir()
    g = GraphData(num_nodes=50, edges_public=e[:, :10], edges_private=e[:, 10:], x=rng.random((50, 3)))
    for name, blob in graph_to_objects(g).items():
        (tmp_path / "artifact" / name).write_bytes(blob)
    pd.DataFrame({"src": e[0], "dst": e[1]}).to_csv(tmp_path / "edges.csv", index=False)
    pd.DataFrame({"src": e[0], "dst": e[1]}).to_parquet(tmp_path / "edges.parquet")
    return e.shape[1]


def _run(tmp_path: Path, mode: str) -> list[int]:
    r = subprocess.run([sys.executable, "-c", SCRIPT.replace("{mode}", mode), str(tmp_path)],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    return [int(v) for v in r.stdout.split()]


def test_reading_an_artifact_and_user_tables_starts_no_thread(tmp_path):
    m = _files(tmp_path)
    assert _run(tmp_path, "") == [0, m, m, m]


def test_the_check_sees_an_arrow_pool(tmp_path):
    """Not vacuous: the same count after ``pq.read_table`` sees the pool it starts."""
    _files(tmp_path)
    started = _run(tmp_path, 'pyarrow.parquet.read_table(d / "edges.parquet")')[0]
    assert started >= 1
