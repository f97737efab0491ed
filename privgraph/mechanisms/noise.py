r"""Exact discrete Laplace noise: the two-sided geometric law, sampled with integers only.

Integer values that a mechanism releases or sizes its output by (degrees, edge counts, the
``e_r`` of CalculateNoisyProb, the Laplace feature mechanism's grid points) take discrete Laplace
noise, :math:`\Pr(Z = z) \propto e^{-a |z|}`, not floating-point Laplace, whose low bits leak
(Mironov, "On significance of the least significant bits for differential privacy", CCS 2012;
ARCHITECTURE.md, Privacy correctness).

Exactness. :func:`discrete_laplace` realises the law EXACTLY, for the dyadic parameter
:math:`a' = s / 2^T \le a` of :func:`dyadic_parameter` (:math:`a'` is :math:`a` itself for every
float :math:`a \ge 2^{-10}`; below, within a relative :math:`1 / (a\, 2^{62})`, i.e. :math:`2^{-42}`
at :math:`a = 2^{-20}`). With :math:`q = e^{-a}`, :math:`\Pr(Z = 0) = (1 - q) / (1 + q)` and
:math:`|Z| - 1`, given :math:`Z \ne 0`, is geometric, :math:`\Pr(Y \ge y) = q^y`, with a fair sign.
A geometric's binary digits are independent (the law of the digits is proportional to
:math:`q^y`), so its bytes are too: byte :math:`g`, :math:`V_g \in [0, 256)`, has
:math:`\Pr(V_g = v) \propto r_g^v`, :math:`r_g = q^{2^{8g}}`; and by memorylessness
:math:`Y \ge 2^{8G}` happens with probability :math:`q^{2^{8G}}` and leaves :math:`Y - 2^{8G}`
with the law of :math:`Y`. A draw is: the trial :math:`Z \ne 0` (probability :math:`2 / (1 + e^a)`);
the trial :math:`Y \ge 2^{8G}` again and again, adding :math:`2^{8G}` each time (:math:`G` of
:func:`digit_groups`: :math:`e^{-a 2^{8G}} \le e^{-6}`); each of the :math:`G` bytes by
inversion of its CDF :math:`F_g(v) = (1 - r_g^{v+1}) / (1 - r_g^{256})`; the sign (one byte's
lowest bit). A uniform :math:`U \in [0, 1)` is the generator's bytes read in order as base-256
digits (of its 64-bit words, numpy's full-range ``integers``, the bit generator's raw output); a
trial is 1 when :math:`U < p`, decided at the first byte that differs from :math:`p`'s digit;
an inversion is the smallest :math:`v` with :math:`U < F_g(v)`, looked up from :math:`U`'s first
two bytes (a table of 65,536 entries) unless they equal the first two digits of some
:math:`F_g(v)` (255 in 65,536), when further bytes decide. The digits are EXACT, read off
rigorous interval enclosures (mpmath's interval arithmetic, :func:`probability_digits`); the
compiled kernel holds the first :data:`TABLE_DIGITS` (128 bits) of each, and a draw whose
comparison ties with all of them (probability about :math:`2^{-112}`) is replayed in Python
with as many digits as it needs. No floating-point number enters a decision, and a smaller
:math:`a'` means more noise, so the privacy loss is never understated.

Randomness layout: 64-bit words drawn from the generator in blocks (:class:`WordStream`), read a
byte at a time (low bytes first), in order, across draws. A draw that runs out of words is
replayed from its first byte with a longer block, so the output is the same function of the
word stream whatever the block sizes (and, for a :class:`WordStream` kept across calls, whatever
the chunking of the caller). Words drawn and not consumed when a stream is dropped are lost.

Runtime: a compiled (numba) loop, about :math:`2G + 3` bytes per draw (:math:`G` = 1 for
:math:`a \ge 0.0235`, 2 down to :math:`a \approx 9 \cdot 10^{-5}`): 1.4 to 5.2 times one
vectorised PCG64 uniform per entry for :math:`a \ge 0.05` and about 9 times below
(``benchmarks/noise.py``). The former sampler (Canonne, Kamath and Steinke, NeurIPS 2020,
Algorithm 2) was exact too and took about 6 words and 25-48 uniforms' time.
"""

from __future__ import annotations

import functools
import math
from fractions import Fraction
from typing import Any

import numba
import numpy as np
from mpmath import iv, libmp

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
    "TABLE_DIGITS",
    "probability_digits",
    "digit_groups",
]

