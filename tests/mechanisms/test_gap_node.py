"""Node-level GAP (``level: node``): the sensitivity bound on neighbouring graphs, the public
degree bound and its refusal, the guarantee as data, a statistical audit on node-neighbouring
graphs with a negative control at GAP's stated sensitivity, and why GAP's own degree bound (out-edge
sampling) is not used."""

from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.sparse as sp

from privgraph.guarantee.ledger import LedgerEntry, PrivacyLedger
from privgraph.errors import ConfigError, GraphValidationError
from privgraph.graph import GraphData
from privgraph.evaluate.release_encoder import encoder_on
from privgraph.mechanisms import build_mechanism
from privgraph.guarantee import GuaranteeKind, Scope
from privgraph.mechanisms.edges.gap import AggregationPerturbation, clip_rows, node_sensitivity, normalize_rows
from privgraph.parts.partition import partition_graph
from privgraph.privatize.release import privatize_graph
from tests.mechanisms.test_gap import _exact_gaussian_delta, _violation


def _hop(h: np.ndarray, pub: np.ndarray, pri: np.ndarray, n: int, clip: float) -> np.ndarray:
    """One noiseless node-level hop: public neighbours summed, the private sum clipped."""
    def adj(e: np.ndarray) -> sp.csr_matrix:
        return sp.coo_matrix((np.ones(2 * e.shape[1]), (np.r_[e[1], e[0]], np.r_[e[0], e[1]])), shape=(n, n)).tocsr()
    return adj(pub) @ h + clip_rows(adj(pri) @ h, clip)


def _bounded_graph(rng: np.random.Generator, n: int, max_degree: int, m: int) -> np.ndarray:
    """Random distinct pairs (u < v), kept while both ends stay within ``max_degree``."""
    deg = np.zeros(n, int)
    kept = set()
    for u, v in rng.integers(0, n, size=(m, 2)):
        a, b = int(min(u, v)), int(max(u, v))
        if a != b and (a, b) not in kept and deg[a] < max_degree and deg[b] < max_degree:
            kept.add((a, b))
            deg[a] += 1
            deg[b] += 1
    return np.array(sorted(kept), dtype=np.int64).T.reshape(2, -1)


@pytest.mark.parametrize("max_degree, clip", [(1, 1.0), (3, math.sqrt(3)), (5, 1.0), (6, 4.0)])
def test_removing_one_nodes_private_edges_moves_a_hop_by_at_most_the_node_sensitivity(max_degree, clip):
    rng = np.random.default_rng(max_degree)
    n, d = 14, 3
    bound = node_sensitivity(max_degree, clip)
    worst = 0.0
    for _ in range(30):
        h = normalize_rows(rng.normal(size=(n, d)))
        pri = _bounded_graph(rng, n, max_degree, 60)
        pub = _bounded_graph(rng, n, 3, 10)
        pub = pub[:, ~np.isin(pub[0] * n + pub[1], pri[0] * n + pri[1])]
        full = _hop(h, pub, pri, n, clip)
        for v in range(n):
            keep = (pri[0] != v) & (pri[1] != v)
            worst = max(worst, float(np.linalg.norm(full - _hop(h, pub, pri[:, keep], n, clip))))
    assert worst <= bound
    # the bound is reached: a star of max_degree aligned neighbours around v
    h = np.zeros((max_degree + 1, d))
    h[0, 0] = 1.0
    h[1:, 1] = 1.0
    star = np.array([np.zeros(max_degree, int), np.arange(1, max_degree + 1)])
    none = np.zeros((2, 0), np.int64)
    move = np.linalg.norm(_hop(h, none, star, max_degree + 1, clip) - _hop(h, none, none, max_degree + 1, clip))
    assert move == pytest.approx(math.sqrt(max_degree + min(max_degree, clip) ** 2))


def test_the_mechanisms_noise_is_calibrated_to_the_node_sensitivity():
    m = AggregationPerturbation(epsilon=2.0, level="node", max_degree=8, encoder_dim=4)
    assert m.row_clip == pytest.approx(math.sqrt(8))  # default: sqrt(D), sensitivity sqrt(2 D)
    assert m.sensitivity >= 4.0 + 2.0**-20 * math.sqrt(9 * 4)
    assert m.sigma == pytest.approx(m.noise_multiplier * m.sensitivity)
    # against the exact Gaussian curve, as for the edge level (one hop)
    assert _exact_gaussian_delta(1 / m.noise_multiplier, 2.0) <= 1e-5
    edge = AggregationPerturbation(epsilon=2.0, encoder_dim=4)
    assert m.noise_multiplier == edge.noise_multiplier and m.sigma > 2.8 * edge.sigma


