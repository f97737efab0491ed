"""The statistical audit of a DP guarantee on neighbouring inputs, shared by the mechanisms' tests."""

from __future__ import annotations

import math

import numpy as np
from scipy.stats import beta


def violation(a: np.ndarray, b: np.ndarray, eps: float, delta: float, alpha: float = 1e-3) -> float:
    """The largest lower-confidence margin of P_a(S > t) - e^eps P_b(S > t) - delta over
    thresholds t (Clopper-Pearson bounds at level alpha per threshold, Bonferroni over 20): > 0 is
    a detected violation of (eps, delta)-DP for the event {S > t}."""
    n = a.size
    worst = -np.inf
    a_level = alpha / 20
    for t in np.quantile(np.concatenate([a, b]), np.linspace(0.5, 0.999, 20)):
        ka, kb = int((a > t).sum()), int((b > t).sum())
        pa_low = beta.ppf(a_level / 2, ka, n - ka + 1) if ka else 0.0
        pb_high = beta.ppf(1 - a_level / 2, kb + 1, n - kb) if kb < n else 1.0
        worst = max(worst, pa_low - math.exp(eps) * pb_high - delta)
    return worst
