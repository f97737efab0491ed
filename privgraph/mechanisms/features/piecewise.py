"""PiecewiseMechanism: Wang et al.'s Piecewise Mechanism (PM) on a public grid, with k-dimension sampling.

Also the one-dimensional grid sampler (:func:`pm_sample`, :func:`pm_grid`), the continuous PM's
density, CDF and variance (the law the grid approximates: :func:`pm_density`, :func:`pm_cdf`,
:func:`pm_variance`; NOT what is released), and the k-dimension sampling (Wang et al.,
Algorithm 4) that the Hybrid mechanism reuses.

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

from privgraph.guarantee.params import check_epsilon, check_int
from privgraph.mechanisms.base import EpsilonRange, check_generator
from privgraph.mechanisms.features.duchi import as_epsilon_array, as_unit_input
from privgraph.mechanisms.features.piecewise_grid import (
    GRID_CELLS,
    GRID_EPSILON_RANGE,
    UNIFORMS_PER_ENTRY,
    PiecewiseGrid,
    piecewise_grid,
)
from privgraph.mechanisms.features.scaled import (
    KSampledMixin,
    ScaledFeatureMechanism,
    choose_coordinates,
    scatter_coordinates,
    split_epsilon,
    wang_sample_size,
)
from privgraph.mechanisms.registry import register_mechanism

__all__ = [
    "KSampledMechanism",
    "PiecewiseMechanism",
    "pm_bound",
    "pm_grid",
    "pm_sample",
    "pm_grid_variance",
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
    """``C = (e^(eps/2) + 1) / (e^(eps/2) - 1) = coth(eps / 4)``: the continuous PM's outputs lie
    in ``[-C, C]`` (the grid's :attr:`~PiecewiseGrid.bound` is within about a cell of it)."""
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


def pm_grid(epsilon: float, cells: int = GRID_CELLS) -> PiecewiseGrid:
    """PM on the public grid of ``cells`` cells at budget ``epsilon`` (see
    :mod:`~privgraph.mechanisms.features.piecewise_grid`): window share ``1 / (e^(eps/2) + 1)``."""
    return piecewise_grid(float(check_epsilon(epsilon, "epsilon")), "pm", cells)


def pm_sample(t: Any, epsilon: float, rng: np.random.Generator) -> np.ndarray:
    """Draw PM on the public grid for every entry of ``t`` (five uniforms each): the mechanism's
    released values, all on :meth:`pm_grid(epsilon).values() <PiecewiseGrid.values>`."""
    rng = check_generator(rng)
    return pm_grid(epsilon).sample(as_unit_input(t), rng)


def pm_grid_variance(t: Any, epsilon: float) -> np.ndarray:
    """The exact variance of :func:`pm_sample` (the grid law; :func:`pm_variance` is the continuous one's)."""
    return pm_grid(epsilon).variance(as_unit_input(t))


def _pm_levels(e: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The two density levels ``(p, p / e^eps)``; ``p = e^(eps/2) tanh(eps/4) / 2``."""
    th = np.tanh(e / 4.0)
    with np.errstate(over="ignore"):
        high = 0.5 * np.exp(e / 2.0) * th
    return high, 0.5 * np.exp(-e / 2.0) * th


def pm_density(y: Any, t: Any, epsilon: Any) -> np.ndarray:
    """The density of the continuous PM at ``y`` given ``t`` (broadcast; 0 outside ``[-C, C]``)."""
    y = np.asarray(y, dtype=np.float64)
    t = as_unit_input(t)
    e = as_epsilon_array(epsilon)
    C, left, right, _, _, _ = _pm_pieces(t, e)
    high, low = _pm_levels(e)
    inside = (y >= -C) & (y <= C)
    centre = (y >= left) & (y <= right)
    return np.where(centre, high, np.where(inside, low, 0.0))


def pm_cdf(y: Any, t: Any, epsilon: Any) -> np.ndarray:
    """The CDF ``Pr(t* <= y | t)`` of the continuous PM (broadcast)."""
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
    \frac{e^{\varepsilon/2} + 3}{3 (e^{\varepsilon/2} - 1)^2}` (Wang et al., Lemma 1) of the
    continuous PM; the grid's (:func:`pm_grid_variance`) is within a relative :math:`1/W` of it
    (the window rounded to :math:`W` whole cells)."""
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


class KSampledMechanism(KSampledMixin, ScaledFeatureMechanism):
    """Wang et al.'s Algorithm 4 around a one-dimensional mechanism on ``[-1, 1]`` (PM, HM).

    A subclass sets ``_draws`` (uniforms per reported entry) and implements
    ``_perturb_1d(t [rows, k], eps_k, u [rows, k, draws], rng)`` and ``_variance_1d(t, eps_k)``.
    The reported entries are scaled by ``d / k`` and mapped back affinely with the others (0).
    """

    domain: ClassVar[tuple[float, float]] = (-1.0, 1.0)
    _draws: ClassVar[int] = UNIFORMS_PER_ENTRY
    epsilon_range: ClassVar[EpsilonRange] = GRID_EPSILON_RANGE

    def sampled_dimensions(self, d: int) -> int:
        """``k`` for ``d`` features (Wang et al., Algorithm 4)."""
        return sampling_k(self.epsilon, d)

    def dimension_epsilon(self, d: int) -> float:
        """The budget of each of the ``k`` reported dimensions (``k * eps_k <= epsilon`` exactly)."""
        return split_epsilon(self.epsilon, self.sampled_dimensions(d))

    def _check_dimension(self, d: int) -> None:
        e = self._check_coordinate(self.dimension_epsilon(d), "epsilon / k")
        pm_grid(e)  # the grid must exist (refuses a budget too small for 2^20 cells)

    def _perturb_1d(
        self, tk: np.ndarray, e: float, u: np.ndarray, rng: np.random.Generator
    ) -> np.ndarray:  # pragma: no cover
        raise NotImplementedError

    def _variance_1d(self, t: np.ndarray, e: float) -> np.ndarray:  # pragma: no cover
        raise NotImplementedError

    def _perturb(self, t: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        rows, d = t.shape
        k = self.sampled_dimensions(d)
        e = split_epsilon(self.epsilon, k)
        idx, tk, u = self._draw_sampled(t, k, self._draws, rng)
        yk = self._perturb_1d(tk, e, u.reshape(rows, k, self._draws), rng)
        yk *= d / k
        return scatter_coordinates(yk, idx, d)

    def _domain_variance(self, t: np.ndarray) -> np.ndarray:
        d = t.shape[-1]
        k = self.sampled_dimensions(d)
        return k_sampling_variance(t, k, self._variance_1d(t, split_epsilon(self.epsilon, k)))


@register_mechanism
class PiecewiseMechanism(KSampledMechanism):
    r"""Wang et al.'s Piecewise Mechanism with their k-dimension sampling (ICDE 2019,
    Algorithms 2 and 4), a feature-LDP baseline of the HeteroRR and LPGNN comparisons, released
    on a fixed public grid.

    Features are scaled to :math:`t_j \in [-1, 1]` with PUBLIC bounds and clipped. Each node
    samples :math:`k = \max(1, \min(d, \lfloor \varepsilon / 2.5 \rfloor))` of its :math:`d`
    dimensions uniformly without replacement (independently of the data), perturbs each
    sampled :math:`t_j` with one-dimensional PM at :math:`\varepsilon' = \varepsilon / k`, and
    reports :math:`\frac{d}{k} t^*_j` on the sampled dimensions and 0 on the others.

    PM at budget :math:`\varepsilon'` (Algorithm 2) outputs a point of :math:`[-C, C]`,
    :math:`C = \coth(\varepsilon'/4)`, uniform on the window :math:`[\ell(t), r(t)]`,
    :math:`\ell(t) = \frac{C+1}{2} t - \frac{C-1}{2}`, :math:`r(t) = \ell(t) + C - 1`, with
    probability :math:`e^{\varepsilon'/2} / (e^{\varepsilon'/2} + 1)`, else uniform on the rest;
    the window holds the share :math:`f = (C - 1)/(2C) = 1/(e^{\varepsilon'/2} + 1)` of the range
    and the two densities have ratio :math:`e^{\varepsilon'}`. privgraph releases the same
    construction on a public grid of :math:`M = 2^{20}` cells
    (:class:`~privgraph.mechanisms.features.piecewise_grid.PiecewiseGrid`): a window of
    :math:`W = \mathrm{round}(Mf)` cells at the randomly rounded position
    :math:`\frac{t+1}{2}(M - W)`, cell probabilities :math:`p_{hi} = (1-q)/W` and
    :math:`p_{lo} = q/(M - W)` with :math:`p_{hi}/p_{lo} \le e^{\varepsilon'}` certified in
    rational arithmetic, the cell's value :math:`(i + \frac12 - \frac M2)\delta` scaled so that
    :math:`E[y \mid t] = t`. Every input reaches every grid value with a probability in
    :math:`[p_{lo}, p_{hi}]`, so each report is :math:`\varepsilon'`-LDP; the piece and the cell
    are drawn exactly (:func:`~privgraph.mechanisms.sampling.bernoulli_exact`, an exact integer
    sampler). The :math:`k` reports compose to :math:`k \varepsilon' \le \varepsilon`
    (:func:`per_dimension_epsilon` rounds :math:`\varepsilon / k` down until this holds exactly).

    The estimate :math:`y_j` on :math:`[-1, 1]` is mapped back affinely,
    ``lower + (y + 1) / 2 * (upper - lower)`` (unsampled dimensions land at the midpoint):
    an unbiased estimate of the clipped features.

    Args:
        epsilon (float): the budget of one node's whole vector (each of the ``k`` reports gets
            :math:`\varepsilon / k \le 50`, :attr:`epsilon_range`).
        lower, upper (float or array-like, optional): the PUBLIC feature bounds (default
            ``0.0`` and ``1.0``; :func:`~privgraph.mechanisms.features.scaled.check_bounds`).

    Shapes:
        - input: node features :math:`[|V|, d]` (or any row block ``[rows, d]``)
        - output: float32 :math:`[|V|, d]`; on the :math:`[-1, 1]` scale each entry is 0 or
          :math:`\frac{d}{k}` times a value of the public grid (:func:`pm_grid`)

    Runtime:
        :math:`O(|V| d)`: :math:`d + 5k` uniforms per row (:math:`5d` when :math:`k = d`) and
        one partial sort of the keys per row (``argmin`` when :math:`k = 1`).

    Utility:
        unbiased; per-coordinate variance :math:`\frac{d}{k}(V(t_j, \varepsilon/k) + t_j^2) - t_j^2`
        on the :math:`[-1, 1]` scale, :math:`V` the grid law's exact variance
        (:func:`pm_grid_variance`), within a relative :math:`1/W` (the window rounded to whole cells)
        of Lemma 1's
        :math:`\frac{t^2}{e^{\varepsilon/2} - 1} + \frac{e^{\varepsilon/2} + 3}{3 (e^{\varepsilon/2} - 1)^2}`.
    """

    name: ClassVar[str] = "piecewise"
    _assumptions: ClassVar[tuple[str, ...]] = (
        (
            "released values lie on a fixed public grid of 2^20 cells (the same for every input); "
            "the piece and the cell are drawn exactly and p_hi / p_lo <= e^(eps/k) holds in rational "
            "arithmetic"
        ),
        "the k reported dimensions are sampled independently of the data, each with epsilon / k",
    )

    def _perturb_1d(self, tk: np.ndarray, e: float, u: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        return pm_grid(e).transform(tk, u, rng)

    def _variance_1d(self, t: np.ndarray, e: float) -> np.ndarray:
        return pm_grid(e).variance(t)
