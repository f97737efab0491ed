"""The discrete Gaussian sampler (gaussian_noise.py): its law against the pmf (chi-square, with a
negative control that must reject a wrong sigma), the acceptance kernel's accuracy against exact
rational / 60-digit decimal arithmetic, the exact paths for huge exponents, determinism and
validation, the grid release, and the Renyi divergence bound on which its privacy rests.

Statistical tests use fixed seeds (deterministic as written); the stated false-failure rates are
what each test would have over random seeds.
"""

from __future__ import annotations

import decimal
import math
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats
from scipy.special import logsumexp

from privgraph.mechanisms import gaussian_noise as gn
from privgraph.mechanisms.gaussian_noise import (
    ACCEPTANCE_ERROR,
    MAX_SIGMA,
    MIN_SIGMA,
    discrete_gaussian,
    discrete_gaussian_pmf,
    discrete_gaussian_variance,
    gaussian_on_grid,
    grid_sensitivity,
)
from privgraph.mechanisms.noise import WordStream, dyadic_parameter
from privgraph.seeding import noise_generator

SIGMAS = [0.5, 1.3, 4.0, 25.0]


def _chi_square(z: np.ndarray, sigma: float) -> float:
    """Chi-square p-value of the draws ``z`` against N_Z(0, sigma^2): one cell per integer in
    [-w, w] where every cell's expected count is >= 5, the two tails pooled into the end cells."""
    n = z.size
    w = 0
    while n * float(discrete_gaussian_pmf(w + 1, sigma)) >= 5:
        w += 1
    support = np.arange(-w, w + 1)
    pmf = discrete_gaussian_pmf(support, sigma)
    tail = max(0.0, (1.0 - float(pmf.sum())) / 2)
    exp = pmf * n
    exp[0] += tail * n
    exp[-1] += tail * n
    obs = np.array([np.sum(z == v) for v in support], dtype=np.float64)
    obs[0] += np.sum(z < -w)
    obs[-1] += np.sum(z > w)
    assert exp.min() >= 5
    if support.size == 1:  # a single cell: nothing to test (not reached for sigma >= 0.5)
        return 1.0
    return float(stats.chisquare(obs, exp * n / exp.sum()).pvalue)


def _moments(sigma: float) -> tuple[float, float]:
    """Variance and fourth moment of N_Z(0, sigma^2), summed over a wide support."""
    k = np.arange(-int(40 * sigma) - 2, int(40 * sigma) + 3).astype(np.float64)
    p = discrete_gaussian_pmf(k, sigma)
    return float((k * k * p).sum()), float((k**4 * p).sum())


# -- the law -------------------------------------------------------------------------------------------
@pytest.mark.parametrize("sigma", SIGMAS)
def test_discrete_gaussian_matches_the_pmf(sigma: float) -> None:
    """200,000 draws: chi-square p > 1e-3 (false-failure rate 1e-3); mean and variance within 5
    standard errors (about 6e-7 each); the pmf's variance equals discrete_gaussian_variance."""
    n = 200_000
    z = discrete_gaussian(np.random.default_rng(20 + int(10 * sigma)), sigma, n)
    assert z.dtype == np.int64 and z.shape == (n,)
    assert _chi_square(z, sigma) > 1e-3
    var, m4 = _moments(sigma)
    assert discrete_gaussian_variance(sigma) == pytest.approx(var, rel=1e-12)
    assert var <= sigma * sigma * (1 + 1e-12)
    zf = z.astype(np.float64)
    assert abs(zf.mean()) <= 5 * math.sqrt(var / n)
    assert abs(zf.var() - var) <= 5 * math.sqrt((m4 - var * var) / n)


@pytest.mark.parametrize("sigma", SIGMAS)
def test_the_chi_square_rejects_a_wrong_sigma(sigma: float) -> None:
    """Negative control: draws at 1.1 sigma against the pmf at sigma are rejected (p < 1e-6), so
    the goodness-of-fit test above has the power to fail."""
    z = discrete_gaussian(np.random.default_rng(7), 1.1 * sigma, 200_000)
    assert _chi_square(z, sigma) < 1e-6