def test_guarantee_is_node_level_and_counts_in_the_edge_unit():
    m = build_mechanism("gap", {"epsilon": 3.0, "level": "node", "max_degree": 20, "row_clip": 2.0,
                                "weights": "similarity"})
    g = m.guarantee
    assert (g.kind, g.scope, g.epsilon, g.delta, g.ledger_epsilon) == (GuaranteeKind.NODE_DP, Scope.EDGES, 3.0, 1e-5, 3.0)
    assert any("max_degree = 20" in a for a in g.assumptions)
    assert any("implies edge-level" in a for a in g.assumptions)
    assert build_mechanism("gap", m.params()).params() == m.params()
    assert m.params()["level"] == "node" and "level" not in build_mechanism("gap", {"epsilon": 3.0}).params()
    ledger = PrivacyLedger()
    ledger.record(LedgerEntry(stage="privatize.edges", mechanism="gap", guarantee=g, partitions=(0,), params=m.params()))
    assert ledger.spent("edges") == 3.0 and ledger.spent_delta("edges") == 1e-5
    assert "level='node', max_degree=20" in repr(m)


@pytest.mark.parametrize(
    "params, match",
    [
        ({"level": "vertex"}, "level must be one of"),
        ({"level": "node"}, "needs max_degree"),
        ({"level": "node", "max_degree": 0}, "max_degree"),
        ({"level": "node", "max_degree": True}, "max_degree"),
        ({"level": "node", "max_degree": 4, "row_clip": 0.5}, "row_clip must be a finite number >= 1"),
        ({"level": "node", "max_degree": 4, "row_clip": float("nan")}, "row_clip"),
        ({"level": "node", "max_degree": 4, "weights": "learned"}, "edge-level privacy"),
        ({"max_degree": 4}, "apply to level 'node' only"),
        ({"row_clip": 2.0}, "apply to level 'node' only"),
    ],
)
def test_node_level_parameters_are_validated(params, match):
    with pytest.raises((ValueError, TypeError), match=match):
        build_mechanism("gap", {"epsilon": 1.0, **params})


def test_a_pipeline_without_the_degree_bound_is_refused_at_load():
    from privgraph.config.loader import parse_config

    cfg = {"pipelines": {"p": {"dataset": {"name": "sbm", "rho": 1.0, "options": {"num_nodes": 50}},
                               "edges": {"mechanism": "gap", "epsilon": 1.0, "level": "node"},
                               "budget": {"edges": 1.0}, "budget_delta": {"edges": 1e-5}}}}
    with pytest.raises(ConfigError, match=r"pipelines\.p\.edges: gap: level 'node' needs max_degree"):
        parse_config(cfg)


def _star_graph(private_degree: int) -> GraphData:
    """Node 0 with ``private_degree`` private neighbours; node 1 also has a public edge to the last node."""
    n = private_degree + 2
    e = np.array([[0] * private_degree + [1], list(range(1, private_degree + 1)) + [n - 1]])
    private = np.array([True] * private_degree + [False])
    rng = np.random.default_rng(0)
    return GraphData.from_edges(n, e, private=private, x=rng.random((n, 4)).astype(np.float32),
                                y=np.arange(n) % 2, train_mask=np.ones(n, bool), val_mask=np.ones(n, bool),
                                test_mask=np.ones(n, bool))


def test_a_graph_over_the_public_degree_bound_is_refused_before_anything_is_privatized():
    g = _star_graph(5)
    over = build_mechanism("gap", {"epsilon": 1.0, "level": "node", "max_degree": 4, "encoder_epochs": 2})
    features = build_mechanism("feature_rr", {"epsilon": 1.0, "bins": 2, "lower": 0.0, "upper": 1.0})
    calls = []
    features.privatize_rows = lambda *a, **k: calls.append(1)  # must never run
    with pytest.raises(GraphValidationError, match=r"a node with more than max_degree = 4 private edges") as refused:
        privatize_graph(g, features=features, edges=over, partitioning=partition_graph(g, 1, method="hash"),
                        root_seed=np.random.SeedSequence(0), encoder=encoder_on("cpu"))
    assert calls == []
    # the message (shareable: CLI, --ci, Prefect) holds the public bound only; which node and its
    # degree are for the owner's private record (issue 24, leak 3)
    assert "5" not in str(refused.value) and "node 0" not in str(refused.value)
    assert refused.value.private_detail == {"nodes_over_max_degree": [0], "private_degrees": [5], "max_degree": 4}
    assert any("publishes one bit" in a for a in over.guarantee.assumptions)
    # the library call refuses too, and needs to know which edges are private
    with pytest.raises(GraphValidationError, match="max_degree = 4"):
        over.aggregate(np.ones((g.num_nodes, 16)), g.edges("all"), g.private_nodes(), np.random.default_rng(0),
                       private_edge_mask=np.r_[np.zeros(1, bool), np.ones(5, bool)])
    with pytest.raises(ValueError, match="needs private_edge_mask"):
        over.aggregate(np.ones((g.num_nodes, 16)), g.edges("all"), g.private_nodes(), np.random.default_rng(0))
    # at the bound it runs: aggregates released, no private edge
    ok = build_mechanism("gap", {"epsilon": 1.0, "level": "node", "max_degree": 5, "encoder_epochs": 2})
    res = privatize_graph(g, features=None, edges=ok, partitioning=partition_graph(g, 1, method="hash"),
                          root_seed=np.random.SeedSequence(0), encoder=encoder_on("cpu"))
    assert res.graph.aggregates.shape == (2, g.num_nodes, 16) and res.graph.edges_private.shape == (2, 0)
    assert res.ledger.entries[0].guarantee.kind is GuaranteeKind.NODE_DP


