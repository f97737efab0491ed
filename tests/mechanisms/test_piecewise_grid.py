"""The piecewise mechanisms on a public grid (piecewise_grid.py), for PM and PM-SUB: the exact
privacy loss by enumeration on small grids and by a rational certificate on the production grid,
exact unbiasedness and variance, the sampler against the exact law (chi-square, fixed seeds),
released values on the public grid whatever the input, and the rare exact-integer rejection path.

Statistical tests use fixed seeds (deterministic as written); the stated false-failure rates are
what each test would have over random seeds.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats

from privgraph.mechanisms.features.feature_rr import worst_case_log_ratio
from privgraph.mechanisms.features.piecewise import pm_bound, pm_variance
from privgraph.mechanisms.features.piecewise_grid import (
    GRID_CELLS,
    UNIFORMS_PER_ENTRY,
    PiecewiseGrid,
    _uniform_below,
    exp_lower_bound,
    piecewise_grid,
)
from privgraph.mechanisms.features.pm_sub import pm_sub_bound

FAMILIES = ["pm", "pm_sub"]
SMALL_EPSILONS = [2.0**-20, 0.1, 1.0, math.log(9), 3.0, 10.0, 30.0]
# Each pmf entry is a float64 convex combination of p_hi and p_lo (a few ulps each), so a float
# log-ratio is within ~1e-15 of the exact one; 1e-12 leaves a wide margin and still fails any
# real excess (a wrong q or window moves the ratio by far more).
LOG_TOL = 1e-12


def _inputs(g: PiecewiseGrid) -> np.ndarray:
    """401 points of [-1, 1] plus every input whose window position s(t) is an integer (where the
    randomized rounding switches) and points just beside them."""
    M, W = g.cells, g.window
    breaks = 2.0 * np.arange(M - W + 1) / (M - W) - 1.0
    t = np.concatenate([np.linspace(-1, 1, 401), breaks, np.nextafter(breaks, 2.0), np.nextafter(breaks, -2.0)])
    return np.unique(np.clip(t, -1.0, 1.0))


# -- the exact privacy loss ------------------------------------------------------------------------
@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("cells", [8, 16, 64])
@pytest.mark.parametrize("eps", SMALL_EPSILONS)
def test_exact_ratio_on_small_grids(family: str, cells: int, eps: float) -> None:
    """The full output law for every input of _inputs: every cell has positive probability for
    every input (one support), and max over cells and input pairs of P(i|t) / P(i|t') is
    <= e^eps (tolerance LOG_TOL, see there) and attained (p_hi / p_lo, to the ulps q was raised)."""
    g = piecewise_grid(eps, family, cells)  # type: ignore[arg-type]
    P = g.pmf(_inputs(g))
    assert np.all(P > 0)
    np.testing.assert_allclose(P.sum(axis=1), 1.0, rtol=1e-12)
    worst = worst_case_log_ratio(P)
    assert worst <= eps + LOG_TOL
    assert worst == pytest.approx(eps, rel=1e-9, abs=1e-12)


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize(
    "eps", [2.0**-20, 1e-4, 0.01, 0.3, 0.61, 1.0, math.log(9), math.pi, 5.0, 7.7, 12.5, 20.0, 33.3, 37.5, 49.9, 50.0]
)
def test_production_grid_ratio_is_certified(family: str, eps: float) -> None:
    """On the 2^20-cell grid: p_hi / p_lo of the realised float q is <= e^eps EXACTLY (rationals,
    against a Taylor lower bound of e^eps) and tight (within 1e-12); q >= 2^-54, so
    bernoulli_exact realises it exactly; 1 <= W <= M / 2 (the windows of t = -1 and t = 1 are
    disjoint, so the ratio is attained)."""
    g = piecewise_grid(eps, family)  # type: ignore[arg-type]
    assert g.cells == GRID_CELLS
    r = g.ratio()
    assert r <= exp_lower_bound(Fraction(eps))
    assert float(r) >= math.exp(eps) * (1 - 1e-12)
    assert g.outer >= 2.0**-54
    assert 1 <= g.window <= g.cells // 2
    assert g.step > 0


def test_exp_lower_bound() -> None:
    for x in (0.0, 1e-6, 0.5, 1.0, 10.0, 50.0):
        lb = exp_lower_bound(Fraction(x))
        assert float(lb) == pytest.approx(math.exp(x), rel=1e-15)
        # below e^x: the next Taylor term is positive
        assert lb <= exp_lower_bound(Fraction(x), rel=200)
    with pytest.raises(ValueError):
        exp_lower_bound(Fraction(-1))


def test_a_wrong_outer_probability_is_caught() -> None:
    """The enumeration fails a grid whose q is one percent too small (p_hi / p_lo above e^eps):
    the ratio test has the power to fail."""
    g = piecewise_grid(1.0, "pm", 16)
    bad = PiecewiseGrid(epsilon=1.0, cells=16, window=g.window, outer=g.outer * 0.99, step=g.step)
    assert worst_case_log_ratio(bad.pmf(_inputs(bad))) > 1.0 + 1e-3


# -- unbiasedness and variance -----------------------------------------------------------------------
@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("cells", [8, 64])
@pytest.mark.parametrize("eps", [2.0**-20, 0.5, 3.0, 10.0])
def test_exactly_unbiased_with_the_stated_variance(family: str, cells: int, eps: float) -> None:
    """From the enumerated law: E[y | t] = t (to 1e-12 of the grid's range) and Var = variance(t)
    (relative 1e-9), for every input of _inputs."""
    g = piecewise_grid(eps, family, cells)  # type: ignore[arg-type]
    t = _inputs(g)
    P = g.pmf(t)
    y = g.values()
    mean = P @ y
    np.testing.assert_allclose(mean, t, rtol=0, atol=1e-12 * max(1.0, g.bound))
    np.testing.assert_allclose(g.mean(t), t, rtol=0, atol=1e-12 * max(1.0, g.bound))
    var = ((y[None, :] - t[:, None]) ** 2 * P).sum(axis=1)
    np.testing.assert_allclose(g.variance(t), var, rtol=1e-9, atol=1e-12 * g.bound**2)


@pytest.mark.parametrize("eps", [0.5, 1.0, 4.0, 10.0])
def test_production_grid_is_close_to_the_continuous_pm(eps: float) -> None:
    """At 2^20 cells the grid PM's range and variance are those of Wang et al.'s PM to the
    rounding of the window to whole cells (relative 1 / (2W))."""
    g = piecewise_grid(eps, "pm")
    assert g.bound == pytest.approx(float(pm_bound(eps)), rel=1e-5)
    t = np.array([-1.0, -0.3, 0.0, 0.8])
    np.testing.assert_allclose(g.variance(t), pm_variance(t, eps), rtol=1.0 / g.window + 1e-6)
    assert piecewise_grid(eps, "pm_sub").bound == pytest.approx(pm_sub_bound(eps), rel=1e-5)


# -- the sampler -------------------------------------------------------------------------------------
@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("cells", [16, 64])
@pytest.mark.parametrize("eps", [0.5, 2.0, 6.0])
def test_sampler_matches_the_exact_law(family: str, cells: int, eps: float) -> None:
    """Chi-square of 50,000 draws per input (t in {-1, -0.37, 0, 0.2, 1}) against the exact pmf,
    cells with expected count >= 5, alpha = 1e-3 per input (5 tests per case)."""
    g = piecewise_grid(eps, family, cells)  # type: ignore[arg-type]
    rng = np.random.default_rng(cells + int(10 * eps) + (7 if family == "pm_sub" else 0))
    n = 50_000
    for t in (-1.0, -0.37, 0.0, 0.2, 1.0):
        y = g.sample(np.full(n, t), rng)
        cell = np.rint(y / g.step + (g.cells - 1) / 2.0).astype(np.int64)
        np.testing.assert_array_equal(g.value(cell), y)
        obs = np.bincount(cell, minlength=g.cells)
        exp = g.pmf(t) * n
        keep = exp >= 5
        assert stats.chisquare(obs[keep], exp[keep] * obs[keep].sum() / exp[keep].sum()).pvalue > 1e-3, t


@pytest.mark.parametrize("family", FAMILIES)
def test_released_values_are_the_public_grid_whatever_the_input(family: str) -> None:
    """No low-bit leak: on the production grid, the releases for two inputs (100,000 each, one
    differing from the other in its last bits) are all values of the one public grid
    (values()[i] for an integer cell i), so what is reachable does not depend on the input. The
    continuous PM (Wang et al.'s real-valued sampler) fails this: its outputs are l(t) + u (C - 1)."""
    g = piecewise_grid(2.0, family)  # type: ignore[arg-type]
    for t in (0.3, float(np.nextafter(0.3, 1.0))):
        y = g.sample(np.full(100_000, t), np.random.default_rng(1))
        cell = np.rint(y / g.step + (g.cells - 1) / 2.0).astype(np.int64)
        assert cell.min() >= 0 and cell.max() < g.cells
        np.testing.assert_array_equal(g.value(cell), y)


def test_transform_is_deterministic_in_its_uniforms_and_validates() -> None:
    g = piecewise_grid(1.0, "pm", 16)
    u = np.random.default_rng(0).random((50, UNIFORMS_PER_ENTRY))
    t = np.linspace(-1, 1, 50)
    np.testing.assert_array_equal(g.transform(t, u), g.transform(t, u.copy()))
    with pytest.raises(ValueError, match="u must have shape"):
        g.transform(t, u[:, :4])
    with pytest.raises(ValueError, match="t must lie in"):
        g.transform(np.array([1.5]), u[:1])
    with pytest.raises(ValueError, match="t must lie in"):
        g.transform(np.array([np.nan]), u[:1])
    with pytest.raises(ValueError, match="cells"):
        piecewise_grid(1.0, "pm", 15)
    with pytest.raises(ValueError, match="family"):
        piecewise_grid(1.0, "duchi", 16)  # type: ignore[arg-type]


def test_the_rare_cell_rejection_redraws_from_the_generator() -> None:
    """The cell is K mod n for the 106-bit K of two uniforms, rejected in its top 2^106 mod n
    values (probability < 2^-86): the largest K is rejected and redrawn from rng (refused
    without one); any other K is reduced mod n."""
    top = (2.0**53 - 1) / 2.0**53
    n = np.array([7, 5, 1 << 19])
    with pytest.raises(RuntimeError, match="no generator"):
        _uniform_below(n, np.full(3, top), np.full(3, top), None)
    j = _uniform_below(n, np.full(3, top), np.full(3, top), np.random.default_rng(0))
    assert np.all((j >= 0) & (j < n))
    k_hi, k_lo = 12345, 678
    j = _uniform_below(n, np.full(3, k_hi / 2.0**53), np.full(3, k_lo / 2.0**53), None)
    np.testing.assert_array_equal(j, [((k_hi << 53) + k_lo) % int(v) for v in n])


def test_cell_integers_are_uniform() -> None:
    """K mod n from two uniforms: chi-square over n = 7 and n = 3 cells, alpha = 1e-3 each."""
    u = np.random.default_rng(3).random((2, 70_000))
    for n in (7, 3):
        j = _uniform_below(np.full(70_000, n), u[0], u[1], None)
        assert stats.chisquare(np.bincount(j, minlength=n)).pvalue > 1e-3
