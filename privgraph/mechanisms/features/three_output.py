r"""Three-Outputs (Zhao et al., IEEE IoT-J 2020) with k-of-d coordinate sampling.

Also home of the helpers shared by the coordinate-sampling feature mechanisms
(:mod:`~privgraph.mechanisms.features.pm_sub`, :mod:`~privgraph.mechanisms.features.multibit`):
the budget split, the public-bounds check, row validation, and the chunked, vectorised sampler
loop of :class:`SampledFeatureMechanism`.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any, ClassVar

import numpy as np

from privgraph.graph import GraphData
from privgraph.mechanisms.base import (
    Guarantee,
    GuaranteeKind,
    Scope,
    check_epsilon,
    check_generator,
    check_int,
)
from privgraph.mechanisms.features.feature_rr import _as_bounds

__all__ = [
    "ThreeOutputMechanism",
    "SampledFeatureMechanism",
    "EPS_STAR",
    "three_output_p00",
    "three_output_c",
    "three_output_pmf",
    "three_output_variance",
    "wang_sample_size",
    "split_epsilon",
    "bernoulli_exact",
    "categorical3_exact",
    "MAX_COORDINATE_EPSILON",
]

# Entries per chunk of ``privatize_rows``: bounds the float64 temporaries to a few tens of MB.
_CHUNK_ENTRIES = 1 << 20

# The budget above which the optimal P_{0<-0} of Three-Outputs sits on its feasibility bound
# e^eps / (e^eps + 2): the root of P_cubic(eps) = e^eps / (e^eps + 2), eps* = ln 5.53112887...
# (computed with brentq to 1e-15; tests/mechanisms/test_three_output.py re-derives it).
EPS_STAR = 1.7103919310754503
_LN2 = math.log(2.0)

# The largest per-coordinate budget the samplers accept. The smallest output probability of a
# coordinate is about e^-eps_c; the samplers realise every float64 probability >= 2^-54 EXACTLY
# (bernoulli_exact) and smaller ones to 2^-106 absolute, i.e. to a relative 2^-106 e^eps_c
# (6e-11 at eps_c = 50, 1.4e-6 at 60). Above the cap the stated pure-DP guarantee would not hold
# to float precision, so a larger eps / k is refused rather than silently weakened.
MAX_COORDINATE_EPSILON = 50.0
_TWO53 = 2.0**53
_ULP53 = 2.0**-53


# -- shared helpers ------------------------------------------------------------------------------
def wang_sample_size(epsilon: float, num_features: int, divisor: float = 2.5) -> int:
    r"""The number of sampled coordinates :math:`k = \max(1, \min(d, \lfloor \varepsilon / c \rfloor))`.

    ``divisor = 2.5`` is Wang et al. (ICDE 2019, Algorithm 4); LPGNN's multi-bit encoder uses
    ``2.18`` (its optimal :math:`m^\star`).
    """
    eps = check_epsilon(epsilon, "epsilon")
    d = check_int(num_features, "num_features", minimum=1)
    return max(1, min(d, math.floor(eps / divisor)))


def split_epsilon(epsilon: float, k: int) -> float:
    r"""The per-coordinate budget :math:`\varepsilon / k`, lowered by ulps until
    :math:`k \cdot \varepsilon_c \le \varepsilon` holds EXACTLY (rational arithmetic).

    So ``k`` coordinates, each :math:`\varepsilon_c`-LDP, compose to at most the configured
    ``epsilon``: the guarantee can state ``epsilon`` itself without understating the loss.
    """
    eps = check_epsilon(epsilon, "epsilon")
    k = check_int(k, "k", minimum=1)
    e = eps / k
    bound = Fraction(eps)
    while Fraction(e) * k > bound:
        e = float(np.nextafter(e, 0.0))
    return e


def check_coordinate_epsilon(eps_c: float, what: str = "epsilon / k") -> float:
    """Refuse a per-coordinate budget above :data:`MAX_COORDINATE_EPSILON` (see there)."""
    if eps_c > MAX_COORDINATE_EPSILON:
        raise ValueError(
            f"{what} = {eps_c:g} per coordinate exceeds {MAX_COORDINATE_EPSILON:g}: float64 sampling "
            f"cannot realise output probabilities near e^-{eps_c:g}, so the pure-DP guarantee "
            "would not hold; use a smaller epsilon (or sample more coordinates)"
        )
    return eps_c


def bernoulli_exact(p: Any, u_hi: np.ndarray, u_lo: np.ndarray) -> np.ndarray:
    r"""``U < p`` for the 106-bit uniform :math:`U = u_{hi} + 2^{-53} u_{lo}`.

    ``u_hi`` and ``u_lo`` are ``Generator.random`` doubles (multiples of :math:`2^{-53}`). With
    :math:`2^{53} p = f + \phi` (``f`` integer), :math:`U < p` iff :math:`2^{53} u_{hi} < f`, or
    :math:`2^{53} u_{hi} = f` and :math:`u_{lo} < \phi`. So :math:`\Pr = f 2^{-53} + \lceil
    2^{53}\phi \rceil 2^{-106}`, which is EXACTLY ``p`` for every float64 :math:`p \ge 2^{-54}`
    (those are multiples of :math:`2^{-106}`), and within :math:`2^{-106}` below. A plain
    ``u < p`` realises ``p`` only to :math:`2^{-53}`, a relative error of :math:`2^{-53}/p` on
    small probabilities, which is where pure DP's ratios live.

    Computed as ``d = p - u_hi`` (exact whenever it matters): ``d >= 2^-53`` or ``d < 0`` decide
    at once; the rare ties ``0 <= d < 2^-53`` (:math:`2^{53} u_{hi} = f`, probability
    :math:`2^{-53}` each) compare ``u_lo < 2^{53} d = \phi``.
    """
    d = np.subtract(p, u_hi)
    shape = np.shape(d)
    d = np.ascontiguousarray(d).reshape(-1)
    hit = d > 0.0
    tie = np.flatnonzero((d >= 0.0) & (d < _ULP53))
    if tie.size:
        lo = np.broadcast_to(u_lo, shape).reshape(-1)
        hit[tie] = lo[tie] < d[tie] * _TWO53
    return hit.reshape(shape)


def categorical3_exact(p0: np.ndarray, p1: np.ndarray, p2: np.ndarray, u: np.ndarray) -> np.ndarray:
    """Sample an index in {0, 1, 2} with probabilities ``(p0, p1, p2)`` (same shapes ``[...]``,
    summing to 1) from 4 uniforms ``u [..., 4]``.

    The two smaller outcomes are decided in turn with :func:`bernoulli_exact`: the one of lower
    index with probability ``P_a`` (realised exactly), then the other with ``P_b / (1 - P_a)``
    (realised to two ulps of ``P_b``); the largest outcome takes the rest (>= 1/3, so its
    relative error is negligible). Small probabilities keep their relative accuracy, which is
    what the privacy ratios need. Returns int8 indices.
    """
    l2 = (p2 >= p1) & (p2 >= p0)
    l0 = ~l2 & (p0 > p1)
    # large = 2 if l2 else (0 if l0 else 1); a = 1 if large == 0 else 0; b = 1 if large == 2 else 2
    pa = np.where(l0, p1, p0)
    pb = np.where(l2, p1, p2)
    first = bernoulli_exact(pa, u[..., 0], u[..., 1])
    with np.errstate(divide="ignore", invalid="ignore"):
        cond = pb / (1.0 - pa)  # pa <= 1/2: no division by zero
    second = bernoulli_exact(cond, u[..., 2], u[..., 3])
    large = np.where(l2, np.int8(2), np.where(l0, np.int8(0), np.int8(1)))
    a = l0.astype(np.int8)
    b = np.where(l2, np.int8(1), np.int8(2))
    return np.where(first, a, np.where(second, b, large))


def check_bounds(lower: Any, upper: Any) -> tuple[float | np.ndarray, float | np.ndarray]:
    """Validate PUBLIC feature bounds: finite scalars or 1-D arrays, ``lower < upper`` everywhere."""
    lo = _as_bounds(lower, "lower")
    hi = _as_bounds(upper, "upper")
    if isinstance(lo, np.ndarray) and isinstance(hi, np.ndarray) and lo.shape != hi.shape:
        raise ValueError(
            f"lower and upper disagree on the number of features: {lo.shape[0]} vs {hi.shape[0]}"
        )
    lo_a, hi_a = np.asarray(lo), np.asarray(hi)
    bad = np.flatnonzero(np.atleast_1d(lo_a >= hi_a))
    if bad.size:
        i = int(bad[0])
        where = f" at features {bad[:5].tolist()}" if np.ndim(lo_a >= hi_a) else ""
        raise ValueError(
            f"lower must be < upper{where}, got lower={np.atleast_1d(lo_a)[i if lo_a.ndim else 0]}, "
            f"upper={np.atleast_1d(hi_a)[i if hi_a.ndim else 0]}"
        )
    if not np.all(np.isfinite(hi_a - lo_a)):
        raise ValueError("upper - lower overflows; use bounds of a smaller magnitude")
    return lo, hi


def check_rows(x: Any, d_fixed: int | None, name: str = "x") -> np.ndarray:
    """A real 2-D array ``[rows, d]`` (finiteness is checked chunk by chunk by the caller)."""
    x = np.asarray(x)
    if x.ndim != 2:
        raise ValueError(f"{name} must be a 2-D array [rows, d], got shape {list(x.shape)}")
    if x.dtype == np.bool_ or not np.issubdtype(x.dtype, np.number) or np.iscomplexobj(x):
        raise TypeError(f"{name} must hold real numbers, got dtype {x.dtype}")
    if d_fixed is not None and x.shape[1] != d_fixed:
        raise ValueError(f"{name} has {x.shape[1]} features but lower/upper are given for {d_fixed}")
    return x


def _plain(v: Any) -> Any:
    return v.tolist() if isinstance(v, np.ndarray) else v


# -- the one-dimensional Three-Outputs mechanism ----------------------------------------------------
def three_output_p00(epsilon: float) -> float:
    r"""Zhao et al.'s :math:`P_{0 \leftarrow 0}` (the probability of output 0 at input 0).

    .. math::
        P_{0\leftarrow 0} = \begin{cases}
        0, & \varepsilon < \ln 2,\\
        -\tfrac16\left(-e^{2\varepsilon} - 4e^{\varepsilon} - 5
            + 2\sqrt{\Delta_0}\cos\left(\tfrac{\pi}{3}
            + \tfrac13\arccos\left(-\tfrac{\Delta_1}{2\Delta_0^{3/2}}\right)\right)\right),
            & \ln 2 \le \varepsilon \le \varepsilon^\star,\\
        \dfrac{e^{\varepsilon}}{e^{\varepsilon} + 2}, & \varepsilon > \varepsilon^\star,
        \end{cases}

    with :math:`\Delta_0 = e^{4\varepsilon} + 14e^{3\varepsilon} + 50e^{2\varepsilon}
    - 2e^{\varepsilon} + 25`, :math:`\Delta_1 = -2e^{6\varepsilon} - 42e^{5\varepsilon}
    - 270e^{4\varepsilon} - 404e^{3\varepsilon} - 918e^{2\varepsilon} + 30e^{\varepsilon} - 250`
    and :math:`\varepsilon^\star = \ln 5.5311\ldots` (:data:`EPS_STAR`). It minimises the
    worst-case variance :math:`\max_x \mathrm{Var}[Y \mid x]` subject to
    :math:`0 \le P_{0\leftarrow 0} \le e^\varepsilon / (e^\varepsilon + 2)` (the bound that keeps
    :math:`P_{C\leftarrow 0} \ge P_{C\leftarrow -1}`); the tests re-derive it by numerical minimax.
    Any value in that range gives the same :math:`\varepsilon`-LDP; the choice only sets utility.
    """
    return _p00_pair(check_epsilon(epsilon, "epsilon"))[0]


def _p00_pair(eps: float) -> tuple[float, float]:
    """``(P00, 1 - P00)``, the complement computed without cancellation (``2q / (1 + 2q)`` on the
    bound branch, where ``P00 = 1 / (1 + 2q)`` rounds to 1 for large eps)."""
    if eps < _LN2:
        return 0.0, 1.0
    q = math.exp(-eps)
    if eps > 2.0:  # > EPS_STAR: the cubic's root lies above the bound (and e^{6 eps} may overflow)
        return 1.0 / (1.0 + 2.0 * q), 2.0 * q / (1.0 + 2.0 * q)  # e^eps / (e^eps + 2)
    bound = 1.0 / (1.0 + 2.0 * q)
    e = math.exp(eps)
    d0 = e**4 + 14 * e**3 + 50 * e**2 - 2 * e + 25
    d1 = -2 * e**6 - 42 * e**5 - 270 * e**4 - 404 * e**3 - 918 * e**2 + 30 * e - 250
    arg = max(-1.0, min(1.0, -d1 / (2.0 * d0**1.5)))
    p = -(-(e**2) - 4 * e - 5 + 2 * math.sqrt(d0) * math.cos(math.pi / 3 + math.acos(arg) / 3)) / 6
    p = min(max(p, 0.0), bound)  # the clamp to 0 only absorbs float error at eps = ln 2
    return p, 1.0 - p  # p <= 0.79 here: no cancellation


def three_output_c(epsilon: float) -> float:
    r"""The output magnitude :math:`C = \dfrac{e^\varepsilon (e^\varepsilon + 1)}
    {(e^\varepsilon - 1)(e^\varepsilon - P_{0\leftarrow 0})}` that makes :math:`Y` unbiased."""
    eps = check_epsilon(epsilon, "epsilon")
    q = math.exp(-eps)
    p00 = _p00_pair(eps)[0]
    return (1.0 + q) / (-math.expm1(-eps) * (1.0 - p00 * q))


def _anchors(eps: float) -> tuple[float, float, float, float, float]:
    """``(P00, P_{0<-1}, P_{C<-1}, P_{C<-0}, P_{C<--1})`` in overflow-free form (q = e^-eps)."""
    q = math.exp(-eps)
    p00, one_minus_p00 = _p00_pair(eps)
    keep = (1.0 - p00 * q) / (1.0 + q)  # (e^eps - P00) / (e^eps + 1)
    return p00, p00 * q, keep, one_minus_p00 / 2.0, keep * q


def three_output_pmf(t: Any, epsilon: float) -> np.ndarray:
    r"""The exact output distribution of Three-Outputs: ``[..., 3]`` = :math:`\Pr(Y = -C, 0, +C \mid t)`.

    Anchored at :math:`t \in \{-1, 0, 1\}` and linear in :math:`t` on :math:`[-1, 0]` and
    :math:`[0, 1]`:

    .. math::
        P_{0\leftarrow \pm 1} = \frac{P_{0\leftarrow 0}}{e^\varepsilon}, \quad
        P_{C\leftarrow 0} = P_{-C\leftarrow 0} = \frac{1 - P_{0\leftarrow 0}}{2}, \quad
        P_{C\leftarrow 1} = P_{-C\leftarrow -1} = \frac{e^\varepsilon - P_{0\leftarrow 0}}{e^\varepsilon + 1},
        \quad
        P_{C\leftarrow -1} = P_{-C\leftarrow 1} = \frac{e^\varepsilon - P_{0\leftarrow 0}}
        {e^\varepsilon (e^\varepsilon + 1)}.

    Args:
        t (array-like): inputs in :math:`[-1, 1]` (not clipped here; out-of-range raises).
        epsilon (float): the budget of this one coordinate.
    """
    eps = check_epsilon(epsilon, "epsilon")
    t = np.asarray(t, dtype=np.float64)
    if np.any(~np.isfinite(t)) or np.any(np.abs(t) > 1.0):
        raise ValueError("t must lie in [-1, 1]")
    return _pmf_unchecked(t, eps)


def _pmf_unchecked(t: np.ndarray, eps: float) -> np.ndarray:
    """The pmf, each probability a convex combination of two anchors (no cancellation, so small
    probabilities keep their relative accuracy): with ``a = |t|``,
    ``P(0) = (1 - a) P00 + a P01``, ``P(+C) = (1 - a) Pc0 + a (Pc1 if t >= 0 else Pc-1)``."""
    return np.stack(_pmf_parts(t, eps), axis=-1)


def _pmf_parts(t: np.ndarray, eps: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    p00, p01, pc1, pc0, pcm1 = _anchors(eps)
    a = np.abs(t)
    b = 1.0 - a
    p0 = b * p00 + a * p01
    far = b * pc0 + a * pcm1  # the output on the other side of t
    near = b * pc0 + a * pc1  # the output on t's side
    pos_side = t >= 0
    return np.where(pos_side, far, near), p0, np.where(pos_side, near, far)


def three_output_variance(t: Any, epsilon: float) -> np.ndarray:
    r""":math:`\mathrm{Var}[Y \mid t] = C^2 (1 - P_{0\leftarrow t}) - t^2` (the mechanism is unbiased)."""
    eps = check_epsilon(epsilon, "epsilon")
    t = np.asarray(t, dtype=np.float64)
    c = three_output_c(eps)
    P = three_output_pmf(t, eps)
    return c * c * (P[..., 0] + P[..., 2]) - t * t  # 1 - P(0) without cancellation


# -- the coordinate-sampling base ---------------------------------------------------------------------
class SampledFeatureMechanism:
    """Base of the feature mechanisms that perturb ``k`` of ``d`` coordinates per node.

    Subclasses set ``name``, ``_divisor`` (the ``c`` of :func:`wang_sample_size`), ``_uniforms``
    (``n_u``) and implement :meth:`_perturb` (the released values ``[rows, k]`` of the sampled
    coordinates from their scaled inputs :math:`z \\in [0, 1]` and ``n_u`` uniforms each) and
    :meth:`estimate`.

    Randomness layout, per chunk of rows, in row-major order: one
    ``rng.random((rows, d + n_u k))`` block (only ``(rows, n_u k)`` when ``k = d``), whose first
    ``d`` columns rank the coordinates (the ``k`` smallest keys are sampled: a uniform
    ``k``-subset, independent of the data) and whose last ``n_u k`` columns drive the
    perturbations (``n_u`` per sampled coordinate, for :func:`bernoulli_exact` /
    :func:`categorical3_exact`). So for a fixed generator state the output does not depend on the
    chunking.
    """

    name: ClassVar[str]
    scope: ClassVar[Scope] = Scope.FEATURES
    _divisor: ClassVar[float] = 2.5
    _uniforms: ClassVar[int] = 1  # uniforms per sampled coordinate

    def __init__(self, *, epsilon: float, lower: Any = 0.0, upper: Any = 1.0) -> None:
        self.epsilon = check_epsilon(epsilon, "epsilon")
        self.lower, self.upper = check_bounds(lower, upper)

    # -- public parameters --------------------------------------------------------------------
    @property
    def num_features(self) -> int | None:
        """``d`` when fixed by per-feature bounds, else ``None`` (known at privatize time)."""
        for v in (self.lower, self.upper):
            if isinstance(v, np.ndarray):
                return int(v.shape[0])
        return None

    def num_sampled(self, num_features: int | None = None) -> int:
        """``k``, the number of coordinates each node perturbs, for ``d = num_features``."""
        return wang_sample_size(self.epsilon, self._resolve_d(num_features), self._divisor)

    def coordinate_epsilon(self, num_features: int | None = None) -> float:
        """The budget of each sampled coordinate, ``epsilon / k`` (``k`` of them sum to at most
        ``epsilon``); refused above :data:`MAX_COORDINATE_EPSILON`."""
        return check_coordinate_epsilon(split_epsilon(self.epsilon, self.num_sampled(num_features)))

    def params(self) -> dict[str, Any]:
        """Public parameters for the manifest (plain Python values, no data)."""
        return {"epsilon": self.epsilon, "lower": _plain(self.lower), "upper": _plain(self.upper)}

    def __repr__(self) -> str:
        return f"{type(self).__name__}(epsilon={self.epsilon!r})"

    @property
    def guarantee(self) -> Guarantee:
        return Guarantee(
            kind=GuaranteeKind.FEATURE_LDP,
            epsilon=self.epsilon,  # k coordinates at split_epsilon(eps, k): k * eps_c <= eps exactly
            scope=Scope.FEATURES,
            assumptions=self._assumptions(),
        )

    def _assumptions(self) -> tuple[str, ...]:
        return (
            "feature bounds are public",
            "features are scaled with public bounds and clipped",
            "each node's feature vector is randomized independently (local model)",
            "the sampled coordinates are drawn independently of the data",
            "the sampler realises the float64 output probabilities exactly (106-bit uniforms); "
            "the float64 probabilities match the kernel to a few ulps",
        )

    # -- privatization ------------------------------------------------------------------------
    def privatize_rows(self, x: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """Privatize a block of feature rows ``[rows, d]`` -> float32 ``[rows, d]`` (what nodes release).

        Each row is one node's vector; rows are independent, so a partition's rows can be
        privatized on their own. Non-sampled coordinates are 0.
        """
        rng = check_generator(rng)
        x = check_rows(x, self.num_features)
        rows, d = x.shape
        out = np.zeros((rows, d), dtype=np.float32)
        if rows == 0 or d == 0:
            return out
        k = self.num_sampled(d)
        eps_c = self.coordinate_epsilon(d)
        lo = np.broadcast_to(np.asarray(self.lower, dtype=np.float64), (d,))
        span = np.broadcast_to(np.asarray(self.upper, dtype=np.float64), (d,)) - lo
        per_feature = self.num_features is not None
        n_keys = d if k < d else 0
        n_u = self._uniforms
        step = max(1, _CHUNK_ENTRIES // (n_keys + n_u * k))
        for start in range(0, rows, step):
            xc = x[start : start + step]
            if not np.all(np.isfinite(xc)):
                bad = start + int(np.flatnonzero(~np.isfinite(xc).all(axis=1))[0])
                raise ValueError(f"x has NaN or inf (first in row {bad})")
            r = xc.shape[0]
            u = rng.random((r, n_keys + n_u * k))
            if k == d:
                idx = None
                z = xc.astype(np.float64)
            else:
                keys = u[:, :d]
                idx = np.argmin(keys, axis=1)[:, None] if k == 1 else np.argpartition(keys, k - 1, axis=1)[:, :k]
                z = np.take_along_axis(xc, idx, axis=1).astype(np.float64)
            if per_feature:
                z -= lo if idx is None else lo[idx]
                z /= span if idx is None else span[idx]
            else:
                z -= lo[0]
                z /= span[0]
            np.clip(z, 0.0, 1.0, out=z)
            y = self._perturb(z, u[:, n_keys:].reshape(r, k, n_u), eps_c, d, k)
            if idx is None:
                out[start : start + r] = y
            else:
                np.put_along_axis(out[start : start + r], idx, y.astype(np.float32), axis=1)
        return out

    def _perturb(self, z: np.ndarray, u: np.ndarray, eps_c: float, d: int, k: int) -> np.ndarray:
        raise NotImplementedError  # pragma: no cover

    def estimate(self, released: np.ndarray) -> np.ndarray:
        raise NotImplementedError  # pragma: no cover

    def privatize(self, graph: GraphData, rng: np.random.Generator) -> GraphData:
        """A copy of ``graph`` whose ``x`` is the unbiased estimate (:meth:`estimate`) of every
        node's (clipped) features, in the original units; the estimate is post-processing."""
        if not isinstance(graph, GraphData):
            raise TypeError(f"graph must be a GraphData, got {type(graph).__name__}")
        if graph.x is None:
            raise ValueError(
                f"{type(self).__name__}: graph.x is None (an unattributed graph has no features "
                "to privatize)"
            )
        return graph.replace(x=self.estimate(self.privatize_rows(graph.x, rng)))

    # -- helpers ------------------------------------------------------------------------------
    def _resolve_d(self, num_features: int | None) -> int:
        d_fixed = self.num_features
        if num_features is None:
            if d_fixed is None:
                raise ValueError("num_features is needed: lower and upper are scalars")
            return d_fixed
        d = check_int(num_features, "num_features", minimum=1)
        if d_fixed is not None and d != d_fixed:
            raise ValueError(f"num_features={d} but lower/upper are given for {d_fixed}")
        return d

    def _scale_back(self, t_hat: np.ndarray, gain: float = 1.0) -> np.ndarray:
        """``lower + (gain t_hat + 1) / 2 * (upper - lower)``: from the [-1, 1] domain to feature
        units, in float64, chunk by chunk, cast to float32."""
        d = t_hat.shape[1]
        lo = np.broadcast_to(np.asarray(self.lower, dtype=np.float64), (d,))
        half = (np.broadcast_to(np.asarray(self.upper, dtype=np.float64), (d,)) - lo) / 2.0
        out = np.empty(t_hat.shape, dtype=np.float32)
        step = max(1, _CHUNK_ENTRIES // max(d, 1))
        for s in range(0, t_hat.shape[0], step):
            blk = t_hat[s : s + step].astype(np.float64)
            if gain != 1.0:
                blk *= gain
            blk += 1.0
            blk *= half
            blk += lo
            out[s : s + step] = blk
        return out

    def _scaled_t(self, x: np.ndarray) -> np.ndarray:
        """``t = 2 z - 1`` in [-1, 1] (float64) of clipped, publicly scaled features."""
        x = check_rows(x, self.num_features)
        if not np.all(np.isfinite(x)):
            raise ValueError("x has NaN or inf")
        d = x.shape[1]
        lo = np.broadcast_to(np.asarray(self.lower, dtype=np.float64), (d,))
        span = np.broadcast_to(np.asarray(self.upper, dtype=np.float64), (d,)) - lo
        z = np.clip((x.astype(np.float64) - lo) / span, 0.0, 1.0)
        return 2.0 * z - 1.0

    def _check_released(self, released: Any) -> tuple[np.ndarray, int, int]:
        y = check_rows(released, self.num_features, "released")
        if not np.all(np.isfinite(y)):
            raise ValueError("released has NaN or inf")
        d = y.shape[1]
        k = self.num_sampled(d) if d else 0
        return y, d, k


class ThreeOutputMechanism(SampledFeatureMechanism):
    r"""Three-Outputs, the LDP mechanism for numbers in :math:`[-1, 1]` of Zhao et al. (2020),
    applied to node features with the :math:`k`-of-:math:`d` coordinate sampling of Wang et al.

    Reference: Y. Zhao, J. Zhao, M. Yang, T. Wang, N. Wang, L. Lyu, D. Niyato, K.-Y. Lam,
    "Local Differential Privacy-Based Federated Learning for Internet of Things", IEEE Internet
    of Things Journal 8(11), 2021 (arXiv:2004.08856, 2020): the Three-Outputs mechanism (its
    output probabilities, :math:`C`, and the case analysis of :math:`P_{0\leftarrow 0}`).

    Each node scales its features to :math:`z_j \in [0, 1]` with the PUBLIC bounds (clipping
    values outside) and sets :math:`t_j = 2 z_j - 1`. It samples :math:`k` of its :math:`d`
    coordinates uniformly without replacement,

    .. math::
        k = \max\left(1, \min\left(d, \left\lfloor \varepsilon / 2.5 \right\rfloor\right)\right)

    (Wang et al., "Collecting and Analyzing Multidimensional Data with Local Differential
    Privacy", ICDE 2019, Algorithm 4, which Zhao et al. follow for multi-dimensional
    gradients), perturbs each sampled :math:`t_j` with budget :math:`\varepsilon_c = \varepsilon/k`
    to :math:`Y_j \in \{-C, 0, C\}` with

    .. math::
        \Pr(Y = C \mid t) = \begin{cases}
            P_{C\leftarrow 0} + (P_{C\leftarrow 1} - P_{C\leftarrow 0})\, t, & t \ge 0\\
            P_{C\leftarrow 0} + (P_{C\leftarrow 0} - P_{C\leftarrow -1})\, t, & t < 0
        \end{cases}, \quad
        \Pr(Y = -C \mid t) = \Pr(Y = C \mid -t), \quad
        \Pr(Y = 0 \mid t) = P_{0\leftarrow 0}\left(1 - |t|\,(1 - e^{-\varepsilon_c})\right),

    (anchors and :math:`P_{0\leftarrow 0}` in :func:`three_output_pmf` and
    :func:`three_output_p00`), and releases :math:`\frac{d}{k} Y_j` for the sampled coordinates
    and 0 for the others. With
    :math:`C = \frac{e^{\varepsilon_c}(e^{\varepsilon_c}+1)}{(e^{\varepsilon_c}-1)(e^{\varepsilon_c}-P_{0\leftarrow 0})}`,
    :math:`\mathbb{E}[Y \mid t] = t`, so the release is unbiased for :math:`t`.

    Privacy: each output's probability is linear in :math:`t` between the anchors, so its
    extremes over :math:`t` are at :math:`t \in \{-1, 0, 1\}`, where the ratios are exactly
    :math:`e^{\varepsilon_c}` (for :math:`\pm C` between :math:`t = \pm 1`, for 0 between
    :math:`t = 0` and :math:`t = \pm 1`). The sampled set is independent of the data; a vector
    output is a mixture over the sets :math:`S \supseteq \{j : Y_j \ne 0\}`, each term a product
    of :math:`k` coordinate probabilities, so the vector is
    :math:`k \varepsilon_c \le \varepsilon`-LDP (checked exactly in the tests, per coordinate
    and per vector). For :math:`\varepsilon_c < \ln 2`, :math:`P_{0\leftarrow 0} = 0` and this is
    Duchi et al.'s two-output mechanism.

    Args:
        epsilon (float): the budget :math:`\varepsilon` of one node's feature vector (> 0).
        lower (float or array-like, optional): PUBLIC lower bound(s) of the raw features
            (default: ``0.0``). Never derive it from the private data.
        upper (float or array-like, optional): PUBLIC upper bound(s), ``> lower``
            (default: ``1.0``). Values outside ``[lower, upper]`` are clipped.

    Shapes:
        - input: node features :math:`[|V|, d]` (or any row block ``[rows, d]``)
        - :meth:`privatize_rows`: float32 :math:`[|V|, d]`, entries in
          :math:`\{-Cd/k, 0, Cd/k\}` (the released values, in the :math:`t` domain)
        - :meth:`privatize`: the graph with :math:`x` = :meth:`estimate` of the release, float32
          in feature units (unbiased for the clipped features; post-processing)

    Runtime:
        :math:`O(|V| d)`: one ``(d + 4k)``-uniform row per node, an ``argpartition`` for the
        sampled set, closed-form probabilities and :func:`categorical3_exact` (two 106-bit
        comparisons that realise the float64 probabilities exactly); no Python loop over
        entries. Memory: the output plus a bounded chunk of float64 temporaries.

    Utility:
        :math:`\mathrm{Var}[Y \mid t] = C^2 (1 - \Pr(Y = 0 \mid t)) - t^2`
        (:func:`three_output_variance`); :math:`P_{0\leftarrow 0}` minimises its maximum over
        :math:`t`. The released coordinate has variance
        :math:`\frac{d}{k}(\mathrm{Var}[Y \mid t] + t^2) - t^2` (:meth:`estimate_variance`, in
        feature units).
    """

    name: ClassVar[str] = "three_output"
    _divisor: ClassVar[float] = 2.5
    _uniforms: ClassVar[int] = 4

    def output_magnitude(self, num_features: int | None = None) -> float:
        """:math:`C` at the per-coordinate budget (the release is :math:`\\pm C d / k` or 0)."""
        return three_output_c(self.coordinate_epsilon(num_features))

    def _perturb(self, z: np.ndarray, u: np.ndarray, eps_c: float, d: int, k: int) -> np.ndarray:
        t = z
        t *= 2.0
        t -= 1.0
        neg, p0, pos = _pmf_parts(t, eps_c)
        idx = categorical3_exact(neg, p0, pos, u)  # 0, 1, 2 -> -C, 0, +C
        c = three_output_c(eps_c) * (d / k)
        return (idx - 1.0) * c

    def estimate(self, released: np.ndarray) -> np.ndarray:
        """Unbiased estimate of the clipped features from a release, in feature units (float32):
        :math:`\\hat{x}_j = \\text{lower} + (y_j + 1)(\\text{upper} - \\text{lower}) / 2`."""
        y, _, _ = self._check_released(released)
        return self._scale_back(y)

    def estimate_variance(self, x: np.ndarray) -> np.ndarray:
        """Exact per-entry variance ``[rows, d]`` (float64) of :meth:`estimate` of a release of ``x``."""
        t = self._scaled_t(x)
        d = t.shape[1]
        k = self.num_sampled(d)
        v1 = three_output_variance(t, self.coordinate_epsilon(d))
        var_t = (d / k) * (v1 + t * t) - t * t
        lo = np.broadcast_to(np.asarray(self.lower, dtype=np.float64), (d,))
        half = (np.broadcast_to(np.asarray(self.upper, dtype=np.float64), (d,)) - lo) / 2.0
        return var_t * half * half
