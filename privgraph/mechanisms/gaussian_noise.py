r"""Discrete Gaussian noise on a dyadic grid: integers only, up to one float64 ``exp`` per proposal.

Real-valued releases that take Gaussian noise (a node's feature vector, a gradient) round the
query to the public grid :math:`\gamma = 2^{-g}` and add :math:`\gamma Z`, where ``Z`` follows the
discrete Gaussian :math:`\mathcal{N}_{\mathbb{Z}}(0, \sigma^2)`,
:math:`\Pr(Z = z) \propto e^{-z^2 / (2 \sigma^2)}` on the integers (C. L. Canonne, G. Kamath and
T. Steinke, "The Discrete Gaussian for Differential Privacy", NeurIPS 2020, arXiv:2004.00010).
Every output is a grid point (an exact float64), so no low bit of a floating-point Gaussian
draw can leak the input (Mironov, CCS 2012).

Sampling. :func:`discrete_gaussian` is CKS Algorithm 3: with :math:`t = \lfloor \sigma \rfloor + 1`,
propose ``Y`` from the discrete Laplace law :math:`\Pr(Y = y) \propto e^{-a |y|}` with the dyadic
parameter :math:`a = s / 2^T` that :func:`~privgraph.mechanisms.noise.dyadic_parameter` realises
for :math:`1/t` (drawn EXACTLY, by :func:`~privgraph.mechanisms.noise.discrete_laplace_dyadic`),
and keep it with probability

.. math:: A(|y|) = e^{-x(|y|)},\qquad x(u) = \frac{(u - a \sigma^2)^2}{2 \sigma^2}
          = \tfrac12 \left(\frac{u}{\sigma} - a \sigma\right)^2 .

Since :math:`e^{-a|y|} A(|y|) = e^{-y^2/(2\sigma^2)} e^{-a^2 \sigma^2 / 2}`, the kept values follow
the discrete Gaussian exactly, for ANY :math:`a > 0`: the acceptance is built from the parameter
the proposal actually used (:math:`a \le 1/t`, equal to it unless :math:`1/t < 2^{-10}`, within a
relative :math:`2^{-22}` at the largest :math:`\sigma`), so rounding :math:`1/t` only changes the
acceptance rate (about 0.76 for large :math:`\sigma`), never the output law.

What is exact and what is not. The proposal is exact (integer arithmetic on random words). The
acceptance :math:`e^{-x}` is split as :math:`x = n + f`, :math:`n = \lfloor x \rfloor`,
:math:`f \in [0, 1)`:

* :math:`e^{-n}` is decided EXACTLY, as :math:`W \ge n` for a geometric
  :math:`\Pr(W \ge w) = e^{-w}` (``W`` from the exact discrete Laplace sampler at ``a = 1``:
  :math:`W = Z` for :math:`Z \ge 0`, :math:`-Z - 1` otherwise), drawn only where it matters;
* :math:`e^{-f} \in (e^{-1}, 1]` is a float64 probability, decided exactly by
  :func:`~privgraph.mechanisms.sampling.bernoulli_exact` (every float64 :math:`\ge 2^{-54}` is
  realised exactly). Its error is the float error: ``x`` is computed in double-double arithmetic
  (a compiled kernel: relative error about :math:`2^{-100}`, so :math:`|\Delta x| < 2^{-58}` for
  :math:`x \le 2^{40}`; exact rational arithmetic above, or for :math:`u \ge 2^{53}`), ``f`` is
  rounded at most twice (:math:`\le 2^{-53}` absolute) and ``exp`` is the C library's (within
  1 ulp, i.e. a relative :math:`2^{-52}` on :math:`[e^{-1}, 1]`; glibc's is within 0.52 ulp), so
  :math:`|\theta| \le 2^{-53} + 2^{-52} + 2^{-58} < 2^{-51}` (the tests check it against exact
  rationals and 60-digit decimals: worst seen :math:`2^{-52.5}`). So the realised acceptance is
  :math:`A(u)\, e^{\theta(u)}` with :math:`|\theta(u)| \le \eta = 2^{-51}` for EVERY ``u``: the
  bound does not degrade in the tails, since the tail factor :math:`e^{-n}` is exact and no
  probability is ever below :math:`e^{-1}` (no underflow, no :math:`2^{-106}` floor).

Hence the realised pmf is :math:`q(z) = p(z)\, e^{\theta(|z|)} / N` with
:math:`N = \mathrm{E}_p[e^{\theta}] \in [e^{-\eta}, e^{\eta}]`: within a factor
:math:`e^{\pm 2\eta} = e^{\pm 2^{-50}}` of the discrete Gaussian ``p`` at every integer.

Privacy slack. For an integer query released as :math:`k + Z`, neighbours :math:`k, k'` have
realised output laws :math:`q(\cdot - k)`, :math:`q(\cdot - k')` with the SAME normaliser ``N``,
so the privacy loss at every output is the ideal one plus :math:`\theta(\cdot) - \theta(\cdot)`,
i.e. within :math:`\pm 2\eta = \pm 2^{-50}`. Consequently:

* Renyi DP: :math:`D_\alpha(Q_k \| Q_{k'}) \le D_\alpha(P_k \| P_{k'}) + \frac{\alpha}{\alpha - 1}
  2^{-50}` (from :math:`\sum q_0^\alpha q_1^{1-\alpha} = N^{-1} \sum p_0^\alpha p_1^{1-\alpha}
  e^{\alpha\theta_0 + (1-\alpha)\theta_1} \le e^{2\alpha\eta} \sum p_0^\alpha p_1^{1-\alpha}`);
  for every order :math:`\alpha \ge 2`, at most :math:`2^{-49}` added to
  :math:`\alpha \Delta^2 / (2\sigma^2)`.
* :math:`(\varepsilon, \delta)`-DP of the ideal mechanism becomes
  :math:`(\varepsilon + 2^{-50}, e^{2^{-50}} \delta)`-DP (from :math:`q \le e^{\eta} p / N`).

Both are far below anything a budget is stated to (privgraph's smallest epsilon is
:math:`2^{-20}`). The only other departure: integers are int64, and the discrete Laplace
proposal raises ``OverflowError`` rather than return :math:`|y| \ge 2^{62}`, an event of
probability below :math:`e^{-a 2^{62}} \le e^{-2^{21}}` per proposal (an error, never an output).

Randomness layout: one :class:`~privgraph.mechanisms.noise.WordStream` per call (proposals, then
the ``W`` of the proposals that passed the ``e^{-f}`` test with :math:`n \ge 1`, batch by batch)
and ``Generator.random`` doubles for the :math:`e^{-f}` decisions, interleaved in a fixed order:
the output is a deterministic function of the generator's stream (same seed, same output). Only
the generator passed in is used.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import numba
import numpy as np

from privgraph.guarantee import epsilon_upper, sum_upper
from privgraph.guarantee.params import check_epsilon, check_int
from privgraph.mechanisms.base import check_generator
from privgraph.mechanisms.noise import WordStream, dyadic_parameter
from privgraph.mechanisms.sampling import bernoulli_exact

__all__ = [
    "discrete_gaussian",
    "discrete_gaussian_pmf",
    "discrete_gaussian_variance",
    "gaussian_on_grid",
    "grid_sensitivity",
    "ACCEPTANCE_ERROR",
    "PMF_RELATIVE_ERROR",
    "MIN_SIGMA",
    "MAX_SIGMA",
]

#: :math:`\eta`: the realised acceptance probability is within a factor :math:`e^{\pm\eta}` of
#: the exact :math:`e^{-x}` (see the module).
ACCEPTANCE_ERROR = 2.0**-51
#: :math:`2\eta`: the realised pmf is within a factor :math:`e^{\pm 2\eta}` of the discrete
#: Gaussian at every integer; also the bound on the pointwise privacy-loss error.
PMF_RELATIVE_ERROR = 2.0**-50
#: The smallest scale accepted: below it the law is a point mass at 0 to within
#: :math:`e^{-2^{19}}` (and the acceptance exponents leave the fast kernel's range).
MIN_SIGMA = 2.0**-10
#: The largest scale accepted: the proposal's parameter :math:`1/t` stays in the dyadic sampler's
#: range and every draw (:math:`|z| \ll 2^{53}`) is an exact float64 once scaled to the grid.
MAX_SIGMA = 2.0**40

_TWO53 = 1 << 53
# Acceptance exponents x above this (or proposals u >= 2^53) are computed in exact rational
# arithmetic; the double-double kernel is accurate to 2^-58 absolute below it. A proposal gets
# there with probability below e^-1000 (a module constant so that the tests can send draws there).
_X_MAX_FAST = 2.0**40
# e^-n is decided in chunks of at most this many units (W >= chunk, then the rest): W stays far
# below the discrete Laplace sampler's 2^62 overflow guard.
_W_CHUNK = 1 << 61
# The geometric W: the discrete Laplace law at a = 1 (dyadic_parameter(1.0), exactly 1).
_UNIT_S, _UNIT_T = 1 << 52, 52
# Proposals per batch at most (memory: about 50 bytes each).
_MAX_BATCH = 1 << 20
# Terms of the dual (Poisson-summed) series of the normaliser, and the sigma above which it is used.
_THETA_TERMS = 8
_THETA_SIGMA = 2.0


# -- the double-double acceptance kernel -------------------------------------------------------------
@numba.njit(cache=True, inline="always")
def _two_sum(a, b):  # pragma: no cover - compiled
    """``a + b = s + e`` exactly (Knuth)."""
    s = a + b
    bb = s - a
    return s, (a - (s - bb)) + (b - bb)


@numba.njit(cache=True, inline="always")
def _two_prod(a, b):  # pragma: no cover - compiled
    """``a * b = p + e`` exactly (Dekker, Veltkamp splitting; no fused multiply-add needed)."""
    p = a * b
    c = 134217729.0 * a  # 2^27 + 1
    ah = c - (c - a)
    al = a - ah
    c = 134217729.0 * b
    bh = c - (c - b)
    bl = b - bh
    return p, ((ah * bh - p) + ah * bl + al * bh) + al * bl


@numba.njit(cache=True)
def _acceptance_kernel(u, sigma, a, x_max, n_out, p_out):  # pragma: no cover - compiled
    """For each ``u``: ``n_out = floor(x)`` and ``p_out = exp(-(x - n))`` with
    ``x = (u / sigma - a sigma)^2 / 2`` in double-double arithmetic (relative error about 2^-100);
    ``n_out = -1`` where ``u >= 2^53`` or ``x > x_max`` (left to the exact path)."""
    bh, bl = _two_prod(a, sigma)  # a sigma, exactly
    for i in range(u.size):
        ui = u[i]
        if ui >= 9007199254740992:  # 2^53: u is no longer an exact float
            n_out[i] = -1
            continue
        uf = float(ui)
        qh = uf / sigma  # u / sigma = qh + ql: the remainder uf - qh sigma is exact
        ph, pl = _two_prod(qh, sigma)
        ql = ((uf - ph) - pl) / sigma
        sh, sl = _two_sum(qh, -bh)  # w = u / sigma - a sigma
        sl += ql - bl
        wh, wl = _two_sum(sh, sl)
        xh, xl = _two_prod(wh, wh)  # x = w^2 / 2
        xl += 2.0 * wh * wl
        xh, xl = _two_sum(xh, xl)
        xh *= 0.5
        xl *= 0.5
        if not (xh <= x_max):  # also NaN
            n_out[i] = -1
            continue
        n = np.floor(xh)
        f = (xh - n) + xl  # xh - n is exact (xh < 2^52); one rounding, <= 2^-54
        if f < 0.0:
            n -= 1.0
            f += 1.0
        elif f >= 1.0:
            n += 1.0
            f -= 1.0
        n_out[i] = np.int64(n)
        p_out[i] = math.exp(-f)


def _acceptance_exact(u: int, sigma: float, s: int, T: int) -> tuple[int, float]:
    """``(n, exp(-f))`` for ``x = n + f`` computed in exact rational arithmetic (``n`` may exceed int64)."""
    var = Fraction(sigma) ** 2
    x = (Fraction(int(u)) - Fraction(s, 1 << T) * var) ** 2 / (2 * var)
    n = math.floor(x)
    f = float(x - n)  # correctly rounded
    if f >= 1.0:
        n, f = n + 1, 0.0
    return n, math.exp(-f)


def _acceptance(u: np.ndarray, sigma: float, s: int, T: int) -> tuple[np.ndarray, np.ndarray, dict[int, int]]:
    """``(n, p, huge)``: the exact ``e^{-n}`` part's ``n`` (int64, capped), the float ``e^{-f}``
    part, and ``{index: n}`` for the ``n`` that do not fit one chunk of the ``W`` test."""
    u = np.ascontiguousarray(u, dtype=np.int64)
    n = np.empty(u.size, dtype=np.int64)
    p = np.empty(u.size, dtype=np.float64)
    a = math.ldexp(s, -T)  # exact: s < 2^53
    _acceptance_kernel(u, float(sigma), a, float(_X_MAX_FAST), n, p)
    huge: dict[int, int] = {}
    for i in np.flatnonzero(n < 0).tolist():
        ni, pi = _acceptance_exact(int(u[i]), sigma, s, T)
        if ni > _W_CHUNK:
            huge[i] = ni
            ni = _W_CHUNK
        n[i], p[i] = ni, pi
    return n, p, huge


def _geometric_at_least(stream: WordStream, n: np.ndarray) -> np.ndarray:
    """``W >= n`` for independent geometric ``W``, :math:`\\Pr(W \\ge w) = e^{-w}`: EXACTLY
    :math:`e^{-n}` each (``n`` int64, ``0 <= n <= 2^61``)."""
    z = stream.discrete_laplace(_UNIT_S, _UNIT_T, n.size)
    w = np.where(z >= 0, z, -z - 1)
    return w >= n


def _exp_minus_huge(stream: WordStream, n: int) -> bool:
    """Bernoulli(e^-n) for ``n`` beyond one chunk: ``W >= chunk`` repeatedly, then the rest."""
    while n > 0:
        m = min(n, _W_CHUNK)
        if not bool(_geometric_at_least(stream, np.array([m], dtype=np.int64))[0]):
            return False
        n -= m
    return True


def _accept(y: np.ndarray, sigma: float, s: int, T: int, stream: WordStream, rng: np.random.Generator) -> np.ndarray:
    """The accept decisions of CKS Algorithm 3 for the proposals ``y`` (bool ``[y.size]``)."""
    n, p, huge = _acceptance(np.abs(y), sigma, s, T)
    acc = bernoulli_exact(p, rng.random(y.size), rng)  # e^-f: exact for float64 p >= e^-1
    for i in huge:
        n[i] = 0  # decided below, in Python integers
    todo = np.flatnonzero(acc & (n > 0))
    if todo.size:
        acc[todo] = _geometric_at_least(stream, n[todo])  # e^-n, exactly
    for i, ni in huge.items():
        if acc[i]:
            acc[i] = _exp_minus_huge(stream, ni)
    return acc


# -- validation and the normaliser ---------------------------------------------------------------------
def _check_sigma(sigma: Any, name: str = "sigma") -> float:
    v = check_epsilon(sigma, name)  # real, not bool, finite, > 0
    if not MIN_SIGMA <= v <= MAX_SIGMA:
        raise ValueError(
            f"{name} = {v:g} is outside [2^-10, 2^40], the range of the discrete Gaussian sampler "
            f"(below: a point mass at 0; above: the proposal and the grid lose exactness)"
        )
    return v


def _check_grid_exponent(g: Any) -> int:
    g = check_int(g, "grid_exponent", minimum=-64)
    if g > 64:
        raise ValueError(f"grid_exponent must be <= 64, got {g}")
    return g


def _normaliser(sigma: float) -> float:
    r""":math:`\sum_{z} e^{-z^2/(2\sigma^2)}`: direct for small ``sigma``, else its Poisson-summed
    form :math:`\sqrt{2\pi}\sigma \sum_m e^{-2\pi^2\sigma^2 m^2}` (Jacobi), both to float rounding."""
    if sigma < _THETA_SIGMA:
        k = np.arange(1, math.ceil(39.0 * sigma) + 2, dtype=np.float64)
        return 1.0 + 2.0 * math.fsum(np.exp(-(k * k) / (2.0 * sigma * sigma)).tolist())
    m = np.arange(1, _THETA_TERMS + 1, dtype=np.float64)
    return math.sqrt(2.0 * math.pi) * sigma * (1.0 + 2.0 * float(np.exp(-2.0 * math.pi**2 * sigma**2 * m * m).sum()))


def _acceptance_rate(sigma: float, s: int, T: int) -> float:
    r"""Pr(a proposal is kept) :math:`= \tanh(a/2)\, e^{-a^2\sigma^2/2} \sum_z e^{-z^2/(2\sigma^2)}`."""
    a = math.ldexp(s, -T)
    return math.tanh(a / 2.0) * math.exp(-((a * sigma) ** 2) / 2.0) * _normaliser(sigma)


# -- public functions ------------------------------------------------------------------------------------
def discrete_gaussian(rng: np.random.Generator, sigma: float, size: int) -> np.ndarray:
    r"""``size`` draws of the discrete Gaussian :math:`\mathcal{N}_{\mathbb{Z}}(0, \sigma^2)` (int64).

    :math:`\Pr(Z = z) \propto e^{-z^2/(2\sigma^2)}` on the integers, by CKS Algorithm 3 (see the
    module): discrete Laplace proposals at :math:`a = s / 2^T \approx 1 / (\lfloor\sigma\rfloor + 1)`,
    drawn exactly, kept with probability :math:`e^{-(|y| - a\sigma^2)^2 / (2\sigma^2)}` built from
    that same realised ``a``. Exact except for the float64 :math:`e^{-f}`,
    :math:`f \in [0, 1)`, of each acceptance (relative error :math:`\le 2^{-51}`, the integer
    part :math:`e^{-\lfloor x \rfloor}` being decided exactly): the realised pmf is within a
    factor :math:`e^{\pm 2^{-50}}` of the discrete Gaussian at EVERY integer, so an RDP bound
    :math:`\varepsilon(\alpha)` of the ideal mechanism holds up to
    :math:`+\frac{\alpha}{\alpha-1} 2^{-50}` (:math:`\le 2^{-49}` for :math:`\alpha \ge 2`) and an
    :math:`(\varepsilon, \delta)` bound up to :math:`(\varepsilon + 2^{-50}, e^{2^{-50}}\delta)`.

    Added to an integer query of L2 sensitivity :math:`\Delta` (independently per coordinate) the
    ideal mechanism is :math:`\Delta^2 / (2\sigma^2)`-zCDP: CKS Theorem 4 (one coordinate; RDP
    :math:`(\alpha, \alpha\Delta^2/(2\sigma^2))` for every :math:`\alpha > 1`, the continuous
    Gaussian's curve), and Renyi divergences of product laws add over the coordinates.

    Vectorised in batches of proposals (numba-compiled discrete Laplace and acceptance kernels);
    the accepted proposals are kept in order until ``size`` are found. ``sigma`` in
    [:data:`MIN_SIGMA`, :data:`MAX_SIGMA`]; same generator state, same output.
    """
    rng = check_generator(rng)
    sigma = _check_sigma(sigma)
    size = check_int(size, "size", minimum=0)
    out = np.empty(size, dtype=np.int64)
    if size == 0:
        return out
    t = math.floor(sigma) + 1
    s, T = dyadic_parameter(1.0 / t)  # the REALISED proposal parameter a = s / 2^T <= 1 / t
    rate = _acceptance_rate(sigma, s, T)
    stream = WordStream(rng)
    filled = 0
    while filled < size:
        need = size - filled
        m = min(_MAX_BATCH, int(need / rate * 1.01) + 4 * math.isqrt(need) + 16)
        y = stream.discrete_laplace(s, T, m)
        kept = y[_accept(y, sigma, s, T, stream, rng)]
        take = min(kept.size, need)
        out[filled : filled + take] = kept[:take]
        filled += take
    return out


def discrete_gaussian_pmf(z: Any, sigma: float) -> np.ndarray:
    r""":math:`\Pr(Z = z) = e^{-z^2/(2\sigma^2)} / \sum_k e^{-k^2/(2\sigma^2)}` (float64, broadcast
    over integer ``z``); the normaliser is summed directly for :math:`\sigma < 2` and by its Jacobi
    (Poisson-summed) series above, both to float64 rounding."""
    sigma = check_epsilon(sigma, "sigma")
    z = np.asarray(z, dtype=np.float64)
    return np.exp(-(z * z) / (2.0 * sigma * sigma)) / _normaliser(sigma)


def discrete_gaussian_variance(sigma: float) -> float:
    r""":math:`\mathrm{Var}[Z]` of :math:`\mathcal{N}_{\mathbb{Z}}(0, \sigma^2)` (at most
    :math:`\sigma^2`; equal to it within :math:`10^{-30}` relative for :math:`\sigma \ge 2`)."""
    sigma = check_epsilon(sigma, "sigma")
    if sigma < _THETA_SIGMA:
        k = np.arange(1, math.ceil(39.0 * sigma) + 2, dtype=np.float64)
        w = np.exp(-(k * k) / (2.0 * sigma * sigma))
        return 2.0 * math.fsum((k * k * w).tolist()) / _normaliser(sigma)
    # sigma^2 (1 + sigma theta'/theta), theta(sigma) = sum_m e^{-2 pi^2 sigma^2 m^2} (m over Z)
    m = np.arange(1, _THETA_TERMS + 1, dtype=np.float64)
    e = np.exp(-2.0 * math.pi**2 * sigma**2 * m * m)
    theta = 1.0 + 2.0 * float(e.sum())
    return sigma * sigma * (1.0 - 8.0 * math.pi**2 * sigma**2 * float((m * m * e).sum()) / theta)


def grid_sensitivity(delta_l2: float, coords: int, grid_exponent: int = 20) -> float:
    r"""The L2 sensitivity of the query rounded to the grid :math:`2^{-g}`:
    :math:`\Delta + 2^{-g}\sqrt{c}`, rounded up.

    ``coords`` (``c``) is the number of coordinates one neighbouring change can move: rounding
    moves each coordinate by at most :math:`\gamma/2`, and a coordinate the change leaves alone
    rounds identically on both sides, so the rounded vectors differ by at most
    :math:`\Delta + \gamma\sqrt{c}` in L2.
    """
    delta = check_epsilon(delta_l2, "delta_l2", allow_zero=True)
    coords = check_int(coords, "coords", minimum=0)
    grid_exponent = _check_grid_exponent(grid_exponent)
    root = math.sqrt(coords)
    if math.isqrt(coords) ** 2 != coords:
        root = epsilon_upper(root)  # sqrt is correctly rounded; never understate it
    return sum_upper(delta, math.ldexp(root, -grid_exponent))


def gaussian_on_grid(values: Any, sigma: float, rng: np.random.Generator, grid_exponent: int = 20) -> np.ndarray:
    r"""``values`` plus discrete Gaussian noise on the public grid :math:`\gamma = 2^{-g}` (float64,
    the shape of ``values``).

    Each value is rounded to the nearest grid point (half to even: ``np.rint`` of
    :math:`v 2^{g}`), and :math:`\gamma Z` is added with
    :math:`Z \sim \mathcal{N}_{\mathbb{Z}}(0, (\sigma/\gamma)^2)` from
    :func:`discrete_gaussian` (``rng`` is consumed exactly as
    ``discrete_gaussian(rng, sigma * 2**g, values.size)`` would; ``values`` in row-major order).
    Every output :math:`(k + Z)\gamma`, :math:`|k + Z| \le 2^{53}`, is an exact float64.

    Privacy: if the real query has L2 sensitivity :math:`\Delta` and a neighbouring change moves
    at most ``coords`` coordinates, the rounded query has sensitivity at most
    ``grid_sensitivity(Delta, coords, g)`` :math:`= \Delta + \gamma\sqrt{\mathrm{coords}}`, and
    the release is :math:`\rho`-zCDP with
    :math:`\rho = \mathrm{grid\_sensitivity}^2 / (2\sigma^2)` (on the integer scale: sensitivity
    and scale both divided by :math:`\gamma`; CKS Theorem 4 per coordinate, Renyi divergences
    adding over independent coordinates), i.e. RDP :math:`(\alpha, \alpha\rho)` for every
    :math:`\alpha > 1`, the continuous Gaussian's curve, up to the slack of
    :func:`discrete_gaussian` (:math:`+\frac{\alpha}{\alpha-1}2^{-50}`).

    ``sigma / gamma`` must lie in [:data:`MIN_SIGMA`, :data:`MAX_SIGMA`]; the scaled values must
    satisfy :math:`|v| 2^{g} \le 2^{52}` (a ``ValueError`` otherwise); non-finite values are refused.
    """
    rng = check_generator(rng)
    sigma = check_epsilon(sigma, "sigma")
    grid_exponent = _check_grid_exponent(grid_exponent)
    arr = np.asarray(values)
    if arr.dtype.kind not in "biuf":
        raise TypeError(f"values must hold real numbers, got dtype {arr.dtype}")
    arr = arr.astype(np.float64)
    if not np.isfinite(arr).all():
        raise ValueError("values must be finite (NaN or infinity found)")
    scale = math.ldexp(sigma, grid_exponent)  # sigma / gamma, exact (or inf, refused below)
    if not (MIN_SIGMA <= scale <= MAX_SIGMA):
        raise ValueError(
            f"sigma / 2^-grid_exponent = {scale:g} (sigma = {sigma:g}, grid_exponent = {grid_exponent}) "
            f"is outside [2^-10, 2^40], the discrete Gaussian sampler's range; choose another grid"
        )
    k = np.rint(np.ldexp(arr, grid_exponent))  # exact scaling, then the nearest grid point
    if k.size and float(np.abs(k).max()) > 2.0**52:
        raise ValueError(
            f"|values| * 2^{grid_exponent} must be <= 2^52 for exact grid arithmetic; got "
            f"{float(np.abs(arr).max()):g} (use a coarser grid)"
        )
    total = k.astype(np.int64).reshape(-1) + discrete_gaussian(rng, scale, arr.size)
    if total.size and int(np.abs(total).max()) > _TWO53:  # |Z| > 2^52: never in practice
        raise OverflowError("a noisy grid value exceeds 2^53 grid steps and is not an exact float64")
    return np.ldexp(total.astype(np.float64), -grid_exponent).reshape(arr.shape)
