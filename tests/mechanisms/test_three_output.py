"""Three-Outputs: P_{0<-0} against a numerical minimax, the exact privacy loss per coordinate and
per vector, unbiasedness, the sampler against the pmf, scaling, validation.

Statistical tests use fixed seeds (they are deterministic as written); the stated false-failure
rates are what each test would have over random seeds.
"""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import numpy as np
import pytest
from scipy import optimize, stats

import privgraph.mechanisms.features.scaled as mod
from privgraph.graph import GraphData
from privgraph.guarantee import Guarantee, GuaranteeKind, Scope
from privgraph.mechanisms.features.feature_rr import worst_case_log_ratio
from privgraph.mechanisms.features.three_output import (
    EPS_STAR,
    MAX_COORDINATE_EPSILON,
    ThreeOutputMechanism,
    bernoulli_exact,
    categorical3_exact,
    split_epsilon,
    three_output_c,
    three_output_p00,
    three_output_pmf,
    three_output_variance,
    wang_sample_size,
)

EPSILONS = [1e-4, 0.1, 0.5, math.log(2) - 1e-6, math.log(2), 0.9, 1.0, EPS_STAR, 2.0, 2.5, 4.0, 5.0, 10.0, 30.0, 50.0]
T_GRID = np.unique(np.concatenate([np.linspace(-1.0, 1.0, 201), [-1.0, 0.0, 1.0]]))


# -- P_{0<-0}: the paper's closed form is the variance minimax -----------------------------------
def _worst_variance(p: float, eps: float) -> float:
    """max over |t| in [0, 1] of C^2 (1 - P + P a |t|) - t^2 (concave in |t|: exact maximiser)."""
    e = math.exp(eps)
    a = 1.0 - 1.0 / e
    c2 = (e * (e + 1) / ((e - 1) * (e - p))) ** 2
    s = min(1.0, max(0.0, c2 * p * a / 2.0))
    return c2 * (1.0 - p + p * a * s) - s * s


@pytest.mark.parametrize("eps", [0.3, 0.6, 0.7, 0.8, 1.0, 1.3, 1.6, 1.8, 2.0, 3.0, 5.0])
def test_p00_minimises_the_worst_case_variance(eps: float) -> None:
    ub = math.exp(eps) / (math.exp(eps) + 2.0)
    grid = np.linspace(0.0, ub, 2001)
    vals = np.array([_worst_variance(p, eps) for p in grid])
    i = int(np.argmin(vals))
    lo, hi = grid[max(i - 1, 0)], grid[min(i + 1, grid.size - 1)]
    res = optimize.minimize_scalar(lambda p: _worst_variance(p, eps), bounds=(lo, hi), method="bounded",
                                   options={"xatol": 1e-12})
    p_num = float(res.x) if res.fun <= vals[i] else float(grid[i])
    p00 = three_output_p00(eps)
    assert 0.0 <= p00 <= ub
    # the objective is flat near its minimum: compare values tightly and arguments loosely
    assert _worst_variance(p00, eps) <= _worst_variance(p_num, eps) * (1 + 1e-9)
    assert p00 == pytest.approx(p_num, abs=2e-5)


def test_p00_cases_and_eps_star() -> None:
    assert three_output_p00(0.5) == 0.0
    assert three_output_p00(math.log(2) - 1e-9) == 0.0
    assert three_output_p00(math.log(2)) == pytest.approx(0.0, abs=1e-12)  # continuous at ln 2
    for eps in (2.5, 10.0, 50.0, 800.0):
        assert three_output_p00(eps) == pytest.approx(math.exp(eps) / (math.exp(eps) + 2) if eps < 700 else 1.0)

    def cubic_minus_bound(eps: float) -> float:
        e = math.exp(eps)
        d0 = e**4 + 14 * e**3 + 50 * e**2 - 2 * e + 25
        d1 = -2 * e**6 - 42 * e**5 - 270 * e**4 - 404 * e**3 - 918 * e**2 + 30 * e - 250
        c = -(-(e**2) - 4 * e - 5 + 2 * math.sqrt(d0) * math.cos(math.pi / 3 + math.acos(-d1 / (2 * d0**1.5)) / 3)) / 6
        return c - e / (e + 2)

    root = optimize.brentq(cubic_minus_bound, 1.0, 2.5, xtol=1e-15)
    assert root == pytest.approx(EPS_STAR, abs=1e-12)
    assert math.exp(EPS_STAR) == pytest.approx(5.5311, abs=1e-4)
    assert cubic_minus_bound(EPS_STAR - 0.05) < 0 < cubic_minus_bound(EPS_STAR + 0.05)
    # continuous across eps*
    assert three_output_p00(EPS_STAR - 1e-9) == pytest.approx(three_output_p00(EPS_STAR + 1e-9), abs=1e-8)


