"""Planetoid loader: a tiny raw dataset written in tmp_path, the absent case, and real Cora."""

from __future__ import annotations

import pickle
from collections import defaultdict
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

from privgraph.ingest.datasets import load_dataset, load_planetoid, planetoid as planetoid_mod
from privgraph.errors import DatasetNotFoundError

N_TRAIN, N_ALL, N_TEST, D, C = 3, 510, 10, 6, 3
N = N_ALL + N_TEST


def _snapshot(root: Path) -> dict[str, float]:
    return {str(p.relative_to(root)): p.stat().st_mtime for p in root.rglob("*")}


def _write_raw(raw: Path, name: str = "cora", seed: int = 0) -> dict:
    """A tiny dataset in Planetoid's raw format; returns the ground truth per node id."""
    rng = np.random.default_rng(seed)
    raw.mkdir(parents=True, exist_ok=True)
    x_all = (rng.random((N, D)) < 0.3).astype(np.float32)
    y_all = rng.integers(0, C, N)
    onehot = np.eye(C, dtype=np.int32)[y_all]
    test_index = rng.permutation(np.arange(N_ALL, N))  # unsorted, as in the real files
    objs = {
        "x": sp.csr_matrix(x_all[:N_TRAIN]),
        "y": onehot[:N_TRAIN],
        "allx": sp.csr_matrix(x_all[:N_ALL]),
        "ally": onehot[:N_ALL],
        # row i of tx/ty belongs to node test_index[i]
        "tx": sp.csr_matrix(x_all[test_index]),
        "ty": onehot[test_index],
    }
    graph = defaultdict(list)
    for i in range(N):  # a ring listed in both directions ...
        graph[i] += [(i + 1) % N, (i - 1) % N]
    graph[0].append(1)  # ... plus a repeated neighbour
    graph[5].append(5)  # ... and a self-loop
    objs["graph"] = graph
    for key, obj in objs.items():
        with open(raw / f"ind.{name}.{key}", "wb") as f:
            pickle.dump(obj, f)
    (raw / f"ind.{name}.test.index").write_text("\n".join(map(str, test_index)) + "\n")
    return {"x": x_all, "y": y_all, "test_index": test_index}


@pytest.fixture
def fake_root(tmp_path) -> tuple[Path, dict]:
    truth = _write_raw(tmp_path / "planetoid" / "Cora" / "raw")
    return tmp_path, truth


@pytest.fixture
def no_network(monkeypatch):
    monkeypatch.setattr(planetoid_mod, "_network_reachable", lambda timeout=3.0: False)

    def _fail(*a, **k):
        raise AssertionError("no download may be attempted")

    monkeypatch.setattr(planetoid_mod, "_download", _fail)


def test_tiny_raw_dataset(fake_root, no_network, tmp_path):
    root, truth = fake_root
    g = load_planetoid("cora", root, cache_dir=tmp_path / "cache")
    assert g.num_nodes == N and g.num_features == D and g.num_classes == C
    assert g.x.dtype == np.float32 and g.y.dtype == np.int64
    assert np.array_equal(g.x, truth["x"]) and np.array_equal(g.y, truth["y"])
    # ring of N edges; repeats, the reverse listing and the self-loop are gone
    assert g.num_edges == N and g.edges_private.shape[1] == 0
    assert (g.edges_public[0] < g.edges_public[1]).all()
    assert g.train_mask.sum() == N_TRAIN and g.val_mask.sum() == 500 and g.test_mask.sum() == N_TEST
    assert g.train_mask[:N_TRAIN].all() and g.val_mask[N_TRAIN : N_TRAIN + 500].all()
    assert g.test_mask[truth["test_index"]].all()
    assert g.meta["name"] == "cora" and "Planetoid" in g.meta["source"]
    assert g.meta["feature_bounds"] == [0.0, 1.0]
    assert g.meta["feature_bounds_source"] == "dataset definition (binary bag-of-words)"


def test_reads_without_writing_next_to_raw_files(fake_root, no_network, tmp_path):
    root, _ = fake_root
    before = _snapshot(root)
    load_planetoid("Cora", root, cache_dir=tmp_path / "cache")
    assert _snapshot(root) == before
    assert not (tmp_path / "cache").exists()


def test_absent_and_network_unreachable(tmp_path, no_network):
    with pytest.raises(DatasetNotFoundError) as info:
        load_planetoid("cora", tmp_path / "data", cache_dir=tmp_path / "cache")
    msg = str(info.value)
    assert str(tmp_path / "data" / "planetoid" / "Cora" / "raw") in msg
    assert "ind.cora.x" in msg and "test.index" in msg
    assert "network is unreachable" in msg
    assert "PRIVGRAPH_DATA_ROOT" in msg
    assert isinstance(info.value, FileNotFoundError)


