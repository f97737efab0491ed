"""HybridMechanism: Wang et al.'s Hybrid Mechanism (HM) with k-dimension sampling.

HM mixes the Piecewise Mechanism (piecewise.py) and Duchi et al.'s one-dimensional mechanism
(duchi.py); this module reuses both samplers and PM's k-dimension sampling.

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

from privgraph.mechanisms.base import check_generator
from privgraph.mechanisms.features.duchi import (
    as_epsilon_array,
    as_unit_input,
    duchi_1d_pmf,
    duchi_1d_transform,
    duchi_1d_variance,
)
from privgraph.mechanisms.features.piecewise import (
    _KSampledMechanism,
    pm_cdf,
    pm_density,
    pm_transform,
    pm_variance,
)

__all__ = [
    "HybridMechanism",
    "EPS_STAR",
    "hm_alpha",
    "hm_transform",
    "hm_sample",
    "hm_continuous_density",
    "hm_atoms",
    "hm_cdf",
    "hm_variance",
]

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


def hm_transform(t: Any, epsilon: Any, u_choice: Any, u_side: Any, u_pos: Any) -> np.ndarray:
    r"""The Hybrid Mechanism as a transform of three uniforms per entry.

    With probability :math:`\alpha` (``u_choice < alpha``, :func:`hm_alpha`) the Piecewise
    Mechanism (:func:`~privgraph.mechanisms.features.piecewise.pm_transform` with ``u_side``,
    ``u_pos``), else Duchi et al.'s one-dimensional mechanism
    (:func:`~privgraph.mechanisms.features.duchi.duchi_1d_transform` with ``u_side``), both at
    the same budget. A mixture, with input-independent weights, of two
    :math:`\varepsilon`-LDP mechanisms is :math:`\varepsilon`-LDP, and of two unbiased ones
    unbiased.

    Args:
        t (array-like): inputs in ``[-1, 1]``.
        epsilon (float or array-like): the budget, scalar or per entry (broadcast).
        u_choice, u_side, u_pos (array-like): independent uniforms in ``[0, 1)`` (broadcast).

    Returns:
        np.ndarray: float64 outputs, the broadcast shape.
    """
    t = as_unit_input(t)
    alpha = hm_alpha(epsilon)
    y_pm = pm_transform(t, epsilon, u_side, u_pos)
    y_duchi = duchi_1d_transform(t, epsilon, u_side)
    return np.where(np.asarray(u_choice) < alpha, y_pm, y_duchi)


def hm_sample(t: Any, epsilon: Any, rng: np.random.Generator) -> np.ndarray:
    """Draw the Hybrid Mechanism for every entry of ``t`` (three uniforms each)."""
    rng = check_generator(rng)
    t = as_unit_input(t)
    shape = np.broadcast_shapes(t.shape, np.shape(epsilon))
    u = rng.random((3,) + shape)
    return hm_transform(t, epsilon, u[0], u[1], u[2])


def hm_continuous_density(y: Any, t: Any, epsilon: Any) -> np.ndarray:
    """The density of HM's continuous part, ``alpha * pm_density(y, t, eps)`` (broadcast)."""
    return hm_alpha(epsilon) * pm_density(y, t, epsilon)


def hm_atoms(t: Any, epsilon: Any) -> tuple[np.ndarray, np.ndarray]:
    """HM's atoms ``(values, masses)``, each ``[..., 2]``: ``(1 - alpha)`` times Duchi's pmf at ``-+b``."""
    values, probs = duchi_1d_pmf(t, epsilon)
    return values, (1.0 - hm_alpha(epsilon))[..., None] * probs


def hm_cdf(y: Any, t: Any, epsilon: Any) -> np.ndarray:
    """The exact output CDF ``Pr(t* <= y | t)`` of HM (a continuous part plus two atoms)."""
    y = np.asarray(y, dtype=np.float64)
    values, masses = hm_atoms(t, epsilon)
    jumps = np.sum(np.where(y[..., None] >= values, masses, 0.0), axis=-1)
    return hm_alpha(epsilon) * pm_cdf(y, t, epsilon) + jumps


def hm_variance(t: Any, epsilon: Any) -> np.ndarray:
    r""":math:`\alpha V_{PM}(t, \varepsilon) + (1 - \alpha) V_{D}(t, \varepsilon)`: both parts are
    unbiased, so the mixture's variance is the mixture of their variances."""
    alpha = hm_alpha(epsilon)
    return alpha * pm_variance(t, epsilon) + (1.0 - alpha) * duchi_1d_variance(t, epsilon)


class HybridMechanism(_KSampledMechanism):
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
    reports :math:`\frac{d}{k} t^*_j` on the sampled dimensions and 0 elsewhere. Each part is
    :math:`\varepsilon'`-LDP and the weights do not depend on the input, so HM is
    :math:`\varepsilon'`-LDP; the :math:`k` reports compose to
    :math:`k \varepsilon' \le \varepsilon` (rounded down exactly, as for PM).

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
        - output: float32 :math:`[|V|, d]`

    Runtime:
        :math:`O(|V| d)`: :math:`d + 3k` uniforms per row (:math:`3d` when :math:`k = d`) and
        one partial sort of the keys per row (``argmin`` when :math:`k = 1`).

    Utility:
        unbiased; per-coordinate variance :math:`\frac{d}{k}(V_{HM}(t_j, \varepsilon/k) +
        t_j^2) - t_j^2` on the :math:`[-1, 1]` scale, :math:`V_{HM} = \alpha V_{PM} +
        (1 - \alpha) V_D` (:func:`hm_variance`); Wang et al. show its worst case is below both
        PM's and Duchi's.
    """

    name: ClassVar[str] = "hybrid"
    _assumptions: ClassVar[tuple[str, ...]] = (
        "continuous floating-point uniform sampling (the real-valued analysis; low bits not hardened)",
        "the k reported dimensions are sampled independently of the data, each with epsilon / k",
    )
    _draws: ClassVar[int] = 3

    def _perturb_1d(self, tk: np.ndarray, e: float, u: np.ndarray) -> np.ndarray:
        return hm_transform(tk, e, u[:, 0], u[:, 1], u[:, 2])

    def _variance_1d(self, t: np.ndarray, e: float) -> np.ndarray:
        return hm_variance(t, e)
