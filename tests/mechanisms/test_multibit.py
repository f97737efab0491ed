"""MultiBitEncoder: the exact privacy loss per coordinate and per vector, the encoder against its
pmf, the rectifier (the paper's formula, unbiasedness, variance), m, validation.

Statistical tests use fixed seeds (they are deterministic as written); the stated false-failure
rates are what each test would have over random seeds.
"""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats

import privgraph.mechanisms.features.scaled as base_mod
from privgraph.graph import GraphData
from privgraph.guarantee import Guarantee, GuaranteeKind, Scope
from privgraph.mechanisms.features.feature_rr import worst_case_log_ratio
from privgraph.mechanisms.features.multibit import (
    MultiBitEncoder,
    multibit_coordinate_pmf,
    multibit_pmf,
    optimal_m,
)
from privgraph.mechanisms.features.three_output import split_epsilon

EPSILONS = [1e-4, 0.1, 0.5, 1.0, 2.18, 3.0, 8.0, 20.0, 50.0]
Z_GRID = np.linspace(0.0, 1.0, 101)


def test_optimal_m() -> None:
    assert optimal_m(1.0, 128) == 1
    assert optimal_m(2.17, 128) == 1
    assert optimal_m(4.36, 128) == 2
    assert optimal_m(8.0, 128) == 3
    assert optimal_m(100.0, 128) == 45
    assert optimal_m(1000.0, 10) == 10
    assert MultiBitEncoder(epsilon=8.0).num_sampled(128) == 3
    assert MultiBitEncoder(epsilon=8.0, m=5).num_sampled(128) == 5


# -- the exact privacy loss -------------------------------------------------------------------------
@pytest.mark.parametrize("eps", EPSILONS)
def test_worst_case_ratio_per_coordinate(eps: float) -> None:
    P = multibit_pmf(Z_GRID, eps)
    np.testing.assert_allclose(P.sum(axis=1), 1.0, atol=1e-15)
    e = math.exp(eps)
    np.testing.assert_allclose(P[:, 1], 1 / (e + 1) + Z_GRID * (e - 1) / (e + 1), rtol=1e-12)
    w = worst_case_log_ratio(P)
    assert abs(w - eps) <= 1e-9 * max(1.0, eps)
    assert math.log(P[-1, 1] / P[0, 1]) == pytest.approx(eps, rel=1e-12)


