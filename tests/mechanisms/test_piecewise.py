"""PiecewiseMechanism: the continuous PM's density (the law the grid approximates), the grid
sampler against its exact law, released values on the public grid, unbiasedness and the stated
variance, and Wang et al.'s k-dimension sampling. (The grid's exact privacy loss, for PM and
PM-SUB: test_piecewise_grid.py.)

Statistical tests use fixed seeds (deterministic as written); the stated false-failure rates are
what each test would have over random seeds.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats

from privgraph.mechanisms.features.piecewise import (
    PiecewiseMechanism,
    per_dimension_epsilon,
    pm_bound,
    pm_cdf,
    pm_density,
    pm_grid,
    pm_grid_variance,
    pm_sample,
    pm_variance,
    sampling_k,
)

EPSILONS = [0.01, 0.1, 0.5, 1.0, 2.5, 8.0, 30.0]


# -- the privacy loss of one dimension ---------------------------------------------------------------
@pytest.mark.parametrize("eps", EPSILONS)
def test_density_ratio_on_a_grid(eps: float) -> None:
    """sup over y (4001-point grid of [-C, C] plus every piece boundary) and t, t' (201-point
    grid of [-1, 1]) of f(y|t)/f(y|t') is e^eps, attained at t = 1, t' = -1, y = C."""
    C = float(pm_bound(eps))
    t = np.linspace(-1.0, 1.0, 201)
    left = (C + 1) / 2 * t - (C - 1) / 2
    y = np.unique(np.concatenate([np.linspace(-C, C, 4001), left, left + C - 1]))
    y = y[(y >= -C) & (y <= C)]
    f = pm_density(y[:, None], t[None, :], eps)  # [Y, T]
    assert np.all(f > 0)  # same support [-C, C] for every input
    log_f = np.log(f)
    worst = float(np.max(log_f.max(axis=1) - log_f.min(axis=1)))
    assert worst <= eps * (1 + 1e-12) + 1e-15
    assert worst == pytest.approx(eps, rel=1e-9)
    at_boundary = math.log(float(pm_density(C, 1.0, eps) / pm_density(C, -1.0, eps)))
    assert at_boundary == pytest.approx(eps, rel=1e-9)
    # nothing outside [-C, C]
    assert np.all(pm_density([-C - 1e-9, C + 1e-9], 0.3, eps) == 0.0)


@pytest.mark.parametrize("eps", EPSILONS)
def test_density_integrates_to_one_and_matches_the_cdf(eps: float) -> None:
    C = float(pm_bound(eps))
    for t in (-1.0, -0.2, 0.0, 0.7, 1.0):
        assert float(pm_cdf(np.inf, t, eps)) == pytest.approx(1.0, abs=1e-14)
        assert float(pm_cdf(-np.inf, t, eps)) == 0.0
        # at the float C and -C (a rounding of C times a density up to ~1e6 at eps = 30)
        assert float(pm_cdf(C, t, eps)) == pytest.approx(1.0, abs=1e-9)
        assert float(pm_cdf(-C, t, eps)) == pytest.approx(0.0, abs=1e-9)
        if eps <= 8.0:  # the grid resolves the centre piece (length C - 1) only for moderate eps
            y = np.linspace(-C, C, 20_001)
            f = pm_density(y, t, eps)
            F = np.concatenate([[0.0], np.cumsum((f[1:] + f[:-1]) / 2 * np.diff(y))])
            np.testing.assert_allclose(F, pm_cdf(y, t, eps), atol=2e-3)
        # the centre piece [l, r] carries e^(eps/2) / (e^(eps/2) + 1) (the tolerance absorbs
        # this test's own rounding of l and r, times a centre density up to ~1e6 at eps = 30)
        left = (C + 1) / 2 * t - (C - 1) / 2
        mass = float(pm_cdf(left + C - 1, t, eps) - pm_cdf(left, t, eps))
        assert mass == pytest.approx(1 / (1 + math.exp(-eps / 2)), rel=1e-8)


def test_exact_moments_from_the_density() -> None:
    """E[t*] = t and Var[t*] = pm_variance (Lemma 1), from the piecewise-uniform density exactly."""
    for eps in (0.1, 1.0, 6.0):
        C = float(pm_bound(eps))
        for t in (-1.0, -0.5, 0.0, 0.3, 1.0):
            left = (C + 1) / 2 * t - (C - 1) / 2
            right = left + C - 1
            pieces = [(-C, left), (left, right), (right, C)]
            dens = [float(pm_density((a + b) / 2, t, eps)) for a, b in pieces]
            m1 = sum(f * (b * b - a * a) / 2 for f, (a, b) in zip(dens, pieces))
            m2 = sum(f * (b**3 - a**3) / 3 for f, (a, b) in zip(dens, pieces))
            assert m1 == pytest.approx(t, abs=1e-9 * C**2)
            assert m2 - m1**2 == pytest.approx(float(pm_variance(t, eps)), rel=1e-9)


# -- the grid sampler against its exact law ------------------------------------------------------------
def _binned_law(eps: float, t: float, bins: int = 40) -> tuple[np.ndarray, np.ndarray]:
    """The production grid's exact law at ``t`` summed into ``bins`` runs of consecutive cells:
    (the run boundaries in cells, the run masses)."""
    g = pm_grid(eps)
    edges = np.linspace(0, g.cells, bins + 1).astype(np.int64)
    p = g.pmf(t)
    return edges, np.add.reduceat(p, edges[:-1])


@pytest.mark.parametrize("eps", [0.5, 2.0, 8.0])
@pytest.mark.parametrize("t", [-1.0, -0.3, 0.0, 0.7, 1.0])
def test_sampler_matches_the_exact_grid_law(eps: float, t: float) -> None:
    """pm_sample on the 2^20-cell grid: 20,000 draws binned into 40 runs of cells, chi-square
    against the exact law (runs with expected count >= 5), alpha = 1e-3 (15 cases)."""
    rng = np.random.default_rng(int(1000 * eps) + int(10 * (t + 1)))
    g = pm_grid(eps)
    y = pm_sample(np.full(20_000, t), eps, rng)
    cell = np.rint(y / g.step + (g.cells - 1) / 2.0).astype(np.int64)
    np.testing.assert_array_equal(g.value(cell), y)
    edges, mass = _binned_law(eps, t)
    obs = np.histogram(cell, bins=edges)[0]
    exp = mass * y.size
    keep = exp >= 5
    assert stats.chisquare(obs[keep], exp[keep] * obs[keep].sum() / exp[keep].sum()).pvalue > 1e-3


def test_unbiased_with_the_stated_variance() -> None:
    """Mean within 5 standard errors, sample variance within 5 of its standard errors (normal
    approximation; false-failure rate about 6e-7 each)."""
    n = 200_000
    rng = np.random.default_rng(23)
    for eps, t in ((0.5, 0.4), (3.0, -0.9), (10.0, 1.0)):
        y = pm_sample(np.full(n, t), eps, rng)
        var = float(pm_grid_variance(t, eps))
        assert var == pytest.approx(float(pm_variance(t, eps)), rel=1.0 / pm_grid(eps).window + 1e-6)
        assert abs(y.mean() - t) <= 5 * math.sqrt(var / n)
        c = y - t
        se_var = math.sqrt(((c**4).mean() - var**2) / n)
        assert abs(c.var() - var) <= 5 * se_var


def test_mechanism_releases_only_grid_values() -> None:
    """No low-bit leak in the release: d = 1 on bounds (-1, 1), every released float32 is the
    mechanism's own map of a public grid value, for inputs that differ in their last bits.
    Textbook PM (l(t) + u (C - 1) in floats) fails this."""
    eps = 3.0
    m = PiecewiseMechanism(epsilon=eps, lower=-1.0, upper=1.0)
    values = pm_grid(eps).values()
    public = np.unique(((values + 1.0) * (2.0 / 2.0) - 1.0).astype(np.float32))  # lower + (y + 1)/2 span
    for t in (0.25, float(np.nextafter(0.25, 1.0))):
        out = m.privatize_rows(np.full((20_000, 1), t), np.random.default_rng(4))[:, 0]
        assert np.all(np.isin(out, public))


# -- k-dimension sampling (Algorithm 4) ---------------------------------------------------------------
def test_sampling_k() -> None:
    assert sampling_k(0.1, 128) == 1
    assert sampling_k(4.99, 128) == 1
    assert sampling_k(5.0, 128) == 2
    assert sampling_k(10.0, 128) == 4
    assert sampling_k(10.0, 3) == 3
    assert sampling_k(1e6, 128) == 128
    with pytest.raises(ValueError, match="d"):
        sampling_k(1.0, 0)


@pytest.mark.parametrize("eps", [0.3, 1.0, 0.7, 5.0, 7.7, 10.0, 1e3, math.pi * 11])
@pytest.mark.parametrize("k", [1, 2, 3, 6, 7, 10, 49, 128])
def test_per_dimension_budgets_never_exceed_eps(eps: float, k: int) -> None:
    e = per_dimension_epsilon(eps, k)
    assert Fraction(e) * k <= Fraction(eps)  # exactly, in rationals
    assert math.fsum([e] * k) <= eps
    assert e * k <= eps
    assert e == pytest.approx(eps / k, rel=1e-14)


@pytest.mark.parametrize("eps, k", [(1.0, 1), (7.0, 2), (12.0, 4)])
def test_each_row_reports_k_uniformly_chosen_dimensions(eps: float, k: int) -> None:
    """Exactly k entries per row differ from the midpoint (0 on the [-1, 1] scale); each
    dimension is chosen k/d of the time (chi-square at alpha = 1e-3)."""
    n, d = 30_000, 10
    m = PiecewiseMechanism(epsilon=eps, lower=-1.0, upper=1.0)
    assert m.sampled_dimensions(d) == k
    out = m.privatize_rows(np.full((n, d), 0.2), np.random.default_rng(100 + k))
    reported = out != 0.0
    assert np.all(reported.sum(axis=1) == k)
    counts = reported.sum(axis=0)
    assert stats.chisquare(counts, np.full(d, n * k / d)).pvalue > 1e-3
    # the reported values are d/k times grid PM outputs at eps/k
    C = pm_grid(m.dimension_epsilon(d)).bound
    assert np.all(np.abs(out[reported]) <= d / k * C * (1 + 1e-6))


@pytest.mark.parametrize("eps", [0.8, 6.0, 13.0, 20.0])
def test_mechanism_is_unbiased_with_the_stated_variance(eps: float) -> None:
    """Columns' means within 5 standard errors (from variance()) of the clipped input and
    sample variances within 5 of their standard errors; 6 columns x 2 checks at 5 sigma:
    false-failure rate about 1e-5."""
    n, d = 100_000, 6  # k = 1, 2, 5, 6 = d
    m = PiecewiseMechanism(epsilon=eps, lower=-2.0, upper=6.0)
    x_row = np.array([-2.0, -5.0, 0.0, 1.5, 5.9, 7.0])
    out = m.privatize_rows(np.tile(x_row, (n, 1)), np.random.default_rng(int(eps * 10))).astype(np.float64)
    target = x_row + m.bias(x_row)
    var = m.variance(x_row)
    assert np.all(np.abs(out.mean(0) - target) <= 5 * np.sqrt(var / n))
    c = out - target
    se_var = np.sqrt(((c**4).mean(0) - var**2) / n)
    assert np.all(np.abs(c.var(0) - var) <= 5 * se_var)


def test_one_feature_is_one_dimensional_pm() -> None:
    """d = 1 (k = 1 = d) on bounds (-1, 1): the release is the grid PM at eps (chi-square over 40
    runs of cells against the exact law, alpha = 1e-3)."""
    eps, t = 1.5, -0.6
    m = PiecewiseMechanism(epsilon=eps, lower=-1.0, upper=1.0)
    y = m.privatize_rows(np.full((20_000, 1), t), np.random.default_rng(31))[:, 0].astype(np.float64)
    g = pm_grid(eps)
    cell = np.rint(y / g.step + (g.cells - 1) / 2.0).astype(np.int64)
    edges, mass = _binned_law(eps, t)
    obs = np.histogram(cell, bins=edges)[0]
    exp = mass * y.size
    keep = exp >= 5
    assert stats.chisquare(obs[keep], exp[keep] * obs[keep].sum() / exp[keep].sum()).pvalue > 1e-3


def test_guarantee_and_module_validation() -> None:
    g = PiecewiseMechanism(epsilon=12.0).guarantee
    assert g.epsilon == 12.0
    assert any("epsilon / k" in a for a in g.assumptions)
    assert any("fixed public grid of 2^20 cells" in a for a in g.assumptions)
    assert not any("continuous" in a for a in g.assumptions)
    with pytest.raises(ValueError, match="t must lie in"):
        pm_sample([-1.01], 1.0, np.random.default_rng(0))
    with pytest.raises(ValueError, match="t must lie in"):
        pm_sample([np.nan], 1.0, np.random.default_rng(0))
    with pytest.raises(ValueError, match="epsilon"):
        pm_sample([0.5], -1.0, np.random.default_rng(0))
    with pytest.raises(TypeError, match="epsilon"):
        pm_sample([0.5], np.array([1.0, 2.0]), np.random.default_rng(0))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="epsilon"):
        pm_bound(1e-320)
    with pytest.raises(ValueError, match="epsilon"):
        PiecewiseMechanism(epsilon=1e-320)
    with pytest.raises(TypeError, match="Generator"):
        pm_sample([0.5], 1.0, None)  # type: ignore[arg-type]
