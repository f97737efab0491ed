r"""The channel of k-ary randomized response (Warner 1965; LPGNN's label RR), as data.

A label released by :class:`~privgraph.mechanisms.features.label_rr.LabelRR` at budget
:math:`\varepsilon` over :math:`c` public classes is kept with :math:`e^\varepsilon / (e^\varepsilon + c - 1)`
and replaced by each other class with :math:`1 / (e^\varepsilon + c - 1)`. The mechanism samples
from this channel; training (LPGNN's Drop: its accuracy bound and forward correction) reads it
from the release's public parameters, without importing the mechanism.
"""

from __future__ import annotations

import math

import numpy as np

from privgraph.guarantee.params import check_epsilon, check_int

__all__ = ["label_rr_keep_probability", "label_rr_flip_probability", "label_rr_transition_matrix"]


def label_rr_keep_probability(epsilon: float, num_classes: int) -> float:
    r""":math:`\Pr(y' = y) = \dfrac{e^\varepsilon}{e^\varepsilon + c - 1}` (overflow-free)."""
    eps = check_epsilon(epsilon, "epsilon")
    c = check_int(num_classes, "num_classes", minimum=2)
    return 1.0 / (1.0 + (c - 1) * math.exp(-eps))


def label_rr_flip_probability(epsilon: float, num_classes: int) -> float:
    r""":math:`\Pr(y' \ne y) = \dfrac{c - 1}{e^\varepsilon + c - 1}`, computed without cancellation."""
    eps = check_epsilon(epsilon, "epsilon")
    c = check_int(num_classes, "num_classes", minimum=2)
    r = (c - 1) * math.exp(-eps)
    return r / (1.0 + r)


def label_rr_transition_matrix(epsilon: float, num_classes: int) -> np.ndarray:
    r"""The exact kernel ``P[y, y'] = Pr(y' | y)`` ``[c, c]`` (float64, rows sum to 1):
    :math:`e^\varepsilon / (e^\varepsilon + c - 1)` on the diagonal, :math:`1 / (e^\varepsilon + c - 1)`
    elsewhere."""
    eps = check_epsilon(epsilon, "epsilon")
    c = check_int(num_classes, "num_classes", minimum=2)
    q = math.exp(-eps)
    denom = 1.0 + (c - 1) * q
    P = np.full((c, c), q / denom)
    np.fill_diagonal(P, 1.0 / denom)
    return P
