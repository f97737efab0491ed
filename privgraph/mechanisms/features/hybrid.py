"""HybridMechanism: Wang et al.'s Hybrid Mechanism (HM) with k-dimension sampling.

HM mixes the Piecewise Mechanism (piecewise.py, on its public grid) and Duchi et al.'s
one-dimensional mechanism (duchi.py); this module reuses both and PM's k-dimension sampling.

Reference:
    N. Wang, X. Xiao, Y. Yang, J. Zhao, S. C. Hui, H. Shin, J. Shin and G. Yu, "Collecting and
    analyzing multidimensional data with local differential privacy", ICDE 2019
    (arXiv:1907.00782): Section III-C (HM, the mixing weight alpha and the threshold eps*) and
    Algorithm 4 (d dimensions by sampling k of them).
"""

from __future__ import annotations

import math
from typing import Any, ClassVar

import numpy as np

from privgraph.guarantee.params import check_epsilon
from privgraph.mechanisms.base import EpsilonRange, check_generator
from privgraph.mechanisms.features.duchi import (
    as_epsilon_array,
    as_unit_input,
    duchi_1d_pmf,
    duchi_1d_probabilities,
    duchi_1d_variance,
)
from privgraph.mechanisms.features.piecewise import KSampledMechanism, pm_grid
from privgraph.mechanisms.features.piecewise_grid import GRID_CELLS, UNIFORMS_PER_ENTRY
from privgraph.mechanisms.sampling import bernoulli_exact
from privgraph.mechanisms.registry import register_mechanism

__all__ = [
    "HybridMechanism",
    "EPS_STAR",
    "hm_alpha",
    "hm_transform",
    "hm_sample",
    "hm_atoms",
    "hm_law",
    "hm_variance",
    "HM_UNIFORMS",
]

#: Uniforms one HM draw takes: the choice, then the grid PM's five (Duchi reuses the first two).
HM_UNIFORMS = 1 + UNIFORMS_PER_ENTRY

#: Wang et al.'s threshold: below it HM is Duchi's mechanism alone. The paper's closed form,
#: ln((-5 + 2 (6353 - 405 sqrt 241)^(1/3) + 2 (6353 + 405 sqrt 241)^(1/3)) / 27) = 0.60935...,
#: quoted as "about 0.61".
_ROOT = 405.0 * math.sqrt(241.0)
EPS_STAR: float = math.log((-5.0 + 2.0 * (6353.0 - _ROOT) ** (1 / 3) + 2.0 * (6353.0 + _ROOT) ** (1 / 3)) / 27.0)


def hm_alpha(epsilon: Any) -> np.ndarray:
    r"""The PM weight :math:`\alpha = 1 - e^{-\varepsilon/2}` for :math:`\varepsilon > \varepsilon^*`,
    else 0 (Duchi only); broadcast over per-entry budgets."""
    e = as_epsilon_array(epsilon)
    return np.where(e > EPS_STAR, -np.expm1(-e / 2.0), 0.0)


