"""The exact discrete Laplace sampler (noise.py): its dyadic parameter, its law against the exact
pmf (chi-square, fixed seeds), the Python path for huge geometric parts, the word stream's
independence from chunking, and validation.

Statistical tests use fixed seeds (deterministic as written); the stated false-failure rates are
what each test would have over random seeds.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats

from privgraph.mechanisms.noise import (
    WordStream,
    discrete_laplace,
    discrete_laplace_dyadic,
    discrete_laplace_pmf,
    discrete_laplace_variance,
    dyadic_parameter,
    dyadic_value,
)
from privgraph.seeding import noise_generator


@pytest.mark.parametrize(
    "a", [2.0**-52, 2.0**-40, 2.0**-20, 1e-6, 2.0**-10, 0.1, 0.7, 1.0, 1.5, 7.0, 50.0, 1e6, 2.0**51]
)
def test_dyadic_parameter_rounds_down_tightly(a: float) -> None:
    """s / 2^T <= a exactly; equal to a for every float a >= 2^-10; within a relative 1 / s <= 2^-10
    below; s < 2^53 and T <= 62 (the kernel's int64 bounds)."""
    s, T = dyadic_parameter(a)
    v = dyadic_value(s, T)
    assert v <= Fraction(a)
    assert v >= Fraction(a) * (1 - Fraction(1, s))
    assert s >= 1 << 10 and s < 1 << 53 and 1 <= T <= 62
    if a >= 2.0**-10:
        assert v == Fraction(a)
    if a >= 2.0**-20:
        assert v >= Fraction(a) * (1 - Fraction(1, 1 << 42))


def test_dyadic_parameter_refuses_out_of_range() -> None:
    with pytest.raises(ValueError, match="too small"):
        dyadic_parameter(2.0**-53)
    with pytest.raises(ValueError, match="too large"):
        dyadic_parameter(2.0**52)
    for bad, exc in ((0.0, ValueError), (float("nan"), ValueError), (True, TypeError), ("1", TypeError)):
        with pytest.raises(exc):
            dyadic_parameter(bad)  # type: ignore[arg-type]


def _chi_square_pvalue(z: np.ndarray, a: float, half_width: int) -> float:
    support = np.arange(-half_width, half_width + 1)
    pmf = discrete_laplace_pmf(support, a)
    tail = (1 - pmf.sum()) / 2
    obs = np.array([np.sum(z < -half_width)] + [np.sum(z == s) for s in support] + [np.sum(z > half_width)])
    exp = np.concatenate([[tail], pmf, [tail]]) * z.size
    keep = exp >= 5  # pool sparse cells into their neighbours' test by dropping them from both sides
    obs_k, exp_k = obs[keep], exp[keep]
    return float(stats.chisquare(obs_k, exp_k * obs_k.sum() / exp_k.sum()).pvalue)


@pytest.mark.parametrize("eps, half_width", [(0.05, 60), (0.7, 8), (3.0, 3), (6.0, 1)])
def test_discrete_laplace_matches_the_exact_law(eps: float, half_width: int) -> None:
    """Chi-square over z in [-w, w] plus both tails (cells with expected count >= 5), alpha = 1e-3;
    the mean and variance within 5 standard errors (about 6e-7 false-failure rate each)."""
    n = 200_000
    z = discrete_laplace(np.random.default_rng(3), eps, n)
    assert z.dtype == np.int64 and z.shape == (n,)
    assert _chi_square_pvalue(z, eps, half_width) > 1e-3
    var = discrete_laplace_variance(eps)
    assert var == pytest.approx(2 * math.exp(-eps) / (1 - math.exp(-eps)) ** 2, rel=1e-12)
    assert abs(z.mean()) <= 5 * math.sqrt(var / n)
    if eps < 6:  # the fourth moment is estimable
        se_var = math.sqrt(((z.astype(np.float64) ** 4).mean() - var**2) / n)
        assert abs(z.var() - var) <= 5 * se_var


def test_discrete_laplace_on_the_noise_generator() -> None:
    """The production generator (seeding.noise_generator, a CSPRNG): same law (chi-square at
    alpha = 1e-3); the sampler reads only the generator's 64-bit words."""
    z = discrete_laplace(noise_generator(11), 0.7, 100_000)
    assert _chi_square_pvalue(z, 0.7, 8) > 1e-3


@pytest.mark.parametrize("eps, half_width", [(0.3, 20), (3.0, 3), (8.0, 1), (6 / 256, 300), (2.0**-17, 0)])
def test_the_python_path_reads_the_same_words_and_gives_the_same_draws(eps: float, half_width: int) -> None:
    """depth = 2 gives the compiled kernel two digits per probability, so every group inversion
    whose field lands on a CDF value's first two digits (255 in 65,536) and every trial that ties
    with them sends its draw through the Python path, which computes further exact digits: the
    draws (and the words read) are identical to the full table's, and the law is the exact one
    (chi-square, alpha = 1e-3). The parameters cover no digit group (8.0), the tail at its most
    frequent (a = 6/256: Pr(Y >= 256) = e^-6, repeated trials from extension bytes) and fields
    over two words (2^-17, three groups)."""
    s, T = dyadic_parameter(eps)
    shallow = WordStream(np.random.default_rng(5))
    z = shallow.discrete_laplace(s, T, 100_000, depth=2)
    full = WordStream(np.random.default_rng(5))
    np.testing.assert_array_equal(z, full.discrete_laplace(s, T, 100_000))
    assert shallow.words_read == full.words_read
    if half_width:
        assert _chi_square_pvalue(z, eps, half_width) > 1e-3
    if eps == 6 / 256:
        assert np.count_nonzero(np.abs(z) > 256) > 100  # the tail was taken (expected about 250)


def test_probability_digits_are_exact() -> None:
    """The digits of Pr(Z != 0) = 2 / (1 + e^a), of the tail e^(-a 2^(8G)) and of each digit
    group's CDF (1 - r^(v+1)) / (1 - r^256), r = e^(-a 2^(8g)), agree with a 300-digit mpmath
    evaluation, and longer expansions extend shorter ones (they are digits, not roundings)."""
    import mpmath

    from privgraph.mechanisms.noise import digit_groups, probability_digits

    for a in (2.0**-20, 0.05, 1.0, 7.5):
        s, T = dyadic_parameter(a)
        G = digit_groups(s, T)
        assert a * 2 ** (8 * G) >= 6 and (G == 0 or a * 2 ** (8 * G - 8) < 6)
        keys = [(0,), (3,), (1, G)] + [(2, g, v) for g in range(G) for v in (0, 1, 127, 254)]
        with mpmath.workdps(300):
            x = mpmath.mpf(s) / mpmath.mpf(2) ** T

            def exact(key):
                if key[0] == 0:
                    return 2 / (1 + mpmath.exp(x))
                if key[0] == 3:
                    return 1 / (1 + mpmath.exp(x))
                r = mpmath.exp(-x * 2 ** (8 * key[1]))
                return r if key[0] == 1 else (1 - r ** (key[2] + 1)) / (1 - r**256)

            want = [int(mpmath.floor(exact(k) * mpmath.mpf(256) ** 40)) for k in keys]
        for key, w in zip(keys, want):  # the library's digits, at mpmath's default context
            d = probability_digits(key, s, T, 40)
            assert int.from_bytes(bytes(d), "big") == w, key
            assert probability_digits(key, s, T, 16) == d[:16]


class _Words:
    """A stand-in generator that returns given words (the layout test reads them back)."""

    def __init__(self, words: list[int]) -> None:
        self.words = words

    def integers(self, low, high, size, dtype, endpoint):  # noqa: ANN001 - numpy's signature
        out = np.array((self.words + [0] * size)[:size], dtype=np.uint64)
        self.words = self.words[size:]
        return out


def test_one_word_layout() -> None:
    """A draw at a = 1 (G = 1) reads one word: field 0 (bits 0-15) against Pr(Z > 0) and
    Pr(Z != 0), field 1 (bits 16-31) against the tail, field 2 (bits 32-47) inverted through the
    CDF of the geometric's byte; the next draw starts at the next word."""
    a = 1.0
    s, T = dyadic_parameter(a)
    p_pos, p_nz = 1 / (1 + math.e), 2 / (1 + math.e)
    cdf = [(1 - math.exp(-a * (v + 1))) / (1 - math.exp(-256 * a)) for v in range(256)]
    fields = [(0x1000, 0xFFFF, 0x0100), (int(0.5 * 65536), 0xFFFF, int(0.8 * 65536)), (0xF000, 0, 0)]
    words = [f0 | f1 << 16 | f2 << 32 for f0, f1, f2 in fields]
    stream = WordStream(np.random.default_rng(0))
    stream.rng = _Words(words)  # type: ignore[assignment]
    z = stream.discrete_laplace(s, T, 3)
    want = []
    for f0, _, f2 in fields:
        u0, u2 = f0 / 65536, f2 / 65536
        sign = 1 if u0 < p_pos else -1 if u0 < p_nz else 0
        want.append(sign * (1 + next(v for v in range(256) if u2 < cdf[v])))
    assert z.tolist() == want == [1, -2, 0]
    assert stream.words_read == 3


def test_word_stream_does_not_depend_on_the_chunking() -> None:
    """One WordStream over several calls gives the draws of one call: unused words carry over and
    a draw that runs out of words is replayed from its first word."""
    s, T = dyadic_parameter(2.0**-17)
    whole = discrete_laplace_dyadic(np.random.default_rng(9), s, T, 10_000)
    st = WordStream(np.random.default_rng(9))
    parts = [st.discrete_laplace(s, T, n) for n in (1, 3, 4000, 0, 5996)]
    np.testing.assert_array_equal(whole, np.concatenate(parts))


def test_same_seed_same_noise_and_no_global_rng() -> None:
    state = np.random.get_state()
    a = discrete_laplace(np.random.default_rng(1), 0.5, 1000)
    b = discrete_laplace(np.random.default_rng(1), 0.5, 1000)
    c = discrete_laplace(np.random.default_rng(2), 0.5, 1000)
    after = np.random.get_state()
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c)
    assert after[0] == state[0] and np.array_equal(after[1], state[1])


