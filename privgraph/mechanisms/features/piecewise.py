"""PiecewiseMechanism: Wang et al.'s Piecewise Mechanism (PM) with k-dimension sampling.

Also the one-dimensional PM sampler (module-level, vectorised, per-entry epsilons allowed), its
exact density, CDF and variance, and the k-dimension sampling (Wang et al., Algorithm 4) that
the Hybrid mechanism reuses.

Reference:
    N. Wang, X. Xiao, Y. Yang, J. Zhao, S. C. Hui, H. Shin, J. Shin and G. Yu, "Collecting and
    analyzing multidimensional data with local differential privacy", ICDE 2019
    (arXiv:1907.00782): Algorithm 2 (PM, one dimension), Lemma 1 (its variance), Algorithm 4
    (d dimensions by sampling k of them).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

import numpy as np

from privgraph.mechanisms.base import check_generator, check_int
from privgraph.mechanisms.features.duchi import as_epsilon_array, as_unit_input
from privgraph.mechanisms.features.scaled import (
    KSampledMixin,
    ScaledFeatureMechanism,
    choose_coordinates,
    scatter_coordinates,
    split_epsilon,
    wang_sample_size,
)

__all__ = [
    "PiecewiseMechanism",
    "pm_bound",
    "pm_transform",
    "pm_sample",
    "pm_density",
    "pm_cdf",
    "pm_variance",
    "sampling_k",
    "per_dimension_epsilon",
    "k_sampling_transform",
    "k_sampling_variance",
]


# -- one dimension (Wang et al., Algorithm 2) -----------------------------------------------------
def pm_bound(epsilon: Any) -> np.ndarray:
    """``C = (e^(eps/2) + 1) / (e^(eps/2) - 1) = coth(eps / 4)``: outputs lie in ``[-C, C]``."""
    return 1.0 + _pm_centre_length(as_epsilon_array(epsilon))


def _pm_centre_length(e: np.ndarray) -> np.ndarray:
    """``C - 1 = 2 / (e^(eps/2) - 1)``, computed without the cancellation of ``coth - 1``."""
    with np.errstate(divide="ignore", over="ignore"):
        cm1 = 2.0 / np.expm1(e / 2.0)
    if not np.all(np.isfinite(cm1)):
        raise ValueError("epsilon is too small: the Piecewise output bound C overflows")
    return cm1


def _pm_pieces(t: np.ndarray, e: np.ndarray) -> tuple[np.ndarray, ...]:
    """``C``, ``l(t)``, ``r(t)``, ``C - 1``, ``l + C`` and ``C - r`` (the lengths computed directly)."""
    cm1 = _pm_centre_length(e)
    C = 1.0 + cm1
    left = ((2.0 + cm1) * t - cm1) * 0.5  # (C + 1) / 2 t - (C - 1) / 2
    left_len = (2.0 + cm1) * (1.0 + t) * 0.5  # l + C = (C + 1) (1 + t) / 2
    right_len = (2.0 + cm1) * (1.0 - t) * 0.5  # C - r = (C + 1) (1 - t) / 2
    return C, left, left + cm1, cm1, left_len, right_len


def pm_transform(t: Any, epsilon: Any, u_side: Any, u_pos: Any) -> np.ndarray:
    r"""The Piecewise Mechanism as a transform of two uniforms per entry.

    .. math::
        C = \frac{e^{\varepsilon/2} + 1}{e^{\varepsilon/2} - 1}, \quad
        \ell(t) = \frac{C + 1}{2} t - \frac{C - 1}{2}, \quad r(t) = \ell(t) + C - 1,

    and the output has density :math:`p = \frac{e^{\varepsilon} - e^{\varepsilon/2}}
    {2 e^{\varepsilon/2} + 2}` on :math:`[\ell(t), r(t)]` and :math:`p / e^{\varepsilon}` on the
    rest of :math:`[-C, C]` (Wang et al. ICDE'19, Algorithm 2): with probability
    :math:`e^{\varepsilon/2} / (e^{\varepsilon/2} + 1)` a uniform point of :math:`[\ell, r]`
    (length :math:`C - 1`), else a uniform point of :math:`[-C, \ell) \cup (r, C]` (length
    :math:`C + 1`), both placed by ``u_pos``. The outer pieces are taken when
    ``u_side < 1 / (e^(eps/2) + 1)``: the smaller probability, which the :math:`2^{-53}` grid
    of numpy's uniforms then rounds up, never down.

    Args:
        t (array-like): inputs in ``[-1, 1]``.
        epsilon (float or array-like): the budget, scalar or per entry (broadcast).
        u_side, u_pos (array-like): independent uniforms in ``[0, 1)`` (broadcast).

    Returns:
        np.ndarray: float64 outputs in ``[-C, C]``, the broadcast shape.
    """
    t = as_unit_input(t)
    e = as_epsilon_array(epsilon)
    C, left, right, cm1, left_len, _ = _pm_pieces(t, e)
    u_pos = np.asarray(u_pos, dtype=np.float64)
    # the outer pieces carry 1 / (e^(eps/2) + 1) <= 1/2, realized as u_side < q (rounded up on
    # the 2^-53 grid of the uniforms, never below its real value)
    g = np.exp(-e / 2.0)
    q_outer = g / (1.0 + g)
    centre = left + u_pos * cm1
    w = u_pos * (C + 1.0)  # a position along [-C, l) followed by (r, C]
    outer = np.where(w < left_len, w - C, right + (w - left_len))
    return np.where(np.asarray(u_side) < q_outer, outer, centre)


def pm_sample(t: Any, epsilon: Any, rng: np.random.Generator) -> np.ndarray:
    """Draw the Piecewise Mechanism for every entry of ``t`` (two uniforms each)."""
    rng = check_generator(rng)
    t = as_unit_input(t)
    shape = np.broadcast_shapes(t.shape, np.shape(epsilon))
    u = rng.random((2,) + shape)
    return pm_transform(t, epsilon, u[0], u[1])


def _pm_levels(e: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The two density levels ``(p, p / e^eps)``; ``p = e^(eps/2) tanh(eps/4) / 2``."""
    th = np.tanh(e / 4.0)
    with np.errstate(over="ignore"):
        high = 0.5 * np.exp(e / 2.0) * th
    return high, 0.5 * np.exp(-e / 2.0) * th


def pm_density(y: Any, t: Any, epsilon: Any) -> np.ndarray:
    """The exact output density of PM at ``y`` given ``t`` (broadcast; 0 outside ``[-C, C]``)."""
    y = np.asarray(y, dtype=np.float64)
    t = as_unit_input(t)
    e = as_epsilon_array(epsilon)
    C, left, right, _, _, _ = _pm_pieces(t, e)
    high, low = _pm_levels(e)
    inside = (y >= -C) & (y <= C)
    centre = (y >= left) & (y <= right)
    return np.where(centre, high, np.where(inside, low, 0.0))


def pm_cdf(y: Any, t: Any, epsilon: Any) -> np.ndarray:
    """The exact output CDF ``Pr(t* <= y | t)`` of PM (broadcast)."""
    y = np.asarray(y, dtype=np.float64)
    t = as_unit_input(t)
    e = as_epsilon_array(epsilon)
    C, left, right, cm1, left_len, right_len = _pm_pieces(t, e)
    high, low = _pm_levels(e)
    F = (
        low * np.clip(y + C, 0.0, left_len)
        + high * np.clip(y - left, 0.0, cm1)
        + low * np.clip(y - right, 0.0, right_len)
    )
    return np.clip(F, 0.0, 1.0)


def pm_variance(t: Any, epsilon: Any) -> np.ndarray:
    r""":math:`\mathrm{Var}[t^* \mid t] = \frac{t^2}{e^{\varepsilon/2} - 1} +
    \frac{e^{\varepsilon/2} + 3}{3 (e^{\varepsilon/2} - 1)^2}` (Wang et al., Lemma 1; PM is unbiased)."""
    t = as_unit_input(t)
    e = as_epsilon_array(epsilon)
    m = np.expm1(e / 2.0)
    return t * t / m + (m + 4.0) / (3.0 * m * m)


# -- d dimensions by sampling k of them (Wang et al., Algorithm 4) --------------------------------
def sampling_k(epsilon: float, d: int) -> int:
    """``k = max(1, min(d, floor(epsilon / 2.5)))``: how many of ``d`` dimensions a node reports."""
    return wang_sample_size(epsilon, check_int(d, "d", minimum=1))


# ``epsilon / k`` rounded down until ``k * eps_k <= epsilon`` holds EXACTLY (rationals), so the k
# reported dimensions never compose, even in floats, to more than ``epsilon``.
per_dimension_epsilon = split_epsilon


def k_sampling_transform(
    t: np.ndarray,
    k: int,
    u: np.ndarray,
    perturb: Callable[[np.ndarray, np.ndarray], np.ndarray],
    draws: int,
) -> np.ndarray:
    r"""Wang et al.'s Algorithm 4 on a block of rows, given its uniforms.

    Each row samples ``k`` of its ``d`` dimensions uniformly without replacement (the ``k``
    smallest of ``d`` uniform keys), perturbs each sampled :math:`t_j` with the one-dimensional
    mechanism ``perturb`` and reports :math:`\frac{d}{k} t^*_j` there and 0 elsewhere. Since
    :math:`\Pr(j \text{ sampled}) = k / d`, every coordinate is unbiased when ``perturb`` is.

    Args:
        t (np.ndarray): ``[rows, d]`` inputs in the mechanism's domain.
        k (int): dimensions per row, ``1 <= k <= d``.
        u (np.ndarray): uniforms, ``[rows, draws, d]`` when ``k == d`` (no sampling), else
            ``[rows, d + draws * k]`` (``d`` keys, then ``draws`` per sampled dimension).
        perturb: ``perturb(t_sampled [rows, k], u [rows, draws, k]) -> [rows, k]``.
        draws (int): uniforms ``perturb`` takes per entry.

    Returns:
        np.ndarray: float64 ``[rows, d]``.
    """
    rows, d = t.shape
    if k == d:
        return perturb(t, u)
    idx = choose_coordinates(u[:, :d], k)
    yk = perturb(np.take_along_axis(t, idx, axis=1), u[:, d:].reshape(rows, draws, k))
    yk *= d / k
    return scatter_coordinates(yk, idx, d)


def k_sampling_variance(t: np.ndarray, k: int, variance_1d: np.ndarray) -> np.ndarray:
    r"""Per-coordinate variance of Algorithm 4: :math:`\frac{d}{k}(V_1 + t_j^2) - t_j^2`.

    ``variance_1d`` is the one-dimensional variance at budget :math:`\varepsilon / k`
    (broadcast with ``t`` ``[..., d]``).
    """
    d = t.shape[-1]
    return (d / k) * (variance_1d + t * t) - t * t


class _KSampledMechanism(KSampledMixin, ScaledFeatureMechanism):
    """Wang et al.'s Algorithm 4 around a one-dimensional mechanism on ``[-1, 1]`` (PM, HM).

    A subclass sets ``_draws`` (uniforms per reported entry) and implements
    ``_perturb_1d(t [rows, k], eps_k, u [rows, draws, k])`` and ``_variance_1d(t, eps_k)``.
    The reported entries are scaled by ``d / k`` and mapped back affinely with the others (0).
    """

    domain: ClassVar[tuple[float, float]] = (-1.0, 1.0)
    _draws: ClassVar[int] = 2

    def sampled_dimensions(self, d: int) -> int:
        """``k`` for ``d`` features (Wang et al., Algorithm 4)."""
        return sampling_k(self.epsilon, d)

    def dimension_epsilon(self, d: int) -> float:
        """The budget of each of the ``k`` reported dimensions (``k * eps_k <= epsilon`` exactly)."""
        return split_epsilon(self.epsilon, self.sampled_dimensions(d))

    def _check_dimension(self, d: int) -> None:
        pm_bound(self.dimension_epsilon(d))  # C = coth(eps_k / 4) must be finite

    def _perturb_1d(self, tk: np.ndarray, e: float, u: np.ndarray) -> np.ndarray:  # pragma: no cover
        raise NotImplementedError

    def _variance_1d(self, t: np.ndarray, e: float) -> np.ndarray:  # pragma: no cover
        raise NotImplementedError

    def _perturb(self, t: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        rows, d = t.shape
        k = self.sampled_dimensions(d)
        e = split_epsilon(self.epsilon, k)
        idx, tk, u = self._draw_sampled(t, k, self._draws, rng)
        yk = self._perturb_1d(tk, e, u.reshape(rows, self._draws, k))
        yk *= d / k
        return scatter_coordinates(yk, idx, d)

    def _domain_variance(self, t: np.ndarray) -> np.ndarray:
        d = t.shape[-1]
        k = self.sampled_dimensions(d)
        return k_sampling_variance(t, k, self._variance_1d(t, split_epsilon(self.epsilon, k)))


class PiecewiseMechanism(_KSampledMechanism):
    r"""Wang et al.'s Piecewise Mechanism with their k-dimension sampling (ICDE 2019,
    Algorithms 2 and 4), a feature-LDP baseline of the HeteroRR and LPGNN comparisons.

    Features are scaled to :math:`t_j \in [-1, 1]` with PUBLIC bounds and clipped. Each node
    samples :math:`k = \max(1, \min(d, \lfloor \varepsilon / 2.5 \rfloor))` of its :math:`d`
    dimensions uniformly without replacement (independently of the data), perturbs each
    sampled :math:`t_j` with one-dimensional PM at :math:`\varepsilon / k`, and reports
    :math:`\frac{d}{k} t^*_j` on the sampled dimensions and 0 on the others. PM at budget
    :math:`\varepsilon'` releases, with :math:`C = \coth(\varepsilon'/4)`,
    :math:`\ell(t) = \frac{C+1}{2} t - \frac{C-1}{2}` and :math:`r(t) = \ell(t) + C - 1`, a
    point of :math:`[-C, C]` with density

    .. math::
        f(y \mid t) = \begin{cases} p = \frac{e^{\varepsilon'} - e^{\varepsilon'/2}}
        {2 e^{\varepsilon'/2} + 2} & y \in [\ell(t), r(t)] \\
        p / e^{\varepsilon'} & y \in [-C, \ell(t)) \cup (r(t), C], \end{cases}

    so :math:`f(y \mid t) / f(y \mid t') \le e^{\varepsilon'}`; the :math:`k` reports compose to
    :math:`k \varepsilon' \le \varepsilon` (:func:`per_dimension_epsilon` rounds
    :math:`\varepsilon / k` down until this holds exactly in floats).

    The estimate :math:`y_j` on :math:`[-1, 1]` is mapped back affinely,
    ``lower + (y + 1) / 2 * (upper - lower)`` (unsampled dimensions land at the midpoint):
    an unbiased estimate of the clipped features.

    Args:
        epsilon (float): the budget of one node's whole vector (> 0).
        lower (float or array-like, optional): PUBLIC lower bound(s) of the raw features
            (default: ``0.0``). Never derive it from the private data.
        upper (float or array-like, optional): PUBLIC upper bound(s), ``> lower``
            (default: ``1.0``). Values outside ``[lower, upper]`` are clipped.

    Shapes:
        - input: node features :math:`[|V|, d]` (or any row block ``[rows, d]``)
        - output: float32 :math:`[|V|, d]`; on the :math:`[-1, 1]` scale each entry is 0 or in
          :math:`\frac{d}{k} [-C, C]`

    Runtime:
        :math:`O(|V| d)`: :math:`d + 2k` uniforms per row (:math:`2d` when :math:`k = d`) and
        one partial sort of the keys per row (``argmin`` when :math:`k = 1`).

    Utility:
        unbiased; per-coordinate variance :math:`\frac{d}{k}(V_{PM}(t_j, \varepsilon/k) + t_j^2)
        - t_j^2` with :math:`V_{PM}(t, \varepsilon) = \frac{t^2}{e^{\varepsilon/2} - 1} +
        \frac{e^{\varepsilon/2} + 3}{3 (e^{\varepsilon/2} - 1)^2}` (Lemma 1) on the
        :math:`[-1, 1]` scale.
    """

    name: ClassVar[str] = "piecewise"
    _assumptions: ClassVar[tuple[str, ...]] = (
        "continuous floating-point uniform sampling (the real-valued analysis; low bits not hardened)",
        "the k reported dimensions are sampled independently of the data, each with epsilon / k",
    )
    _draws: ClassVar[int] = 2

    def _perturb_1d(self, tk: np.ndarray, e: float, u: np.ndarray) -> np.ndarray:
        return pm_transform(tk, e, u[:, 0], u[:, 1])

    def _variance_1d(self, t: np.ndarray, e: float) -> np.ndarray:
        return pm_variance(t, e)
