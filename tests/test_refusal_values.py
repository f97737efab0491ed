"""Refusals of malformed input name the file, the row and the column, never a value of the user's
data (issue 56, item 3): the values go to the owner's refusal record only.

Each malformed input carries MARKER values in its bad row (node ids 987654 and 876543 in an edge,
a label 777777, a feature 271828.125 beside a NaN). It goes through the real CLI in this process:

* ``privgraph run --ci`` on a ``generic`` dataset (the generic loader, in the flow's ingest task);
* ``privgraph ingest`` (the partitioned writer; no flow);
* ``privgraph run --ci`` on a ``partitioned`` dataset in ``partitions.layout: files`` whose range
  files were edited by hand (the partitioned reader and the input digests, on the executor).

Each must exit 2 with one error line naming the file and the row (and the column), and no marker
may appear on any published channel: stdout, stderr, the ``--ci`` JSON, the
``$GITHUB_STEP_SUMMARY`` file and, for a run, everything the Prefect API holds of its flow and
task runs (names, parameters, states and their messages, logs, artifacts). The owner's refusal
record (mode 0600) holds the markers.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml

from privgraph.errors import PRIVATE_VALUES_NOTE
from tests.prefect_server import api_rows, final_task_runs

N = 30
EDGE = (987654, 876543)  # a private edge's ends (out of range, or repeated)
LABEL = 777777  # a class id of 1000 or more
FEATURE = 271828.125  # beside a NaN in its row (exact in float32)
MARKERS = ("987654", "876543", "777777", "271828")


# -- inputs -------------------------------------------------------------------------------------------
def _generic(d: Path, *, edge_line: str | None = None, label_row: int | None = None,
             nan_row: int | None = None) -> dict[str, str]:
    """A ring of ``N`` nodes (a third private), features, labels and a split; optionally one bad
    row carrying a marker. Returns the generic dataset's options."""
    d.mkdir(parents=True, exist_ok=True)
    rows = [f"{i},{(i + 1) % N},{'true' if i % 3 == 0 else 'false'}" for i in range(N)]
    if edge_line is not None:
        rows.insert(4, edge_line)  # line 6 of the file (the header is line 1)
    (d / "edges.csv").write_text("src,dst,private\n" + "\n".join(rows) + "\n")
    x = np.random.default_rng(0).random((N, 3))
    if nan_row is not None:
        x[nan_row] = [FEATURE, np.nan, FEATURE]
    np.save(d / "x.npy", x)
    y = np.arange(N) % 3
    if label_row is not None:
        y[label_row] = LABEL
    np.save(d / "y.npy", y)
    parts = ["train"] * 10 + ["val"] * 10 + ["test"] * 10
    (d / "split.csv").write_text("id,split\n" + "".join(f"{i},{p}\n" for i, p in enumerate(parts)))
    return {"edges": "edges.csv", "features": "x.npy", "labels": "y.npy", "split": "split.csv"}


def _config(tmp: Path, dataset: dict[str, Any], layout: str = "memory") -> Path:
    p = {
        "dataset": dataset,
        "features": {"mechanism": "feature_rr", "epsilon": 1.0, "bins": 2, "lower": 0.0, "upper": 1.0},
        "edges": {"mechanism": "dprr", "epsilon": 1.0},
        "budget": {"features": 1.0, "edges": 2.0},
        "partitions": {"num_parts": 2, "method": "hash", "layout": layout},
        "executor": "serial", "seed": 7,
        "storage": str(tmp / "store"), "private_records": str(tmp / "private"),
    }
    path = tmp / "pipelines.yaml"
    path.write_text(yaml.safe_dump({"pipelines": {"p": p}}))
    return path


def _edit_range(path: Path, column: str, row: int, value: Any, **more: Any) -> None:
    """Set ``column`` (and ``more``) of row ``row`` of a range file, by hand (as a user's ETL might)."""
    table = pq.read_table(path)
    cols = table.to_pydict()
    for c, v in {column: value, **more}.items():
        cols[c][row] = v
    pq.write_table(pa.table(cols, schema=table.schema), path)


