r"""Shared scaffolding of the bounded-feature LDP mechanisms.

The one home of what the feature mechanisms (Laplace, Duchi, Piecewise, Hybrid, Three-Outputs,
PM-SUB, the multi-bit encoder) share:

- the PUBLIC-bounds checks (:func:`as_bounds`, :func:`check_bounds`) and row validation
  (:func:`check_rows`);
- :class:`ScaledFeatureMechanism`: scaling into the mechanism's input domain with clipping, the
  chunked row loop, the affine map back to the original scale, the guarantee record, ``params``
  and ``__repr__``;
- Wang et al.'s k-of-d coordinate sampling (ICDE 2019, Algorithm 4): the k rule
  (:func:`wang_sample_size`), the exact budget split (:func:`split_epsilon`) and
  :class:`KSampledMixin` (the uniform draw, the sampled set, the scatter back);
- the exact samplers :func:`bernoulli_exact` and :func:`categorical3_exact` with their cap
  :data:`MAX_COORDINATE_EPSILON`.
"""

from __future__ import annotations

import math
import numbers
from fractions import Fraction
from typing import Any, ClassVar

import numpy as np

from privgraph.graph import GraphData
from privgraph.guarantee import Guarantee, GuaranteeKind, Scope
from privgraph.guarantee.params import check_epsilon, check_int, check_real_vector
from privgraph.mechanisms.base import MAX_EXACT_EPSILON, MIN_EXACT_EPSILON, EpsilonRange, FeatureMechanism, check_generator
from privgraph.mechanisms.sampling import bernoulli_exact

__all__ = [
    "ScaledFeatureMechanism",
    "KSampledMixin",
    "as_bounds",
    "check_bounds",
    "check_rows",
    "wang_sample_size",
    "split_epsilon",
    "check_coordinate_epsilon",
    "COORDINATE_RANGE",
    "choose_coordinates",
    "bernoulli_exact",
    "categorical3_exact",
    "MAX_COORDINATE_EPSILON",
]

# Entries of ``x`` per chunk of ``privatize_rows``: bounds the float64 temporaries (the input
# block, its uniforms and the output block) to some tens of MB.
_CHUNK_ENTRIES = 1 << 20

# The largest per-coordinate budget the exact samplers accept (see base.MAX_EXACT_EPSILON).
MAX_COORDINATE_EPSILON = MAX_EXACT_EPSILON

#: The per-coordinate range of the mechanisms whose small probabilities go through
#: :func:`bernoulli_exact` (a float64 ``p >= 2^-54`` realised exactly): the configured total
#: must reach :data:`~privgraph.mechanisms.base.MIN_EXACT_EPSILON`, each coordinate's share must
#: stay <= :data:`MAX_COORDINATE_EPSILON`.
COORDINATE_RANGE = EpsilonRange(
    low=MIN_EXACT_EPSILON,
    high=MAX_COORDINATE_EPSILON,
    per_coordinate=True,
    note=(
        "each coordinate's smallest output probability (about e^-eps_c) is drawn with "
        "bernoulli_exact: exact for every float64 p >= 2^-54 (eps_c up to about 37), to 2^-106 "
        "absolute and rounded up (never below p) to eps_c = 50, a relative 6e-11 there"
    ),
)

_COMMON_ASSUMPTIONS: tuple[str, ...] = (
    "feature bounds are public",
    "features are scaled with public bounds and clipped",
    "each node's feature vector is randomized independently (local model)",
)


# -- bounds and rows -------------------------------------------------------------------------------
def as_bounds(value: Any, name: str) -> float | np.ndarray:
    """A finite scalar or a finite 1-D array of per-feature bounds."""
    if isinstance(value, bool):
        raise TypeError(f"{name} must be a real number or an array of them, got bool {value!r}")
    if isinstance(value, numbers.Real):
        v = float(value)
        if not math.isfinite(v):
            raise ValueError(f"{name} must be finite, got {v}")
        return v
    return check_real_vector(value, name)


