"""LaplaceMechanism: exact density ratio, samples against the analytic CDF, unbiasedness; and the
contract of the shared bounded-feature scaffolding, run for all four feature-LDP baselines
(Laplace, Duchi, Piecewise, Hybrid) because they share it (laplace._ScaledFeatureMechanism).

The registry contract test (test_contract.py) iterates the registry, which the lead extends;
``TestScaledFeatureContract`` below holds the equivalent checks until then.

Statistical tests use fixed seeds (deterministic as written); the stated false-failure rates are
what each test would have over random seeds.
"""

from __future__ import annotations

import json
import math
from typing import Any

import numpy as np
import pytest
from scipy import stats

from privgraph.graph import GraphData
from privgraph.mechanisms.base import Guarantee, GuaranteeKind, Mechanism, Scope
from privgraph.mechanisms.features import scaled as laplace_module
from privgraph.mechanisms.features.duchi import DuchiMechanism
from privgraph.mechanisms.features.hybrid import HybridMechanism
from privgraph.mechanisms.features.laplace import (
    LaplaceMechanism,
    laplace_cdf,
    laplace_density,
    laplace_scale,
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


# -- the exact privacy loss ------------------------------------------------------------------------
@pytest.mark.parametrize("eps", [0.05, 0.5, 1.0, 3.0, 10.0])
def test_density_ratio_on_a_grid(eps: float) -> None:
    """sup over y (grid of [-1, 2]^2) and inputs z, z' (grid of [0, 1]^2) of f(y|z)/f(y|z') is e^eps.

    d = 2, so b = 2 / eps; the supremum is attained for opposite corners and y beyond both.
    """
    d = 2
    g = np.linspace(-1.0, 2.0, 61)
    y = np.stack(np.meshgrid(g, g, indexing="ij"), axis=-1).reshape(-1, 1, d)  # [Y, 1, d]
    zg = np.linspace(0.0, 1.0, 5)
    z = np.stack(np.meshgrid(zg, zg, indexing="ij"), axis=-1).reshape(1, -1, d)  # [1, Z, d]
    log_f = np.log(laplace_density(y, z, eps, d)).sum(axis=-1)  # [Y, Z]: the joint log-density
    worst = float(np.max(log_f.max(axis=1) - log_f.min(axis=1)))
    assert worst <= eps * (1 + 1e-12)
    assert worst == pytest.approx(eps, rel=1e-9)
    # attained at the boundary: z = (1, 1), z' = (0, 0), y = (2, 2)
    y2 = [2.0, 2.0]
    r = np.log(laplace_density(y2, [1.0, 1.0], eps, d) / laplace_density(y2, [0.0, 0.0], eps, d))
    assert float(r.sum()) == pytest.approx(eps, rel=1e-9)


def test_guarantee_names_continuous_laplace() -> None:
    g = LaplaceMechanism(epsilon=1.0).guarantee
    assert any(a.startswith("continuous floating-point Laplace") for a in g.assumptions)


def test_scale_is_d_over_eps() -> None:
    assert laplace_scale(0.5, 128) == 256.0
    assert laplace_variance(2.0, 3) == pytest.approx(2 * 1.5**2)
    with pytest.raises(ValueError, match="epsilon"):
        laplace_scale(1e-320, 10**6)
    with pytest.raises(ValueError, match="d"):
        laplace_scale(1.0, 0)


# -- samples against the analytic distribution ------------------------------------------------------
@pytest.mark.parametrize("eps", [0.3, 2.0, 20.0])
def test_noise_matches_the_laplace_cdf(eps: float) -> None:
    """KS of the noise per feature against the analytic CDF; each rejects at alpha = 1e-3."""
    n, d = 20_000, 3
    lo, hi = np.array([-2.0, 0.0, 10.0]), np.array([2.0, 1.0, 30.0])
    m = LaplaceMechanism(epsilon=eps, lower=lo, upper=hi)
    x = np.tile([0.5, 7.0, 12.0], (n, 1))  # 7.0 is clipped to 1.0
    out = m.privatize_rows(x, np.random.default_rng(101)).astype(np.float64)
    z = (np.clip(x[0], lo, hi) - lo) / (hi - lo)
    y = (out - lo) / (hi - lo)  # back on the unit scale
    for j in range(d):
        res = stats.kstest(y[:, j], lambda v: laplace_cdf(v, z[j], eps, d))
        assert res.pvalue > 1e-3, (eps, j, res)


def test_unbiased_with_the_stated_variance() -> None:
    """Mean within 5 standard errors (from variance()) of the clipped input; the empirical
    variance within 5 of its own standard errors of variance(). Per column, two-sided 5 sigma:
    false-failure rate about 6e-7 (normal approximation)."""
    n = 100_000
    m = LaplaceMechanism(epsilon=4.0, lower=-3.0, upper=5.0)
    x = np.array([-3.0, -1.0, 0.5, 4.9, 9.0])  # the last is clipped to 5.0
    out = m.privatize_rows(np.tile(x, (n, 1)), np.random.default_rng(3)).astype(np.float64)
    var = m.variance(x)
    np.testing.assert_allclose(var, 2 * (5 / 4.0 * 8.0) ** 2)
    target = x + m.bias(x)
    np.testing.assert_allclose(target, np.clip(x, -3.0, 5.0))
    assert np.all(np.abs(out.mean(0) - target) <= 5 * np.sqrt(var / n))
    centred = out - target
    m4 = (centred**4).mean(0)
    se_var = np.sqrt((m4 - var**2) / n)
    assert np.all(np.abs(centred.var(0) - var) <= 5 * se_var)


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

    def test_same_seed_same_output_and_no_global_rng(self, cls: type) -> None:
        x = np.random.default_rng(5).random((300, 16))
        m = cls(epsilon=3.0)
        state = np.random.get_state()
        a = m.privatize_rows(x, np.random.default_rng(42))
        b = m.privatize_rows(x, np.random.default_rng(42))
        c = m.privatize_rows(x, np.random.default_rng(43))
        after = np.random.get_state()
        np.testing.assert_array_equal(a, b)
        assert not np.array_equal(a, c)
        assert after[0] == state[0] and np.array_equal(after[1], state[1]) and after[2:] == state[2:]

    @pytest.mark.parametrize("eps", [1.0, 12.0, 1000.0])
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