# -- the exact output distribution ---------------------------------------------------------------
@pytest.mark.parametrize("eps", EPSILONS)
def test_pmf_is_a_distribution_with_the_papers_anchors(eps: float) -> None:
    P = three_output_pmf(T_GRID, eps)
    assert P.shape == (T_GRID.size, 3)
    assert np.all(P >= 0)
    np.testing.assert_allclose(P.sum(axis=1), 1.0, rtol=0, atol=1e-14)
    e, p00 = math.exp(eps), three_output_p00(eps)
    anchors = three_output_pmf([-1.0, 0.0, 1.0], eps)
    half = 1 / (e + 2) if eps > EPS_STAR else (1 - p00) / 2  # (1 - P00) / 2 without cancellation
    np.testing.assert_allclose(anchors[1], [half, p00, half], rtol=1e-12)
    if eps < 35:
        keep, flip = (e - p00) / (e + 1), (e - p00) / (e * (e + 1))
        np.testing.assert_allclose(anchors[2], [flip, p00 / e, keep], rtol=1e-12, atol=1e-300)
        np.testing.assert_allclose(anchors[0], [keep, p00 / e, flip], rtol=1e-12, atol=1e-300)
        assert three_output_c(eps) == pytest.approx(e * (e + 1) / ((e - 1) * (e - p00)), rel=1e-12)


@pytest.mark.parametrize("eps", EPSILONS)
def test_worst_case_ratio_per_coordinate_is_eps(eps: float) -> None:
    """max over (output, t, t') of log P(y|t)/P(y|t') is exactly eps (attained at the anchors)."""
    w = worst_case_log_ratio(three_output_pmf(T_GRID, eps))
    assert abs(w - eps) <= 1e-9 * max(1.0, eps)
    assert w <= eps * (1 + 1e-12) + 1e-15


@pytest.mark.parametrize("eps", EPSILONS)
def test_unbiased_and_variance_in_closed_form(eps: float) -> None:
    P = three_output_pmf(T_GRID, eps)
    c = three_output_c(eps)
    mean = c * (P[:, 2] - P[:, 0])
    np.testing.assert_allclose(mean, T_GRID, rtol=0, atol=1e-12 * max(1.0, c))
    var = c * c * (P[:, 0] + P[:, 2]) - mean**2
    np.testing.assert_allclose(three_output_variance(T_GRID, eps), var, rtol=1e-9, atol=1e-12)


def test_small_budgets_reduce_to_duchi() -> None:
    eps = 0.4
    assert three_output_c(eps) == pytest.approx((math.exp(eps) + 1) / (math.exp(eps) - 1), rel=1e-12)
    assert np.all(three_output_pmf(T_GRID, eps)[:, 1] == 0.0)


def _vector_pmf(t: np.ndarray, eps: float, k: int) -> np.ndarray:
    """Exact pmf over sign patterns {-1, 0, 1}^d of the k-of-d release (rows: inputs)."""
    n, d = t.shape
    eps_c = split_epsilon(eps, k)
    P = three_output_pmf(t, eps_c)  # [n, d, 3]
    outs = list(itertools.product((-1, 0, 1), repeat=d))
    subsets = list(itertools.combinations(range(d), k))
    out = np.zeros((n, len(outs)))
    for o_i, o in enumerate(outs):
        nz = {j for j in range(d) if o[j] != 0}
        for S in subsets:
            if not nz <= set(S):
                continue
            term = np.full(n, 1.0 / len(subsets))
            for j in S:
                term *= P[:, j, o[j] + 1]
            out[:, o_i] += term
    return out


@pytest.mark.parametrize("d, eps", [(3, 5.0), (4, 7.5), (3, 1.0), (2, 5.0)])
def test_worst_case_ratio_per_vector_is_eps(d: int, eps: float) -> None:
    """The whole released vector (sampled set + outputs): exact loss over a grid of inputs."""
    k = wang_sample_size(eps, d)
    levels = [-1.0, -0.3, 0.0, 0.6, 1.0]
    t = np.array(list(itertools.product(levels, repeat=d)))
    pm = _vector_pmf(t, eps, k)
    np.testing.assert_allclose(pm.sum(axis=1), 1.0, atol=1e-12)
    w = worst_case_log_ratio(pm)
    assert w <= eps * (1 + 1e-9)
    assert w == pytest.approx(k * split_epsilon(eps, k), rel=1e-9)  # tight: eps itself


