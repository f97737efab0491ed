r"""PM-SUB: the suboptimal piecewise mechanism of Zhao et al. (IEEE IoT-J 2020) on a public grid, k-of-d sampled.

The continuous law (:func:`pm_sub_density`, :func:`pm_sub_cdf`, :func:`pm_sub_variance`) is the one
the grid approximates; what is released is :func:`pm_sub_grid`'s (see
:mod:`~privgraph.mechanisms.features.piecewise_grid`).
"""

from __future__ import annotations

import math
from typing import Any, ClassVar

import numpy as np

from privgraph.guarantee.params import check_epsilon
from privgraph.mechanisms.base import EpsilonRange
from privgraph.mechanisms.features.piecewise_grid import (
    GRID_CELLS,
    GRID_EPSILON_RANGE,
    PiecewiseGrid,
    piecewise_grid,
)
from privgraph.mechanisms.features.three_output import SampledFeatureMechanism
from privgraph.mechanisms.registry import register_mechanism

__all__ = [
    "PMSubMechanism",
    "pm_sub_tau",
    "pm_sub_bound",
    "pm_sub_interval",
    "pm_sub_density",
    "pm_sub_cdf",
    "pm_sub_variance",
    "pm_sub_grid",
    "pm_sub_grid_variance",
]


def pm_sub_tau(epsilon: float) -> float:
    r"""PM-SUB's parameter :math:`\tau = e^{\varepsilon/3}` (Wang et al.'s PM uses :math:`e^{\varepsilon/2}`)."""
    return math.exp(check_epsilon(epsilon, "epsilon") / 3.0)


def _consts(eps: float) -> tuple[float, float, float, float, float]:
    """``(A, g, 1/tau, p_high, p_low)`` in overflow-free form (``q = e^-eps``, ``tau = e^(eps/3)``).

    ``g = (e^eps + tau) / (e^eps - 1) = (1 + tau q) / (1 - q)``, so that
    ``l(t) = g (t - 1/tau)``, ``r(t) = g (t + 1/tau)`` and ``A = g (1 + 1/tau)``;
    ``p_high = tau (1 - q) / (2 (1 + tau q)^2)`` and ``p_low = q p_high``.
    """
    inv_tau = math.exp(-eps / 3.0)
    tq = math.exp(-2.0 * eps / 3.0)  # tau * q
    one_m_q = -math.expm1(-eps)
    g = (1.0 + tq) / one_m_q
    a = g * (1.0 + inv_tau)
    base = one_m_q / (2.0 * (1.0 + tq) ** 2)
    p_high = base / inv_tau if inv_tau > 0.0 else math.inf
    p_low = base * tq
    return a, g, inv_tau, p_high, p_low


def pm_sub_bound(epsilon: float) -> float:
    r"""The output range :math:`[-A, A]`, :math:`A = \dfrac{(e^\varepsilon + \tau)(\tau + 1)}{\tau (e^\varepsilon - 1)}`."""
    return _consts(check_epsilon(epsilon, "epsilon"))[0]


def pm_sub_interval(t: Any, epsilon: float) -> tuple[np.ndarray, np.ndarray]:
    r"""The high-density interval :math:`[\ell(t), r(t)]`,
    :math:`\ell(t) = \dfrac{(e^\varepsilon + \tau)(t\tau - 1)}{\tau(e^\varepsilon - 1)}`,
    :math:`r(t) = \dfrac{(e^\varepsilon + \tau)(t\tau + 1)}{\tau(e^\varepsilon - 1)}`."""
    eps = check_epsilon(epsilon, "epsilon")
    t = _check_t(t)
    _, g, inv_tau, _, _ = _consts(eps)
    return g * (t - inv_tau), g * (t + inv_tau)


def _check_t(t: Any) -> np.ndarray:
    t = np.asarray(t, dtype=np.float64)
    if np.any(~np.isfinite(t)) or np.any(np.abs(t) > 1.0):
        raise ValueError("t must lie in [-1, 1]")
    return t