def hm_transform(t: Any, epsilon: float, u: np.ndarray, rng: np.random.Generator | None = None) -> np.ndarray:
    r"""The Hybrid Mechanism as a transform of six uniforms per entry (``u [..., 6]``).

    With probability :math:`\alpha` (``u[..., 0] < alpha``, :func:`hm_alpha`) PM on its public
    grid (:meth:`~privgraph.mechanisms.features.piecewise_grid.PiecewiseGrid.transform` with
    ``u[..., 1:6]``), else Duchi et al.'s one-dimensional mechanism, :math:`\pm b`,
    :math:`b = \coth(\varepsilon/2)`, its less likely sign drawn with
    :func:`~privgraph.mechanisms.sampling.bernoulli_exact` on ``u[..., 1:3]`` (the float64
    probability realised exactly); both at the same budget. A mixture, with input-independent
    weights, of two :math:`\varepsilon`-LDP mechanisms is :math:`\varepsilon`-LDP, and of two
    unbiased ones unbiased (the weight's own rounding moves no privacy). ``rng`` serves the grid's
    rare cell redraw.

    Returns:
        np.ndarray: float64 outputs, the shape of ``t``: grid values of :func:`pm_grid` or :math:`\pm b`.
    """
    t = as_unit_input(t)
    eps = check_epsilon(epsilon, "epsilon")
    u = np.asarray(u, dtype=np.float64)
    if u.shape != t.shape + (HM_UNIFORMS,):
        raise ValueError(f"u must have shape {list(t.shape) + [HM_UNIFORMS]}, got {list(u.shape)}")
    alpha = float(hm_alpha(eps))
    p_minus, p_plus = duchi_1d_probabilities(t, np.float64(eps))
    small_plus = p_plus < p_minus
    hit = bernoulli_exact(np.where(small_plus, p_plus, p_minus), u[..., 1], u[..., 2])
    b = 1.0 / math.tanh(eps / 2.0)
    y = np.where(hit == small_plus, b, -b)
    if alpha > 0.0:
        use_pm = u[..., 0] < alpha
        if use_pm.any():
            y[use_pm] = pm_grid(eps).transform(t[use_pm], u[use_pm][:, 1:], rng)
    return y


def hm_sample(t: Any, epsilon: float, rng: np.random.Generator) -> np.ndarray:
    """Draw the Hybrid Mechanism for every entry of ``t`` (six uniforms each)."""
    rng = check_generator(rng)
    t = as_unit_input(t)
    return hm_transform(t, epsilon, rng.random(t.shape + (HM_UNIFORMS,)), rng)


def hm_atoms(t: Any, epsilon: Any) -> tuple[np.ndarray, np.ndarray]:
    """HM's atoms ``(values, masses)``, each ``[..., 2]``: ``(1 - alpha)`` times Duchi's pmf at ``-+b``."""
    values, probs = duchi_1d_pmf(t, epsilon)
    return values, (1.0 - hm_alpha(epsilon))[..., None] * probs


def hm_law(t: Any, epsilon: float, cells: int = GRID_CELLS) -> tuple[np.ndarray, np.ndarray]:
    """The exact output law ``(values [V], probabilities [..., V])`` of HM with a ``cells``-cell
    grid: the grid values (weight alpha) and the two atoms (merged where they coincide). For
    tests on small grids."""
    t = as_unit_input(t)
    eps = check_epsilon(epsilon, "epsilon")
    alpha = float(hm_alpha(eps))
    grid = pm_grid(eps, cells)
    atom_v, atom_p = hm_atoms(t, eps)
    values = np.unique(np.concatenate([grid.values(), atom_v.reshape(-1)[:2]]))
    probs = np.zeros(t.shape + (values.size,))
    pos = np.searchsorted(values, grid.values())
    probs[..., pos] += alpha * grid.pmf(t)
    for j in range(2):
        probs[..., np.searchsorted(values, atom_v.reshape(-1)[j])] += atom_p[..., j]
    return values, probs


def hm_variance(t: Any, epsilon: float) -> np.ndarray:
    r""":math:`\alpha V_{PM} + (1 - \alpha) V_{D}`, :math:`V_{PM}` the grid PM's exact variance: both
    parts are unbiased, so the mixture's variance is the mixture of their variances."""
    t = as_unit_input(t)
    eps = check_epsilon(epsilon, "epsilon")
    alpha = float(hm_alpha(eps))
    v = (1.0 - alpha) * duchi_1d_variance(t, eps)
    if alpha > 0.0:
        v = v + alpha * pm_grid(eps).variance(t)
    return v