def test_vector_release_matches_the_exact_pmf() -> None:
    """Chi-square of the sign patterns of privatize_rows against the exact vector pmf
    (d = 3, eps = 5 -> k = 2; alpha = 1e-3, false-failure rate 1e-3 over random seeds)."""
    d, eps, n = 3, 5.0, 60_000
    m = ThreeOutputMechanism(epsilon=eps, lower=-1.0, upper=1.0)
    x = np.array([[-1.0, 0.2, 0.9]])
    out = m.privatize_rows(np.repeat(x, n, axis=0), np.random.default_rng(101))
    pattern = np.sign(out).astype(int) + 1  # 0, 1, 2
    cells = (pattern * np.array([9, 3, 1])).sum(axis=1)
    counts = np.bincount(cells, minlength=27)
    expected = n * _vector_pmf(x, eps, 2)[0]
    live = expected > 0
    assert np.all(counts[~live] == 0)
    assert stats.chisquare(counts[live], expected[live]).pvalue > 1e-3


# -- the sampler against the pmf -------------------------------------------------------------------
@pytest.mark.parametrize("eps", [0.3, 1.0, 2.0, 4.0])
def test_sampler_matches_pmf(eps: float) -> None:
    """d = 1 (k = 1): chi-square per input t at alpha = 1e-3 (false-failure rate 1e-3 each)."""
    n = 20_000
    m = ThreeOutputMechanism(epsilon=eps, lower=-1.0, upper=1.0)
    c = three_output_c(eps)
    rng = np.random.default_rng(int(eps * 1000))
    for t in (-1.0, -0.4, 0.0, 0.7, 1.0):
        out = m.privatize_rows(np.full((n, 1), t), rng)[:, 0]
        assert set(np.unique(out)) <= {np.float32(-c), np.float32(0.0), np.float32(c)}
        counts = np.array([(out < 0).sum(), (out == 0).sum(), (out > 0).sum()])
        expected = n * three_output_pmf(t, eps)
        live = expected > 0
        assert np.all(counts[~live] == 0)
        assert stats.chisquare(counts[live], expected[live]).pvalue > 1e-3, (eps, t, counts, expected)


def test_release_shape_sampling_and_scale() -> None:
    d, eps = 10, 8.0  # k = 3
    m = ThreeOutputMechanism(epsilon=eps)
    assert m.num_sampled(d) == 3
    x = np.random.default_rng(0).random((4000, d)).astype(np.float32)
    out = m.privatize_rows(x, np.random.default_rng(1))
    assert out.dtype == np.float32 and out.shape == x.shape
    assert np.all((out != 0).sum(axis=1) <= 3)
    c = np.float32(three_output_c(m.coordinate_epsilon(d)) * d / 3)
    assert set(np.unique(out)) <= {-c, np.float32(0), c}
    assert m.output_magnitude(d) == pytest.approx(three_output_c(split_epsilon(8.0, 3)))
    # each coordinate is sampled with probability k / d (binomial, 5 sigma)
    nz_rate = (out != 0).mean(axis=0)
    p_nz = 3 / d * (1 - three_output_pmf(2 * x.astype(np.float64) - 1, split_epsilon(eps, 3))[..., 1]).mean(axis=0)
    assert np.all(np.abs(nz_rate - p_nz) < 5 * np.sqrt(p_nz * (1 - p_nz) / 4000))


@pytest.mark.parametrize("eps, d", [(1.0, 4), (6.0, 4), (12.0, 5)])
def test_estimate_is_unbiased(eps: float, d: int) -> None:
    """Mean of the estimate over n nodes vs x, within 5 standard errors of the exact variance
    (false-failure rate about 6e-7 per column over random seeds)."""
    n = 100_000
    lo, hi = -2.0, 3.0
    m = ThreeOutputMechanism(epsilon=eps, lower=lo, upper=hi)
    row = np.linspace(lo - 1.0, hi, d)  # includes a clipped value
    x = np.repeat(row[None, :], n, axis=0).astype(np.float32)
    est = m.estimate(m.privatize_rows(x, np.random.default_rng(7))).astype(np.float64)
    target = np.clip(row, lo, hi)
    se = np.sqrt(m.estimate_variance(row[None, :])[0] / n)
    assert np.all(np.abs(est.mean(axis=0) - target) < 5 * se), (est.mean(axis=0), target, se)
    # the empirical variance agrees with the formula (loose: 10%)
    np.testing.assert_allclose(est.var(axis=0), m.estimate_variance(row[None, :])[0], rtol=0.1)


