"""LaplaceMechanism: the grid law's exact privacy loss, exact discrete Laplace noise against its
law, the public grid (no low-bit leak), the stated bias and variance; and the contract of the
shared bounded-feature scaffolding, run for Laplace, Duchi, Piecewise and Hybrid because they share
it (scaled.ScaledFeatureMechanism).

Statistical tests use fixed seeds (deterministic as written); the stated false-failure rates are
what each test would have over random seeds.
"""

from __future__ import annotations

import json
import math
from fractions import Fraction
from typing import Any

import numpy as np
import pytest
from scipy import stats

from privgraph.graph import GraphData
from privgraph.guarantee import Guarantee, GuaranteeKind, Scope
from privgraph.mechanisms.base import Mechanism
from privgraph.mechanisms.features import scaled as laplace_module
from privgraph.mechanisms.features.duchi import DuchiMechanism
from privgraph.mechanisms.features.feature_rr import worst_case_log_ratio
from privgraph.mechanisms.features.hybrid import HybridMechanism
from privgraph.mechanisms.features.laplace import (
    LAPLACE_GRID_STEP,
    LaplaceMechanism,
    laplace_grid_index,
    laplace_noise_parameter,
    laplace_pmf,
    laplace_scale,
    laplace_step_epsilon,
    laplace_variance,
)
from privgraph.mechanisms.features.piecewise import PiecewiseMechanism

CLASSES = [LaplaceMechanism, DuchiMechanism, PiecewiseMechanism, HybridMechanism]
NAMES = {
    LaplaceMechanism: "laplace",
    DuchiMechanism: "duchi",
    PiecewiseMechanism: "piecewise",
    HybridMechanism: "hybrid",
}
STEPS = 1 << 20  # grid steps per unit: the per-coordinate sensitivity


# -- the exact privacy loss ------------------------------------------------------------------------
@pytest.mark.parametrize("eps", [2.0**-20, 1e-3, 0.5, 1.0, math.log(9), 10.0, 100.0])
@pytest.mark.parametrize("d", [1, 2, 3, 7, 128, 1433])
def test_noise_parameter_never_understates_epsilon(eps: float, d: int) -> None:
    """d 2^20 a <= eps holds EXACTLY (rationals) for the realised per-step a = s / 2^T, and is
    tight: a is the float eps / (d 2^20), at most an ulp or two (or 2^-10 relative for tiny a) below."""
    if eps / d * LAPLACE_GRID_STEP < 2.0**-52:
        with pytest.raises(ValueError, match="too small"):
            laplace_noise_parameter(eps, d)
        return
    s, T = laplace_noise_parameter(eps, d)
    a = Fraction(s, 1 << T)
    assert a * d * STEPS <= Fraction(eps)
    assert a * d * STEPS >= Fraction(eps) * (1 - Fraction(1, 1 << 10))
    if eps / d * LAPLACE_GRID_STEP >= 2.0**-10:
        assert a * d * STEPS >= Fraction(eps) * (1 - Fraction(1, 1 << 50))
    assert laplace_step_epsilon(eps, d) == float(a)


@pytest.mark.parametrize("eps", [0.05, 1.0, 3.0, 20.0])
def test_exact_ratio_of_the_grid_law(eps: float) -> None:
    """d = 2: the joint output law P(k | n) = prod_j tanh(a/2) e^(-a |k_j - n_j|), enumerated
    over outputs k on a grid of [-2^20, 2^21]^2 (including every input, the ends, and points
    beyond) and inputs n on a grid of [0, 2^20]^2 (corners included), has
    max_k max_{n, n'} P(k|n) / P(k|n') <= e^eps: attained (up to the realised a, a relative 2^-50
    below) at opposite corners. Tolerance 1e-12 relative: each pmf is a float64 product of an exp
    and tanh (a few ulps), far below it."""
    d = 2
    n1 = np.array([0, 1, 1 << 18, (1 << 19) + 7, STEPS - 1, STEPS])
    k1 = np.unique(np.concatenate([np.linspace(-STEPS, 2 * STEPS, 61).astype(np.int64), n1]))
    n = np.stack(np.meshgrid(n1, n1, indexing="ij"), axis=-1).reshape(1, -1, d)
    k = np.stack(np.meshgrid(k1, k1, indexing="ij"), axis=-1).reshape(-1, 1, d)
    logp = np.log(laplace_pmf(k, n, eps, d)).sum(axis=-1)  # [K, N]
    worst = float(np.max(logp.max(axis=1) - logp.min(axis=1)))
    assert worst <= eps * (1 + 1e-12)
    assert worst == pytest.approx(eps, rel=1e-9)
    # the same through the generic finite-kernel helper, on the outputs' law restricted to the window
    assert worst_case_log_ratio(np.exp(logp).T) == pytest.approx(worst, rel=1e-9)


