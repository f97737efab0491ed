"""HybridMechanism: the mixture's privacy loss (continuous part on a fine grid, atoms exactly),
samples against the mixture (atoms, their signs, the continuous part), unbiasedness and the
stated variance, and the k-dimension sampling shared with PM.

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
    HybridMechanism,
    hm_alpha,
    hm_atoms,
    hm_cdf,
    hm_continuous_density,
    hm_sample,
    hm_transform,
    hm_variance,
)
from privgraph.mechanisms.features.piecewise import pm_bound, pm_cdf, pm_variance

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
def test_mixture_ratio(eps: float) -> None:
    """HM's law is alpha * (PM density) + (1 - alpha) * (Duchi's two atoms). Against the
    reference measure Lebesgue + counting on the atoms, the ratio at an atom is the atoms'
    ratio and elsewhere the continuous part's: both sup <= e^eps over grids of y (4001 points of
    [-C, C]) and t, t' (201 points of [-1, 1]), and e^eps is attained (at t = 1, t' = -1)."""
    t = np.linspace(-1.0, 1.0, 201)
    alpha = float(hm_alpha(eps))
    worst = -math.inf
    if alpha > 0:
        C = float(pm_bound(eps))
        y = np.linspace(-C, C, 4001)
        f = hm_continuous_density(y[:, None], t[None, :], eps)
        assert np.all(f > 0)
        log_f = np.log(f)
        worst_cont = float(np.max(log_f.max(axis=1) - log_f.min(axis=1)))
        assert worst_cont <= eps * (1 + 1e-12) + 1e-15
        assert worst_cont == pytest.approx(eps, rel=1e-9)
        worst = max(worst, worst_cont)
    values, masses = hm_atoms(t, eps)
    np.testing.assert_allclose(masses.sum(axis=1), 1 - alpha, rtol=1e-12)
    worst_atoms = worst_case_log_ratio(masses)
    assert worst_atoms <= eps * (1 + 1e-9) + 1e-15
    assert worst_atoms == pytest.approx(eps, rel=1e-9)
    assert max(worst, worst_atoms) == pytest.approx(eps, rel=1e-9)


@pytest.mark.parametrize("eps", EPSILONS)
def test_exact_moments(eps: float) -> None:
    """E = t and Var = hm_variance, from the two parts' exact moments."""
    alpha = float(hm_alpha(eps))
    for t in (-1.0, -0.4, 0.0, 0.9, 1.0):
        values, masses = hm_atoms(t, eps)
        atom_mean = float((values * masses).sum())
        # PM is exactly unbiased (test_piecewise.py::test_exact_moments_from_the_density)
        mean = alpha * t + atom_mean
        assert mean == pytest.approx(t, abs=1e-9 * max(1.0, 1 / eps))
        second = alpha * (float(pm_variance(t, eps)) + t * t) + float((values**2 * masses).sum())
        assert second - t * t == pytest.approx(float(hm_variance(t, eps)), rel=1e-9)
    # below eps* HM is Duchi's mechanism
    if alpha == 0.0:
        np.testing.assert_allclose(hm_variance([0.3], eps), duchi_1d_variance([0.3], eps))


def test_cdf_is_a_distribution() -> None:
    for eps in (0.3, 1.0, 5.0):
        b = float(hm_atoms(0.2, eps)[0][1])
        C = float(pm_bound(eps))
        lim = max(b, C) + 1
        y = np.linspace(-lim, lim, 2001)
        F = hm_cdf(y, 0.2, eps)
        assert F[0] == 0.0 and F[-1] == pytest.approx(1.0, abs=1e-12)
        assert np.all(np.diff(F) >= -1e-15)
        # the jump at +b is (1 - alpha) Pr(+b)
        jump = float(hm_cdf(b, 0.2, eps) - hm_cdf(np.nextafter(b, 0), 0.2, eps))
        assert jump == pytest.approx(float(hm_atoms(0.2, eps)[1][1]), rel=1e-6)


