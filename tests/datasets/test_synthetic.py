"""The stochastic block model generator: determinism, degree, homophily, features, scale."""

from __future__ import annotations

import numpy as np
import pytest

from privgraph.ingest.datasets.synthetic import _sample_between, _sample_pairs, sbm_graph


def _homophily(g) -> float:
    e = g.edges("all")
    return float((g.y[e[0]] == g.y[e[1]]).mean())


def test_same_seed_same_graph_and_seed_matters():
    a = sbm_graph(2000, seed=11)
    b = sbm_graph(2000, seed=11)
    c = sbm_graph(2000, seed=12)
    assert a.keyed_digest(b"test-key-0123456789") == b.keyed_digest(b"test-key-0123456789")
    assert a.keyed_digest(b"test-key-0123456789") != c.keyed_digest(b"test-key-0123456789")
    d = sbm_graph(2000, seed=np.random.default_rng(11))
    assert d.keyed_digest(b"test-key-0123456789") == a.keyed_digest(b"test-key-0123456789")


def test_edges_do_not_depend_on_feature_parameters():
    a = sbm_graph(1000, num_features=8, seed=1)
    b = sbm_graph(1000, num_features=3, feature_signal=0.0, seed=1)
    assert np.array_equal(a.edges_public, b.edges_public) and np.array_equal(a.y, b.y)


@pytest.mark.parametrize("homophily", [0.1, 0.5, 0.8, 0.95])
def test_average_degree_and_homophily(homophily):
    g = sbm_graph(20000, num_classes=4, avg_degree=10.0, homophily=homophily, seed=5)
    assert 2 * g.num_edges / g.num_nodes == pytest.approx(10.0, rel=0.02)
    assert _homophily(g) == pytest.approx(homophily, abs=0.01)
    assert g.edges_private.shape[1] == 0


def test_structure_labels_features_split():
    g = sbm_graph(1000, num_classes=5, num_features=16, feature_signal=2.0, seed=0)
    assert g.num_nodes == 1000 and g.num_classes == 5 and g.num_features == 16
    assert np.bincount(g.y).tolist() == [200] * 5  # balanced blocks
    assert g.x.dtype == np.float32 and g.x.min() >= 0.0 and g.x.max() <= 1.0
    assert g.meta["feature_bounds"] == [0.0, 1.0]
    # label-correlated: class means differ by much more than their standard error
    means = np.stack([g.x[g.y == c].mean(0) for c in range(5)])
    assert np.abs(means - means.mean(0)).max() > 0.1
    tr, va, te = g.train_mask, g.val_mask, g.test_mask
    assert (tr.sum(), va.sum(), te.sum()) == (500, 250, 250)
    assert (tr ^ va ^ te).all()


def test_no_signal_means_features_unrelated_to_labels():
    g = sbm_graph(4000, num_classes=2, num_features=4, feature_signal=0.0, seed=0)
    gap = np.abs(g.x[g.y == 0].mean(0) - g.x[g.y == 1].mean(0))
    assert gap.max() < 0.03


def test_no_features():
    g = sbm_graph(50, num_features=0, seed=0)
    assert g.x is None and g.num_features == 0


def test_single_class_and_one_node_per_class():
    g = sbm_graph(200, num_classes=1, avg_degree=6.0, seed=0)
    assert _homophily(g) == 1.0
    h = sbm_graph(200, num_classes=200, avg_degree=6.0, seed=0)
    assert _homophily(h) == 0.0


def test_dense_small_graph_uses_exact_path():
    # 10 nodes, 2 blocks of 5: 10 within pairs per block; avg degree 7 needs most of them
    g = sbm_graph(10, num_classes=2, avg_degree=7.0, homophily=0.5, seed=3)
    e = g.edges("all")
    assert (e[0] < e[1]).all()
    assert len({tuple(c) for c in e.T.tolist()}) == g.num_edges


def test_complete_graph():
    g = sbm_graph(30, num_classes=1, avg_degree=29.0, seed=0)
    assert g.num_edges == 30 * 29 // 2


def test_infeasible_parameters():
    with pytest.raises(ValueError, match="within-class edge probability"):
        sbm_graph(20, num_classes=4, avg_degree=15.0, homophily=1.0, seed=0)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"num_nodes": 0},
        {"num_nodes": 10.0},
        {"num_nodes": 10, "num_classes": 11},
        {"num_nodes": 10, "num_classes": 0},
        {"num_nodes": 10, "avg_degree": -1.0},
        {"num_nodes": 10, "avg_degree": float("nan")},
        {"num_nodes": 10, "homophily": 1.2},
        {"num_nodes": 10, "num_features": -1},
        {"num_nodes": 10, "feature_signal": float("inf")},
        {"num_nodes": True},
    ],
)
def test_invalid_parameters(kwargs):
    with pytest.raises(ValueError):
        sbm_graph(seed=0, **kwargs)


@pytest.mark.parametrize("count", [5, 12])  # sparse (rejection) and dense (enumeration) paths
def test_sample_pairs_uniform_and_distinct(count):
    rng = np.random.default_rng(0)
    size = 6
    index = {(int(a), int(b)): r for r, (a, b) in enumerate(zip(*np.triu_indices(size, 1)))}
    counts = np.zeros(len(index))
    for _ in range(3000):
        i, j = _sample_pairs(rng, size, count)
        rows = [index[(a, b)] for a, b in zip(i.tolist(), j.tolist())]  # KeyError unless i < j
        assert len(set(rows)) == count
        counts[rows] += 1
    expected = 3000 * count / len(index)
    assert np.abs(counts - expected).max() < 5 * np.sqrt(expected)


@pytest.mark.parametrize("count", [4, 10])  # sparse (rejection) and dense (enumeration) paths
def test_sample_between_uniform_distinct_and_between_classes(count):
    rng = np.random.default_rng(1)
    y = np.array([0, 1, 2, 0, 1, 2, 0])
    pairs = [(a, b) for a in range(7) for b in range(a + 1, 7) if y[a] != y[b]]
    index = {p: r for r, p in enumerate(pairs)}
    counts = np.zeros(len(pairs))
    for _ in range(3000):
        u, v = _sample_between(rng, y, count, len(pairs))
        rows = [index[(a, b)] for a, b in zip(u.tolist(), v.tolist())]  # KeyError: same class
        assert len(set(rows)) == count
        counts[rows] += 1
    expected = 3000 * count / len(pairs)
    assert np.abs(counts - expected).max() < 5 * np.sqrt(expected)


def test_many_classes_is_fast():
    # between-class edges are drawn in one go, not per block pair (k^2 = 1e6 here)
    g = sbm_graph(20_000, num_classes=1000, avg_degree=10.0, homophily=0.3, seed=0)
    assert _homophily(g) == pytest.approx(0.3, abs=0.02)


def test_hundred_thousand_nodes_is_linear_time():
    # O(n^2) would enumerate 5e9 pairs here; the O(n + m) generator takes well under a second
    g = sbm_graph(100_000, avg_degree=10.0, seed=0)
    assert g.num_nodes == 100_000
    assert 2 * g.num_edges / g.num_nodes == pytest.approx(10.0, rel=0.01)