def pm_sub_density(y: Any, t: Any, epsilon: float) -> np.ndarray:
    r"""The exact output density :math:`p(y \mid t)` of PM-SUB (broadcast over ``y`` and ``t``).

    .. math::
        p(y \mid t) = \begin{cases}
        \dfrac{e^\varepsilon \tau (e^\varepsilon - 1)}{2(\tau + e^\varepsilon)^2}, & y \in [\ell(t), r(t)],\\[2ex]
        \dfrac{\tau (e^\varepsilon - 1)}{2(\tau + e^\varepsilon)^2}, & y \in [-A, \ell(t)) \cup (r(t), A],\\
        0, & \text{otherwise.}
        \end{cases}
    """
    eps = check_epsilon(epsilon, "epsilon")
    y = np.asarray(y, dtype=np.float64)
    t = _check_t(t)
    a, _, _, p_high, p_low = _consts(eps)
    lo, hi = pm_sub_interval(t, eps)
    inside = (y >= lo) & (y <= hi)
    return np.where(np.abs(y) > a, 0.0, np.where(inside, p_high, p_low))


def pm_sub_cdf(y: Any, t: Any, epsilon: float) -> np.ndarray:
    r"""The exact CDF :math:`F(y \mid t) = \Pr(Y \le y \mid t)` (piecewise linear, three pieces)."""
    eps = check_epsilon(epsilon, "epsilon")
    y = np.asarray(y, dtype=np.float64)
    t = _check_t(t)
    a, g, inv_tau, p_high, p_low = _consts(eps)
    lo, hi = g * (t - inv_tau), g * (t + inv_tau)
    yc = np.clip(y, -a, a)
    m_left = p_low * g * (1.0 + t)  # the pieces' masses in closed form (no cancellation)
    m_mid = 1.0 / (1.0 + math.exp(-2.0 * eps / 3.0))
    with np.errstate(invalid="ignore"):
        f_left = p_low * (yc + a)
        f_mid = m_left + np.minimum(p_high * np.clip(yc - lo, 0.0, None), m_mid)
        f_right = m_left + m_mid + p_low * (yc - hi)
    f = np.where(yc < lo, f_left, np.where(yc <= hi, f_mid, f_right))
    return np.clip(f, 0.0, 1.0)


def pm_sub_variance(t: Any, epsilon: float) -> np.ndarray:
    r""":math:`\mathrm{Var}[Y \mid t] = \dfrac{\tau + 1}{e^\varepsilon - 1} t^2
    + \dfrac{(e^\varepsilon + \tau)\left((\tau + 1)^3 + e^\varepsilon - 1\right)}{3 \tau^2 (e^\varepsilon - 1)^2}`
    (the mechanism is unbiased; derived from the density, :math:`\tau = e^{\varepsilon/3}`)."""
    eps = check_epsilon(epsilon, "epsilon")
    t = _check_t(t)
    q = math.exp(-eps)
    inv_tau = math.exp(-eps / 3.0)
    tq = math.exp(-2.0 * eps / 3.0)
    one_m_q = -math.expm1(-eps)
    # (tau + 1) / (e^eps - 1) = q (tau + 1) / (1 - q) = (tau q + q) / (1 - q)
    c2 = (tq + q) / one_m_q
    # (e + tau)((tau + 1)^3 + e - 1) / (3 tau^2 (e - 1)^2), divided through by e^2, with
    # (tau + 1)^3 q = (1 + 1/tau)^3 (tau^3 q = 1): (1 + tau q)((1 + 1/tau)^3 + 1 - q) / (3 tau^2 (1 - q)^2)
    c0 = (1.0 + tq) * ((1.0 + inv_tau) ** 3 + one_m_q) * inv_tau * inv_tau / (3.0 * one_m_q**2)
    return c2 * t * t + c0


def pm_sub_grid(epsilon: float, cells: int = GRID_CELLS) -> PiecewiseGrid:
    """PM-SUB on the public grid of ``cells`` cells at budget ``epsilon``: window share
    ``(2 g / tau) / (2 A) = 1 / (tau + 1)``, ``tau = e^(eps/3)`` (see
    :mod:`~privgraph.mechanisms.features.piecewise_grid`)."""
    return piecewise_grid(float(check_epsilon(epsilon, "epsilon")), "pm_sub", cells)


