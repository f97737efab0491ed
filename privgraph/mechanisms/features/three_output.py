r"""Three-Outputs (Zhao et al., IEEE IoT-J 2020) with k-of-d coordinate sampling.

Also home of :class:`SampledFeatureMechanism`, the base of the coordinate-sampling mechanisms
that release on the mechanism's own scale and estimate afterwards
(:mod:`~privgraph.mechanisms.features.pm_sub`, :mod:`~privgraph.mechanisms.features.multibit`);
the scaffolding they share with the other feature mechanisms (bounds, the budget split, the
exact samplers, the chunked loop) lives in :mod:`~privgraph.mechanisms.features.scaled` and is
re-exported here.
"""

from __future__ import annotations

import math
from typing import Any, ClassVar

import numpy as np

from privgraph.guarantee.params import check_epsilon
from privgraph.mechanisms.base import EpsilonRange
from privgraph.mechanisms.features import scaled
from privgraph.mechanisms.features.scaled import (
    MAX_COORDINATE_EPSILON,
    KSampledMixin,
    ScaledFeatureMechanism,
    bernoulli_exact,
    categorical3_exact,
    check_rows,
    scatter_coordinates,
    split_epsilon,
    wang_sample_size,
)
from privgraph.mechanisms.registry import register_mechanism

__all__ = [
    "ThreeOutputMechanism",
    "SampledFeatureMechanism",
    "EPS_STAR",
    "three_output_p00",
    "three_output_c",
    "three_output_pmf",
    "three_output_variance",
    "wang_sample_size",
    "split_epsilon",
    "bernoulli_exact",
    "categorical3_exact",
    "MAX_COORDINATE_EPSILON",
]

# The budget above which the optimal P_{0<-0} of Three-Outputs sits on its feasibility bound
# e^eps / (e^eps + 2): the root of P_cubic(eps) = e^eps / (e^eps + 2), eps* = ln 5.53112887...
# (computed with brentq to 1e-15; tests/mechanisms/test_three_output.py re-derives it).
EPS_STAR = 1.7103919310754503
_LN2 = math.log(2.0)


# -- the one-dimensional Three-Outputs mechanism ----------------------------------------------------
def three_output_p00(epsilon: float) -> float:
    r"""Zhao et al.'s :math:`P_{0 \leftarrow 0}` (the probability of output 0 at input 0).

    .. math::
        P_{0\leftarrow 0} = \begin{cases}
        0, & \varepsilon < \ln 2,\\
        -\tfrac16\left(-e^{2\varepsilon} - 4e^{\varepsilon} - 5
            + 2\sqrt{\Delta_0}\cos\left(\tfrac{\pi}{3}
            + \tfrac13\arccos\left(-\tfrac{\Delta_1}{2\Delta_0^{3/2}}\right)\right)\right),
            & \ln 2 \le \varepsilon \le \varepsilon^\star,\\
        \dfrac{e^{\varepsilon}}{e^{\varepsilon} + 2}, & \varepsilon > \varepsilon^\star,
        \end{cases}

    with :math:`\Delta_0 = e^{4\varepsilon} + 14e^{3\varepsilon} + 50e^{2\varepsilon}
    - 2e^{\varepsilon} + 25`, :math:`\Delta_1 = -2e^{6\varepsilon} - 42e^{5\varepsilon}
    - 270e^{4\varepsilon} - 404e^{3\varepsilon} - 918e^{2\varepsilon} + 30e^{\varepsilon} - 250`
    and :math:`\varepsilon^\star = \ln 5.5311\ldots` (:data:`EPS_STAR`). It minimises the
    worst-case variance :math:`\max_x \mathrm{Var}[Y \mid x]` subject to
    :math:`0 \le P_{0\leftarrow 0} \le e^\varepsilon / (e^\varepsilon + 2)` (the bound that keeps
    :math:`P_{C\leftarrow 0} \ge P_{C\leftarrow -1}`); the tests re-derive it by numerical minimax.
    Any value in that range gives the same :math:`\varepsilon`-LDP; the choice only sets utility.
    """
    return _p00_pair(check_epsilon(epsilon, "epsilon"))[0]