def test_the_pmf_is_normalised_on_both_sides_of_the_series_switch() -> None:
    """The direct sum (sigma < 2) and the Jacobi series (sigma >= 2) both give a pmf summing to 1
    (to 1e-12), continuous across the switch; the variance helper agrees with a direct sum."""
    for sigma in (MIN_SIGMA, 0.3, 1.0, 1.999999, 2.0, 2.5, 10.0, 333.3):
        k = np.arange(-int(40 * sigma) - 2, int(40 * sigma) + 3)
        assert float(discrete_gaussian_pmf(k, sigma).sum()) == pytest.approx(1.0, abs=1e-12)
        var, _ = _moments(sigma)
        assert discrete_gaussian_variance(sigma) == pytest.approx(var, rel=1e-12, abs=1e-300)
    assert gn._normaliser(1.9999999999) == pytest.approx(gn._normaliser(2.0), rel=1e-9)
    assert discrete_gaussian_pmf(0, 1e6) == pytest.approx(1 / (math.sqrt(2 * math.pi) * 1e6), rel=1e-12)


# -- the acceptance probability --------------------------------------------------------------------------
def _reference_error(u: int, sigma: float, s: int, T: int, n: int, p: float) -> float:
    """|p e^{-n} / e^{-x} - 1| with x = (u - a sigma^2)^2 / (2 sigma^2) exact, in 60-digit decimals."""
    var = Fraction(sigma) ** 2
    x = (Fraction(u) - Fraction(s, 1 << T) * var) ** 2 / (2 * var)
    with decimal.localcontext() as ctx:
        ctx.prec = 60
        r = x - n  # the exponent p should realise
        ref = (-(decimal.Decimal(r.numerator) / decimal.Decimal(r.denominator))).exp()
        return float(abs(decimal.Decimal(p) / ref - 1))


@pytest.mark.parametrize("sigma", [MIN_SIGMA, 0.5, 1.3, 4.0, 25.0, 1234.567, 3.0 * 2**20, 2.0**40 - 0.5])
def test_acceptance_is_within_its_stated_error(sigma: float) -> None:
    """The compiled double-double kernel's (n, e^-f) against exact rationals: e^-n e^-f is within
    a relative ACCEPTANCE_ERROR = 2^-51 of e^-x, for proposals around the mode, in the far tail
    (x up to 2^39) and at 0; e^-f in (e^-1, 1] (exactly realised by bernoulli_exact)."""
    rng = np.random.default_rng(5)
    s, T = dyadic_parameter(1.0 / (math.floor(sigma) + 1))
    c = float(Fraction(s, 1 << T) * Fraction(sigma) ** 2)
    spread = np.concatenate([rng.uniform(-60, 60, 300), rng.uniform(-(2.0**19.5), 2.0**19.5, 60)])
    u = np.unique(np.concatenate([[0, 1, 2], np.maximum(0, np.rint(c + sigma * spread))]).astype(np.int64))
    n, p, huge = gn._acceptance(u, sigma, s, T)
    assert not huge
    assert np.all(n >= 0) and np.all(p > math.exp(-1) * (1 - 2**-52)) and np.all(p <= 1.0)
    worst = max(_reference_error(int(ui), sigma, s, T, int(ni), float(pi)) for ui, ni, pi in zip(u, n, p))
    assert worst <= ACCEPTANCE_ERROR


def test_the_exact_path_agrees_with_the_kernel_and_covers_huge_inputs() -> None:
    """Exponents beyond the kernel's range (u >= 2^53, x > 2^40) go to exact rationals: same
    (n, e^-f) as the kernel where both apply, and within the error bound where only it does."""
    sigma = 4.0
    s, T = dyadic_parameter(1.0 / 5)
    u = np.array([0, 3, 17, 40, 1000, 123456], dtype=np.int64)
    n, p, _ = gn._acceptance(u, sigma, s, T)
    for ui, ni, pi in zip(u.tolist(), n.tolist(), p.tolist()):
        ne, pe = gn._acceptance_exact(ui, sigma, s, T)
        assert abs((ni - math.log(pi)) - (ne - math.log(pe))) <= 2 * ACCEPTANCE_ERROR
    big = np.array([2**53 + 7, 2**40, 2**62 - 1], dtype=np.int64)  # u >= 2^53; x > 2^40
    st = dyadic_parameter(1.0 / (2**20 + 1))
    n, p, huge = gn._acceptance(big, 2.0**20, *st)
    assert n[1] > 0 and 1 not in huge
    assert _reference_error(2**40, 2.0**20, *st, int(n[1]), float(p[1])) <= ACCEPTANCE_ERROR
    n0 = huge.get(0, int(n[0]))  # x ~ 2^65: n is kept in Python integers beyond one chunk
    assert _reference_error(2**53 + 7, 2.0**20, *st, n0, float(p[0])) <= ACCEPTANCE_ERROR
    n, p, huge = gn._acceptance(big, 1.0, *dyadic_parameter(0.5))  # x ~ u^2 / 2: beyond 2^61
    assert set(huge) == {0, 1, 2} and all(v > 2**61 for v in huge.values())