# -- scaling, clipping, budget split ----------------------------------------------------------------
def test_scaling_uses_public_bounds_and_clips() -> None:
    """eps = 45 on d = 1: the output is sign(t) C (0 at t = 0) except with probability ~1e-19."""
    m = ThreeOutputMechanism(epsilon=45.0, lower=-10.0, upper=10.0)
    x = np.array([[-50.0], [-10.0], [0.0], [10.0], [1e9]])
    out = m.privatize_rows(x, np.random.default_rng(0))[:, 0]
    c = np.float32(three_output_c(45.0))
    np.testing.assert_array_equal(out, [-c, -c, 0.0, c, c])
    per_feature = ThreeOutputMechanism(epsilon=90.0, lower=[0.0, -1.0], upper=[1.0, 0.0])
    out2 = per_feature.privatize_rows(np.array([[1.0, -1.0], [0.5, -0.5]]), np.random.default_rng(0))
    assert out2[0, 0] > 0 and out2[0, 1] < 0 and np.all(out2[1] == 0)
    # clipping: out-of-bounds inputs give exactly the output of the bound (same uniforms)
    m3 = ThreeOutputMechanism(epsilon=1.0, lower=0.0, upper=1.0)
    a = m3.privatize_rows(np.full((500, 2), [-3.0, 7.0]), np.random.default_rng(2))
    b = m3.privatize_rows(np.full((500, 2), [0.0, 1.0]), np.random.default_rng(2))
    np.testing.assert_array_equal(a, b)


def test_per_coordinate_budget_cap() -> None:
    """eps / k above MAX_COORDINATE_EPSILON is refused (float64 cannot realise e^-eps_c)."""
    m = ThreeOutputMechanism(epsilon=60.0)
    with pytest.raises(ValueError, match="per coordinate"):
        m.privatize_rows(np.zeros((2, 1)), np.random.default_rng(0))
    assert m.privatize_rows(np.zeros((2, 2)), np.random.default_rng(0)).shape == (2, 2)  # k = 2
    assert ThreeOutputMechanism(epsilon=MAX_COORDINATE_EPSILON).coordinate_epsilon(1) == MAX_COORDINATE_EPSILON


# -- the exact samplers ------------------------------------------------------------------------------
def test_bernoulli_exact_realises_p_on_the_106_bit_grid() -> None:
    """U = u_hi + 2^-53 u_lo < p, checked at the grid points around p = 3 * 2^-60 and p = 0.3."""
    ulp = 2.0**-53
    p = 3 * 2.0**-60  # 2^53 p = 3 / 128: f = 0, frac = 3/128
    cases = [(0.0, 3 / 128 - ulp, True), (0.0, 3 / 128, False), (ulp, 0.0, False), (0.0, 0.0, True)]
    for u_hi, u_lo, want in cases:
        assert bool(bernoulli_exact(np.float64(p), np.float64(u_hi), np.float64(u_lo))) is want
    # the count of grid points (k, l) with U < p is 2^106 p exactly: here over k = f, all l
    p = 0.3
    f = math.floor(p * 2**53)
    frac = p * 2**53 - f
    assert bool(bernoulli_exact(np.float64(p), np.float64((f - 1) * ulp), np.float64(0.999)))
    assert not bool(bernoulli_exact(np.float64(p), np.float64((f + 1) * ulp), np.float64(0.0)))
    l_star = math.ceil(frac * 2**53)  # u_lo = l * 2^-53 < frac iff l < l_star
    assert bool(bernoulli_exact(np.float64(p), np.float64(f * ulp), np.float64((l_star - 1) * ulp)))
    assert not bool(bernoulli_exact(np.float64(p), np.float64(f * ulp), np.float64(l_star * ulp)))
    assert Fraction(f, 2**53) + Fraction(l_star, 2**106) == Fraction(p)  # realised Pr == p exactly
    # statistically (binomial, 5 sigma)
    u = np.random.default_rng(1).random((200_000, 2))
    hits = bernoulli_exact(np.full(200_000, 0.3), u[:, 0], u[:, 1]).mean()
    assert abs(hits - 0.3) < 5 * math.sqrt(0.21 / 200_000)