# -- running the CLI, reading every channel --------------------------------------------------------------
@pytest.fixture
def api_url(prefect_server_env: dict[str, str]) -> Any:
    """The session's Prefect API (its server in a subprocess, one per xdist worker), which the
    CLI's runs report to and this process reads back (each run's rows told apart by their ids)."""
    from prefect.settings import PREFECT_API_URL, temporary_settings

    with temporary_settings(updates={PREFECT_API_URL: prefect_server_env["PREFECT_API_URL"]}):
        yield prefect_server_env["PREFECT_API_URL"]


def _cli(args: list[str], tmp: Path, api_url: str | None = None) -> dict[str, Any]:
    """The CLI in its own process (its stderr as a user sees it, Prefect's console logs included),
    and what it published: stdout, stderr, the step summary and, with ``api_url``, every row that
    the Prefect API holds of the flow and task runs it started (names, parameters, states, logs)
    and of the artifacts they created."""
    summary = tmp / "step-summary.md"
    env = {k: v for k, v in os.environ.items() if k != "PRIVGRAPH_DEBUG"}
    env["GITHUB_STEP_SUMMARY"] = str(summary)
    if api_url is not None:
        env["PREFECT_API_URL"] = api_url
        before = {f["id"] for f in api_rows("/flow_runs/filter", {})}
        artifacts_before = {a["id"] for a in api_rows("/artifacts/filter", {})}
    res = subprocess.run([sys.executable, "-m", "privgraph.cli", *args], cwd=tmp, env=env, capture_output=True,
                         text=True, timeout=300)
    prefect: dict[str, Any] = {}
    if api_url is not None:
        flows = [f for f in api_rows("/flow_runs/filter", {}) if f["id"] not in before]
        ids = [f["id"] for f in flows]
        prefect = {
            "flows": flows, "tasks": final_task_runs(ids),
            "logs": api_rows("/logs/filter", {"logs": {"flow_run_id": {"any_": ids}}}) if ids else [],
            "artifacts": [a for a in api_rows("/artifacts/filter", {}) if a["id"] not in artifacts_before],
        }
    return {"code": res.returncode, "stdout": res.stdout, "stderr": res.stderr, "prefect": prefect,
            "summary": summary.read_text() if summary.exists() else ""}


def _refused(out: dict[str, Any], *, names: list[str], records: Path, markers: tuple[str, ...],
             flow: bool) -> dict[str, Any]:
    """Exit 2, one error line naming ``names`` (file, row, column), no marker on any channel; the
    owner's one refusal record (0600) holds the markers. Returns the record."""
    assert out["code"] == 2, out["stderr"][-3000:]
    errors = [ln for ln in out["stderr"].splitlines() if ln.startswith("error:")]
    assert len(errors) == 1 and "Traceback" not in out["stderr"], out["stderr"][-3000:]
    for name in names:
        assert name in errors[0], (name, errors[0])
    assert PRIVATE_VALUES_NOTE in errors[0]
    channels = {"stdout": out["stdout"], "stderr": out["stderr"], "summary": out["summary"],
                "prefect": json.dumps(out["prefect"])}
    if flow:  # the flow started: its runs, states and logs are in the API; --ci printed its JSON
        assert out["prefect"]["flows"] and out["prefect"]["tasks"] and out["prefect"]["logs"]
        assert [f["state_type"] for f in out["prefect"]["flows"]] == ["FAILED"]
        ci = json.loads(next(ln for ln in reversed(out["stdout"].splitlines()) if ln.startswith("{")))
        assert ci["exit_code"] == 2 and names[0] in ci["error"] and names[0] in out["summary"]
    leaks = {(m, where) for m in MARKERS for where, text in channels.items() if m in text}
    assert not leaks, leaks
    [record] = records.glob("*.json")
    assert stat.S_IMODE(record.stat().st_mode) == 0o600
    body = record.read_text()
    assert all(m in body for m in markers), body
    return json.loads(body)