# -- samples against the mixture ----------------------------------------------------------------------
@pytest.mark.parametrize("eps", [0.4, 1.0, 4.0])
@pytest.mark.parametrize("t", [-1.0, 0.3, 1.0])
def test_sampler_matches_the_mixture(eps: float, t: float) -> None:
    """Three checks at alpha = 1e-3 each (9 cases): the atom count (binomial vs 1 - alpha), the
    atoms' signs (binomial vs Duchi's Pr(+b)), and the continuous part (KS vs PM's CDF)."""
    n = 30_000
    rng = np.random.default_rng(int(eps * 100) + int(10 * (t + 1)))
    y = hm_sample(np.full(n, t), eps, rng)
    b = float(hm_atoms(t, eps)[0][1])
    at_atom = (y == b) | (y == -b)
    alpha = float(hm_alpha(eps))
    if alpha == 0.0:
        assert np.all(at_atom)
    else:
        assert stats.binomtest(int(at_atom.sum()), n, 1 - alpha).pvalue > 1e-3
        cont = y[~at_atom]
        assert stats.kstest(cont, lambda v: pm_cdf(v, t, eps)).pvalue > 1e-3
    p_plus = float(duchi_1d_pmf(t, eps)[1][1])
    assert stats.binomtest(int((y[at_atom] > 0).sum()), int(at_atom.sum()), p_plus).pvalue > 1e-3


def test_transform_picks_the_parts() -> None:
    b = 1 / math.tanh(1.0)
    # u_choice below alpha: PM (inside [-C, C]); above: Duchi (+-b)
    y = hm_transform([0.0, 0.0, 0.0], 2.0, [0.0, 0.999, 0.999], [0.9, 0.9, 0.1], [0.5, 0.5, 0.5])
    assert abs(y[0]) <= float(pm_bound(2.0)) and abs(y[0]) != b
    assert y[1] == pytest.approx(b)  # u_side = 0.9 >= Pr(-b | 0) = 1/2
    assert y[2] == pytest.approx(-b)


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


def _ks_pvalue_with_atoms(y: np.ndarray, cdf) -> float:
    """The KS test for a law with atoms: D = sup |F_n - F| over right AND left limits at every
    sample point (scipy's kstest assumes a continuous F and overstates D at ties). Against the
    continuous-case null distribution the test is conservative: false-failure rate <= alpha."""
    x = np.sort(y)
    n = x.size
    F_right = cdf(x)
    F_left = cdf(np.nextafter(x, -np.inf))
    Fn_right = np.searchsorted(x, x, side="right") / n
    Fn_left = np.searchsorted(x, x, side="left") / n
    D = max(np.max(np.abs(Fn_right - F_right)), np.max(np.abs(Fn_left - F_left)))
    return float(stats.kstwo.sf(D, n))


def test_one_feature_follows_hm() -> None:
    """d = 1 on bounds (-1, 1): KS against HM's CDF at alpha = 1e-3 (with atoms the test is
    conservative: false-failure rate at most alpha). Float32 outputs at the atoms are snapped
    back to +-b before the test."""
    eps, t, n = 2.0, 0.35, 20_000
    m = HybridMechanism(epsilon=eps, lower=-1.0, upper=1.0)
    y = m.privatize_rows(np.full((n, 1), t), np.random.default_rng(13))[:, 0].astype(np.float64)
    b = float(hm_atoms(t, eps)[0][1])
    for s in (-1.0, 1.0):
        y[np.isclose(y, s * b, rtol=1e-6, atol=0)] = s * b
    at_atom = np.abs(y) == b
    assert 0 < at_atom.sum() < n
    assert _ks_pvalue_with_atoms(y, lambda v: hm_cdf(v, t, eps)) > 1e-3
    # the same test rejects a wrong input (t = 0.2 instead of 0.35)
    assert _ks_pvalue_with_atoms(y, lambda v: hm_cdf(v, 0.2, eps)) < 1e-3


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
    with pytest.raises(ValueError, match="t must lie in"):
        hm_sample([2.0], 1.0, np.random.default_rng(0))
    with pytest.raises(ValueError, match="epsilon"):
        hm_sample([0.5], float("inf"), np.random.default_rng(0))
    with pytest.raises(TypeError, match="epsilon"):
        hm_alpha("1")
    with pytest.raises(TypeError, match="Generator"):
        hm_sample([0.5], 1.0, np.random.RandomState(0))  # type: ignore[arg-type]
