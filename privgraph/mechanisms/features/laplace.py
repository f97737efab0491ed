"""LaplaceMechanism: per-node discrete Laplace noise on a public grid (a feature-LDP baseline).

Its scaffolding (public bounds, scaling and clipping, the chunked row loop, the affine map back)
is :class:`~privgraph.mechanisms.features.scaled.ScaledFeatureMechanism`; the noise is the exact
discrete Laplace sampler of :mod:`privgraph.mechanisms.noise`.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any, ClassVar

import numpy as np

from privgraph.guarantee.params import check_epsilon
from privgraph.mechanisms.base import EpsilonRange
from privgraph.mechanisms.features.scaled import ScaledFeatureMechanism
from privgraph.mechanisms.noise import (
    WordStream,
    discrete_laplace_pmf,
    discrete_laplace_variance,
    dyadic_parameter,
)
from privgraph.mechanisms.registry import register_mechanism

__all__ = [
    "LaplaceMechanism",
    "LAPLACE_GRID_BITS",
    "LAPLACE_GRID_STEP",
    "laplace_scale",
    "laplace_grid_index",
    "laplace_noise_parameter",
    "laplace_step_epsilon",
    "laplace_pmf",
    "laplace_variance",
]

#: The public grid: a scaled feature ``z`` in ``[0, 1]`` is released as a multiple of
#: ``2^-LAPLACE_GRID_BITS`` (in feature units, of ``2^-20 (upper - lower)`` above ``lower``).
LAPLACE_GRID_BITS = 20
LAPLACE_GRID_STEP = 2.0**-LAPLACE_GRID_BITS
_STEPS = 1 << LAPLACE_GRID_BITS  # the per-coordinate sensitivity in grid steps


def _check_d(d: Any) -> int:
    if isinstance(d, bool) or not isinstance(d, (int, np.integer)) or d < 1:
        raise ValueError(f"d must be an int >= 1, got {d!r}")
    return int(d)


def laplace_scale(epsilon: float, d: int) -> float:
    """The continuous mechanism's per-coordinate scale ``b = d / epsilon`` on ``[0, 1]`` (the
    discrete noise has the same scale, ``1 / laplace_step_epsilon`` grid steps, to 1 part in 2^52)."""
    epsilon = check_epsilon(epsilon, "epsilon")
    d = _check_d(d)
    b = d / epsilon
    if not math.isfinite(b):
        raise ValueError(f"epsilon={epsilon!r} is too small for d={d}: the Laplace scale overflows")
    return b


def laplace_grid_index(z: Any) -> np.ndarray:
    """The grid index ``rint(z 2^20)`` (int64, ties to even) of scaled features ``z`` in ``[0, 1]``:
    a deterministic function of the input, in ``[0, 2^20]``."""
    z = np.asarray(z, dtype=np.float64)
    return np.rint(z * _STEPS).astype(np.int64)  # z * 2^20 is exact (a power of two)


def laplace_noise_parameter(epsilon: float, d: int) -> tuple[int, int]:
    r"""``(s, T)``: the discrete Laplace parameter :math:`a = s / 2^T` per grid step.

    :math:`a \le \varepsilon / (d \, 2^{20})` holds EXACTLY (rational arithmetic): a vector of
    :math:`d` grid indices in :math:`[0, 2^{20}]` moves by at most :math:`d \, 2^{20}` steps in
    :math:`\ell_1`, so its loss is at most :math:`d \, 2^{20} a \le \varepsilon`. ``a`` is the float
    :math:`\varepsilon / (d 2^{20})` (rounded down, see
    :func:`~privgraph.mechanisms.noise.dyadic_parameter`), i.e. within a relative :math:`2^{-52}`
    of it when :math:`\varepsilon / (d 2^{20}) \ge 2^{-10}`, and :math:`2^{-10}` otherwise.
    """
    eps = check_epsilon(epsilon, "epsilon")
    d = _check_d(d)
    a = eps / d * LAPLACE_GRID_STEP
    if not a > 0.0:
        raise ValueError(f"epsilon={eps!r} is too small for d={d}: the per-step parameter underflows")
    s, T = dyadic_parameter(a)
    bound = Fraction(eps) / (d * _STEPS)
    while Fraction(s, 1 << T) > bound:  # the float division may have rounded up
        s -= 1
    return s, T


def laplace_step_epsilon(epsilon: float, d: int) -> float:
    """The per-step parameter ``a = s / 2^T`` (float64, exact) of :func:`laplace_noise_parameter`."""
    s, T = laplace_noise_parameter(epsilon, d)
    return s / float(1 << T)


def laplace_pmf(k: Any, n: Any, epsilon: float, d: int) -> np.ndarray:
    r"""The exact per-coordinate output law: :math:`\Pr(K = k \mid n) = \tanh(a/2)\, e^{-a |k - n|}`
    for grid indices ``k`` (output) and ``n`` (input), :math:`a` = :func:`laplace_step_epsilon` (broadcast)."""
    a = laplace_step_epsilon(epsilon, d)
    return discrete_laplace_pmf(np.asarray(k, dtype=np.int64) - np.asarray(n, dtype=np.int64), a)


def laplace_variance(epsilon: float, d: int) -> float:
    r"""Per-coordinate variance on the ``[0, 1]`` scale: :math:`2^{-40} / (2 \sinh^2(a / 2))`
    (:math:`\approx 2 (d / \varepsilon)^2`, the continuous mechanism's)."""
    a = laplace_step_epsilon(epsilon, d)
    return discrete_laplace_variance(a) * LAPLACE_GRID_STEP * LAPLACE_GRID_STEP


@register_mechanism
class LaplaceMechanism(ScaledFeatureMechanism):
    r"""The Laplace mechanism on each node's whole feature vector (local model), the textbook
    feature-LDP baseline of the HeteroRR and LPGNN comparisons (Dwork, McSherry, Nissim and
    Smith, "Calibrating noise to sensitivity in private data analysis", TCC 2006), released on a
    public grid with exact discrete Laplace noise (Canonne, Kamath and Steinke, "The Discrete
    Gaussian for Differential Privacy", NeurIPS 2020).

    Each feature is scaled to :math:`z_j \in [0, 1]` with PUBLIC bounds and clipped, rounded to
    the public grid of step :math:`g = 2^{-20}`, :math:`n_j = \mathrm{rint}(z_j / g) \in
    [0, 2^{20}]` (a deterministic function of the input), and the node releases the grid point

    .. math::
        y_j = g\,(n_j + K_j), \qquad \Pr(K_j = k) = \tanh(a/2)\, e^{-a |k|}, \qquad
        a \le \frac{\varepsilon}{d\, 2^{20}},

    i.e. ``lower + g (n + K) (upper - lower)`` in feature units (float32). Two vectors of grid
    indices differ by at most :math:`\Delta_1 = d \cdot 2^{20}` steps (:math:`\lceil 1 / g \rceil`
    per coordinate), so the output probability ratio is
    :math:`e^{a (\lVert K - n' \rVert_1 - \lVert K - n \rVert_1)} \le e^{a \Delta_1} \le
    e^{\varepsilon}` (:func:`laplace_noise_parameter` keeps :math:`d\,2^{20} a \le \varepsilon`
    exactly). The noise is sampled EXACTLY (integer comparisons on random words,
    :func:`~privgraph.mechanisms.noise.discrete_laplace_dyadic`), and every input reaches the same
    set of outputs, the grid: no floating-point low bits carry the input (Mironov 2012).

    Args:
        epsilon (float): the budget of one node's whole vector (its per-coordinate share
            :math:`\varepsilon / d` must be at most 50, :attr:`epsilon_range`).
        lower, upper (float or array-like, optional): the PUBLIC feature bounds (default
            ``0.0`` and ``1.0``; :func:`~privgraph.mechanisms.features.scaled.check_bounds`).

    Shapes:
        - input: node features :math:`[|V|, d]` (or any row block ``[rows, d]``)
        - output: float32 :math:`[|V|, d]`, grid points ``lower + g m (upper - lower)``, ``m`` integer

    Runtime:
        :math:`O(|V| d)`: one exact discrete Laplace draw per entry (about 6 random 64-bit words
        and a compiled rejection loop); memory :math:`O(|V| d)` for the output plus a bounded
        chunk.

    Utility:
        unbiased for the clipped value ROUNDED to the grid: the bias is the rounding,
        :math:`|g\,n_j - z_j| \le g/2 = 2^{-21}` of the range (:meth:`bias`, exact); variance
        :math:`g^2 / (2 \sinh^2(a/2)) \approx 2 (d / \varepsilon)^2` per entry on the unit scale
        (:func:`laplace_variance`; :meth:`variance` on the original scale).
    """

    name: ClassVar[str] = "laplace"
    domain: ClassVar[tuple[float, float]] = (0.0, 1.0)
    epsilon_range: ClassVar[EpsilonRange] = EpsilonRange(
        per_coordinate=True,
        note=(
            "the discrete Laplace sampler is exact at every budget (integer arithmetic); the "
            "per-coordinate share epsilon / d is capped at privgraph's common 50 (its noise is then "
            "2^20 / 50 grid steps, 1/50 of the range), and epsilon / d must leave the per-step "
            "parameter epsilon / (d 2^20) >= 2^-52 (checked with d)"
        ),
    )
    _assumptions: ClassVar[tuple[str, ...]] = (
        (
            "released values are points of the public grid of step 2^-20 of [lower, upper]: the "
            "scaled feature is rounded to the grid (a deterministic function of the input) and gets "
            "exact discrete Laplace noise (Canonne, Kamath and Steinke 2020)"
        ),
        "L1 sensitivity d * 2^20 grid steps of a vector in [0, 1]^d (parameter <= epsilon / (d 2^20) per step)",
    )

    def _check_dimension(self, d: int) -> None:
        self._check_coordinate(self.epsilon / d, "epsilon / d")
        laplace_noise_parameter(self.epsilon, d)

    def _noise_source(self, rng: np.random.Generator) -> WordStream:
        return WordStream(rng)

    def _perturb(self, t: np.ndarray, source: WordStream) -> np.ndarray:  # type: ignore[override]
        s, T = laplace_noise_parameter(self.epsilon, t.shape[1])
        m = laplace_grid_index(t)
        m += source.discrete_laplace(s, T, m.size).reshape(m.shape)
        return m * LAPLACE_GRID_STEP  # exact: |m| < 2^53, times a power of two

    def _domain_variance(self, t: np.ndarray) -> np.ndarray:
        return np.full(t.shape, laplace_variance(self.epsilon, t.shape[1]))

    def bias(self, x: Any) -> np.ndarray:
        """``E[output] - x`` per entry (float64, the shape of ``x``): the clipping plus the rounding
        to the grid, ``lower + g rint(z / g) (upper - lower) - x`` (at most ``2^-21 (upper - lower)``
        inside the bounds)."""
        x = self._check_x(x, allow_1d=True)
        x2 = x.reshape(-1, x.shape[-1]) if x.ndim == 1 else x
        lo, hi = self._bounds(x.shape[-1])
        rounded = laplace_grid_index(self._to_domain(x2)) * LAPLACE_GRID_STEP
        return (lo + rounded * (hi - lo)).reshape(x.shape) - x
