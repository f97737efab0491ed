"""DPRR: budget allocation (Eq. 8), report probabilities (Eq. 7), degree preservation (Eq. 11),
output validity, O(|E| + output) behaviour, validation.

Statistical tests use fixed seeds (deterministic as written); the stated false-failure rates are
what each test would have over random seeds.
"""

from __future__ import annotations

import math
import tracemalloc

import numpy as np
import pytest
from scipy import stats

from privgraph.graph import GraphData
from privgraph.guarantee import GuaranteeKind, Scope
from privgraph.mechanisms.edges import (
    DPRR,
    expected_noisy_degree,
    expected_report_probability,
    merge_with_public,
    private_csr,
    symmetrize_reports,
)
from privgraph.mechanisms.edges.dprr import _place_false_reports


# -- budget allocation -------------------------------------------------------------------------
@pytest.mark.parametrize("eps", [0.5, 1.0, 2.0, 8.0])
@pytest.mark.parametrize("alpha", [0.5, 0.9, 1.0])
@pytest.mark.parametrize("n_max", [100, 10_000, 10**7])
def test_allocation_follows_eq8(eps: float, alpha: float, n_max: int) -> None:
    m = DPRR(epsilon=eps, alpha=alpha)
    floor = math.sqrt(8 / (n_max - 1))
    if max(floor, (1 - alpha) * eps) >= eps:
        with pytest.raises(ValueError, match="too small"):
            m.allocate(n_max)
        return
    eps1, eps2 = m.allocate(n_max)
    assert eps1 == max(floor, (1 - alpha) * eps)
    assert eps2 > 0
    assert eps1 + eps2 == pytest.approx(eps, rel=1e-15, abs=0)
    assert eps1 + eps2 <= m.guarantee.epsilon
    params = m.params_for(n_max)
    assert params == {"epsilon": eps, "alpha": alpha, "n_max": n_max, "eps1": eps1, "eps2": eps2}


def test_too_small_epsilon_raises_with_an_explanation() -> None:
    m = DPRR(epsilon=0.5)
    with pytest.raises(ValueError, match=r"too small .* n_max=10 "):
        m.allocate(10)  # sqrt(8 / 9) = 0.94 > 0.5
    g = GraphData(num_nodes=4, edges_private=np.array([[0, 1, 2], [1, 2, 3]]))
    with pytest.raises(ValueError, match="too small"):
        m.privatize(g, np.random.default_rng(0))


def test_guarantee() -> None:
    g = DPRR(epsilon=1.5).guarantee
    assert g.kind is GuaranteeKind.EDGE_LDP and g.scope is Scope.EDGES
    assert g.epsilon == 1.5
    assert g.check(1.5) and not g.check(1.5 * (1 - 1e-9))
    for n_max in (17, 100, 2708, 10**6):
        eps1, eps2 = DPRR(epsilon=1.5).allocate(n_max)
        assert eps1 + eps2 <= 1.5  # in floats, as the ledger adds them
    assert "V_pri (nodes with private edges) is public" in g.assumptions
    assert any("2*eps relationship DP" in a for a in g.assumptions)
    assert "public edges are released as they are" in g.assumptions


# -- the exact expectations ----------------------------------------------------------------------
@pytest.mark.parametrize(
    "n_cand, d, eps",
    [(100_000, 50, 4.0), (100_000, 50, 1.0), (100_000, 200, 2.0), (1_000_000, 100, 2.0)],
)
def test_expected_noisy_degree_is_close_to_d_when_sparse(n_cand: int, d: int, eps: float) -> None:
    """Eq. 11: E[d~] ~= d for d << N (here within 0.1 %)."""
    eps1, eps2 = DPRR(epsilon=eps).allocate(n_cand + 1)
    assert expected_noisy_degree(d, n_cand, eps1, eps2) == pytest.approx(d, rel=1e-3)


