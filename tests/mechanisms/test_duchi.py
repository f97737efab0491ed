"""DuchiMechanism: the exact privacy loss (1-D and d-D, by enumeration), exact unbiasedness, the
sampler against the exact distribution, and the even-d tie rule.

Statistical tests use fixed seeds (deterministic as written); the stated false-failure rates are
what each test would have over random seeds.
"""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats

from privgraph.mechanisms.features.duchi import (
    DuchiMechanism,
    duchi_1d_pmf,
    duchi_1d_transform,
    duchi_1d_sample,
    duchi_1d_variance,
    duchi_bound,
    duchi_probability,
    duchi_sample,
    duchi_transform,
    duchi_variance,
)
from privgraph.mechanisms.features.feature_rr import worst_case_log_ratio

EPSILONS = [1e-3, 0.1, 0.5, 1.0, 2.0, 5.0, 20.0]


def _signs(d: int) -> np.ndarray:
    return np.array(list(itertools.product([-1.0, 1.0], repeat=d)))  # [2^d, d]


# -- one dimension -----------------------------------------------------------------------------------
@pytest.mark.parametrize("eps", EPSILONS)
def test_1d_exact_ratio(eps: float) -> None:
    """max over outputs and inputs t, t' in a grid of [-1, 1] of Pr(y|t)/Pr(y|t') is e^eps,
    attained at t = 1, t' = -1."""
    t = np.linspace(-1.0, 1.0, 201)
    values, probs = duchi_1d_pmf(t, eps)
    b = 1.0 / math.tanh(eps / 2)
    np.testing.assert_allclose(values, np.tile([-b, b], (t.size, 1)))
    np.testing.assert_allclose(probs.sum(axis=1), 1.0, rtol=1e-15)
    w = worst_case_log_ratio(probs)
    assert w <= eps * (1 + 1e-9) + 1e-15
    assert w == pytest.approx(eps, rel=1e-9)
    _, p_ext = duchi_1d_pmf(np.array([1.0, -1.0]), eps)
    assert math.log(p_ext[0, 1] / p_ext[1, 1]) == pytest.approx(eps, rel=1e-9)


@pytest.mark.parametrize("eps", EPSILONS)
def test_1d_exactly_unbiased(eps: float) -> None:
    t = np.linspace(-1.0, 1.0, 11)
    values, probs = duchi_1d_pmf(t, eps)
    np.testing.assert_allclose((values * probs).sum(axis=1), t, atol=1e-12 * max(1.0, 1 / eps))
    second = (values**2 * probs).sum(axis=1)
    np.testing.assert_allclose(second - t**2, duchi_1d_variance(t, eps), rtol=1e-12)


def test_1d_sampler_matches_the_pmf() -> None:
    """Binomial test of Pr(+b) per (t, eps), each at alpha = 1e-3; per-entry epsilons."""
    rng = np.random.default_rng(17)
    n = 20_000
    for eps in (0.2, 1.0, 4.0):
        for t in (-1.0, -0.3, 0.0, 0.8, 1.0):
            y = duchi_1d_sample(np.full(n, t), eps, rng)
            b = 1.0 / math.tanh(eps / 2)
            assert np.all(np.isin(y, [-b, b]))
            p_plus = duchi_1d_pmf(t, eps)[1][1]
            assert stats.binomtest(int((y > 0).sum()), n, p_plus).pvalue > 1e-3, (eps, t)
    # per-entry budgets broadcast with t
    eps_col = np.array([[0.5], [3.0]])
    y = duchi_1d_sample(np.zeros((2, n)), eps_col, rng)
    assert y.shape == (2, n)
    np.testing.assert_allclose(np.abs(y[0]), 1 / math.tanh(0.25))
    np.testing.assert_allclose(np.abs(y[1]), 1 / math.tanh(1.5))


