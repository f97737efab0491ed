"""FeatureRR: heterogeneous randomized response on a k-bin grid (HeteroRR, Algorithm 1)."""

from __future__ import annotations

import math
from typing import Any, ClassVar

import numpy as np

from privgraph.graph import GraphData
from privgraph.guarantee import Guarantee, GuaranteeKind, Scope
from privgraph.guarantee.params import check_epsilon, check_int, check_real_vector
from privgraph.mechanisms.base import EpsilonRange, FeatureMechanism, check_generator
from privgraph.mechanisms.features.scaled import (
    as_bounds,
    bernoulli_exact,
    resolve_num_features,
)
from privgraph.mechanisms.registry import register_mechanism

__all__ = ["FeatureRR", "worst_case_log_ratio"]

# Entries per chunk of ``privatize_rows``: bounds the float64 temporaries to a few tens of MB.
_CHUNK_ENTRIES = 1 << 20
# Below this per-step scale a = eps_i / (k - 1) the kernel is uniform to within 1e-300 relative;
# such features are sampled as uniform (0-LDP), which also avoids 0/0 in the closed form.
_A_UNIFORM = 1e-300
# Above this a, r = exp(-a) < 1e-304: every off-centre mass underflows next to 1.
_A_CAP = 700.0


def worst_case_log_ratio(P: np.ndarray) -> float:
    """The exact privacy loss of a finite kernel: ``max_{u, t, t'} log P[t, u] / P[t', u]``.

    Args:
        P (np.ndarray): ``[k, k]`` (or ``[inputs, outputs]``) row-stochastic matrix,
            ``P[t, u] = Pr(output u | input t)``.

    Returns:
        float: the worst-case log-ratio; ``inf`` when some output is possible from one input and
        impossible from another. Outputs impossible from every input are ignored.
    """
    P = np.asarray(P, dtype=np.float64)
    if P.ndim != 2 or P.shape[0] == 0 or P.shape[1] == 0:
        raise ValueError(f"P must be a non-empty 2-D matrix, got shape {list(P.shape)}")
    if not np.all(np.isfinite(P)) or np.any(P < 0):
        raise ValueError("P must hold finite, non-negative probabilities")
    col_max = P.max(axis=0)
    col_min = P.min(axis=0)
    live = col_max > 0
    if np.any(col_min[live] == 0):
        return math.inf
    return float(np.max(np.log(col_max[live]) - np.log(col_min[live]), initial=0.0))


def _as_theta(value: Any) -> np.ndarray | None:
    if value is None:
        return None
    arr = check_real_vector(value, "theta", nonnegative=True)
    total = math.fsum(arr.tolist())
    if not total > 0:
        raise ValueError("theta must have a positive sum (all scores are 0)")
    return arr / total


def _split_budget(eps_f: float, shares: np.ndarray) -> np.ndarray:
    """``eps_f * shares`` with the float sum (fsum) never above ``eps_f``."""
    eps = eps_f * shares
    for _ in range(64):
        if math.fsum(eps.tolist()) <= eps_f:
            return eps
        eps = eps * (1.0 - 2.0**-50)
    raise RuntimeError("could not split the feature budget without exceeding it")  # pragma: no cover


def _tail_mass(a: np.ndarray, em: np.ndarray, length: np.ndarray, uniform: np.ndarray) -> np.ndarray:
    """``r + r^2 + ... + r^length`` with ``r = exp(-a)``; ``= length`` where the kernel is uniform."""
    with np.errstate(invalid="ignore", divide="ignore"):
        s = -np.expm1(-a * length) / em
    return np.where(uniform, length, s)


