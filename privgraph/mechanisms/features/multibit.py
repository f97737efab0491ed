r"""LPGNN's multi-bit encoder (node side) and rectifier (server side)."""

from __future__ import annotations

import math
from typing import Any, ClassVar

import numpy as np

from privgraph.guarantee.params import check_epsilon, check_int
from privgraph.mechanisms.base import EpsilonRange
from privgraph.mechanisms.features.scaled import (
    bernoulli_exact,
    split_epsilon,
    wang_sample_size,
)
from privgraph.mechanisms.features.three_output import SampledFeatureMechanism
from privgraph.mechanisms.registry import register_mechanism

__all__ = ["MultiBitEncoder", "optimal_m", "multibit_pmf", "multibit_coordinate_pmf"]

# LPGNN's optimal number of sampled features: m* = max(1, min(d, floor(eps / 2.18))).
_M_DIVISOR = 2.18


def optimal_m(epsilon: float, num_features: int) -> int:
    r"""LPGNN's :math:`m^\star = \max(1, \min(d, \lfloor \varepsilon / 2.18 \rfloor))`, the
    :math:`m` that minimises the rectifier's variance bound."""
    return wang_sample_size(epsilon, num_features, _M_DIVISOR)


def multibit_pmf(z: Any, epsilon: float) -> np.ndarray:
    r"""The exact 1-bit response of one sampled coordinate: ``[..., 2]`` = :math:`\Pr(-1, +1 \mid z)`.

    .. math::
        \Pr(x^*_j = +1 \mid z) = \frac{1}{e^{\varepsilon_c} + 1}
            + z\,\frac{e^{\varepsilon_c} - 1}{e^{\varepsilon_c} + 1},
        \qquad z = \frac{x_j - \alpha}{\beta - \alpha} \in [0, 1].

    Args:
        z (array-like): scaled features in :math:`[0, 1]`.
        epsilon (float): the coordinate's budget :math:`\varepsilon_c = \varepsilon / m`.
    """
    eps = check_epsilon(epsilon, "epsilon")
    z = np.asarray(z, dtype=np.float64)
    if np.any(~np.isfinite(z)) or np.any((z < 0.0) | (z > 1.0)):
        raise ValueError("z must lie in [0, 1]")
    return _bit_pmf(z, eps)


def _bit_pmf(z: np.ndarray, eps: float) -> np.ndarray:
    """``[Pr(-1), Pr(+1)]`` as convex combinations (no cancellation: small probabilities keep
    their relative accuracy): ``Pr(+1) = (z + (1 - z) q) / (1 + q)``, ``q = e^-eps``."""
    q = math.exp(-eps)
    plus = (z + (1.0 - z) * q) / (1.0 + q)  # 1/(e+1) + z (e-1)/(e+1), overflow-free
    minus = ((1.0 - z) + z * q) / (1.0 + q)
    return np.stack([minus, plus], axis=-1)


def multibit_coordinate_pmf(z: Any, epsilon: float, m: int, num_features: int) -> np.ndarray:
    r"""The marginal of one released coordinate: ``[..., 3]`` = :math:`\Pr(x^*_j = -1, 0, +1 \mid z)`,
    i.e. :math:`\frac{m}{d}\Pr(\mp 1 \mid z)` and :math:`1 - \frac{m}{d}` for 0, at the split
    budget :math:`\varepsilon / m`."""
    d = check_int(num_features, "num_features", minimum=1)
    m = check_int(m, "m", minimum=1)
    if m > d:
        raise ValueError(f"m must be <= num_features ({d}), got {m}")
    bit = multibit_pmf(z, split_epsilon(epsilon, m))
    frac = m / d
    return np.stack([frac * bit[..., 0], np.full(bit.shape[:-1], 1.0 - frac), frac * bit[..., 1]], axis=-1)


