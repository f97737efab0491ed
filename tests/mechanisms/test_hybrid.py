"""HybridMechanism: the mixture's exact privacy loss (the grid PM plus Duchi's two atoms, enumerated
on small grids), exact moments, samples against the mixture (atoms, their signs, the grid part),
released values in the public set, unbiasedness and the stated variance, and the k-dimension
sampling shared with PM.

Statistical tests use fixed seeds (deterministic as written); the stated false-failure rates are
what each test would have over random seeds.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from privgraph.mechanisms.features.duchi import duchi_1d_pmf, duchi_1d_variance
from privgraph.mechanisms.features.feature_rr import worst_case_log_ratio
from privgraph.mechanisms.features.hybrid import (
    EPS_STAR,
    HM_UNIFORMS,
    HybridMechanism,
    hm_alpha,
    hm_atoms,
    hm_law,
    hm_sample,
    hm_transform,
    hm_variance,
)
from privgraph.mechanisms.features.piecewise import pm_grid

# float64 evaluation of the law (a few ulps per probability): see test_piecewise_grid.LOG_TOL
LOG_TOL = 1e-12
EPSILONS = [0.05, 0.5, EPS_STAR, 0.61, 1.0, 2.5, 8.0, 30.0]


def test_eps_star_and_alpha() -> None:
    """eps* is the paper's closed form (about 0.61); alpha = 1 - e^(-eps/2) above it, 0 at or below."""
    assert EPS_STAR == pytest.approx(0.6093525, abs=1e-7)
    assert round(EPS_STAR, 2) == 0.61
    assert float(hm_alpha(EPS_STAR)) == 0.0
    assert float(hm_alpha(0.3)) == 0.0
    assert float(hm_alpha(0.61)) == pytest.approx(1 - math.exp(-0.305))
    assert float(hm_alpha(4.0)) == pytest.approx(1 - math.exp(-2.0))
    np.testing.assert_allclose(hm_alpha([0.5, 2.0]), [0.0, 1 - math.exp(-1.0)])


# -- the privacy loss of one dimension ---------------------------------------------------------------
@pytest.mark.parametrize("eps", EPSILONS)
@pytest.mark.parametrize("cells", [16, 64])
def test_mixture_ratio_exact(eps: float, cells: int) -> None:
    """HM's full output law with a small grid: alpha times the grid PM's cells plus (1 - alpha)
    times Duchi's two atoms (merged where they coincide), for 401 inputs of [-1, 1] and the grid's
    switch points. Every possible output is possible from every input, and the largest ratio is
    <= e^eps (LOG_TOL) and attained (at t = 1, t' = -1)."""
    g = pm_grid(eps, cells)
    breaks = 2.0 * np.arange(g.cells - g.window + 1) / (g.cells - g.window) - 1.0
    t = np.unique(np.concatenate([np.linspace(-1.0, 1.0, 401), breaks]))
    values, P = hm_law(t, eps, cells)
    np.testing.assert_allclose(P.sum(axis=1), 1.0, rtol=1e-12)
    live = P.max(axis=0) > 0
    assert np.all(P[:, live] > 0)
    assert live.sum() == (2 if float(hm_alpha(eps)) == 0.0 else values.size)
    worst = worst_case_log_ratio(P)
    assert worst <= eps + LOG_TOL
    assert worst == pytest.approx(eps, rel=1e-9)


@pytest.mark.parametrize("eps", EPSILONS)
def test_exact_moments(eps: float) -> None:
    """From the enumerated law (16 cells): E = t and Var = alpha V_grid + (1 - alpha) V_Duchi."""
    t = np.array([-1.0, -0.4, 0.0, 0.9, 1.0])
    values, P = hm_law(t, eps, 16)
    mean = P @ values
    np.testing.assert_allclose(mean, t, atol=1e-12 * max(1.0, float(np.abs(values).max())))
    alpha = float(hm_alpha(eps))
    var = ((values[None, :] - t[:, None]) ** 2 * P).sum(axis=1)
    expected = (1 - alpha) * duchi_1d_variance(t, eps) + (alpha * pm_grid(eps, 16).variance(t) if alpha else 0.0)
    np.testing.assert_allclose(var, expected, rtol=1e-9)
    # the production variance is the same mixture on the 2^20-cell grid
    prod = (1 - alpha) * duchi_1d_variance(t, eps) + (alpha * pm_grid(eps).variance(t) if alpha else 0.0)
    np.testing.assert_allclose(hm_variance(t, eps), prod, rtol=1e-12)
    if alpha == 0.0:  # below eps* HM is Duchi's mechanism
        np.testing.assert_allclose(hm_variance([0.3], eps), duchi_1d_variance([0.3], eps))


