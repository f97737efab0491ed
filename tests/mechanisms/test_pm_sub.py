"""PM-SUB: the continuous density the grid approximates (normalised, unbiased, its variance, its
privacy ratio), the grid sampler against its exact law (chi-square), released values on the public
grid, unbiasedness of the estimate, validation. (The grid's exact privacy loss:
test_piecewise_grid.py.)

Statistical tests use fixed seeds (they are deterministic as written); the stated false-failure
rates are what each test would have over random seeds.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from scipy import integrate, stats

import privgraph.mechanisms.features.scaled as base_mod
from privgraph.graph import GraphData
from privgraph.guarantee import Guarantee, GuaranteeKind, Scope
from privgraph.mechanisms.features.feature_rr import worst_case_log_ratio
from privgraph.mechanisms.features.pm_sub import (
    PMSubMechanism,
    pm_sub_bound,
    pm_sub_cdf,
    pm_sub_density,
    pm_sub_grid,
    pm_sub_grid_variance,
    pm_sub_interval,
    pm_sub_tau,
    pm_sub_variance,
)
from privgraph.mechanisms.features.three_output import split_epsilon

EPSILONS = [1e-3, 0.1, 0.5, 1.0, 2.0, 3.0, 5.0, 10.0, 30.0, 50.0]
T_GRID = np.linspace(-1.0, 1.0, 41)


def _paper_constants(eps: float) -> tuple[float, float, float]:
    """A, p_high, p_low written exactly as in the paper (with e^eps), for moderate eps."""
    e, tau = math.exp(eps), math.exp(eps / 3)
    a = (e + tau) * (tau + 1) / (tau * (e - 1))
    p_high = e * tau * (e - 1) / (2 * (tau + e) ** 2)
    return a, p_high, p_high / e


@pytest.mark.parametrize("eps", [0.1, 1.0, 3.0, 10.0])
def test_constants_match_the_papers_form(eps: float) -> None:
    a, p_high, p_low = _paper_constants(eps)
    e, tau = math.exp(eps), pm_sub_tau(eps)
    assert tau == pytest.approx(math.exp(eps / 3), rel=1e-15)
    assert pm_sub_bound(eps) == pytest.approx(a, rel=1e-12)
    for t in (-1.0, -0.2, 0.0, 0.5, 1.0):
        lo, hi = pm_sub_interval(t, eps)
        assert lo == pytest.approx((e + tau) * (t * tau - 1) / (tau * (e - 1)), rel=1e-12, abs=1e-12)
        assert hi == pytest.approx((e + tau) * (t * tau + 1) / (tau * (e - 1)), rel=1e-12, abs=1e-12)
        assert float(pm_sub_density((lo + hi) / 2, t, eps)) == pytest.approx(p_high, rel=1e-12)
        if t < 1.0:  # the right tail (hi, A] is non-empty
            assert float(pm_sub_density((hi + pm_sub_bound(eps)) / 2, t, eps)) == pytest.approx(p_low, rel=1e-12)
        if t > -1.0:
            assert float(pm_sub_density((lo - pm_sub_bound(eps)) / 2, t, eps)) == pytest.approx(p_low, rel=1e-12)
    # the support [-A, A] does not depend on t
    assert pm_sub_interval(1.0, eps)[1] == pytest.approx(a, rel=1e-12)
    assert pm_sub_interval(-1.0, eps)[0] == pytest.approx(-a, rel=1e-12)


@pytest.mark.parametrize("eps", EPSILONS)
def test_density_is_normalised_unbiased_and_has_the_stated_variance(eps: float) -> None:
    a = pm_sub_bound(eps)
    for t in (-1.0, -0.6, 0.0, 0.3, 1.0):
        lo, hi = (float(v) for v in pm_sub_interval(t, eps))
        pieces = [(-a, lo), (lo, hi), (hi, a)]
        mass = sum(integrate.quad(lambda y: float(pm_sub_density(y, t, eps)), p, q)[0] for p, q in pieces if q > p)
        mean = sum(integrate.quad(lambda y: y * float(pm_sub_density(y, t, eps)), p, q)[0] for p, q in pieces if q > p)
        m2 = sum(integrate.quad(lambda y: y * y * float(pm_sub_density(y, t, eps)), p, q)[0] for p, q in pieces if q > p)
        assert mass == pytest.approx(1.0, rel=1e-9)
        assert mean == pytest.approx(t, abs=1e-9 * max(1.0, a))
        # m2 - t^2 cancels at large eps: compare to the integration error of m2
        assert m2 - t * t == pytest.approx(float(pm_sub_variance(t, eps)), rel=1e-8, abs=1e-9 * max(1.0, m2))
        assert float(pm_sub_cdf(-a, t, eps)) == 0.0
        assert float(pm_sub_cdf(a, t, eps)) == pytest.approx(1.0, abs=1e-12)
        # the interval's width 2 g / tau is a difference of two floats near t: relative error ~ tau 1e-16
        assert float(pm_sub_cdf(hi, t, eps)) - float(pm_sub_cdf(lo, t, eps)) == pytest.approx(
            math.exp(eps) / (math.exp(eps) + pm_sub_tau(eps)), rel=max(1e-12, 1e-15 * pm_sub_tau(eps))
        )


def test_variance_formula_reduces_to_wang_pm_structure() -> None:
    """Var = (tau + 1)/(e^eps - 1) t^2 + (e + tau)((tau + 1)^3 + e - 1) / (3 tau^2 (e - 1)^2)."""
    for eps in (0.5, 2.0, 6.0):
        e, tau = math.exp(eps), math.exp(eps / 3)
        t = np.array([-1.0, 0.0, 0.4])
        expected = (tau + 1) / (e - 1) * t**2 + (e + tau) * ((tau + 1) ** 3 + e - 1) / (3 * tau**2 * (e - 1) ** 2)
        np.testing.assert_allclose(pm_sub_variance(t, eps), expected, rtol=1e-12)


@pytest.mark.parametrize("eps", EPSILONS)
def test_density_ratio_is_exactly_e_eps(eps: float) -> None:
    """max over (y, t, t') of p(y|t)/p(y|t') on a fine y grid (incl. every interval end) is e^eps."""
    a = pm_sub_bound(eps)
    ends = np.concatenate([np.asarray(pm_sub_interval(T_GRID, eps)).ravel(), [-a, a]])
    y = np.unique(np.clip(np.concatenate([np.linspace(-a, a, 2001), ends]), -a, a))
    D = pm_sub_density(y[None, :], T_GRID[:, None], eps)
    assert np.all(D > 0)  # the support does not depend on t
    w = worst_case_log_ratio(D)
    assert abs(w - eps) <= 1e-9 * max(1.0, eps)


# -- the sampler ------------------------------------------------------------------------------------
@pytest.mark.parametrize("eps", [0.5, 1.0, 3.0, 8.0])
def test_sampler_matches_the_exact_grid_law(eps: float) -> None:
    """d = 1 (k = 1): per input t, 20,000 releases binned into 40 runs of cells of the 2^20-cell
    grid, chi-square against the exact law (runs with expected count >= 5), alpha = 1e-3 (20
    tests); every release is a grid value."""
    n = 20_000
    m = PMSubMechanism(epsilon=eps, lower=-1.0, upper=1.0)
    g = pm_sub_grid(eps)
    rng = np.random.default_rng(int(eps * 100) + 1)
    edges = np.linspace(0, g.cells, 41).astype(np.int64)
    for t in (-1.0, -0.3, 0.0, 0.5, 1.0):
        out = m.privatize_rows(np.full((n, 1), t), rng)[:, 0].astype(np.float64)
        assert np.all(np.abs(out) <= g.bound * (1 + 1e-6))
        cell = np.rint(out / g.step + (g.cells - 1) / 2.0).astype(np.int64)
        np.testing.assert_allclose(g.value(cell), out, rtol=1e-7)  # float32 of a grid value
        obs = np.histogram(cell, bins=edges)[0]
        exp = np.add.reduceat(g.pmf(t), edges[:-1]) * n
        keep = exp >= 5
        res = stats.chisquare(obs[keep], exp[keep] * obs[keep].sum() / exp[keep].sum())
        assert res.pvalue > 1e-3, (eps, t, res)
        # the window gets its mass 1 - q (binomial, 5 sigma)
        s0 = (t + 1) / 2 * (g.cells - g.window)
        in_window = (cell >= np.floor(s0)) & (cell <= np.floor(s0) + g.window)
        assert abs(in_window.mean() - (1 - g.outer)) < 5 * math.sqrt(g.outer * (1 - g.outer) / n) + 1e-4


def test_releases_only_grid_values_whatever_the_input() -> None:
    """No low-bit leak: d = 1, the release is float32 of a grid value (k = d = 1, no scaling), the
    same public set for inputs that differ in their last bits. Float PM-SUB fails this."""
    eps = 2.0
    m = PMSubMechanism(epsilon=eps, lower=-1.0, upper=1.0)
    public = np.unique(pm_sub_grid(eps).values().astype(np.float32))
    for t in (0.6, float(np.nextafter(0.6, 1.0))):
        out = m.privatize_rows(np.full((20_000, 1), t), np.random.default_rng(2))[:, 0]
        assert np.all(np.isin(out, public))


def test_release_shape_sampling_and_scale() -> None:
    d, eps = 8, 6.0  # k = 2
    m = PMSubMechanism(epsilon=eps)
    assert m.num_sampled(d) == 2
    x = np.random.default_rng(0).random((5000, d)).astype(np.float32)
    out = m.privatize_rows(x, np.random.default_rng(1))
    assert out.dtype == np.float32 and out.shape == x.shape
    assert np.all((out != 0).sum(axis=1) == 2)  # a grid value is never 0 (cell centres, M even)
    bound = pm_sub_grid(m.coordinate_epsilon(d)).bound * d / 2
    assert bound == pytest.approx(m.output_bound(d) * d / 2, rel=1e-4)
    assert np.all(np.abs(out) <= bound * (1 + 1e-6))
    rate = (out != 0).mean(axis=0)
    assert np.all(np.abs(rate - 2 / d) < 5 * math.sqrt(2 / d * (1 - 2 / d) / 5000))


@pytest.mark.parametrize("eps, d", [(1.0, 3), (6.0, 4), (20.0, 6)])
def test_estimate_is_unbiased(eps: float, d: int) -> None:
    """Mean of the estimate vs x within 5 standard errors of the exact variance
    (false-failure rate about 6e-7 per column over random seeds)."""
    n = 100_000
    lo, hi = 10.0, 20.0
    m = PMSubMechanism(epsilon=eps, lower=lo, upper=hi)
    row = np.linspace(lo, hi + 5.0, d)
    x = np.repeat(row[None, :], n, axis=0)
    est = m.estimate(m.privatize_rows(x, np.random.default_rng(9))).astype(np.float64)
    var = m.estimate_variance(row[None, :])[0]
    se = np.sqrt(var / n)
    assert np.all(np.abs(est.mean(axis=0) - np.clip(row, lo, hi)) < 5 * se), (est.mean(axis=0), se)
    np.testing.assert_allclose(est.var(axis=0), var, rtol=0.1)
    # the grid's variance is the continuous PM-SUB's to the window's rounding to whole cells
    t = np.linspace(-1, 1, 5)
    e = split_epsilon(eps, m.num_sampled(d))
    np.testing.assert_allclose(pm_sub_grid_variance(t, e), pm_sub_variance(t, e), rtol=1.0 / pm_sub_grid(e).window + 1e-6)


def test_chunking_does_not_change_the_output(monkeypatch: pytest.MonkeyPatch) -> None:
    x = np.random.default_rng(3).random((257, 7))
    for eps in (1.0, 6.0, 50.0):
        m = PMSubMechanism(epsilon=eps)
        whole = m.privatize_rows(x, np.random.default_rng(11))
        monkeypatch.setattr(base_mod, "_CHUNK_ENTRIES", 16)
        chunked = m.privatize_rows(x, np.random.default_rng(11))
        monkeypatch.undo()
        np.testing.assert_array_equal(whole, chunked)


def test_clipping_and_large_budgets() -> None:
    """Out-of-bounds inputs behave as the bounds; a huge per-coordinate budget stays finite."""
    m = PMSubMechanism(epsilon=3.0, lower=0.0, upper=1.0)
    a = m.privatize_rows(np.full((2000, 1), 5.0), np.random.default_rng(1))
    b = m.privatize_rows(np.full((2000, 1), 1.0), np.random.default_rng(1))
    np.testing.assert_array_equal(a, b)
    big = PMSubMechanism(epsilon=45.0)  # the high-density interval has width 2e-6, mass 1 - 1e-13
    out = big.privatize_rows(np.array([[0.0], [0.5], [1.0]]), np.random.default_rng(0))
    np.testing.assert_allclose(out[:, 0], [-1.0, 0.0, 1.0], atol=1e-5)
    with pytest.raises(ValueError, match="per coordinate"):
        PMSubMechanism(epsilon=3000.0).privatize_rows(np.zeros((1, 1)), np.random.default_rng(0))


# -- guarantee --------------------------------------------------------------------------------------
@pytest.mark.parametrize("eps", [0.1, 1.0, math.log(9), 7.3])
def test_guarantee_boundary(eps: float) -> None:
    m = PMSubMechanism(epsilon=eps)
    g = m.guarantee
    assert isinstance(g, Guarantee)
    assert g.kind is GuaranteeKind.FEATURE_LDP and g.scope is Scope.FEATURES
    assert g.epsilon == eps
    assert g.check(eps) and not g.check(eps * (1 - 1e-9))
    assert "feature bounds are public" in g.assumptions
    assert any("fixed public grid of 2^20 cells" in a for a in g.assumptions)
    assert not any("continuous" in a for a in g.assumptions)
    for d in (1, 3, 128):
        assert Fraction(m.coordinate_epsilon(d)) * m.num_sampled(d) <= Fraction(g.epsilon)
    assert m.coordinate_epsilon(128) == split_epsilon(eps, m.num_sampled(128))


# -- graph interface, randomness, validation ---------------------------------------------------------
def test_privatize_graph_replaces_x_with_the_estimate() -> None:
    x = np.random.default_rng(0).random((4, 3)).astype(np.float32)
    g = GraphData(num_nodes=4, x=x, edges_public=np.array([[0, 1], [1, 2]]))
    m = PMSubMechanism(epsilon=2.0)
    out = m.privatize(g, np.random.default_rng(5))
    np.testing.assert_array_equal(out.x, m.estimate(m.privatize_rows(x, np.random.default_rng(5))))
    np.testing.assert_array_equal(g.x, x)
    with pytest.raises(ValueError, match="x is None"):
        m.privatize(GraphData(num_nodes=2), np.random.default_rng(0))


@pytest.mark.parametrize(
    "eps, exc",
    [
        (float("nan"), ValueError), (float("inf"), ValueError), (0.0, ValueError), (-1.0, ValueError),
        (True, TypeError), ("1", TypeError), (None, TypeError),
    ],
)
def test_bad_epsilon(eps: object, exc: type) -> None:
    with pytest.raises(exc, match="epsilon"):
        PMSubMechanism(epsilon=eps)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "kwargs, exc, name",
    [
        ({"lower": 1.0, "upper": 1.0}, ValueError, "lower"),
        ({"lower": 3.0, "upper": -1.0}, ValueError, "lower"),
        ({"lower": [0.0, 1.0], "upper": [1.0, 1.0]}, ValueError, "lower"),
        ({"upper": float("nan")}, ValueError, "upper"),
        ({"upper": False}, TypeError, "upper"),
    ],
)
def test_bad_bounds(kwargs: dict, exc: type, name: str) -> None:
    with pytest.raises(exc, match=name):
        PMSubMechanism(epsilon=1.0, **kwargs)


def test_bad_rows_and_inputs() -> None:
    m = PMSubMechanism(epsilon=1.0)
    with pytest.raises(ValueError, match="NaN"):
        m.privatize_rows(np.array([[np.inf]]), np.random.default_rng(0))
    with pytest.raises(ValueError, match="t must"):
        pm_sub_density(0.0, 1.5, 1.0)
    with pytest.raises(ValueError, match="epsilon"):
        pm_sub_cdf(0.0, 0.0, 0.0)


def test_constructor_repr_params() -> None:
    with pytest.raises(TypeError):
        PMSubMechanism(1.0)  # type: ignore[misc]
    m = PMSubMechanism(epsilon=1.0, lower=-1, upper=1)
    assert repr(m) == "PMSubMechanism(epsilon=1.0)"
    assert m.params() == {"epsilon": 1.0, "lower": -1.0, "upper": 1.0}
    assert PMSubMechanism(**m.params()).params() == m.params()
    assert PMSubMechanism.name == "pm_sub" and PMSubMechanism.scope is Scope.FEATURES