def test_node_level_hop_matches_public_sum_plus_clipped_private_sum_off_vpri():
    """Rows outside V_pri take no noise: there the release is exactly the normalised hop."""
    g = _star_graph(3)
    m = AggregationPerturbation(epsilon=1.0, level="node", max_degree=3, row_clip=1.0, encoder_dim=4)
    x = np.random.default_rng(2).normal(size=(g.num_nodes, 4))
    mask = np.r_[np.zeros(g.edges_public.shape[1], bool), np.ones(g.edges_private.shape[1], bool)]
    out = m.aggregate(x, g.edges("all"), g.private_nodes(), np.random.default_rng(3), private_edge_mask=mask)
    exact = normalize_rows(_hop(normalize_rows(x), g.edges_public, g.edges_private, g.num_nodes, 1.0))
    others = np.setdiff1d(np.arange(g.num_nodes), g.private_nodes())
    assert others.size == 1
    np.testing.assert_allclose(out[1][others], exact[others], atol=1e-12)


def _node_audit(m: AggregationPerturbation, with_edges: bool, samples: int, seed: int, d: int = 16,
                public: int = 400) -> np.ndarray:
    """A node-neighbouring pair: node 0 (row e_0) with ``d`` aligned private neighbours (rows e_1)
    and ``public`` public neighbours (rows e_2), whose sum dominates node 0's norm so that the
    release's row normalisation is nearly a constant scale. The statistic is <r_0, e_1> of hop 1
    (post-processing of the release): the removed node's OWN aggregate, the term GAP's node-level
    sensitivity leaves out."""
    n = d + 1 + public
    x = np.zeros((n, 3))
    x[0, 0] = 1.0
    x[1:d + 1, 1] = 1.0
    x[d + 1:, 2] = 1.0
    pub = np.array([[0] * public, list(range(d + 1, n))])
    pri = np.array([[0] * d, list(range(1, d + 1))])
    edges = np.concatenate([pub, pri], axis=1) if with_edges else pub
    mask = np.r_[np.zeros(public, bool), np.ones(d if with_edges else 0, bool)]
    vpri = np.arange(d + 1)  # V_pri is public: the same on both sides
    rng = np.random.default_rng(seed)
    out = np.empty(samples)
    for i in range(samples):
        out[i] = m.aggregate(x, edges, vpri, rng, private_edge_mask=mask)[1][0, 1]
    return out


def test_statistical_audit_on_node_neighbouring_graphs_and_gaps_stated_sensitivity_as_negative_control():
    eps, n = 2.0, 6000
    m = AggregationPerturbation(epsilon=eps, level="node", max_degree=16, row_clip=16.0, encoder_dim=3)
    a, b = _node_audit(m, True, n, 21), _node_audit(m, False, n, 22)
    assert _violation(a, b, eps, 1e-5) <= 0
    assert _violation(b, a, eps, 1e-5) <= 0
    assert a.mean() > b.mean() + 0.02  # the node's edges do move it (16 of about 400 in the norm)
    # GAP's node-level sensitivity sqrt(D) (the removed node's own row left out) is caught
    weak = AggregationPerturbation(epsilon=eps, level="node", max_degree=16, row_clip=16.0, encoder_dim=3)
    weak.sigma = m.noise_multiplier * math.sqrt(16)
    assert _violation(_node_audit(weak, True, n, 23), _node_audit(weak, False, n, 24), eps, 1e-5) > 0


def test_gaps_out_degree_sampling_is_not_a_stable_degree_bound():
    """Why privgraph refuses instead of sampling: GAP bounds each node's out-degree by sampling D of
    its neighbours. Remove v from a graph where M nodes w_i each have v and the same D nodes u_j as
    neighbours: on G each w_i sends to D of its D + 1 neighbours, on G - v to all of u_1..u_D. The
    expected hop-1 aggregate of each u_j grows by M / (D + 1) unit rows, an L2 shift of
    sqrt(D) M / (D + 1) in the MEAN alone, unbounded in M; GAP's analysis states sqrt(D)."""
    D, M, trials = 4, 40, 400
    rng = np.random.default_rng(5)
    # nodes: v = 0, u_1..u_D = 1..D, w_1..w_M = D+1..D+M; every w has the same unit row
    counts_g = np.zeros(D)
    for _ in range(trials):
        for _w in range(M):
            chosen = rng.choice(D + 1, size=D, replace=False)  # index 0 is v
            counts_g += np.bincount(chosen[chosen > 0] - 1, minlength=D)
    mean_g = counts_g / trials
    mean_without_v = np.full(D, float(M))  # each w's D remaining neighbours are all kept
    np.testing.assert_allclose(mean_g, M * D / (D + 1), rtol=0.02)
    shift = np.linalg.norm(mean_without_v - mean_g)
    assert shift > 3 * math.sqrt(D)  # far beyond GAP's stated node-level sensitivity
