"""From a partitioned graph to the privatize stage's input, on tasks: the same files, byte for byte,
as write_partitioned_input on the loaded graph, hence the same release for the same seed; the
client passes and receives only small values and never reads the graph."""

from __future__ import annotations

import json
import multiprocessing
import os
import stat
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from privgraph.ingest import partitioned_graph
from privgraph.privatize import partitioned_input
from privgraph.ingest.partitioned_graph import load_partitioned_graph, open_partitioned_graph
from privgraph.privatize.partitioned_input import partition_partitioned_graph, partitioned_input_from_graph
from privgraph.ingest.partitioned_writer import write_partitioned_graph
from privgraph.mechanisms import build_mechanism
from privgraph.parts.partition import partition_graph
from privgraph.privatize.partitioned import load_partitioned_release, privatize_partitioned, write_partitioned_input
from tests.spawn_executor import SpawnExecutor


def _files(tmp: Path, n: int, m: int, *, d: int = 4, labels: bool = True, split: bool = True,
           private: float = 0.2, public: bool = True) -> dict[str, Any]:
    """A generic graph's files: ``m`` distinct edges (a share ``private`` of them private; all
    private unless ``public``), features, labels (some -1), a split."""
    rng = np.random.default_rng(n + m)
    u, v = rng.integers(0, n, 4 * m), rng.integers(0, n, 4 * m)
    keep = u != v
    u, v = u[keep], v[keep]
    _, first = np.unique(np.minimum(u, v) * n + np.maximum(u, v), return_index=True)
    pick = np.sort(first)[:m]
    flag = rng.random(pick.size) < private if public else np.ones(pick.size, bool)
    files: dict[str, Any] = {"edges": tmp / "edges.csv", "num_nodes": n}
    pd.DataFrame({"src": u[pick], "dst": v[pick], "private": flag}).to_csv(files["edges"], index=False)
    if d:
        files["features"] = tmp / "x.npy"
        np.save(files["features"], rng.normal(size=(n, d)).astype(np.float32))
    if labels:
        files["labels"] = tmp / "y.npy"
        y = rng.integers(0, 3, n)
        y[rng.random(n) < 0.1] = -1
        np.save(files["labels"], y)
        if split:
            lab = np.flatnonzero(y >= 0)
            files["split"] = tmp / "split.json"
            files["split"].write_text(json.dumps({"train": lab[::3].tolist(), "val": lab[1::3].tolist(),
                                                  "test": lab[2::3].tolist()}))
    return files


def _graph(tmp: Path, range_size: int, n: int = 203, m: int = 700, **kw: Any):
    files = _files(tmp, n, m, **kw)
    return write_partitioned_graph(files.pop("edges"), destination=tmp / "graph", range_size=range_size, **files)


def _reference(graph, num_parts: int, method: str, directory: Path) -> Path:
    g = load_partitioned_graph(graph.path)
    return write_partitioned_input(g, partition_graph(g, num_parts, method), directory)


def _assert_identical(a: Path, b: Path) -> None:
    files_a = sorted(p.relative_to(a) for p in a.rglob("*"))
    assert files_a == sorted(p.relative_to(b) for p in b.rglob("*"))
    for rel in files_a:
        assert (a / rel).is_dir() == (b / rel).is_dir(), rel
        if (a / rel).is_file():
            assert (a / rel).read_bytes() == (b / rel).read_bytes(), rel


@pytest.mark.parametrize(("range_size", "num_parts", "method"), [
    (50, 3, "metis"),    # 5 ranges (the last of 3 nodes), fewer parts than ranges
    (203, 4, "metis"),   # one range
    (30, 12, "metis"),   # more parts than ranges
    (64, 5, "hash"),
    (40, 1, "metis"),    # one part
    (50, 3, "ldg"),      # streamed over 5 ranges, the last first
    (30, 12, "ldg"),     # more parts than ranges
])
def test_the_input_is_write_partitioned_inputs_byte_for_byte(tmp_path, range_size, num_parts, method):
    graph = _graph(tmp_path, range_size)
    ref = _reference(graph, num_parts, method, tmp_path / "ref")
    out = partitioned_input_from_graph(graph, num_parts, method, tmp_path / "input")
    _assert_identical(ref, out)
    assert not (tmp_path / ".input.tmp").exists() and not (out / ".fragments").exists()
    assert stat.S_IMODE(os.stat(out).st_mode) == 0o700
    assert {stat.S_IMODE(os.stat(p).st_mode) for p in out.rglob("*") if p.is_file()} == {0o600}


@pytest.mark.parametrize(("kw", "fields"), [
    ({"d": 0, "labels": False}, []),
    ({"labels": False}, ["x"]),
    ({"split": False}, ["x", "y"]),
    ({"private": 0.0}, ["x", "y", "train_mask", "val_mask", "test_mask"]),   # no private edge
    ({"public": False}, ["x", "y", "train_mask", "val_mask", "test_mask"]),  # no public edge: hash
])
def test_graphs_without_fields_or_edges_of_a_kind(tmp_path, kw, fields):
    graph = _graph(tmp_path, 50, **kw)
    ref = _reference(graph, 4, "metis", tmp_path / "ref")
    out = partitioned_input_from_graph(graph, 4, "metis", tmp_path / "input")
    _assert_identical(ref, out)
    layout = json.loads((out / "layout.json").read_text())
    assert layout["fields"] == fields
    if "public" in kw:
        assert layout["partition_method"] == "hash"
    if "private" in kw:
        assert layout["private_nodes"] == 0