def test_expected_report_probability_without_noise_limit() -> None:
    """With a huge eps1 the degree noise vanishes: q = Eq. 6 at d* = d, and E[d~] = d exactly."""
    n_cand, d, eps2 = 500, 20, 1.0
    p = math.exp(eps2) / (math.exp(eps2) + 1)
    q = d / (d * (2 * p - 1) + n_cand * (1 - p))
    t, f = expected_report_probability(d, n_cand, 60.0, eps2)
    assert t == pytest.approx(p * q, rel=1e-12) and f == pytest.approx((1 - p) * q, rel=1e-12)
    assert expected_noisy_degree(d, n_cand, 60.0, eps2) == pytest.approx(d, rel=1e-12)
    assert max(expected_report_probability(0, n_cand, 60.0, eps2)) < 1e-25  # only Pr(z >= 1) ~ e^-60


# -- Monte Carlo on a small graph -------------------------------------------------------------------
N_NODES = 30
RUNS = 2000
EPS = 2.0


def _small_graph() -> GraphData:
    """30 nodes: a hub of degree 20 (the heavy path), a sparse random rest, one public edge."""
    rng = np.random.default_rng(123)
    hub = np.stack([np.zeros(20, np.int64), np.arange(1, 21)])
    rest = rng.integers(1, N_NODES, size=(2, 40))
    e = np.concatenate([hub, rest], axis=1)
    e = e[:, e[0] != e[1]]
    g = GraphData.from_edges(N_NODES, e, private=np.ones(e.shape[1], bool), deduplicate=True)
    pub = np.array([[28], [29]])
    keep = ~((g.edges_private[0] == 28) & (g.edges_private[1] == 29))
    return GraphData(num_nodes=N_NODES, edges_private=g.edges_private[:, keep], edges_public=pub)


@pytest.fixture(scope="module")
def monte_carlo() -> dict:
    g = _small_graph()
    cand = g.private_nodes()
    indptr, indices = private_csr(g.edges_private, g.num_nodes)
    m = DPRR(epsilon=EPS)
    rng = np.random.default_rng(2024)
    counts = np.zeros((N_NODES, N_NODES), np.int64)
    degrees = np.zeros((RUNS, N_NODES), np.int64)
    problems = []
    for r in range(RUNS):
        rep = m.privatize_nodes(cand, indptr, indices, cand, rng)
        if rep.shape[1]:
            if np.any(rep[0] == rep[1]):
                problems.append(("self", r))
            if np.unique(rep[0] * N_NODES + rep[1]).size != rep.shape[1]:
                problems.append(("duplicate", r))
            if not (np.isin(rep[0], cand).all() and np.isin(rep[1], cand).all()):
                problems.append(("outside candidates", r))
        np.add.at(counts, (rep[0], rep[1]), 1)
        degrees[r] = np.bincount(rep[0], minlength=N_NODES)
    return {"graph": g, "cand": cand, "indptr": indptr, "indices": indices, "counts": counts,
            "degrees": degrees, "problems": problems, "mech": m}


def test_reports_are_valid(monte_carlo: dict) -> None:
    """Never self, never a duplicate, always inside the candidates (V_pri), over all runs."""
    assert monte_carlo["problems"] == []


def test_both_placement_paths_are_exercised(monte_carlo: dict) -> None:
    g = monte_carlo["graph"]
    deg = g.degrees("private")
    n_cand = monte_carlo["cand"].size - 1
    assert deg[0] * 2 > n_cand  # the hub uses the explicit complement
    assert np.any((deg > 0) & (deg * 2 <= n_cand))  # the others use rejection


def test_mean_noisy_degree_matches_the_exact_expectation(monte_carlo: dict) -> None:
    """Mean over 2000 runs within 4 standard errors of expected_noisy_degree, for every node.

    Normal approximation: false-failure rate 6.3e-5 per node, below 2e-3 for the 29 nodes.
    """
    g, m = monte_carlo["graph"], monte_carlo["mech"]
    cand = monte_carlo["cand"]
    n_cand = cand.size - 1
    eps1, eps2 = m.allocate(cand.size)
    deg = g.degrees("private")
    for v in cand:
        sample = monte_carlo["degrees"][:, v]
        se = sample.std(ddof=1) / math.sqrt(RUNS)
        expected = expected_noisy_degree(int(deg[v]), n_cand, eps1, eps2)
        assert abs(sample.mean() - expected) < 4 * se, (v, deg[v], sample.mean(), expected, se)