def _p00_pair(eps: float) -> tuple[float, float]:
    """``(P00, 1 - P00)``, the complement computed without cancellation (``2q / (1 + 2q)`` on the
    bound branch, where ``P00 = 1 / (1 + 2q)`` rounds to 1 for large eps)."""
    if eps < _LN2:
        return 0.0, 1.0
    q = math.exp(-eps)
    if eps > 2.0:  # > EPS_STAR: the cubic's root lies above the bound (and e^{6 eps} may overflow)
        return 1.0 / (1.0 + 2.0 * q), 2.0 * q / (1.0 + 2.0 * q)  # e^eps / (e^eps + 2)
    bound = 1.0 / (1.0 + 2.0 * q)
    e = math.exp(eps)
    d0 = e**4 + 14 * e**3 + 50 * e**2 - 2 * e + 25
    d1 = -2 * e**6 - 42 * e**5 - 270 * e**4 - 404 * e**3 - 918 * e**2 + 30 * e - 250
    arg = max(-1.0, min(1.0, -d1 / (2.0 * d0**1.5)))
    p = -(-(e**2) - 4 * e - 5 + 2 * math.sqrt(d0) * math.cos(math.pi / 3 + math.acos(arg) / 3)) / 6
    p = min(max(p, 0.0), bound)  # the clamp to 0 only absorbs float error at eps = ln 2
    return p, 1.0 - p  # p <= 0.79 here: no cancellation


def three_output_c(epsilon: float) -> float:
    r"""The output magnitude :math:`C = \dfrac{e^\varepsilon (e^\varepsilon + 1)}
    {(e^\varepsilon - 1)(e^\varepsilon - P_{0\leftarrow 0})}` that makes :math:`Y` unbiased."""
    eps = check_epsilon(epsilon, "epsilon")
    q = math.exp(-eps)
    p00 = _p00_pair(eps)[0]
    return (1.0 + q) / (-math.expm1(-eps) * (1.0 - p00 * q))


def _anchors(eps: float) -> tuple[float, float, float, float, float]:
    """``(P00, P_{0<-1}, P_{C<-1}, P_{C<-0}, P_{C<--1})`` in overflow-free form (q = e^-eps)."""
    q = math.exp(-eps)
    p00, one_minus_p00 = _p00_pair(eps)
    keep = (1.0 - p00 * q) / (1.0 + q)  # (e^eps - P00) / (e^eps + 1)
    return p00, p00 * q, keep, one_minus_p00 / 2.0, keep * q


def three_output_pmf(t: Any, epsilon: float) -> np.ndarray:
    r"""The exact output distribution of Three-Outputs: ``[..., 3]`` = :math:`\Pr(Y = -C, 0, +C \mid t)`.

    Anchored at :math:`t \in \{-1, 0, 1\}` and linear in :math:`t` on :math:`[-1, 0]` and
    :math:`[0, 1]`:

    .. math::
        P_{0\leftarrow \pm 1} = \frac{P_{0\leftarrow 0}}{e^\varepsilon}, \quad
        P_{C\leftarrow 0} = P_{-C\leftarrow 0} = \frac{1 - P_{0\leftarrow 0}}{2}, \quad
        P_{C\leftarrow 1} = P_{-C\leftarrow -1} = \frac{e^\varepsilon - P_{0\leftarrow 0}}{e^\varepsilon + 1},
        \quad
        P_{C\leftarrow -1} = P_{-C\leftarrow 1} = \frac{e^\varepsilon - P_{0\leftarrow 0}}
        {e^\varepsilon (e^\varepsilon + 1)}.

    Args:
        t (array-like): inputs in :math:`[-1, 1]` (not clipped here; out-of-range raises).
        epsilon (float): the budget of this one coordinate.
    """
    eps = check_epsilon(epsilon, "epsilon")
    t = np.asarray(t, dtype=np.float64)
    if np.any(~np.isfinite(t)) or np.any(np.abs(t) > 1.0):
        raise ValueError("t must lie in [-1, 1]")
    return _pmf_unchecked(t, eps)


def _pmf_unchecked(t: np.ndarray, eps: float) -> np.ndarray:
    """The pmf, each probability a convex combination of two anchors (no cancellation, so small
    probabilities keep their relative accuracy): with ``a = |t|``,
    ``P(0) = (1 - a) P00 + a P01``, ``P(+C) = (1 - a) Pc0 + a (Pc1 if t >= 0 else Pc-1)``."""
    return np.stack(_pmf_parts(t, eps), axis=-1)