@pytest.mark.parametrize("method", ["metis", "ldg"])
def test_the_partition_task_returns_what_partition_graph_computes(tmp_path, method):
    graph = _graph(tmp_path, 50)
    ref = partition_graph(load_partitioned_graph(graph.path), 6, method)
    got = partition_partitioned_graph(graph, 6, method, tmp_path / "p")
    assert got == {"method": ref.method, "num_parts": ref.num_parts, "sizes": ref.sizes()}
    assert np.load(tmp_path / "p" / "assignment.npy").tobytes() == ref.assignment.tobytes()
    with pytest.raises(ValueError, match="num_parts must be an int >= 1"):
        partition_partitioned_graph(graph, 0, method, tmp_path / "q")
    with pytest.raises(ValueError, match="method must be one of 'metis', 'hash', 'ldg'"):
        partition_partitioned_graph(graph, 2, "kmeans", tmp_path / "q")


def test_the_same_release_for_the_same_seed(tmp_path):
    graph = _graph(tmp_path, 50)
    ref = _reference(graph, 3, "metis", tmp_path / "ref")
    out = partitioned_input_from_graph(graph, 3, "metis", tmp_path / "input")
    mechs = {"features": build_mechanism("feature_rr", {"epsilon": 1.0, "bins": 4}),
             "edges": build_mechanism("dprr", {"epsilon": 1.0})}
    a = privatize_partitioned(ref, tmp_path / "rel-a", root_seed=np.random.SeedSequence(7), **mechs)
    b = privatize_partitioned(out, tmp_path / "rel-b", root_seed=np.random.SeedSequence(7), **mechs)
    assert a.parts == b.parts and a.stats == b.stats and a.release == b.release
    ga, gb = load_partitioned_release(ref, a.directory), load_partitioned_release(out, b.directory)
    for field in ("x", "y", "edges_public", "edges_private", "train_mask"):
        assert np.array_equal(getattr(ga, field), getattr(gb, field)), field


def test_refusals_leave_nothing(tmp_path):
    graph = _graph(tmp_path, 50)
    (tmp_path / "kept").mkdir()
    with pytest.raises(FileExistsError, match="never overwritten"):
        partitioned_input_from_graph(graph, 2, "metis", tmp_path / "kept")
    (tmp_path / ".busy.tmp").mkdir()
    with pytest.raises(FileExistsError, match="another run is writing it"):
        partitioned_input_from_graph(graph, 2, "metis", tmp_path / "busy")
    with pytest.raises(ValueError, match="method must be"):
        partitioned_input_from_graph(graph, 2, "kmeans", tmp_path / "x")
    (Path(graph.path) / "edges" / "range-00002.parquet").write_bytes(b"not parquet")
    with pytest.raises(Exception, match="range-00002.parquet"):
        partitioned_input_from_graph(graph, 2, "metis", tmp_path / "broken")
    assert not (tmp_path / "broken").exists() and not (tmp_path / ".broken.tmp").exists()


def test_the_client_never_reads_the_graph(tmp_path, monkeypatch):
    """In the client, every reader of ranges, of the whole graph and of .npy files raises; the
    tasks run in spawned processes (fresh imports, unpatched). What the client sends to a map and
    gets back stays under 4 KiB (metadata, paths and ints; a 2,000-node graph)."""
    graph = _graph(tmp_path, 500, n=2000, m=6000)
    ref = _reference(graph, 3, "metis", tmp_path / "ref")

    def refuse(*args: Any, **kw: Any) -> Any:
        raise AssertionError("the client read the graph")

    for module in (partitioned_graph, partitioned_input):
        for name in ("read_node_range", "read_edge_range", "load_partitioned_graph"):
            if hasattr(module, name):
                monkeypatch.setattr(module, name, refuse)
    with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:
        pool.submit(int).result()  # started before np.load is patched
        monkeypatch.setattr(np, "load", refuse)
        ex = SpawnExecutor(pool)
        out = partitioned_input_from_graph(open_partitioned_graph(graph.path), 3, "metis", tmp_path / "input",
                                           executor=ex)
        monkeypatch.undo()
    _assert_identical(ref, out)
    assert 0 < ex.largest_sent < 4096 and 0 < ex.largest_received < 4096


@pytest.mark.dask
def test_the_same_bytes_on_two_dask_workers(tmp_path):
    from tasks.dask_executor import DaskExecutor

    graph = _graph(tmp_path, 40)
    serial = partitioned_input_from_graph(graph, 4, "metis", tmp_path / "serial")
    with DaskExecutor(n_workers=2, threads_per_worker=1) as ex:
        dask = partitioned_input_from_graph(graph, 4, "metis", tmp_path / "dask", executor=ex)
    _assert_identical(serial, dask)