@pytest.mark.parametrize("eps", [0.5, 5.0, 20.0, 30.0, 36.0])
def test_realized_probabilities_on_the_uniform_grid(eps: float) -> None:
    """numpy's uniforms are k 2^-53; the less likely output is taken when u < p_small, so its
    realized probability is ceil(p_small 2^53) / 2^53 >= p_small. The realized worst-case ratio
    (exact rationals) stays within e^eps even where p_small ~ e^-eps is a few grid steps."""
    grid = 2**53
    realized = []
    for t in (-1.0, 1.0):
        _, (p_minus, p_plus) = duchi_1d_pmf(t, eps)
        small = min(p_minus, p_plus)
        r_small = Fraction(math.ceil(Fraction(small) * grid), grid)
        assert r_small >= Fraction(small)
        r = (r_small, 1 - r_small) if p_minus < p_plus else (1 - r_small, r_small)
        realized.append(r)
    ratio = max(realized[0][i] / realized[1][i] for i in (0, 1))
    ratio = max(ratio, *(realized[1][i] / realized[0][i] for i in (0, 1)))
    assert math.log(ratio) <= eps * (1 + 1e-12)
    # the direction in the code: u = 0 (the smallest uniform) takes the less likely output
    b = 1 / math.tanh(eps / 2)
    assert duchi_1d_transform(1.0, eps, 0.0) == pytest.approx(-b)
    assert duchi_1d_transform(-1.0, eps, 0.0) == pytest.approx(b)
    # d dimensions: the side T- (probability 1 / (e^eps + 1)) is taken when u_side < 1 / (e^eps + 1)
    t = np.ones((1, 3))
    u = np.array([[0.0, 0.0, 0.0, 0.9, 0.9, 0.9, 0.0]])  # v = (1, 1, 1), s = (-1, -1, -1), T-
    np.testing.assert_allclose(duchi_transform(t, eps, u), -duchi_bound(eps, 3) * np.ones((1, 3)))
    u[0, -1] = 0.999
    np.testing.assert_allclose(duchi_transform(t, eps, u), duchi_bound(eps, 3) * np.ones((1, 3)))


@pytest.mark.parametrize("eps", [2.0**-20, 0.01, 0.5, 1.0, math.log(9), 5.0, 20.0, 36.0, 37.5, 45.0, 50.0])
def test_side_probability_is_certified_and_drawn_exactly(eps: float) -> None:
    """The side T- probability q: (1 - q) / q <= e^eps EXACTLY (rationals against a Taylor lower
    bound) and within 1e-12 of it; with u_lo the side is bernoulli_exact's 106-bit draw: at the
    tie u = floor(q 2^53) 2^-53 the low uniform decides (u_lo = 0 takes T-, u_lo near 1 takes T+
    when q's low bits are not all zero). The former rule (u < q on the 2^-53 grid) cannot split
    the tie."""
    from fractions import Fraction

    from privgraph.mechanisms.features.duchi import duchi_side_probability
    from privgraph.mechanisms.features.piecewise_grid import exp_lower_bound

    q = duchi_side_probability(eps)
    fq = Fraction(q)
    assert (1 - fq) / fq <= exp_lower_bound(Fraction(eps))
    assert float((1 - fq) / fq) >= math.exp(eps) * (1 - 1e-12)
    f = math.floor(q * 2.0**53) * 2.0**-53
    phi = (q - f) * 2.0**53
    t = np.ones((1, 3))
    u = np.array([[0.0, 0.0, 0.0, 0.9, 0.9, 0.9, f]])  # v = (1, 1, 1), s = (-1, -1, -1)
    minus, plus = -duchi_bound(eps, 3) * np.ones((1, 3)), duchi_bound(eps, 3) * np.ones((1, 3))
    np.testing.assert_allclose(duchi_transform(t, eps, u, np.array([0.0])), minus if phi > 0 else plus)
    if phi < 1 - 2.0**-53:
        np.testing.assert_allclose(duchi_transform(t, eps, u, np.array([1 - 2.0**-53])), plus)