def _pmf_parts(t: np.ndarray, eps: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    p00, p01, pc1, pc0, pcm1 = _anchors(eps)
    a = np.abs(t)
    b = 1.0 - a
    p0 = b * p00 + a * p01
    far = b * pc0 + a * pcm1  # the output on the other side of t
    near = b * pc0 + a * pc1  # the output on t's side
    pos_side = t >= 0
    return np.where(pos_side, far, near), p0, np.where(pos_side, near, far)


def three_output_variance(t: Any, epsilon: float) -> np.ndarray:
    r""":math:`\mathrm{Var}[Y \mid t] = C^2 (1 - P_{0\leftarrow t}) - t^2` (the mechanism is unbiased)."""
    eps = check_epsilon(epsilon, "epsilon")
    t = np.asarray(t, dtype=np.float64)
    c = three_output_c(eps)
    P = three_output_pmf(t, eps)
    return c * c * (P[..., 0] + P[..., 2]) - t * t  # 1 - P(0) without cancellation


# -- the coordinate-sampling base ---------------------------------------------------------------------
class SampledFeatureMechanism(KSampledMixin, ScaledFeatureMechanism):
    """Base of the feature mechanisms that perturb ``k`` of ``d`` coordinates per node and
    release them on the mechanism's scale (an :meth:`estimate` maps a release to feature units).

    Subclasses set ``name``, ``_divisor`` (the ``c`` of :func:`wang_sample_size`), ``_uniforms``
    (``n_u``) and implement :meth:`_perturb` (the released values ``[rows, k]`` of the sampled
    coordinates from their scaled inputs :math:`z \\in [0, 1]` and ``n_u`` uniforms each) and
    :meth:`estimate`.

    Randomness layout: that of :class:`~privgraph.mechanisms.features.scaled.KSampledMixin`, the
    last ``n_u k`` columns grouped by coordinate (``n_u`` per sampled coordinate, for
    :func:`bernoulli_exact` / :func:`categorical3_exact`). So for a fixed generator state the
    output does not depend on the chunking.
    """

    domain: ClassVar[tuple[float, float]] = (0.0, 1.0)
    _uniforms: ClassVar[int] = 1  # uniforms per sampled coordinate
    _assumptions: ClassVar[tuple[str, ...]] = (
        "the sampled coordinates are drawn independently of the data",
        "the sampler realises the float64 output probabilities exactly (106-bit uniforms); "
        "the float64 probabilities match the kernel to a few ulps",
    )

    def coordinate_epsilon(self, num_features: int | None = None) -> float:
        """The budget of each sampled coordinate, ``epsilon / k`` (``k`` of them sum to at most
        ``epsilon``); refused above ``epsilon_range.high`` (:data:`MAX_COORDINATE_EPSILON`)."""
        k = self.num_sampled(num_features)
        return self._check_coordinate(split_epsilon(self.epsilon, k), "epsilon / k")

    def __repr__(self) -> str:
        return f"{type(self).__name__}(epsilon={self.epsilon!r})"

    # -- privatization ------------------------------------------------------------------------
    # privatize_rows (inherited): the released values ``[rows, d]`` (float32), non-sampled
    # coordinates 0; privatize: the graph with x = estimate(release), in feature units.
    def _check_dimension(self, d: int) -> None:
        self.coordinate_epsilon(d)

    def _release_block(self, t: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        rows, d = t.shape
        k = self.num_sampled(d)
        idx, z, u = self._draw_sampled(t, k, self._uniforms, rng)
        y = self._perturb(z, u.reshape(rows, k, self._uniforms), self.coordinate_epsilon(d), d, k, rng)
        return scatter_coordinates(y, idx, d)

    def _to_features(self, released: np.ndarray) -> np.ndarray:
        return self.estimate(released)

    def _perturb(  # type: ignore[override]
        self, z: np.ndarray, u: np.ndarray, eps_c: float, d: int, k: int, rng: np.random.Generator | None = None
    ) -> np.ndarray:
        raise NotImplementedError  # pragma: no cover

    def estimate(self, released: np.ndarray) -> np.ndarray:
        raise NotImplementedError  # pragma: no cover

    def variance(self, x: Any) -> np.ndarray:
        """The exact per-entry variance of :meth:`privatize`'s features (:meth:`estimate` of a
        release of ``x``), float64, the shape of ``x`` (``[d]`` or ``[rows, d]``)."""
        x = self._check_x(x, allow_1d=True)
        return self.estimate_variance(x.reshape(-1, x.shape[-1])).reshape(x.shape)

    def estimate_variance(self, x: np.ndarray) -> np.ndarray:
        raise NotImplementedError  # pragma: no cover

    # -- helpers ------------------------------------------------------------------------------
    def _half_span(self, d: int) -> tuple[np.ndarray, np.ndarray]:
        """``(lower, (upper - lower) / 2)`` broadcast to ``[d]`` (float64)."""
        lo, hi = self._bounds(d)
        return lo, (hi - lo) / 2.0

    def _scale_back(self, t_hat: np.ndarray, gain: float = 1.0) -> np.ndarray:
        """``lower + (gain t_hat + 1) / 2 * (upper - lower)``: from the [-1, 1] domain to feature
        units, in float64, chunk by chunk, cast to float32."""
        d = t_hat.shape[1]
        lo, half = self._half_span(d)
        out = np.empty(t_hat.shape, dtype=np.float32)
        step = max(1, scaled._CHUNK_ENTRIES // max(d, 1))
        for s in range(0, t_hat.shape[0], step):
            blk = t_hat[s : s + step].astype(np.float64)
            if gain != 1.0:
                blk *= gain
            blk += 1.0
            blk *= half
            blk += lo
            out[s : s + step] = blk
        return out

    def _scaled_t(self, x: np.ndarray) -> np.ndarray:
        """``t = 2 z - 1`` in [-1, 1] (float64) of clipped, publicly scaled features."""
        x = check_rows(x, self.num_features)
        if not np.all(np.isfinite(x)):
            raise ValueError("x has NaN or inf")
        return 2.0 * self._to_domain(x) - 1.0

    def _check_released(self, released: Any) -> tuple[np.ndarray, int, int]:
        y = check_rows(released, self.num_features, "released")
        if not np.all(np.isfinite(y)):
            raise ValueError("released has NaN or inf")
        d = y.shape[1]
        k = self.num_sampled(d) if d else 0
        return y, d, k

    def _sampled_variance(self, x: np.ndarray, variance_1d: Any) -> np.ndarray:
        """``[rows, d]`` variance of :meth:`estimate` for a one-coordinate variance
        ``variance_1d(t, eps_c)``: ``(d / k)(V_1 + t^2) - t^2`` on [-1, 1], times ``half^2``."""
        t = self._scaled_t(x)
        d = t.shape[1]
        k = self.num_sampled(d)
        v1 = variance_1d(t, self.coordinate_epsilon(d))
        var_t = (d / k) * (v1 + t * t) - t * t
        _, half = self._half_span(d)
        return var_t * half * half


@register_mechanism
class ThreeOutputMechanism(SampledFeatureMechanism):
    r"""Three-Outputs, the LDP mechanism for numbers in :math:`[-1, 1]` of Zhao et al. (2020),
    applied to node features with the :math:`k`-of-:math:`d` coordinate sampling of Wang et al.

    Reference: Y. Zhao, J. Zhao, M. Yang, T. Wang, N. Wang, L. Lyu, D. Niyato, K.-Y. Lam,
    "Local Differential Privacy-Based Federated Learning for Internet of Things", IEEE Internet
    of Things Journal 8(11), 2021 (arXiv:2004.08856, 2020): the Three-Outputs mechanism (its
    output probabilities, :math:`C`, and the case analysis of :math:`P_{0\leftarrow 0}`).

    Each node scales its features to :math:`z_j \in [0, 1]` with the PUBLIC bounds (clipping
    values outside) and sets :math:`t_j = 2 z_j - 1`. It samples :math:`k` of its :math:`d`
    coordinates uniformly without replacement,

    .. math::
        k = \max\left(1, \min\left(d, \left\lfloor \varepsilon / 2.5 \right\rfloor\right)\right)

    (Wang et al., "Collecting and Analyzing Multidimensional Data with Local Differential
    Privacy", ICDE 2019, Algorithm 4, which Zhao et al. follow for multi-dimensional
    gradients), perturbs each sampled :math:`t_j` with budget :math:`\varepsilon_c = \varepsilon/k`
    to :math:`Y_j \in \{-C, 0, C\}` with

    .. math::
        \Pr(Y = C \mid t) = \begin{cases}
            P_{C\leftarrow 0} + (P_{C\leftarrow 1} - P_{C\leftarrow 0})\, t, & t \ge 0\\
            P_{C\leftarrow 0} + (P_{C\leftarrow 0} - P_{C\leftarrow -1})\, t, & t < 0
        \end{cases}, \quad
        \Pr(Y = -C \mid t) = \Pr(Y = C \mid -t), \quad
        \Pr(Y = 0 \mid t) = P_{0\leftarrow 0}\left(1 - |t|\,(1 - e^{-\varepsilon_c})\right),

    (anchors and :math:`P_{0\leftarrow 0}` in :func:`three_output_pmf` and
    :func:`three_output_p00`), and releases :math:`\frac{d}{k} Y_j` for the sampled coordinates
    and 0 for the others. With
    :math:`C = \frac{e^{\varepsilon_c}(e^{\varepsilon_c}+1)}{(e^{\varepsilon_c}-1)(e^{\varepsilon_c}-P_{0\leftarrow 0})}`,
    :math:`\mathbb{E}[Y \mid t] = t`, so the release is unbiased for :math:`t`.

    Privacy: each output's probability is linear in :math:`t` between the anchors, so its
    extremes over :math:`t` are at :math:`t \in \{-1, 0, 1\}`, where the ratios are exactly
    :math:`e^{\varepsilon_c}` (for :math:`\pm C` between :math:`t = \pm 1`, for 0 between
    :math:`t = 0` and :math:`t = \pm 1`). The sampled set is independent of the data; a vector
    output is a mixture over the sets :math:`S \supseteq \{j : Y_j \ne 0\}`, each term a product
    of :math:`k` coordinate probabilities, so the vector is
    :math:`k \varepsilon_c \le \varepsilon`-LDP (checked exactly in the tests, per coordinate
    and per vector). For :math:`\varepsilon_c < \ln 2`, :math:`P_{0\leftarrow 0} = 0` and this is
    Duchi et al.'s two-output mechanism.

    Args:
        epsilon (float): the budget :math:`\varepsilon` of one node's feature vector (> 0).
        lower, upper (float or array-like, optional): the PUBLIC feature bounds (default
            ``0.0`` and ``1.0``; :func:`~privgraph.mechanisms.features.scaled.check_bounds`).

    Shapes:
        - input: node features :math:`[|V|, d]` (or any row block ``[rows, d]``)
        - :meth:`privatize_rows`: float32 :math:`[|V|, d]`, entries in
          :math:`\{-Cd/k, 0, Cd/k\}` (the released values, in the :math:`t` domain)
        - :meth:`privatize`: the graph with :math:`x` = :meth:`estimate` of the release, float32
          in feature units (unbiased for the clipped features; post-processing)

    Runtime:
        :math:`O(|V| d)`: one ``(d + 4k)``-uniform row per node, an ``argpartition`` for the
        sampled set, closed-form probabilities and :func:`categorical3_exact` (two 106-bit
        comparisons that realise the float64 probabilities exactly); no Python loop over
        entries. Memory: the output plus a bounded chunk of float64 temporaries.

    Utility:
        :math:`\mathrm{Var}[Y \mid t] = C^2 (1 - \Pr(Y = 0 \mid t)) - t^2`
        (:func:`three_output_variance`); :math:`P_{0\leftarrow 0}` minimises its maximum over
        :math:`t`. The released coordinate has variance
        :math:`\frac{d}{k}(\mathrm{Var}[Y \mid t] + t^2) - t^2` (:meth:`estimate_variance`, in
        feature units).
    """

    name: ClassVar[str] = "three_output"
    epsilon_range: ClassVar[EpsilonRange] = EpsilonRange(
        per_coordinate=True,
        note=(
            "each sampled coordinate's outcome is drawn by categorical3_exact (two bernoulli_exact "
            "decisions): the smallest probability, about P00 e^-eps_c / 2 or e^-eps_c / 2, is "
            "realised exactly as a float64 >= 2^-54 up to eps / k ~ 37 and to 2^-106 absolute "
            "(rounded up) to 50"
        ),
    )
    _divisor: ClassVar[float] = 2.5
    _uniforms: ClassVar[int] = 4

    def output_magnitude(self, num_features: int | None = None) -> float:
        """:math:`C` at the per-coordinate budget (the release is :math:`\\pm C d / k` or 0)."""
        return three_output_c(self.coordinate_epsilon(num_features))

    def _perturb(
        self, z: np.ndarray, u: np.ndarray, eps_c: float, d: int, k: int, rng: np.random.Generator | None = None
    ) -> np.ndarray:
        t = z
        t *= 2.0
        t -= 1.0
        neg, p0, pos = _pmf_parts(t, eps_c)
        idx = categorical3_exact(neg, p0, pos, u)  # 0, 1, 2 -> -C, 0, +C
        c = three_output_c(eps_c) * (d / k)
        return (idx - 1.0) * c

    def estimate(self, released: np.ndarray) -> np.ndarray:
        """Unbiased estimate of the clipped features from a release, in feature units (float32):
        :math:`\\hat{x}_j = \\text{lower} + (y_j + 1)(\\text{upper} - \\text{lower}) / 2`."""
        y, _, _ = self._check_released(released)
        return self._scale_back(y)

    def estimate_variance(self, x: np.ndarray) -> np.ndarray:
        """Exact per-entry variance ``[rows, d]`` (float64) of :meth:`estimate` of a release of ``x``."""
        return self._sampled_variance(x, three_output_variance)
