"""EdgeRR's and privHRG's public block tree (privgraph.mechanisms.hrg.blocks): the split covers the
leaves, the composed dendrogram is a valid one whose likelihood is the blocks' plus the top's, the
blocks' chains sample the exponential mechanism restricted to the block tree (chi-square over every
dendrogram of the restricted set), and the mechanisms run with one check per block, reproducibly
and whatever the number of threads.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from scipy import stats

from privgraph.graph import GraphData
from privgraph.mechanisms.edges.edge_rr import EdgeRR
from privgraph.mechanisms.edges.priv_hrg import PrivHRG
from privgraph.mechanisms.hrg import Dendrogram, Phase
from privgraph.mechanisms.hrg import blocks as blocks_module
from privgraph.mechanisms.hrg.blocks import (
    LeafBlocks, bisection_blocks, block_edges, check_block_leaves, compose, range_blocks,
)
from privgraph.mechanisms.hrg import convergence as convergence_module
from privgraph.mechanisms.hrg.convergence import clear_check_cache
from privgraph.mechanisms.hrg.fit import _fit_blocks
from tests.mechanisms.test_hrg import _all_trees, _from_nested


def _edges(pairs: list[tuple[int, int]]) -> np.ndarray:
    return np.array(pairs, dtype=np.int64).T.reshape(2, -1)


def _clusters(left: np.ndarray, right: np.ndarray, n: int) -> frozenset[frozenset[int]]:
    memo: dict[int, frozenset[int]] = {}

    def leaves(x: int) -> frozenset[int]:
        if x < n:
            return frozenset([x])
        if x not in memo:
            memo[x] = leaves(int(left[x - n])) | leaves(int(right[x - n]))
        return memo[x]

    return frozenset(leaves(n + i) for i in range(n - 1))


def _check_tree(lb: LeafBlocks, max_leaves: int) -> None:
    assert np.array_equal(np.sort(np.concatenate(lb.blocks)), np.arange(lb.n))
    assert all(0 < b.size <= max_leaves and np.all(np.diff(b) > 0) for b in lb.blocks)
    assert lb.merges.shape == (lb.count - 1, 2)
    seen = set(range(lb.count))
    for k, (a, c) in enumerate(lb.merges):  # children before parents, each id used once
        assert a in seen and c in seen and a != c
        seen -= {a, c}
        seen.add(lb.count + k)
    assert seen == {2 * lb.count - 2}


def test_bisection_and_range_blocks_cover_the_leaves() -> None:
    rng = np.random.default_rng(0)
    n = 1000
    e = np.sort(rng.integers(0, n, (2, 4000)), axis=0)
    e = np.unique(e[:, e[0] < e[1]], axis=1)
    for lb, cap in ((bisection_blocks(n, e, 64), 64), (range_blocks(n, 100), 100), (bisection_blocks(n, e[:, :0], 50), 50)):
        _check_tree(lb, cap)
        assert lb.summary()["blocks"] == lb.count
    # two planted communities: the bisection keeps them apart (few edges cut), halves of ids do not
    a = rng.permutation(200)
    inside = [(int(min(x, y)), int(max(x, y))) for x, y in rng.integers(0, 100, (600, 2)) if x != y]
    pairs = [(min(a[x], a[y]), max(a[x], a[y])) for x, y in inside] + \
            [(min(a[x + 100], a[y + 100]), max(a[x + 100], a[y + 100])) for x, y in inside]
    ce = np.unique(_edges(pairs), axis=1)
    lb = bisection_blocks(200, ce, 100)
    assert lb.count == 2
    kept = sum(x.shape[1] for x in block_edges(lb, ce))
    assert kept == ce.shape[1]  # nothing cut
    assert sum(x.shape[1] for x in block_edges(range_blocks(200, 100), ce)) < 0.75 * ce.shape[1]
    assert check_block_leaves(None) is None and check_block_leaves(16) == 16
    for bad in (15, 0, True, 2.5, "64"):
        with pytest.raises((ValueError, TypeError)):
            check_block_leaves(bad)


def test_composed_dendrogram_is_valid_and_its_likelihood_adds_up() -> None:
    rng = np.random.default_rng(1)
    n = 120
    e = np.unique(np.sort(rng.integers(0, n, (2, 500)), axis=0), axis=1)
    e = e[:, e[0] < e[1]]
    private = rng.random(e.shape[1]) < 0.4
    pub, pri = e[:, ~private], e[:, private]
    lb = bisection_blocks(n, pub, 20)
    public = np.bincount(pub.ravel(), minlength=n) > 0
    parts = []
    total = np.zeros(2)
    for idx, bp, bq in zip(lb.blocks, block_edges(lb, pub), block_edges(lb, pri), strict=True):
        d = Dendrogram.random(n, idx, bp, bq, rng, public_leaf=public[idx])
        parts.append((d.left, d.right, d.root))
        total += d.log_likelihood()
    left, right, root = compose(lb, parts)
    full = Dendrogram.from_structure(n, np.arange(n), pub, pri, left, right, root)
    # every internal node is used once and the tree is connected (from_structure recomputes every count)
    assert np.array_equal(np.sort(np.concatenate([left, right, [root]])), np.arange(2 * n - 1))
    # the top nodes' terms: edges between the two sides of each merge, the same for any block subtree
    other = [Dendrogram.random(n, idx, bp, bq, np.random.default_rng(9), public_leaf=public[idx]) for idx, bp, bq in
             zip(lb.blocks, block_edges(lb, pub), block_edges(lb, pri), strict=True)]
    l2, r2, root2 = compose(lb, [(d.left, d.right, d.root) for d in other])
    full2 = Dendrogram.from_structure(n, np.arange(n), pub, pri, l2, r2, root2)
    top = np.array(full.log_likelihood()) - total
    top2 = np.array(full2.log_likelihood()) - sum(np.array(d.log_likelihood()) for d in other)
    assert np.allclose(top, top2, atol=1e-9) and np.all(top < 0)


def test_block_chains_sample_the_restricted_exponential_mechanism() -> None:
    """6 leaves in the public blocks {0,1,2} and {3,4,5}: 3 x 3 = 9 dendrograms have that top. The
    composed output of independent runs of the blocks' chains (60 steps each, a fresh start each
    time) is counted per topology and compared with exp(a_pub L_pub + a_pri L_pri) of the WHOLE
    composed dendrogram (top terms included: constant over the set). Chi-square; false-failure
    rate about 1e-3 over seeds."""
    n = 6
    pub = _edges([(0, 1), (3, 4), (2, 5)])
    pri = _edges([(0, 2), (1, 2), (4, 5), (1, 4)])
    lb = LeafBlocks(n=n, blocks=(np.arange(3), np.arange(3, 6)), merges=np.array([[0, 1]]), method="test")
    a_pub, a_pri = 1.0, 1.5
    weights = {}
    for ta in _all_trees((0, 1, 2)):
        for tb in _all_trees((3, 4, 5)):
            d = _from_nested((ta, tb), n, pub, pri)
            lp, lq = d.log_likelihood()
            weights[_clusters(d.left, d.right, n)] = math.exp(a_pub * lp + a_pri * lq)
    assert len(weights) == 9
    schedule = [lambda k, a: [Phase("joint", 60, a_pub, a_pri)]] * 2
    rng = np.random.default_rng(2026)
    counts = dict.fromkeys(weights, 0)
    samples = 4000
    for _ in range(samples):
        d, _result = _fit_blocks(n, np.arange(n), pub, pri, None, lb, 1.0, schedule, rng, 0)
        counts[_clusters(d.left, d.right, n)] += 1
    keys = list(weights)
    w = np.array([weights[k] for k in keys])
    assert stats.chisquare(np.array([counts[k] for k in keys]), samples * w / w.sum()).pvalue > 1e-3


def _graph(n: int, seed: int, rho: float = 0.5) -> GraphData:
    rng = np.random.default_rng(seed)
    e = rng.integers(0, n, size=(2, 3 * n))
    e = e[:, e[0] != e[1]]
    return GraphData.from_edges(n, e, private=rng.random(e.shape[1]) < rho, deduplicate=True)


@pytest.mark.parametrize("cls", [EdgeRR, PrivHRG])
def test_mechanisms_with_blocks(cls: type, monkeypatch: pytest.MonkeyPatch) -> None:
    g = _graph(400, seed=3)
    kw = {"rounds": 1} if cls is EdgeRR else {}
    m = cls(epsilon=2.0, block_leaves=64, **kw)
    assert m.params()["block_leaves"] == 64
    assert any("PUBLIC block tree" in a for a in m.guarantee.assumptions)
    assert not any("block tree" in a for a in cls(epsilon=2.0, **kw).guarantee.assumptions)
    clear_check_cache()
    rec = m.convergence_check(g)
    assert rec["passed"] and rec["reads_private_data"] is False
    assert len(convergence_module._CHECK_CACHE) == 1  # the blocks' records kept as one entry
    assert m.convergence_check(g) == rec
    blocks = rec["proxy"]["blocks"]
    assert blocks["blocks"] == len(rec["per_block"]) >= 4 and blocks["largest"] <= 64
    assert rec["required_steps_per_leaf"] == max(b["required_steps_per_leaf"] for b in rec["per_block"])
    fitted = m.fit(g, np.random.default_rng(5))
    assert fitted.info["blocks"] == blocks
    # "auto": each block runs what its own check requires (one private phase per block)
    leaves = sum(b["leaves"] for b in rec["per_block"])
    assert fitted.info["steps"]["private"] == sum(
        int(round(b["required_steps_per_leaf"] * b["leaves"])) for b in rec["per_block"])
    assert leaves == fitted.release.summary()["leaves"]
    out = m.privatize(g, np.random.default_rng(5))
    assert out.edges_private.shape[1] > 0 and np.all(out.edges_private[0] < out.edges_private[1])
    # the same seed gives the same release with one thread
    monkeypatch.setattr(blocks_module.os, "cpu_count", lambda: 1)
    again = m.privatize(g, np.random.default_rng(5))
    assert np.array_equal(again.edges_private, out.edges_private)
    assert np.array_equal(again.edges_public, out.edges_public)


def test_block_leaves_at_or_above_the_leaf_count_is_the_single_chain() -> None:
    g = _graph(150, seed=4)
    one = EdgeRR(epsilon=2.0, rounds=1).privatize(g, np.random.default_rng(7))
    big = EdgeRR(epsilon=2.0, rounds=1, block_leaves=10_000).privatize(g, np.random.default_rng(7))
    assert np.array_equal(one.edges_private, big.edges_private)
    with pytest.raises(ValueError, match="block_leaves"):
        EdgeRR(epsilon=1.0, block_leaves=8)


@pytest.mark.parametrize("cls", [EdgeRR, PrivHRG])
def test_the_published_check_record_does_not_move_with_a_private_edge(cls: type) -> None:
    """The block tree and every block's check read public data only: one private edge more
    between two nodes that already have private edges (so the leaves and V_pri stay) leaves the
    record (published under the manifest's stats) exactly as it was."""
    g = _graph(400, seed=6)
    v_pri = g.private_nodes()
    have = {(int(a), int(b)) for a, b in np.concatenate([g.edges_public, g.edges_private], axis=1).T}
    u, v = next((int(a), int(b)) for a, b in itertools.combinations(v_pri[:40], 2) if (a, b) not in have)
    g2 = g.replace(edges_private=np.concatenate([g.edges_private, [[u], [v]]], axis=1))
    assert np.array_equal(g2.private_nodes(), v_pri)
    kw = {"rounds": 1} if cls is EdgeRR else {}
    m = cls(epsilon=2.0, block_leaves=64, **kw)
    clear_check_cache()
    first = m.convergence_check(g)
    clear_check_cache()
    assert m.convergence_check(g2) == first
    # the fit's public info (what the manifest's stats get) does not move either
    info = [m.fit(x, np.random.default_rng(1)).info for x in (g, g2)]
    for key in ("blocks", "steps", "steps_per_leaf", "n_leaves", "n_private", "convergence_check"):
        assert info[0][key] == info[1][key], key


def test_a_block_proxy_carries_the_whole_graphs_public_leaves() -> None:
    """A leaf whose only public edge leaves its block is still a public leaf in the block's proxy,
    as in the block's real chain (``_fit_blocks``)."""
    from privgraph.mechanisms.hrg.proxy import edge_rr_proxy

    leaves = np.arange(6)
    inside = _edges([(0, 1)])  # leaf 2's public edge (2, 5) crosses to another block
    flags = np.array([True, True, True])
    d = edge_rr_proxy(6, leaves[:3], inside, None, 0, public_leaf=flags).dendrogram(np.random.default_rng(0))
    assert d.w_pub.tolist() == [1, 1, 1]
    plain = edge_rr_proxy(6, leaves[:3], inside, None, 0).dendrogram(np.random.default_rng(0))
    assert plain.w_pub.tolist() == [1, 1, 0]