@register_mechanism
class FeatureRR(FeatureMechanism):
    takes_scores: ClassVar[bool] = True  # theta (HeteroRR Eq. 7) sets the per-feature budgets
    r"""Heterogeneous feature randomized response (FeatureRR) from the HeteroRR paper
    (papers 000/002: Algorithm 1, Eq. 8-9, Theorem 3).

    Each feature :math:`i` of each node is scaled to :math:`[0, 1]` with PUBLIC bounds, clipped,
    snapped to the grid :math:`\{1/k, \dots, k/k\}` (value :math:`t/k` with
    :math:`(t-1)/k \le z_i \le t/k`, the smallest such :math:`t`; :math:`z_i = 0` gives
    :math:`t = 1`), and replaced by :math:`u/k` with

    .. math::
        \Pr\left(\tfrac{u}{k} \,\middle|\, \tfrac{t}{k}\right)
        = \frac{1}{C_t} \exp\left(-\frac{|u - t|}{k \sigma_i}\right)
        = \frac{r_i^{|u - t|}}{C_t}, \qquad
        C_t = \sum_{u=1}^{k} r_i^{|u - t|}, \qquad
        \sigma_i = \frac{k - 1}{k \varepsilon_i}, \qquad r_i = e^{-\varepsilon_i / (k - 1)},

    where :math:`\varepsilon_i = \varepsilon_f \theta_i` and :math:`\sum_i \theta_i = 1`, so
    that the vector of :math:`d` features is :math:`\varepsilon_f`-LDP by sequential
    composition (Theorem 3). :math:`\theta_i = 0` gives the uniform kernel (0-LDP).

    Note on the grid: :math:`\sigma = (k-1)/(k\varepsilon)` is exact on the paper's grid
    :math:`\{1/k, \dots, 1\}`: the largest distance between two grid values is
    :math:`(k-1)/k`, and the normalisers :math:`C_1 = C_k` of the two extreme inputs cancel, so
    the ratio at :math:`(u, t, t') = (1, 1, k)` is exactly :math:`e^{\varepsilon_i}`; every other
    triple stays at or below it (checked exactly with :func:`worst_case_log_ratio` in the tests,
    for :math:`k` up to 33 and :math:`\varepsilon` from 1e-6 to 60). On a grid spanning :math:`[0, 1]`
    (:math:`0, 1/(k-1), \dots, 1`) the same :math:`\sigma` would spend
    :math:`k\varepsilon/(k-1)`; there :math:`\sigma` must be :math:`1/\varepsilon`.

    The released values stay on the grid in the scaled domain :math:`[0, 1]`; mapping them back
    to ``[lower, upper]`` is post-processing.

    Args:
        epsilon (float): the feature budget :math:`\varepsilon_f` of one node's vector (> 0).
        bins (int, optional): the number of grid values :math:`k \ge 2` (default: ``2``).
        theta (array-like, optional): per-feature non-negative scores, normalised to sum 1
            (default: ``None``, uniform :math:`1/d`, with :math:`d` known at privatize time).
            Must be computed from public data: it sets the per-feature budgets.
        lower, upper (float or array-like, optional): the PUBLIC feature bounds (default
            ``0.0`` and ``1.0``; :func:`~privgraph.mechanisms.features.scaled.check_bounds`).

    Shapes:
        - input: node features :math:`[|V|, d]` (or any row block ``[rows, d]``)
        - output: float32 :math:`[|V|, d]`, every entry in :math:`\{1/k, \dots, 1\}`

    Runtime:
        :math:`O(|V| d)` time, one uniform draw per entry and a closed-form inverse CDF (no loop
        over entries or bins); memory :math:`O(|V| d)` for the output plus a bounded chunk of
        float64 temporaries.

    Utility:
        :math:`\Pr(u = t) = 1 / C_t`; for :math:`k = 2` this is Warner's randomized response
        with keep probability :math:`e^{\varepsilon_i} / (1 + e^{\varepsilon_i})`.
    """

    name: ClassVar[str] = "feature_rr"
    epsilon_range: ClassVar[EpsilonRange] = EpsilonRange(
        per_coordinate=True,
        note=(
            "each feature's budget eps_f theta_i is at most 50: with 2 bins its flip probability "
            "1 / (e^eps_i + 1) is drawn with bernoulli_exact (exact as a float64 >= 2^-54, up to "
            "eps_i ~ 37, to 2^-106 absolute rounded up beyond); with more bins the float64 inverse "
            "CDF realises the kernel to about 2^-52 absolute (stated in the guarantee)"
        ),
    )
    scope: ClassVar[Scope] = Scope.FEATURES

    def __init__(
        self,
        *,
        epsilon: float,
        bins: int = 2,
        theta: Any = None,
        lower: Any = 0.0,
        upper: Any = 1.0,
    ) -> None:
        self.epsilon = type(self).epsilon_range.check(epsilon, "epsilon", type(self).name)
        self.bins = check_int(bins, "bins", minimum=2)
        self.theta = _as_theta(theta)
        self.lower = as_bounds(lower, "lower")
        self.upper = as_bounds(upper, "upper")
        sizes = {
            name: int(v.shape[0])
            for name, v in (("theta", self.theta), ("lower", self.lower), ("upper", self.upper))
            if isinstance(v, np.ndarray)
        }
        if len(set(sizes.values())) > 1:
            raise ValueError(f"theta, lower and upper disagree on the number of features: {sizes}")
        lo, hi = np.asarray(self.lower), np.asarray(self.upper)
        bad = np.flatnonzero(np.atleast_1d(lo >= hi))
        if bad.size:
            where = f" at features {bad[:5].tolist()}" if np.ndim(lo >= hi) else ""
            raise ValueError(
                f"lower must be < upper{where}, got lower={np.atleast_1d(lo)[bad[0] if lo.ndim else 0]}, "
                f"upper={np.atleast_1d(hi)[bad[0] if hi.ndim else 0]}"
            )
        span = hi - lo
        if not np.all(np.isfinite(span)):
            raise ValueError("upper - lower overflows; use bounds of a smaller magnitude")
        if self.num_features is not None:  # theta or per-feature bounds fix d: refuse at load time
            self._check_per_feature(self.per_feature_epsilon())

    def _check_per_feature(self, eps: np.ndarray) -> None:
        """The largest per-feature budget through ``epsilon_range.check_coordinate``."""
        type(self).epsilon_range.check_coordinate(
            float(eps.max()), "FeatureRR's per-feature budget eps_f * theta_i", type(self).name
        )

    # -- public parameters --------------------------------------------------------------------
    @property
    def num_features(self) -> int | None:
        """``d`` when fixed by ``theta`` or per-feature bounds, else ``None`` (known at privatize time)."""
        for v in (self.theta, self.lower, self.upper):
            if isinstance(v, np.ndarray):
                return int(v.shape[0])
        return None

    def per_feature_epsilon(self, num_features: int | None = None) -> np.ndarray:
        """The budgets :math:`\\varepsilon_i = \\varepsilon_f \\theta_i` ``[d]`` (float64).

        Their float sum (``math.fsum``) never exceeds ``epsilon``.
        """
        d = self._resolve_d(num_features)
        shares = self.theta if self.theta is not None else np.full(d, 1.0 / d)
        return _split_budget(self.epsilon, shares)

    @property
    def guarantee(self) -> Guarantee:
        return Guarantee(
            kind=GuaranteeKind.FEATURE_LDP,
            epsilon=self.epsilon,  # the eps_i sum to at most eps_f exactly (_split_budget)
            scope=Scope.FEATURES,
            assumptions=(
                "feature bounds are public",
                "features are scaled with public bounds and clipped",
                "theta (the per-feature budget shares) is computed from public data",
                "each node's feature vector is randomized independently (local model)",
            )
            + (
                ()
                if self.bins == 2
                else (
                    "bins > 2: the kernel is sampled by a float64 inverse CDF, so output "
                    "probabilities are realised to about 2^-52 absolute (bins = 2 is exact)",
                )
            ),
        )

    def params(self) -> dict[str, Any]:
        """Public parameters for the manifest (plain Python values, no data)."""

        def plain(v: Any) -> Any:
            return v.tolist() if isinstance(v, np.ndarray) else v

        return {
            "epsilon": self.epsilon,
            "bins": self.bins,
            "theta": plain(self.theta),
            "lower": plain(self.lower),
            "upper": plain(self.upper),
        }

    def __repr__(self) -> str:
        return f"FeatureRR(epsilon={self.epsilon!r}, bins={self.bins})"

    def output_range(self) -> tuple[float, float]:
        """Every released value lies on the grid {1/k, ..., k/k}, in the scaled domain [0, 1]."""
        return (1.0 / self.bins, 1.0)

    # -- the kernel ---------------------------------------------------------------------------
    def transition_matrix(self, eps_i: float) -> np.ndarray:
        """The exact kernel ``P[t - 1, u - 1] = Pr(u/k | t/k)`` ``[k, k]`` for a budget ``eps_i >= 0``."""
        eps_i = check_epsilon(eps_i, "eps_i", allow_zero=True)
        k = self.bins
        a = eps_i / (k - 1)
        idx = np.arange(k)
        logw = -a * np.abs(idx[:, None] - idx[None, :]).astype(np.float64)
        logw -= logw.max(axis=1, keepdims=True)
        w = np.exp(logw)
        return w / w.sum(axis=1, keepdims=True)

    # -- privatization ------------------------------------------------------------------------
    def privatize_rows(self, x: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """Privatize a block of feature rows ``[rows, d]`` -> float32 ``[rows, d]`` on the grid.

        Each row is one node's vector; rows are independent, so a partition's rows can be
        privatized on their own. For a fixed generator state the result does not depend on the
        chunking (one uniform double per entry, drawn in row-major order).
        """
        rng = check_generator(rng)
        x = np.asarray(x)
        if x.ndim != 2:
            raise ValueError(f"x must be a 2-D array [rows, d], got shape {list(x.shape)}")
        if x.dtype == np.bool_ or not np.issubdtype(x.dtype, np.number) or np.iscomplexobj(x):
            raise TypeError(f"x must hold real numbers, got dtype {x.dtype}")
        rows, d = x.shape
        d_fixed = self.num_features
        if d_fixed is not None and d != d_fixed:
            raise ValueError(f"x has {d} features but theta/lower/upper are given for {d_fixed}")
        out = np.empty((rows, d), dtype=np.float32)
        if rows == 0 or d == 0:
            return out
        k = self.bins
        eps = self.per_feature_epsilon(d)
        self._check_per_feature(eps)
        a = eps / (k - 1)
        uniform = a < _A_UNIFORM
        a_c = np.minimum(a, _A_CAP)
        em = np.where(uniform, 1.0, np.expm1(a_c))  # (1 - r) / r with r = exp(-a)
        a_safe = np.where(uniform, 1.0, a_c)
        # Tables over the 0-based input bin t0 = t - 1 ([k, d], row-major): the left tail holds
        # t0 values, the right tail k - 1 - t0.
        t_idx = np.arange(k, dtype=np.float64)[:, None]
        sl_tab = _tail_mass(a_c, em, np.broadcast_to(t_idx, (k, d)), uniform)
        sr_tab = _tail_mass(a_c, em, np.broadcast_to((k - 1) - t_idx, (k, d)), uniform)
        c_tab = (1.0 + sl_tab + sr_tab).ravel()
        sl_tab = sl_tab.ravel()
        # k = 2: flip with probability r / (1 + r) = 1 / (1 + e^eps_i), drawn exactly
        flip2 = np.exp(-a_c) / (1.0 + np.exp(-a_c))
        lo = np.broadcast_to(np.asarray(self.lower, dtype=np.float64), (d,))
        span = np.broadcast_to(np.asarray(self.upper, dtype=np.float64), (d,)) - lo
        col = np.arange(d, dtype=np.float64)
        any_uniform = bool(uniform.any())

        step = max(1, _CHUNK_ENTRIES // d)
        for start in range(0, rows, step):
            xc = x[start : start + step]
            if not np.all(np.isfinite(xc)):
                bad = start + int(np.flatnonzero(~np.isfinite(xc).all(axis=1))[0])
                raise ValueError(f"x has NaN or inf (first in row {bad})")
            # scale with the public bounds, clip, and bin: t = ceil(z k) in 1..k (z = 0 -> 1)
            t0 = xc - lo
            t0 /= span
            np.clip(t0, 0.0, 1.0, out=t0)
            t0 *= k
            np.ceil(t0, out=t0)
            t0 -= 1.0
            np.clip(t0, 0.0, k - 1, out=t0)
            u = rng.random(t0.shape)
            if k == 2:
                # the two-value kernel: move to the other value with probability r / (1 + r);
                # bernoulli_exact realises that small probability exactly (low bits drawn for
                # ties only), so the ratio e^eps_i holds to the last bit
                u0 = np.where(bernoulli_exact(flip2, u, rng), 1.0 - t0, t0)
            else:
                u0 = self._sample_kernel(t0, u, d, col, c_tab, sl_tab, em, a_safe, uniform, any_uniform)
            u0 += 1.0
            u0 /= k
            out[start : start + step] = u0
        return out

    def _sample_kernel(
        self,
        t0: np.ndarray,
        u: np.ndarray,
        d: int,
        col: np.ndarray,
        c_tab: np.ndarray,
        sl_tab: np.ndarray,
        em: np.ndarray,
        a_safe: np.ndarray,
        uniform: np.ndarray,
        any_uniform: bool,
    ) -> np.ndarray:
        """Inverse CDF of the truncated two-sided geometric for 0-based bins ``t0`` and uniforms ``u``.

        The mass ``C_t`` is laid out as [left tail | centre (mass 1) | right tail]; with
        ``y = u C_t - S_left``, ``0 <= y < 1`` keeps ``t``, ``y >= 1`` moves right by ``j`` and
        ``y < 0`` moves left by ``j``, where ``j`` is the smallest integer with
        ``r + ... + r^j > w`` (``w = y - 1`` resp. ``-y``): ``j = floor(-log1p(-w em) / a) + 1``.
        """
        k = self.bins
        flat = t0 * d
        flat += col
        idx = flat.astype(np.intp)
        y = np.take(c_tab, idx)
        y *= u
        y -= np.take(sl_tab, idx)
        right = y >= 1.0
        left = y < 0.0
        w = np.where(right, y - 1.0, -y)
        np.maximum(w, 0.0, out=w)
        g = w * em
        np.minimum(g, 1.0, out=g)
        with np.errstate(divide="ignore"):
            j = np.log1p(-g)
        j /= a_safe
        np.negative(j, out=j)
        np.floor(j, out=j)
        j += 1.0
        if any_uniform:
            j[:, uniform] = np.floor(w[:, uniform]) + 1.0
        j *= right.astype(np.float64) - left
        j += t0
        np.clip(j, 0.0, k - 1, out=j)  # absorbs float error at the tails' ends
        return j

    def privatize(self, graph: GraphData, rng: np.random.Generator) -> GraphData:
        """Privatize every node's feature vector: a copy of ``graph`` with ``x`` replaced."""
        if not isinstance(graph, GraphData):
            raise TypeError(f"graph must be a GraphData, got {type(graph).__name__}")
        if graph.x is None:
            raise ValueError(
                "FeatureRR: graph.x is None (an unattributed graph has no features to privatize)"
            )
        return graph.replace(x=self.privatize_rows(graph.x, rng))

    # -- helpers ------------------------------------------------------------------------------
    def _resolve_d(self, num_features: int | None) -> int:
        return resolve_num_features(num_features, self.num_features, "theta/lower/upper")
