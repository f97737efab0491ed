r"""The piecewise mechanisms on a fixed public grid, sampled exactly (PM, Hybrid's PM part, PM-SUB).

Wang et al.'s Piecewise Mechanism (ICDE 2019, Algorithm 2) and Zhao et al.'s PM-SUB (IEEE IoT-J
2020) release a REAL number, uniform on a high-density window :math:`[\ell(t), r(t)]` that slides
with the input :math:`t \in [-1, 1]`, or uniform on the rest of :math:`[-C, C]`; the window's share
of the range is :math:`f = 1 / (e^{\varepsilon/2} + 1)` (PM) or :math:`1 / (e^{\varepsilon/3} + 1)`
(PM-SUB). Released as floats, the low bits of such a value depend on the input (Mironov, CCS
2012). :class:`PiecewiseGrid` is the same mechanism on a grid of :math:`M` cells:

1. the window is :math:`W = \mathrm{round}(M f) \ge 1` consecutive cells starting at cell
   :math:`S`, with :math:`S` the input's position :math:`s(t) = \frac{t + 1}{2}(M - W)` rounded
   up with probability :math:`s - \lfloor s \rfloor` (randomized rounding: :math:`E[S] = s(t)`);
2. the output is a uniform cell of the window with probability :math:`1 - q`, else a uniform cell
   of the other :math:`M - W`, with :math:`q` chosen so that the two cell probabilities
   :math:`p_{hi} = (1 - q)/W` and :math:`p_{lo} = q/(M - W)` have ratio
   :math:`\le e^{\varepsilon}` EXACTLY (checked in rational arithmetic against a lower bound of
   :math:`e^\varepsilon`; :math:`q` is rounded up by ulps until it holds);
3. cell :math:`i` is released as :math:`y_i = (i + \frac12 - \frac M2)\,\delta`,
   :math:`\delta = 2 / ((M - W) - qM)`, which makes :math:`E[y \mid t] = t` exactly (the output
   law is linear in :math:`s(t)`, see :meth:`PiecewiseGrid.mean`).

Privacy: given :math:`S`, every cell has probability :math:`p_{hi}` or :math:`p_{lo}`; the law given
:math:`t` is a mixture over :math:`S` of such laws, so every cell's probability lies in
:math:`[p_{lo}, p_{hi}]` for every input and the ratio between two inputs is at most
:math:`p_{hi}/p_{lo} \le e^\varepsilon` (the rounding of :math:`s(t)` may be inexact: it only
moves weight between two :math:`\varepsilon`-bounded laws). Every input reaches every cell: the
set of outputs is the public grid, whatever the input.

Exact sampling: the piece with :func:`~privgraph.mechanisms.sampling.bernoulli_exact` (the float
:math:`q` realised exactly: :math:`q \ge 2^{-54}` for every :math:`\varepsilon \le 50` at
:math:`M = 2^{20}`), the cell with an exact uniform integer (the 106-bit integer of two uniforms
modulo :math:`n`, rejected in the top :math:`2^{106} \bmod n` values, probability
:math:`< 2^{-86}`, then redrawn from the generator). Five uniforms per entry.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from fractions import Fraction
from typing import Any, Literal

import numpy as np

from privgraph.guarantee.params import check_epsilon, check_int
from privgraph.mechanisms.base import EpsilonRange, check_generator
from privgraph.mechanisms.sampling import bernoulli_exact

__all__ = [
    "GRID_CELLS",
    "GRID_EPSILON_RANGE",
    "PiecewiseGrid",
    "piecewise_grid",
    "exp_lower_bound",
    "UNIFORMS_PER_ENTRY",
]

#: Cells of the public output grid (a power of two; the released values are its cell centres).
GRID_CELLS = 1 << 20
#: The budgets of the grid mechanisms (PM, PM-SUB): per reported coordinate, [2^-20, 50].
GRID_EPSILON_RANGE = EpsilonRange(
    per_coordinate=True,
    note=(
        "each of the k reported coordinates is drawn on the public 2^20-cell grid: the piece "
        "with bernoulli_exact (its outer probability q >= 2^-54 up to eps / k = 50, so realised "
        "exactly) and the cell with an exact integer sampler; p_hi / p_lo <= e^(eps/k) is "
        "certified in rational arithmetic"
    ),
)
#: Uniforms one grid draw takes: rounding of the position, the piece (two: 106 bits), the cell (two).
UNIFORMS_PER_ENTRY = 5
_TWO53 = 1 << 53

Family = Literal["pm", "pm_sub"]


def exp_lower_bound(x: Fraction, rel: int = 110) -> Fraction:
    """A rational lower bound of ``e^x`` for ``x >= 0``: the Taylor sum up to the first term below
    ``2^-rel`` of the partial sum (every term is positive, so every partial sum is below ``e^x``)."""
    if x < 0:
        raise ValueError("x must be >= 0")
    total = Fraction(1)
    term = Fraction(1)
    n = 0
    while True:
        n += 1
        term = term * x / n
        total += term
        if term * (1 << rel) < total and n > x:
            return total


def window_fraction(epsilon: float, family: Family) -> float:
    """The window's share of the output range: ``1 / (e^(eps/2) + 1)`` (PM), ``1 / (e^(eps/3) + 1)`` (PM-SUB)."""
    div = {"pm": 2.0, "pm_sub": 3.0}[family]
    return 1.0 / (1.0 + math.exp(epsilon / div))


