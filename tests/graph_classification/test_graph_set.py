"""GraphSet validation and helpers; the private-user split (paper 004's customized setting)."""

from __future__ import annotations

import numpy as np
import pytest

from privgraph.ingest.datasets.graph_set import GraphSet, mark_private_users, split_private_users
from privgraph.errors import GraphValidationError
from privgraph.graph import GraphData
from privgraph.seeding import partition_seeds


def _path(n: int) -> GraphData:
    return GraphData.from_edges(n, np.array([np.arange(n - 1), np.arange(1, n)]))


def _set(k: int = 4, **kw) -> GraphSet:
    graphs = tuple(_path(5 + i) for i in range(k))
    return GraphSet(graphs, np.arange(k) % 2, **kw)


def test_basic_views():
    gs = _set(6, name="paths", meta={"a": 1})
    assert len(gs) == 6 and gs.num_classes == 2 and gs.num_features == 0
    assert gs.labels.dtype == np.int64 and not gs.labels.flags.writeable
    assert list(gs)[2] is gs[2]
    s = gs.summary()
    assert s["class_counts"] == [3, 3] and s["num_nodes_max"] == 10
    assert "paths" in repr(gs)


def test_list_of_graphs_is_stored_as_tuple_and_labels_are_copied():
    labels = np.array([0, 1])
    gs = GraphSet([_path(3), _path(4)], labels)
    labels[0] = 1
    assert isinstance(gs.graphs, tuple) and gs.labels.tolist() == [0, 1]


@pytest.mark.parametrize(
    "graphs, labels, match",
    [
        ((_path(3), _path(4)), [0], "2 graphs but 1 labels"),
        ((_path(3), _path(4)), [0, -1], "a negative label at graph 1"),
        ((_path(3), _path(4)), [1, 1], "at least 2 classes"),
        ((_path(3), "g"), [0, 1], r"graphs\[1\] is a str"),
        ((_path(3), _path(4)), [[0, 1]], "shape"),
        ((_path(3), _path(4)), [0.0, 1.5], "non-integer label at graph 1"),
        ((_path(3), _path(4)), [True, False], "must be integers"),
        ((), [], "no graphs"),
    ],
)
def test_validation_one_line(graphs, labels, match):
    with pytest.raises(GraphValidationError, match=match) as exc:
        GraphSet(graphs, np.asarray(labels))
    assert "\n" not in str(exc.value)


def test_mixed_features_refused():
    a = _path(3).replace(x=np.ones((3, 2), np.float32))
    with pytest.raises(GraphValidationError, match="graph 1 has no features but graph 0 has 2"):
        GraphSet((a, _path(4)), np.array([0, 1]))


def test_bad_name():
    with pytest.raises(GraphValidationError, match="name"):
        _set(name=" ")


def test_replace_graphs_keeps_labels_and_checks_length():
    gs = _set(4)
    new = gs.replace_graphs([g.replace(edges_public=np.zeros((2, 0), np.int64)) for g in gs], note="x")
    assert np.array_equal(new.labels, gs.labels) and new.name == gs.name and new.meta["note"] == "x"
    assert all(g.num_edges == 0 for g in new)
    with pytest.raises(GraphValidationError, match="3 new graphs for a set of 4"):
        gs.replace_graphs(list(gs)[:3])


def _complete(n: int) -> GraphData:
    iu = np.triu_indices(n, 1)
    return GraphData.from_edges(n, np.stack(iu))


@pytest.mark.parametrize("f", [0.0, 0.3, 0.5, 1.0])
def test_private_iff_both_endpoints_private_users(f):
    g = _complete(20)
    out = mark_private_users(g, f, seed=3)
    k = round(f * 20)
    assert out.meta["num_private_users"] == k and out.meta["private_user_fraction"] == f
    assert out.num_edges == g.num_edges
    # on a complete graph the private edges are exactly the pairs of private users
    assert out.edges_private.shape[1] == k * (k - 1) // 2
    users = np.unique(out.edges_private) if k > 1 else np.zeros(0, np.int64)
    assert users.size == (k if k > 1 else 0)
    pub = out.edges_public
    assert not (np.isin(pub[0], users) & np.isin(pub[1], users)).any()
    assert not any("seed" in k for k in out.meta)


def test_split_is_seeded_per_graph():
    gs = GraphSet(tuple(_complete(10 + i) for i in range(4)), np.array([0, 1, 0, 1]))
    a = split_private_users(gs, 0.5, seed=11)
    b = split_private_users(gs, 0.5, seed=11)
    c = split_private_users(gs, 0.5, seed=12)
    for i, (ga, gb) in enumerate(zip(a, b)):
        assert np.array_equal(ga.edges_private, gb.edges_private)
        want = mark_private_users(gs[i], 0.5, seed=partition_seeds(np.random.SeedSequence(11), 4)[i])
        assert np.array_equal(ga.edges_private, want.edges_private)
    assert any(not np.array_equal(x.edges_private, y.edges_private) for x, y in zip(a, c))
    assert a.meta["private_user_fraction"] == 0.5 and "both endpoints" in a.meta["private_user_selection"]


@pytest.mark.parametrize("f", [-0.1, 1.5, float("nan"), "half", True])
def test_bad_fraction(f):
    with pytest.raises(ValueError, match="private_fraction"):
        split_private_users(_set(), f, seed=0)