#: ``s >= 2^10`` in :func:`dyadic_parameter`: the realised parameter ``s / 2^T`` is then within a
#: relative 2^-10 of the requested one (and equal to it for every float >= 2^-10).
MIN_DYADIC_NUMERATOR = 1 << 10
_MAX_T = 62
_MAX_S = 1 << 53
#: base-256 digits of each probability in the compiled kernel's table: 128 bits (a trial ties
#: with all of them with probability 2^-128 and is then finished in Python, exactly)
TABLE_DIGITS = 16
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


# -- the probabilities' digits ---------------------------------------------------------------------
def digit_groups(s: int, T: int) -> int:
    """``G``: the fewest bytes (groups of 8 binary digits) of the geometric part such that its
    tail :math:`\\Pr(Y \\ge 2^{8G}) = e^{-a 2^{8G}} \\le e^{-6}` (``a = s / 2^T``)."""
    G = 0
    while s << (8 * G) < 6 << T:
        G += 1
    return G


def _enclosure(key: tuple[int, ...], s: int, T: int) -> Any:
    """A rigorous interval (mpmath.iv, at its current precision) around probability ``key``:
    ``(0,)``, :math:`\\Pr(Z \\ne 0) = 2 / (1 + e^a)`; ``(1, G)``, the tail
    :math:`e^{-a 2^{8G}}`; ``(2, g, v)``, the CDF at ``v`` of digit group ``g``'s value,
    :math:`(1 - r^{v+1}) / (1 - r^{256})` with :math:`r = e^{-a 2^{8g}}`."""
    a = iv.mpf(s) * iv.mpf(2) ** (-T)  # exact: s < 2^53 and a power of two
    if key[0] == 0:
        return 2 / (1 + iv.exp(a))
    if key[0] == 1:
        return iv.exp(-a * 2 ** (8 * key[1]))
    r = iv.exp(-a * 2 ** (8 * key[1]))
    return (1 - r ** (key[2] + 1)) / (1 - r**256)


@functools.lru_cache(maxsize=4096)
def probability_digits(key: tuple[int, ...], s: int, T: int, count: int) -> list[int]:
    """The first ``count`` base-256 digits of probability ``key`` (see :func:`_enclosure`),
    EXACT: read off an interval enclosure whose two ends agree on them (the precision doubles
    until they do; the probabilities are irrational, so they eventually do)."""
    prec = 8 * count + 64
    while True:
        saved = iv.prec
        iv.prec = prec
        try:
            scaled = _enclosure(key, s, T) * iv.mpf(2) ** (8 * count)  # exact scaling
            # the ends' exact floors (libmp on the raw endpoints: no conversion at mp's precision)
            lo, hi = (libmp.to_int(end, "f") for end in scaled._mpi_)
        finally:
            iv.prec = saved
        if lo == hi:
            return [(lo >> (8 * (count - 1 - k))) & 0xFF for k in range(count)]
        prec *= 2


@functools.lru_cache(maxsize=128)
def _tables(s: int, T: int, depth: int) -> tuple[int, np.ndarray, np.ndarray, np.ndarray]:
    """``(G, trials, cdf, first)`` for one parameter: ``trials`` ``uint8 [2, depth]`` the digits
    of :math:`\\Pr(Z \\ne 0)` and of the tail; ``cdf`` ``uint8 [G, 255, depth]`` the digits of
    each group's CDF at 0..254; ``first`` ``int16 [G, 65536]``: for the first two bytes ``W`` of
    the uniform, the group's value when no CDF value's first two digits are ``W`` (then it is
    decided), else ``-(v + 1)`` for the first such ``v``."""
    G = digit_groups(s, T)
    trials = np.array([probability_digits((0,), s, T, depth), probability_digits((1, G), s, T, depth)], np.uint8)
    cdf = np.array([[probability_digits((2, g, v), s, T, depth) for v in range(255)] for g in range(G)],
                   np.uint8).reshape(G, 255, depth)
    first = np.empty((G, 65536), np.int16)
    w = np.arange(65536)
    for g in range(G):
        f16 = cdf[g, :, 0].astype(np.int64) * 256 + (cdf[g, :, 1] if depth > 1 else 0)
        lo = np.searchsorted(f16, w, side="left")  # values whose CDF lies below W / 65536
        tie = (lo < 255) & (f16[np.minimum(lo, 254)] == w)
        first[g] = np.where(tie, -(lo + 1), lo)
    return G, trials, cdf, first


# -- the compiled kernel ---------------------------------------------------------------------------
@numba.njit(cache=True)
def _next_byte(words, wi, nb, cur):  # pragma: no cover - compiled
    """``(byte, wi, nb, cur, ok)``: the next byte of the stream (low bytes of a word first)."""
    if nb == 0:
        if wi >= words.size:
            return np.int64(0), wi, nb, cur, False
        cur = words[wi]
        wi += 1
        nb = 8
    b = np.int64(cur & np.uint64(0xFF))
    return b, wi, nb - 1, cur >> np.uint64(8), True