def _vector_pmf(z: np.ndarray, eps: float, m: int) -> tuple[np.ndarray, list[tuple[int, ...]]]:
    """Exact pmf over encoded vectors in {-1, 0, 1}^d with exactly m nonzeros (rows: inputs)."""
    n, d = z.shape
    bit = multibit_pmf(z, split_epsilon(eps, m))  # [n, d, 2]
    outs = [o for o in itertools.product((-1, 0, 1), repeat=d) if sum(v != 0 for v in o) == m]
    pm = np.zeros((n, len(outs)))
    for i, o in enumerate(outs):
        term = np.full(n, 1.0 / math.comb(d, m))
        for j in range(d):
            if o[j]:
                term *= bit[:, j, (o[j] + 1) // 2]
        pm[:, i] = term
    return pm, outs


@pytest.mark.parametrize("d, m, eps", [(3, 2, 3.0), (3, 1, 1.0), (2, 2, 5.0), (4, 3, 0.7), (3, 3, 9.0)])
def test_worst_case_ratio_per_vector(d: int, m: int, eps: float) -> None:
    levels = [0.0, 0.25, 0.5, 1.0]
    z = np.array(list(itertools.product(levels, repeat=d)))
    pm, _ = _vector_pmf(z, eps, m)
    np.testing.assert_allclose(pm.sum(axis=1), 1.0, atol=1e-12)
    w = worst_case_log_ratio(pm)
    assert w <= eps * (1 + 1e-9)
    assert w == pytest.approx(eps, rel=1e-9)


# -- the encoder against its pmf -------------------------------------------------------------------
@pytest.mark.parametrize("eps", [0.5, 1.0, 3.0])
def test_encoder_matches_pmf_one_feature(eps: float) -> None:
    """d = m = 1: chi-square per input at alpha = 1e-3 (false-failure rate 1e-3 each)."""
    n = 20_000
    enc = MultiBitEncoder(epsilon=eps, lower=-1.0, upper=3.0)
    rng = np.random.default_rng(int(eps * 10))
    for x in (-1.0, 0.0, 1.7, 3.0):
        out = enc.privatize_rows(np.full((n, 1), x), rng)[:, 0]
        assert set(np.unique(out)) <= {-1.0, 1.0}
        counts = np.array([(out == -1).sum(), (out == 1).sum()])
        expected = n * multibit_pmf((x + 1.0) / 4.0, eps)
        assert stats.chisquare(counts, expected).pvalue > 1e-3, (eps, x, counts, expected)


def test_encoder_marginals_and_m_nonzeros() -> None:
    """d = 5, m = 2: exactly m nonzeros per row; per-column chi-square of (-1, 0, +1) against
    multibit_coordinate_pmf at alpha = 1e-3 (false-failure rate 1e-3 per column)."""
    n, d, m, eps = 30_000, 5, 2, 3.0
    enc = MultiBitEncoder(epsilon=eps, m=m)
    row = np.array([0.0, 0.1, 0.5, 0.9, 1.0])
    out = enc.privatize_rows(np.repeat(row[None, :], n, axis=0), np.random.default_rng(3))
    assert out.dtype == np.float32
    assert np.all((out != 0).sum(axis=1) == m)
    expected = n * multibit_coordinate_pmf(row, eps, m, d)
    for j in range(d):
        counts = np.array([(out[:, j] == v).sum() for v in (-1, 0, 1)])
        assert counts.sum() == n
        assert stats.chisquare(counts, expected[j]).pvalue > 1e-3, (j, counts, expected[j])


def test_encoded_vectors_match_the_exact_vector_pmf() -> None:
    """Chi-square over the 12 possible encoded vectors (d = 3, m = 2), alpha = 1e-3."""
    n, eps = 60_000, 3.0
    z = np.array([[0.0, 0.6, 1.0]])
    enc = MultiBitEncoder(epsilon=eps, m=2)
    out = enc.privatize_rows(np.repeat(z, n, axis=0), np.random.default_rng(17)).astype(int)
    pm, outs = _vector_pmf(z, eps, 2)
    index = {o: i for i, o in enumerate(outs)}
    counts = np.bincount([index[tuple(r)] for r in out], minlength=len(outs))
    assert counts.sum() == n
    assert stats.chisquare(counts, n * pm[0]).pvalue > 1e-3


# -- the rectifier ----------------------------------------------------------------------------------
def test_rectifier_is_the_papers_formula() -> None:
    d, m, eps = 6, 2, 4.0
    lo, hi = np.array([0.0, -1.0, 2.0, 0.0, 5.0, -3.0]), np.array([1.0, 1.0, 4.0, 10.0, 6.0, 3.0])
    enc = MultiBitEncoder(epsilon=eps, m=m, lower=lo, upper=hi)
    x_star = np.array([[1, 0, -1, 0, 0, 1], [0, -1, 0, 1, 0, 0]], dtype=np.float32)
    e = math.exp(split_epsilon(eps, m))
    expected = d * (hi - lo) / (2 * m) * (e + 1) / (e - 1) * x_star + (lo + hi) / 2
    got = enc.rectify(x_star)
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, expected, rtol=1e-6)
    np.testing.assert_array_equal(enc.estimate(x_star), got)