# -- samples against the mixture ----------------------------------------------------------------------
def _grid_bins(eps: float, t: float, bins: int = 40) -> tuple[np.ndarray, np.ndarray]:
    g = pm_grid(eps)
    edges = np.linspace(0, g.cells, bins + 1).astype(np.int64)
    return edges, np.add.reduceat(g.pmf(t), edges[:-1])


def _check_against_the_mixture(y: np.ndarray, t: float, eps: float) -> None:
    """Three checks at alpha = 1e-3 each: the atom count (binomial vs 1 - alpha), the atoms' signs
    (binomial vs Duchi's Pr(+b)), the grid part (chi-square over 40 runs of cells vs the exact law)."""
    n = y.size
    b = 1.0 / math.tanh(eps / 2.0)
    at_atom = np.abs(y) == b
    alpha = float(hm_alpha(eps))
    if alpha == 0.0:
        assert np.all(at_atom)
    else:
        assert stats.binomtest(int(at_atom.sum()), n, 1 - alpha).pvalue > 1e-3
        g = pm_grid(eps)
        cell = np.rint(y[~at_atom] / g.step + (g.cells - 1) / 2.0).astype(np.int64)
        np.testing.assert_array_equal(g.value(cell), y[~at_atom])  # grid values, exactly
        edges, mass = _grid_bins(eps, t)
        obs = np.histogram(cell, bins=edges)[0]
        exp = mass * cell.size
        keep = exp >= 5
        assert stats.chisquare(obs[keep], exp[keep] * obs[keep].sum() / exp[keep].sum()).pvalue > 1e-3
    p_plus = float(duchi_1d_pmf(t, eps)[1][1])
    assert stats.binomtest(int((y[at_atom] > 0).sum()), int(at_atom.sum()), p_plus).pvalue > 1e-3


@pytest.mark.parametrize("eps", [0.4, 1.0, 4.0])
@pytest.mark.parametrize("t", [-1.0, 0.3, 1.0])
def test_sampler_matches_the_mixture(eps: float, t: float) -> None:
    """30,000 draws per case (9 cases), the three checks of _check_against_the_mixture."""
    rng = np.random.default_rng(int(eps * 100) + int(10 * (t + 1)))
    _check_against_the_mixture(hm_sample(np.full(30_000, t), eps, rng), t, eps)


def test_transform_picks_the_parts() -> None:
    b = 1 / math.tanh(1.0)
    u = np.zeros((3, HM_UNIFORMS))
    u[:, 0] = [0.0, 0.999, 0.999]  # below alpha: grid PM; above: Duchi
    u[:, 1] = [0.9, 0.9, 0.1]  # Duchi at t = 0: +b when u >= 1/2
    u[:, 2:] = 0.5
    y = hm_transform([0.0, 0.0, 0.0], 2.0, u)
    g = pm_grid(2.0)
    assert abs(y[0]) <= g.bound and abs(y[0]) != b
    cell = int(np.rint(y[0] / g.step + (g.cells - 1) / 2.0))
    assert g.value(cell) == y[0]  # a grid value
    assert y[1] == pytest.approx(b)
    assert y[2] == pytest.approx(-b)
    with pytest.raises(ValueError, match="u must have shape"):
        hm_transform([0.0], 2.0, np.zeros((1, 3)))


def test_unbiased_with_the_stated_variance_1d() -> None:
    """Mean within 5 standard errors and variance within 5 of its standard errors (normal
    approximation; false-failure rate about 6e-7 each)."""
    n = 200_000
    rng = np.random.default_rng(41)
    for eps, t in ((0.3, 0.5), (1.0, -0.8), (6.0, 0.1)):
        y = hm_sample(np.full(n, t), eps, rng)
        var = float(hm_variance(t, eps))
        assert abs(y.mean() - t) <= 5 * math.sqrt(var / n)
        c = y - t
        se_var = math.sqrt(((c**4).mean() - var**2) / n)
        assert abs(c.var() - var) <= 5 * se_var