def test_scale_and_variance() -> None:
    """laplace_variance is the discrete law's g^2 / (2 sinh^2(a / 2)), which matches the
    continuous mechanism's 2 (d / eps)^2 to about (g eps / d)^2."""
    assert laplace_scale(0.5, 128) == 256.0
    for eps, d in ((2.0, 3), (0.5, 128), (40.0, 1)):
        a = laplace_step_epsilon(eps, d)
        exact = LAPLACE_GRID_STEP**2 / (2 * math.sinh(a / 2) ** 2)
        assert laplace_variance(eps, d) == pytest.approx(exact, rel=1e-14)
        assert laplace_variance(eps, d) == pytest.approx(2 * (d / eps) ** 2, rel=1e-9)
    with pytest.raises(ValueError, match="epsilon"):
        laplace_scale(1e-320, 10**6)
    with pytest.raises(ValueError, match="d"):
        laplace_scale(1.0, 0)
    with pytest.raises(ValueError, match="too small"):
        laplace_noise_parameter(1e-9, 10**6)


def test_guarantee_names_the_grid_and_the_exact_sampler() -> None:
    g = LaplaceMechanism(epsilon=1.0).guarantee
    assert any("public grid of step 2^-20" in a and "exact discrete Laplace" in a for a in g.assumptions)
    assert not any("continuous" in a for a in g.assumptions)


# -- the release: grid points, exact noise -------------------------------------------------------------
def test_outputs_lie_on_the_public_grid() -> None:
    """No low-bit leak: every released value is lower + m 2^-20 (upper - lower) for an integer m,
    whatever the input (here span 8, so the grid is the multiples of 2^-17 above -3, exactly
    representable in float32 below 2^7: the check is exact). The set of reachable outputs is
    that lattice for every input. Fails on textbook float Laplace (rng.laplace), whose outputs
    are off the lattice."""
    m = LaplaceMechanism(epsilon=40.0, lower=-3.0, upper=5.0)  # eps / d = 40: noise ~ 0.2 in feature units
    x = np.array([[-3.0], [0.123456789], [0.1234568], [4.999], [7.5]])
    out = m.privatize_rows(np.repeat(x, 2000, axis=0), np.random.default_rng(5)).astype(np.float64)
    assert np.all(np.abs(out) < 2.0**7)
    idx = (out + 3.0) * 2.0**17
    np.testing.assert_array_equal(idx, np.rint(idx))


def test_same_seed_shifts_the_output_by_the_grid_difference() -> None:
    """With one seed, two inputs' releases differ by exactly (n - n') grid steps: the noise is an
    integer draw independent of the input, added on the grid (on float Laplace the difference
    carries the inputs' low bits)."""
    lo, hi = -1.0, 3.0
    m = LaplaceMechanism(epsilon=30.0, lower=lo, upper=hi)
    x1 = np.array([[0.3, -0.7, 2.9]])
    x2 = np.array([[0.3 + 1e-7, 1.1, -5.0]])
    a = m.privatize_rows(x1, np.random.default_rng(8)).astype(np.float64)
    b = m.privatize_rows(x2, np.random.default_rng(8)).astype(np.float64)
    step = LAPLACE_GRID_STEP * (hi - lo)
    n1 = laplace_grid_index((np.clip(x1, lo, hi) - lo) / (hi - lo))
    n2 = laplace_grid_index((np.clip(x2, lo, hi) - lo) / (hi - lo))
    np.testing.assert_array_equal((a - lo) / step - n1, (b - lo) / step - n2)


def _dl_cdf(x: np.ndarray, a: float) -> np.ndarray:
    """Pr(K <= x) of Pr(K = k) = tanh(a/2) e^(-a|k|): r^(-x) / (1 + r) below 0, 1 - r^(x+1) / (1 + r) from 0."""
    r = math.exp(-a)
    x = np.asarray(x, dtype=np.float64)
    return np.where(x < 0, np.exp(a * x) / (1 + r), 1 - np.exp(-a * (x + 1)) / (1 + r))


