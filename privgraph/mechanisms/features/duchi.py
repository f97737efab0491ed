"""DuchiMechanism: Duchi et al.'s multidimensional LDP mechanism for vectors in [-1, 1]^d.

Also the one-dimensional Duchi sampler (module-level, vectorised, per-entry epsilons allowed)
that the Hybrid mechanism reuses, and the exact output distributions used by the tests.

References:
    J. C. Duchi, M. I. Jordan and M. J. Wainwright, "Local privacy and statistical minimax
    rates", FOCS 2013; "Minimax optimal procedures for locally private estimation", JASA 2018.
    N. Wang, X. Xiao, Y. Yang, J. Zhao, S. C. Hui, H. Shin, J. Shin and G. Yu, "Collecting and
    analyzing multidimensional data with local differential privacy", ICDE 2019
    (arXiv:1907.00782), Algorithm 1 (one dimension) and Algorithm 3 (d dimensions).
    T. T. Nguyen, X. Xiao, Y. Yang, S. C. Hui, H. Shin and J. Shin, "Collecting and analyzing
    data from smart device users with local differential privacy", arXiv:1606.05053, 2016.
"""

from __future__ import annotations

import functools
import math
from fractions import Fraction
from typing import Any, ClassVar

import numpy as np

from privgraph.mechanisms.base import (
    EpsilonRange,
    check_generator,
)
from privgraph.mechanisms.features.piecewise_grid import exp_lower_bound
from privgraph.mechanisms.features.scaled import ScaledFeatureMechanism
from privgraph.mechanisms.sampling import bernoulli_exact
from privgraph.mechanisms.registry import register_mechanism

__all__ = [
    "DuchiMechanism",
    "as_epsilon_array",
    "as_unit_input",
    "duchi_1d_probabilities",
    "duchi_1d_transform",
    "duchi_1d_sample",
    "duchi_1d_pmf",
    "duchi_1d_variance",
    "duchi_bound",
    "duchi_side_probability",
    "duchi_transform",
    "duchi_sample",
    "duchi_probability",
    "duchi_variance",
]


# -- input checks shared by the 1-D samplers (also used by piecewise.py and hybrid.py) ---------
def as_epsilon_array(epsilon: Any, name: str = "epsilon") -> np.ndarray:
    """``epsilon`` as a float64 array (scalar or per entry); every value finite and > 0."""
    if isinstance(epsilon, (bool, np.bool_, str, bytes)) or epsilon is None:
        raise TypeError(f"{name} must be a real number or an array of them, got {epsilon!r}")
    e = np.asarray(epsilon)
    if e.dtype == np.bool_ or not np.issubdtype(e.dtype, np.number) or np.iscomplexobj(e):
        raise TypeError(f"{name} must hold real numbers, got dtype {e.dtype}")
    e = e.astype(np.float64)
    if not np.all(np.isfinite(e)):
        raise ValueError(f"{name} must be finite (NaN or inf found)")
    if np.any(e <= 0):
        raise ValueError(f"{name} must be > 0, got min {float(e.min())}")
    return e


def as_unit_input(t: Any, name: str = "t") -> np.ndarray:
    """``t`` as a float64 array with every value in ``[-1, 1]`` (the samplers' input domain)."""
    t = np.asarray(t)
    if t.dtype == np.bool_ or not np.issubdtype(t.dtype, np.number) or np.iscomplexobj(t):
        raise TypeError(f"{name} must hold real numbers, got dtype {t.dtype}")
    t = t.astype(np.float64, copy=False)
    if not np.all(np.abs(t) <= 1.0):  # also rejects NaN
        raise ValueError(f"{name} must lie in [-1, 1] (scale and clip first)")
    return t


