"""The integer edge arrays every edge mechanism reads and writes: node-id validation, the
symmetric CSR of the private edges, the OR rule over directed reports, and the merge of a noisy
release with the public edges (all deterministic: no randomness, no privacy cost).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from privgraph.graph import in_sorted, sorted_unique
from privgraph.guarantee.params import check_int

__all__ = [
    "MAX_NODES",
    "as_ids",
    "check_node_inputs",
    "check_num_nodes",
    "merge_with_public",
    "neighbour_ends",
    "private_csr",
    "symmetrize_reports",
]

#: Largest node count whose (u, v) pair keys u * n + v fit in int64.
MAX_NODES = 3_037_000_499


def as_ids(a: Any, name: str, ndim: int) -> np.ndarray:
    """``a`` as a contiguous int64 array of ``ndim`` dimensions (node ids or counts).

    Raises:
        ValueError: another number of dimensions.
        TypeError: a non-empty array of non-integers.
    """
    arr = np.asarray(a)
    if arr.ndim != ndim:
        raise ValueError(f"{name} must be a {ndim}-D array, got shape {list(arr.shape)}")
    if arr.size and not np.issubdtype(arr.dtype, np.integer):
        raise TypeError(f"{name} must hold integer node ids, got dtype {arr.dtype}")
    return np.ascontiguousarray(arr, dtype=np.int64)


def check_num_nodes(num_nodes: Any) -> int:
    """A node count: an int in ``[0, MAX_NODES]`` (pair keys ``u * n + v`` fit in int64)."""
    n = check_int(num_nodes, "num_nodes", minimum=0)
    if n > MAX_NODES:
        raise ValueError(f"num_nodes must be <= {MAX_NODES} (int64 pair keys), got {n}")
    return n


def check_node_inputs(
    nodes: Any, indptr: Any, indices: Any, candidates: Any
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, int]:
    """Validate the arguments of a per-node edge mechanism (``privatize_nodes``).

    Returns:
        tuple: ``nodes``, ``indptr``, ``indices``, ``candidates`` as int64 arrays and ``n``
        (``len(indptr) - 1``).

    Raises:
        ValueError: ``candidates`` not sorted and distinct in ``[0, n)``; ``nodes`` out of range,
            repeated, or not all in ``candidates``; a neighbour of a node outside ``candidates``.
        TypeError: non-integer ids.
    """
    nodes = as_ids(nodes, "nodes", 1)
    indptr = as_ids(indptr, "indptr", 1)
    indices = as_ids(indices, "indices", 1)
    candidates = as_ids(candidates, "candidates", 1)
    if indptr.size == 0:
        raise ValueError("indptr must have num_nodes + 1 entries")
    n = check_num_nodes(indptr.size - 1)
    if candidates.size and (candidates[0] < 0 or candidates[-1] >= n or np.any(np.diff(candidates) <= 0)):
        raise ValueError(f"candidates must be sorted, distinct node ids in [0, {n})")
    if nodes.size:
        if nodes.min() < 0 or nodes.max() >= n:
            raise ValueError(f"nodes: ids out of range [0, {n})")
        if sorted_unique(nodes).size != nodes.size:
            raise ValueError("nodes must be distinct (each node reports once)")
        if not np.all(in_sorted(nodes, candidates)):
            raise ValueError("nodes must all be in candidates (V_pri)")
    return nodes, indptr, indices, candidates, n


def neighbour_ends(
    nodes: np.ndarray, indptr: np.ndarray, indices: np.ndarray, candidates: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The private edge ends of validated reporters ``nodes``: ``(deg, owner, nbr)``, the degrees
    ``[b]`` and the ends ``(owner, nbr)`` ``[sum deg]`` in the order of ``nodes``.

    Raises:
        ValueError: a neighbour of a reporter is not in ``candidates`` (``V_pri``).
    """
    deg = indptr[nodes + 1] - indptr[nodes]
    total = int(deg.sum())
    offsets = np.repeat(indptr[nodes] - (np.cumsum(deg) - deg), deg) + np.arange(total)
    owner = np.repeat(nodes, deg)
    nbr = indices[offsets]
    if total:
        if total * 16 > indptr.size:  # many ends: one O(n) mask beats a binary search per end
            member = np.zeros(indptr.size - 1, dtype=bool)
            member[candidates] = True
            inside = bool(member[nbr].all())
        else:
            inside = bool(np.all(in_sorted(nbr, candidates)))
        if not inside:
            raise ValueError("a neighbour of a reporter is not in candidates (V_pri)")
    return deg, owner, nbr


