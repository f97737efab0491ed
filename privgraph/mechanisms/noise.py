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
with the law of :math:`Y`. A draw is: the sign and :math:`Z \ne 0` from ONE uniform against two
thresholds (:math:`U < \Pr(Z > 0) = 1/(1 + e^a)`: positive; :math:`U < \Pr(Z \ne 0) = 2/(1 + e^a)`:
negative; else 0); the trial :math:`Y \ge 2^{8G}` again and again, adding :math:`2^{8G}` each
time (:math:`G` of :func:`digit_groups`: :math:`e^{-a 2^{8G}} \le e^{-6}`); each of the :math:`G`
bytes by inversion of its CDF :math:`F_g(v) = (1 - r_g^{v+1}) / (1 - r_g^{256})`. A trial is 1
when :math:`U < p`, decided at the first base-256 digit of :math:`U` that differs from
:math:`p`'s; an inversion is the smallest :math:`v` with :math:`U < F_g(v)`, looked up from
:math:`U`'s first two digits (a table of 65,536 entries) unless they equal the first two digits
of some :math:`F_g(v)` (255 in 65,536), when further digits decide. The digits are EXACT, read
off rigorous interval enclosures (mpmath's interval arithmetic, :func:`probability_digits`); the
compiled kernel holds the first :data:`TABLE_DIGITS` (128 bits) of each, and a draw whose
comparison ties with all of them (probability about :math:`2^{-112}`) is replayed in Python
with as many digits as it needs. No floating-point number enters a decision, and a smaller
:math:`a'` means more noise, so the privacy loss is never understated.

Randomness layout: 64-bit words from the generator (numpy's full-range ``integers``, the bit
generator's raw output), drawn in blocks (:class:`WordStream`) and read in order. A draw starts
at a fresh word and reads :math:`2 + G` FIELDS of 16 bits, four to a word from the low bits up
(:func:`words_per_draw`: one word for :math:`G \le 2`). A field's value :math:`W` is the first
two base-256 digits of a uniform, :math:`U \in [W / 2^{16}, (W + 1) / 2^{16})`: field 0 of the
sign-and-zero uniform, field 1 of the first tail trial's, field :math:`2 + g` of group
:math:`g`'s. Every further digit (a field that ties with a probability's first two digits, a
repeated tail trial: two digits and on) is an EXTENSION byte, read from the words after the
fields, low bytes first, in the order the draw needs them; the next draw starts at the word after
the last one read. Every digit is read once, so the uniforms are independent and exact. A draw
that runs out of words is replayed from its first word with a longer block, so the output is the
same function of the word stream whatever the block sizes (and, for a :class:`WordStream` kept
across calls, whatever the chunking of the caller).

Runtime: a compiled (numba) loop that decides a draw from its words of fields, without
branching on their values, unless a field ties with a table prefix or the tail is taken (under
1 % of draws at :math:`G \le 2`, about 0.4 % per further group): 1.5 to 2.9 times one
vectorised PCG64 uniform per entry for every :math:`a` from 8 down to 0.001 (one word per draw),
5.0 and 5.1 at :math:`a = 10^{-5}` and :math:`2^{-27}` (two words) (``benchmarks/noise.py``,
10^7 draws). The former byte-at-a-time kernel took 5 to 9 times at the first, and the sampler
before it (Canonne, Kamath and Steinke, NeurIPS 2020, Algorithm 2) 25 to 48.
"""

from __future__ import annotations

import functools
import math
from fractions import Fraction
from typing import Any

import numba
import numpy as np
from mpmath import iv, libmp

from privgraph.guarantee.params import check_epsilon, check_int
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
    "words_per_draw",
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
    ``(0,)``, :math:`\\Pr(Z \\ne 0) = 2 / (1 + e^a)`; ``(3,)``, :math:`\\Pr(Z > 0) = 1 / (1 + e^a)`;
    ``(1, G)``, the tail
    :math:`e^{-a 2^{8G}}`; ``(2, g, v)``, the CDF at ``v`` of digit group ``g``'s value,
    :math:`(1 - r^{v+1}) / (1 - r^{256})` with :math:`r = e^{-a 2^{8g}}`."""
    a = iv.mpf(s) * iv.mpf(2) ** (-T)  # exact: s < 2^53 and a power of two
    if key[0] == 0:
        return 2 / (1 + iv.exp(a))
    if key[0] == 3:
        return 1 / (1 + iv.exp(a))
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
    """``(G, trials, cdf, first)`` for one parameter: ``trials`` ``uint8 [3, depth]`` the digits
    of :math:`\\Pr(Z > 0) = 1 / (1 + e^a)`, of :math:`\\Pr(Z \\ne 0)` and of the tail; ``cdf``
    ``uint8 [G, 255, depth]`` the digits of each group's CDF at 0..254; ``first``
    ``int16 [G, 65536]``: for a field ``W`` (the uniform's first two digits), the group's value
    when no CDF value's first two digits are ``W`` (then it is decided), else ``-(v + 1)`` for
    the first such ``v``."""
    G = digit_groups(s, T)
    trials = np.array([probability_digits(key, s, T, depth) for key in ((3,), (0,), (1, G))], np.uint8)
    cdf = np.array([[probability_digits((2, g, v), s, T, depth) for v in range(255)] for g in range(G)],
                   np.uint8).reshape(G, 255, depth)
    first = np.empty((G, 65536), np.int16)
    w = np.arange(65536)
    for g in range(G):
        f16 = cdf[g, :, 0].astype(np.int64) * 256 + cdf[g, :, 1]
        lo = np.searchsorted(f16, w, side="left")  # values whose CDF lies below W / 65536
        tie = (lo < 255) & (f16[np.minimum(lo, 254)] == w)
        first[g] = np.where(tie, -(lo + 1), lo)
    return G, trials, cdf, first


def words_per_draw(G: int) -> int:
    """The 64-bit words of a draw's fields: ``2 + G`` fields of 16 bits, four to a word."""
    return (2 + G + 3) // 4


# -- the compiled kernel ---------------------------------------------------------------------------
@numba.njit(cache=True)
def _less(field, digits, ub, nread, words, ewi, enb, cur):  # pragma: no cover - compiled
    """Is ``U < p``? ``U``'s first two digits are ``field``, its further digits ``ub[:nread]``
    then the extension bytes from ``words[ewi:]`` (``enb`` bytes of ``cur`` left, low first);
    ``p``'s digits are ``digits``. Returns ``(answer, nread, ewi, enb, cur)``: answer 1 or 0;
    -1, the words ran out; -2, no decision within ``digits``."""
    d16 = np.int64(digits[0]) * 256 + np.int64(digits[1])
    if field != d16:
        return (1 if field < d16 else 0), nread, ewi, enb, cur
    for k in range(2, digits.size):
        if k - 2 >= nread:
            if enb == 0:
                if ewi >= words.size:
                    return -1, nread, ewi, enb, cur
                cur = words[ewi]
                ewi += 1
                enb = 8
            ub[nread] = np.int64(cur & np.uint64(0xFF))
            cur >>= np.uint64(8)
            enb -= 1
            nread += 1
        d = np.int64(digits[k])
        if ub[k - 2] != d:
            return (1 if ub[k - 2] < d else 0), nread, ewi, enb, cur
    return -2, nread, ewi, enb, cur


@numba.njit(cache=True)
def _field(words, wi, k):  # pragma: no cover - compiled
    """Field ``k`` of the draw whose words start at ``wi``: bits ``16 (k mod 4)`` on of word ``k // 4``."""
    return np.int64((words[wi + (k >> 2)] >> np.uint64(16 * (k & 3))) & np.uint64(0xFFFF))


@numba.njit(cache=True)
def _draw_general(words, wi, trials, cdf, first, ub):  # pragma: no cover - compiled
    """One draw whose fields start at word ``wi`` (see the module), every case (ties with the
    table's first two digits, the tail, several words of fields). Returns ``(z, next_wi, status)``:
    status 0, drawn; 1, the words ran out; 2, no decision within the table's digits, or the
    geometric part neared 2^62 (the Python path finishes it)."""
    G = cdf.shape[0]
    ewi = wi + (2 + G + 3) // 4  # the extension bytes follow the fields' words
    if ewi > words.size:
        return np.int64(0), wi, 1
    enb = 0
    cur = np.uint64(0)
    # the sign and Z != 0 from field 0: U < Pr(Z > 0) positive, U < Pr(Z != 0) negative, else 0
    f0 = _field(words, wi, 0)
    r, nread, ewi, enb, cur = _less(f0, trials[0], ub, 0, words, ewi, enb, cur)
    if r < 0:
        return np.int64(0), wi, 1 if r == -1 else 2
    positive = r == 1
    if not positive:
        r, nread, ewi, enb, cur = _less(f0, trials[1], ub, nread, words, ewi, enb, cur)
        if r < 0:
            return np.int64(0), wi, 1 if r == -1 else 2
        if r == 0:
            return np.int64(0), ewi, 0
    # the tail Y >= 2^(8G): field 1, then two extension bytes per repeated trial
    M = np.int64(1) << (8 * G)
    limit = (np.int64(1) << 62) - M
    y = np.int64(0)
    field = _field(words, wi, 1)
    while True:
        r, nread, ewi, enb, cur = _less(field, trials[2], ub, 0, words, ewi, enb, cur)
        if r < 0:
            return np.int64(0), wi, 1 if r == -1 else 2
        if r == 0:
            break
        if y > limit:
            return np.int64(0), wi, 2
        y += M
        field = np.int64(0)
        for _ in range(2):
            if enb == 0:
                if ewi >= words.size:
                    return np.int64(0), wi, 1
                cur = words[ewi]
                ewi += 1
                enb = 8
            field = field * 256 + np.int64(cur & np.uint64(0xFF))
            cur >>= np.uint64(8)
            enb -= 1
    # each group of 8 binary digits by inversion: fields 2 .. G + 1
    for g in range(G):
        field = _field(words, wi, 2 + g)
        e = np.int64(first[g, field])
        if e < 0:
            v = -e - 1
            nread = 0
            while True:
                r, nread, ewi, enb, cur = _less(field, cdf[g, v], ub, nread, words, ewi, enb, cur)
                if r < 0:
                    return np.int64(0), wi, 1 if r == -1 else 2
                if r == 1:
                    break
                v += 1
                if v == 255 or np.int64(cdf[g, v, 0]) * 256 + np.int64(cdf[g, v, 1]) != field:
                    break
            e = v
        y += e << (8 * g)
    return (y + 1 if positive else -(y + 1)), ewi, 0


@numba.njit(cache=True)
def _dlap_kernel(words, wi, trials, cdf, first, out, i0):  # pragma: no cover - compiled
    """Draws ``out[i0:]`` from ``words[wi:]``; see the module for the layout. The common case
    (one word of fields, no tie with a table prefix, no tail) is decided from the word alone.

    Returns ``(i, wi, status)``: status 0, all drawn; 1, the words ran out during draw ``i``; 2,
    draw ``i`` needs the Python path; either way ``wi`` is draw ``i``'s first word.
    """
    G = cdf.shape[0]
    nw = words.size
    h16 = np.int64(trials[0, 0]) * 256 + np.int64(trials[0, 1])
    p16 = np.int64(trials[1, 0]) * 256 + np.int64(trials[1, 1])
    t16 = np.int64(trials[2, 0]) * 256 + np.int64(trials[2, 1])
    nwd = (2 + G + 3) // 4
    one_word = nwd == 1
    first0 = first[0] if G >= 1 else np.zeros(1, np.int16)
    first1 = first[1] if G >= 2 else first0
    zero_first = p16 < 1 << 14 or not one_word  # Z = 0 in 3 draws of 4 or more: a predictable branch
    ub = np.empty(trials.shape[1], np.int64)
    i = i0
    while i < out.size:
        if wi + nwd > nw:
            return i, wi, 1
        w = words[wi]
        f0 = np.int64(w & np.uint64(0xFFFF))
        if zero_first and f0 > p16:  # U >= (f0 + 1) / 2^16 > Pr(Z != 0): Z = 0
            out[i] = 0
            wi += nwd
            i += 1
            continue
        if one_word:  # branch-free unless a field ties with a table prefix or the tail is taken
            e0 = np.int64(first0[np.int64((w >> np.uint64(32)) & np.uint64(0xFFFF))]) if G >= 1 else np.int64(0)
            e1 = np.int64(first1[np.int64(w >> np.uint64(48))]) if G == 2 else np.int64(0)
            y = e0 + (e1 << 8)
            tie = (f0 == h16) | (f0 == p16) | (np.int64((w >> np.uint64(16)) & np.uint64(0xFFFF)) <= t16)
            if not (tie | (e0 < 0) | (e1 < 0)):
                y += 1
                y = y if f0 < h16 else -y
                out[i] = y if f0 < p16 else 0  # U < Pr(Z > 0): positive; < Pr(Z != 0): negative
                wi += 1
                i += 1
                continue
        else:  # fields over several words: the same, group by group
            y = np.int64(0)
            tie = (f0 == h16) | (f0 == p16) | (np.int64((w >> np.uint64(16)) & np.uint64(0xFFFF)) <= t16)
            w1 = words[wi + 1]
            w2 = words[wi + 2] if nwd > 2 else w1
            for g in range(G):
                k = 2 + g
                wk = w if k < 4 else (w1 if k < 8 else w2)
                e = np.int64(first[g, np.int64((wk >> np.uint64(16 * (k & 3))) & np.uint64(0xFFFF))])
                tie = tie | (e < 0)
                y += e << (8 * g)
            if not tie:
                y += 1
                y = y if f0 < h16 else -y
                out[i] = y if f0 < p16 else 0
                wi += nwd
                i += 1
                continue
        z, nxt, status = _draw_general(words, wi, trials, cdf, first, ub)
        if status != 0:
            return i, wi, status
        out[i] = z
        wi = nxt
        i += 1
    return i, wi, 0


class WordStream:
    """Uniform 64-bit words from a generator, drawn in blocks and consumed in order.

    Keep one stream across the chunks of one release: the words a chunk leaves are used by the
    next, so the output does not depend on the chunking. Only the generator passed in is used.
    """

    def __init__(self, rng: np.random.Generator) -> None:
        self.rng = check_generator(rng)
        self._words = np.zeros(0, dtype=np.uint64)
        self._pos = 0  # the next unread word
        self._drawn = 0  # words drawn from the generator so far

    @property
    def words_read(self) -> int:
        """The words the draws so far have read (drawn, less those not yet read)."""
        return self._drawn - (self._words.size - self._pos)

    def _refill(self, want: int) -> None:
        fresh = self.rng.integers(0, 2**64 - 1, size=want, dtype=np.uint64, endpoint=True)
        self._words = np.concatenate([self._words[self._pos:], fresh])
        self._pos = 0
        self._drawn += want

    def _word(self) -> int:
        """The next word (the Python path's reader)."""
        if self._pos >= self._words.size:
            self._refill(64)
        self._pos += 1
        return int(self._words[self._pos - 1])

    def _draw_exactly(self, s: int, T: int) -> int:
        """One draw in Python integers, reading the same words as the kernel (see the module)."""
        G = digit_groups(s, T)
        main = [self._word() for _ in range(words_per_draw(G))]
        fields = [(main[k // 4] >> (16 * (k % 4))) & 0xFFFF for k in range(2 + G)]
        ext: list[int] = []  # the extension bytes, low bytes of each word first

        def byte() -> int:
            if not ext:
                w = self._word()
                ext.extend((w >> (8 * j)) & 0xFF for j in range(8))
                ext.reverse()
            return ext.pop()

        def less(key: tuple[int, ...], digits_u: list[int]) -> bool:
            """U < p for the uniform whose digits so far are ``digits_u`` (extended as needed)."""
            k = 0
            while True:
                if k >= len(digits_u):
                    digits_u.append(byte())
                p = probability_digits(key, s, T, max(2 * TABLE_DIGITS, 1 << (k + 1).bit_length()))
                if digits_u[k] != p[k]:
                    return digits_u[k] < p[k]
                k += 1

        u0 = [fields[0] >> 8, fields[0] & 0xFF]
        positive = less((3,), u0)
        if not positive and not less((0,), u0):
            return 0
        y = 0
        u = [fields[1] >> 8, fields[1] & 0xFF]
        while less((1, G), u):
            y += 1 << (8 * G)
            u = [byte(), byte()]
        for g in range(G):
            u = [fields[2 + g] >> 8, fields[2 + g] & 0xFF]
            v = 0
            while v < 255 and not less((2, g, v), u):
                v += 1
            y += v << (8 * g)
        if y + 1 >= 1 << 62:
            raise OverflowError("a discrete Laplace draw does not fit an int64")
        return y + 1 if positive else -(y + 1)

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
        per_draw = words_per_draw(G)
        i = 0
        while i < size:
            if self._words.size - self._pos < 4 * per_draw:
                self._refill(min(_MAX_BLOCK, per_draw * (size - i) + 64))
            i, self._pos, status = (int(v) for v in _dlap_kernel(
                self._words, self._pos, trials, cdf, first, out, i))
            if status == 1:  # replay draw i from its first word with more words
                self._refill(min(_MAX_BLOCK, 2 * (self._words.size - self._pos) + per_draw * (size - i) + 64))
            elif status == 2:  # no decision within the table's digits: finish the draw exactly
                out[i] = self._draw_exactly(s, T)
                i += 1
        return out

# -- public functions ------------------------------------------------------------------------------
def discrete_laplace_dyadic(rng: np.random.Generator | WordStream, s: int, T: int, size: int) -> np.ndarray:
    r"""Exact draws of :math:`\Pr(Z = z) = \tanh(a/2)\, e^{-a |z|}`, :math:`a = s / 2^T` (int64 ``[size]``).

    :math:`Z = 0` with probability :math:`\tanh(a/2)`, else a fair sign (both from one uniform);
    :math:`|Z| = 1 + Y`, ``Y`` geometric (:math:`\Pr(Y \ge y) = e^{-a y}`) from its tail and its
    independent binary digits; each decided on the generator's words against the exact digits
    of its probability (see the module). ``rng`` is a Generator or a :class:`WordStream` (to share
    leftover words across calls).
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