@register_mechanism
class HybridMechanism(KSampledMechanism):
    r"""Wang et al.'s Hybrid Mechanism with their k-dimension sampling (ICDE 2019, Section III-C
    and Algorithm 4), a feature-LDP baseline of the HeteroRR and LPGNN comparisons.

    Features are scaled to :math:`t_j \in [-1, 1]` with PUBLIC bounds and clipped. Each node
    samples :math:`k = \max(1, \min(d, \lfloor \varepsilon / 2.5 \rfloor))` of its :math:`d`
    dimensions uniformly without replacement (independently of the data) and perturbs each
    sampled :math:`t_j` at :math:`\varepsilon' = \varepsilon / k` with HM:

    .. math::
        t^*_j = \begin{cases} \mathrm{PM}(t_j, \varepsilon') & \text{with probability }
        \alpha = 1 - e^{-\varepsilon'/2} \\ \mathrm{Duchi}(t_j, \varepsilon') &
        \text{otherwise} \end{cases}
        \quad (\varepsilon' > \varepsilon^* \approx 0.61), \qquad
        t^*_j = \mathrm{Duchi}(t_j, \varepsilon') \quad (\varepsilon' \le \varepsilon^*),

    with :math:`\varepsilon^*` the paper's closed form (:data:`EPS_STAR` = 0.60935...). It
    reports :math:`\frac{d}{k} t^*_j` on the sampled dimensions and 0 elsewhere. PM is the grid
    PM of :class:`~privgraph.mechanisms.features.piecewise.PiecewiseMechanism` (a fixed public
    grid of :math:`2^{20}` cells, drawn exactly, :math:`p_{hi}/p_{lo} \le e^{\varepsilon'}`
    certified); Duchi's output is :math:`\pm \coth(\varepsilon'/2)`, its less likely sign drawn
    with :func:`~privgraph.mechanisms.sampling.bernoulli_exact`. So the released values form a
    fixed public set (the grid and the two atoms) whatever the input. Each part is
    :math:`\varepsilon'`-LDP and the weights do not depend on the input, so HM is
    :math:`\varepsilon'`-LDP; the :math:`k` reports compose to
    :math:`k \varepsilon' \le \varepsilon` (rounded down exactly, as for PM).

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
          :math:`\frac{d}{k}` times a grid value of :func:`~privgraph.mechanisms.features.piecewise.pm_grid`
          or :math:`\pm \coth(\varepsilon'/2)`

    Runtime:
        :math:`O(|V| d)`: :math:`d + 6k` uniforms per row (:math:`6d` when :math:`k = d`) and
        one partial sort of the keys per row (``argmin`` when :math:`k = 1`).

    Utility:
        unbiased; per-coordinate variance :math:`\frac{d}{k}(V_{HM}(t_j, \varepsilon/k) +
        t_j^2) - t_j^2` on the :math:`[-1, 1]` scale, :math:`V_{HM} = \alpha V_{PM} +
        (1 - \alpha) V_D` (:func:`hm_variance`, :math:`V_{PM}` the grid law's); Wang et al. show
        its worst case is below both PM's and Duchi's.
    """

    name: ClassVar[str] = "hybrid"
    epsilon_range: ClassVar[EpsilonRange] = EpsilonRange(
        per_coordinate=True,
        note=(
            "each of the k reports is the grid PM (exact for eps / k <= 50, see piecewise) or "
            "Duchi's two-point output, whose smaller probability (>= 1 / (e^(eps/k) + 1) >= 2^-73 "
            "up to 50) is drawn with bernoulli_exact, exact for float64 p >= 2^-54 (to 2^-106 "
            "absolute, rounded up, below)"
        ),
    )
    _assumptions: ClassVar[tuple[str, ...]] = (
        (
            "released values lie on a fixed public set, the PM grid of 2^20 cells and Duchi's two "
            "points (the same for every input); PM's piece and cell are drawn exactly with "
            "p_hi / p_lo <= e^(eps/k) in rational arithmetic, Duchi's sign with bernoulli_exact on "
            "float64 probabilities within a few ulps of the kernel"
        ),
        "the k reported dimensions are sampled independently of the data, each with epsilon / k",
    )
    _draws: ClassVar[int] = HM_UNIFORMS

    def _check_dimension(self, d: int) -> None:
        e = self._check_coordinate(self.dimension_epsilon(d), "epsilon / k")
        if float(hm_alpha(e)) > 0.0:
            pm_grid(e)

    def _perturb_1d(self, tk: np.ndarray, e: float, u: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        return hm_transform(tk, e, u, rng)

    def _variance_1d(self, t: np.ndarray, e: float) -> np.ndarray:
        return hm_variance(t, e)
