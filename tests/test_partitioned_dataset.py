"""The ``partitioned`` dataset: a graph written by ``privgraph ingest`` is a pipeline's input, read
whole (``load_partitioned_graph``) and released exactly as the generic files it came from; a
missing ``graph.json`` is refused before Prefect is contacted."""

from __future__ import annotations

import hashlib
import json
import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml

from privgraph.ingest.datasets import load_dataset
from privgraph.ingest.partitioned_writer import write_partitioned_graph

N = 60


def _generic_files(root: Path) -> None:
    """A ring plus chords, a third of the edges private, features in [0, 1), 3 labels, a split file."""
    root.mkdir(parents=True, exist_ok=True)
    edges = [(i, (i + 1) % N) for i in range(N)] + [(i, (i + 7) % N) for i in range(0, N, 3)]
    rows = ["src,dst,private"] + [f"{u},{v},{'true' if k % 3 == 0 else 'false'}" for k, (u, v) in enumerate(edges)]
    (root / "edges.csv").write_text("\n".join(rows) + "\n")
    rng = np.random.default_rng(0)
    np.save(root / "x.npy", rng.random((N, 4)))
    np.save(root / "y.npy", np.arange(N) % 3)
    parts = ["train"] * 20 + ["val"] * 15 + ["test"] * 25
    (root / "split.csv").write_text("id,split\n" + "".join(f"{i},{p}\n" for i, p in enumerate(parts)))


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("data")
    _generic_files(root)
    write_partitioned_graph(root / "edges.csv", features=root / "x.npy", labels=root / "y.npy",
                            split=root / "split.csv", destination=root / "graph", range_size=25)
    return root


GENERIC = {"edges": "edges.csv", "features": "x.npy", "labels": "y.npy", "split": "split.csv"}


def _canonical(e: np.ndarray) -> np.ndarray:
    """Edges as ``(min, max)`` pairs in sorted order (the generic loader keeps the file's order)."""
    e = np.sort(e, axis=0)
    return e[:, np.lexsort((e[1], e[0]))]


def test_the_partitioned_dataset_loads_the_generic_files_graph(data: Path) -> None:
    g = load_dataset("generic", root=data, **GENERIC)
    p = load_dataset("partitioned", root=data, path="graph")
    for field in ("x", "y", "edges_public", "edges_private", "train_mask", "val_mask", "test_mask"):
        a, b = getattr(g, field), getattr(p, field)
        if field.startswith("edges"):
            a, b = _canonical(a), _canonical(b)
        assert a.dtype == b.dtype and a.size and np.array_equal(a, b), field


def _pipeline(data: Path, store: Path, dataset: dict[str, Any]) -> dict[str, Any]:
    return {
        "dataset": {"root": str(data), **dataset},
        "features": {"mechanism": "feature_rr", "epsilon": 1.0, "bins": 2, "lower": 0.0, "upper": 1.0},
        "edges": {"mechanism": "dprr", "epsilon": 1.0},
        "budget": {"features": 1.0, "edges": 2.0},
        "partitions": {"num_parts": 2, "method": "hash"},
        "executor": "serial",
        "seed": 7,
        "storage": str(store),
        "private_records": str(store.parent / "private"),
    }


def _run(tmp: Path, pipelines: dict[str, Any], name: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    cfg = tmp / "pipelines.yaml"
    cfg.write_text(yaml.safe_dump({"pipelines": pipelines}))
    e = {**os.environ, **env}
    e.pop("PRIVGRAPH_DEBUG", None)
    return subprocess.run([sys.executable, "-m", "privgraph.cli", "run", name, "--config", str(cfg), "--no-evaluate"],
                          cwd=tmp, env=e, capture_output=True, text=True, timeout=600)


def _data_objects(store: Path) -> dict[str, str]:
    """sha256 of each stored object of the one version under ``store`` (the manifest left out: it
    names the dataset)."""
    (version,) = [p for p in store.glob("*/*") if (p / "manifest.json").is_file()]
    return {f.name: hashlib.sha256(f.read_bytes()).hexdigest() for f in sorted(version.iterdir())
            if f.is_file() and f.name != "manifest.json"}


@pytest.mark.flow
def test_a_pipeline_on_the_partitioned_graph_releases_the_generic_pipelines_bytes(
        data: Path, tmp_path: Path, prefect_server_env: dict[str, str]) -> None:
    runs = {"generic": {"name": "generic", "options": GENERIC},
            "partitioned": {"name": "partitioned", "options": {"path": "graph"}}}
    objects = {}
    for name, dataset in runs.items():
        store = tmp_path / name / "store"
        store.parent.mkdir()
        res = _run(store.parent, {name: _pipeline(data, store, dataset)}, name, prefect_server_env)
        assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
        objects[name] = _data_objects(store)
    assert objects["generic"] and objects["generic"] == objects["partitioned"]


def test_a_missing_graph_json_is_refused_before_prefect_is_contacted(data: Path, tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        dead = {"PREFECT_API_URL": f"http://127.0.0.1:{s.getsockname()[1]}/api"}
    res = _run(tmp_path, {"p": _pipeline(tmp_path, tmp_path / "store", {"name": "partitioned",
                                                                         "options": {"path": "empty"}})}, "p", dead)
    assert res.returncode == 2, res.stdout + res.stderr
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "graph.json" in lines[0], res.stderr
    assert not [f for f in (tmp_path / "store").rglob("*") if f.is_file()]  # nothing stored


@pytest.mark.flow
def test_the_scale_path_publishes_the_files_layouts_version(data: Path, tmp_path: Path,
                                                             prefect_server_env: dict[str, str]) -> None:
    """``partitions.layout: files`` without evaluation: the partitioned dataset takes the path on
    which the flow process never reads the graph (flows/privatize_at_scale.py); its version holds
    the same objects, counts, ledger, stats and validation as the generic files' run through the
    in-memory files layout, and its private record the keyed identity."""
    runs = {"generic": {"name": "generic", "options": GENERIC},
            "partitioned": {"name": "partitioned", "options": {"path": "graph"}}}
    objects, manifests = {}, {}
    for name, dataset in runs.items():
        store = tmp_path / name / "store"
        store.parent.mkdir()
        pipeline = {**_pipeline(data, store, dataset), "partitions": {"num_parts": 3, "method": "metis", "layout": "files"}}
        res = _run(store.parent, {name: pipeline}, name, prefect_server_env)
        assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
        objects[name] = _data_objects(store)
        (manifest,) = store.glob("*/*/manifest.json")
        manifests[name] = json.loads(manifest.read_text())
        (record,) = (store.parent / "private" / name).glob("*.json")
        assert json.loads(record.read_text())["input_identity"].startswith("hmac-sha256:")
    assert objects["generic"] and objects["generic"] == objects["partitioned"]
    for key in ("graph", "num_nodes", "ledger", "stats", "validation", "privatized", "mechanisms"):
        assert manifests["generic"][key] == manifests["partitioned"][key], key