@pytest.mark.parametrize("eps, d", [(40.0, 1), (6.0, 3)])
def test_noise_matches_the_exact_discrete_laplace(eps: float, d: int) -> None:
    """K = (release - lower) / (g span) - n per coordinate, pooled: chi-square against the exact
    discrete Laplace law at the realised a, on 40 bins of [-4/a, 4/a] plus the tails (closed-form
    bin masses); alpha = 1e-3 per case (100,000 rows, so that a few-percent error in the noise
    scale fails it)."""
    n_rows = 100_000
    lo, hi = np.array([-2.0, 0.0, 10.0])[:d], np.array([2.0, 1.0, 30.0])[:d]
    m = LaplaceMechanism(epsilon=eps, lower=lo, upper=hi)
    x = np.tile(np.array([0.5, 7.0, 12.0])[:d], (n_rows, 1))  # 7.0 is clipped to 1.0
    out = m.privatize_rows(x, np.random.default_rng(101)).astype(np.float64)
    z = (np.clip(x[0], lo, hi) - lo) / (hi - lo)
    n = laplace_grid_index(z)
    k = np.rint((out - lo) / ((hi - lo) * LAPLACE_GRID_STEP)) - n  # float32 rounding: exact for these magnitudes
    a = laplace_step_epsilon(eps, d)
    scale = 1.0 / a
    edges = np.unique(np.rint(np.linspace(-4 * scale, 4 * scale, 41)))
    obs = np.histogram(k.ravel(), bins=np.concatenate([[-np.inf], edges[1:-1] - 0.5, [np.inf]]))[0]
    cdf = np.concatenate([[0.0], _dl_cdf(edges[1:-1] - 1, a), [1.0]])
    expected = np.diff(cdf) * k.size
    assert stats.chisquare(obs, expected).pvalue > 1e-3


def test_unbiased_with_the_stated_bias_and_variance() -> None:
    """The mean is x + bias(x) (the clipped value rounded to the grid) within 5 standard errors
    (from variance()); the empirical variance within 5 of its own standard errors of
    variance(). Per column, two-sided 5 sigma: false-failure rate about 6e-7."""
    n = 100_000
    m = LaplaceMechanism(epsilon=4.0, lower=-3.0, upper=5.0)
    x = np.array([-3.0, -1.0, 0.5, 4.9, 9.0])  # the last is clipped to 5.0
    out = m.privatize_rows(np.tile(x, (n, 1)), np.random.default_rng(3)).astype(np.float64)
    var = m.variance(x)
    np.testing.assert_allclose(var, 2 * (5 / 4.0 * 8.0) ** 2, rtol=1e-9)
    target = x + m.bias(x)
    assert np.all(np.abs(target - np.clip(x, -3.0, 5.0)) <= LAPLACE_GRID_STEP / 2 * 8.0)
    assert np.all(np.abs(out.mean(0) - target) <= 5 * np.sqrt(var / n))
    centred = out - target
    m4 = (centred**4).mean(0)
    se_var = np.sqrt((m4 - var**2) / n)
    assert np.all(np.abs(centred.var(0) - var) <= 5 * se_var)


def test_bias_is_the_rounding_to_the_grid() -> None:
    """bias(x) = lower + g rint(z / g) span - x exactly: 0 on grid points, -0.3 g span at 0.3 step
    above one, +0.4 g span at 0.6 step above; the clipping on top outside the bounds."""
    lo, hi = 2.0, 6.0
    m = LaplaceMechanism(epsilon=1.0, lower=lo, upper=hi)
    g = LAPLACE_GRID_STEP * (hi - lo)
    x = np.array([lo + 5 * g, lo + 5.3 * g, lo + 5.6 * g, hi, 100.0])
    np.testing.assert_allclose(m.bias(x), [0.0, -0.3 * g, 0.4 * g, 0.0, hi - 100.0], rtol=1e-6, atol=1e-18)
    rng = np.random.default_rng(0)
    xs = rng.uniform(lo, hi, size=(50, 7))
    assert np.all(np.abs(m.bias(xs)) <= g / 2 * (1 + 1e-9))


# -- the shared scaffolding, for all four mechanisms ------------------------------------------------
BAD_EPSILONS = [
    (float("nan"), ValueError),
    (float("inf"), ValueError),
    (-float("inf"), ValueError),
    (0.0, ValueError),
    (0, ValueError),
    (-0.5, ValueError),
    (True, TypeError),
    ("1", TypeError),
    (None, TypeError),
    ([1.0], TypeError),
]