@numba.njit(cache=True)
def _dlap_kernel(words, wi, nb, trials, cdf, first, out, i0):  # pragma: no cover - compiled
    """Draws ``out[i0:]`` from the bytes of ``words`` from word ``wi`` (``nb`` bytes of
    ``words[wi - 1]`` left, low bytes first); see the module for the algorithm.

    Returns ``(i, wi, nb, status)``: status 0, all drawn; 1, the words ran out during draw ``i``;
    2, draw ``i`` compared all the table's digits of a probability without a decision (or its
    value neared 2^62): either way ``(wi, nb)`` is where draw ``i`` started, to replay it.
    """
    depth = trials.shape[1]
    nw = words.size
    G = cdf.shape[0]
    M = np.int64(1) << (8 * G)
    limit = (np.int64(1) << 62) - M
    cur = words[wi - 1] >> np.uint64(8 * (8 - nb)) if nb > 0 else np.uint64(0)
    ub = np.empty(depth, np.int64)
    i = i0
    while i < out.size:
        swi, snb = wi, nb
        status = 0
        y = np.int64(0)
        # trials: row 0 (Z != 0?), then row 1 (the tail) until it fails
        row = 0
        while True:
            hit = -1
            for k in range(depth):
                if nb == 0:
                    if wi >= nw:
                        hit = -2
                        break
                    cur = words[wi]
                    wi += 1
                    nb = 8
                b = np.int64(cur & np.uint64(0xFF))
                cur >>= np.uint64(8)
                nb -= 1
                d = np.int64(trials[row, k])
                if b != d:
                    hit = 1 if b < d else 0
                    break
            if hit < 0:
                status = 1 if hit == -2 else 2
                break
            if row == 0:
                if hit == 0:
                    break
                row = 1
            elif hit == 1:
                if y > limit:
                    status = 2
                    break
                y += M
            else:
                row = 2
                break
        if status != 0:
            return i, swi, snb, status
        if row == 0:  # Z = 0
            out[i] = 0
            i += 1
            continue
        # each group of 8 binary digits by inversion: two bytes, then more only at a CDF boundary
        for g in range(G):
            if nb >= 2:  # both bytes from the current word
                w = np.int64(cur & np.uint64(0xFF)) * 256 + np.int64((cur >> np.uint64(8)) & np.uint64(0xFF))
                cur >>= np.uint64(16)
                nb -= 2
            else:
                b1, wi, nb, cur, ok1 = _next_byte(words, wi, nb, cur)
                b2, wi, nb, cur, ok2 = _next_byte(words, wi, nb, cur)
                if not (ok1 and ok2):
                    status = 1
                    break
                w = b1 * 256 + b2
            e = np.int64(first[g, w])
            if e < 0:
                v = -e - 1
                nread = 0
                while True:  # is U < F(v)? U's bytes beyond the first two, read once, shared
                    less = -1
                    for k in range(2, depth):
                        if k - 2 >= nread:
                            bb, wi, nb, cur, ok = _next_byte(words, wi, nb, cur)
                            if not ok:
                                less = -2
                                break
                            ub[nread] = bb
                            nread += 1
                        d = np.int64(cdf[g, v, k])
                        if ub[k - 2] != d:
                            less = 1 if ub[k - 2] < d else 0
                            break
                    if less < 0:
                        status = 1 if less == -2 else 2
                        break
                    if less == 1:
                        break
                    v += 1
                    if v == 255 or np.int64(cdf[g, v, 0]) * 256 + np.int64(cdf[g, v, 1]) != w:
                        break
                if status != 0:
                    break
                e = v
            y += e << (8 * g)
        if status != 0:
            return i, swi, snb, status
        if nb == 0:  # the sign: one byte's lowest bit
            if wi >= nw:
                return i, swi, snb, 1
            cur = words[wi]
            wi += 1
            nb = 8
        neg = (cur & np.uint64(1)) == np.uint64(1)
        cur >>= np.uint64(8)
        nb -= 1
        out[i] = -(y + 1) if neg else y + 1
        i += 1
    return i, wi, nb, 0