def test_report_probabilities_follow_eq7(monte_carlo: dict) -> None:
    """Every (reporter, candidate) pair: reported in Binomial(2000, p E[q]) runs if the candidate
    is a true private neighbour, Binomial(2000, (1 - p) E[q]) otherwise (exact binomial tests,
    Bonferroni over all pairs: false-failure rate <= 1e-3 in total). This also checks that false
    reports are uniform over the non-neighbours, on both placement paths.
    """
    g, m = monte_carlo["graph"], monte_carlo["mech"]
    cand = monte_carlo["cand"]
    counts = monte_carlo["counts"]
    n_cand = cand.size - 1
    eps1, eps2 = m.allocate(cand.size)
    deg = g.degrees("private")
    adj = np.zeros((N_NODES, N_NODES), bool)
    adj[g.edges_private[0], g.edges_private[1]] = True
    adj |= adj.T
    pairs = [(v, j) for v in cand for j in cand if v != j]
    level = 1e-3 / len(pairs)
    for v, j in pairs:
        t, f = expected_report_probability(int(deg[v]), n_cand, eps1, eps2)
        prob = t if adj[v, j] else f
        pval = stats.binomtest(int(counts[v, j]), RUNS, prob).pvalue
        assert pval > level, (v, j, adj[v, j], counts[v, j], RUNS * prob)
    # nodes outside V_pri never report and are never reported
    outside = np.setdiff1d(np.arange(N_NODES), cand)
    assert counts[outside].sum() == 0 and counts[:, outside].sum() == 0


def test_true_over_false_ratio_is_e_to_eps2(monte_carlo: dict) -> None:
    """Pooled over a node's true and false candidates, the report-rate ratio estimates p/(1-p) = e^eps2.

    A loose 15 % check (the binomial tests above are the exact ones).
    """
    g, m = monte_carlo["graph"], monte_carlo["mech"]
    cand = monte_carlo["cand"]
    _, eps2 = m.allocate(cand.size)
    v = 0  # the hub: 20 true, 8 false candidates
    nbrs = g.edges_private[1][g.edges_private[0] == v]
    false = np.setdiff1d(cand, np.append(nbrs, v))
    rate_t = monte_carlo["counts"][v, nbrs].mean()
    rate_f = monte_carlo["counts"][v, false].mean()
    assert rate_t / rate_f == pytest.approx(math.exp(eps2), rel=0.15)


def test_false_placement_is_uniform_over_subsets() -> None:
    """20,000 owners each place 3 reports among 8 allowed candidates (10 minus 2 neighbours):
    chi-square over the 56 possible subsets, alpha = 1e-3."""
    owners = np.arange(10, 20_010, dtype=np.int64)
    n = 20_010
    cand = np.arange(10, dtype=np.int64)
    nbr_keys = np.sort(np.concatenate([owners * n + 0, owners * n + 1]))
    rep = _place_false_reports(owners, np.full(owners.size, 3), nbr_keys, cand, n, np.random.default_rng(9))
    assert rep.shape == (2, 3 * owners.size)
    assert not np.isin(rep[1], [0, 1]).any()
    chosen = rep[1].reshape(owners.size, 3)  # sorted by (owner, candidate)
    assert np.all(np.diff(chosen, axis=1) > 0)
    code = ((chosen - 2) * np.array([64, 8, 1])).sum(axis=1)
    _, freq = np.unique(code, return_counts=True)
    assert freq.size == math.comb(8, 3)
    assert stats.chisquare(freq).pvalue > 1e-3


# -- helpers -------------------------------------------------------------------------------------
def test_private_csr() -> None:
    e = np.array([[0, 1, 0, 2], [3, 2, 1, 3]])
    indptr, indices = private_csr(e, 5)
    assert indptr.tolist() == [0, 2, 4, 6, 8, 8]
    rows = [indices[indptr[v] : indptr[v + 1]].tolist() for v in range(5)]
    assert rows == [[1, 3], [0, 2], [1, 3], [0, 2], []]
    indptr, indices = private_csr(np.zeros((2, 0), np.int64), 3)
    assert indptr.tolist() == [0, 0, 0, 0] and indices.size == 0


def test_symmetrize_reports() -> None:
    rep = np.array([[0, 3, 1, 2, 1], [3, 0, 2, 4, 0]])
    out = symmetrize_reports(rep, 5)
    assert out.tolist() == [[0, 0, 1, 2], [1, 3, 2, 4]]
    assert out.dtype == np.int64
    with pytest.raises(ValueError, match="itself"):
        symmetrize_reports(np.array([[1], [1]]), 5)


