"""The exact binomial (privgraph/mechanisms/exact_binomial.py): its law against the binomial pmf,
its chain's ratios against rational arithmetic, its validation."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats

from privgraph.mechanisms.exact_binomial import binomial_exact


def _binomial_cases() -> list[tuple[int, float]]:
    return [
        (4000, 5e-5),  # n p = 0.2: the chain of exact decisions
        (2**53, 5e-17),  # p < 2^-53, n p = 0.45: the chain
        (30, 0.1),  # n p = 3: numpy's inversion on the grid part of p, plus the residual
        (10**6, 2.5e-5),  # n p = 25
        (10**5, 0.01),  # n p = 1000: numpy's BTPE
        (40, 0.85),  # p > 1/2: n - Binomial(n, 1 - p)
        (7, 0.5),
        (12, 1e-3),  # n p = 0.012: mostly 0
    ]


def _chi_square_pvalue(sample: np.ndarray, n: int, p: float) -> float:
    """Chi-square against scipy.stats.binom: the bins with >= 5 expected, plus both tails."""
    mean, sd = n * p, math.sqrt(n * p * (1 - p))
    lo, hi = max(0, int(mean - 12 * sd) - 5), min(n, int(mean + 12 * sd) + 5)
    ks = np.arange(lo, hi + 1)
    expected = stats.binom.pmf(ks, n, p) * sample.size
    inner = ks[expected >= 5]
    a, b = int(inner.min()), int(inner.max())
    obs = [np.sum(sample < a)] + [np.sum(sample == k) for k in range(a, b + 1)] + [np.sum(sample > b)]
    exp = [stats.binom.cdf(a - 1, n, p)] + list(stats.binom.pmf(np.arange(a, b + 1), n, p)) + [stats.binom.sf(b, n, p)]
    obs_a, exp_a = np.array(obs, float), np.array(exp) * sample.size
    keep = exp_a > 0
    assert obs_a[~keep].sum() == 0
    return float(stats.chisquare(obs_a[keep], exp_a[keep] * obs_a[keep].sum() / exp_a[keep].sum()).pvalue)


@pytest.mark.parametrize("n, p", _binomial_cases())
def test_binomial_exact_matches_the_binomial_pmf(n: int, p: float) -> None:
    """200,000 draws, chi-square against the exact pmf (scipy.stats.binom) over the bins expecting
    >= 5 and the two tails, fixed seed; alpha = 1e-3 per case (false-failure rate over random
    seeds 1e-3 per case, 8e-3 for the 8 cases). Mean and variance within 5 standard errors."""
    rng = np.random.default_rng(2024)
    k = binomial_exact(np.full(200_000, n, dtype=np.int64), p, rng)
    assert k.dtype == np.int64 and k.min() >= 0 and k.max() <= n
    assert _chi_square_pvalue(k, n, p) > 1e-3
    var = n * p * (1 - p)
    assert abs(k.mean() - n * p) < 5 * math.sqrt(var / k.size)


def test_binomial_exact_vectorised_over_mixed_regimes() -> None:
    """One call with (n, p) interleaved from every regime (chain, numpy inversion, BTPE, p > 1/2):
    each case's 50,000 draws fit its pmf (chi-square, alpha = 1e-3 each, 8e-3 in total); the
    broadcast shape is kept."""
    cases = _binomial_cases()
    reps = 50_000
    n = np.tile(np.array([c[0] for c in cases], dtype=np.int64), reps).reshape(reps, len(cases))
    p = np.array([c[1] for c in cases])  # broadcast along the rows
    k = binomial_exact(n, p, np.random.default_rng(7))
    assert k.shape == (reps, len(cases))
    for j, (nj, pj) in enumerate(cases):
        assert _chi_square_pvalue(k[:, j], nj, pj) > 1e-3, (nj, pj)


def test_binomial_exact_chain_conditional_law() -> None:
    """K given K >= 1 at n p = 0.04 (the chain): 400,000 draws of which ~16,000 positive;
    Pr(K = 2 | K >= 1) ~ 0.02 (320 expected) and Pr(K = 3 | K >= 1) ~ 2.6e-4 (4 expected): the
    positive draws fit the conditional pmf (chi-square, alpha = 1e-3)."""
    n, p = 200, 2e-4
    k = binomial_exact(np.full(400_000, n, dtype=np.int64), p, np.random.default_rng(11))
    pos = k[k >= 1]
    q0 = 1 - stats.binom.pmf(0, n, p)
    cond = stats.binom.pmf([1, 2], n, p) / q0
    obs = [np.sum(pos == 1), np.sum(pos == 2), np.sum(pos >= 3)]
    exp = np.array([cond[0], cond[1], 1 - cond.sum()]) * pos.size
    assert stats.chisquare(obs, exp).pvalue > 1e-3
    assert np.sum(pos >= 3) >= 1  # the chain does reach K = 3 (expected 4.2; Pr(none) = 0.015)


@pytest.mark.parametrize(
    "n, p",
    [(1, 1e-3), (2, 0.01), (5, 0.05), (30, 1e-3), (200, 1e-3), (200, 5e-3), (4, 0.25), (2, 0.5),
     (10**9, 2.0**-60), (10**9, 1e-9), (10**9, 3e-17), (2**53, 1e-16), (7, 3e-17)],
)
def test_chain_ratios_against_rational_arithmetic(n: int, p: float) -> None:
    """The chain's Pr(K > k) / Pr(K = k) (a series of positive terms in float64) against the same
    series in exact rationals, for the float p, wherever the chain runs (n p <= 1): within
    relative 2^-48 (the docstring promises 2^-46 for the decision probabilities built from it)."""
    from privgraph.mechanisms.exact_binomial import _tail_over_pmf

    assert n * p <= 1

    pf = Fraction(p)
    odds = pf / (1 - pf)
    for k in range(1, min(n, 6) + 1):
        got = float(_tail_over_pmf(np.array([k]), np.array([float(n)]), np.array([p / (1 - p)]))[0])
        want, term, j = Fraction(0), Fraction(1), k
        while j < n:
            term *= Fraction(n - j, j + 1) * odds
            want += term
            if term < want * Fraction(1, 2**100):
                break
            j += 1
        if want == 0:
            assert got == 0.0
        else:
            assert abs(Fraction(got) - want) <= want * Fraction(1, 2**48), (k, got, float(want))


def test_binomial_exact_edges_and_validation() -> None:
    rng = np.random.default_rng(0)
    assert binomial_exact(5, 0.0, rng) == 0 and binomial_exact(0, 0.7, rng) == 0
    assert binomial_exact(9, 1.0, rng) == 9
    out = binomial_exact(np.array([0, 3, 10**6]), np.array([[0.2], [1.0]]), rng)
    assert out.shape == (2, 3) and out.dtype == np.int64 and out[1].tolist() == [0, 3, 10**6]
    assert binomial_exact(np.zeros(0, np.int64), 0.5, rng).shape == (0,)
    assert np.ndim(binomial_exact(3, 0.5, rng)) == 0
    with pytest.raises(TypeError, match="Generator"):
        binomial_exact(3, 0.5, np.random.RandomState(0))
    with pytest.raises(TypeError, match="integers"):
        binomial_exact(3.0, 0.5, rng)
    for bad_p in (-0.1, 1.5, float("nan")):
        with pytest.raises(ValueError, match="p must be"):
            binomial_exact(3, bad_p, rng)
    with pytest.raises(ValueError, match="n must be"):
        binomial_exact(-1, 0.5, rng)
    with pytest.raises(ValueError, match="n must be"):
        binomial_exact(2**53 + 1, 0.5, rng)
    # same seed, same draws; the global RNG untouched
    state = np.random.get_state()
    a = binomial_exact(np.arange(1, 2000), 3e-4, np.random.default_rng(5))
    b = binomial_exact(np.arange(1, 2000), 3e-4, np.random.default_rng(5))
    assert np.array_equal(a, b)
    after = np.random.get_state()
    assert np.array_equal(after[1], state[1]) and after[2:] == state[2:]
