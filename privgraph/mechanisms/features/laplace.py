"""LaplaceMechanism: per-node Laplace noise on the whole feature vector (a feature-LDP baseline).

Its scaffolding (public bounds, scaling and clipping, the chunked row loop, the affine map back)
is :class:`~privgraph.mechanisms.features.scaled.ScaledFeatureMechanism`.
"""

from __future__ import annotations

import math
from typing import Any, ClassVar

import numpy as np

from privgraph.mechanisms.base import check_epsilon
from privgraph.mechanisms.features.scaled import ScaledFeatureMechanism

__all__ = [
    "LaplaceMechanism",
    "laplace_scale",
    "laplace_density",
    "laplace_cdf",
    "laplace_variance",
]


# -- the Laplace mechanism ---------------------------------------------------------------------
def laplace_scale(epsilon: float, d: int) -> float:
    """The per-coordinate noise scale ``b = d / epsilon`` for vectors in ``[0, 1]^d``."""
    epsilon = check_epsilon(epsilon, "epsilon")
    if isinstance(d, bool) or not isinstance(d, (int, np.integer)) or d < 1:
        raise ValueError(f"d must be an int >= 1, got {d!r}")
    b = d / epsilon
    if not math.isfinite(b):
        raise ValueError(f"epsilon={epsilon!r} is too small for d={d}: the Laplace scale overflows")
    return b


def laplace_density(y: Any, z: Any, epsilon: float, d: int) -> np.ndarray:
    """Per-coordinate output density ``exp(-|y - z| / b) / (2 b)``, ``b = d / epsilon`` (broadcast)."""
    b = laplace_scale(epsilon, d)
    return np.exp(-np.abs(np.asarray(y, dtype=np.float64) - np.asarray(z, dtype=np.float64)) / b) / (2 * b)


def laplace_cdf(y: Any, z: Any, epsilon: float, d: int) -> np.ndarray:
    """Per-coordinate output CDF ``Pr(Y <= y | z)`` (broadcast)."""
    b = laplace_scale(epsilon, d)
    w = (np.asarray(y, dtype=np.float64) - np.asarray(z, dtype=np.float64)) / b
    return np.where(w < 0, 0.5 * np.exp(np.minimum(w, 0.0)), 1.0 - 0.5 * np.exp(-np.maximum(w, 0.0)))


def laplace_variance(epsilon: float, d: int) -> float:
    """Per-coordinate variance ``2 b^2 = 2 (d / epsilon)^2`` on the ``[0, 1]`` scale."""
    b = laplace_scale(epsilon, d)
    return 2.0 * b * b


class LaplaceMechanism(ScaledFeatureMechanism):
    r"""The Laplace mechanism on each node's whole feature vector (local model), the textbook
    feature-LDP baseline of the HeteroRR and LPGNN comparisons (Dwork, McSherry, Nissim and
    Smith, "Calibrating noise to sensitivity in private data analysis", TCC 2006).

    Each feature is scaled to :math:`z_j \in [0, 1]` with PUBLIC bounds and clipped; the node
    releases

    .. math::
        y_j = z_j + \eta_j, \qquad \eta_j \overset{iid}{\sim} \mathrm{Lap}(b), \qquad
        b = \frac{\Delta_1}{\varepsilon} = \frac{d}{\varepsilon},

    since two vectors in :math:`[0, 1]^d` differ by at most :math:`\Delta_1 = d` in
    :math:`\ell_1`. The output density ratio for inputs :math:`z, z'` is
    :math:`\exp((\lVert y - z'\rVert_1 - \lVert y - z\rVert_1)/b) \le
    \exp(\lVert z - z'\rVert_1 / b) \le e^{\varepsilon}`, attained for opposite corners of the
    cube and :math:`y` beyond both. The output ``lower + y * (upper - lower)`` is an unbiased
    estimate of the clipped feature.

    The noise is continuous floating-point Laplace (numpy's inverse-CDF sampler); its low bits
    are not hardened against Mironov's (2012) floating-point attack, and the guarantee names
    this assumption.

    Args:
        epsilon (float): the budget of one node's whole vector (> 0).
        lower (float or array-like, optional): PUBLIC lower bound(s) of the raw features
            (default: ``0.0``). Never derive it from the private data.
        upper (float or array-like, optional): PUBLIC upper bound(s), ``> lower``
            (default: ``1.0``). Values outside ``[lower, upper]`` are clipped.

    Shapes:
        - input: node features :math:`[|V|, d]` (or any row block ``[rows, d]``)
        - output: float32 :math:`[|V|, d]`, real-valued (unbounded)

    Runtime:
        :math:`O(|V| d)`: one Laplace draw per entry; memory :math:`O(|V| d)` for the output
        plus a bounded chunk of float64 temporaries.

    Utility:
        unbiased for the clipped value; variance :math:`2 (d / \varepsilon)^2 (u - l)^2` per
        entry (:func:`laplace_variance` on the unit scale, :meth:`variance` on the original).
    """

    name: ClassVar[str] = "laplace"
    domain: ClassVar[tuple[float, float]] = (0.0, 1.0)
    _assumptions: ClassVar[tuple[str, ...]] = (
        "continuous floating-point Laplace noise (the real-valued analysis; low bits not hardened)",
        "L1 sensitivity d of a vector in [0, 1]^d (scale d / epsilon per coordinate)",
    )

    def _check_dimension(self, d: int) -> None:
        laplace_scale(self.epsilon, d)

    def _perturb(self, t: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        b = laplace_scale(self.epsilon, t.shape[1])
        t += rng.laplace(0.0, b, size=t.shape)
        return t

    def _domain_variance(self, t: np.ndarray) -> np.ndarray:
        return np.full(t.shape, laplace_variance(self.epsilon, t.shape[1]))