def test_merge_with_public() -> None:
    noisy = np.array([[0, 0, 1, 2], [1, 3, 2, 4]])
    public = np.array([[0, 2, 3], [3, 4, 4]])
    assert merge_with_public(noisy, public).tolist() == [[0, 1], [1, 2]]
    assert merge_with_public(noisy, np.zeros((2, 0), np.int64)).tolist() == noisy.tolist()


def test_privatize_graph() -> None:
    g = _small_graph()
    out = DPRR(epsilon=EPS).privatize(g, np.random.default_rng(0))
    assert isinstance(out, GraphData) and out.num_nodes == g.num_nodes
    assert np.array_equal(out.edges_public, g.edges_public)
    assert np.all(out.edges_private[0] < out.edges_private[1])
    assert np.isin(out.edges_private, g.private_nodes()).all()
    # same seed, same release
    again = DPRR(epsilon=EPS).privatize(g, np.random.default_rng(0))
    assert np.array_equal(out.edges_private, again.edges_private)


def test_privatize_without_private_edges() -> None:
    g = GraphData(num_nodes=3, edges_public=np.array([[0], [1]]))
    out = DPRR(epsilon=1.0).privatize(g, np.random.default_rng(0))
    assert out.edges_private.shape == (2, 0) and np.array_equal(out.edges_public, g.edges_public)


def test_privatize_nodes_rejects_reporters_outside_candidates() -> None:
    g = _small_graph()
    indptr, indices = private_csr(g.edges_private, g.num_nodes)
    cand = g.private_nodes()
    outside = np.setdiff1d(np.arange(N_NODES), cand)
    m = DPRR(epsilon=EPS)
    if outside.size:
        with pytest.raises(ValueError, match="candidates"):
            m.privatize_nodes(outside[:1], indptr, indices, cand, np.random.default_rng(0))
    with pytest.raises(ValueError, match="distinct"):
        m.privatize_nodes(cand[[0, 0]], indptr, indices, cand, np.random.default_rng(0))
    with pytest.raises(TypeError, match="Generator"):
        m.privatize_nodes(cand, indptr, indices, cand, 0)  # type: ignore[arg-type]
    assert m.privatize_nodes(cand[:0], indptr, indices, cand, np.random.default_rng(0)).shape == (2, 0)


# -- scale: nothing of size N^2 ----------------------------------------------------------------------
def test_large_sparse_graph_without_quadratic_memory() -> None:
    """200,000 nodes, 150,000 private edges (|V_pri| ~ 155,000, so N^2 ~ 2.4e10): the whole
    privatization must stay far below any N^2 allocation (peak < 150 MB traced by tracemalloc;
    a boolean N x N matrix alone would be 24 GB)."""
    n = 200_000
    rng = np.random.default_rng(77)
    e = rng.integers(0, n, size=(2, 450_000))
    e = e[:, e[0] != e[1]]
    private = rng.random(e.shape[1]) < 1 / 3
    g = GraphData.from_edges(n, e, private=private, deduplicate=True)
    n_pri = g.private_nodes().size
    assert n_pri > 100_000
    tracemalloc.start()
    try:
        out = DPRR(epsilon=2.0).privatize(g, np.random.default_rng(0))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 150 * 2**20, f"peak {peak / 2**20:.0f} MB"
    m_out = out.edges_private.shape[1]
    assert 0 < m_out < 10 * g.edges_private.shape[1]
    assert np.array_equal(out.edges_public, g.edges_public)