# -- d dimensions: exact ------------------------------------------------------------------------------
@pytest.mark.parametrize("d", [1, 2, 3, 4, 5, 6, 7, 8])
@pytest.mark.parametrize("eps", [0.01, 0.5, 1.0, 3.0, 10.0])
def test_exact_worst_case_ratio(d: int, eps: float) -> None:
    """Exact Pr(B s | t) for every output s and every vertex input t in {-1, 1}^d (the extremes:
    Pr(B s | t) is multilinear in t, so its max and min over the cube are at vertices).
    The worst-case log-ratio is exactly eps, for odd and even d."""
    S = _signs(d)
    P = duchi_probability(S[None, :, :], S[:, None, :], eps)  # [inputs, outputs]
    np.testing.assert_allclose(P.sum(axis=1), 1.0, rtol=1e-12)
    w = worst_case_log_ratio(P)
    assert w <= eps * (1 + 1e-9) + 1e-15
    assert w == pytest.approx(eps, rel=1e-9)


@pytest.mark.parametrize("d", [1, 2, 3, 4, 5, 6, 7])
@pytest.mark.parametrize("eps", [0.1, 1.0, 4.0])
def test_exactly_unbiased(d: int, eps: float) -> None:
    """sum_s Pr(B s | t) B s = t for random interior and vertex inputs; variance B^2 - t^2."""
    rng = np.random.default_rng(d)
    S = _signs(d)
    B = duchi_bound(eps, d)
    T = np.vstack([rng.uniform(-1, 1, size=(5, d)), np.ones((1, d)), -np.ones((1, d))])
    P = duchi_probability(S[None, :, :], T[:, None, :], eps)  # [inputs, outputs]
    mean = P @ (B * S)
    np.testing.assert_allclose(mean, T, atol=1e-10 * B)
    second = P @ (B * S) ** 2
    np.testing.assert_allclose(second - T**2, duchi_variance(T, eps), rtol=1e-10)


