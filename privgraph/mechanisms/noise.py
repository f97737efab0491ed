"""Integer noise for released counts.

Integer counts that a mechanism releases or sizes its output by (degrees, edge counts, the
``e_r`` of CalculateNoisyProb) take the two-sided geometric ("discrete Laplace") noise, not
floating-point Laplace, whose low bits leak (Mironov 2012; ARCHITECTURE.md, Privacy correctness).
"""

from __future__ import annotations

import math

import numpy as np

from privgraph.mechanisms.base import check_epsilon, check_generator, check_int

__all__ = ["discrete_laplace"]


def discrete_laplace(rng: np.random.Generator, epsilon: float, size: int) -> np.ndarray:
    r"""Two-sided geometric noise, :math:`\Pr(Z = z) \propto e^{-\epsilon |z|}`, as int64.

    Added to a count of sensitivity 1 it gives pure :math:`\epsilon`-DP (for sensitivity
    :math:`\Delta`, pass :math:`\epsilon / \Delta`). Drawn as the difference of two geometric
    variables with success probability :math:`1 - e^{-\epsilon}`.
    """
    rng = check_generator(rng)
    eps = check_epsilon(epsilon, "epsilon")
    size = check_int(size, "size", minimum=0)
    success = -math.expm1(-eps)
    return (rng.geometric(success, size) - rng.geometric(success, size)).astype(np.int64)