def private_csr(edges_private: np.ndarray, num_nodes: int) -> tuple[np.ndarray, np.ndarray]:
    """The symmetric CSR of undirected edges: both directions, neighbours sorted per row.

    Args:
        edges_private (np.ndarray): int64 ``[2, m]`` undirected edges (each stored once).
        num_nodes (int): number of nodes ``n``.

    Returns:
        tuple: ``indptr`` int64 ``[n + 1]`` and ``indices`` int64 ``[2 m]``; the neighbours of
        ``v`` are ``indices[indptr[v]:indptr[v + 1]]``, ascending. ``O(m log m)`` time.
    """
    n = check_num_nodes(num_nodes)
    e = as_ids(edges_private, "edges_private", 2)
    if e.shape[0] != 2:
        raise ValueError(f"edges_private must have shape [2, m], got {list(e.shape)}")
    if e.size and (e.min() < 0 or e.max() >= n):
        raise ValueError(f"edges_private: node ids out of range [0, {n})")
    src = np.concatenate([e[0], e[1]])
    dst = np.concatenate([e[1], e[0]])
    order = np.argsort(src * np.int64(n) + dst, kind="stable")
    indices = dst[order]
    indptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(src, minlength=n), out=indptr[1:])
    return indptr, indices


def symmetrize_reports(reports: np.ndarray, num_nodes: int) -> np.ndarray:
    """The undirected edges of directed reports: ``(a, b)`` -> ``{a, b}``, ``u < v``, deduplicated.

    An undirected edge is released when EITHER endpoint reports it. Each endpoint's neighbour
    list is eps-edge LDP, and one edge touches two lists, so the undirected release is
    2 eps relationship DP (paper 004, Proposition 1).

    Args:
        reports (np.ndarray): int64 ``[2, k]`` directed reports ``(reporter, reported)``.
        num_nodes (int): number of nodes ``n``.

    Returns:
        np.ndarray: int64 ``[2, m']``, sorted by ``(u, v)``, ``u < v``, no duplicates.
    """
    n = check_num_nodes(num_nodes)
    r = as_ids(reports, "reports", 2)
    if r.shape[0] != 2:
        raise ValueError(f"reports must have shape [2, k], got {list(r.shape)}")
    if r.size and (r.min() < 0 or r.max() >= n):
        raise ValueError(f"reports: node ids out of range [0, {n})")
    if np.any(r[0] == r[1]):
        raise ValueError("reports: a node reported itself")
    u = np.minimum(r[0], r[1])
    v = np.maximum(r[0], r[1])
    keys = sorted_unique(u * np.int64(n) + v)
    return np.stack([keys // n, keys % n]).astype(np.int64)


def merge_with_public(noisy_private: np.ndarray, edges_public: np.ndarray) -> np.ndarray:
    """The noisy private edges that are NOT public edges (post-processing).

    The released graph is ``edges_public`` (released as they are) together with the returned
    edges; removing the noisy edges that coincide with public ones only avoids a duplicate,
    and the two sets are then disjoint, as :class:`~privgraph.graph.GraphData` requires of its
    ``edges_public`` / ``edges_private`` fields.

    Args:
        noisy_private (np.ndarray): int64 ``[2, m']`` undirected noisy edges, ``u < v``.
        edges_public (np.ndarray): int64 ``[2, m]`` public edges, ``u < v``.

    Returns:
        np.ndarray: int64 ``[2, m'']``, the columns of ``noisy_private`` not in ``edges_public``
        (order kept).
    """
    a = as_ids(noisy_private, "noisy_private", 2)
    b = as_ids(edges_public, "edges_public", 2)
    for name, arr in (("noisy_private", a), ("edges_public", b)):
        if arr.shape[0] != 2:
            raise ValueError(f"{name} must have shape [2, m], got {list(arr.shape)}")
        if arr.size and (arr.min() < 0 or np.any(arr[0] >= arr[1])):
            raise ValueError(f"{name} must hold non-negative ids with u < v in every column")
    if a.shape[1] == 0 or b.shape[1] == 0:
        return a.copy()
    n = np.int64(max(int(a.max()), int(b.max())) + 1)
    check_num_nodes(int(n))
    keep = ~in_sorted(a[0] * n + a[1], np.sort(b[0] * n + b[1]))
    return a[:, keep]