@register_mechanism
class MultiBitEncoder(SampledFeatureMechanism):
    r"""The multi-bit encoder of LPGNN, with its rectifier.

    Reference: S. Sajadmanesh and D. Gatica-Perez, "Locally Private Graph Neural Networks",
    ACM CCS 2021 (arXiv:2006.05535): the multi-bit encoder (Algorithm 1), the multi-bit
    rectifier with its unbiasedness and variance, and the optimal :math:`m^\star`; the authors'
    code (github.com/sisaman/LPGNN, ``mechanisms.py``, class ``MultiBit``) computes
    :math:`m^\star = \max(1, \min(d, \lfloor \varepsilon / 2.18 \rfloor))` and the rectifier
    exactly as below; talk slides: paper 003 (encoder and rectifier formulas).

    Encoder (node side). Each node samples :math:`m` of its :math:`d` features uniformly without
    replacement, scales each sampled feature with the PUBLIC bounds
    :math:`z_j = (x_j - \alpha)/(\beta - \alpha)` (clipped to :math:`[0, 1]`) and releases

    .. math::
        x^*_j = \begin{cases} +1 & \text{w.p. } \dfrac{1}{e^{\varepsilon/m} + 1}
            + z_j \dfrac{e^{\varepsilon/m} - 1}{e^{\varepsilon/m} + 1}\\
            -1 & \text{otherwise}\end{cases}
        \quad (j \text{ sampled}), \qquad x^*_j = 0 \quad (j \text{ not sampled}).

    Rectifier (server side, post-processing, :meth:`rectify`):

    .. math::
        x'_j = \frac{d(\beta - \alpha)}{2m} \cdot \frac{e^{\varepsilon/m} + 1}{e^{\varepsilon/m} - 1}
            \cdot x^*_j + \frac{\alpha + \beta}{2},
        \qquad \mathbb{E}[x'_j] = x_j \ (\text{clipped}),

    .. math::
        \mathrm{Var}[x'_j] = \frac{d}{m}\left(\frac{\beta - \alpha}{2} \cdot
            \frac{e^{\varepsilon/m} + 1}{e^{\varepsilon/m} - 1}\right)^2
            - \left(x_j - \frac{\alpha + \beta}{2}\right)^2.

    Privacy: the sampled set is independent of the data and is all the zeros reveal; each
    sampled bit is randomized response with ratio exactly :math:`e^{\varepsilon/m}` between
    :math:`z = 0` and :math:`z = 1`, so one node's vector is :math:`m \cdot \varepsilon/m \le
    \varepsilon`-LDP (the split is rounded so that it never exceeds :math:`\varepsilon`; checked
    exactly per coordinate and per vector in the tests).

    Args:
        epsilon (float): the budget :math:`\varepsilon` of one node's feature vector (> 0).
        m (int, optional): the number of sampled features, :math:`1 \le m \le d`
            (default: ``None``, LPGNN's :math:`m^\star` for the :math:`d` at privatize time).
        lower (float or array-like, optional): PUBLIC lower bound(s) :math:`\alpha`
            (default: ``0.0``). Never derive it from the private data.
        upper (float or array-like, optional): PUBLIC upper bound(s) :math:`\beta > \alpha`
            (default: ``1.0``). Values outside are clipped.

    Shapes:
        - input: node features :math:`[|V|, d]` (or any row block ``[rows, d]``)
        - :meth:`privatize_rows`: the ENCODED float32 :math:`[|V|, d]` in :math:`\{-1, 0, 1\}`,
          exactly :math:`m` nonzeros per row (what a node releases)
        - :meth:`rectify` / :meth:`privatize`: float32 :math:`[|V|, d]` in feature units, the
          unbiased rectified estimate (``privatize`` returns the graph with this ``x``)

    Runtime:
        :math:`O(|V| d)`: one ``(d + 2m)``-uniform row per node, an ``argpartition`` for the
        sampled set, one 106-bit comparison per sampled bit
        (:func:`~privgraph.mechanisms.features.scaled.bernoulli_exact`: the less likely
        bit's float64 probability is realised exactly); the rectifier is one affine map.

    Utility:
        The variance above (:meth:`estimate_variance`); LPGNN's :math:`m^\star` minimises it up
        to the data term.
    """

    name: ClassVar[str] = "multibit"
    epsilon_range: ClassVar[EpsilonRange] = EpsilonRange(
        per_coordinate=True,
        note=(
            "each sampled bit is randomized response drawn with bernoulli_exact: its smaller "
            "probability 1 / (e^(eps/m) + 1) is realised exactly as a float64 >= 2^-54 up to "
            "eps / m ~ 37 and to 2^-106 absolute (rounded up) to 50"
        ),
    )
    _divisor: ClassVar[float] = _M_DIVISOR
    _uniforms: ClassVar[int] = 2

    def __init__(
        self, *, epsilon: float, m: int | None = None, lower: Any = 0.0, upper: Any = 1.0
    ) -> None:
        self.m = None if m is None else check_int(m, "m", minimum=1)
        super().__init__(epsilon=epsilon, lower=lower, upper=upper)  # then _check_at_load

    def _check_at_load(self) -> None:
        """``m > d`` is refused as soon as ``d`` is known; with ``m`` given, each bit's budget
        ``split_epsilon(epsilon, m)`` is known without ``d`` and checked now (with per-feature
        bounds, ``d`` fixes ``m*`` too)."""
        d = self.num_features
        if self.m is not None and d is not None and self.m > d:
            raise ValueError(f"m must be <= the number of features d = {d}, got m={self.m}")
        if self.m is not None:
            self._check_coordinate(split_epsilon(self.epsilon, self.m), "epsilon / m")
        elif d is not None:
            self._check_dimension(d)

    def params(self) -> dict[str, Any]:
        """Public parameters for the manifest (plain Python values, no data)."""
        p = super().params()
        p["m"] = self.m
        return p

    def __repr__(self) -> str:
        return f"MultiBitEncoder(epsilon={self.epsilon!r}, m={self.m!r})"

    def num_sampled(self, num_features: int | None = None) -> int:
        """``m`` (the configured one, else :func:`optimal_m`) for ``d = num_features``."""
        d = self._resolve_d(num_features)
        if self.m is None:
            return optimal_m(self.epsilon, d)
        if self.m > d:
            raise ValueError(f"m must be <= the number of features d = {d}, got m={self.m}")
        return self.m

    _assumptions: ClassVar[tuple[str, ...]] = SampledFeatureMechanism._assumptions + (
        "the rectifier is post-processing of the encoded bits (no extra budget)",
    )

    def _perturb(
        self, z: np.ndarray, u: np.ndarray, eps_c: float, d: int, k: int, rng: np.random.Generator | None = None
    ) -> np.ndarray:
        pmf = _bit_pmf(z, eps_c)
        plus_small = pmf[..., 1] <= pmf[..., 0]
        # draw the LESS likely bit with bernoulli_exact, so its probability is realised exactly
        hit = bernoulli_exact(np.where(plus_small, pmf[..., 1], pmf[..., 0]), u[..., 0], u[..., 1])
        return np.where(hit == plus_small, 1.0, -1.0)

    def rectify(self, x_star: np.ndarray) -> np.ndarray:
        r"""The multi-bit rectifier: the unbiased estimate :math:`x'` (float32, feature units) of
        the clipped features from an encoded matrix ``[rows, d]`` in :math:`\{-1, 0, 1\}`.

        Uses the same :math:`m` and split budget as the encoder (:math:`d` from the shape)."""
        y, d, m = self._check_released(x_star)
        if y.size and not np.all((y == 0) | (y == 1) | (y == -1)):
            raise ValueError("x_star must be an encoded matrix with entries in {-1, 0, 1}")
        if d == 0:
            return y.astype(np.float32)
        eps_c = self._check_coordinate(split_epsilon(self.epsilon, m), "epsilon / m")
        # (d / m) (e + 1) / (e - 1) = (d / m) / tanh(eps_c / 2): the unbiased estimate of t = 2z - 1
        gain = (d / m) / math.tanh(eps_c / 2.0)
        return self._scale_back(y, gain)

    def estimate(self, released: np.ndarray) -> np.ndarray:
        """Same as :meth:`rectify`."""
        return self.rectify(released)

    def estimate_variance(self, x: np.ndarray) -> np.ndarray:
        """Exact per-entry variance ``[rows, d]`` (float64) of the rectified estimate of ``x``."""
        t = self._scaled_t(x)
        d = t.shape[1]
        m = self.num_sampled(d)
        eps_c = self.coordinate_epsilon(d)
        _, half = self._half_span(d)
        coth = 1.0 / math.tanh(eps_c / 2.0)
        # (x_clipped - (alpha + beta) / 2) = t * half
        return (d / m) * (half * coth) ** 2 - (t * half) ** 2