# -- validation ----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "kwargs, exc, name",
    [
        ({"epsilon": float("nan")}, ValueError, "epsilon"),
        ({"epsilon": float("inf")}, ValueError, "epsilon"),
        ({"epsilon": 0.0}, ValueError, "epsilon"),
        ({"epsilon": -1.0}, ValueError, "epsilon"),
        ({"epsilon": True}, TypeError, "epsilon"),
        ({"epsilon": "1"}, TypeError, "epsilon"),
        ({"epsilon": None}, TypeError, "epsilon"),
        ({"epsilon": 1.0, "alpha": 0.0}, ValueError, "alpha"),
        ({"epsilon": 1.0, "alpha": 1.5}, ValueError, "alpha"),
        ({"epsilon": 1.0, "alpha": -0.1}, ValueError, "alpha"),
        ({"epsilon": 1.0, "alpha": float("nan")}, ValueError, "alpha"),
        ({"epsilon": 1.0, "alpha": True}, TypeError, "alpha"),
        ({"epsilon": 1.0, "alpha": "0.9"}, TypeError, "alpha"),
    ],
)
def test_bad_parameters(kwargs: dict, exc: type, name: str) -> None:
    with pytest.raises(exc, match=name):
        DPRR(**kwargs)


def test_bad_helper_arguments() -> None:
    m = DPRR(epsilon=1.0)
    with pytest.raises(ValueError, match="n_max"):
        m.allocate(1)
    with pytest.raises(TypeError, match="n_max"):
        m.allocate(10.0)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="d must be <="):
        expected_noisy_degree(11, 10, 0.5, 0.5)
    with pytest.raises(ValueError, match="eps1"):
        expected_noisy_degree(1, 10, 0.0, 0.5)


def test_repr_and_params() -> None:
    m = DPRR(epsilon=1.0)
    assert repr(m) == "DPRR(epsilon=1.0, alpha=0.9)"
    assert m.params() == {"epsilon": 1.0, "alpha": 0.9}
    assert DPRR.name == "dprr" and DPRR.scope is Scope.EDGES
    with pytest.raises(TypeError):
        DPRR(1.0)  # type: ignore[misc]


# -- the epsilon range ---------------------------------------------------------------------------------
def test_epsilon_range_bounds() -> None:
    """[2^-19, 50]: both parts of Eq. 8 must reach 2^-20; the randomized response's eps2 <= 50
    keeps its flip probability and counts exact. The bounds build, the next floats outside and the
    absurd budgets (1e308 released the exact graph, 1e-40 failed late with a NaN) are refused at
    construction, naming epsilon, the range and why."""
    r = DPRR.epsilon_range
    assert (r.low, r.high) == (2.0**-19, 50.0) and "binomial_exact" in r.note and "Eq. 8" in r.note
    for eps in (r.low, r.high):
        assert DPRR(epsilon=eps).epsilon == eps
    for eps in (float(np.nextafter(r.low, 0.0)), float(np.nextafter(r.high, np.inf)), 1e-40, 1e308):
        with pytest.raises(ValueError, match=r"^dprr: epsilon = .* is outside \[1.90735e-06, 50\].*Eq. 8"):
            DPRR(epsilon=eps)
    assert DPRR(epsilon=50.0).allocate(2708) == pytest.approx((5.0, 45.0), rel=1e-15)


def test_each_part_of_the_split_is_checked() -> None:
    """eps2 <= alpha * epsilon is known at construction: alpha = 2^-20 at epsilon 1 builds, the next
    float below is refused naming eps2. Once n_max is known, allocate checks both parts: at n_max = 9,
    alpha = 1, eps1 = sqrt(8 / 8) = 1, so epsilon = 1 + 2^-20 leaves eps2 = 2^-20 (accepted) and
    the next float below leaves less (refused, naming eps2 and n_max, also by privatize)."""
    DPRR(epsilon=1.0, alpha=2.0**-20)
    with pytest.raises(ValueError, match=r"^dprr: eps2 <= alpha \* epsilon .* = .* is outside \[9.53674e-07, 50\]"):
        DPRR(epsilon=1.0, alpha=float(np.nextafter(2.0**-20, 0.0)))
    eps = 1.0 + 2.0**-20
    assert DPRR(epsilon=eps, alpha=1.0).allocate(9) == (1.0, 2.0**-20)
    m = DPRR(epsilon=float(np.nextafter(eps, 0.0)), alpha=1.0)
    with pytest.raises(ValueError, match=r"^dprr: eps2 \(Eq. 8 at n_max=9: .*\) = .* is outside \[9.53674e-07, 50\]"):
        m.allocate(9)
    g = GraphData(num_nodes=9, edges_private=np.array([np.arange(8), np.arange(1, 9)]))
    with pytest.raises(ValueError, match="eps2"):
        m.privatize(g, np.random.default_rng(0))