BAD_PARAMS = [
    ({"lower": 1.0, "upper": 1.0}, ValueError, "lower"),
    ({"lower": 2.0, "upper": 1.0}, ValueError, "lower"),
    ({"lower": [0.0, 5.0], "upper": [1.0, 4.0]}, ValueError, "lower"),
    ({"lower": [0.0, 0.0], "upper": [1.0, 1.0, 1.0]}, ValueError, "lower"),
    ({"lower": float("nan")}, ValueError, "lower"),
    ({"upper": float("inf")}, ValueError, "upper"),
    ({"upper": True}, TypeError, "upper"),
    ({"upper": "1"}, TypeError, "upper"),
    ({"lower": None}, TypeError, "lower"),
    ({"lower": -1e308, "upper": 1e308}, ValueError, "upper - lower"),
]


def _plain(value: Any) -> bool:
    if isinstance(value, dict):
        return all(isinstance(k, str) and _plain(v) for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return all(_plain(v) for v in value)
    return value is None or type(value) in (bool, int, float, str)


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.__name__)
class TestScaledFeatureContract:
    def test_name_scope_and_protocol(self, cls: type) -> None:
        assert cls.name == NAMES[cls]
        assert cls.scope is Scope.FEATURES
        assert isinstance(cls(epsilon=1.0), Mechanism)

    @pytest.mark.parametrize("eps, exc", BAD_EPSILONS)
    def test_bad_epsilon(self, cls: type, eps: Any, exc: type) -> None:
        with pytest.raises(exc, match="epsilon"):
            cls(epsilon=eps)

    @pytest.mark.parametrize("kwargs, exc, name", BAD_PARAMS)
    def test_bad_bounds(self, cls: type, kwargs: dict, exc: type, name: str) -> None:
        with pytest.raises(exc, match=name):
            cls(epsilon=1.0, **kwargs)

    def test_keyword_only_and_epsilon_required(self, cls: type) -> None:
        with pytest.raises(TypeError):
            cls(1.0)
        with pytest.raises(TypeError):
            cls()

    @pytest.mark.parametrize("eps", [0.1, 0.7, 1.0, math.log(9), 10.0])
    def test_guarantee_boundary(self, cls: type, eps: float) -> None:
        g = cls(epsilon=eps, lower=-1.0, upper=3.0).guarantee
        assert isinstance(g, Guarantee)
        assert g.kind is GuaranteeKind.FEATURE_LDP and g.scope is Scope.FEATURES
        assert g.epsilon == eps  # exactly the configured budget
        assert g.check(eps) and not g.check(eps * (1 - 1e-9))
        assert g.delta == 0.0
        assert "feature bounds are public" in g.assumptions
        assert "features are scaled with public bounds and clipped" in g.assumptions
        assert Guarantee.from_dict(json.loads(json.dumps(g.to_dict()))) == g

    def test_params_repr(self, cls: type) -> None:
        m = cls(epsilon=1, lower=[0.0, -1.0], upper=[2.0, 1.0])
        p = m.params()
        assert p == {"epsilon": 1.0, "lower": [0.0, -1.0], "upper": [2.0, 1.0]}
        assert _plain(p)
        json.dumps(p)
        assert cls(**p).params() == p
        r = repr(cls(epsilon=1.0))
        assert r == f"{cls.__name__}(epsilon=1.0, lower=0.0, upper=1.0)"
        assert repr(m) == f"{cls.__name__}(epsilon=1.0, lower=[2 values], upper=[2 values])"

    def test_shapes_and_dtypes(self, cls: type) -> None:
        m = cls(epsilon=2.0, lower=-1.0, upper=3.0)
        rng = np.random.default_rng(0)
        for shape in [(7, 5), (1, 1), (0, 4), (3, 0)]:
            x = rng.uniform(-2, 4, size=shape).astype(np.float32)
            out = m.privatize_rows(x, rng)
            assert out.shape == shape and out.dtype == np.float32
            assert np.all(np.isfinite(out))
        out = m.privatize_rows(np.arange(12).reshape(3, 4), rng)  # integer input
        assert out.dtype == np.float32 and out.shape == (3, 4)
        assert m.variance(np.zeros(4)).shape == (4,)
        assert m.variance(np.zeros((2, 4))).shape == (2, 4)
        assert np.all(m.variance(np.zeros((2, 4))) > 0)
        np.testing.assert_array_equal(m.bias([[-2.0, 0.0, 3.0, 5.0]]), [[1.0, 0.0, 0.0, -2.0]])

    def test_bad_inputs(self, cls: type) -> None:
        m = cls(epsilon=1.0, lower=[0.0, 0.0], upper=[1.0, 1.0])
        rng = np.random.default_rng(0)
        with pytest.raises(ValueError, match="features"):
            m.privatize_rows(np.zeros((3, 5)), rng)
        with pytest.raises(ValueError, match=r"NaN or inf \(first in row 1\)"):
            m.privatize_rows(np.array([[0.1, 0.2], [0.3, np.nan]]), rng)
        with pytest.raises(ValueError, match="2-D"):
            m.privatize_rows(np.zeros(2), rng)
        with pytest.raises(TypeError, match="real numbers"):
            m.privatize_rows(np.zeros((2, 2), dtype=bool), rng)
        with pytest.raises(TypeError, match="Generator"):
            m.privatize_rows(np.zeros((2, 2)), 42)
        with pytest.raises(TypeError, match="Generator"):
            m.privatize_rows(np.zeros((2, 2)), np.random.RandomState(0))

    @pytest.mark.parametrize("eps", [1.0, 12.0, 45.0])
    def test_chunking_does_not_change_the_output(
        self, cls: type, eps: float, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        x = np.random.default_rng(3).random((301, 9))
        m = cls(epsilon=eps)
        whole = m.privatize_rows(x, np.random.default_rng(11))
        monkeypatch.setattr(laplace_module, "_CHUNK_ENTRIES", 20)
        chunked = m.privatize_rows(x, np.random.default_rng(11))
        np.testing.assert_array_equal(whole, chunked)

    def test_clipping_is_exact(self, cls: type) -> None:
        """A value beyond a bound is privatized exactly as the bound (same seed, same output)."""
        m = cls(epsilon=2.0, lower=[-1.0, 0.0], upper=[1.0, 10.0])
        far = np.array([[-50.0, 1e9], [0.5, -3.0]])
        clipped = np.array([[-1.0, 10.0], [0.5, 0.0]])
        a = m.privatize_rows(far, np.random.default_rng(9))
        np.testing.assert_array_equal(a, m.privatize_rows(clipped, np.random.default_rng(9)))

    def test_scaling_uses_the_public_bounds(self, cls: type) -> None:
        """Bounds (0, 100) on x equal bounds (0, 1) on x / 100, scaled by 100: the data's own
        range (here [0, 5]) plays no part."""
        x = np.linspace(0.0, 5.0, 40).reshape(10, 4)
        a = cls(epsilon=1.5, lower=0.0, upper=100.0).privatize_rows(x, np.random.default_rng(4))
        b = cls(epsilon=1.5, lower=0.0, upper=1.0).privatize_rows(x / 100.0, np.random.default_rng(4))
        np.testing.assert_allclose(a, 100.0 * b.astype(np.float64), rtol=1e-5, atol=1e-3)

    def test_privatize_graph_replaces_x_only(self, cls: type) -> None:
        x = np.random.default_rng(0).random((4, 3)).astype(np.float32)
        g = GraphData(
            num_nodes=4, x=x, edges_public=np.array([[0, 1], [1, 2]]), edges_private=np.array([[2], [3]])
        )
        out = cls(epsilon=1.0).privatize(g, np.random.default_rng(0))
        assert out is not g and out.x is not None and out.x.shape == (4, 3) and out.x.dtype == np.float32
        assert np.array_equal(out.edges_public, g.edges_public)
        assert np.array_equal(out.edges_private, g.edges_private)
        np.testing.assert_array_equal(g.x, x)  # the input is not mutated
        with pytest.raises(ValueError, match="x is None"):
            cls(epsilon=1.0).privatize(GraphData(num_nodes=3), np.random.default_rng(0))
        with pytest.raises(TypeError, match="GraphData"):
            cls(epsilon=1.0).privatize(x, np.random.default_rng(0))

    def test_input_is_not_mutated(self, cls: type) -> None:
        x = np.random.default_rng(1).uniform(-1, 2, size=(50, 6))
        before = x.copy()
        cls(epsilon=1.0).privatize_rows(x, np.random.default_rng(0))
        np.testing.assert_array_equal(x, before)
