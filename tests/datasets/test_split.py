"""split_public_private, random_node_split, and the load_dataset registry that applies them."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from privgraph.ingest.datasets import data_root, load_dataset, random_node_split, split_public_private
from privgraph.ingest.datasets.synthetic import sbm_graph
from privgraph.graph import GraphData


def _key_set(e: np.ndarray) -> set[tuple[int, int]]:
    return set(map(tuple, e.T.tolist()))


@pytest.fixture(scope="module")
def graph() -> GraphData:
    return sbm_graph(500, num_classes=3, avg_degree=8.0, num_features=4, seed=3)


@pytest.mark.parametrize("rho", [0.0, 0.05, 0.1, 0.2, 0.5, 1.0])
def test_exactly_round_rho_m_private(graph, rho):
    m = graph.num_edges
    g = split_public_private(graph, rho, seed=0)
    assert g.edges_private.shape[1] == round(rho * m)
    assert g.num_edges == m
    assert _key_set(g.edges("all")) == _key_set(graph.edges("all"))
    assert not (_key_set(g.edges_public) & _key_set(g.edges_private))
    assert g.meta["private_edge_fraction"] == rho
    assert "uniform" in g.meta["private_edge_selection"]
    assert "seed" not in g.meta


def test_deterministic_for_a_seed_and_seed_matters(graph):
    a = split_public_private(graph, 0.1, seed=7)
    b = split_public_private(graph, 0.1, seed=7)
    c = split_public_private(graph, 0.1, seed=8)
    assert np.array_equal(a.edges_private, b.edges_private)
    assert not np.array_equal(a.edges_private, c.edges_private)
    rng_a = split_public_private(graph, 0.1, seed=np.random.default_rng(7))
    assert np.array_equal(rng_a.edges_private, a.edges_private)


def test_selection_ignores_previous_marking_and_input_is_not_mutated(graph):
    before = graph.keyed_digest(b"test-key-0123456789")
    once = split_public_private(graph, 0.3, seed=1)
    again = split_public_private(once, 0.1, seed=5)
    direct = split_public_private(graph, 0.1, seed=5)
    assert np.array_equal(again.edges_private, direct.edges_private)
    assert graph.keyed_digest(b"test-key-0123456789") == before
    assert graph.edges_private.shape[1] == 0


def test_selection_is_roughly_uniform():
    g = GraphData.from_edges(50, np.array([np.arange(49), np.arange(1, 50)]))
    counts = np.zeros(49)
    for s in range(400):
        pri = split_public_private(g, 0.2, seed=s).edges_private
        counts[pri[0]] += 1
    # each edge is private with probability 10/49 ~ 0.204: 400 draws give ~82 +- 8
    assert counts.min() > 50 and counts.max() < 115


@pytest.mark.parametrize("rho", [-0.1, 1.5, float("nan"), float("inf"), True, "0.1", None])
def test_invalid_rho(graph, rho):
    with pytest.raises(ValueError, match="rho"):
        split_public_private(graph, rho, seed=0)


def test_empty_graph():
    g = split_public_private(GraphData(num_nodes=3), 0.5, seed=0)
    assert g.num_edges == 0 and g.meta["private_edge_fraction"] == 0.5


def test_random_node_split_sizes_disjoint_cover():
    tr, va, te = random_node_split(101, train=0.5, val=0.25, seed=0)
    assert (tr.sum(), va.sum(), te.sum()) == (50, 25, 26)
    assert not (tr & va).any() and not (tr & te).any() and not (va & te).any()
    assert (tr | va | te).all()
    assert tr.dtype == np.bool_
    tr2, _, _ = random_node_split(101, train=0.5, val=0.25, seed=0)
    tr3, _, _ = random_node_split(101, train=0.5, val=0.25, seed=1)
    assert np.array_equal(tr, tr2) and not np.array_equal(tr, tr3)


@pytest.mark.parametrize(
    "kwargs", [{"train": 0.8, "val": 0.3}, {"train": -0.1}, {"val": float("nan")}, {"train": 2}]
)
def test_random_node_split_invalid(kwargs):
    with pytest.raises(ValueError, match="train|val"):
        random_node_split(10, seed=0, **kwargs)


# -- load_dataset / data_root -------------------------------------------------------------------
def test_unknown_dataset_lists_known_names():
    with pytest.raises(ValueError, match=r"unknown dataset 'nope'.*cora.*facebook.*generic.*sbm"):
        load_dataset("nope")


def test_load_dataset_sbm_with_and_without_rho():
    g = load_dataset("sbm", num_nodes=300, avg_degree=6.0, seed=1)
    assert g.edges_private.shape[1] == 0
    h = load_dataset("sbm", num_nodes=300, avg_degree=6.0, seed=1, rho=0.2, split_seed=4)
    assert h.edges_private.shape[1] == round(0.2 * g.num_edges)
    assert h.meta["private_edge_fraction"] == 0.2
    k = load_dataset("SBM", num_nodes=300, avg_degree=6.0, seed=1, rho=0.2, split_seed=4)
    assert np.array_equal(h.edges_private, k.edges_private)


def test_load_dataset_generic_keeps_private_column(tmp_path: Path):
    p = tmp_path / "e.csv"
    p.write_text("src,dst,private\n0,1,true\n1,2,false\n2,3,false\n")
    g = load_dataset("generic", edges=p)
    assert g.edges_private.tolist() == [[0], [1]]
    from privgraph.errors import ConfigError

    with pytest.raises(ConfigError, match="marks itself") as ei:  # one line, exit 2 (issue 27: a traceback)
        load_dataset("generic", edges=p, rho=0.5)
    assert "1" not in str(ei.value).replace("0.5", "")  # how many edges are private is not said
    q = tmp_path / "f.csv"
    q.write_text("src,dst\n0,1\n1,2\n2,3\n3,0\n")
    assert load_dataset("generic", edges=q, rho=0.5).edges_private.shape[1] == 2


def test_load_dataset_missing_required_options():
    with pytest.raises(ValueError, match="edges="):
        load_dataset("generic")
    with pytest.raises(ValueError, match="num_nodes="):
        load_dataset("sbm")


def test_data_root(monkeypatch, tmp_path):
    monkeypatch.setenv("PRIVGRAPH_DATA_ROOT", str(tmp_path))
    assert data_root() == tmp_path
    monkeypatch.delenv("PRIVGRAPH_DATA_ROOT")
    monkeypatch.chdir(tmp_path)
    assert data_root() == tmp_path / "data"


def test_load_dataset_uses_data_root(monkeypatch, tmp_path):
    from privgraph.errors import DatasetNotFoundError

    monkeypatch.setenv("PRIVGRAPH_DATA_ROOT", str(tmp_path))
    with pytest.raises(DatasetNotFoundError, match=str(tmp_path / "musae" / "facebook")):
        load_dataset("facebook")