def test_bernoulli_exact_against_rational_arithmetic() -> None:
    """Vectorised, with ties forced: u_hi on the grid points around p (f - 1, f, f + 1)."""
    rng = np.random.default_rng(4)
    p = np.concatenate([rng.random(300), 10.0 ** rng.uniform(-17, -1, 300), [0.0, 0.5, 2.0**-54, 3 * 2.0**-60]])
    f = np.floor(p * 2.0**53)
    u_hi = np.concatenate([(f + off) * 2.0**-53 for off in (-1, 0, 1)])
    u_hi = np.clip(u_hi, 0.0, 1.0 - 2.0**-53)
    pp = np.tile(p, 3)
    u_lo = np.floor(rng.random(pp.size) * 2.0**53) * 2.0**-53
    got = bernoulli_exact(pp, u_hi, u_lo)
    want = [Fraction(a) + Fraction(b) / 2**53 < Fraction(c) for a, b, c in zip(u_hi, u_lo, pp)]
    np.testing.assert_array_equal(got, want)
    assert got.shape == pp.shape
    got2 = bernoulli_exact(pp.reshape(3, -1), u_hi.reshape(3, -1), u_lo.reshape(3, -1))
    np.testing.assert_array_equal(got2, got.reshape(3, -1))


def test_categorical3_exact_matches_its_probabilities() -> None:
    """Chi-square (alpha = 1e-3) for a few probability vectors, incl. a largest in each position."""
    rng = np.random.default_rng(3)
    n = 50_000
    for probs in ([0.2, 0.5, 0.3], [0.6, 0.1, 0.3], [0.05, 0.15, 0.8], [1 / 3, 1 / 3, 1 / 3], [0.0, 0.4, 0.6]):
        P = np.tile(np.array(probs), (n, 1))
        idx = categorical3_exact(P[:, 0], P[:, 1], P[:, 2], rng.random((n, 4)))
        counts = np.bincount(idx, minlength=3)
        live = np.array(probs) > 0
        assert np.all(counts[~live] == 0)
        assert stats.chisquare(counts[live], n * np.array(probs)[live]).pvalue > 1e-3, (probs, counts)


@pytest.mark.parametrize("eps", [0.1, 1.0, 2.5, 7.0, 10.0, 0.3, math.pi, 123.456, 1e-3])
@pytest.mark.parametrize("k", [1, 2, 3, 7, 10, 49, 128])
def test_split_never_exceeds_eps(eps: float, k: int) -> None:
    e = split_epsilon(eps, k)
    assert Fraction(e) * k <= Fraction(eps)
    assert e == pytest.approx(eps / k, rel=1e-14)


def test_sample_size() -> None:
    assert wang_sample_size(1.0, 128) == 1
    assert wang_sample_size(4.99, 128) == 1
    assert wang_sample_size(5.0, 128) == 2
    assert wang_sample_size(100.0, 128) == 40
    assert wang_sample_size(1000.0, 16) == 16
    assert wang_sample_size(1000.0, 1) == 1


def test_chunking_does_not_change_the_output(monkeypatch: pytest.MonkeyPatch) -> None:
    x = np.random.default_rng(3).random((301, 9))
    for eps in (1.0, 8.0, 100.0):  # k = 1, k = 3, k = d
        m = ThreeOutputMechanism(epsilon=eps)
        whole = m.privatize_rows(x, np.random.default_rng(11))
        monkeypatch.setattr(mod, "_CHUNK_ENTRIES", 20)
        chunked = m.privatize_rows(x, np.random.default_rng(11))
        monkeypatch.undo()
        np.testing.assert_array_equal(whole, chunked)


# -- guarantee --------------------------------------------------------------------------------------
@pytest.mark.parametrize("eps", [0.1, 1.0, math.log(9), 7.3])
def test_guarantee_boundary(eps: float) -> None:
    m = ThreeOutputMechanism(epsilon=eps)
    g = m.guarantee
    assert isinstance(g, Guarantee)
    assert g.kind is GuaranteeKind.FEATURE_LDP and g.scope is Scope.FEATURES
    assert g.epsilon == eps
    assert g.check(eps) and not g.check(eps * (1 - 1e-9))
    assert "feature bounds are public" in g.assumptions
    assert "features are scaled with public bounds and clipped" in g.assumptions
    for d in (1, 5, 128):
        k = m.num_sampled(d)
        assert Fraction(m.coordinate_epsilon(d)) * k <= Fraction(g.epsilon)