def test_the_exact_paths_keep_the_law(monkeypatch: pytest.MonkeyPatch) -> None:
    """With the kernel's range cut to x <= 1/4 and the e^-n chunk to 1, nearly every proposal goes
    through exact rationals and chained W >= 1 tests (paths otherwise taken with probability below
    e^-(2^20)): the law is unchanged (chi-square, alpha = 1e-3)."""
    monkeypatch.setattr(gn, "_X_MAX_FAST", 0.25)
    monkeypatch.setattr(gn, "_W_CHUNK", 1)
    for sigma, seed in ((1.3, 3), (4.0, 4)):
        z = discrete_gaussian(np.random.default_rng(seed), sigma, 20_000)
        assert _chi_square(z, sigma) > 1e-3


def test_exp_minus_n_is_decided_exactly() -> None:
    """W >= n for the geometric W has probability e^-n: frequencies within 5 standard errors; a
    huge n is split into chunks (with chunk 1: n = 3 in three W >= 1 tests)."""
    stream = WordStream(np.random.default_rng(8))
    n = np.repeat(np.array([0, 1, 2, 4], dtype=np.int64), 50_000)
    hits = gn._geometric_at_least(stream, n).reshape(4, -1).mean(axis=1)
    for k, h in zip((0, 1, 2, 4), hits):
        pk = math.exp(-k)
        assert abs(h - pk) <= 5 * math.sqrt(pk * (1 - pk) / 50_000) + 1e-12
    old = gn._W_CHUNK
    try:
        gn._W_CHUNK = 1
        freq = np.mean([gn._exp_minus_huge(stream, 3) for _ in range(20_000)])
    finally:
        gn._W_CHUNK = old
    assert abs(freq - math.exp(-3)) <= 5 * math.sqrt(math.exp(-3) / 20_000)


# -- determinism and validation --------------------------------------------------------------------------
def test_same_seed_same_draws_and_no_global_rng() -> None:
    state = np.random.get_state()
    a = discrete_gaussian(np.random.default_rng(1), 3.7, 5000)
    b = discrete_gaussian(np.random.default_rng(1), 3.7, 5000)
    c = discrete_gaussian(np.random.default_rng(2), 3.7, 5000)
    after = np.random.get_state()
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c)
    assert after[0] == state[0] and np.array_equal(after[1], state[1])
    d = discrete_gaussian(noise_generator(4), 3.7, 1000)
    np.testing.assert_array_equal(d, discrete_gaussian(noise_generator(4), 3.7, 1000))


def test_size_zero_and_the_extreme_scales() -> None:
    z = discrete_gaussian(np.random.default_rng(0), 2.0, 0)
    assert z.dtype == np.int64 and z.shape == (0,)
    tiny = discrete_gaussian(np.random.default_rng(0), MIN_SIGMA, 1000)
    assert not tiny.any()  # Pr(Z != 0) ~ 2 e^-(2^19)
    big = discrete_gaussian(np.random.default_rng(0), MAX_SIGMA, 20_000).astype(np.float64)
    assert abs(big.std() / MAX_SIGMA - 1) < 0.03 and np.abs(big).max() < 2.0**53