@pytest.mark.parametrize("eps, d, m", [(1.0, 4, None), (8.0, 6, None), (3.0, 5, 5), (2.0, 3, 2)])
def test_rectifier_is_unbiased(eps: float, d: int, m: int | None) -> None:
    """Mean of the rectified estimate vs x within 5 standard errors of the paper's variance
    (false-failure rate about 6e-7 per column over random seeds)."""
    n = 100_000
    lo, hi = -5.0, 5.0
    enc = MultiBitEncoder(epsilon=eps, m=m, lower=lo, upper=hi)
    row = np.linspace(-6.0, 5.0, d)  # the first value is clipped to lower
    x = np.repeat(row[None, :], n, axis=0).astype(np.float32)
    est = enc.rectify(enc.privatize_rows(x, np.random.default_rng(23))).astype(np.float64)
    var = enc.estimate_variance(row[None, :])[0]
    mm = enc.num_sampled(d)
    coth = (math.exp(eps / mm) + 1) / (math.exp(eps / mm) - 1)
    paper_var = d / mm * ((hi - lo) / 2 * coth) ** 2 - (np.clip(row, lo, hi) - (lo + hi) / 2) ** 2
    np.testing.assert_allclose(var, paper_var, rtol=1e-9)
    se = np.sqrt(var / n)
    assert np.all(np.abs(est.mean(axis=0) - np.clip(row, lo, hi)) < 5 * se), (est.mean(axis=0), se)
    np.testing.assert_allclose(est.var(axis=0), var, rtol=0.1)


def test_rectify_validates_its_input() -> None:
    enc = MultiBitEncoder(epsilon=1.0)
    with pytest.raises(ValueError, match="-1, 0, 1"):
        enc.rectify(np.array([[0.5, 0.0]]))
    with pytest.raises(ValueError, match="NaN"):
        enc.rectify(np.array([[np.nan, 0.0]]))
    with pytest.raises(ValueError, match="2-D"):
        enc.rectify(np.array([1.0, 0.0]))


def test_privatize_rows_is_encoded_and_privatize_is_rectified() -> None:
    x = np.random.default_rng(0).random((5, 4)).astype(np.float32)
    g = GraphData(num_nodes=5, x=x, edges_public=np.array([[0, 1], [1, 2]]))
    enc = MultiBitEncoder(epsilon=2.0, lower=0.0, upper=1.0)
    encoded = enc.privatize_rows(x, np.random.default_rng(4))
    assert set(np.unique(encoded)) <= {-1.0, 0.0, 1.0}
    out = enc.privatize(g, np.random.default_rng(4))
    np.testing.assert_array_equal(out.x, enc.rectify(encoded))
    np.testing.assert_array_equal(g.x, x)
    with pytest.raises(ValueError, match="x is None"):
        enc.privatize(GraphData(num_nodes=2), np.random.default_rng(0))


def test_chunking_does_not_change_the_output(monkeypatch: pytest.MonkeyPatch) -> None:
    x = np.random.default_rng(3).random((300, 11))
    for enc in (MultiBitEncoder(epsilon=1.0), MultiBitEncoder(epsilon=9.0), MultiBitEncoder(epsilon=1.0, m=11)):
        whole = enc.privatize_rows(x, np.random.default_rng(11))
        monkeypatch.setattr(base_mod, "_CHUNK_ENTRIES", 30)
        chunked = enc.privatize_rows(x, np.random.default_rng(11))
        monkeypatch.undo()
        np.testing.assert_array_equal(whole, chunked)


# -- guarantee --------------------------------------------------------------------------------------
@pytest.mark.parametrize("eps", [0.1, 1.0, math.log(9), 9.7])
def test_guarantee_boundary(eps: float) -> None:
    enc = MultiBitEncoder(epsilon=eps)
    g = enc.guarantee
    assert isinstance(g, Guarantee)
    assert g.kind is GuaranteeKind.FEATURE_LDP and g.scope is Scope.FEATURES
    assert g.epsilon == eps
    assert g.check(eps) and not g.check(eps * (1 - 1e-9))
    assert "feature bounds are public" in g.assumptions
    for d in (1, 3, 7, 128):
        assert Fraction(enc.coordinate_epsilon(d)) * enc.num_sampled(d) <= Fraction(eps)