# -- the mechanism ----------------------------------------------------------------------------------
@pytest.mark.parametrize("eps", [0.5, 2.0, 11.0, 16.0])
def test_mechanism_is_unbiased_with_the_stated_variance(eps: float) -> None:
    """d = 6 (k = 1, 1, 4, 6): columns' means within 5 standard errors (from variance()) of the
    clipped input, sample variances within 5 of theirs; 12 checks at 5 sigma: false-failure
    rate about 1e-5."""
    n, d = 100_000, 6
    m = HybridMechanism(epsilon=eps, lower=0.0, upper=4.0)
    x_row = np.array([0.0, -1.0, 0.7, 2.0, 3.99, 4.5])
    out = m.privatize_rows(np.tile(x_row, (n, 1)), np.random.default_rng(int(eps * 10))).astype(np.float64)
    target = x_row + m.bias(x_row)
    var = m.variance(x_row)
    assert np.all(np.abs(out.mean(0) - target) <= 5 * np.sqrt(var / n))
    c = out - target
    se_var = np.sqrt(((c**4).mean(0) - var**2) / n)
    assert np.all(np.abs(c.var(0) - var) <= 5 * se_var)


def test_one_feature_follows_hm_and_releases_only_public_values() -> None:
    """d = 1 on bounds (-1, 1): the release is HM at eps (the three checks of
    _check_against_the_mixture, float32 outputs mapped back to their public values), and every
    released float32 is the mechanism's map of a grid value or of +-b, for inputs that differ in
    their last bits: the reachable set does not depend on the input."""
    eps, n = 2.0, 20_000
    m = HybridMechanism(epsilon=eps, lower=-1.0, upper=1.0)
    g = pm_grid(eps)
    b = 1.0 / math.tanh(eps / 2.0)
    values = np.concatenate([g.values(), [-b, b]])
    public32 = ((values + 1.0) * 1.0 - 1.0).astype(np.float32)  # lower + (y + 1) / 2 * span
    order = np.argsort(public32, kind="stable")
    for t in (0.35, float(np.nextafter(0.35, 1.0))):
        out = m.privatize_rows(np.full((n, 1), t), np.random.default_rng(13))[:, 0]
        pos = np.searchsorted(public32[order], out)
        assert np.all(public32[order][np.minimum(pos, values.size - 1)] == out)
    y = values[order][pos]  # the public value of each release (float32 collisions are grid neighbours)
    y[np.isclose(y, b, rtol=1e-6, atol=0)] = b
    y[np.isclose(y, -b, rtol=1e-6, atol=0)] = -b
    _check_against_the_mixture(y, float(np.nextafter(0.35, 1.0)), eps)


def test_k_sampling_matches_pm() -> None:
    m = HybridMechanism(epsilon=12.0, lower=-1.0, upper=1.0)
    assert m.sampled_dimensions(10) == 4
    assert m.dimension_epsilon(10) * 4 <= 12.0
    out = m.privatize_rows(np.full((2000, 10), -0.5), np.random.default_rng(2))
    assert np.all((out != 0).sum(axis=1) == 4)


def test_guarantee_and_module_validation() -> None:
    g = HybridMechanism(epsilon=0.3).guarantee
    assert g.epsilon == 0.3
    assert any("epsilon / k" in a for a in g.assumptions)
    assert any("fixed public set" in a for a in g.assumptions)
    assert not any("continuous" in a for a in g.assumptions)
    with pytest.raises(ValueError, match="t must lie in"):
        hm_sample([2.0], 1.0, np.random.default_rng(0))
    with pytest.raises(ValueError, match="epsilon"):
        hm_sample([0.5], float("inf"), np.random.default_rng(0))
    with pytest.raises(TypeError, match="epsilon"):
        hm_alpha("1")
    with pytest.raises(TypeError, match="Generator"):
        hm_sample([0.5], 1.0, np.random.RandomState(0))  # type: ignore[arg-type]
    _, masses = hm_atoms(0.2, 1.0)
    assert masses.sum() == pytest.approx(1 - float(hm_alpha(1.0)))