@pytest.mark.parametrize(
    "sigma, exc",
    [(0.0, ValueError), (-1.0, ValueError), (float("nan"), ValueError), (float("inf"), ValueError),
     (2.0**40 * 1.0001, ValueError), (2.0**-11, ValueError), (True, TypeError), ("1", TypeError), (None, TypeError)],
)
def test_discrete_gaussian_refuses_bad_sigma(sigma: object, exc: type) -> None:
    with pytest.raises(exc):
        discrete_gaussian(np.random.default_rng(0), sigma, 10)  # type: ignore[arg-type]


@pytest.mark.parametrize("size, exc", [(-1, ValueError), (1.5, TypeError), (True, TypeError), ("3", TypeError)])
def test_discrete_gaussian_refuses_bad_size(size: object, exc: type) -> None:
    with pytest.raises(exc):
        discrete_gaussian(np.random.default_rng(0), 1.0, size)  # type: ignore[arg-type]


@pytest.mark.parametrize("rng", [np.random.RandomState(0), None, 0, np.random.default_rng(0).bit_generator])
def test_discrete_gaussian_refuses_a_non_generator(rng: object) -> None:
    with pytest.raises(TypeError, match="Generator"):
        discrete_gaussian(rng, 1.0, 10)  # type: ignore[arg-type]


# -- the grid release --------------------------------------------------------------------------------------
def test_gaussian_on_grid_lies_on_the_grid_and_adds_the_discrete_gaussian() -> None:
    """Outputs are float64 grid points of the input's shape; the release is exactly
    rint(v 2^20) 2^-20 + 2^-20 Z with Z the draws discrete_gaussian makes from the same stream
    (half-to-even rounding included); Z's mean and variance match N_Z(0, (sigma 2^20)^2)."""
    g, sigma = 20, 0.01
    gamma = 2.0**-g
    rng = np.random.default_rng(12)
    values = rng.uniform(-3, 3, size=(1000, 200))
    values[0, :4] = [0.5 * gamma, 1.5 * gamma, 2.5 * gamma, -0.5 * gamma]  # ties: to even
    out = gaussian_on_grid(values, sigma, np.random.default_rng(13), grid_exponent=g)
    assert out.dtype == np.float64 and out.shape == values.shape
    scaled = np.ldexp(out, g)
    np.testing.assert_array_equal(scaled, np.rint(scaled))
    noise = discrete_gaussian(np.random.default_rng(13), sigma / gamma, values.size).reshape(values.shape)
    rounded = np.rint(values * 2.0**g)
    np.testing.assert_array_equal(scaled - noise, rounded)
    np.testing.assert_array_equal(rounded[0, :4], [0.0, 2.0, 2.0, -0.0])
    z = (scaled - rounded).reshape(-1)
    s = sigma / gamma
    var = discrete_gaussian_variance(s)
    assert var == pytest.approx(s * s, rel=1e-15)
    assert abs(z.mean()) <= 5 * math.sqrt(var / z.size)
    assert abs(z.var() / var - 1) <= 5 * math.sqrt(2 / z.size)  # Gaussian kurtosis: se = sqrt(2/n)
    assert np.array_equal(z, np.rint(z))


def test_gaussian_on_grid_validation() -> None:
    rng = np.random.default_rng(0)
    for bad in ([1.0, float("nan")], [float("inf")]):
        with pytest.raises(ValueError, match="finite"):
            gaussian_on_grid(np.array(bad), 1.0, rng)
    with pytest.raises(TypeError, match="real"):
        gaussian_on_grid(np.array([1 + 2j]), 1.0, rng)
    with pytest.raises(TypeError, match="real"):
        gaussian_on_grid(np.array(["a"]), 1.0, rng)
    with pytest.raises(ValueError, match="outside"):
        gaussian_on_grid(np.zeros(3), 2.0**21, rng)  # sigma / gamma = 2^41
    with pytest.raises(ValueError, match="outside"):
        gaussian_on_grid(np.zeros(3), 2.0**-31, rng)  # sigma / gamma = 2^-11
    with pytest.raises(ValueError, match="2\\^52"):
        gaussian_on_grid(np.array([2.0**33]), 1.0, rng)
    with pytest.raises(ValueError):
        gaussian_on_grid(np.zeros(3), 0.0, rng)
    with pytest.raises(TypeError):
        gaussian_on_grid(np.zeros(3), 1.0, rng, grid_exponent=20.0)  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        gaussian_on_grid(np.zeros(3), 1.0, rng, grid_exponent=65)
    with pytest.raises(TypeError, match="Generator"):
        gaussian_on_grid(np.zeros(3), 1.0, np.random.RandomState(0))  # type: ignore[arg-type]
    empty = gaussian_on_grid(np.zeros((0, 4)), 1.0, rng)
    assert empty.shape == (0, 4) and empty.dtype == np.float64
    ints = gaussian_on_grid([1, 2, 3], 1.0, np.random.default_rng(3), grid_exponent=0)
    np.testing.assert_array_equal(ints - [1, 2, 3], discrete_gaussian(np.random.default_rng(3), 1.0, 3))