# -- (a) the generic loader, in a run's ingest task -------------------------------------------------------
@pytest.mark.flow
@pytest.mark.parametrize("case", ["edge out of range", "label", "NaN feature"])
def test_a_run_on_generic_files_keeps_the_bad_rows_values_private(case, api_url, tmp_path):
    data = tmp_path / "data"
    if case == "edge out of range":
        options = _generic(data, edge_line=f"{EDGE[0]},{EDGE[1]},true")
        names, markers = [f"{data / 'edges.csv'}: lines [6]", "node ids out of range [0, 30)"], MARKERS[:2]
    elif case == "label":
        options = _generic(data, label_row=7)
        names, markers = [f"{data / 'y.npy'}: class ids of 1000 or more at rows [7]"], MARKERS[2:3]
    else:
        options = _generic(data, nan_row=12)
        names, markers = [f"{data / 'x.npy'}: NaN", "rows [12]", "first: row 12, column 1"], MARKERS[3:]
    cfg = _config(tmp_path, {"name": "generic", "root": str(data), "options": options})
    out = _cli(["run", "p", "--config", str(cfg), "--ci", "--no-evaluate"], tmp_path, api_url)
    record = _refused(out, names=names, records=tmp_path / "private" / "p" / "refusals", markers=markers, flow=True)
    assert record["pipeline"] == "p" and record["refused"] in out["stderr"]


# -- (b) privgraph ingest: the partitioned writer --------------------------------------------------------
@pytest.mark.parametrize("case", ["duplicate edge", "label", "NaN feature"])
def test_ingest_keeps_the_bad_rows_values_private(case, tmp_path):
    data = tmp_path / "data"
    _generic(data, edge_line=f"{EDGE[0]},{EDGE[1]},true\n{EDGE[1]},{EDGE[0]},true" if case == "duplicate edge" else None,
             label_row=7 if case == "label" else None, nan_row=12 if case == "NaN feature" else None)
    args = ["ingest", str(data / "edges.csv"), str(tmp_path / "graph")]
    if case == "duplicate edge":  # ids up to 987654: every id a node (ranges of ids alone, no features)
        args += ["--num-nodes", str(EDGE[0] + 1), "--range-size", "500000"]
        names, markers = [f"{data / 'edges.csv'}: lines [7]", "duplicate edges", "repeats", "lines [6]"], MARKERS[:2]
    elif case == "label":
        args += ["--labels", str(data / "y.npy"), "--range-size", "10"]
        names, markers = [f"{data / 'y.npy'}: class ids of 1000 or more at rows [7]"], MARKERS[2:3]
    else:
        args += ["--features", str(data / "x.npy"), "--range-size", "10"]
        names, markers = [f"{data / 'x.npy'}: NaN", "rows [12]", "first: row 12, column 1"], MARKERS[3:]
    out = _cli(args, tmp_path)
    refusals = tmp_path / "private-records" / "ingest" / "refusals"  # --private-records: ./private-records
    _refused(out, names=names, records=refusals, markers=markers, flow=False)
    [record] = refusals.glob("*.json")
    assert f"the owner's private record: {record.relative_to(tmp_path)}" in out["stderr"]  # where the values went
    assert not (tmp_path / "graph").exists() and not (tmp_path / ".graph.tmp").exists()  # nothing half-written


# -- (c) a partitioned graph whose range files were edited by hand, at scale -------------------------------
@pytest.mark.flow
@pytest.mark.parametrize("case", ["edge", "label"])
def test_a_run_at_scale_keeps_the_bad_range_rows_values_private(case, api_url, tmp_path):
    from privgraph.ingest.partitioned_writer import write_partitioned_graph

    data = tmp_path / "data"
    options = _generic(data)
    write_partitioned_graph(data / "edges.csv", **{k: data / options[k] for k in ("features", "labels", "split")},
                            destination=data / "graph", range_size=10)
    if case == "edge":  # a private edge outside range 1
        where = data / "graph" / "edges" / "range-00001.parquet"
        _edit_range(where, "src", 2, EDGE[1], dst=EDGE[0], private=True)
        names, markers = [f"{where}: row 2 (0-based), column 'src': an edge outside range 1"], MARKERS[:2]
    else:  # a label of graph.json's num_classes or more (found by the reader, on every path that reads the range)
        where = data / "graph" / "nodes" / "range-00001.parquet"
        _edit_range(where, "y", 3, LABEL)
        names, markers = [f"{where}: row 3 (0-based), column 'y': a label outside -1..num_classes - 1"], MARKERS[2:3]
    cfg = _config(tmp_path, {"name": "partitioned", "root": str(data), "options": {"path": "graph"}}, layout="files")
    out = _cli(["run", "p", "--config", str(cfg), "--ci", "--no-evaluate"], tmp_path, api_url)
    _refused(out, names=names, records=tmp_path / "private" / "p" / "refusals", markers=markers, flow=True)
    assert not [p for p in (tmp_path / "store").rglob("manifest.json")]  # nothing published
