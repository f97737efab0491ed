"""The partitioned layout: tasks read and write their own partition's files; the release equals
privatize_graph's on the same partitioning and seed, with any number of Dask workers."""

from __future__ import annotations

import os
import stat

import numpy as np
import pytest

from privgraph.ingest.datasets.split import split_public_private
from privgraph.ingest.datasets.synthetic import sbm_graph
from privgraph.errors import ConfigError
from privgraph.mechanisms import build_mechanism
from privgraph.parts.partition import partition_graph
from privgraph.privatize.partitioned import (
    load_partitioned_release,
    privatize_partitioned,
    privatize_through_files,
    write_partitioned_input,
)
from privgraph.privatize.release import privatize_graph
from tasks.dask_executor import DaskExecutor


@pytest.fixture(scope="module")
def graph():
    return split_public_private(sbm_graph(3000, num_classes=3, avg_degree=8.0, num_features=16, seed=1), 0.2, seed=2)


@pytest.fixture(scope="module")
def partitioning(graph):
    return partition_graph(graph, 4, "metis")


@pytest.fixture(scope="module")
def source(graph, partitioning, tmp_path_factory):
    return write_partitioned_input(graph, partitioning, tmp_path_factory.mktemp("input") / "graph")


def _mechanisms(edges: str = "dprr") -> dict:
    return {
        "features": build_mechanism("feature_rr", {"epsilon": 1.0, "bins": 4}),
        "edges": build_mechanism(edges, {"epsilon": 1.0}),
        "labels": build_mechanism("label_rr", {"epsilon": 1.0, "num_classes": 3, "mask": ["train_mask"]}),
    }


def _key_order(e: np.ndarray, n: int) -> np.ndarray:
    return e[:, np.argsort(e[0] * np.int64(n) + e[1], kind="stable")]


def _assert_same(reference, loaded, n: int) -> None:
    g = reference.graph
    for field in ("x", "y", "edges_private", "train_mask", "val_mask", "test_mask"):
        assert np.array_equal(getattr(g, field), getattr(loaded, field)), field
    assert np.array_equal(_key_order(g.edges_public, n), loaded.edges_public)
    assert loaded.meta["privatized"] is True


@pytest.mark.parametrize("edges", ["dprr", "warner_rr"])
def test_the_partitioned_release_equals_privatize_graph(graph, partitioning, source, tmp_path, edges):
    mechs = _mechanisms(edges)
    seed = np.random.SeedSequence(5)
    reference = privatize_graph(graph, partitioning=partitioning, root_seed=seed, **mechs)
    res = privatize_partitioned(source, tmp_path / "release", root_seed=seed, **mechs)
    _assert_same(reference, load_partitioned_release(source, tmp_path / "release"), graph.num_nodes)
    assert res.ledger.entries == reference.ledger.entries
    assert res.stats == reference.stats and res.release == reference.release
    # the shuffle's inboxes are gone; each partition's files are the owner's
    assert sorted(p.name for p in (tmp_path / "release").iterdir()) == [f"part-{i:05d}" for i in range(4)]
    f = tmp_path / "release" / "part-00000" / "edges_private.npy"
    assert stat.S_IMODE(os.stat(f).st_mode) == 0o600
    assert sum(p["edges"] for p in res.parts) == reference.graph.edges_private.shape[1]
    assert all(len(p["x_sha256"]) == 64 for p in res.parts)
    # the seed matters
    other = privatize_partitioned(source, tmp_path / "other", root_seed=np.random.SeedSequence(6), **mechs)
    assert other.parts[0]["x_sha256"] != res.parts[0]["x_sha256"]


@pytest.mark.dask
def test_same_bytes_on_two_dask_workers(graph, partitioning, source, tmp_path):
    """Serial and 2 workers (tests/test_faults.py runs the layout on a real scheduler with a worker
    killed mid-run)."""
    mechs = _mechanisms()
    serial = privatize_partitioned(source, tmp_path / "serial", root_seed=np.random.SeedSequence(3), **mechs)
    with DaskExecutor(n_workers=2, threads_per_worker=1) as ex:
        res = privatize_partitioned(source, tmp_path / "dask", root_seed=np.random.SeedSequence(3), executor=ex, **mechs)
    assert res.parts == serial.parts