# -- m, randomness, validation -----------------------------------------------------------------------
@pytest.mark.parametrize(
    "m, exc",
    [(0, ValueError), (-1, ValueError), (1.5, TypeError), (True, TypeError), ("2", TypeError), (2.0, TypeError)],
)
def test_bad_m(m: object, exc: type) -> None:
    with pytest.raises(exc, match="m"):
        MultiBitEncoder(epsilon=1.0, m=m)  # type: ignore[arg-type]


def test_m_larger_than_d() -> None:
    with pytest.raises(ValueError, match="m must be <="):
        MultiBitEncoder(epsilon=1.0, m=3, lower=[0.0, 0.0], upper=[1.0, 1.0])
    enc = MultiBitEncoder(epsilon=1.0, m=5)
    with pytest.raises(ValueError, match="m must be <="):
        enc.privatize_rows(np.zeros((2, 4)), np.random.default_rng(0))
    with pytest.raises(ValueError, match="m must be <="):
        multibit_coordinate_pmf(0.5, 1.0, 5, 4)


def test_per_coordinate_budget_cap() -> None:
    """m given fixes each bit's budget split_epsilon(eps, m): refused at construction (load
    time); with m = None it is refused once d is known (at privatize time, or at construction
    with per-feature bounds)."""
    with pytest.raises(ValueError, match="per coordinate"):
        MultiBitEncoder(epsilon=60.0, m=1)
    assert MultiBitEncoder(epsilon=60.0, m=2).privatize_rows(np.zeros((2, 3)), np.random.default_rng(0)).shape == (2, 3)
    enc = MultiBitEncoder(epsilon=60.0)  # m* = min(d, floor(60 / 2.18)) = d for small d
    with pytest.raises(ValueError, match="per coordinate"):
        enc.privatize_rows(np.zeros((2, 1)), np.random.default_rng(0))
    with pytest.raises(ValueError, match="per coordinate"):
        enc.rectify(np.zeros((2, 1)))
    with pytest.raises(ValueError, match="per coordinate"):
        MultiBitEncoder(epsilon=60.0, lower=[0.0], upper=[1.0])


@pytest.mark.parametrize(
    "eps, exc",
    [
        (float("nan"), ValueError), (float("inf"), ValueError), (0.0, ValueError), (-1.0, ValueError),
        (True, TypeError), ("1", TypeError), (None, TypeError),
    ],
)
def test_bad_epsilon(eps: object, exc: type) -> None:
    with pytest.raises(exc, match="epsilon"):
        MultiBitEncoder(epsilon=eps)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "kwargs, exc, name",
    [
        ({"lower": 1.0, "upper": 1.0}, ValueError, "lower"),
        ({"lower": 2.0, "upper": 1.0}, ValueError, "lower"),
        ({"lower": [0.0, 2.0], "upper": [1.0, 1.0]}, ValueError, "lower"),
        ({"lower": float("-inf")}, ValueError, "lower"),
        ({"upper": "1"}, TypeError, "upper"),
    ],
)
def test_bad_bounds(kwargs: dict, exc: type, name: str) -> None:
    with pytest.raises(exc, match=name):
        MultiBitEncoder(epsilon=1.0, **kwargs)


def test_constructor_repr_params() -> None:
    with pytest.raises(TypeError):
        MultiBitEncoder(1.0)  # type: ignore[misc]
    enc = MultiBitEncoder(epsilon=1.0)
    assert repr(enc) == "MultiBitEncoder(epsilon=1.0, m=None)"
    assert enc.params() == {"epsilon": 1.0, "lower": 0.0, "upper": 1.0, "m": None}
    enc2 = MultiBitEncoder(epsilon=3.0, m=2, lower=[0.0, 0.0, 0.0], upper=[1.0, 2.0, 3.0])
    assert MultiBitEncoder(**enc2.params()).params() == enc2.params()
    assert repr(enc2) == "MultiBitEncoder(epsilon=3.0, m=2)"
    assert MultiBitEncoder.name == "multibit" and MultiBitEncoder.scope is Scope.FEATURES
