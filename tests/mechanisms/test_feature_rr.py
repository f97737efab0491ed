"""FeatureRR: the exact privacy loss of the kernel, the sampler against the kernel, scaling, validation.

Statistical tests use fixed seeds (they are deterministic as written); the stated false-failure
rates are what each test would have over random seeds.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from privgraph.graph import GraphData
from privgraph.guarantee import Guarantee, GuaranteeKind, Scope
from privgraph.mechanisms.features import FeatureRR, worst_case_log_ratio

KS = [2, 3, 4, 8, 16, 33]
EPSILONS = [1e-6, 0.01, 0.1, 0.5, 1.0, 2.0, 5.0, 20.0, 60.0]


# -- the exact privacy loss --------------------------------------------------------------------
@pytest.mark.parametrize("k", KS)
@pytest.mark.parametrize("eps", EPSILONS)
def test_worst_case_ratio_equals_eps_i(k: int, eps: float) -> None:
    """max over (u, t, t') of log P(u|t)/P(u|t') is exactly eps_i on the {1/k..1} grid."""
    P = FeatureRR(epsilon=1.0, bins=k).transition_matrix(eps)
    assert P.shape == (k, k)
    np.testing.assert_allclose(P.sum(axis=1), 1.0, rtol=1e-12)
    w = worst_case_log_ratio(P)
    assert abs(w - eps) <= 1e-9 * max(1.0, eps)
    assert w <= eps * (1 + 1e-9) + 1e-15  # never exceeds (float slack only)


def test_worst_case_ratio_is_attained_at_the_extremes() -> None:
    k, eps = 5, 1.3
    P = FeatureRR(epsilon=1.0, bins=k).transition_matrix(eps)
    assert math.log(P[0, 0] / P[k - 1, 0]) == pytest.approx(eps, rel=1e-12)


def test_zero_budget_is_uniform() -> None:
    P = FeatureRR(epsilon=1.0, bins=6).transition_matrix(0.0)
    np.testing.assert_allclose(P, 1 / 6)
    assert worst_case_log_ratio(P) == 0.0


def test_the_all_range_grid_would_spend_more() -> None:
    """The ARCHITECTURE note: sigma = (k-1)/(k eps) on a grid spanning [0, 1] spends k eps/(k-1)."""
    k, eps = 4, 1.0
    grid = np.arange(k) / (k - 1)  # 0, 1/(k-1), ..., 1
    sigma = (k - 1) / (k * eps)
    W = np.exp(-np.abs(grid[:, None] - grid[None, :]) / sigma)
    P = W / W.sum(axis=1, keepdims=True)
    assert worst_case_log_ratio(P) == pytest.approx(k * eps / (k - 1), rel=1e-12)


def test_worst_case_log_ratio_of_a_kernel_with_zeros() -> None:
    assert worst_case_log_ratio(np.eye(3)) == math.inf
    assert worst_case_log_ratio(np.array([[0.5, 0.5, 0.0], [0.25, 0.75, 0.0]])) == pytest.approx(math.log(2))
    with pytest.raises(ValueError):
        worst_case_log_ratio(np.array([[0.5, np.nan]]))


@pytest.mark.parametrize("eps", [0.1, 1.0, math.log(9)])
def test_guarantee_boundary(eps: float) -> None:
    """OpenDP-style boundary: private at eps (the eps_i sum to at most eps), not at eps (1 - 1e-9)."""
    g = FeatureRR(epsilon=eps, bins=4).guarantee
    assert isinstance(g, Guarantee)
    assert g.kind is GuaranteeKind.FEATURE_LDP and g.scope is Scope.FEATURES
    assert g.epsilon == eps
    assert g.check(eps)
    assert g.check(g.epsilon)
    assert not g.check(eps * (1 - 1e-9))
    assert "feature bounds are public" in g.assumptions
    assert "features are scaled with public bounds and clipped" in g.assumptions
    # the mechanism's true loss (all features composed) is within the stated epsilon
    m = FeatureRR(epsilon=eps, bins=4, theta=[3.0, 1.0, 0.0, 2.0])
    loss = sum(worst_case_log_ratio(m.transition_matrix(e)) for e in m.per_feature_epsilon())
    assert loss <= g.epsilon * (1 + 1e-9)


# -- the sampler against the kernel --------------------------------------------------------------
@pytest.mark.parametrize("k", [2, 3, 5, 8])
@pytest.mark.parametrize("eps", [0.0, 0.05, 1.0, 4.0, 30.0])
def test_sampler_matches_transition_matrix(k: int, eps: float) -> None:
    """Chi-square goodness of fit of the outputs for every input bin t and both features.

    Each (k, eps, t, feature) test rejects at alpha = 1e-3 (false-failure rate 1e-3 each over
    random seeds; here the seed is fixed). Feature 0 carries the budget eps (eps = 0: a theta of
    0, the uniform kernel), feature 1 the rest of the budget. eps = 30 nearly a point mass at t
    (off-centre outputs with expected counts below 1e-9 must not occur).
    """
    n = 20_000
    rng = np.random.default_rng(20240 + k)
    if eps == 0.0:
        m = FeatureRR(epsilon=1.0, bins=k, theta=[0.0, 1.0])
    else:
        m = FeatureRR(epsilon=2 * eps, bins=k, theta=[1.0, 1.0])
    eps_cols = m.per_feature_epsilon()
    assert eps_cols[0] == pytest.approx(eps)
    kernels = [m.transition_matrix(e) for e in eps_cols]
    for t in range(1, k + 1):
        x = np.full((n, 2), (t - 0.5) / k)
        out = m.privatize_rows(x, rng)
        u = np.rint(out * k).astype(int)
        for col in (0, 1):
            counts = np.bincount(u[:, col] - 1, minlength=k)
            assert counts.sum() == n
            expected = n * kernels[col][t - 1]
            live = expected > 1e-9
            assert np.all(counts[~live] == 0)
            # the outputs with an expected count below 5 pooled: an exact binomial test (alpha
            # 1e-3) of their total; the others by chi-square
            small = expected < 5
            if small.any():
                pooled = stats.binomtest(int(counts[small].sum()), n, expected[small].sum() / n)
                assert pooled.pvalue > 1e-3, (k, eps, t, col, counts, expected)
            if np.count_nonzero(~small) < 2:
                continue
            res = stats.chisquare(counts[~small], expected[~small] * counts[~small].sum() / expected[~small].sum())
            assert res.pvalue > 1e-3, (k, eps, t, col, counts, expected)


def test_sampler_matches_a_large_grid() -> None:
    """k = 64, one chi-square over the pooled outputs of a few input bins (alpha = 1e-3)."""
    k, eps = 64, 3.0
    m = FeatureRR(epsilon=eps, bins=k)
    P = m.transition_matrix(eps)
    rng = np.random.default_rng(7)
    for t in (1, 17, 64):
        out = m.privatize_rows(np.full((60_000, 1), t / k), rng)
        counts = np.bincount(np.rint(out[:, 0] * k).astype(int) - 1, minlength=k)
        # merge outputs with an expected count < 5 into one cell
        exp = 60_000 * P[t - 1]
        small = exp < 5
        obs_cells = np.append(counts[~small], counts[small].sum())
        exp_cells = np.append(exp[~small], exp[small].sum())
        if exp_cells[-1] == 0:
            obs_cells, exp_cells = obs_cells[:-1], exp_cells[:-1]
        assert stats.chisquare(obs_cells, exp_cells * obs_cells.sum() / exp_cells.sum()).pvalue > 1e-3


# -- scaling, binning, grid ------------------------------------------------------------------------
def test_binning_follows_the_paper() -> None:
    """t/k with (t-1)/k <= z <= t/k (the smallest t), z = 0 -> t = 1; read off with a huge eps."""
    k = 4
    m = FeatureRR(epsilon=45.0, bins=k)  # flips with probability ~e^-15 per entry
    z = np.array([[0.0, 0.1, 0.25, 0.2500001, 0.5, 0.74, 0.75, 0.99, 1.0]], dtype=np.float64)
    out = m.privatize_rows(z.T, np.random.default_rng(0))[:, 0]
    np.testing.assert_allclose(out * k, [1, 1, 1, 2, 2, 3, 3, 4, 4])


def test_scaling_uses_the_public_bounds_and_clips() -> None:
    k = 5
    m = FeatureRR(epsilon=90.0, bins=k, lower=[-10.0, 0.0], upper=[10.0, 100.0])
    x = np.array(
        [
            [-10.0, 0.0],  # the bounds: bins 1 and 1
            [10.0, 100.0],  # bins k and k
            [-50.0, 1e9],  # clipped: 1 and k
            [0.0, 30.0],  # z = 0.5 -> bin 3; z = 0.3 -> bin 2
        ],
        dtype=np.float32,
    )
    out = m.privatize_rows(x, np.random.default_rng(0))
    np.testing.assert_allclose(out * k, [[1, 1], [k, k], [1, k], [3, 2]])


def test_scaling_ignores_the_datas_own_range() -> None:
    """A narrow data range inside wide public bounds lands in the low bins, not spread to [0, 1]."""
    m = FeatureRR(epsilon=45.0, bins=2, lower=0.0, upper=100.0)  # flips with probability e^-45
    x = np.linspace(0.0, 5.0, 50)[:, None]
    out = m.privatize_rows(x, np.random.default_rng(0))
    assert out.max() == pytest.approx(0.5)


def test_outputs_lie_on_the_grid() -> None:
    k = 7
    m = FeatureRR(epsilon=2.0, bins=k, lower=-1.0, upper=3.0)
    x = np.random.default_rng(1).normal(1.0, 2.0, size=(500, 13)).astype(np.float32)
    out = m.privatize_rows(x, np.random.default_rng(2))
    assert out.dtype == np.float32 and out.shape == x.shape
    u = out * k
    np.testing.assert_allclose(u, np.rint(u), atol=1e-5)
    assert u.min() >= 1 - 1e-5 and u.max() <= k + 1e-5


def test_theta_normalisation_and_budget_split() -> None:
    m = FeatureRR(epsilon=2.0, bins=3, theta=[1.0, 3.0, 0.0, 4.0])
    eps_i = m.per_feature_epsilon()
    np.testing.assert_allclose(eps_i, [0.25, 0.75, 0.0, 1.0])
    assert math.fsum(eps_i) <= 2.0
    assert math.fsum(eps_i) == pytest.approx(2.0, rel=1e-12)
    assert m.params()["theta"] == pytest.approx([0.125, 0.375, 0.0, 0.5])


@pytest.mark.parametrize("d", [1, 3, 7, 10, 128, 1000])
def test_uniform_budgets_never_exceed_eps(d: int) -> None:
    m = FeatureRR(epsilon=0.3, bins=2)
    eps_i = m.per_feature_epsilon(d)
    assert eps_i.shape == (d,)
    assert math.fsum(eps_i) <= 0.3
    assert math.fsum(eps_i) == pytest.approx(0.3, rel=1e-12)


def test_chunking_does_not_change_the_output(monkeypatch: pytest.MonkeyPatch) -> None:
    import privgraph.mechanisms.features.feature_rr as mod

    x = np.random.default_rng(3).random((301, 9))
    m = FeatureRR(epsilon=3.0, bins=6)
    whole = m.privatize_rows(x, np.random.default_rng(11))
    monkeypatch.setattr(mod, "_CHUNK_ENTRIES", 20)
    chunked = m.privatize_rows(x, np.random.default_rng(11))
    np.testing.assert_array_equal(whole, chunked)


# -- graph interface --------------------------------------------------------------------------------
def test_privatize_graph_replaces_x_only() -> None:
    x = np.random.default_rng(0).random((4, 3)).astype(np.float32)
    g = GraphData(
        num_nodes=4, x=x, edges_public=np.array([[0, 1], [1, 2]]), edges_private=np.array([[2], [3]])
    )
    out = FeatureRR(epsilon=1.0, bins=3).privatize(g, np.random.default_rng(0))
    assert out is not g and out.x is not None and out.x.shape == (4, 3)
    assert np.array_equal(out.edges_public, g.edges_public)
    assert np.array_equal(out.edges_private, g.edges_private)
    np.testing.assert_array_equal(g.x, x)  # the input is not mutated


def test_privatize_refuses_an_unattributed_graph() -> None:
    g = GraphData(num_nodes=3)
    with pytest.raises(ValueError, match="x is None"):
        FeatureRR(epsilon=1.0).privatize(g, np.random.default_rng(0))


def test_feature_count_mismatch() -> None:
    m = FeatureRR(epsilon=1.0, theta=[1.0, 2.0])
    with pytest.raises(ValueError, match="features"):
        m.privatize_rows(np.zeros((3, 5)), np.random.default_rng(0))
    with pytest.raises(ValueError, match="NaN"):
        FeatureRR(epsilon=1.0).privatize_rows(np.array([[0.1, np.nan]]), np.random.default_rng(0))


# -- reproducibility and randomness source ----------------------------------------------------------
# -- parameter validation ---------------------------------------------------------------------------
@pytest.mark.parametrize(
    "eps, exc",
    [
        (float("nan"), ValueError),
        (float("inf"), ValueError),
        (-float("inf"), ValueError),
        (0.0, ValueError),
        (0, ValueError),
        (-1.0, ValueError),
        (True, TypeError),
        ("1", TypeError),
        (None, TypeError),
        ([1.0], TypeError),
    ],
)
def test_bad_epsilon(eps: object, exc: type) -> None:
    with pytest.raises(exc, match="epsilon"):
        FeatureRR(epsilon=eps)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "kwargs, exc, name",
    [
        ({"bins": 1}, ValueError, "bins"),
        ({"bins": 0}, ValueError, "bins"),
        ({"bins": 2.0}, TypeError, "bins"),
        ({"bins": True}, TypeError, "bins"),
        ({"theta": [1.0, -0.1]}, ValueError, "theta"),
        ({"theta": [0.0, 0.0]}, ValueError, "theta"),
        ({"theta": [1.0, float("nan")]}, ValueError, "theta"),
        ({"theta": [1.0, float("inf")]}, ValueError, "theta"),
        ({"theta": []}, ValueError, "theta"),
        ({"theta": [[1.0, 2.0]]}, ValueError, "theta"),
        ({"theta": 1.0}, TypeError, "theta"),
        ({"theta": ["a", "b"]}, TypeError, "theta"),
        ({"lower": 1.0, "upper": 1.0}, ValueError, "lower"),
        ({"lower": 2.0, "upper": 1.0}, ValueError, "lower"),
        ({"lower": [0.0, 5.0], "upper": [1.0, 4.0]}, ValueError, "lower"),
        ({"lower": float("nan")}, ValueError, "lower"),
        ({"upper": float("inf")}, ValueError, "upper"),
        ({"upper": True}, TypeError, "upper"),
        ({"upper": "1"}, TypeError, "upper"),
        ({"theta": [1.0, 2.0], "lower": [0.0, 0.0, 0.0]}, ValueError, "theta"),
    ],
)
def test_bad_parameters(kwargs: dict, exc: type, name: str) -> None:
    with pytest.raises(exc, match=name):
        FeatureRR(epsilon=1.0, **kwargs)


def test_constructor_is_keyword_only() -> None:
    with pytest.raises(TypeError):
        FeatureRR(1.0)  # type: ignore[misc]


def test_repr_and_params() -> None:
    m = FeatureRR(epsilon=1.0, bins=2)
    assert repr(m) == "FeatureRR(epsilon=1.0, bins=2)"
    assert m.params() == {"epsilon": 1.0, "bins": 2, "theta": None, "lower": 0.0, "upper": 1.0}
    assert FeatureRR.name == "feature_rr" and FeatureRR.scope is Scope.FEATURES


def test_per_feature_budget_above_the_exact_sampling_cap_is_refused() -> None:
    """eps_i = eps_f theta_i above 50 cannot be realised in float64: refused, not weakened."""
    with pytest.raises(ValueError, match="per-feature budget eps_f \\* theta_i = 60 .* exceeds 50"):
        FeatureRR(epsilon=60.0, theta=[1.0, 0.0])
    m = FeatureRR(epsilon=120.0)  # uniform theta: d known at privatize time
    m.privatize_rows(np.zeros((2, 3)), np.random.default_rng(0))  # 40 per feature: fine
    with pytest.raises(ValueError, match="exceeds 50"):
        m.privatize_rows(np.zeros((2, 2)), np.random.default_rng(0))  # 60 per feature


def test_two_bin_flip_probability_is_exact_at_large_budget() -> None:
    """k = 2 flips with probability 1/(1 + e^eps_i), drawn with bernoulli_exact: at eps_i = 30 a
    plain ``u < p`` (2^-53 resolution) would be off by 1.2e-3 relative; the exact sampler is not.
    Checked through the sampler's own rule on a grid of uniforms around the threshold."""
    from privgraph.mechanisms.features.scaled import bernoulli_exact

    p = 1.0 / (1.0 + np.exp(30.0))
    f = np.floor(p * 2.0**53)
    u_hi = np.array([f - 1, f, f, f + 1]) / 2.0**53
    u_lo = np.array([0.99, 0.0, 0.999999, 0.0])
    phi = p * 2.0**53 - f
    assert bernoulli_exact(p, u_hi, u_lo).tolist() == [True, True, bool(0.999999 < phi), False]
