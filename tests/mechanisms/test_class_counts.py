"""Noisy neighbour class counts: the guarantee as data, validation, what is counted and what takes
noise, the noise's law, a statistical audit of pure epsilon-edge DP with a negative control, the
decoder, and the pipeline end to end (privatize, store-shaped release, evaluation's candidate)."""

from __future__ import annotations

import numpy as np
import pytest

from privgraph.errors import ConfigError
from privgraph.graph import GraphData
from privgraph.guarantee import GuaranteeKind, Scope
from privgraph.evaluate.release_encoder import encoder_on
from privgraph.mechanisms import MECHANISMS, build_mechanism
from privgraph.mechanisms.edges.class_counts import (
    NeighbourClassCounts,
    decode_class_counts,
    released_class_counts,
)
from privgraph.mechanisms.noise import discrete_laplace_variance
from tests.dp_audit import violation


def test_guarantee_and_params_are_data() -> None:
    m = build_mechanism("class_counts", {"epsilon": 0.5, "encoder_epochs": 20})
    g = m.guarantee
    assert (g.kind, g.scope, g.epsilon, g.delta) == (GuaranteeKind.EDGE_DP, Scope.EDGES, 0.5, 0.0)
    assert any("L1 sensitivity 2" in a for a in g.assumptions)
    assert build_mechanism("class_counts", m.params()).params() == m.params() == {"epsilon": 0.5, "encoder_epochs": 20}
    p = m.params_for(7)
    assert p["private_nodes"] == 7 and p["noise"]["parameter"] == 0.25 and "seed" not in str(p).lower()


