"""load_tu / write_tu: the TUDataset raw layout, round trips, and one-line errors naming file and line."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from privgraph.ingest.datasets.graph_families import synthetic_graph_set
from privgraph.ingest.datasets.graph_set import GraphSet
from privgraph.ingest.datasets.tu import load_tu, write_tu
from privgraph.errors import DatasetNotFoundError, GraphValidationError, exit_code_for
from privgraph.graph import GraphData


def _same(a: GraphSet, b: GraphSet) -> None:
    assert len(a) == len(b) and np.array_equal(a.labels, b.labels)
    for ga, gb in zip(a, b):
        assert ga.num_nodes == gb.num_nodes
        assert np.array_equal(ga.edges_public, gb.edges_public)
        assert np.array_equal(ga.edges_private, gb.edges_private)
        assert (ga.x is None) == (gb.x is None)
        if ga.x is not None:
            assert np.array_equal(ga.x, gb.x)


@pytest.mark.parametrize("fraction", [1.0, 0.4])
def test_round_trip_synthetic(tmp_path, fraction):
    gs = synthetic_graph_set(40, seed=2, families=("ba", "er", "ws"), private_fraction=fraction, split_seed=9)
    d = write_tu(gs, tmp_path, "SYN")
    assert d == tmp_path / "SYN" / "raw"
    back = load_tu(tmp_path, "SYN", private_fraction=fraction, split_seed=9)
    _same(gs, back)
    assert back.name == "SYN" and back.meta["label_values"] == [0, 1, 2]
    assert back.meta["features"].startswith("none")
    assert not any("seed" in k for k in back.meta)


def test_round_trip_with_attributes_and_isolated_nodes(tmp_path):
    rng = np.random.default_rng(0)
    graphs = (
        GraphData.from_edges(4, np.array([[0, 1], [1, 2]]), x=rng.normal(size=(4, 3)).astype(np.float32)),
        GraphData(3, x=rng.normal(size=(3, 3)).astype(np.float32)),  # no edges at all
        GraphData.from_edges(2, np.array([[1], [0]]), x=np.float32([[1e-30, -3.4e38, 7], [0, 1, 2]])),
    )
    gs = GraphSet(graphs, np.array([1, 0, 1]), "ATTR")
    write_tu(gs, tmp_path, "ATTR")
    back = load_tu(tmp_path, "ATTR", private_fraction=0.0)
    _same(gs, back)
    assert back.meta["features"] == "node_attributes"
    assert all(g.edges_private.shape[1] == 0 for g in back)


def test_write_refuses_to_overwrite(tmp_path):
    gs = synthetic_graph_set(4, seed=0)
    write_tu(gs, tmp_path, "S")
    with pytest.raises(FileExistsError, match="S_A.txt exists"):
        write_tu(gs, tmp_path, "S")
    write_tu(gs, tmp_path, "S", overwrite=True)


def _write(d: Path, name: str, **files: str) -> None:
    d.mkdir(parents=True, exist_ok=True)
    for suffix, text in files.items():
        (d / f"{name}_{suffix}.txt").write_text(text)


# two graphs: nodes 1-3 (graph 1), 4-5 (graph 2); both directions, a repeat and a self-loop
GOOD = {
    "A": "1, 2\n2, 1\n2, 3\n3, 2\n1, 2\n3, 3\n4, 5\n5, 4\n",
    "graph_indicator": "1\n1\n1\n2\n2\n",
    "graph_labels": "-1\n1\n",
}


def test_hand_written_files_without_raw_folder(tmp_path):
    _write(tmp_path / "T", "T", **GOOD, node_labels="2\n0\n2\n1\n0\n")
    gs = load_tu(tmp_path, "T")
    assert gs.labels.tolist() == [0, 1] and gs.meta["label_values"] == [-1, 1]
    g0, g1 = gs
    assert g0.num_nodes == 3 and g0.edges_private.tolist() == [[0, 1], [1, 2]]  # loop and repeats dropped
    assert g1.num_nodes == 2 and g1.edges_private.tolist() == [[0], [1]]
    assert g0.edges_public.shape[1] == 0  # private_fraction 1.0: every edge private
    assert gs.meta["features"] == "node_labels (one-hot)"
    assert g0.x.tolist() == [[0, 0, 1], [1, 0, 0], [0, 0, 1]] and g1.x.tolist() == [[0, 1, 0], [1, 0, 0]]


def test_blank_lines_and_spaces_are_tolerated(tmp_path):
    _write(tmp_path / "T" / "raw", "T", A="1,2\n\n 2 , 3 \n4, 5\n", graph_indicator="1\n1\n1\n2\n2\n",
           graph_labels="0\n1\n\n")
    gs = load_tu(tmp_path, "T")
    assert gs[0].edges_private.tolist() == [[0, 1], [1, 2]]


def _err(tmp_path: Path, exc_type: type, match: str, **overrides: str) -> None:
    files = {**GOOD, **overrides}
    _write(tmp_path / "T" / "raw", "T", **{k: v for k, v in files.items() if v is not None})
    with pytest.raises(exc_type, match=match) as info:
        load_tu(tmp_path, "T")
    msg = str(info.value)
    assert "\n" not in msg
    assert exit_code_for(info.value) == 2


@pytest.mark.parametrize(
    "overrides, match",
    [
        ({"A": "1, 2\n2, x\n"}, r"T_A\.txt: line 2: expected integers"),
        ({"A": "1, 2\n\n2, 3, 4\n"}, r"T_A\.txt: line 3: expected 2 comma-separated values"),
        ({"A": "1, 2\n2, 6\n"}, r"T_A\.txt: line 2: node id out of range 1\.\.5"),
        ({"A": "1, 2\n0, 1\n"}, r"T_A\.txt: line 2: node id out of range"),
        ({"A": "1, 2\n3, 4\n"}, r"T_A\.txt: line 2: an edge joins two graphs"),
        ({"graph_indicator": "1\n1\n1\n3\n2\n"}, r"graph_indicator\.txt: line 4: a graph id out of range 1\.\.2"),
        ({"graph_indicator": "1\n2\n1\n2\n2\n"}, r"graph_indicator\.txt: line 3: a graph id below the line before's"),
        ({"graph_indicator": "1\n1\n1\n1\n1\n", "A": "1, 2\n"}, r"graph_indicator\.txt: graph 2 has no nodes"),
        ({"graph_labels": "1\nb\n"}, r"graph_labels\.txt: line 2: expected integers"),
        ({"graph_labels": "1\n1\n"}, r"graph_labels\.txt: .*at least 2 classes"),
        ({"graph_labels": ""}, r"graph_labels\.txt: empty file"),
        ({"node_attributes": "1.0\n2\n3\n4\n"}, r"node_attributes\.txt: 4 rows but .* lists 5 nodes"),
        ({"node_attributes": "1, 2\n2, 3\nnan, 1\n4, 4\n5, 5\n"}, r"node_attributes\.txt: line 3: NaN or infinite"),
        ({"node_labels": "1\n2\n-\n4\n5\n"}, r"node_labels\.txt: line 3: expected integers"),
    ],
)
def test_bad_rows_name_file_and_line(tmp_path, overrides, match):
    _err(tmp_path, GraphValidationError, match, **overrides)


def test_missing_required_file(tmp_path):
    _write(tmp_path / "T" / "raw", "T", A=GOOD["A"], graph_indicator=GOOD["graph_indicator"])
    with pytest.raises(DatasetNotFoundError, match=r"T_graph_labels\.txt: file not found") as info:
        load_tu(tmp_path, "T")
    assert "\n" not in str(info.value)


def test_missing_dataset_directory(tmp_path):
    with pytest.raises(DatasetNotFoundError, match=r"no NOPE_A\.txt in .*NOPE/raw or .*NOPE \(nothing is downloaded\)"):
        load_tu(tmp_path, "NOPE")


def test_bad_name(tmp_path):
    with pytest.raises(DatasetNotFoundError, match="plain name"):
        load_tu(tmp_path, "../x")
