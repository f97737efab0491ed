r"""The exact binomial: the NUMBER of successes of ``n`` Bernoulli(``p``) decisions, with
:math:`\Pr(K = 0)` realised exactly however small ``n p`` is (:func:`binomial_exact`).

DPRR, Warner RR and EdgeRand draw their numbers of false reports or edges here (placed afterwards
uniformly without replacement, :mod:`privgraph.mechanisms.sampling`); every decision that carries
a privacy ratio is one :func:`~privgraph.mechanisms.sampling.bernoulli_exact` draw.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from privgraph.mechanisms.base import check_generator
from privgraph.mechanisms.sampling import bernoulli_exact

__all__ = ["binomial_exact", "binomial_nonzero_probability", "MAX_BINOMIAL_TRIALS"]

# the float64 grid of numpy's uniforms (multiples of 2^-53)
_TWO53 = 2.0**53
_ULP53 = 2.0**-53
#: binomial_exact draws K | K >= 1 by a chain of exact Bernoulli decisions up to this mean n p
#: (and whenever p < 2^-53), by numpy's binomial on the 2^-53 grid part of p above it.
_CHAIN_MAX_MEAN = 0.25
#: The largest number of trials: every count is then an exact float64 (so is n p's factor n).
MAX_BINOMIAL_TRIALS = 2**53
# Series terms below this fraction of the running sum are dropped (relative 2^-59).
_SERIES_TOL = 2.0**-60
# Guards: hitting any of them means a broken precondition, not bad luck (a redraw of numpy's
# count is needed with probability <= e^-1/4 = 0.78 per round: 1000 rounds fail w.p. 1e-108).
_MAX_SERIES_TERMS = 400
_MAX_CHAIN_STEPS = 2000
_MAX_REDRAWS = 1000


def _binomial_args(n: Any, p: Any) -> tuple[np.ndarray, np.ndarray, tuple[int, ...]]:
    """Validated, broadcast, flattened ``(n, p)`` (int64, float64) and their common shape."""
    n_arr = np.asarray(n)
    p_arr = np.asarray(p)
    if n_arr.size and not np.issubdtype(n_arr.dtype, np.integer):
        raise TypeError(f"n must hold integers, got dtype {n_arr.dtype}")
    if p_arr.size and not (np.issubdtype(p_arr.dtype, np.floating) or np.issubdtype(p_arr.dtype, np.integer)):
        raise TypeError(f"p must hold real numbers, got dtype {p_arr.dtype}")
    n_b, p_b = np.broadcast_arrays(n_arr.astype(np.int64, copy=False), p_arr.astype(np.float64, copy=False))
    n_flat = np.ascontiguousarray(n_b).reshape(-1)
    p_flat = np.ascontiguousarray(p_b).reshape(-1)
    if n_flat.size and (n_flat.min() < 0 or n_flat.max() > MAX_BINOMIAL_TRIALS):
        raise ValueError(f"n must be in [0, 2^53], got values in [{n_flat.min()}, {n_flat.max()}]")
    if p_flat.size and not np.all((p_flat >= 0.0) & (p_flat <= 1.0)):  # also refuses NaN
        raise ValueError("p must be in [0, 1]")
    return n_flat, p_flat, n_b.shape


def _log_zero_probability(n: np.ndarray, p: np.ndarray) -> np.ndarray:
    """``log Pr(K = 0) = n log1p(-p)``; 0 for ``n = 0``, ``-inf`` for ``p = 1``."""
    with np.errstate(divide="ignore", invalid="ignore"):
        log_q = n.astype(np.float64) * np.log1p(-p)
    return np.where(n == 0, 0.0, log_q)  # 0 * log1p(-1) = 0 * -inf


def _nonzero_probability(n: np.ndarray, p: np.ndarray) -> np.ndarray:
    """``1 - (1 - p)^n`` as ``-expm1(n log1p(-p))`` (no cancellation); 0 for ``n = 0``, 1 for ``p = 1``."""
    return -np.expm1(_log_zero_probability(n, p)) + 0.0  # + 0.0: no -0.0


def binomial_nonzero_probability(n: Any, p: Any) -> np.ndarray:
    r""":math:`\Pr(K \ge 1) = 1 - (1 - p)^n` for :math:`K \sim \mathrm{Binomial}(n, p)`, float64.

    Computed as ``-expm1(n * log1p(-p))``: within a few ulps (relative about :math:`2^{-51}`) of
    the exact value for the float ``p`` and integer ``n``, with no cancellation however small
    :math:`n p` is. (numpy's ``exp(n * log(1 - p))`` rounds ``1 - p`` to 1 for
    :math:`p < 2^{-54}`.) :func:`binomial_exact` realises this number exactly for :math:`p \le 1/2`.
    """
    n_flat, p_flat, shape = _binomial_args(n, p)
    return _nonzero_probability(n_flat, p_flat).reshape(shape)


def _ratio_terms(k: np.ndarray, nf: np.ndarray, odds: np.ndarray) -> np.ndarray:
    """``Pr(K = k + 1) / Pr(K = k) = (n - k) / (k + 1) * p / (1 - p)`` (0 from ``k = n`` on)."""
    return np.maximum(nf - k, 0.0) / (k + 1.0) * odds


def _tail_over_pmf(k: np.ndarray, nf: np.ndarray, odds: np.ndarray) -> np.ndarray:
    r""":math:`A_k = \Pr(K > k) / \Pr(K = k) = \rho_k (1 + \rho_{k+1} (1 + \dots))`, ``k >= 1``.

    A series of positive terms (no cancellation), summed until a term falls below
    :math:`2^{-60}` of the sum. Where the chain runs (:math:`n p \le 1`, :math:`p \le 1/2`) every
    ratio :math:`\rho_j = (n - j) p / ((j + 1)(1 - p)) \le 2 / (j + 1) \le 2/3` (``j >= 2``): the
    dropped tail is below :math:`2^{-59}` of the sum, after at most ~25 terms.
    """
    kf = k.astype(np.float64)
    term = _ratio_terms(kf, nf, odds)
    total = term.copy()
    j = kf + 1.0
    live = np.flatnonzero(term > 0.0)
    for _ in range(_MAX_SERIES_TERMS):
        if live.size == 0:
            return total
        term[live] *= _ratio_terms(j[live], nf[live], odds[live])
        total[live] += term[live]
        j[live] += 1.0
        live = live[term[live] > _SERIES_TOL * total[live]]
    raise RuntimeError(f"binomial_exact: the tail series did not converge in {_MAX_SERIES_TERMS} terms")


def _positive_by_chain(nf: np.ndarray, p: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    r"""``K`` given ``K >= 1`` by exact decisions :math:`K \ge k + 1 \mid K \ge k`, ``k = 1, 2, ...``

    Each decision has probability :math:`r_k = A_k / (1 + A_k)` (:func:`_tail_over_pmf`) and is
    drawn with :func:`bernoulli_exact` on the smaller of :math:`r_k` and
    :math:`1 - r_k = 1 / (1 + A_k)`, so both sides are realised exactly (one uniform per step).
    """
    odds = p / (1.0 - p)
    k = np.ones(nf.size, dtype=np.int64)
    active = np.arange(nf.size)
    for _ in range(_MAX_CHAIN_STEPS):
        if active.size == 0:
            return k
        a = _tail_over_pmf(k[active], nf[active], odds[active])
        more = a / (1.0 + a)
        stop = 1.0 / (1.0 + a)
        by_more = more <= stop
        hit = bernoulli_exact(np.where(by_more, more, stop), rng.random(active.size), rng)
        active = active[hit == by_more]  # a hit on `more`, or no hit on `stop`: K >= k + 1
        k[active] += 1
    raise RuntimeError(f"binomial_exact: the chain did not stop in {_MAX_CHAIN_STEPS} steps")


def _positive_by_numpy(n: np.ndarray, p: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    r"""``K`` given ``K >= 1`` for :math:`p \ge 2^{-53}`: numpy's binomial on the grid part of ``p``.

    :math:`p = g + r`, :math:`g = \lfloor 2^{53} p \rfloor 2^{-53}`: on this grid ``1 - g`` is an
    exact float64, so numpy's :math:`(1 - g)^n` = ``exp(n * log(1 - g))`` is accurate. A trial
    succeeds with :math:`g`, else with :math:`r / (1 - g)`: :math:`K = K_1 + K_2`,
    :math:`K_1 \sim \mathrm{Binomial}(n, g)` (numpy), :math:`K_2 \sim
    \mathrm{Binomial}(n - K_1, r / (1 - g))` (:func:`binomial_exact`, :math:`r / (1 - g) <
    2^{-52}`). Draws with :math:`K = 0` are drawn again (each round keeps a draw with probability
    >= :math:`1 - e^{-1/4}` here).
    """
    g = np.floor(p * _TWO53) * _ULP53
    residual = (p - g) / (1.0 - g)  # p - g exact (Sterbenz); < 2^-53 / (1 - g) <= 2^-52
    k = np.zeros(n.size, dtype=np.int64)
    todo = np.arange(n.size)
    for _ in range(_MAX_REDRAWS):
        if todo.size == 0:
            return k
        k1 = rng.binomial(n[todo], g[todo]).astype(np.int64)
        k[todo] = k1 + _binomial_low(n[todo] - k1, residual[todo], rng)
        todo = todo[k[todo] == 0]
    raise RuntimeError(f"binomial_exact: numpy's binomial returned 0 {_MAX_REDRAWS} times")


def binomial_exact(n: Any, p: Any, rng: np.random.Generator) -> np.ndarray:
    r""":math:`K \sim \mathrm{Binomial}(n, p)` with :math:`\Pr(K = 0)` realised exactly (and, for
    small :math:`n p`, every outcome); vectorised (``n`` and ``p`` broadcast), randomness only
    from ``rng``.

    The count of ``n`` independent Bernoulli(``p``) decisions, e.g. the number of false reports
    of a randomized response (placed afterwards uniformly without replacement). numpy's
    ``Generator.binomial`` computes :math:`(1 - p)^n` as ``exp(n * log(1 - p))``: for
    :math:`p < 2^{-54}` it rounds ``1 - p`` to 1 and returns 0 with probability 1, and for
    :math:`n p \lesssim 10^{-16}` its one 53-bit uniform cannot resolve :math:`\Pr(K \ge 1)`
    anyway; at the budgets where a flip probability is about :math:`e^{-\varepsilon}` the realised
    law is then not the one the DP proof assumes. Here, with :math:`p \le 1/2` (for
    :math:`p > 1/2`, :math:`K = n - \mathrm{Binomial}(n, 1 - p)`, ``1 - p`` exact) and
    :math:`\lambda = n p`:

    1. :math:`K \ge 1` is decided by :func:`bernoulli_exact` on
       :math:`q_0 = 1 - (1 - p)^n` (:func:`binomial_nonzero_probability`), or on
       :math:`z_0 = (1 - p)^n` when that is smaller (``n p > log 2``).
    2. :math:`K \mid K \ge 1`:

       - :math:`\lambda \le 1/4` or :math:`p < 2^{-53}` (then :math:`\lambda < 1`): a chain of
         exact decisions :math:`K \ge k + 1 \mid K \ge k`, each by :func:`bernoulli_exact` on
         :math:`r_k = \Pr(K > k) / \Pr(K \ge k)` or on :math:`1 - r_k`, whichever is smaller,
         :math:`r_k` from a series of positive terms;
       - otherwise numpy's binomial on the :math:`2^{-53}`-grid part :math:`g` of ``p`` (where
         numpy's :math:`(1 - g)^n` is accurate) plus an exact binomial of the residual, drawn
         again while 0 (:func:`_positive_by_numpy`).

    Precision (of the law realised for the float64 ``p`` and the integer ``n`` given):

    - :math:`\Pr(K \ge 1)` and :math:`\Pr(K = 0)` EXACTLY, for every ``n`` and ``p``: the
      smaller of the float64 :math:`q_0`, :math:`z_0` is realised exactly by ``bernoulli_exact``
      (to :math:`2^{-106}` absolute when below :math:`2^{-54}`), the other as its exact
      complement; :math:`q_0` is within relative :math:`2^{-51}` of the exact
      :math:`1 - (1 - p)^n`, :math:`z_0` within :math:`(2 \lambda + 2) 2^{-53}` of
      :math:`(1 - p)^n`. This is the decision that
      carries the privacy ratio when :math:`\lambda` is small (:math:`\lambda \approx 10^{-20}` at
      :math:`\varepsilon = 45`, where numpy realises :math:`\Pr(K \ge 1) = 0`).
    - Chain (:math:`\lambda \le 1/4`): every :math:`\Pr(K = k)` is the product of :math:`q_0`,
      :math:`r_1, \dots, r_{k-1}` and :math:`1 - r_k`, each a float64 within relative
      :math:`2^{-46}` of its exact value and realised exactly (to :math:`2^{-106}` absolute when
      below :math:`2^{-54}`): a relative error below :math:`(k + 1) 2^{-46}` however improbable
      the outcome (while its factors stay above :math:`2^{-54}`).
    - numpy path (:math:`\lambda > 1/4`): :math:`\Pr(K = k \mid K \ge 1)` to about
      :math:`(2 \lambda + 5 k + 2) 2^{-53} / q_0` absolute for :math:`\lambda \le 30` (numpy's
      inversion: one 53-bit uniform; its support stops at :math:`\lambda + 10 \sqrt{\lambda + 1}`,
      the dropped mass, below :math:`10^{-13}`, is renormalised), and for :math:`\lambda > 30` (BTPE,
      one 53-bit uniform against the pmf ratio to the mode) to a relative error about
      :math:`2^{-53} \Pr(\mathrm{mode}) / \Pr(K = k)`, below :math:`10^{-8}` within 6 standard
      deviations. Outcomes of conditional probability below about :math:`2^{-50}` (far tails,
      total mass below :math:`10^{-13}`) are not realised to any relative precision there: the
      floor of every float64 sampler.

    Cost: one uniform per draw when :math:`K = 0` (a second on a tie, probability
    :math:`2^{-53}`), a ``log1p`` and an ``expm1``; a draw with :math:`K \ge 1` (probability
    :math:`q_0`) takes one more uniform per chain step, or about :math:`1 / q_0` numpy binomial
    draws and an exact one of the (tiny) residual. For the small :math:`\lambda` of large budgets
    that is about one uniform per draw. Time: 2.5-6 times numpy's binomial on 10^6 draws alone
    (most at n p near 1), not measurable inside DPRR, Warner RR or EdgeRand.

    Args:
        n (array_like): int in ``[0, 2^53]``, the numbers of trials.
        p (array_like): float in ``[0, 1]``, the success probabilities (broadcast with ``n``).
        rng (np.random.Generator): the only source of randomness.

    Returns:
        np.ndarray: int64 of the broadcast shape of ``n`` and ``p`` (0-d for scalars).
    """
    rng = check_generator(rng)
    n_flat, p_flat, shape = _binomial_args(n, p)
    flip = p_flat > 0.5
    if not flip.any():
        return _binomial_low(n_flat, p_flat, rng).reshape(shape)
    pp = np.where(flip, 1.0 - p_flat, p_flat)  # 1 - p exact for p >= 1/2
    k = _binomial_low(n_flat, pp, rng)
    return np.where(flip, n_flat - k, k).reshape(shape)


def _binomial_low(n_flat: np.ndarray, pp: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """:func:`binomial_exact` for validated flat int64 ``n`` and float64 ``pp <= 1/2``."""
    log_zero = n_flat * np.log1p(-pp)  # log Pr(K = 0), finite: pp <= 1/2
    prob = -np.expm1(log_zero) + 0.0  # Pr(K >= 1) (+ 0.0: no -0.0) ...
    by_zero = np.flatnonzero(prob > 0.5)
    prob[by_zero] = np.exp(log_zero[by_zero])  # ... or Pr(K = 0) where that is the smaller one
    k = bernoulli_exact(prob, rng.random(n_flat.size), rng).astype(np.int64)  # 1: K >= 1 ...
    k[by_zero] ^= 1  # ... or K = 0
    pos = np.flatnonzero(k)
    if pos.size:
        nf = n_flat[pos].astype(np.float64)
        chain = (nf * pp[pos] <= _CHAIN_MAX_MEAN) | (pp[pos] < _ULP53)
        if chain.any():
            k[pos[chain]] = _positive_by_chain(nf[chain], pp[pos[chain]], rng)
        if not chain.all():
            rest = pos[~chain]
            k[rest] = _positive_by_numpy(n_flat[rest], pp[rest], rng)
    return k