# -- one dimension (Wang et al., Algorithm 1) -----------------------------------------------------
def duchi_1d_probabilities(t: np.ndarray, e: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(Pr(-b), Pr(+b))`` of Duchi's one-dimensional mechanism at inputs ``t`` (checked, in
    ``[-1, 1]``) and budgets ``e`` (checked, > 0), as sums of non-negative terms (no cancellation
    for large eps)."""
    q = np.exp(-e)
    denom = 2.0 * (1.0 + q)
    return ((1.0 - t) + (1.0 + t) * q) / denom, ((1.0 + t) + (1.0 - t) * q) / denom


def duchi_1d_transform(t: Any, epsilon: Any, u: Any) -> np.ndarray:
    r"""Duchi et al.'s one-dimensional mechanism as a transform of uniforms ``u`` in ``[0, 1)``.

    .. math::
        t^* = \begin{cases} +b & \text{with probability } \frac{1}{2} + \frac{e^{\varepsilon}-1}
        {2 e^{\varepsilon} + 2}\, t \\ -b & \text{otherwise,} \end{cases} \qquad
        b = \frac{e^{\varepsilon} + 1}{e^{\varepsilon} - 1} = \coth(\varepsilon / 2)

    (Wang et al. ICDE'19, Algorithm 1). Unbiased, :math:`\mathrm{Var} = b^2 - t^2`;
    :math:`\Pr(\pm b \mid 1) / \Pr(\pm b \mid -1) = e^{\pm\varepsilon}`.

    The smaller of the two probabilities is realized as ``u < p_small``: with numpy's uniforms
    (multiples of :math:`2^{-53}`) it is rounded UP and the larger one down, so the realized
    probabilities stay within :math:`[1/(e^\varepsilon + 1), e^\varepsilon/(e^\varepsilon + 1)]`
    and their ratio within :math:`e^\varepsilon` (up to the rounding of computing them).

    Args:
        t (array-like): inputs in ``[-1, 1]``.
        epsilon (float or array-like): the budget, scalar or per entry (broadcast with ``t``).
        u (array-like): uniforms in ``[0, 1)`` (broadcast with ``t``).

    Returns:
        np.ndarray: float64 outputs ``+-b``, the broadcast shape.
    """
    t = as_unit_input(t)
    e = as_epsilon_array(epsilon)
    b = 1.0 / np.tanh(e / 2.0)
    p_minus, p_plus = duchi_1d_probabilities(t, e)
    u = np.asarray(u)
    plus = np.where(p_plus < p_minus, u < p_plus, u >= p_minus)
    return np.where(plus, b, -b)


def duchi_1d_sample(t: Any, epsilon: Any, rng: np.random.Generator) -> np.ndarray:
    """Draw Duchi's one-dimensional mechanism for every entry of ``t`` (one uniform each)."""
    rng = check_generator(rng)
    t = as_unit_input(t)
    shape = np.broadcast_shapes(t.shape, np.shape(epsilon))
    return duchi_1d_transform(t, epsilon, rng.random(shape))


def duchi_1d_pmf(t: Any, epsilon: Any) -> tuple[np.ndarray, np.ndarray]:
    """The exact output distribution: ``(values, probabilities)``, each ``[..., 2]`` for ``(-b, +b)``."""
    t = as_unit_input(t)
    e = as_epsilon_array(epsilon)
    t, e = np.broadcast_arrays(t, e)
    b = 1.0 / np.tanh(e / 2.0)
    p_minus, p_plus = duchi_1d_probabilities(t, e)
    return np.stack([-b, b], axis=-1), np.stack([p_minus, p_plus], axis=-1)


def duchi_1d_variance(t: Any, epsilon: Any) -> np.ndarray:
    """``Var[t* | t] = coth(eps / 2)^2 - t^2`` (the mechanism is unbiased)."""
    t = as_unit_input(t)
    b = 1.0 / np.tanh(as_epsilon_array(epsilon) / 2.0)
    return b * b - t * t


# -- d dimensions (Wang et al., Algorithm 3) ------------------------------------------------------
@functools.lru_cache(maxsize=256)
def _central_ratio(d: int) -> float:
    """``2^(d-1) / C(d-1, floor((d-1)/2))``, correctly rounded (exact integer arithmetic)."""
    return (1 << (d - 1)) / math.comb(d - 1, (d - 1) // 2)


def duchi_bound(epsilon: float, d: int) -> float:
    r"""The output magnitude :math:`B` of the d-dimensional mechanism (tie rule: see below).

    .. math::
        B = \frac{e^{\varepsilon} + 1}{e^{\varepsilon} - 1} \cdot
            \frac{2^{d-1}}{\binom{d-1}{\lfloor (d-1)/2 \rfloor}}

    For odd :math:`d` this is the paper's :math:`B = \frac{2^d + C_d (e^{\varepsilon}-1)}
    {\binom{d-1}{(d-1)/2}(e^{\varepsilon}-1)}` with :math:`C_d = 2^{d-1}` (Wang et al. ICDE'19,
    Algorithm 3). For even :math:`d`, with a tie :math:`t^* \cdot v = 0` counted in
    :math:`\mathcal{T}^+` with probability 1/2, unbiasedness gives the same expression with
    :math:`\binom{d-1}{d/2} = \binom{d-1}{d/2 - 1}` (derivation in :class:`DuchiMechanism`).
    ``d = 1`` gives the one-dimensional :math:`b = \coth(\varepsilon/2)`.
    """
    e = float(as_epsilon_array(epsilon))
    if isinstance(d, bool) or not isinstance(d, (int, np.integer)) or d < 1:
        raise ValueError(f"d must be an int >= 1, got {d!r}")
    b = _central_ratio(int(d)) / math.tanh(e / 2.0)
    if not math.isfinite(b):
        raise ValueError(f"epsilon={e!r} is too small: Duchi's output magnitude B overflows")
    return b


@functools.lru_cache(maxsize=256)
def duchi_side_probability(epsilon: float) -> float:
    r"""The probability :math:`q \approx 1 / (e^\varepsilon + 1)` of the side :math:`\mathcal{T}^-`:
    the float64 value, raised by ulps until :math:`(1 - q) / q \le e^\varepsilon` holds EXACTLY
    (rational arithmetic against a Taylor lower bound of :math:`e^\varepsilon`), so the realised
    side ratio never exceeds :math:`e^\varepsilon`."""
    e = float(as_epsilon_array(epsilon))
    q = math.exp(-e) / (1.0 + math.exp(-e))
    bound = exp_lower_bound(Fraction(e))
    while (1 - Fraction(q)) > bound * Fraction(q):
        q = float(np.nextafter(q, 1.0))
    return q


def duchi_transform(
    t: np.ndarray, epsilon: float, u: np.ndarray, u_lo: np.ndarray | np.random.Generator | None = None
) -> np.ndarray:
    """The d-dimensional mechanism as a transform of uniforms (rows independent).

    Args:
        t (np.ndarray): ``[rows, d]`` inputs in ``[-1, 1]``.
        epsilon (float): the budget of one whole row.
        u (np.ndarray): ``[rows, 2 d + 1]`` uniforms in ``[0, 1)``: columns ``0..d-1`` draw
            ``v``, ``d..2d-1`` the uniform sign vector, ``2d`` the side (T+ or T-).
        u_lo (np.ndarray or Generator, optional): the low uniforms of the side's 106-bit
            :func:`~privgraph.mechanisms.sampling.bernoulli_exact` draw (a Generator: drawn for
            ties only), which realises ``1 / (e^eps + 1)`` exactly (default: ``None``, the side
            is ``u < 1 / (e^eps + 1)`` on the 2^-53 grid, rounded up).

    Returns:
        np.ndarray: float64 ``[rows, d]``, every entry ``+-B``.
    """
    t = as_unit_input(t)
    if t.ndim != 2:
        raise ValueError(f"t must be [rows, d], got shape {list(t.shape)}")
    rows, d = t.shape
    u = np.asarray(u)
    if u.shape != (rows, 2 * d + 1):
        raise ValueError(f"u must have shape {[rows, 2 * d + 1]}, got {list(u.shape)}")
    B = duchi_bound(epsilon, d)
    e = float(as_epsilon_array(epsilon))
    # T- with probability q = 1 / (e^eps + 1) <= 1/2 (certified: (1 - q) / q <= e^eps exactly),
    # drawn exactly with bernoulli_exact, or as u < q (rounded up on the 2^-53 grid) without u_lo
    q = duchi_side_probability(e)
    side = u[:, 2 * d]
    to_minus = side < q if u_lo is None else bernoulli_exact(q, side, u_lo)
    # v_j = +1 with probability (1 + t_j) / 2
    v_pos = u[:, :d] < (1.0 + t) * 0.5
    # a uniform sign vector s in {-1, 1}^d; s . v = 2 * #agreements - d
    s_pos = u[:, d : 2 * d] < 0.5
    agree = np.count_nonzero(v_pos == s_pos, axis=1)
    dot = 2 * agree - d
    to_plus = ~to_minus
    # Map s into the chosen side by the bijection s -> -s (T- <-> T+); ties (dot = 0, even d
    # only) stay as drawn: each tie vector then has probability 2^-d whichever side was chosen.
    flip = np.where(to_plus, dot < 0, dot > 0)
    s_pos ^= flip[:, None]
    return np.where(s_pos, B, -B)


def duchi_sample(t: Any, epsilon: float, rng: np.random.Generator) -> np.ndarray:
    """Draw the d-dimensional mechanism for each row of ``t`` ``[rows, d]``."""
    rng = check_generator(rng)
    t = as_unit_input(t)
    if t.ndim != 2:
        raise ValueError(f"t must be [rows, d], got shape {list(t.shape)}")
    rows, d = t.shape
    return duchi_transform(t, epsilon, rng.random((rows, 2 * d + 1)), rng)


def duchi_probability(signs: Any, t: Any, epsilon: float) -> np.ndarray:
    r"""The exact probability of the output :math:`B \cdot s` given the input ``t``.

    .. math::
        \Pr(B s \mid t) = \sum_{m=0}^{d} \Pr(\#\{j : s_j v_j = 1\} = m \mid t)\; q(2m - d),
        \qquad q(k) = \begin{cases} p / 2^{d-1} & k > 0 \\ 2^{-d} & k = 0 \\
        (1 - p) / 2^{d-1} & k < 0 \end{cases}

    with :math:`1 - p` = :func:`duchi_side_probability` (the realised :math:`1 / (e^\varepsilon + 1)`);
    the agreements :math:`s_j v_j = 1` are independent with probabilities :math:`(1 + s_j t_j)/2`
    (a Poisson-binomial count).

    Args:
        signs (array-like): ``[..., d]`` sign vectors in ``{-1, 1}``.
        t (array-like): ``[..., d]`` inputs in ``[-1, 1]`` (broadcast with ``signs``).
        epsilon (float): the budget.

    Returns:
        np.ndarray: float64 probabilities ``[...]``.
    """
    s = np.asarray(signs, dtype=np.float64)
    if not np.all(np.abs(s) == 1.0):
        raise ValueError("signs must hold only -1 and +1")
    t = as_unit_input(t)
    e = float(as_epsilon_array(epsilon))
    s, t = np.broadcast_arrays(s, t)
    d = s.shape[-1]
    a = (1.0 + s * t) * 0.5  # Pr(s_j v_j = 1)
    dist = np.zeros(s.shape[:-1] + (d + 1,))
    dist[..., 0] = 1.0
    for j in range(d):
        aj = a[..., j, None]
        shifted = np.concatenate([np.zeros(dist.shape[:-1] + (1,)), dist[..., :-1]], axis=-1)
        dist = dist * (1.0 - aj) + shifted * aj
    side_minus = duchi_side_probability(e)  # the realised 1 - p
    p = 1.0 - side_minus
    k = 2 * np.arange(d + 1) - d
    q = np.where(k > 0, p / 2.0 ** (d - 1), np.where(k < 0, side_minus / 2.0 ** (d - 1), 2.0**-d))
    return dist @ q


def duchi_variance(t: Any, epsilon: float, d: int | None = None) -> np.ndarray:
    """Per-coordinate ``Var[t*_j | t] = B^2 - t_j^2`` (every output coordinate is ``+-B``)."""
    t = as_unit_input(t)
    d = int(t.shape[-1]) if d is None else d
    B = duchi_bound(epsilon, d)
    return B * B - t * t


@register_mechanism
class DuchiMechanism(ScaledFeatureMechanism):
    r"""Duchi et al.'s multidimensional mechanism on each node's whole feature vector, as
    Wang et al. (ICDE 2019, Algorithm 3; also Nguyen et al. 2016) state it for
    :math:`t \in [-1, 1]^d`.

    Features are scaled to :math:`t_j \in [-1, 1]` with PUBLIC bounds and clipped. Then

    1. draw :math:`v \in \{-1, 1\}^d`, independently :math:`\Pr(v_j = 1) = (1 + t_j)/2`;
    2. with probability :math:`p = e^\varepsilon / (e^\varepsilon + 1)` release a uniform point of
       :math:`\mathcal{T}^+ = \{t^* \in \{-B, B\}^d : t^* \cdot v > 0\}`, otherwise one of
       :math:`\mathcal{T}^- = \{t^* \cdot v < 0\}`.

    Sampling without enumerating :math:`2^d` points: draw a uniform :math:`s \in \{-1, 1\}^d`
    and flip it (:math:`s \to -s`, a bijection between the two sides) when it lies on the
    wrong side; this draws a uniform point of the chosen side exactly.

    Ties (even :math:`d` only). The paper puts :math:`t^* \cdot v = 0` into
    :math:`\mathcal{T}^-` with :math:`|\mathcal{T}^+| = C_d = 2^{d-1} - \frac12\binom{d}{d/2}`;
    the ratio of the largest to the smallest output probability is then
    :math:`e^\varepsilon (2^d - C_d) / C_d > e^\varepsilon`, attained between two opposite
    vertex inputs, i.e. that rule is NOT :math:`\varepsilon`-LDP (a test computes it exactly).
    Here a tie vector is kept as drawn, i.e. it counts in :math:`\mathcal{T}^+` with
    probability 1/2 (a fair-coin tie rule): every output has probability
    :math:`p / 2^{d-1}`, :math:`2^{-d}` or :math:`(1 - p) / 2^{d-1}` given :math:`v`, a ratio of
    exactly :math:`e^\varepsilon`. Since the ties sum to 0 and
    :math:`\sum_{t^* \cdot v > 0} t^* = B \binom{d-1}{\lfloor (d-1)/2 \rfloor} v`,
    :math:`E[t^* \mid v] = B \binom{d-1}{\lfloor (d-1)/2 \rfloor} \frac{2p - 1}{2^{d-1}} v`, so
    unbiasedness (:math:`E[t^*] = t`) fixes :math:`B` as in :func:`duchi_bound`; for odd
    :math:`d` it is the paper's :math:`B` exactly.

    Given :math:`v`, every output has probability :math:`p / 2^{d-1}`, :math:`2^{-d}` or
    :math:`(1 - p) / 2^{d-1}` whatever the law of :math:`v`, so the loss is bounded by the side
    probabilities alone; the side :math:`\mathcal{T}^-` is drawn with
    :func:`~privgraph.mechanisms.sampling.bernoulli_exact` at the float64
    :math:`q \approx 1 / (e^\varepsilon + 1)` of :func:`duchi_side_probability`, whose ratio
    :math:`(1 - q)/q \le e^\varepsilon` is certified in rational arithmetic; ``bernoulli_exact``
    realises it exactly (for :math:`\varepsilon \lesssim 37`, and to :math:`2^{-106}` absolute,
    rounded up, to 50).

    The output is a point of the finite set :math:`\{-B, B\}^d` (no floating-point low bits carry
    the input).

    The output :math:`t^* \in \{-B, B\}^d` is mapped back affinely,
    ``lower + (t* + 1) / 2 * (upper - lower)``: an unbiased estimate of the clipped features.

    Args:
        epsilon (float): the budget of one node's whole vector (not split per feature;
            at most 50, :attr:`epsilon_range`).
        lower, upper (float or array-like, optional): the PUBLIC feature bounds (default
            ``0.0`` and ``1.0``; :func:`~privgraph.mechanisms.features.scaled.check_bounds`).

    Shapes:
        - input: node features :math:`[|V|, d]` (or any row block ``[rows, d]``)
        - output: float32 :math:`[|V|, d]`, entry :math:`j` one of
          ``lower + (1 -+ B) / 2 * (upper - lower)``

    Runtime:
        :math:`O(|V| d)`: :math:`2d + 1` uniforms per row (plus one for a tie of the side's
        106-bit draw, probability :math:`2^{-53}`), no enumeration of
        :math:`\{-B, B\}^d`; memory :math:`O(|V| d)` for the output plus a bounded chunk.

    Utility:
        unbiased; per-coordinate variance :math:`B^2 - t_j^2` on the :math:`[-1, 1]` scale
        (:func:`duchi_variance`), with :math:`B \approx \coth(\varepsilon/2)\sqrt{\pi d / 2}`
        for large :math:`d`.
    """

    name: ClassVar[str] = "duchi"
    epsilon_range: ClassVar[EpsilonRange] = EpsilonRange(
        note=(
            "the whole vector takes the configured epsilon: the output's law given v rests on the "
            "side probability 1 / (e^eps + 1), drawn with bernoulli_exact (exact as a float64 "
            ">= 2^-54, up to eps ~ 37; to 2^-106 absolute, rounded up, to 50)"
        ),
    )
    domain: ClassVar[tuple[float, float]] = (-1.0, 1.0)
    _assumptions: ClassVar[tuple[str, ...]] = (
        "the whole feature vector is randomized jointly with the full epsilon (no per-feature split)",
    )

    def _check_dimension(self, d: int) -> None:
        duchi_bound(self.epsilon, d)

    def _perturb(self, t: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        rows, d = t.shape
        return duchi_transform(t, self.epsilon, rng.random((rows, 2 * d + 1)), rng)

    def _domain_variance(self, t: np.ndarray) -> np.ndarray:
        return duchi_variance(t, self.epsilon)
