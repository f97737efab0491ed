"""LaplaceMechanism: per-node Laplace noise on the whole feature vector (a feature-LDP baseline).

This module also holds ``_ScaledFeatureMechanism``, the scaffolding that the bounded-feature LDP
baselines (Laplace, Duchi, Piecewise, Hybrid) share: public bounds, scaling into the
mechanism's input domain with clipping, the chunked row loop, the affine map back to the
original scale, the guarantee record, ``params`` and ``__repr__``.
"""

from __future__ import annotations

import math
from typing import Any, ClassVar

import numpy as np

from privgraph.graph import GraphData
from privgraph.mechanisms.base import (
    Guarantee,
    GuaranteeKind,
    Scope,
    check_epsilon,
    check_generator,
)
from privgraph.mechanisms.features.feature_rr import _as_bounds

__all__ = [
    "LaplaceMechanism",
    "laplace_scale",
    "laplace_density",
    "laplace_cdf",
    "laplace_variance",
]

# Entries of ``x`` per chunk of ``privatize_rows``: bounds the float64 temporaries (the input
# block, its uniforms and the output block) to some tens of MB.
_CHUNK_ENTRIES = 1 << 20

_COMMON_ASSUMPTIONS: tuple[str, ...] = (
    "feature bounds are public",
    "features are scaled with public bounds and clipped",
    "each node's feature vector is randomized independently (local model)",
)


def _fmt_bound(v: float | np.ndarray) -> str:
    if isinstance(v, np.ndarray):
        return f"[{v.shape[0]} values]"
    return repr(v)


class _ScaledFeatureMechanism:
    """Shared shape of the bounded-feature LDP mechanisms (not registered itself).

    A subclass sets ``name``, ``domain`` (the per-feature input interval of the mechanism,
    ``(0, 1)`` or ``(-1, 1)``) and ``_assumptions``, and implements ``_perturb(t, rng)`` (the
    mechanism on a block ``t`` ``[rows, d]`` already in ``domain``; returns float64 ``[rows, d]``
    on the domain's scale) and ``_domain_variance(t)`` (the per-entry output variance on the
    domain's scale). Raw features are mapped with the PUBLIC bounds, ``t = lo_D + (x - lower) /
    (upper - lower) * (hi_D - lo_D)`` clipped to the domain, and outputs ``y`` are mapped back
    affinely, ``lower + (y - lo_D) / (hi_D - lo_D) * (upper - lower)``: an unbiased estimate of
    ``t`` maps to an unbiased estimate of the CLIPPED feature value.
    """

    name: ClassVar[str]
    scope: ClassVar[Scope] = Scope.FEATURES
    domain: ClassVar[tuple[float, float]] = (0.0, 1.0)
    _assumptions: ClassVar[tuple[str, ...]] = ()

    def __init__(self, *, epsilon: float, lower: Any = 0.0, upper: Any = 1.0) -> None:
        self.epsilon = check_epsilon(epsilon, "epsilon")
        self.lower = _as_bounds(lower, "lower")
        self.upper = _as_bounds(upper, "upper")
        sizes = {
            name: int(v.shape[0])
            for name, v in (("lower", self.lower), ("upper", self.upper))
            if isinstance(v, np.ndarray)
        }
        if len(set(sizes.values())) > 1:
            raise ValueError(f"lower and upper disagree on the number of features: {sizes}")
        lo, hi = np.asarray(self.lower), np.asarray(self.upper)
        bad_mask = np.atleast_1d(lo >= hi)
        bad = np.flatnonzero(bad_mask)
        if bad.size:
            i = int(bad[0])
            where = f" at features {bad[:5].tolist()}" if bad_mask.size > 1 else ""
            raise ValueError(
                f"lower must be < upper{where}, got lower={np.atleast_1d(lo)[i if lo.ndim else 0]}, "
                f"upper={np.atleast_1d(hi)[i if hi.ndim else 0]}"
            )
        with np.errstate(over="ignore"):
            span = hi - lo
        if not np.all(np.isfinite(span)):
            raise ValueError("upper - lower overflows; use bounds of a smaller magnitude")

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

        def plain(v: Any) -> Any:
            return v.tolist() if isinstance(v, np.ndarray) else v

        return {"epsilon": self.epsilon, "lower": plain(self.lower), "upper": plain(self.upper)}

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
        out = np.empty((rows, d), dtype=np.float32)
        if rows == 0 or d == 0:
            return out
        self._check_dimension(d)
        lo, hi = self._bounds(d)
        lo_d, hi_d = self.domain
        back = (hi - lo) / (hi_d - lo_d)
        step = max(1, _CHUNK_ENTRIES // d)
        for start in range(0, rows, step):
            xc = x[start : start + step]
            if not np.all(np.isfinite(xc)):
                bad = start + int(np.flatnonzero(~np.isfinite(xc).all(axis=1))[0])
                raise ValueError(f"x has NaN or inf (first in row {bad})")
            y = self._perturb(self._to_domain(xc), rng)
            # affine map back to the original scale: lower + (y - lo_D) / (hi_D - lo_D) * span
            if lo_d != 0.0:
                y -= lo_d
            y *= back
            y += lo
            out[start : start + step] = y
        return out

    def privatize(self, graph: GraphData, rng: np.random.Generator) -> GraphData:
        """Privatize every node's feature vector: a copy of ``graph`` with ``x`` replaced."""
        if not isinstance(graph, GraphData):
            raise TypeError(f"graph must be a GraphData, got {type(graph).__name__}")
        if graph.x is None:
            raise ValueError(
                f"{type(self).__name__}: graph.x is None (an unattributed graph has no features "
                "to privatize)"
            )
        return graph.replace(x=self.privatize_rows(graph.x, rng))

    # -- subclass hooks -----------------------------------------------------------------------
    def _perturb(self, t: np.ndarray, rng: np.random.Generator) -> np.ndarray:  # pragma: no cover
        raise NotImplementedError

    def _domain_variance(self, t: np.ndarray) -> np.ndarray:  # pragma: no cover
        raise NotImplementedError

    def _check_dimension(self, d: int) -> None:
        """Raise when the mechanism cannot run on ``d`` features (e.g. its noise overflows)."""

    # -- helpers ------------------------------------------------------------------------------
    def _check_x(self, x: Any, *, allow_1d: bool) -> np.ndarray:
        x = np.asarray(x)
        if x.ndim != 2 and not (allow_1d and x.ndim == 1):
            want = "a 1-D [d] or 2-D [rows, d]" if allow_1d else "a 2-D [rows, d]"
            raise ValueError(f"x must be {want} array, got shape {list(x.shape)}")
        if x.dtype == np.bool_ or not np.issubdtype(x.dtype, np.number) or np.iscomplexobj(x):
            raise TypeError(f"x must hold real numbers, got dtype {x.dtype}")
        d_fixed = self.num_features
        if d_fixed is not None and x.shape[-1] != d_fixed:
            raise ValueError(f"x has {x.shape[-1]} features but lower/upper are given for {d_fixed}")
        return x

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


class LaplaceMechanism(_ScaledFeatureMechanism):
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