@pytest.mark.parametrize("params, match", [
    ({"epsilon": 2.0**-20}, "outside"),
    ({"epsilon": 51.0}, "outside"),
    ({"epsilon": 1.0, "encoder_epochs": 0}, "encoder_epochs"),
    ({"epsilon": 1.0, "hops": 2}, "hops"),
])
def test_parameters_are_validated(params: dict, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        build_mechanism("class_counts", params)


def test_a_pipeline_that_attacks_a_class_count_version_is_refused_at_load() -> None:
    from privgraph.config.loader import parse_config
    from privgraph.mechanisms.edges.shapes import Aggregates

    assert issubclass(MECHANISMS["class_counts"], Aggregates) and MECHANISMS["class_counts"].releases_aggregates
    cfg = {"pipelines": {"p": {"dataset": {"name": "sbm", "rho": 1.0, "options": {"num_nodes": 50}},
                               "edges": {"mechanism": "class_counts", "epsilon": 1.0},
                               "budget": {"edges": 1.0}, "evaluate": {"attacks": ["linkteller"]}}}}
    with pytest.raises(ConfigError, match="a class_counts version releases aggregates"):
        parse_config(cfg)


def _toy() -> tuple[np.ndarray, GraphData]:
    """8 nodes, 3 classes; private edges {0,1}, {0,2}, {4,5}; public {1,3}, {2,3}, {5,6}."""
    g = GraphData.from_edges(
        8, np.array([[0, 0, 1, 2, 4, 5], [1, 2, 3, 3, 5, 6]]), private=np.array([True, True, False, False, True, False]),
    )
    onehot = np.eye(3)[[0, 1, 1, 2, 0, 2, 1, 0]]
    return onehot, g


def _mask(g: GraphData) -> np.ndarray:
    return np.arange(g.edges("all").shape[1]) >= g.edges_public.shape[1]


def test_counts_private_neighbours_per_class_with_noise_on_v_pri_only() -> None:
    onehot, g = _toy()
    m = NeighbourClassCounts(epsilon=1.0)
    vpri = g.private_nodes()
    assert vpri.tolist() == [0, 1, 2, 4, 5]
    draws = np.stack([m.aggregate(onehot, g.edges("all"), vpri, np.random.default_rng(s), private_edge_mask=_mask(g))
                      for s in range(4000)])
    assert draws.shape == (4000, 2, 8, 3)
    assert np.all(draws[:, 0] == onehot)  # hop 0: the public classes
    counts = draws[:, 1]
    assert np.all(counts == np.round(counts))  # integer counts, integer noise
    exact = np.zeros((8, 3))
    for u, v in ((0, 1), (0, 2), (4, 5)):  # the private edges only; public ones are released as they are
        exact[u, onehot[v].argmax()] += 1
        exact[v, onehot[u].argmax()] += 1
    others = np.setdiff1d(np.arange(8), vpri)
    assert np.all(counts[:, others] == 0)  # no private edge, no noise: node 3 has public edges only
    # unbiased, with the variance of discrete Laplace at epsilon / 2 (sensitivity 2)
    noise = counts[:, vpri] - exact[vpri]
    assert abs(noise.mean()) < 0.05
    var = discrete_laplace_variance(0.5)
    assert noise.var() == pytest.approx(var, rel=0.05)
    # the same generator, the same release; another, another
    e = g.edges("all")
    a = m.aggregate(onehot, e, vpri, np.random.default_rng(3), private_edge_mask=_mask(g))
    np.testing.assert_array_equal(a, m.aggregate(onehot, e, vpri, np.random.default_rng(3), private_edge_mask=_mask(g)))
    with pytest.raises(ValueError, match="one-hot"):
        m.aggregate(onehot * 0.5, e, vpri, np.random.default_rng(3))
    with pytest.raises(TypeError):
        m.aggregate(onehot, e, vpri, 3)


def _audit(m: NeighbourClassCounts, with_edge: bool, samples: int, seed: int) -> np.ndarray:
    """S = the count of node 0's class-1 neighbours + node 1's class-0 neighbours (post-processing
    of the release) on 3 nodes with private edges {0, 2}, {1, 2}, and {0, 1} or not (V_pri, public,
    is the same on both sides)."""
    onehot = np.eye(2)[[0, 1, 0]]
    pairs = [[0, 0, 1], [1, 2, 2]] if with_edge else [[0, 1], [2, 2]]
    edges = np.array(pairs)
    vpri = np.array([0, 1, 2])
    rng = np.random.default_rng(seed)
    out = np.empty(samples)
    for i in range(samples):
        r = m.aggregate(onehot, edges, vpri, rng)[1]
        out[i] = r[0, 1] + r[1, 0]
    return out


def test_statistical_audit_of_pure_edge_dp_and_a_negative_control() -> None:
    eps, n = 1.0, 6000
    m = NeighbourClassCounts(epsilon=eps)
    with_edge, without = _audit(m, True, n, 11), _audit(m, False, n, 12)
    assert violation(with_edge, without, eps, 0.0) <= 0
    assert violation(without, with_edge, eps, 0.0) <= 0
    assert with_edge.mean() > without.mean() + 1.5  # the edge moves S by 2: the audit has power
    # a sensitivity slip (noise at epsilon per count, as if one edge moved one count) is caught
    slip = NeighbourClassCounts(epsilon=2 * eps)
    assert violation(_audit(slip, True, n, 13), _audit(slip, False, n, 14), eps, 0.0) > 0


def test_the_release_is_recognised_and_decoded() -> None:
    onehot, g = _toy()
    out = NeighbourClassCounts(epsilon=1.0).aggregate(onehot, g.edges("all"), g.private_nodes(),
                                                      np.random.default_rng(0), private_edge_mask=_mask(g))
    np.testing.assert_array_equal(released_class_counts(out, 3), out[1])
    np.testing.assert_array_equal(released_class_counts(out.astype(np.float32), 3), out[1])
    assert released_class_counts(out, 4) is None and released_class_counts(None, 3) is None
    gap_like = np.stack([onehot / np.sqrt(2), out[1]])  # GAP's hop 0: unit rows of an encoding
    assert released_class_counts(gap_like, 3) is None
    assert released_class_counts(np.stack([onehot, out[1], out[1]]), 3) is None
    base = np.array([[0.5, 0.3, 0.2], [0.2, 0.2, 0.6]])
    np.testing.assert_allclose(decode_class_counts(base, np.zeros((2, 3)), 1.0), base)
    counts = np.array([[0.0, 3.0, 0.0], [-2.0, 0.0, 1.0]])
    p = decode_class_counts(base, counts, 0.5)
    expect = base * np.exp(0.5 * counts)
    np.testing.assert_allclose(p, expect / expect.sum(axis=1, keepdims=True))
    assert p[0].argmax() == 1 and p[1].argmax() == 2


@pytest.fixture(scope="module")
def homophilous_graph() -> GraphData:
    """600 nodes, 4 classes, strong homophily, weak features, every edge private."""
    from privgraph.ingest.datasets.split import split_public_private
    from privgraph.ingest.datasets.synthetic import sbm_graph

    g = sbm_graph(600, num_classes=4, avg_degree=12.0, homophily=0.9, num_features=16, feature_signal=0.3, seed=5)
    return split_public_private(g, 1.0, seed=1)


def test_pipeline_releases_counts_and_the_evaluation_decodes_them_above_the_floor(homophilous_graph: GraphData) -> None:
    from privgraph.parts.partition import partition_graph
    from privgraph.privatize.release import privatize_graph
    from privgraph.evaluate.utility import evaluate_utility

    g = homophilous_graph
    m = NeighbourClassCounts(epsilon=4.0, encoder_epochs=50)
    res = privatize_graph(g, features=None, edges=m, partitioning=partition_graph(g, 2, method="hash"),
                          root_seed=np.random.SeedSequence(3), encoder=encoder_on("cpu"))
    v = res.graph
    assert v.edges_private.shape == (2, 0) and v.aggregates.shape == (2, 600, 4)
    assert res.ledger.entries[0].mechanism == "class_counts" and res.ledger.entries[0].params["private_nodes"] > 0
    counts = released_class_counts(v.aggregates, 4)
    assert counts is not None
    # the public classes are the training labels where known
    assert np.array_equal(v.aggregates[0][g.train_mask].argmax(1), g.y[g.train_mask])
    out = evaluate_utility(v, None, runs=2, seed_sequence=0, epochs=40, device="cpu")
    cs = out["correct_and_smooth"]
    floor = out["feature_only"]["test_acc_mean"]
    assert cs["test_acc_mean"] > floor + 0.1, (cs, floor)
    assert out["selected"]["test_acc_mean"] > floor + 0.1