class WordStream:
    """Uniform 64-bit words from a generator, drawn in blocks and consumed in order, byte by byte.

    Keep one stream across the chunks of one release: the bytes a chunk leaves are used by the
    next, so the output does not depend on the chunking. Only the generator passed in is used.
    """

    def __init__(self, rng: np.random.Generator) -> None:
        self.rng = check_generator(rng)
        self._words = np.zeros(0, dtype=np.uint64)
        self._pos = 0  # the next unread word
        self._nb = 0  # bytes of words[_pos - 1] not yet read (its low bytes are read first)

    def _refill(self, want: int) -> None:
        keep = self._pos - 1 if self._nb else self._pos
        fresh = self.rng.integers(0, 2**64 - 1, size=want, dtype=np.uint64, endpoint=True)
        self._words = np.concatenate([self._words[keep:], fresh])
        self._pos -= keep

    def _byte(self) -> int:
        """The next byte of the stream (the Python path's reader)."""
        if self._nb == 0:
            if self._pos >= self._words.size:
                self._refill(64)
            self._pos += 1
            self._nb = 8
        b = (int(self._words[self._pos - 1]) >> (8 * (8 - self._nb))) & 0xFF
        self._nb -= 1
        return b

    def _compare(self, key: tuple[int, ...], s: int, T: int, read: list[int], skip: int = 0) -> bool:
        """``U < p``: the uniform whose bytes so far are ``read`` (extended from the stream as
        needed) against probability ``key``'s exact digits, from digit ``skip`` on."""
        k = skip
        while True:
            if k >= len(read):
                read.append(self._byte())
            digits = probability_digits(key, s, T, max(2 * TABLE_DIGITS, 1 << (k + 1).bit_length()))
            if read[k] != digits[k]:
                return read[k] < digits[k]
            k += 1

    def _draw_exactly(self, s: int, T: int) -> int:
        """One draw in Python integers, reading the same bytes as the kernel (see the module)."""
        G = digit_groups(s, T)
        if not self._compare((0,), s, T, []):
            return 0
        y = 0
        while self._compare((1, G), s, T, []):
            y += 1 << (8 * G)
        for g in range(G):
            read = [self._byte(), self._byte()]
            v = 0
            while v < 255 and not self._compare((2, g, v), s, T, read):
                v += 1
            y += v << (8 * g)
        z = -(y + 1) if self._byte() & 1 else y + 1
        if abs(z) >= 1 << 62:
            raise OverflowError("a discrete Laplace draw does not fit an int64")
        return z

    def discrete_laplace(self, s: int, T: int, size: int, *, depth: int = TABLE_DIGITS) -> np.ndarray:
        """``size`` exact draws of :math:`\\Pr(Z = z) \\propto e^{-|z| s / 2^T}` (int64), see the
        module; ``depth``: the compiled table's digits per probability (a smaller one sends more
        draws through the Python path, with the same output)."""
        s = check_int(s, "s", minimum=1)
        T = check_int(T, "T", minimum=1)
        size = check_int(size, "size", minimum=0)
        depth = check_int(depth, "depth", minimum=2)
        if T > _MAX_T or s >= _MAX_S or (1 << T) // s > (1 << 52):
            raise ValueError(f"(s, T) = ({s}, {T}) is outside the sampler's range (use dyadic_parameter)")
        G, trials, cdf, first = _tables(s, T, depth)
        out = np.empty(size, dtype=np.int64)
        per_draw = (2 * G + 3) // 8 + 1  # words per draw, about: 2 G + 3 bytes
        i = 0
        while i < size:
            if self._words.size - self._pos < 4 * per_draw:
                self._refill(min(_MAX_BLOCK, per_draw * (size - i) + 64))
            i, self._pos, self._nb, status = (int(v) for v in _dlap_kernel(
                self._words, self._pos, self._nb, trials, cdf, first, out, i))
            if status == 1:  # replay draw i from its first byte with more words
                self._refill(min(_MAX_BLOCK, 2 * (self._words.size - self._pos) + per_draw * (size - i) + 64))
            elif status == 2:  # no decision within the table's digits: finish the draw exactly
                out[i] = self._draw_exactly(s, T)
                i += 1
        return out


# -- public functions ------------------------------------------------------------------------------
def discrete_laplace_dyadic(rng: np.random.Generator | WordStream, s: int, T: int, size: int) -> np.ndarray:
    r"""Exact draws of :math:`\Pr(Z = z) = \tanh(a/2)\, e^{-a |z|}`, :math:`a = s / 2^T` (int64 ``[size]``).

    :math:`Z = 0` with probability :math:`\tanh(a/2)`; else :math:`|Z| = 1 + Y`, ``Y`` geometric
    (:math:`\Pr(Y \ge y) = e^{-a y}`) from its tail and its independent binary digits, and a fair
    sign; each a Bernoulli trial on the generator's bytes against the exact digits of its
    probability (see the module). ``rng`` is a Generator or a :class:`WordStream` (to share
    leftover bytes across calls).
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
