r"""Sampling private edges from a released noisy dendrogram, in ``O(output)``.

For every internal node :math:`r` the pairs whose lowest common ancestor is :math:`r` are the
:math:`\bar L_r \times \bar R_r` (private left leaf, private right leaf) pairs, and each is an edge
independently with probability :math:`\tilde p_r` (Alg. 2, lines 21-29). Equivalently:
draw :math:`k_r \sim \mathrm{Binomial}(\bar L_r \bar R_r, \tilde p_r)` and place :math:`k_r` pairs
uniformly without replacement (:func:`~privgraph.mechanisms.sampling.sample_distinct_blocks`).
With the private leaves in in-order, every internal node's left and right private leaves are two
adjacent contiguous ranges, so pair index :math:`j` maps to
``(order[s + j // R], order[s + L + j % R])`` in O(1). No pair is ever visited unless sampled.

Internal nodes are independent, so any partition of them can be sampled in parallel with
separate seeds (:func:`split_internal_nodes`, :func:`sample_internal_nodes`); the union has the
same law as one pass over all nodes. Everything here is post-processing of the release.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from privgraph.mechanisms.base import check_generator
from privgraph.guarantee.params import check_int
from privgraph.mechanisms.hrg.noisy_prob import NoisyDendrogram
from privgraph.mechanisms.sampling import sample_distinct_blocks

__all__ = ["sample_internal_nodes", "sample_all", "split_internal_nodes"]


def _as_nodes(internal_nodes: Any, n_int: int) -> np.ndarray:
    arr = np.asarray(internal_nodes)
    if arr.ndim != 1:
        raise ValueError(f"internal_nodes must be 1-D, got shape {list(arr.shape)}")
    if arr.size and not np.issubdtype(arr.dtype, np.integer):
        raise TypeError(f"internal_nodes must hold integer internal indices, got dtype {arr.dtype}")
    arr = arr.astype(np.int64, copy=False)
    if arr.size and (arr.min() < 0 or arr.max() >= n_int):
        raise ValueError(f"internal_nodes must lie in [0, {n_int})")
    if np.unique(arr).size != arr.size:
        raise ValueError("internal_nodes must be distinct")
    return arr


def sample_internal_nodes(
    noisy: NoisyDendrogram, internal_nodes: Any, rng: np.random.Generator
) -> np.ndarray:
    r"""The sampled private edges whose lowest common ancestor is in ``internal_nodes``.

    Args:
        noisy (NoisyDendrogram): the release.
        internal_nodes (array-like): distinct internal indices in ``[0, n - 1)``.
        rng (np.random.Generator): the only source of randomness.

    Returns:
        np.ndarray: int64 ``[2, k]`` edges in graph node ids, ``u < v``, sorted by ``(u, v)``, no
        duplicates; :math:`E[k] = \sum_r \bar L_r \bar R_r \tilde p_r`.

    Runtime: ``O(|internal_nodes| + k log k)`` time and memory.
    """
    rng = check_generator(rng)
    if not isinstance(noisy, NoisyDendrogram):
        raise TypeError(f"noisy must be a NoisyDendrogram, got {type(noisy).__name__}")
    nodes = _as_nodes(internal_nodes, noisy.num_internal)
    if nodes.size == 0:
        return np.zeros((2, 0), dtype=np.int64)
    lc = noisy.n_left[nodes]
    rc = noisy.n_right[nodes]
    totals = lc * rc
    counts = rng.binomial(totals, noisy.prob[nodes]).astype(np.int64)
    block, idx = sample_distinct_blocks(totals, counts, rng)
    if idx.size == 0:
        return np.zeros((2, 0), dtype=np.int64)
    start = noisy.private_start[nodes[block]]
    a = idx // rc[block]
    b = idx % rc[block]
    u = noisy.private_order[start + a]
    v = noisy.private_order[start + lc[block] + b]
    lo = np.minimum(u, v)
    hi = np.maximum(u, v)
    order = np.argsort(lo * np.int64(noisy.num_nodes) + hi, kind="stable")
    return np.ascontiguousarray(np.stack([lo[order], hi[order]]))


def sample_all(noisy: NoisyDendrogram, rng: np.random.Generator) -> np.ndarray:
    """:func:`sample_internal_nodes` over every internal node."""
    return sample_internal_nodes(noisy, np.arange(noisy.num_internal, dtype=np.int64), rng)


def split_internal_nodes(noisy: NoisyDendrogram, parts: int) -> list[np.ndarray]:
    r"""Split the internal nodes into ``parts`` chunks of roughly equal expected work.

    Nodes are ordered by their first private leaf in in-order (so a chunk is a run of nearby
    subtrees) and cut where the running sum of ``1 + L R p`` (per-node overhead plus expected
    output) crosses multiples of its total / ``parts``. Data-independent beyond the release.

    Returns:
        list[np.ndarray]: ``parts`` sorted int64 arrays (some may be empty), together a partition
        of ``range(n - 1)``.
    """
    if not isinstance(noisy, NoisyDendrogram):
        raise TypeError(f"noisy must be a NoisyDendrogram, got {type(noisy).__name__}")
    parts = check_int(parts, "parts", minimum=1)
    n_int = noisy.num_internal
    if n_int == 0:
        return [np.zeros(0, dtype=np.int64) for _ in range(parts)]
    order = np.argsort(noisy.private_start, kind="stable")
    cost = 1.0 + noisy.expected_edges()[order]
    cum = np.cumsum(cost)
    cuts = np.searchsorted(cum, cum[-1] * np.arange(1, parts) / parts, side="right")
    return [np.sort(chunk) for chunk in np.split(order, cuts)]
