"""The dataset options ``privgraph ingest`` applies (privgraph/ingest/partitioned_options.py): a
graph that fits in memory gets the same node split, edges and private marking through
``privgraph ingest`` and the path at scale as through the in-memory loader with the same options
and seeds; each option's bad value is refused before any data is read."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from privgraph.errors import ConfigError
from privgraph.ingest.datasets import load_dataset
from privgraph.ingest.datasets.split import private_edge_positions, split_public_private
from privgraph.ingest.partitioned_graph import load_partitioned_graph, open_partitioned_graph
from privgraph.ingest.partitioned_options import IngestOptions
from privgraph.ingest.partitioned_writer import write_partitioned_graph

REPO = Path(__file__).resolve().parents[1]


def _files(tmp: Path, n: int = 230, m: int = 900, *, flag: bool = False, seed: int = 0) -> dict[str, Path]:
    """A generic graph's files without a private column: edges.csv (random directions), features,
    labels (some unlabelled)."""
    rng = np.random.default_rng(seed)
    u, v = rng.integers(0, n, 6 * m), rng.integers(0, n, 6 * m)
    keep = u != v
    _, first = np.unique(np.minimum(u[keep], v[keep]) * n + np.maximum(u[keep], v[keep]), return_index=True)
    pick = np.sort(first)[:m]
    df = pd.DataFrame({"src": u[keep][pick], "dst": v[keep][pick]})
    if flag:
        df["private"] = rng.random(len(df)) < 0.3
    files = {"edges": tmp / "edges.csv", "features": tmp / "x.npy", "labels": tmp / "y.npy"}
    df.to_csv(files["edges"], index=False)
    np.save(files["features"], rng.normal(size=(n, 4)).astype(np.float32))
    y = rng.integers(0, 3, n)
    y[rng.random(n) < 0.1] = -1
    np.save(files["labels"], y)
    return files


def _in_memory(tmp: Path, files: dict[str, Path], **options) -> object:
    opts = {k: str(p.relative_to(tmp)) for k, p in files.items()}
    return load_dataset("generic", root=tmp, **opts, **options)


def _ingested(tmp: Path, files: dict[str, Path], name: str, range_size: int = 40, split: Path | None = None,
              **options) -> object:
    write_partitioned_graph(files["edges"], features=files["features"], labels=files["labels"], split=split,
                            destination=tmp / name, range_size=range_size, options=IngestOptions(**options))
    return load_partitioned_graph(tmp / name)


def _sorted(e: np.ndarray) -> np.ndarray:
    return e[:, np.lexsort((e[1], e[0]))]


def _assert_same(a, b) -> None:
    for name in ("x", "y", "train_mask", "val_mask", "test_mask", "edges_public", "edges_private"):
        va, vb = getattr(a, name), getattr(b, name)
        assert (va is None) == (vb is None), name
        if name.startswith("edges"):
            va, vb = _sorted(va), _sorted(vb)
        if va is not None:
            assert np.array_equal(va, vb), name


def test_the_rule_is_split_public_privates(tmp_path):
    rng = np.random.default_rng(3)
    e = np.unique(np.sort(rng.integers(0, 500, (4000, 2)), axis=1), axis=0)
    e = e[e[:, 0] != e[:, 1]].T
    from privgraph.graph import GraphData

    g = split_public_private(GraphData.from_edges(500, e), 0.2, seed=11)
    pos = private_edge_positions(e.shape[1], 0.2, seed=11)
    assert pos.size == round(0.2 * e.shape[1]) and np.all(np.diff(pos) > 0)
    assert np.array_equal(g.edges_private, e[:, pos])
    assert private_edge_positions(e.shape[1], 0.0, seed=11).size == 0
    with pytest.raises(ValueError, match="rho"):
        private_edge_positions(10, 1.5, seed=0)


@pytest.mark.parametrize("options", [
    {"rho": 0.2, "split_seed": 7},
    {"rho": 1.0, "split_seed": 0},
    {"train": 0.4, "val": 0.3, "node_split_seed": 3},
    {"train": 0.3, "node_split_seed": 5, "drop_cut_edges": True, "rho": 0.35, "split_seed": 2},
])
def test_ingest_gives_the_in_memory_graph_for_the_same_options(tmp_path, options):
    files = _files(tmp_path)
    ingested = _ingested(tmp_path, files, "g", **options)
    _assert_same(ingested, _in_memory(tmp_path, files, **options))
    if "rho" in options:
        m = ingested.edges_public.shape[1] + ingested.edges_private.shape[1]
        assert ingested.edges_private.shape[1] == round(options["rho"] * m)


def test_a_split_file_with_cut_edges_and_rho_over_many_ranges(tmp_path):
    files = _files(tmp_path, seed=4)
    y = np.load(files["labels"])
    lab = np.flatnonzero(y >= 0)
    split = tmp_path / "split.json"
    split.write_text(json.dumps({"train": lab[::3].tolist(), "val": lab[1::3].tolist(), "test": lab[2::3].tolist()}))
    options = {"drop_cut_edges": True, "rho": 0.25, "split_seed": 9}
    for range_size in (7, 1000):
        ingested = _ingested(tmp_path, files, f"g{range_size}", range_size=range_size, split=split, **options)
        _assert_same(ingested, _in_memory(tmp_path, {**files, "split": split}, **options))


def test_the_graph_says_which_options_it_holds_and_never_a_seed(tmp_path):
    files = _files(tmp_path)
    _ingested(tmp_path, files, "g", rho=0.2, split_seed=123457, train=0.5, val=0.2, node_split_seed=765431)
    text = (tmp_path / "g" / "graph.json").read_text()
    source = open_partitioned_graph(tmp_path / "g").source
    assert source["private_edges"].startswith("rho 0.2:") and source["node_split"].startswith("random node split 0.5/0.2/")
    assert "123457" not in text and "765431" not in text


@pytest.mark.parametrize("options, split, match", [
    ({"rho": 1.5}, False, r"--rho: expected a fraction in \[0, 1\]"),
    ({"rho": float("nan")}, False, "--rho"),
    ({"train": 0.0}, False, r"--train: expected a fraction in \(0, 1\)"),
    ({"train": 0.7, "val": 0.3}, False, "--val: train \\+ val must leave test nodes"),
    ({"train": 0.5}, True, "--train: give a split file"),
    ({"drop_cut_edges": True}, False, "--drop-cut-edges: the graph has no node split"),
    ({"split_seed": -1, "rho": 0.1}, False, "--split-seed: a seed is a non-negative integer"),
])
def test_bad_options_are_refused_before_anything_is_written(tmp_path, options, split, match, monkeypatch):
    files = _files(tmp_path)
    split_file = tmp_path / "split.json"
    split_file.write_text(json.dumps({"train": [0], "val": [1], "test": [2]}))
    read = []
    monkeypatch.setattr("privgraph.ingest.partitioned_writer._open_nodes", lambda *a: read.append(a))
    with pytest.raises(ConfigError, match=match):
        _ingested(tmp_path, files, "g", split=split_file if split else None, **options)
    assert not read and not (tmp_path / "g").exists() and not (tmp_path / ".g.tmp").exists()


def test_rho_over_an_edge_list_that_marks_its_private_edges_is_refused(tmp_path):
    files = _files(tmp_path, flag=True)
    with pytest.raises(ConfigError, match="--rho: .* marks its private edges itself"):
        _ingested(tmp_path, files, "g", rho=0.2)
    with pytest.raises(ConfigError, match="rho"):  # as in memory
        _in_memory(tmp_path, files, rho=0.2)


def test_the_command_takes_the_options(tmp_path):
    files = _files(tmp_path)
    cmd = [sys.executable, "-m", "privgraph.cli", "ingest", str(files["edges"]), str(tmp_path / "g"),
           "--features", str(files["features"]), "--labels", str(files["labels"]), "--range-size", "50",
           "--rho", "0.2", "--split-seed", "4", "--train", "0.5", "--val", "0.25", "--node-split-seed", "8",
           "--drop-cut-edges"]
    r = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=120, env={**os.environ, "COLUMNS": "200"})
    assert r.returncode == 0, r.stderr
    _assert_same(load_partitioned_graph(tmp_path / "g"), _in_memory(
        tmp_path, files, rho=0.2, split_seed=4, train=0.5, val=0.25, node_split_seed=8, drop_cut_edges=True))
    r = subprocess.run(cmd[:6] + ["--rho", "2"], cwd=REPO, capture_output=True, text=True, timeout=120,
                       env={**os.environ, "COLUMNS": "200"})
    assert r.returncode == 2 and len(r.stderr.splitlines()) == 1 and "--rho" in r.stderr, r.stderr
