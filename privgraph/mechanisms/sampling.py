"""Sampling distinct integers and node pairs without visiting every pair, and the exact Bernoulli.

Every sampler of a sparse private graph (an HRG's per-internal-node edge counts, EdgeRand's
flipped non-edges, LapGraph's top pairs) places ``k`` edges uniformly without replacement in a
block of ``M`` pairs. :func:`sample_distinct_blocks` does that for many blocks at once in
``O(sum k log sum k)`` time and memory, never ``O(M)`` unless ``k > M / 2`` (then it enumerates the
block, which costs at most ``2 k``).

The small probabilities that carry a privacy ratio are drawn with the exact samplers:
:func:`bernoulli_exact` (one decision) and
:func:`~privgraph.mechanisms.exact_binomial.binomial_exact` (the NUMBER of successes of ``n``
such decisions, e.g. the false reports of a randomized response; its own module); their cap is
:data:`MAX_EXACT_EPSILON`. :data:`DISCRETE_LAPLACE_RANGE` bounds the budget of one discrete
Laplace draw (:func:`privgraph.mechanisms.noise.discrete_laplace`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from privgraph.graph import in_sorted
from privgraph.mechanisms.base import MIN_EXACT_EPSILON, EpsilonRange, check_generator

__all__ = [
    "sample_distinct_blocks",
    "sample_distinct",
    "sample_excluding",
    "unrank_pairs",
    "rank_pairs",
    "bernoulli_exact",
    "MAX_EXACT_EPSILON",
    "MIN_EXACT_EPSILON",
    "DISCRETE_LAPLACE_RANGE",
    "check_coordinate_epsilon",
]

# The largest budget whose smallest output probability (about e^-eps) the exact samplers realise:
# bernoulli_exact realises every float64 probability >= 2^-54 EXACTLY and smaller ones to 2^-106
# absolute, i.e. to a relative 2^-106 e^eps (6e-11 at eps = 50, 1.4e-6 at 60). Above the cap the
# stated pure-DP guarantee would not hold to float precision, so a larger budget is refused.
# (privgraph.mechanisms.base.MAX_EXACT_EPSILON is the same number.)
MAX_EXACT_EPSILON = 50.0

#: The budgets of one discrete Laplace noise draw (a degree, an edge count): each part of a split
#: budget that pays for such noise is checked against this range. The sampler,
#: :func:`privgraph.mechanisms.noise.discrete_laplace`, is exact (integer arithmetic) at its dyadic
#: parameter, which equals eps for eps >= 2^-10 and is within a relative 2^-42 of it down to
#: 2^-20; 50 is the cap of every privgraph budget. (The numpy-geometric sampler it replaced
#: realised the step probability e^-eps only to an absolute 2^-53: about 13 would have been its
#: cap, and above ~36.7 its noise was identically 0.)
DISCRETE_LAPLACE_RANGE = EpsilonRange(
    low=MIN_EXACT_EPSILON,
    high=MAX_EXACT_EPSILON,
    note=(
        "noise.discrete_laplace samples the two-sided geometric law exactly at a dyadic parameter "
        "equal to eps from 2^-10 up and within a relative 2^-42 of it down to 2^-20; 50 caps every budget"
    ),
)
_TWO53 = 2.0**53
_ULP53 = 2.0**-53

# Each rejection round accepts every pending draw with probability >= 1/2; 200 rounds failing
# means a broken precondition, not bad luck.
_MAX_ROUNDS = 200


def _as_counts(a: np.ndarray, name: str) -> np.ndarray:
    arr = np.asarray(a)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be 1-D, got shape {list(arr.shape)}")
    if arr.size and not np.issubdtype(arr.dtype, np.integer):
        raise TypeError(f"{name} must hold integers, got dtype {arr.dtype}")
    arr = arr.astype(np.int64, copy=False)
    if arr.size and arr.min() < 0:
        raise ValueError(f"{name} must be >= 0")
    return arr


def _sparse_blocks(
    totals: np.ndarray, counts: np.ndarray, offsets: np.ndarray, rng: np.random.Generator
) -> np.ndarray:
    """Global keys ``offsets[b] + i`` of ``counts[b] <= totals[b] / 2`` distinct draws per block."""
    owners = np.repeat(np.arange(totals.size, dtype=np.int64), counts)
    accepted = np.zeros(0, dtype=np.int64)
    pending = owners
    for _ in range(_MAX_ROUNDS):
        if pending.size == 0:
            return accepted
        idx = np.floor(rng.random(pending.size) * totals[pending]).astype(np.int64)
        idx = np.minimum(idx, totals[pending] - 1)  # guard the float edge at 1 - 2^-53
        keys = offsets[pending] + idx
        order = np.argsort(keys, kind="stable")
        sk = keys[order]
        first = np.ones(keys.size, dtype=bool)
        first[order[1:]] = sk[1:] != sk[:-1]
        ok = first & ~in_sorted(keys, accepted)
        accepted = np.sort(np.concatenate([accepted, keys[ok]]))
        pending = pending[~ok]
    raise RuntimeError(f"sample_distinct_blocks: rejection did not finish in {_MAX_ROUNDS} rounds")


def check_coordinate_epsilon(eps_c: float, what: str = "epsilon / k") -> float:
    """Refuse a per-coordinate budget above :data:`MAX_EXACT_EPSILON` (see there)."""
    if eps_c > MAX_EXACT_EPSILON:
        raise ValueError(
            f"{what} = {eps_c:g} per coordinate exceeds {MAX_EXACT_EPSILON:g}: float64 sampling "
            f"cannot realise output probabilities near e^-{eps_c:g}, so the pure-DP guarantee "
            "would not hold; use a smaller epsilon (or sample more coordinates)"
        )
    return eps_c


def sample_distinct_blocks(
    totals: np.ndarray, counts: np.ndarray, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """For each block ``b``, ``counts[b]`` distinct integers uniform without replacement in
    ``[0, totals[b])``; all blocks at once.

    Blocks with ``counts[b] <= totals[b] / 2`` are filled by rejection in rounds (each draw is
    accepted with probability >= 1/2); fuller blocks draw the complement that way and enumerate
    the rest. The chosen set of every block is uniform among its ``C(totals[b], counts[b])``
    subsets (the process is invariant under permutations of a block).

    Args:
        totals (np.ndarray): int64 ``[B]`` block sizes (``sum(totals)`` must fit in int64).
        counts (np.ndarray): int64 ``[B]``, ``0 <= counts <= totals``.
        rng (np.random.Generator): the only source of randomness.

    Returns:
        tuple: ``(block, index)``, int64 arrays of length ``sum(counts)``, sorted by block then index.
    """
    rng = check_generator(rng)
    totals = _as_counts(totals, "totals")
    counts = _as_counts(counts, "counts")
    if totals.shape != counts.shape:
        raise ValueError(f"totals and counts must have the same length, got {totals.size} and {counts.size}")
    if np.any(counts > totals):
        b = int(np.flatnonzero(counts > totals)[0])
        raise ValueError(f"block {b}: counts ({counts[b]}) exceeds totals ({totals[b]})")
    if totals.size == 0 or counts.sum() == 0:
        z = np.zeros(0, dtype=np.int64)
        return z, z.copy()
    offsets = np.concatenate([[0], np.cumsum(totals)[:-1]]).astype(np.int64)
    dense = 2 * counts > totals
    sparse_counts = np.where(dense, totals - counts, counts)
    keys = _sparse_blocks(totals, sparse_counts, offsets, rng)
    block_of = np.searchsorted(offsets, keys, side="right") - 1
    keep_sparse = keys[~dense[block_of]]
    excluded = keys[dense[block_of]]
    parts = [keep_sparse]
    if dense.any():
        db = np.flatnonzero(dense)
        # enumerate every dense block (each has totals <= 2 counts), drop its excluded keys
        all_keys = np.repeat(offsets[db] - np.concatenate([[0], np.cumsum(totals[db])[:-1]]), totals[db])
        all_keys = all_keys + np.arange(all_keys.size, dtype=np.int64)
        parts.append(all_keys[~in_sorted(all_keys, excluded)])
    out = np.sort(np.concatenate(parts))
    block = np.searchsorted(offsets, out, side="right") - 1
    # empty blocks share their offset with the next block; searchsorted(side=right) picks the last
    # block starting at that offset, which is the non-empty one since keys < offset + total
    return block.astype(np.int64), out - offsets[block]


def sample_excluding(
    sizes: np.ndarray,
    counts: np.ndarray,
    excluded_block: np.ndarray,
    excluded_index: np.ndarray,
    rng: np.random.Generator,
) -> tuple[np.ndarray, np.ndarray]:
    """For each block ``b``, ``counts[b]`` distinct indices uniform without replacement in
    ``[0, sizes[b])`` minus the block's excluded indices; all blocks at once.

    The free indices of block ``b`` are drawn as ranks ``t`` in ``[0, F_b)``,
    ``F_b = sizes[b] - |excluded_b|`` (:func:`sample_distinct_blocks`,
    a uniform subset), then mapped to the ``t``-th index not excluded: ``t + #{j : x_j - j <= t}``
    over the block's sorted excluded ``x_0 < x_1 < ...`` (a monotone bijection, so the mapped
    subset is uniform among the subsets of the allowed indices). No rejection, no ``O(sizes)`` work.

    Args:
        sizes (np.ndarray): int64 ``[B]`` index-space size per block.
        counts (np.ndarray): int64 ``[B]``, ``0 <= counts[b] <= sizes[b] - |excluded_b|``.
        excluded_block (np.ndarray): int64 ``[E]`` block of each excluded index, ascending.
        excluded_index (np.ndarray): int64 ``[E]`` excluded indices, ascending and distinct
            within a block, each in ``[0, sizes[b])``.
        rng (np.random.Generator): the only source of randomness.

    Returns:
        tuple: ``(block, index)``, int64 arrays of length ``sum(counts)``, sorted by block then index.

    Runtime:
        :math:`O((\\sum_b k_b + E) \\log(\\sum_b k_b + E))`, plus ``O(F_b)`` for a block asked for
        more than half of its free indices (then ``F_b < 2 k_b``).
    """
    rng = check_generator(rng)
    sizes = _as_counts(sizes, "sizes")
    counts = _as_counts(counts, "counts")
    eb = _as_counts(excluded_block, "excluded_block")
    ex = _as_counts(excluded_index, "excluded_index")
    b = sizes.size
    if counts.size != b or eb.size != ex.size:
        raise ValueError("sizes/counts and excluded_block/excluded_index must have equal lengths")
    if eb.size:
        if eb[0] < 0 or eb[-1] >= b or np.any(np.diff(eb) < 0):
            raise ValueError(f"excluded_block must be ascending block ids in [0, {b})")
        same = eb[1:] == eb[:-1]
        if np.any(same & (ex[1:] <= ex[:-1])):
            raise ValueError("excluded_index must be ascending and distinct within each block")
        if ex.min() < 0 or np.any(ex >= sizes[eb]):
            raise ValueError("excluded_index: an index lies outside its block")
    n_excl = np.bincount(eb, minlength=b).astype(np.int64)
    free = sizes - n_excl
    blk, t = sample_distinct_blocks(free, counts, rng)  # validates 0 <= counts <= free
    if t.size == 0 or eb.size == 0:
        return blk, t
    start = np.zeros(b + 1, dtype=np.int64)
    np.cumsum(n_excl, out=start[1:])
    adj = ex - (np.arange(ex.size, dtype=np.int64) - start[eb])  # free indices before x_j; in [0, F_b]
    off = np.zeros(b, dtype=np.int64)
    np.cumsum(free[:-1] + 1, out=off[1:])  # blocks' key ranges [off_b, off_b + F_b] are disjoint
    below = np.searchsorted(off[eb] + adj, off[blk] + t, side="right") - start[blk]
    return blk, t + below


def sample_distinct(total: int, count: int, rng: np.random.Generator) -> np.ndarray:
    """``count`` distinct integers uniform without replacement in ``[0, total)``, sorted."""
    _, idx = sample_distinct_blocks(np.array([total], np.int64), np.array([count], np.int64), rng)
    return idx


def unrank_pairs(k: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """The pairs ``(i, j)``, ``0 <= i < j < n``, of ranks ``k`` in row-major upper-triangle order.

    Rank ``k(i, j) = i (2n - i - 1) / 2 + (j - i - 1)`` (see :func:`rank_pairs`); the inverse uses
    a float square root and an exact integer correction.
    """
    k = np.asarray(k, dtype=np.int64)
    n = int(n)
    total = n * (n - 1) // 2
    if k.size and (k.min() < 0 or k.max() >= total):
        raise ValueError(f"pair ranks must be in [0, {total}) for n = {n}")
    # rows from the end: with r = n - 1 - i, the pairs of rows > i number r (r + 1) / 2
    rev = total - 1 - k
    r = np.floor((np.sqrt(8.0 * rev.astype(np.float64) + 1.0) - 1.0) / 2.0).astype(np.int64)
    # exact fix-up of the float root: r (r + 1) / 2 <= rev < (r + 1)(r + 2) / 2
    r = np.where(r * (r + 1) // 2 > rev, r - 1, r)
    r = np.where((r + 1) * (r + 2) // 2 <= rev, r + 1, r)
    i = n - 2 - r
    j = k - rank_pairs(i, i + 1, n) + i + 1
    return i, j


def rank_pairs(i: np.ndarray, j: np.ndarray, n: int) -> np.ndarray:
    """Row-major rank of the pairs ``(i, j)``, ``i < j``, among the ``n (n - 1) / 2`` pairs."""
    i = np.asarray(i, dtype=np.int64)
    j = np.asarray(j, dtype=np.int64)
    return i * (2 * np.int64(n) - i - 1) // 2 + (j - i - 1)


def bernoulli_exact(p: Any, u_hi: np.ndarray, u_lo: np.ndarray | np.random.Generator) -> np.ndarray:
    r"""``U < p`` for the 106-bit uniform :math:`U = u_{hi} + 2^{-53} u_{lo}`.

    ``u_hi`` and ``u_lo`` are ``Generator.random`` doubles (multiples of :math:`2^{-53}`). With
    :math:`2^{53} p = f + \phi` (``f`` integer), :math:`U < p` iff :math:`2^{53} u_{hi} < f`, or
    :math:`2^{53} u_{hi} = f` and :math:`u_{lo} < \phi`. So :math:`\Pr = f 2^{-53} + \lceil
    2^{53}\phi \rceil 2^{-106}`, which is EXACTLY ``p`` for every float64 :math:`p \ge 2^{-54}`
    (those are multiples of :math:`2^{-106}`), and within :math:`2^{-106}` below. A plain
    ``u < p`` realises ``p`` only to :math:`2^{-53}`, a relative error of :math:`2^{-53}/p` on
    small probabilities, which is where pure DP's ratios live.

    Computed with ``f = floor(2^53 p) 2^-53`` (exact): ``u_hi < f`` decides at once; the rare ties
    ``u_hi = f`` (probability :math:`2^{-53}` each) compare ``u_lo < 2^{53} (p - f) = \phi``
    (exact too). Two comparisons per draw when ``p`` broadcasts (e.g. one probability per
    column). ``u_lo`` may be a Generator: then the low uniforms are drawn for the ties only (one
    ``random`` call, in row-major order of the ties), which keeps the cost at one uniform per draw.
    """
    p = np.asarray(p, dtype=np.float64)
    f = np.floor(p * _TWO53) * _ULP53
    hit = np.less(u_hi, f)
    if hit.ndim == 0:  # scalars: numpy returns a bool scalar, which cannot be written into
        hit = np.array(hit)
    shape = hit.shape
    tie = np.flatnonzero(np.equal(u_hi, f))
    if tie.size:
        phi = np.broadcast_to((p - f) * _TWO53, shape).reshape(-1)[tie]
        if isinstance(u_lo, np.random.Generator):
            lo = u_lo.random(tie.size)
        else:
            lo = np.broadcast_to(u_lo, shape).reshape(-1)[tie]
        flat = hit.reshape(-1)
        flat[tie] = lo < phi
    return hit