def check_bounds(lower: Any, upper: Any) -> tuple[float | np.ndarray, float | np.ndarray]:
    """Validate PUBLIC feature bounds: finite scalars or 1-D arrays (one bound per feature),
    ``lower < upper`` everywhere. Every feature mechanism takes them (``lower``, ``upper``; default
    ``0.0`` and ``1.0``): configured or from public data, never derived from the private data;
    values outside ``[lower, upper]`` are clipped before the mechanism sees them."""
    lo = as_bounds(lower, "lower")
    hi = as_bounds(upper, "upper")
    if isinstance(lo, np.ndarray) and isinstance(hi, np.ndarray) and lo.shape != hi.shape:
        raise ValueError(
            f"lower and upper disagree on the number of features: {lo.shape[0]} vs {hi.shape[0]}"
        )
    lo_a, hi_a = np.asarray(lo), np.asarray(hi)
    bad_mask = np.atleast_1d(lo_a >= hi_a)
    bad = np.flatnonzero(bad_mask)
    if bad.size:
        i = int(bad[0])
        where = f" at features {bad[:5].tolist()}" if bad_mask.size > 1 else ""
        raise ValueError(
            f"lower must be < upper{where}, got lower={np.atleast_1d(lo_a)[i if lo_a.ndim else 0]}, "
            f"upper={np.atleast_1d(hi_a)[i if hi_a.ndim else 0]}"
        )
    with np.errstate(over="ignore"):
        span = hi_a - lo_a
    if not np.all(np.isfinite(span)):
        raise ValueError("upper - lower overflows; use bounds of a smaller magnitude")
    return lo, hi


def check_rows(x: Any, d_fixed: int | None, name: str = "x", *, allow_1d: bool = False) -> np.ndarray:
    """A real ``[rows, d]`` array (or ``[d]`` with ``allow_1d``); finiteness is the caller's."""
    x = np.asarray(x)
    if x.ndim != 2 and not (allow_1d and x.ndim == 1):
        want = "a 1-D [d] or 2-D [rows, d]" if allow_1d else "a 2-D [rows, d]"
        raise ValueError(f"{name} must be {want} array, got shape {list(x.shape)}")
    if x.dtype == np.bool_ or not np.issubdtype(x.dtype, np.number) or np.iscomplexobj(x):
        raise TypeError(f"{name} must hold real numbers, got dtype {x.dtype}")
    if d_fixed is not None and x.shape[-1] != d_fixed:
        raise ValueError(f"{name} has {x.shape[-1]} features but lower/upper are given for {d_fixed}")
    return x


def _fmt_bound(v: float | np.ndarray) -> str:
    if isinstance(v, np.ndarray):
        return f"[{v.shape[0]} values]"
    return repr(v)


def _plain(v: Any) -> Any:
    return v.tolist() if isinstance(v, np.ndarray) else v


