"""The privatize stage of a partitioned graph on tasks equals the files layout's on the graph read
whole: the same ledger, stats, stored objects (checksums), checkpoint summaries and counts."""

from __future__ import annotations

import datetime as dt
import functools
from pathlib import Path

import numpy as np
import pytest

from privgraph.errors import ConfigError
from privgraph.ingest.partitioned_graph import load_partitioned_graph, open_partitioned_graph
from privgraph.privatize.partitioned_release import privatize_partitioned_graph
from privgraph.ingest.partitioned_writer import write_partitioned_graph
from privgraph.mechanisms import build_mechanism
from privgraph.parts.partition import partition_graph
from privgraph.privatize.partitioned import privatize_through_files
from privgraph.publish.release_parts import parts_writer, write_release_parts
from privgraph.storage import open_store
from privgraph.storage.parts import open_parts_area

WHEN = dt.datetime(2026, 11, 29, tzinfo=dt.timezone.utc)
N = 400


@pytest.fixture(scope="module")
def graph_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("generic")
    rng = np.random.default_rng(3)
    e = rng.integers(0, N, (2, 2400))
    e = np.unique(np.sort(e[:, e[0] != e[1]], axis=0), axis=1)
    private = rng.random(e.shape[1]) < 0.2
    (root / "edges.csv").write_text("src,dst,private\n" + "".join(
        f"{u},{v},{'true' if p else 'false'}\n" for u, v, p in zip(e[0], e[1], private, strict=True)))
    np.save(root / "x.npy", rng.random((N, 6)).astype(np.float32))
    np.save(root / "y.npy", rng.integers(0, 4, N))
    write_partitioned_graph(root / "edges.csv", features=root / "x.npy", labels=root / "y.npy",
                            destination=root / "graph", range_size=90)
    return root / "graph"


def _mechanisms(edges: str = "dprr") -> dict:
    return {"features": build_mechanism("feature_rr", {"epsilon": 1.0, "bins": 4}),
            "edges": build_mechanism(edges, {"epsilon": 1.0}),
            "labels": build_mechanism("label_rr", {"epsilon": 1.0, "num_classes": 4})}


def _writer(store: Path) -> functools.partial:
    return functools.partial(write_release_parts, area=open_parts_area(open_store(str(store)), "p", WHEN))


@pytest.mark.parametrize("method", ["metis", "hash"])
def test_the_same_release_as_the_files_layout_on_the_whole_graph(graph_dir: Path, tmp_path: Path, method: str) -> None:
    seed = np.random.SeedSequence(11)
    scale = privatize_partitioned_graph(
        open_partitioned_graph(graph_dir), num_parts=3, method=method, staging=tmp_path / "staging-a",
        root_seed=seed, write_parts=_writer(tmp_path / "a"), **_mechanisms())
    whole = load_partitioned_graph(graph_dir)
    ref = privatize_through_files(
        whole, partitioning=partition_graph(whole, 3, method), staging=tmp_path / "staging-b", root_seed=seed,
        write_parts=_writer(tmp_path / "b"), **_mechanisms())
    assert scale.ledger.entries == ref.ledger.entries
    assert scale.stats == ref.stats and scale.release == ref.release
    assert scale.parts == ref.parts  # the stored objects' sha256 and sizes
    assert scale.summaries == ref.summaries
    assert scale.graph_summary == dict(ref.graph.summary())
    assert scale.graph_summary["num_edges_private"] > 0
    assert not any((tmp_path / "staging-a").iterdir())  # the raw input is removed


def test_a_global_edge_mechanism_is_refused_and_the_parts_area_aborted(graph_dir: Path, tmp_path: Path) -> None:
    area = open_parts_area(open_store(str(tmp_path / "a")), "p", WHEN)
    with pytest.raises(ConfigError, match="global"), parts_writer(area) as write_parts:
        privatize_partitioned_graph(
            open_partitioned_graph(graph_dir), num_parts=2, method="hash", staging=tmp_path / "staging",
            root_seed=np.random.SeedSequence(1), write_parts=write_parts, **_mechanisms("local_lap"))
    assert not [f for f in (tmp_path / "a").rglob("*") if f.is_file()]
    assert not any((tmp_path / "staging").iterdir())