@dataclasses.dataclass(frozen=True)
class PiecewiseGrid:
    """One piecewise mechanism on a grid (see the module): ``cells`` M, ``window`` W, the float
    outer probability ``outer`` q (realised exactly) and the value step ``step`` delta."""

    epsilon: float
    cells: int
    window: int
    outer: float
    step: float

    # -- the law ------------------------------------------------------------------------------
    @property
    def high(self) -> float:
        """``p_hi = (1 - q) / W``, the probability of each window cell."""
        return (1.0 - self.outer) / self.window

    @property
    def low(self) -> float:
        """``p_lo = q / (M - W)``, the probability of each other cell."""
        return self.outer / (self.cells - self.window)

    def ratio(self) -> Fraction:
        """The exact ``p_hi / p_lo`` of the realised law (rational)."""
        q = Fraction(self.outer)
        return (1 - q) * (self.cells - self.window) / (q * self.window)

    @property
    def bound(self) -> float:
        """The largest released magnitude, ``(M - 1) / 2 * delta``."""
        return (self.cells - 1) / 2.0 * self.step

    def values(self) -> np.ndarray:
        """Every released value ``[M]`` (float64, ascending): the public grid."""
        return self.value(np.arange(self.cells, dtype=np.int64))

    def value(self, i: Any) -> np.ndarray:
        """The released value of cell(s) ``i``: ``(i - (M - 1)/2) delta``."""
        return (np.asarray(i, dtype=np.float64) - (self.cells - 1) / 2.0) * self.step

    def _position(self, t: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(S0, phi)``: the window start ``S0 = floor(s(t))`` and the probability ``phi`` of ``S0 + 1``."""
        s = (t + 1.0) * 0.5 * (self.cells - self.window)
        s0 = np.minimum(np.floor(s), self.cells - self.window)
        return s0.astype(np.int64), s - s0

    def pmf(self, t: Any) -> np.ndarray:
        """The exact output law ``[..., M]`` (float64) for inputs ``t`` in ``[-1, 1]`` (small ``M`` only)."""
        t = _unit(t)
        s0, phi = self._position(t)
        i = np.arange(self.cells)
        def window_of(start: np.ndarray) -> np.ndarray:
            st = start[..., None]
            return (i >= st) & (i < st + self.window)
        p0 = np.where(window_of(s0), self.high, self.low)
        p1 = np.where(window_of(np.minimum(s0 + 1, self.cells - self.window)), self.high, self.low)
        return (1.0 - phi)[..., None] * p0 + phi[..., None] * p1

    def mean(self, t: Any) -> np.ndarray:
        r""":math:`E[y \mid t]`: given :math:`S`, :math:`E[c_I] = \bar c_S (1 - qM/(M - W))` with
        :math:`\bar c_S = S + W/2 - M/2` the window's centre (cells centred, :math:`\sum_i c_i = 0`),
        and :math:`E[\bar c_S] = t (M - W) / 2`, so :math:`E[y] = t \delta ((M - W) - qM)/2 = t`
        (returned as computed from the realised :math:`q` and :math:`\delta`)."""
        t = _unit(t)
        kappa = float((self.cells - self.window) - Fraction(self.outer) * self.cells)
        return t * kappa * self.step / 2.0

    def variance(self, t: Any) -> np.ndarray:
        r"""The exact :math:`\mathrm{Var}[y \mid t]` (float64, broadcast): the mean over :math:`S` of
        the variance given :math:`S` (window: :math:`(W^2 - 1)/12` about its centre; the rest of
        the grid by difference from the whole grid's :math:`M (M^2 - 1)/12`), plus the variance of
        :math:`E[y \mid S]` from the randomized rounding, :math:`\phi (1 - \phi) \kappa^2`."""
        t = _unit(t)
        M, W, q = self.cells, self.window, self.outer
        kappa = float(((M - W) - Fraction(q) * M) / (M - W))
        s0, phi = self._position(t)

        def given(start: np.ndarray) -> np.ndarray:
            cbar = start + W / 2.0 - M / 2.0
            mu = kappa * cbar
            dev = cbar * (1.0 - kappa)  # cbar - mu
            win = W * (W * W - 1) / 12.0 + W * dev * dev
            whole = M * (M * M - 1) / 12.0 + M * mu * mu
            return (1.0 - q) * win / W + q * (whole - win) / (M - W)

        v = (1.0 - phi) * given(s0.astype(np.float64)) + phi * given(
            np.minimum(s0 + 1, M - W).astype(np.float64)
        )
        v = v + phi * (1.0 - phi) * kappa * kappa
        return v * self.step * self.step

    # -- sampling -----------------------------------------------------------------------------
    def transform(self, t: Any, u: np.ndarray, rng: np.random.Generator | None = None) -> np.ndarray:
        """Released values (float64, the shape of ``t``) from ``u [..., 5]`` uniforms per entry.

        ``u[..., 0]`` rounds the position, ``u[..., 1:3]`` draw the piece
        (:func:`bernoulli_exact`), ``u[..., 3:5]`` the cell; ``rng`` redraws the cell in the rare
        rejection (probability < 2^-86 per entry; refused if ``rng`` is None).
        """
        t = _unit(t)
        u = np.asarray(u, dtype=np.float64)
        if u.shape != t.shape + (UNIFORMS_PER_ENTRY,):
            raise ValueError(f"u must have shape {list(t.shape) + [UNIFORMS_PER_ENTRY]}, got {list(u.shape)}")
        M, W = self.cells, self.window
        s0, phi = self._position(t)
        start = np.minimum(s0 + (u[..., 0] < phi), M - W)
        outer = bernoulli_exact(self.outer, u[..., 1], u[..., 2])
        n = np.where(outer, M - W, W).astype(np.int64)
        j = _uniform_below(n, u[..., 3], u[..., 4], rng)
        cell = np.where(outer, np.where(j < start, j, j + W), start + j)
        return self.value(cell)

    def sample(self, t: Any, rng: np.random.Generator) -> np.ndarray:
        """Draw the mechanism for every entry of ``t`` (five uniforms each, one ``random`` call)."""
        rng = check_generator(rng)
        t = _unit(t)
        return self.transform(t, rng.random(t.shape + (UNIFORMS_PER_ENTRY,)), rng)


def _unit(t: Any) -> np.ndarray:
    t = np.asarray(t)
    if t.dtype == np.bool_ or not np.issubdtype(t.dtype, np.number) or np.iscomplexobj(t):
        raise TypeError(f"t must hold real numbers, got dtype {t.dtype}")
    t = t.astype(np.float64, copy=False)
    if not np.all(np.abs(t) <= 1.0):  # also rejects NaN
        raise ValueError("t must lie in [-1, 1] (scale and clip first)")
    return t


def _uniform_below(n: np.ndarray, u_hi: np.ndarray, u_lo: np.ndarray, rng: np.random.Generator | None) -> np.ndarray:
    """Exact uniform integers in ``[0, n)`` (``1 <= n <= 2^26``, broadcast) from the 106-bit
    integer ``K = 2^53 k_hi + k_lo`` of two uniforms: ``K mod n``, rejected when ``K`` lies in the
    top ``2^106 mod n`` values (then redrawn from ``rng``)."""
    k_hi = (u_hi * _TWO53).astype(np.int64)  # exact: numpy's uniforms are multiples of 2^-53
    k_lo = (u_lo * _TWO53).astype(np.int64)
    j = ((k_hi % n) * (_TWO53 % n) + k_lo) % n  # < 2^52 + 2^53: no overflow for n <= 2^26
    cut = _TWO53 - _mod_2_106(n)
    bad = np.flatnonzero((k_hi == _TWO53 - 1) & (k_lo >= cut))
    if bad.size:
        if rng is None:
            raise RuntimeError("a cell draw was rejected and no generator was given to redraw it")
        flat = j.reshape(-1)
        nb = np.broadcast_to(n, j.shape).reshape(-1)
        for b in bad.tolist():  # probability < 2^-86 each
            flat[b] = rng.integers(0, int(nb[b]))
    return j


@functools.lru_cache(maxsize=64)
def _mod_2_106_scalar(n: int) -> int:
    return (1 << 106) % n


def _mod_2_106(n: np.ndarray) -> np.ndarray:
    vals = np.unique(n)
    table = {int(v): _mod_2_106_scalar(int(v)) for v in vals.tolist()}
    if len(table) == 1:
        return np.full(np.shape(n), next(iter(table.values())), dtype=np.int64)
    out = np.empty(np.shape(n), dtype=np.int64)
    for v, m in table.items():
        out[n == v] = m
    return out


@functools.lru_cache(maxsize=256)
def piecewise_grid(epsilon: float, family: Family = "pm", cells: int = GRID_CELLS) -> PiecewiseGrid:
    """The grid mechanism of ``family`` ("pm": Wang et al.'s PM; "pm_sub": Zhao et al.'s PM-SUB)
    at the per-coordinate budget ``epsilon`` on ``cells`` cells (see the module).

    ``q`` starts from ``(M - W) e^-eps / (W + (M - W) e^-eps)`` and is raised by ulps until
    ``(1 - q)(M - W) / (q W) <= e^eps`` holds in rational arithmetic against
    :func:`exp_lower_bound`; ``delta = 2 / ((M - W) - qM)`` is computed from that ``q`` exactly
    and rounded once.
    """
    eps = check_epsilon(epsilon, "epsilon")
    if family not in ("pm", "pm_sub"):
        raise ValueError(f"family must be 'pm' or 'pm_sub', got {family!r}")
    M = check_int(cells, "cells", minimum=2)
    if M > 1 << 26 or M % 2:
        raise ValueError(f"cells must be even and at most 2^26, got {M}")
    W = min(max(1, round(M * window_fraction(eps, family))), M // 2)
    rest = M - W
    e_neg = math.exp(-eps)
    q = rest * e_neg / (W + rest * e_neg)
    if not q > 0.0:
        raise ValueError(f"epsilon = {eps:g} is too large: the outer probability underflows")
    target = exp_lower_bound(Fraction(eps))
    for _ in range(64):
        fq = Fraction(q)
        if (1 - fq) * rest <= target * fq * W:
            break
        q = float(np.nextafter(q, 1.0))
    else:  # pragma: no cover - the float q is within a few ulps of the bound
        raise RuntimeError("could not certify the piecewise grid's ratio")
    kappa = rest - Fraction(q) * M  # (M - W) - q M > 0 exactly
    if not kappa > 0:
        raise ValueError(f"epsilon = {eps:g} is too small for a {M}-cell grid")
    return PiecewiseGrid(epsilon=eps, cells=M, window=W, outer=q, step=float(2 / kappa))