def pm_sub_grid_variance(t: Any, epsilon: float) -> np.ndarray:
    """The exact variance of the grid PM-SUB (within a relative ``1 / W`` of :func:`pm_sub_variance`:
    the window is rounded to ``W`` whole cells)."""
    return pm_sub_grid(epsilon).variance(_check_t(t))


@register_mechanism
class PMSubMechanism(SampledFeatureMechanism):
    r"""PM-SUB, the suboptimal piecewise mechanism of Zhao et al. (2020), applied to node features
    with the :math:`k`-of-:math:`d` coordinate sampling of Wang et al.

    Reference: Y. Zhao, J. Zhao, M. Yang, T. Wang, N. Wang, L. Lyu, D. Niyato, K.-Y. Lam,
    "Local Differential Privacy-Based Federated Learning for Internet of Things", IEEE Internet
    of Things Journal 8(11), 2021 (arXiv:2004.08856, 2020): the piecewise mechanism family
    with parameter :math:`\tau` (PM-OPT takes the variance-optimal
    :math:`\tau`; PM-SUB takes the closed form :math:`\tau = e^{\varepsilon/3}`; Wang et al.'s
    PM is :math:`\tau = e^{\varepsilon/2}`).

    Each node scales its features to :math:`t_j = 2 z_j - 1 \in [-1, 1]` with the PUBLIC bounds
    (clipped), samples :math:`k = \max(1, \min(d, \lfloor \varepsilon / 2.5 \rfloor))` of its
    :math:`d` coordinates uniformly without replacement (Wang et al., ICDE 2019, Algorithm 4),
    perturbs each sampled :math:`t_j` with :math:`\varepsilon_c = \varepsilon / k` to
    :math:`Y_j \in [-A, A]` with density

    .. math::
        p(y \mid t) = \begin{cases}
        \dfrac{e^{\varepsilon_c} \tau (e^{\varepsilon_c} - 1)}{2(\tau + e^{\varepsilon_c})^2},
            & y \in [\ell(t), r(t)],\\[2ex]
        \dfrac{\tau (e^{\varepsilon_c} - 1)}{2(\tau + e^{\varepsilon_c})^2},
            & y \in [-A, \ell(t)) \cup (r(t), A],
        \end{cases} \qquad
        A = \frac{(e^{\varepsilon_c} + \tau)(\tau + 1)}{\tau (e^{\varepsilon_c} - 1)},

    :math:`\ell(t) = \frac{(e^{\varepsilon_c} + \tau)(t\tau - 1)}{\tau(e^{\varepsilon_c} - 1)}`,
    :math:`r(t) = \frac{(e^{\varepsilon_c} + \tau)(t\tau + 1)}{\tau(e^{\varepsilon_c} - 1)}`,
    :math:`\tau = e^{\varepsilon_c/3}`, and releases :math:`\frac{d}{k} Y_j` (0 for the others).
    :math:`\mathbb{E}[Y \mid t] = t`: the release is unbiased for :math:`t`.

    privgraph releases this construction on a public grid of :math:`M = 2^{20}` cells
    (:func:`pm_sub_grid`): a window of :math:`W = \mathrm{round}(M / (\tau + 1))` cells (the
    window's share :math:`(2g/\tau) / (2A)` of the range) at the randomly rounded position
    :math:`\frac{t+1}{2}(M - W)`, cell probabilities :math:`p_{hi} = (1 - q)/W` and
    :math:`p_{lo} = q/(M - W)` with :math:`p_{hi}/p_{lo} \le e^{\varepsilon_c}` certified in
    rational arithmetic, the cell's value scaled so that :math:`E[Y \mid t] = t`.

    Privacy: every input reaches every grid value with a probability in :math:`[p_{lo}, p_{hi}]`,
    so each coordinate is :math:`\varepsilon_c`-LDP; the set of released values is the public
    grid whatever the input (no low bits carry it). The piece is drawn with
    :func:`~privgraph.mechanisms.sampling.bernoulli_exact` and the cell with an exact integer
    sampler. The sampled set is independent of the data and its nonzero positions reveal only
    it, so the vector is :math:`k\varepsilon_c \le \varepsilon`-LDP.

    Args:
        epsilon (float): the budget :math:`\varepsilon` of one node's feature vector (> 0).
        lower, upper (float or array-like, optional): the PUBLIC feature bounds (default
            ``0.0`` and ``1.0``; :func:`~privgraph.mechanisms.features.scaled.check_bounds`).

    Shapes:
        - input: node features :math:`[|V|, d]` (or any row block ``[rows, d]``)
        - :meth:`privatize_rows`: float32 :math:`[|V|, d]`, :math:`k` entries per row
          :math:`\frac{d}{k}` times a grid value (within :math:`[-Ad/k, Ad/k]` to a cell), the
          others 0 (the released values, in the :math:`t` domain)
        - :meth:`privatize`: the graph with :math:`x` = :meth:`estimate` of the release, float32
          in feature units (unbiased for the clipped features; post-processing)

    Runtime:
        :math:`O(|V| d)`: one ``(d + 5k)``-uniform row per node, an ``argpartition`` for the
        sampled set, and per sampled coordinate the grid draw (the position's rounding, the
        piece by :func:`~privgraph.mechanisms.sampling.bernoulli_exact`, the cell by an exact
        integer from two uniforms); no Python loop over entries.

    Utility:
        unbiased; :math:`\mathrm{Var}[Y \mid t]` the grid law's exact variance
        (:func:`pm_sub_grid_variance`), within a relative :math:`1/W` (the window rounded to whole
        cells) of the continuous
        :math:`\frac{\tau + 1}{e^{\varepsilon_c} - 1} t^2
        + \frac{(e^{\varepsilon_c} + \tau)((\tau + 1)^3 + e^{\varepsilon_c} - 1)}
        {3\tau^2(e^{\varepsilon_c} - 1)^2}` (:func:`pm_sub_variance`); the released coordinate
        has variance :math:`\frac{d}{k}(\mathrm{Var}[Y \mid t] + t^2) - t^2`
        (:meth:`estimate_variance`, in feature units).
    """

    name: ClassVar[str] = "pm_sub"
    _divisor: ClassVar[float] = 2.5
    _uniforms: ClassVar[int] = 5

    epsilon_range: ClassVar[EpsilonRange] = GRID_EPSILON_RANGE
    _assumptions: ClassVar[tuple[str, ...]] = (
        "the sampled coordinates are drawn independently of the data",
        (
            "released values lie on a fixed public grid of 2^20 cells (the same for every input); "
            "the piece and the cell are drawn exactly and p_hi / p_lo <= e^(eps/k) holds in rational "
            "arithmetic"
        ),
    )

    def output_bound(self, num_features: int | None = None) -> float:
        """:math:`A` of the continuous law at the per-coordinate budget (the grid's largest value
        is within about a cell of it; the release lies in :math:`\frac{d}{k}` times that)."""
        return pm_sub_bound(self.coordinate_epsilon(num_features))

    def _check_dimension(self, d: int) -> None:
        pm_sub_grid(self.coordinate_epsilon(d))

    def _perturb(
        self, z: np.ndarray, u: np.ndarray, eps_c: float, d: int, k: int, rng: np.random.Generator | None = None
    ) -> np.ndarray:
        t = z
        t *= 2.0
        t -= 1.0
        y = pm_sub_grid(eps_c).transform(t, u, rng)
        y *= d / k
        return y

    def estimate(self, released: np.ndarray) -> np.ndarray:
        """Unbiased estimate of the clipped features from a release, in feature units (float32):
        :math:`\\hat{x}_j = \\text{lower} + (y_j + 1)(\\text{upper} - \\text{lower}) / 2`."""
        y, _, _ = self._check_released(released)
        return self._scale_back(y)

    def estimate_variance(self, x: np.ndarray) -> np.ndarray:
        """Exact per-entry variance ``[rows, d]`` (float64) of :meth:`estimate` of a release of ``x``."""
        return self._sampled_variance(x, pm_sub_grid_variance)