# -- k-of-d sampling (Wang et al., Algorithm 4) ------------------------------------------------------
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
    ``epsilon`` (never more, even in floats): the guarantee can state ``epsilon`` itself without
    understating the loss.
    """
    eps = check_epsilon(epsilon, "epsilon")
    k = check_int(k, "k", minimum=1)
    e = eps / k
    bound = Fraction(eps)
    while Fraction(e) * k > bound:
        e = float(np.nextafter(e, 0.0))
    return e


def check_coordinate_epsilon(eps_c: float, what: str = "epsilon / k", owner: str = "") -> float:
    """Refuse a per-coordinate budget above :data:`MAX_COORDINATE_EPSILON` (a thin alias of
    :meth:`COORDINATE_RANGE.check_coordinate <privgraph.mechanisms.base.EpsilonRange.check_coordinate>`;
    mechanisms call their own ``epsilon_range.check_coordinate``)."""
    return COORDINATE_RANGE.check_coordinate(eps_c, what, owner)


def resolve_num_features(num_features: int | None, d_fixed: int | None, fixed_by: str) -> int:
    """The feature count ``d``: the one a mechanism's per-feature parameters fix (``d_fixed``,
    named by ``fixed_by``), or ``num_features``; the two must agree when both are given."""
    if num_features is None:
        if d_fixed is None:
            raise ValueError(f"num_features is needed: {fixed_by} do not fix the number of features")
        return d_fixed
    d = check_int(num_features, "num_features", minimum=1)
    if d_fixed is not None and d != d_fixed:
        raise ValueError(f"num_features={d} but {fixed_by} are given for {d_fixed}")
    return d


def choose_coordinates(keys: np.ndarray, k: int) -> np.ndarray:
    """The ``k`` smallest of each row's uniform keys ``[rows, d]``: a uniform ``k``-subset
    ``[rows, k]`` per row (``argmin`` when ``k = 1``, else ``argpartition``)."""
    if k == 1:
        return np.argmin(keys, axis=1)[:, None]
    return np.argpartition(keys, k - 1, axis=1)[:, :k]


def scatter_coordinates(yk: np.ndarray, idx: np.ndarray | None, d: int) -> np.ndarray:
    """``yk [rows, k]`` placed at ``idx`` in float64 zeros ``[rows, d]`` (``yk`` itself if ``idx`` is None)."""
    if idx is None:
        return yk
    out = np.zeros((yk.shape[0], d))
    np.put_along_axis(out, idx, yk, axis=1)
    return out


# -- exact samplers ------------------------------------------------------------------------------------
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


# -- the scaled-feature base -----------------------------------------------------------------------------
class ScaledFeatureMechanism(FeatureMechanism):
    """Shared shape of the bounded-feature LDP mechanisms (not registered itself).

    A subclass sets ``name``, ``domain`` (the per-feature input interval of the mechanism,
    ``(0, 1)`` or ``(-1, 1)``) and ``_assumptions`` (added to the common ones), and implements
    ``_perturb(t, rng)`` (the mechanism on a block ``t`` ``[rows, d]`` already in ``domain``;
    returns float64 ``[rows, d]`` on the domain's scale) and ``_domain_variance(t)`` (the
    per-entry output variance on the domain's scale). Raw features are mapped with the PUBLIC
    bounds, ``t = lo_D + (x - lower) / (upper - lower) * (hi_D - lo_D)`` clipped to the domain,
    and outputs ``y`` are mapped back affinely, ``lower + (y - lo_D) / (hi_D - lo_D) * (upper -
    lower)``: an unbiased estimate of ``t`` maps to an unbiased estimate of the CLIPPED feature
    value. A mechanism that releases on the domain's scale instead overrides
    ``_release_block`` and ``_to_features`` (see :class:`~privgraph.mechanisms.features.
    three_output.SampledFeatureMechanism`); one that draws from a stream over the generator
    overrides ``_noise_source`` (see :class:`~privgraph.mechanisms.features.laplace.LaplaceMechanism`).
    Per-feature bounds fix ``d``, so the per-coordinate budget is then checked at construction
    (``_check_at_load``), through the class's ``epsilon_range.check_coordinate``.
    """

    name: ClassVar[str]
    scope: ClassVar[Scope] = Scope.FEATURES
    domain: ClassVar[tuple[float, float]] = (0.0, 1.0)
    _assumptions: ClassVar[tuple[str, ...]] = ()
    #: the budgets the sampler realises exactly (refined per mechanism)
    epsilon_range: ClassVar[EpsilonRange] = COORDINATE_RANGE

    def __init__(self, *, epsilon: float, lower: Any = 0.0, upper: Any = 1.0) -> None:
        self.epsilon = type(self).epsilon_range.check(epsilon, "epsilon", type(self).name)
        self.lower, self.upper = check_bounds(lower, upper)
        self._check_at_load()

    def _check_at_load(self) -> None:
        """Refuse at construction what the public parameters already decide: with per-feature
        bounds ``d`` is known, so the per-coordinate budget is checked now, not at privatize time."""
        if self.num_features is not None:
            self._check_dimension(self.num_features)

    def _check_coordinate(self, eps_c: float, what: str) -> float:
        """``eps_c`` through this class's ``epsilon_range.check_coordinate``."""
        return type(self).epsilon_range.check_coordinate(eps_c, what, type(self).name)

    # -- public parameters --------------------------------------------------------------------
    @property
    def num_features(self) -> int | None:
        """``d`` when fixed by per-feature bounds, else ``None`` (known at privatize time)."""
        for v in (self.lower, self.upper):
            if isinstance(v, np.ndarray):
                return int(v.shape[0])
        return None

    @property
    def guarantee(self) -> Guarantee:
        return Guarantee(
            kind=GuaranteeKind.FEATURE_LDP,
            epsilon=self.epsilon,
            scope=Scope.FEATURES,
            assumptions=_COMMON_ASSUMPTIONS + self._assumptions,
        )

    def params(self) -> dict[str, Any]:
        """Public parameters for the manifest (plain Python values, no data)."""
        return {"epsilon": self.epsilon, "lower": _plain(self.lower), "upper": _plain(self.upper)}

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(epsilon={self.epsilon!r}, lower={_fmt_bound(self.lower)}, "
            f"upper={_fmt_bound(self.upper)})"
        )

    # -- utility ------------------------------------------------------------------------------
    def bias(self, x: Any) -> np.ndarray:
        """``E[output] - x`` per entry (float64, the shape of ``x``): 0 inside the bounds.

        The estimate is unbiased for the CLIPPED value, so the bias is ``clip(x) - x``.
        """
        x = self._check_x(x, allow_1d=True)
        lo, hi = self._bounds(x.shape[-1])
        return np.clip(x, lo, hi) - x

    def variance(self, x: Any) -> np.ndarray:
        """The exact per-entry output variance on the ORIGINAL scale (float64, shape of ``x``).

        ``x`` is ``[d]`` or ``[rows, d]`` (``d`` matters: the noise depends on it).
        """
        x = self._check_x(x, allow_1d=True)
        x2 = x.reshape(-1, x.shape[-1]) if x.ndim == 1 else x
        t = self._to_domain(x2)
        lo_d, hi_d = self.domain
        lo, hi = self._bounds(x.shape[-1])
        factor = ((hi - lo) / (hi_d - lo_d)) ** 2
        return (self._domain_variance(t) * factor).reshape(x.shape)

    # -- privatization ------------------------------------------------------------------------
    def privatize_rows(self, x: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """Privatize a block of feature rows ``[rows, d]`` -> float32 ``[rows, d]``.

        Each row is one node's vector; rows are independent, so a partition's rows can be
        privatized on their own. For a fixed generator state the result does not depend on the
        chunking (every chunk draws its randomness in one call, row-major, a fixed count per row).
        """
        rng = check_generator(rng)
        x = self._check_x(x, allow_1d=False)
        rows, d = x.shape
        out = np.zeros((rows, d), dtype=np.float32)
        if rows == 0 or d == 0:
            return out
        self._check_dimension(d)
        source = self._noise_source(rng)  # one per release, shared by its chunks
        step = max(1, _CHUNK_ENTRIES // d)
        for start in range(0, rows, step):
            xc = x[start : start + step]
            if not np.all(np.isfinite(xc)):
                bad = start + int(np.flatnonzero(~np.isfinite(xc).all(axis=1))[0])
                raise ValueError(f"x has NaN or inf (first in row {bad})")
            out[start : start + step] = self._release_block(self._to_domain(xc), source)
        return out

    def privatize(self, graph: GraphData, rng: np.random.Generator) -> GraphData:
        """Privatize every node's feature vector: a copy of ``graph`` with ``x`` replaced by the
        release in feature units (post-processing of :meth:`privatize_rows`)."""
        if not isinstance(graph, GraphData):
            raise TypeError(f"graph must be a GraphData, got {type(graph).__name__}")
        if graph.x is None:
            raise ValueError(
                f"{type(self).__name__}: graph.x is None (an unattributed graph has no features "
                "to privatize)"
            )
        return graph.replace(x=self._to_features(self.privatize_rows(graph.x, rng)))

    # -- subclass hooks -----------------------------------------------------------------------
    def _perturb(self, t: np.ndarray, rng: np.random.Generator) -> np.ndarray:  # pragma: no cover
        raise NotImplementedError

    def _domain_variance(self, t: np.ndarray) -> np.ndarray:  # pragma: no cover
        raise NotImplementedError

    def _check_dimension(self, d: int) -> None:
        """Raise when the mechanism cannot run on ``d`` features (e.g. its noise overflows)."""

    def _noise_source(self, rng: np.random.Generator) -> Any:
        """What the chunks of one release draw from: ``rng`` itself, or a stream over it that
        carries unused randomness from one chunk to the next (so chunking never changes the output)."""
        return rng

    def _release_block(self, t: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """``_perturb`` a block in the domain, mapped back affinely to the original scale."""
        y = self._perturb(t, rng)
        lo, hi = self._bounds(t.shape[1])
        lo_d, hi_d = self.domain
        # lower + (y - lo_D) / (hi_D - lo_D) * span
        if lo_d != 0.0:
            y -= lo_d
        y *= (hi - lo) / (hi_d - lo_d)
        y += lo
        return y

    def _to_features(self, released: np.ndarray) -> np.ndarray:
        """What :meth:`privatize` stores from a release (already in feature units here)."""
        return released

    # -- helpers ------------------------------------------------------------------------------
    def _check_x(self, x: Any, *, allow_1d: bool) -> np.ndarray:
        return check_rows(x, self.num_features, allow_1d=allow_1d)

    def _bounds(self, d: int) -> tuple[np.ndarray, np.ndarray]:
        lo = np.broadcast_to(np.asarray(self.lower, dtype=np.float64), (d,))
        hi = np.broadcast_to(np.asarray(self.upper, dtype=np.float64), (d,))
        return lo, hi

    def _to_domain(self, x: np.ndarray) -> np.ndarray:
        """Scale with the public bounds and clip: float64 ``[rows, d]`` in ``domain``."""
        lo, hi = self._bounds(x.shape[-1])
        lo_d, hi_d = self.domain
        t = x - lo  # float64 (lo is float64)
        t /= hi - lo
        np.clip(t, 0.0, 1.0, out=t)
        if (lo_d, hi_d) != (0.0, 1.0):
            t *= hi_d - lo_d
            t += lo_d
        return t


class KSampledMixin:
    """Wang et al.'s k-of-d coordinate sampling (ICDE 2019, Algorithm 4) for a
    :class:`ScaledFeatureMechanism`: each row reports ``k`` of its ``d`` coordinates, a uniform
    ``k``-subset drawn independently of the data, each at :func:`split_epsilon` ``(epsilon, k)``.

    ``_divisor`` is the ``c`` of :func:`wang_sample_size`. Randomness layout, per block of rows,
    row-major: one ``rng.random((rows, d + draws * k))`` call (only ``(rows, draws * k)`` when
    ``k = d``), whose first ``d`` columns are the keys (the ``k`` smallest are sampled) and whose
    last ``draws * k`` columns drive the perturbations; so for a fixed generator state the output
    does not depend on the chunking.
    """

    epsilon: float
    num_features: int | None
    _divisor: ClassVar[float] = 2.5

    def num_sampled(self, num_features: int | None = None) -> int:
        """``k``, the number of coordinates each node perturbs, for ``d = num_features``."""
        return wang_sample_size(self.epsilon, self._resolve_d(num_features), self._divisor)

    def _draw_sampled(
        self, t: np.ndarray, k: int, draws: int, rng: np.random.Generator
    ) -> tuple[np.ndarray | None, np.ndarray, np.ndarray]:
        """``(idx, t_sampled [rows, k], u [rows, draws * k])``; ``idx`` is None when ``k = d``."""
        rows, d = t.shape
        n_keys = d if k < d else 0
        u = rng.random((rows, n_keys + draws * k))
        if k == d:
            return None, t, u
        idx = choose_coordinates(u[:, :d], k)
        return idx, np.take_along_axis(t, idx, axis=1), u[:, d:]

    def _resolve_d(self, num_features: int | None) -> int:
        return resolve_num_features(num_features, self.num_features, "lower/upper")