def test_grid_sensitivity() -> None:
    assert grid_sensitivity(1.0, 4, grid_exponent=20) == 1.0 + 2 * 2.0**-20  # exact: sqrt(4) = 2
    assert grid_sensitivity(0.0, 0) == 0.0
    g = grid_sensitivity(2.5, 64 * 22470, grid_exponent=10)
    assert Fraction(g) >= Fraction(2.5) + Fraction(math.sqrt(64 * 22470)) / 1024
    assert g <= (2.5 + math.sqrt(64 * 22470) / 1024) * (1 + 2**-50)
    with pytest.raises(ValueError):
        grid_sensitivity(-1.0, 1)
    with pytest.raises(ValueError):
        grid_sensitivity(1.0, -1)
    with pytest.raises(TypeError):
        grid_sensitivity(1.0, 2.0)  # type: ignore[arg-type]


# -- the privacy bound ------------------------------------------------------------------------------------
def _renyi(alpha: float, s: float, k: int, s_noise: float | None = None) -> float:
    """D_alpha(N_Z(0, s^2) || N_Z(k, s^2)) from discrete_gaussian_pmf (logs, |z| <= 36 s: the
    dropped tails weigh below e^-600); ``s_noise`` replaces s in both laws (the negative control)."""
    sn = s if s_noise is None else s_noise
    z = np.arange(-int(36 * sn), int(36 * sn) + 1)
    lp0 = np.log(discrete_gaussian_pmf(z, sn))
    lp1 = np.log(discrete_gaussian_pmf(z - k, sn))
    return float(logsumexp(alpha * lp0 + (1 - alpha) * lp1)) / (alpha - 1)


@pytest.mark.parametrize("alpha", [2, 8, 32])
def test_renyi_divergence_meets_the_zcdp_curve(alpha: int) -> None:
    """Neighbouring inputs 0 and Delta = 1 on the grid 2^-6 with sigma = 2 are the integer shift
    k = 64 at scale s = 128: D_alpha(N_Z(0, s^2) || N_Z(k, s^2)) <= alpha k^2 / (2 s^2) (+1e-9) for
    k in {1, 16, 64, 65, 100} (equality for integer alpha and k: CKS's bound is tight there);
    rounded neighbours (|x - x'| <= 1) shift by at most grid_sensitivity(1, 1) / gamma. Negative
    control: the same shifts with the noise at 0.9 s exceed the bound for s."""
    g, sigma, delta = 6, 2.0, 1.0
    gamma = 2.0**-g
    s = sigma / gamma
    for k in (1, 16, 64, 65, 100):
        bound = alpha * k * k / (2 * s * s)
        d = _renyi(alpha, s, k)
        assert d <= bound + 1e-9
        assert d >= bound - 1e-9  # the numerics resolve the divergence
        assert _renyi(alpha, s, k, s_noise=0.9 * s) > bound * 1.2
    rng = np.random.default_rng(alpha)
    x0 = rng.uniform(-5, 5, 2000)
    x1 = x0 + rng.uniform(-delta, delta, 2000)
    shift = np.abs(np.rint(np.ldexp(x1, g)) - np.rint(np.ldexp(x0, g))).astype(int)
    sens = grid_sensitivity(delta, 1, grid_exponent=g)
    assert shift.max() <= sens / gamma
    k = int(shift.max())
    assert _renyi(alpha, s, k) <= alpha * sens * sens / (2 * sigma * sigma) + 1e-9