def test_refusals_come_before_any_row_is_read_and_leave_nothing(graph, source, tmp_path):
    mechs = _mechanisms()
    with pytest.raises(ConfigError, match="per-node edge mechanisms"):
        privatize_partitioned(source, tmp_path / "a", root_seed=np.random.SeedSequence(1),
                              **{**mechs, "edges": build_mechanism("edge_rand", {"epsilon": 1.0})})
    with pytest.raises(ConfigError, match="no edge mechanism"):
        privatize_partitioned(source, tmp_path / "a", root_seed=np.random.SeedSequence(1), **{**mechs, "edges": None})
    with pytest.raises(ValueError, match="num_classes"):
        privatize_partitioned(source, tmp_path / "a", root_seed=np.random.SeedSequence(1),
                              **{**mechs, "labels": build_mechanism("label_rr", {"epsilon": 1.0})})
    assert not (tmp_path / "a").exists()
    (tmp_path / "kept").mkdir()
    (tmp_path / "kept" / "x").write_text("a previous release")
    with pytest.raises(FileExistsError, match="never overwritten"):
        privatize_partitioned(source, tmp_path / "kept", root_seed=np.random.SeedSequence(1), **mechs)
    assert (tmp_path / "kept" / "x").read_text() == "a previous release"
    with pytest.raises(FileExistsError, match="never overwritten"):
        write_partitioned_input(graph, partition_graph(graph, 2, "hash"), source)
    with pytest.raises(FileNotFoundError, match="not a partitioned input"):
        privatize_partitioned(tmp_path, tmp_path / "b", root_seed=np.random.SeedSequence(1), **mechs)


def test_a_failing_task_removes_the_half_written_release(source, tmp_path):
    class Failing:
        """FeatureRR whose third partition fails after two were written."""

        def __init__(self) -> None:
            self.inner = build_mechanism("feature_rr", {"epsilon": 1.0})
            self.calls = 0

        def __getattr__(self, name):
            return getattr(self.inner, name)

        def privatize_rows(self, rows, rng):
            self.calls += 1
            if self.calls == 3:
                raise RuntimeError("worker lost")
            return self.inner.privatize_rows(rows, rng)

    with pytest.raises(RuntimeError, match="worker lost"):
        privatize_partitioned(source, tmp_path / "r", features=Failing(), edges=build_mechanism("dprr", {"epsilon": 1.0}),
                              root_seed=np.random.SeedSequence(1))
    assert not (tmp_path / "r").exists()


def test_the_input_is_the_owners_and_public_edges_sit_with_their_smaller_end(graph, partitioning, source):
    assert stat.S_IMODE(os.stat(source).st_mode) == 0o700
    assert stat.S_IMODE(os.stat(source / "private_indices.npy").st_mode) == 0o600
    for i, nodes in enumerate(partitioning.parts):
        pub = np.load(source / f"part-{i:05d}" / "edges_public.npy")
        assert np.isin(pub[0], nodes).all()
    total = sum(np.load(source / f"part-{i:05d}" / "edges_public.npy").shape[1] for i in range(4))
    assert total == graph.edges_public.shape[1]


def test_privatize_through_files_is_privatize_graph(graph, partitioning, tmp_path):
    mechs = _mechanisms()
    seed = np.random.SeedSequence(8)
    reference = privatize_graph(graph, partitioning=partitioning, root_seed=seed, **mechs)
    res = privatize_through_files(graph, partitioning=partitioning, staging=tmp_path / "staging", root_seed=seed, **mechs)
    for field in ("x", "y", "edges_public", "edges_private", "train_mask", "val_mask", "test_mask"):
        assert np.array_equal(getattr(res.graph, field), getattr(reference.graph, field)), field
    assert res.graph.meta == reference.graph.meta
    assert (res.ledger.entries, res.stats, res.release) == (reference.ledger.entries, reference.stats, reference.release)
    assert list((tmp_path / "staging").iterdir()) == []  # the private input and release are gone
    with pytest.raises(ConfigError, match="per-node edge mechanisms"):  # refused before anything is written
        privatize_through_files(graph, partitioning=partitioning, staging=tmp_path / "nothing", root_seed=seed,
                                **{**mechs, "edges": build_mechanism("lapgraph", {"epsilon": 1.0})})
    assert not (tmp_path / "nothing").exists()


def test_the_config_names_the_mechanisms_the_layout_runs():
    """The layout runs what declares ``runs_partitioned`` (the local-reports shape); the config's
    refusal names them from the registry."""
    from privgraph.config.loader import parse_config
    from privgraph.mechanisms import MECHANISMS, edge_mechanisms
    from privgraph.mechanisms.edges.shapes import LocalReports

    runnable = edge_mechanisms(runs_partitioned=True)
    assert runnable == sorted(n for n, c in MECHANISMS.items() if isinstance(c, type) and issubclass(c, LocalReports))
    assert runnable  # not vacuous
    pipeline = {"dataset": {"name": "cora"}, "edges": {"mechanism": "edge_rand", "epsilon": 1.0},
                "partitions": {"layout": "files"}}
    with pytest.raises(ConfigError, match=rf"pipelines\.p\.partitions\.layout: files runs the per-node edge mechanisms \({', '.join(runnable)}\)"):
        parse_config({"pipelines": {"p": pipeline}})
    parse_config({"pipelines": {"p": {**pipeline, "edges": {"mechanism": "dprr", "epsilon": 1.0}}}})