def test_large_budget_is_realised_not_degenerate() -> None:
    """At eps = 40 the parameter is exactly 40 (the former geometric sampler rounded 1 - e^-40 to
    1.0 and returned identically 0). Pr(Z != 0) = 2 e^-40 / (1 + e^-40) is too small to observe;
    at eps = 12, 2e-4 of 10^6 draws are nonzero as the law says (binomial, alpha = 1e-3)."""
    assert dyadic_value(*dyadic_parameter(40.0)) == 40
    n = 1_000_000
    z = discrete_laplace(np.random.default_rng(4), 12.0, n)
    p = 1 - math.tanh(6.0)
    assert stats.binomtest(int(np.count_nonzero(z)), n, p).pvalue > 1e-3


def test_validation() -> None:
    for bad in (0.0, float("nan"), float("inf"), True, -1.0):
        with pytest.raises((ValueError, TypeError)):
            discrete_laplace(np.random.default_rng(0), bad, 3)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="Generator"):
        discrete_laplace(np.random.RandomState(0), 1.0, 3)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="size"):
        discrete_laplace(np.random.default_rng(0), 1.0, -1)
    st = WordStream(np.random.default_rng(0))
    with pytest.raises(ValueError, match="range"):
        st.discrete_laplace(3, 63, 1)
    with pytest.raises(ValueError, match="depth"):
        st.discrete_laplace(1 << 52, 52, 1, depth=1)
    assert discrete_laplace(np.random.default_rng(0), 1.0, 0).shape == (0,)
