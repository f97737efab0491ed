"""GAP's aggregation perturbation: calibration, validation, the release's shape and what takes
noise, and a statistical audit of its (epsilon, delta) guarantee on neighbouring graphs."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.stats import norm

from privgraph.errors import ConfigError
from tests.dp_audit import violation as _violation
from privgraph.graph import GraphData
from privgraph.mechanisms import build_mechanism
from privgraph.guarantee import GuaranteeKind, Scope
from privgraph.mechanisms.edges.gap import (
    HOP_SENSITIVITY,
    AggregationPerturbation,
    noise_multiplier,
    normalize_rows,
    similarity_weights,
)


def _exact_gaussian_delta(mu: float, eps: float) -> float:
    """The exact privacy curve of the Gaussian mechanism with sensitivity / std = mu (Balle & Wang
    2018, Theorem 8), independent of dp-accounting."""
    return norm.cdf(mu / 2 - eps / mu) - math.exp(eps) * norm.cdf(-mu / 2 - eps / mu)


@pytest.mark.parametrize("eps, hops", [(1.0, 1), (4.0, 1), (8.0, 1), (2.0, 3)])
def test_calibration_is_sound_and_tight(eps, hops):
    m = AggregationPerturbation(epsilon=eps, delta=1e-5, hops=hops)
    z = m.noise_multiplier
    assert m.accountant_epsilon <= eps
    # K adaptive Gaussians of noise multiplier z are one Gaussian of sqrt(K) / z; the exact curve
    # at the stated epsilon must be within the stated delta (RDP's conversion is an upper bound)
    assert _exact_gaussian_delta(math.sqrt(hops) / z, eps) <= 1e-5
    # and the calibration is not wasteful: 3% less noise breaks the accountant's epsilon
    z_low, _ = noise_multiplier(eps * 1.0001, 1e-5, hops)
    assert z_low <= z
    from dp_accounting import GaussianDpEvent, SelfComposedDpEvent
    from dp_accounting.rdp import RdpAccountant

    acc = RdpAccountant()
    acc.compose(SelfComposedDpEvent(GaussianDpEvent(0.97 * z), hops))
    assert acc.get_epsilon(1e-5) > eps
    # sigma = z * (sqrt 2 + 2^-20 sqrt(2 d)): one undirected edge moves two rows
    assert m.sensitivity >= HOP_SENSITIVITY + 2.0**-20 * math.sqrt(2 * m.encoder_dim)
    assert m.sigma == pytest.approx(z * m.sensitivity)


def test_guarantee_and_params_are_data():
    m = build_mechanism("gap", {"epsilon": 2.0, "delta": 1e-6, "hops": 2, "weights": "similarity"})
    g = m.guarantee
    assert (g.kind, g.scope, g.epsilon, g.delta) == (GuaranteeKind.EDGE_DP, Scope.EDGES, 2.0, 1e-6)
    assert any("sqrt 2" in a for a in g.assumptions)
    assert build_mechanism("gap", m.params()).params() == m.params()
    p = m.params_for(10)
    assert p["private_nodes"] == 10 and p["accountant"]["library"] == "dp-accounting"
    assert p["accountant"]["noise_multiplier"] == m.noise_multiplier
    assert "seed" not in str(p).lower()


@pytest.mark.parametrize(
    "params, match",
    [
        ({"epsilon": 1e-4}, "outside"),
        ({"epsilon": 60.0}, "outside"),
        ({"epsilon": 1.0, "delta": 0.0}, "delta must be in"),
        ({"epsilon": 1.0, "delta": 0.5}, "delta must be in"),
        ({"epsilon": 1.0, "delta": True}, "delta must be in"),
        ({"epsilon": 1.0, "hops": 0}, "hops"),
        ({"epsilon": 1.0, "hops": 11}, "hops must be at most 10"),
        ({"epsilon": 1.0, "weights": "attention"}, "weights must be one of"),
        ({"epsilon": 1.0, "encoder_dim": 0}, "encoder_dim"),
        ({"epsilon": 1.0, "grid_exponent": 40}, "grid_exponent"),
    ],
)
def test_parameters_are_validated(params, match):
    with pytest.raises(ValueError, match=match):
        build_mechanism("gap", params)


def test_a_pipeline_with_a_bad_gap_parameter_is_refused_at_load():
    from privgraph.config.loader import parse_config

    cfg = {"pipelines": {"p": {"dataset": {"name": "sbm", "rho": 1.0, "options": {"num_nodes": 50}},
                               "edges": {"mechanism": "gap", "epsilon": 1.0, "delta": 0.0},
                               "budget": {"edges": 1.0}}}}
    with pytest.raises(ConfigError, match=r"pipelines\.p\.edges: gap: delta must be in"):
        parse_config(cfg)
    cfg["pipelines"]["p"]["edges"]["delta"] = 1e-5
    cfg["pipelines"]["p"]["evaluate"] = {"attacks": ["linkteller"]}
    with pytest.raises(ConfigError, match="attacks on a model over aggregates are not built"):
        parse_config(cfg)


def _toy(n: int = 8, d: int = 4, seed: int = 0) -> tuple[np.ndarray, GraphData]:
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, d))
    g = GraphData.from_edges(
        n, np.array([[0, 0, 1, 2, 4, 5], [1, 2, 3, 3, 5, 6]]), private=np.array([True, True, False, False, True, False]),
    )
    return x, g


def test_release_shape_hop0_and_noise_only_on_private_nodes():
    x, g = _toy()
    m = AggregationPerturbation(epsilon=1.0, hops=2, encoder_dim=4)
    vpri = g.private_nodes()
    out = m.aggregate(x, g.edges("all"), vpri, np.random.default_rng(1))
    assert out.shape == (3, 8, 4)
    np.testing.assert_allclose(out[0], normalize_rows(x))
    norms = np.linalg.norm(out, axis=2)
    assert np.all((np.abs(norms - 1) < 1e-12) | (norms == 0))
    # a node without private edges gets the exact (noise-free) aggregate of the released hop
    e = g.edges("all")
    adj = np.zeros((8, 8))
    adj[e[0], e[1]] = adj[e[1], e[0]] = 1
    others = np.setdiff1d(np.arange(8), vpri)
    for k in (1, 2):
        exact = normalize_rows(adj @ out[k - 1])
        np.testing.assert_allclose(out[k][others], exact[others], atol=1e-12)
        assert not np.allclose(out[k][vpri], exact[vpri], atol=1e-3)
    # node 7 is isolated: zero rows from hop 1 on
    assert np.all(out[1:, 7] == 0)
    # same generator state, same release; another, another
    again = m.aggregate(x, e, vpri, np.random.default_rng(1))
    np.testing.assert_array_equal(out, again)
    assert not np.array_equal(out, m.aggregate(x, e, vpri, np.random.default_rng(2)))
    with pytest.raises(ValueError, match=r"encoded features must be \[n, 4\]"):
        m.aggregate(x[:, :3], e, vpri, np.random.default_rng(1))


def test_similarity_weights_are_bounded_sigmoids_of_the_cosine():
    x, g = _toy()
    h = normalize_rows(x)
    e = g.edges("all")
    w = similarity_weights(h, e)
    cos = np.sum(h[e[0]] * h[e[1]], axis=1)
    np.testing.assert_allclose(w, 1 / (1 + np.exp(-cos)))
    assert np.all((w > 1 / (1 + math.e)) & (w < 1 / (1 + 1 / math.e)))


def _audit_samples(m: AggregationPerturbation, with_edge: bool, samples: int, seed: int) -> np.ndarray:
    """The statistic <release_0, x_1> + <release_1, x_0> of hop 1 (post-processing of the release)
    on a 3-node graph whose only possible private edge is {0, 1}; node 2 is a public neighbour of
    both, so that the rows are never empty."""
    x = np.array([[1.0, 0.0], [0.0, 1.0], [-0.6, -0.8]])
    pub = [[0, 1], [2, 2]]
    edges = np.concatenate([np.array(pub), np.array([[0], [1]])], axis=1) if with_edge else np.array(pub)
    vpri = np.array([0, 1])  # V_pri is public: the same on both sides
    rng = np.random.default_rng(seed)
    out = np.empty(samples)
    for i in range(samples):
        r = m.aggregate(x, edges, vpri, rng)[1]
        out[i] = r[0] @ x[1] + r[1] @ x[0]
    return out


def test_statistical_audit_of_the_guarantee_and_a_negative_control():
    eps = 1.0
    m = AggregationPerturbation(epsilon=eps, delta=1e-5, hops=1, encoder_dim=2)
    n = 6000
    with_edge = _audit_samples(m, True, n, 11)
    without = _audit_samples(m, False, n, 12)
    # the true mechanism: no violation in either direction
    assert _violation(with_edge, without, eps, 1e-5) <= 0
    assert _violation(without, with_edge, eps, 1e-5) <= 0
    # the edge does move the statistic (the audit has power) ...
    assert with_edge.mean() > without.mean() + 0.05
    # ... and a mechanism with a quarter of the noise (e.g. a sensitivity slip) is caught
    weak = AggregationPerturbation(epsilon=eps, delta=1e-5, hops=1, encoder_dim=2)
    weak.sigma = m.sigma / 4
    assert _violation(_audit_samples(weak, True, n, 13), _audit_samples(weak, False, n, 14), eps, 1e-5) > 0