@pytest.mark.parametrize("d", [1, 3, 5, 7, 9, 33])
@pytest.mark.parametrize("eps", [0.1, 1.0, 5.0])
def test_bound_matches_the_paper_for_odd_d(d: int, eps: float) -> None:
    """B = (2^d + C_d (e^eps - 1)) / (C(d-1, (d-1)/2) (e^eps - 1)), C_d = 2^(d-1) (Algorithm 3)."""
    em1 = math.expm1(eps)
    paper = (2**d + 2 ** (d - 1) * em1) / (math.comb(d - 1, (d - 1) // 2) * em1)
    assert duchi_bound(eps, d) == pytest.approx(paper, rel=1e-12)


def test_d1_is_the_one_dimensional_mechanism() -> None:
    for eps in (0.3, 2.0):
        assert duchi_bound(eps, 1) == pytest.approx(1 / math.tanh(eps / 2), rel=1e-15)
        for t in (-1.0, 0.25, 1.0):
            p_plus = duchi_probability([[1.0]], [[t]], eps)[0]
            assert p_plus == pytest.approx(duchi_1d_pmf(t, eps)[1][1], rel=1e-13)


@pytest.mark.parametrize("d", [2, 4, 6, 8])
def test_the_papers_even_d_tie_rule_would_leak(d: int) -> None:
    """Ties t*.v = 0 in T- with |T+| = C_d = 2^(d-1) - C(d, d/2)/2 spend eps + ln((2^d - C_d)/C_d)
    (exact over vertex inputs); the fair-coin tie rule used here spends exactly eps."""
    eps = 1.0
    S = _signs(d)
    p = math.exp(eps) / (math.exp(eps) + 1)
    C_d = 2 ** (d - 1) - math.comb(d, d // 2) / 2
    dot = S @ S.T  # vertex input v = t (deterministic) against each output sign vector
    P_paper = np.where(dot > 0, p / C_d, (1 - p) / (2**d - C_d))
    leak = worst_case_log_ratio(P_paper)
    assert leak == pytest.approx(eps + math.log((2**d - C_d) / C_d), rel=1e-12)
    assert leak > eps + 0.1
    P_here = duchi_probability(S[None, :, :], S[:, None, :], eps)
    assert worst_case_log_ratio(P_here) == pytest.approx(eps, rel=1e-12)


def test_large_d_bound_is_finite() -> None:
    B = duchi_bound(1.0, 4096)
    assert math.isfinite(B)
    # B ~ coth(eps/2) sqrt(pi d / 2) for large d
    assert B == pytest.approx(math.sqrt(math.pi * 4096 / 2) / math.tanh(0.5), rel=1e-3)
    with pytest.raises(ValueError, match="epsilon"):
        duchi_bound(1e-320, 3)


# -- d dimensions: the sampler --------------------------------------------------------------------
@pytest.mark.parametrize("d", [3, 4])
@pytest.mark.parametrize("eps", [0.5, 2.0])
def test_sampler_matches_the_exact_distribution(d: int, eps: float) -> None:
    """Chi-square of the 2^d output sign patterns against duchi_probability, alpha = 1e-3 each."""
    n = 40_000
    rng = np.random.default_rng(100 * d + int(10 * eps))
    t = np.array([0.9, -0.4, 0.1, -1.0][:d])
    y = duchi_sample(np.tile(t, (n, 1)), eps, rng)
    B = duchi_bound(eps, d)
    assert np.all(np.abs(y) == B)
    code = ((y > 0).astype(int) * (1 << np.arange(d - 1, -1, -1))).sum(axis=1)
    counts = np.bincount(code, minlength=2**d)
    S = _signs(d)  # row i has +1 exactly where bit (d - 1 - j) of i is set: same order as code
    expected = n * duchi_probability(S, t, eps)
    res = stats.chisquare(counts, expected * counts.sum() / expected.sum())
    assert res.pvalue > 1e-3, (counts, expected)


def test_mechanism_is_unbiased_in_128_dimensions() -> None:
    """Every column's mean within 5 standard errors (variance B^2 - t^2) of the clipped input.

    128 columns at two-sided 5 sigma: family-wise false-failure rate about 1e-4."""
    n, d = 20_000, 128
    rng = np.random.default_rng(8)
    x_row = rng.uniform(-1.0, 11.0, size=d)  # bounds (0, 10): some clipped
    m = DuchiMechanism(epsilon=2.0, lower=0.0, upper=10.0)
    out = m.privatize_rows(np.tile(x_row, (n, 1)), np.random.default_rng(9)).astype(np.float64)
    target = x_row + m.bias(x_row)
    se = np.sqrt(m.variance(x_row) / n)
    assert np.all(np.abs(out.mean(0) - target) <= 5 * se)
    # two output values per column, lower + (1 -+ B) / 2 * span
    B = duchi_bound(2.0, d)
    vals = np.unique(out[:, 0])
    np.testing.assert_allclose(np.sort(vals), [10 * (1 - B) / 2, 10 * (1 + B) / 2], rtol=1e-6)


def test_mechanism_with_one_feature_is_1d_duchi() -> None:
    """d = 1 on bounds (-1, 1): Pr(+b) per input, binomial test at alpha = 1e-3 each."""
    n, eps = 20_000, 1.3
    m = DuchiMechanism(epsilon=eps, lower=-1.0, upper=1.0)
    rng = np.random.default_rng(77)
    for t in (-1.0, 0.4, 1.0):
        y = m.privatize_rows(np.full((n, 1), t), rng)[:, 0]
        b = np.float32(1 / math.tanh(eps / 2))
        assert np.all(np.isclose(np.abs(y), b, rtol=1e-6))
        assert stats.binomtest(int((y > 0).sum()), n, duchi_1d_pmf(t, eps)[1][1]).pvalue > 1e-3


def test_guarantee_and_module_validation() -> None:
    g = DuchiMechanism(epsilon=0.8).guarantee
    assert g.epsilon == 0.8
    assert any("no per-feature split" in a for a in g.assumptions)
    with pytest.raises(ValueError, match="t must lie in"):
        duchi_1d_sample([1.5], 1.0, np.random.default_rng(0))
    with pytest.raises(ValueError, match="epsilon"):
        duchi_1d_sample([0.5], [0.0], np.random.default_rng(0))
    with pytest.raises(TypeError, match="epsilon"):
        duchi_1d_sample([0.5], True, np.random.default_rng(0))
    with pytest.raises(ValueError, match="epsilon"):
        duchi_1d_pmf([0.5], float("nan"))
    with pytest.raises(TypeError, match="Generator"):
        duchi_sample(np.zeros((2, 3)), 1.0, 0)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="signs"):
        duchi_probability([[0.5, 1.0]], [[0.0, 0.0]], 1.0)
