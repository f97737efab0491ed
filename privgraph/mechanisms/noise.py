r"""Exact discrete Laplace noise: the two-sided geometric law, sampled with integers only.

Integer values that a mechanism releases or sizes its output by (degrees, edge counts, the
``e_r`` of CalculateNoisyProb, the Laplace feature mechanism's grid points) take discrete Laplace
noise, :math:`\Pr(Z = z) \propto e^{-a |z|}`, not floating-point Laplace, whose low bits leak
(Mironov, "On significance of the least significant bits for differential privacy", CCS 2012;
ARCHITECTURE.md, Privacy correctness).

Exactness. :func:`discrete_laplace` realises the law EXACTLY, for the dyadic parameter
:math:`a' = s / 2^T \le a` of :func:`dyadic_parameter` (:math:`a'` is :math:`a` itself for every
float :math:`a \ge 2^{-10}`; below, within a relative :math:`1 / (a\, 2^{62})`, i.e. :math:`2^{-42}`
at :math:`a = 2^{-20}`): it is
Algorithm 2 of C. L. Canonne, G. Kamath and T. Steinke, "The Discrete Gaussian for Differential
Privacy", NeurIPS 2020 (arXiv:2004.00010), with the Bernoulli(:math:`e^{-\gamma}`) of their
Algorithm 1, on uniformly random 64-bit words of the generator (numpy's full-range ``integers``,
i.e. the bit generator's raw output). Every decision is an integer comparison: no floating-point
number is computed, so no float rounding enters the output law. A smaller :math:`a'` means more
noise, so the privacy loss is never understated.

Randomness layout: 64-bit words drawn from the generator in blocks (:class:`WordStream`), consumed
in order; each draw starts at a word boundary. A draw that needs more words than the block holds
is replayed from its first word with a longer block, so the output is the same function of the
word stream whatever the block sizes (and, for a :class:`WordStream` kept across calls, whatever
the chunking of the caller). Words drawn and not consumed when a stream is dropped are lost.

Runtime: a compiled (numba) loop over the draws, about 6 words and 60-80 ns per draw (some 15-20
times one vectorised PCG64 uniform: the price of exactness); the former sampler
(``rng.geometric(1 - e^-a) - rng.geometric(...)``) inverted ONE 53-bit uniform per geometric and
realised the step probability :math:`e^{-a}` only to an absolute :math:`2^{-53}` (tails below
:math:`2^{-53}` not at all).
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import numba
import numpy as np

from privgraph.params import check_epsilon, check_int
from privgraph.mechanisms.base import check_generator

__all__ = [
    "discrete_laplace",
    "discrete_laplace_dyadic",
    "discrete_laplace_pmf",
    "discrete_laplace_variance",
    "dyadic_parameter",
    "dyadic_value",
    "WordStream",
    "MIN_DYADIC_NUMERATOR",
]

#: ``s >= 2^10`` in :func:`dyadic_parameter`: the realised parameter ``s / 2^T`` is then within a
#: relative 2^-10 of the requested one (and equal to it for every float >= 2^-10).
MIN_DYADIC_NUMERATOR = 1 << 10
_MAX_T = 62  # U < 2^T must fit an int64 with room for U + r V (see _dlap_kernel)
_MAX_S = 1 << 53
# Draws whose geometric part V exceeds this (probability e^-512) are finished in Python integers.
_V_MAX = 512
# Words per draw, about 6 on average; the first block is sized for this many.
_WORDS_PER_DRAW = 8
_MAX_BLOCK = 1 << 18


def dyadic_parameter(a: float) -> tuple[int, int]:
    r"""The dyadic parameter ``(s, T)``, :math:`s / 2^T \le a`, that :func:`discrete_laplace_dyadic` uses.

    :math:`T = \min(62, 52 - \lfloor \log_2 a \rfloor)` and :math:`s = \lfloor a 2^T \rfloor`
    (integer arithmetic on the float's exact value), so :math:`2^{52} \le s < 2^{53}` when
    :math:`T < 62`: :math:`s / 2^T = a` exactly for every float :math:`a \ge 2^{-10}`, and within a
    relative :math:`1/s` below it otherwise. Refused when :math:`s < 2^{10}`
    (:math:`a < 2^{-52}`: the rounding would add more than 0.1 % to the noise scale) or
    :math:`a > 2^{51}`.
    """
    a = check_epsilon(a, "a")
    if a > 2.0**51:
        raise ValueError(f"a = {a:g} is too large for the discrete Laplace sampler (at most 2^51)")
    num, den = a.as_integer_ratio()
    T = min(_MAX_T, 52 - math.floor(math.log2(a)))
    # floor(log2) of a float can be off by one near powers of two: fix s into [2^52, 2^53)
    while T < _MAX_T and (num << T) // den < (1 << 52):
        T += 1
    while (num << T) // den >= _MAX_S:
        T -= 1
    s = (num << T) // den
    if s < MIN_DYADIC_NUMERATOR:
        raise ValueError(
            f"a = {a:g} is too small for the discrete Laplace sampler: its dyadic form s / 2^{T} "
            f"has s = {s} < 2^10 (the noise scale would be rounded by more than 0.1 %)"
        )
    return s, T


# -- the compiled kernel ---------------------------------------------------------------------------
@numba.njit(cache=True, inline="always")
def _one_in_k(k, words, wi, sb, ns):  # pragma: no cover - compiled
    """Bernoulli(1/k), exactly: a uniform in [0, k) on ceil(log2 k) bits of the small-bit
    reservoir ``sb`` (``ns`` bits left; refilled from ``words[wi]``), by rejection; true when 0.

    Returns ``(hit, wi, sb, ns, ok)``; ``ok`` is false when the words ran out.
    """
    bb = 1
    while (np.int64(1) << bb) < k:
        bb += 1
    while True:
        if ns < bb:
            if wi >= words.size:
                return False, wi, sb, ns, False
            sb = words[wi]
            wi += 1
            ns = 64
        z = np.int64(sb & np.uint64((np.int64(1) << bb) - 1))
        sb >>= np.uint64(bb)
        ns -= bb
        if z < k:
            return z == 0, wi, sb, ns, True


@numba.njit(cache=True)
def _dlap_kernel(words, wi, s, T, v_max, out, i0):  # pragma: no cover - compiled
    """Draws ``out[i0:]`` from ``words[wi:]`` (CKS 2020, Alg. 2 with t = 2^T).

    Returns ``(i, wi, status, u, v, sign)``: status 0, all drawn; 1, the words ran out during
    draw ``i``, which must be replayed from word ``wi`` (its first) with more words; 2, draw
    ``i`` has ``V = v > v_max``: ``(u, v, sign)`` are its parts and ``wi`` the next word.
    """
    t = np.int64(1) << T
    q = t // s
    r = t % s
    sh = np.uint64(64 - T)
    nw = words.size
    n = out.size
    i = i0
    while i < n:
        w0 = wi
        sb = np.uint64(0)  # the small-bit reservoir (for Bernoulli(1/k) and the sign)
        ns = 0
        fail = False
        while True:
            # U uniform in [0, t)
            if wi >= nw:
                fail = True
                break
            u = np.int64(words[wi] >> sh)
            wi += 1
            # D ~ Bernoulli(exp(-U / t)) (CKS Alg. 1, gamma = U / t <= 1): the first k with
            # A_k = 0, A_k ~ Bernoulli(gamma / k) = Bernoulli(1 / k) AND Bernoulli(U / t); D = k odd
            k = 1
            while True:
                if k > 1:
                    hit, wi, sb, ns, ok = _one_in_k(k, words, wi, sb, ns)
                    if not ok:
                        fail = True
                    if fail or not hit:
                        break
                if wi >= nw:
                    fail = True
                    break
                rr = np.int64(words[wi] >> sh)  # Bernoulli(U / t): a uniform T-bit rr < U
                wi += 1
                if rr >= u:
                    break
                k += 1
            if fail:
                break
            if (k & 1) == 0:
                continue  # rejected: redraw U
            # V ~ Geometric(e^-1): the number of successes of Bernoulli(e^-1) (Alg. 1, gamma = 1)
            v = np.int64(0)
            while True:
                k = 2
                while True:
                    hit, wi, sb, ns, ok = _one_in_k(k, words, wi, sb, ns)
                    if not ok:
                        fail = True
                    if fail or not hit:
                        break
                    k += 1
                if fail or (k & 1) == 0:
                    break
                v += 1
            if fail:
                break
            # the sign B ~ Bernoulli(1/2)
            if ns < 1:
                if wi >= nw:
                    fail = True
                    break
                sb = words[wi]
                wi += 1
                ns = 64
            sg = np.int64(sb & np.uint64(1))
            sb >>= np.uint64(1)
            ns -= 1
            if v > v_max:
                return i, wi, 2, u, v, sg
            # Y = floor((U + t V) / s) without overflow: t = q s + r, U < 2^62, r < 2^53, V <= 512
            y = v * q + (u + r * v) // s
            if sg == 1 and y == 0:
                continue  # rejected: -0 would count 0 twice
            out[i] = -y if sg == 1 else y
            break
        if fail:
            return i, w0, 1, np.int64(0), np.int64(0), np.int64(0)
        i += 1
    return i, wi, 0, np.int64(0), np.int64(0), np.int64(0)


class WordStream:
    """Uniform 64-bit words from a generator, drawn in blocks and consumed in order.

    Keep one stream across the chunks of one release: the words a chunk leaves are used by the
    next, so the output does not depend on the chunking. Only the generator passed in is used.
    """

    def __init__(self, rng: np.random.Generator) -> None:
        self.rng = check_generator(rng)
        self._words = np.zeros(0, dtype=np.uint64)
        self._pos = 0

    def _refill(self, want: int) -> None:
        fresh = self.rng.integers(0, 2**64 - 1, size=want, dtype=np.uint64, endpoint=True)
        self._words = np.concatenate([self._words[self._pos :], fresh])
        self._pos = 0

    def discrete_laplace(self, s: int, T: int, size: int, *, v_max: int = _V_MAX) -> np.ndarray:
        """``size`` exact draws of :math:`\\Pr(Z = z) \\propto e^{-|z| s / 2^T}` (int64), see the module."""
        s = check_int(s, "s", minimum=1)
        T = check_int(T, "T", minimum=1)
        size = check_int(size, "size", minimum=0)
        if T > _MAX_T or s >= _MAX_S or (1 << T) // s > (1 << 52):
            raise ValueError(f"(s, T) = ({s}, {T}) is outside the sampler's range (use dyadic_parameter)")
        v_max = check_int(v_max, "v_max", minimum=0)
        if v_max > _V_MAX:
            raise ValueError(f"v_max must be <= {_V_MAX} (int64 overflow)")
        out = np.empty(size, dtype=np.int64)
        i = 0
        while i < size:
            if self._words.size - self._pos < 2 * _WORDS_PER_DRAW:
                self._refill(min(_MAX_BLOCK, _WORDS_PER_DRAW * (size - i) + 64))
            i, wi, status, u, v, sg = _dlap_kernel(self._words, self._pos, s, T, v_max, out, i)
            self._pos = int(wi)
            if status == 1:  # replay draw i from its first word with more words
                more = max(self._words.size - self._pos, 64)
                self._refill(min(_MAX_BLOCK, 2 * more + _WORDS_PER_DRAW * (size - i)))
            elif status == 2:  # a geometric part beyond v_max: finish the draw in Python ints
                y = (int(u) + (1 << T) * int(v)) // s
                if y >= 1 << 62:
                    raise OverflowError("a discrete Laplace draw does not fit an int64")
                if not (sg == 1 and y == 0):
                    out[i] = -y if sg == 1 else y
                    i += 1
                # else rejected: draw i starts afresh at the next word
        return out


# -- public functions ------------------------------------------------------------------------------
def discrete_laplace_dyadic(rng: np.random.Generator | WordStream, s: int, T: int, size: int) -> np.ndarray:
    r"""Exact draws of :math:`\Pr(Z = z) = \tanh(a/2)\, e^{-a |z|}`, :math:`a = s / 2^T` (int64 ``[size]``).

    Canonne, Kamath and Steinke (NeurIPS 2020), Algorithm 2 with :math:`t = 2^T`: ``U`` uniform
    in :math:`[0, t)` kept with probability :math:`e^{-U/t}` (Algorithm 1), ``V`` geometric with
    :math:`\Pr(V \ge v) = e^{-v}`, so :math:`X = U + tV` has :math:`\Pr(X = x) \propto e^{-x/t}`;
    :math:`Y = \lfloor X / s \rfloor` has :math:`\Pr(Y = y) \propto e^{-ys/t}`; a fair sign, with
    :math:`-0` rejected. ``rng`` is a Generator or a :class:`WordStream` (to share leftover words
    across calls).
    """
    stream = rng if isinstance(rng, WordStream) else WordStream(rng)
    return stream.discrete_laplace(s, T, size)


def discrete_laplace(rng: np.random.Generator, epsilon: float, size: int) -> np.ndarray:
    r"""Two-sided geometric noise, :math:`\Pr(Z = z) \propto e^{-\epsilon' |z|}`, as int64 ``[size]``.

    Added to a count of sensitivity 1 it gives pure :math:`\epsilon`-DP (for sensitivity
    :math:`\Delta`, pass :math:`\epsilon / \Delta`). Sampled EXACTLY (integer arithmetic on random
    words, see the module) at :math:`\epsilon' = s / 2^T \le \epsilon` of
    :func:`dyadic_parameter`: :math:`\epsilon' = \epsilon` for every float
    :math:`\epsilon \ge 2^{-10}`, within a relative :math:`2^{-42}` for
    :math:`\epsilon \ge 2^{-20}`.
    """
    rng = check_generator(rng)
    eps = check_epsilon(epsilon, "epsilon")
    size = check_int(size, "size", minimum=0)
    s, T = dyadic_parameter(eps)
    return WordStream(rng).discrete_laplace(s, T, size)


def discrete_laplace_pmf(z: Any, a: float) -> np.ndarray:
    r"""The exact law :math:`\Pr(Z = z) = \tanh(a/2)\, e^{-a|z|}` (float64, broadcast over ``z``)."""
    a = check_epsilon(a, "a")
    z = np.asarray(z)
    return math.tanh(a / 2.0) * np.exp(-a * np.abs(z).astype(np.float64))


def discrete_laplace_variance(a: float) -> float:
    r""":math:`\mathrm{Var}[Z] = 2 e^{-a} / (1 - e^{-a})^2 = 1 / (2 \sinh^2(a/2))`."""
    a = check_epsilon(a, "a")
    sh = math.sinh(a / 2.0)
    return 1.0 / (2.0 * sh * sh)


def dyadic_value(s: int, T: int) -> Fraction:
    """``s / 2^T`` as an exact fraction (for exact budget checks)."""
    return Fraction(s, 1 << T)