# -- graph interface, randomness, validation ---------------------------------------------------------
def test_privatize_graph_replaces_x_with_the_estimate() -> None:
    x = np.random.default_rng(0).random((4, 3)).astype(np.float32)
    g = GraphData(num_nodes=4, x=x, edges_public=np.array([[0, 1], [1, 2]]), edges_private=np.array([[2], [3]]))
    m = ThreeOutputMechanism(epsilon=1.0)
    out = m.privatize(g, np.random.default_rng(5))
    expected = m.estimate(m.privatize_rows(x, np.random.default_rng(5)))
    np.testing.assert_array_equal(out.x, expected)
    assert out is not g and np.array_equal(out.edges_private, g.edges_private)
    np.testing.assert_array_equal(g.x, x)
    with pytest.raises(ValueError, match="x is None"):
        m.privatize(GraphData(num_nodes=2), np.random.default_rng(0))
    with pytest.raises(TypeError, match="GraphData"):
        m.privatize(x, np.random.default_rng(0))  # type: ignore[arg-type]


def test_bad_rows() -> None:
    m = ThreeOutputMechanism(epsilon=1.0, lower=[0.0, 0.0], upper=[1.0, 1.0])
    rng = np.random.default_rng(0)
    with pytest.raises(ValueError, match="features"):
        m.privatize_rows(np.zeros((3, 5)), rng)
    with pytest.raises(ValueError, match="NaN"):
        m.privatize_rows(np.array([[0.1, np.nan]]), rng)
    with pytest.raises(ValueError, match="2-D"):
        m.privatize_rows(np.zeros(4), rng)
    with pytest.raises(TypeError, match="real"):
        m.privatize_rows(np.zeros((2, 2), dtype=bool), rng)
    assert m.privatize_rows(np.zeros((0, 2)), rng).shape == (0, 2)


@pytest.mark.parametrize(
    "eps, exc",
    [
        (float("nan"), ValueError), (float("inf"), ValueError), (-float("inf"), ValueError),
        (0.0, ValueError), (0, ValueError), (-1.0, ValueError),
        (True, TypeError), ("1", TypeError), (None, TypeError), ([1.0], TypeError),
    ],
)
def test_bad_epsilon(eps: object, exc: type) -> None:
    with pytest.raises(exc, match="epsilon"):
        ThreeOutputMechanism(epsilon=eps)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "kwargs, exc, name",
    [
        ({"lower": 1.0, "upper": 1.0}, ValueError, "lower"),
        ({"lower": 2.0, "upper": 1.0}, ValueError, "lower"),
        ({"lower": [0.0, 5.0], "upper": [1.0, 4.0]}, ValueError, "lower"),
        ({"lower": [0.0, 0.0], "upper": [1.0, 1.0, 1.0]}, ValueError, "lower"),
        ({"lower": float("nan")}, ValueError, "lower"),
        ({"upper": float("inf")}, ValueError, "upper"),
        ({"upper": True}, TypeError, "upper"),
        ({"lower": "0"}, TypeError, "lower"),
        ({"lower": None}, TypeError, "lower"),
    ],
)
def test_bad_bounds(kwargs: dict, exc: type, name: str) -> None:
    with pytest.raises(exc, match=name):
        ThreeOutputMechanism(epsilon=1.0, **kwargs)


def test_constructor_repr_params() -> None:
    with pytest.raises(TypeError):
        ThreeOutputMechanism(1.0)  # type: ignore[misc]
    m = ThreeOutputMechanism(epsilon=1.0)
    assert repr(m) == "ThreeOutputMechanism(epsilon=1.0)"
    assert m.params() == {"epsilon": 1.0, "lower": 0.0, "upper": 1.0}
    assert ThreeOutputMechanism(**m.params()).params() == m.params()
    m2 = ThreeOutputMechanism(epsilon=2, lower=np.array([0.0, -1.0]), upper=[1.0, 1.0])
    assert m2.params() == {"epsilon": 2.0, "lower": [0.0, -1.0], "upper": [1.0, 1.0]}
    assert ThreeOutputMechanism.name == "three_output" and ThreeOutputMechanism.scope is Scope.FEATURES
    with pytest.raises(ValueError, match="num_features"):
        m.num_sampled()
    with pytest.raises(ValueError, match="t must"):
        three_output_pmf([1.5], 1.0)
