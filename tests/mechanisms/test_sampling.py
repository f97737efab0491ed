"""Distinct-sample and pair-rank helpers shared by the sparse graph samplers."""

from __future__ import annotations

import itertools
from collections import Counter

import numpy as np
import pytest
from scipy import stats

from privgraph.mechanisms.noise import discrete_laplace
from privgraph.mechanisms.sampling import (
    rank_pairs,
    sample_distinct,
    sample_distinct_blocks,
    unrank_pairs,
)


@pytest.mark.parametrize("total,count", [(5, 2), (5, 3), (6, 6), (4, 0)])
def test_subsets_are_uniform(total: int, count: int) -> None:
    # every count-subset of range(total) equally likely: chi-square at alpha = 1e-3, fixed seed
    rng = np.random.default_rng(12345)
    seen = Counter(tuple(sample_distinct(total, count, rng)) for _ in range(6000))
    subsets = list(itertools.combinations(range(total), count))
    assert set(seen) == set(subsets)
    if len(subsets) > 1:
        obs = np.array([seen[s] for s in subsets])
        assert stats.chisquare(obs).pvalue > 1e-3


def test_blocks_respect_bounds_counts_and_distinctness() -> None:
    rng = np.random.default_rng(7)
    totals = np.array([10, 0, 3, 10**12, 5, 1, 40], np.int64)
    counts = np.array([9, 0, 1, 1000, 5, 0, 20], np.int64)
    block, idx = sample_distinct_blocks(totals, counts, rng)
    assert np.array_equal(np.bincount(block, minlength=totals.size), counts)
    assert np.all(idx >= 0) and np.all(idx < totals[block])
    key = block * 10**13 + idx
    assert np.all(np.diff(key) > 0)  # sorted and distinct


def test_blocks_reject_bad_counts() -> None:
    rng = np.random.default_rng(0)
    with pytest.raises(ValueError, match="block 1: counts"):
        sample_distinct_blocks(np.array([3, 2]), np.array([1, 3]), rng)
    with pytest.raises(ValueError, match=">= 0"):
        sample_distinct_blocks(np.array([3]), np.array([-1]), rng)
    with pytest.raises(TypeError, match="Generator"):
        sample_distinct_blocks(np.array([3]), np.array([1]), np.random.RandomState(0))


def test_within_block_marginals_uniform() -> None:
    # each index of a sparse block is chosen with probability count / total
    rng = np.random.default_rng(99)
    hits = np.zeros(50)
    reps = 4000
    for _ in range(reps):
        _, idx = sample_distinct_blocks(np.array([50, 50]), np.array([5, 40]), rng)
        hits[idx[:5]] += 1
    assert stats.chisquare(hits).pvalue > 1e-3
    assert abs(hits.sum() - 5 * reps) == 0


@pytest.mark.parametrize("n", [2, 3, 7, 1000, 10**6 + 3])
def test_unrank_inverts_rank(n: int) -> None:
    total = n * (n - 1) // 2
    k = np.unique(np.concatenate([np.arange(min(total, 500)), np.random.default_rng(n).integers(0, total, 2000),
                                  [total - 1]]))
    i, j = unrank_pairs(k, n)
    assert np.all((0 <= i) & (i < j) & (j < n))
    assert np.array_equal(rank_pairs(i, j, n), k)
    if n <= 7:
        assert list(zip(i.tolist(), j.tolist())) == list(itertools.combinations(range(n), 2))


def test_unrank_rejects_out_of_range() -> None:
    with pytest.raises(ValueError, match="pair ranks"):
        unrank_pairs(np.array([10]), 5)


def test_discrete_laplace_pmf() -> None:
    # Pr(Z = z) = (1 - a) / (1 + a) a^|z| with a = e^-eps: chi-square over |z| <= 6, fixed seed
    eps = 0.7
    z = discrete_laplace(np.random.default_rng(3), eps, 200_000)
    assert z.dtype == np.int64
    a = np.exp(-eps)
    support = np.arange(-6, 7)
    pmf = (1 - a) / (1 + a) * a ** np.abs(support)
    obs = np.array([(z == s).sum() for s in support] + [(np.abs(z) > 6).sum()])
    exp = np.append(pmf, 1 - pmf.sum()) * z.size
    assert stats.chisquare(obs, exp).pvalue > 1e-3
    for bad in (0.0, float("nan"), float("inf"), True):
        with pytest.raises((ValueError, TypeError)):
            discrete_laplace(np.random.default_rng(0), bad, 3)