def test_absent_and_download_disabled(tmp_path, monkeypatch):
    def _no_probe(timeout=3.0):
        raise AssertionError("the network must not be probed when download=False")

    monkeypatch.setattr(planetoid_mod, "_network_reachable", _no_probe)
    with pytest.raises(DatasetNotFoundError, match="downloads are disabled"):
        load_planetoid("citeseer", tmp_path, cache_dir=tmp_path / "cache", download=False)


def test_partial_files_are_reported(fake_root, no_network, tmp_path):
    root, _ = fake_root
    (root / "planetoid" / "Cora" / "raw" / "ind.cora.graph").unlink()
    with pytest.raises(DatasetNotFoundError, match=r"missing \['ind.cora.graph'\]"):
        load_planetoid("cora", root, cache_dir=tmp_path / "cache")


def test_absent_downloads_into_cache_then_reuses_it(tmp_path, monkeypatch):
    calls = []

    def fake_download(pyg_name: str, cache_dir: Path) -> Path:
        calls.append((pyg_name, cache_dir))
        _write_raw(cache_dir / pyg_name / "raw")
        return cache_dir / pyg_name / "raw"

    monkeypatch.setattr(planetoid_mod, "_network_reachable", lambda timeout=3.0: True)
    monkeypatch.setattr(planetoid_mod, "_download", fake_download)
    cache = tmp_path / "cache"
    g = load_planetoid("cora", tmp_path / "empty", cache_dir=cache)
    assert calls == [("Cora", cache)]
    assert g.num_nodes == N and g.meta["path"] == str(cache / "Cora" / "raw")
    load_planetoid("cora", tmp_path / "empty", cache_dir=cache)
    assert len(calls) == 1  # the cached copy is read, no second download


def test_failed_download_is_dataset_not_found(tmp_path, monkeypatch):
    def broken(pyg_name, cache_dir):
        raise OSError("connection reset")

    monkeypatch.setattr(planetoid_mod, "_network_reachable", lambda timeout=3.0: True)
    monkeypatch.setattr(planetoid_mod, "_download", broken)
    with pytest.raises(DatasetNotFoundError, match="download into .* failed: connection reset"):
        load_planetoid("pubmed", tmp_path, cache_dir=tmp_path / "cache")


def test_default_cache_dir(monkeypatch, tmp_path):
    monkeypatch.setenv("PRIVGRAPH_CACHE_DIR", str(tmp_path))
    assert planetoid_mod.default_cache_dir() == tmp_path / "planetoid"
    monkeypatch.delenv("PRIVGRAPH_CACHE_DIR")
    assert planetoid_mod.default_cache_dir() == Path.home() / ".cache" / "privgraph" / "planetoid"


def test_unknown_name(tmp_path):
    with pytest.raises(ValueError, match=r"unknown Planetoid dataset 'corra'.*citeseer.*cora.*pubmed"):
        load_planetoid("corra", tmp_path)


# -- real Cora ------------------------------------------------------------------------------------
@pytest.mark.dataset
def test_real_cora_counts(cora):
    g = cora
    assert g.num_nodes == 2_708
    assert g.num_edges == 5_278 and g.edges_private.shape[1] == 0
    assert g.num_features == 1_433
    assert g.num_classes == 7
    assert g.x.dtype == np.float32 and g.y.dtype == np.int64
    assert ((g.x == 0.0) | (g.x == 1.0)).all()
    assert (g.train_mask.sum(), g.val_mask.sum(), g.test_mask.sum()) == (140, 500, 1_000)
    assert not (g.train_mask & g.val_mask).any() and not (g.val_mask & g.test_mask).any()
    assert g.meta["name"] == "cora"
    assert g.meta["source"]
    assert g.meta["feature_bounds"] == [0.0, 1.0]
    assert g.meta["feature_bounds_source"] == "dataset definition (binary bag-of-words)"


@pytest.mark.dataset
def test_real_cora_matches_pyg_reader(cora, cora_root):
    from torch_geometric.io import read_planetoid_data

    data = read_planetoid_data(str(cora_root / "planetoid" / "Cora" / "raw"), "cora")
    assert data.edge_index.shape[1] == 2 * cora.num_edges  # PyG stores both directions
    assert np.array_equal(data.x.numpy(), cora.x) and np.array_equal(data.y.numpy(), cora.y)


@pytest.mark.dataset
def test_real_cora_via_load_dataset_leaves_data_dir_untouched(cora_root, monkeypatch):
    monkeypatch.setattr(planetoid_mod, "_network_reachable", lambda timeout=3.0: False)
    before = _snapshot(cora_root / "planetoid")
    g = load_dataset("cora", root=cora_root, rho=0.1, split_seed=0)
    assert _snapshot(cora_root / "planetoid") == before
    assert g.edges_private.shape[1] == round(0.1 * 5_278)
    assert g.meta["private_edge_fraction"] == 0.1
