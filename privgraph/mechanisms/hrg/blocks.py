r"""Dendrograms restricted to a PUBLIC block tree: EdgeRR's and privHRG's chains on disjoint leaf
blocks, run side by side (issue 28, item 2).

Why. The dendrogram chain's mixing time grows faster than its leaf count: the public check
passes at 8,000 steps per leaf on Cora's 1,328 leaves, needs more than 64,000 on a 10^4-node
Barabasi-Albert graph and did not finish on MUSAE Facebook (15,946 leaves at ``rho = 0.2``). On
Facebook's public graph, cut by METIS into blocks of 241-256 leaves, every block's proxy measured
here passes at 2,000-8,000 steps per leaf.

What is restricted. The leaves are split, from PUBLIC data only, by recursive bisection
(:func:`bisection_blocks`: METIS halves of the public edges among the leaves, until a block has at
most ``max_leaves``; :func:`range_blocks`: halves of the sorted leaf ids, for privHRG, whose
input has no public edge). The bisection's binary tree is kept as the dendrogram's TOP: the output
space is every dendrogram whose top is this tree and whose block subtrees are any dendrograms of
their blocks' leaves. That set is a function of public data, so the exponential mechanism over it
(same score, same sensitivity :math:`\Delta_e` of Lemma 4: a supremum over all dendrograms bounds
it over a subset) has the same guarantee.

Why the blocks' chains are exact. The log-likelihood (Eq. 10) is a sum over internal nodes. A top
node's term counts the edges between its two sides: fixed by the blocks, the same for every
dendrogram of the set. A node inside block ``b``'s subtree counts edges inside ``b`` only. So
:math:`\exp(a \log\mathcal{L}(D)) = c \prod_b \exp(a \log\mathcal{L}_b(D_b))`: the restricted
exponential mechanism is the product of one exponential mechanism per block, and independent
chains on the blocks (each with the whole graph's coefficient :math:`a_{pri}`) have exactly that
product as their stationary law. The public convergence check runs on each block's proxy, and
each block's chain runs what its own check requires.

What it costs. The top of the dendrogram is the public bisection, not fitted to the private
edges: the private edges between blocks are still counted and noised at the top nodes
(CalculateNoisyProb runs on the composed dendrogram), but their grouping above the blocks is the
public one.

All randomness: one child generator per block, spawned from the fit's generator before any chain
runs (``Generator.spawn``), so the result does not depend on the number of threads.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import os
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from privgraph.guarantee.params import check_int
from privgraph.parts.partition import metis_membership

__all__ = ["LeafBlocks", "bisection_blocks", "range_blocks", "block_edges", "compose", "run_blocks",
           "MIN_BLOCK_LEAVES"]

#: The smallest ``max_leaves`` accepted: below it the public top would hold most of the dendrogram.
MIN_BLOCK_LEAVES = 16


@dataclasses.dataclass(frozen=True, eq=False)
class LeafBlocks:
    """A public split of ``n`` leaves into blocks and the binary tree joining them.

    Attributes:
        n: the leaf count.
        blocks: per block, the sorted local leaf indices (into the dendrogram's sorted leaves).
        merges: int64 ``[B - 1, 2]``: merge ``k`` joins two ids (block ``b`` is ``b``, merge ``k``
            is ``B + k``); children come before their parent, the last merge is the root.
        method: how the blocks were made (public description).
    """

    n: int
    blocks: tuple[np.ndarray, ...]
    merges: np.ndarray
    method: str

    @property
    def count(self) -> int:
        return len(self.blocks)

    def block_of(self) -> np.ndarray:
        """int64 ``[n]``: the block of each leaf."""
        out = np.empty(self.n, dtype=np.int64)
        for b, idx in enumerate(self.blocks):
            out[idx] = b
        return out

    def summary(self) -> dict[str, Any]:
        """Public description: method, block count, smallest and largest block."""
        sizes = [int(b.size) for b in self.blocks]
        return {"method": self.method, "blocks": len(sizes), "smallest": min(sizes), "largest": max(sizes)}


def check_block_leaves(value: Any, name: str = "block_leaves") -> int | None:
    """``None`` (one dendrogram over all leaves) or an int ``>=`` :data:`MIN_BLOCK_LEAVES`."""
    if value is None:
        return None
    return check_int(value, name, minimum=MIN_BLOCK_LEAVES)


def _halves(idx: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    h = idx.size // 2
    return idx[:h], idx[h:]


def _metis_halves(idx: np.ndarray, edges: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """METIS bisection of the leaves ``idx`` (sorted) by ``edges`` (local ids, both ends in ``idx``)."""
    if edges.shape[1] == 0:
        return _halves(idx)
    k = idx.size
    loc = np.searchsorted(idx, edges)
    src = np.concatenate([loc[0], loc[1]])
    dst = np.concatenate([loc[1], loc[0]])
    order = np.argsort(src, kind="stable")
    xadj = np.zeros(k + 1, dtype=np.int32)
    np.cumsum(np.bincount(src, minlength=k), out=xadj[1:])
    side = metis_membership(xadj, dst[order].astype(np.int32), 2) == 1
    if side.all() or not side.any():
        return _halves(idx)
    return idx[~side], idx[side]


def _split_tree(
    n: int, max_leaves: int, method: str, halve: Callable[[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]],
    edges: np.ndarray,
) -> LeafBlocks:
    """Recursive bisection, left first: a set above ``max_leaves`` is halved by
    ``halve(idx, edges inside idx)``; the edges between the halves are dropped going down. The
    depth is about ``log2(n / max_leaves)``."""
    blocks: list[np.ndarray] = []
    merges: list[tuple[tuple[str, int], tuple[str, int]]] = []
    side = np.zeros(n, dtype=bool)

    def split(idx: np.ndarray, inner: np.ndarray) -> tuple[str, int]:
        if idx.size <= max_leaves:
            blocks.append(np.sort(idx))
            return ("b", len(blocks) - 1)
        a, b = halve(idx, inner)
        side[b] = True
        ends = side[inner]
        side[b] = False
        left = split(a, inner[:, ~ends[0] & ~ends[1]])
        right = split(b, inner[:, ends[0] & ends[1]])
        merges.append((left, right))
        return ("m", len(merges) - 1)

    split(np.arange(n, dtype=np.int64), edges)
    count = len(blocks)
    arr = np.array([[r[1] if r[0] == "b" else count + r[1] for r in pair] for pair in merges],
                   dtype=np.int64).reshape(-1, 2)
    return LeafBlocks(n=n, blocks=tuple(blocks), merges=arr, method=method)


def bisection_blocks(n: int, public_edges: np.ndarray, max_leaves: int) -> LeafBlocks:
    """Blocks of at most ``max_leaves`` of ``n`` leaves by recursive METIS bisection of
    ``public_edges`` (int64 ``[2, m]``, local leaf indices; PUBLIC: this reads no private edge).
    A set without inner edges, or one METIS cannot split, is halved in index order.
    ``O(m log B)`` for ``B`` blocks."""
    max_leaves = check_int(max_leaves, "max_leaves", minimum=1)
    e = np.asarray(public_edges, dtype=np.int64).reshape(2, -1)
    return _split_tree(int(n), max_leaves, "public METIS bisection", _metis_halves, e)


def range_blocks(n: int, max_leaves: int) -> LeafBlocks:
    """Blocks of at most ``max_leaves`` of ``n`` leaves by halving the sorted leaf ids (reads no edge)."""
    max_leaves = check_int(max_leaves, "max_leaves", minimum=1)
    return _split_tree(int(n), max_leaves, "halves of the sorted leaf ids", lambda idx, _e: _halves(idx),
                       np.zeros((2, 0), dtype=np.int64))


def block_edges(blocks: LeafBlocks, edges: np.ndarray) -> list[np.ndarray]:
    """Per block, the columns of ``edges`` (local leaf indices ``[2, m]``, into all ``n`` leaves) with
    both ends in it, in the same indices."""
    e = np.asarray(edges, dtype=np.int64).reshape(2, -1)
    of = blocks.block_of()
    b0, b1 = of[e[0]], of[e[1]]
    inside = b0 == b1
    order = np.argsort(b0[inside], kind="stable")
    kept = e[:, inside][:, order]
    bounds = np.searchsorted(b0[inside][order], np.arange(blocks.count + 1))
    return [kept[:, bounds[b] : bounds[b + 1]] for b in range(blocks.count)]


def compose(blocks: LeafBlocks, children: Sequence[tuple[np.ndarray, np.ndarray, int]]) -> tuple[np.ndarray, np.ndarray, int]:
    """One dendrogram's ``(left, right, root)`` over all ``n`` leaves (ids: leaves ``0..n-1``,
    internal ``n + i``) from each block's ``(left, right, root)`` in its own ids and the block
    tree's merges on top."""
    n = blocks.n
    left = np.empty(max(n - 1, 0), dtype=np.int64)
    right = np.empty_like(left)
    ids = np.empty(blocks.count + blocks.merges.shape[0], dtype=np.int64)
    nxt = n
    for b, (idx, (bl, br, root)) in enumerate(zip(blocks.blocks, children, strict=True)):
        k = idx.size
        mapping = np.concatenate([idx, np.arange(nxt, nxt + k - 1, dtype=np.int64)])
        left[nxt - n : nxt - n + k - 1] = mapping[bl]
        right[nxt - n : nxt - n + k - 1] = mapping[br]
        ids[b] = mapping[root]
        nxt += k - 1
    for j, (a, c) in enumerate(blocks.merges):
        left[nxt - n], right[nxt - n] = ids[a], ids[c]
        ids[blocks.count + j] = nxt
        nxt += 1
    assert nxt == 2 * n - 1
    return left, right, int(ids[-1])


def run_blocks(work: Callable[[int], Any], count: int, sizes: Sequence[int], threads: int | None = None) -> list[Any]:
    """``[work(b) for b in range(count)]`` in a thread pool (largest blocks first; the chains
    release the GIL), results in block order; ``threads`` default: the CPU count."""
    threads = min(count, os.cpu_count() or 1) if threads is None else check_int(threads, "threads", minimum=1)
    if threads <= 1 or count <= 1:
        return [work(b) for b in range(count)]
    order = sorted(range(count), key=lambda b: -sizes[b])
    with concurrent.futures.ThreadPoolExecutor(max_workers=threads) as pool:
        futures = {b: pool.submit(work, b) for b in order}
        return [futures[b].result() for b in range(count)]
