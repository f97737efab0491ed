r"""Binary dendrograms over a graph's nodes, as flat arrays, with the HRG counts of Eq. 10/11.

A dendrogram over ``n`` leaves has ``n - 1`` internal nodes. Nodes share one id space: leaves are
``0 .. n-1`` (leaf ``i`` stands for graph node ``leaf_nodes[i]``), internal node ``i`` (its
*internal index*) has id ``n + i``. ``left[i]``, ``right[i]`` hold the ids of its children and
``parent[x]`` the id of a node's parent (``-1`` at the root).

For every internal node :math:`r` the structure keeps, for the PUBLIC and the PRIVATE edge sets
separately,

- the leaf counts :math:`L_r`, :math:`R_r` (leaves under each child that carry the set's flag:
  a *public leaf* is incident to a public edge of the dendrogram, a *private leaf* is in
  :math:`V_{pri}`; paper 002, Eq. 10 and the text after it),
- :math:`e_r`, the number of the set's edges whose lowest common ancestor (LCA) is :math:`r`,

from which the log-likelihood of Eq. 10/11 follows,

.. math::
    \log \mathcal{L} = \sum_r e_r \ln p_r + (L_r R_r - e_r) \ln(1 - p_r)
    = -\sum_r L_r R_r\, h(p_r), \qquad p_r = \frac{e_r}{L_r R_r}, \quad 0 \ln 0 = 0,

with :math:`h` the binary entropy in nats. Each edge also stores its LCA (``lca``, an internal
index); :meth:`Dendrogram.recompute` rebuilds every count from the structure alone in
:math:`O(n + m \cdot \text{depth})`.

The MCMC move of Fig. 5 (:meth:`Dendrogram.move`, and the chunked kernel of
:meth:`Dendrogram.run_moves` that :mod:`privgraph.mechanisms.hrg.mcmc` runs; both in
:mod:`~privgraph.mechanisms.hrg.dendrogram_kernels`) updates these counts INCREMENTALLY. For a
non-root internal node :math:`c` with children :math:`A, B` under
:math:`r = \mathrm{parent}(c)`, whose other child is :math:`C`, the move pairs
:math:`X \in \{A, B\}` with :math:`C` under a new lower node and hangs the remaining :math:`Y`
beside it. Only the two nodes' counts change:
:math:`e_{low} = e(X, C)`, :math:`e_{top} = e(A, B) + e(Y, C) = e_c + e_r - e(X, C)`. The single
unknown :math:`e(X, C)` is read off the edges incident to the LIGHTER of :math:`A, B` (by leaves
plus incident edges): an edge at a leaf of :math:`A` has LCA :math:`r` exactly when its other end
lies in :math:`C`. On acceptance the two internal ids are reassigned to the new top and bottom
node so that only edges incident to that lighter subtree need a new LCA label, so a step costs
:math:`O(\min(w_A, w_B))` and never touches the rest of the tree. Summed over all internal nodes,
:math:`\sum_c \min(w_A, w_B) \le W \log_2 W` for ANY tree (every leaf and edge end lies on the
lighter side at most :math:`\log_2 W` times), so a uniformly chosen step costs
:math:`O((1 + \bar d) \log n)` in the worst case and much less on typical trees.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from privgraph.graph import in_sorted, sorted_unique
from privgraph.mechanisms.base import check_generator
from privgraph.mechanisms.hrg.dendrogram_kernels import (
    build_random,
    inorder_ranges,
    mcmc_step,
    preorder,
    recompute_counts,
    run_chunk,
)

__all__ = [
    "Dendrogram",
    "log_likelihood_terms",
    "binary_log_likelihood",
]


# -- likelihood ---------------------------------------------------------------------------------
def binary_log_likelihood(e: np.ndarray, pairs: np.ndarray) -> np.ndarray:
    r"""Per-node terms :math:`e \ln p + (N - e) \ln(1 - p)`, :math:`p = e / N`, :math:`0 \ln 0 = 0`.

    Args:
        e (np.ndarray): edge counts :math:`e_r` (``0 <= e <= N``).
        pairs (np.ndarray): pair counts :math:`N_r = L_r R_r`.

    Returns:
        np.ndarray: float64 terms (all ``<= 0``).
    """
    e = np.asarray(e, dtype=np.float64)
    pairs = np.asarray(pairs, dtype=np.float64)
    if np.any(e < 0) or np.any(e > pairs):
        raise ValueError("edge counts must satisfy 0 <= e <= L * R")
    with np.errstate(divide="ignore", invalid="ignore"):
        p = np.where(pairs > 0, e / np.where(pairs > 0, pairs, 1.0), 0.0)
        t1 = np.where(e > 0, e * np.log(np.where(e > 0, p, 1.0)), 0.0)
        rest = pairs - e
        t2 = np.where(rest > 0, rest * np.log1p(-np.where(rest > 0, p, 0.0)), 0.0)
    return t1 + t2


def log_likelihood_terms(d: Dendrogram, which: str) -> np.ndarray:
    """The per-internal-node terms of Eq. 10 for ``which`` in ``{"public", "private"}``."""
    if which == "public":
        cnt, e = d.cnt_pub, d.e_pub
    elif which == "private":
        cnt, e = d.cnt_pri, d.e_pri
    else:
        raise ValueError(f"which must be 'public' or 'private', got {which!r}")
    pairs = cnt[d.left] * cnt[d.right]
    return binary_log_likelihood(e, pairs)


# -- the structure --------------------------------------------------------------------------------
def _leaf_flags(flags: Any, default: np.ndarray, edges: np.ndarray, kind: str) -> np.ndarray:
    """``flags`` (``default`` when None) as bool ``[n]``, true at every endpoint of the ``kind``
    (public or private) ``edges``; ``ValueError`` otherwise."""
    n = default.shape[0]
    flags = np.asarray(default if flags is None else flags, dtype=bool)
    if flags.shape != (n,):
        raise ValueError(f"{kind}_leaf must have shape [{n}], got {list(flags.shape)}")
    if edges.size and not flags[edges.ravel()].all():
        raise ValueError(f"every endpoint of a {kind} edge must be a {kind} leaf")
    return flags


def _incidence(edges: np.ndarray, deg: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The CSR of incident edge ids per leaf: ``(adj, indptr)``, leaf ``v``'s edges being
    ``adj[indptr[v]:indptr[v + 1]]`` in edge-id order."""
    ids = np.tile(np.arange(edges.shape[1], dtype=np.int64), 2)
    order = np.argsort(edges.ravel(), kind="stable")
    indptr = np.zeros(deg.size + 1, dtype=np.int64)
    np.cumsum(deg, out=indptr[1:])
    return np.ascontiguousarray(ids[order]), indptr


def _local_edges(edges: Any, leaf_nodes: np.ndarray, name: str) -> np.ndarray:
    e = np.asarray(edges)
    if e.ndim != 2 or e.shape[0] != 2:
        raise ValueError(f"{name} must have shape [2, m], got {list(e.shape)}")
    if e.size and not np.issubdtype(e.dtype, np.integer):
        raise TypeError(f"{name} must hold integer node ids, got dtype {e.dtype}")
    e = e.astype(np.int64, copy=False)
    if e.shape[1] == 0:
        return np.zeros((2, 0), dtype=np.int64)
    if np.any(e[0] == e[1]):
        raise ValueError(f"{name}: self-loops are not allowed")
    if not np.all(in_sorted(e.ravel(), leaf_nodes)):
        raise ValueError(f"{name}: every endpoint must be a leaf of the dendrogram")
    loc = np.searchsorted(leaf_nodes, e)
    u = np.minimum(loc[0], loc[1])
    v = np.maximum(loc[0], loc[1])
    n = np.int64(leaf_nodes.size)
    keys = u * n + v
    if sorted_unique(keys).size != keys.size:
        raise ValueError(f"{name}: duplicate edges")
    return np.stack([u, v])


class Dendrogram:
    r"""A binary dendrogram over ``n`` leaves with the public/private HRG counts (paper 002, Eq. 10).

    Build one with :meth:`random` (the random initial dendrogram :math:`D_0` of Alg. 2) or
    :meth:`from_structure` (a given tree, e.g. in tests). The counts are kept consistent with the
    structure by :meth:`move` (incremental, Fig. 5) and :meth:`recompute` (from scratch).

    Args (of :meth:`random` / :meth:`from_structure`):
        num_nodes (int): node count of the graph the leaves come from.
        leaf_nodes (np.ndarray): sorted distinct graph node ids, one per leaf.
        edges_public, edges_private (np.ndarray): int64 ``[2, m]`` edges in graph node ids,
            every endpoint a leaf, no duplicates (across both sets, unless ``allow_shared``).
        private_leaf (np.ndarray, optional): boolean ``[n]``, the leaves in :math:`V_{pri}`
            (default: all leaves).
        allow_shared (bool, optional): let one pair be both a public and a private edge (two edge
            records with their own LCA; every count stays exact). Only the PUBLIC convergence
            proxy (:mod:`~privgraph.mechanisms.hrg.convergence`) uses it, where the public edges
            play both roles; a real input never has such a pair (default: ``False``).
        public_leaf (np.ndarray, optional): boolean ``[n]``, the public leaves (default: the
            leaves incident to one of ``edges_public``). A block's dendrogram
            (:mod:`~privgraph.mechanisms.hrg.blocks`) passes the whole graph's flags, so that its
            counts are those of the composed dendrogram.

    Public leaves are the leaves incident to a public edge. No array is ever ``O(n^2)``.
    """

    def __init__(
        self,
        num_nodes: int,
        leaf_nodes: np.ndarray,
        edges_public: Any,
        edges_private: Any,
        left: np.ndarray,
        right: np.ndarray,
        root: int,
        private_leaf: np.ndarray | None = None,
        allow_shared: bool = False,
        public_leaf: np.ndarray | None = None,
    ) -> None:
        leaf_nodes = np.asarray(leaf_nodes, dtype=np.int64)
        if leaf_nodes.ndim != 1 or (leaf_nodes.size > 1 and np.any(np.diff(leaf_nodes) <= 0)):
            raise ValueError("leaf_nodes must be a sorted 1-D array of distinct node ids")
        if leaf_nodes.size and (leaf_nodes[0] < 0 or leaf_nodes[-1] >= num_nodes):
            raise ValueError(f"leaf_nodes must lie in [0, {num_nodes})")
        n = int(leaf_nodes.size)
        self.num_nodes = int(num_nodes)
        self.leaf_nodes = leaf_nodes
        self.n = n
        pub = _local_edges(edges_public, leaf_nodes, "edges_public")
        pri = _local_edges(edges_private, leaf_nodes, "edges_private")
        both = np.concatenate([pub, pri], axis=1)
        keys = both[0] * np.int64(max(n, 1)) + both[1]
        if not allow_shared and sorted_unique(keys).size != keys.size:
            raise ValueError("an edge is both public and private")
        self.m_pub = int(pub.shape[1])
        self.edges = np.ascontiguousarray(both)
        m = int(both.shape[1])
        private_leaf = _leaf_flags(private_leaf, np.ones(n, dtype=bool), pri, "private")
        public_leaf = _leaf_flags(public_leaf, np.bincount(pub.ravel(), minlength=n) > 0, pub, "public")
        deg = np.bincount(both.ravel(), minlength=n).astype(np.int64)
        self.w_pub = public_leaf.astype(np.int64)
        self.w_pri = private_leaf.astype(np.int64)
        self.w_work = 1 + deg
        self.adj, self.indptr = _incidence(both, deg)
        n_int = max(n - 1, 0)
        left = np.ascontiguousarray(left, dtype=np.int64)
        right = np.ascontiguousarray(right, dtype=np.int64)
        if left.shape != (n_int,) or right.shape != (n_int,):
            raise ValueError(f"left and right must have shape [{n_int}]")
        self.left = left
        self.right = right
        self._state = np.array([int(root)], dtype=np.int64)
        self.parent = np.full(max(2 * n - 1, 0), -1, dtype=np.int64)
        size = max(2 * n - 1, 0)
        self.cnt_pub = np.zeros(size, dtype=np.int64)
        self.cnt_pri = np.zeros(size, dtype=np.int64)
        self.work = np.zeros(size, dtype=np.int64)
        self.e_pub = np.zeros(n_int, dtype=np.int64)
        self.e_pri = np.zeros(n_int, dtype=np.int64)
        self.lca = np.zeros(m, dtype=np.int64)
        self.ll = np.zeros(2, dtype=np.float64)
        self._stack = np.empty(2 * n + 2, dtype=np.int64)
        self._buf = np.empty(2 * m + 1, dtype=np.int64)
        self.recompute()

    # -- constructors -----------------------------------------------------------------------------
    @classmethod
    def random(
        cls,
        num_nodes: int,
        leaf_nodes: np.ndarray,
        edges_public: Any,
        edges_private: Any,
        rng: np.random.Generator,
        *,
        private_leaf: np.ndarray | None = None,
        allow_shared: bool = False,
        public_leaf: np.ndarray | None = None,
    ) -> Dendrogram:
        """A random dendrogram (a random coalescent: join two uniform clusters, ``n - 1`` times).

        Expected depth ``O(log n)``; randomness only from ``rng``.
        """
        rng = check_generator(rng)
        leaf_nodes = np.asarray(leaf_nodes, dtype=np.int64)
        n = int(leaf_nodes.size)
        n_int = max(n - 1, 0)
        left = np.zeros(n_int, dtype=np.int64)
        right = np.zeros(n_int, dtype=np.int64)
        parent = np.full(max(2 * n - 1, 1), -1, dtype=np.int64)
        if n >= 2:
            sizes = np.arange(n, 1, -1, dtype=np.int64)
            pick_a = rng.integers(0, sizes)
            pick_b = rng.integers(0, sizes - 1)
            build_random(np.int64(n), pick_a.astype(np.int64), pick_b.astype(np.int64), parent, left, right)
        root = 2 * n - 2 if n >= 1 else -1
        return cls(num_nodes, leaf_nodes, edges_public, edges_private, left, right, root,
                   private_leaf=private_leaf, allow_shared=allow_shared, public_leaf=public_leaf)

    @classmethod
    def from_structure(
        cls,
        num_nodes: int,
        leaf_nodes: np.ndarray,
        edges_public: Any,
        edges_private: Any,
        left: np.ndarray,
        right: np.ndarray,
        root: int,
        *,
        private_leaf: np.ndarray | None = None,
    ) -> Dendrogram:
        """A dendrogram with the given children arrays (ids: leaves ``0..n-1``, internal ``n + i``)."""
        return cls(num_nodes, leaf_nodes, edges_public, edges_private, left, right, root,
                   private_leaf=private_leaf)

    # -- views ------------------------------------------------------------------------------------
    @property
    def root(self) -> int:
        """Id of the root (``-1`` for an empty dendrogram)."""
        return int(self._state[0])

    @property
    def num_internal(self) -> int:
        return max(self.n - 1, 0)

    @property
    def num_edges(self) -> int:
        return int(self.edges.shape[1])

    def pairs(self, which: str) -> np.ndarray:
        """``L_r R_r`` per internal node for ``which`` in ``{"public", "private"}``."""
        cnt = self.cnt_pub if which == "public" else self.cnt_pri
        if which not in ("public", "private"):
            raise ValueError(f"which must be 'public' or 'private', got {which!r}")
        return cnt[self.left] * cnt[self.right]

    def log_likelihood(self) -> tuple[float, float]:
        """``(log L_pub, log L_pri)`` of Eq. 10 summed from the stored counts (exact, not running)."""
        if self.num_internal == 0:
            return 0.0, 0.0
        return (
            float(np.sum(log_likelihood_terms(self, "public"))),
            float(np.sum(log_likelihood_terms(self, "private"))),
        )

    @property
    def running_log_likelihood(self) -> tuple[float, float]:
        """The incrementally maintained ``(log L_pub, log L_pri)`` (float drift ~1e-12 relative)."""
        return float(self.ll[0]), float(self.ll[1])

    def depth(self) -> int:
        """Height of the tree (edges on the longest root-leaf path)."""
        if self.n <= 1:
            return 0
        _, depth = preorder(np.int64(self.n), np.int64(self.root), self.left, self.right)
        return int(depth.max())

    # -- consistency --------------------------------------------------------------------------------
    def recompute(self) -> None:
        """Rebuild parents, leaf counts, every edge's LCA and every ``e_r`` from the structure.

        ``O(n + m * depth)``. Raises ``ValueError`` when ``left``/``right`` are not a binary tree
        over all leaves rooted at :attr:`root`.
        """
        n = self.n
        if n == 0:
            self.ll[:] = 0.0
            return
        if n == 1:
            self.cnt_pub[0] = self.w_pub[0]
            self.cnt_pri[0] = self.w_pri[0]
            self.work[0] = self.w_work[0]
            self.ll[:] = 0.0
            return
        root = self.root
        if not n <= root < 2 * n - 1:
            raise ValueError(f"root must be an internal node id in [{n}, {2 * n - 1}), got {root}")
        ch = np.concatenate([self.left, self.right])
        if ch.min() < 0 or ch.max() >= 2 * n - 1 or np.bincount(ch, minlength=2 * n - 1)[
            np.arange(2 * n - 1) != root
        ].min() != 1 or np.any(ch == root):
            raise ValueError("left/right do not form a binary tree: every non-root node needs exactly one parent")
        ok = recompute_counts(
            np.int64(n), np.int64(root), self.left, self.right, self.parent, self.w_pub, self.w_pri,
            self.w_work, self.edges[0].copy(), self.edges[1].copy(), np.int64(self.m_pub),
            self.cnt_pub, self.cnt_pri, self.work, self.e_pub, self.e_pri, self.lca,
        )
        if not ok:
            raise ValueError("left/right do not form a binary tree reaching every node from the root")
        self.ll[:] = self.log_likelihood()

    def counts_from_scratch(self) -> dict[str, Any]:
        """A fresh recomputation on a copy: ``lca``, ``e_pub``, ``e_pri``, ``cnt_pub``, ``cnt_pri``,
        ``work``, ``parent`` and ``log_likelihood`` (for checking the incremental state)."""
        d = self.copy()
        d.recompute()
        return {
            "lca": d.lca, "e_pub": d.e_pub, "e_pri": d.e_pri, "cnt_pub": d.cnt_pub,
            "cnt_pri": d.cnt_pri, "work": d.work, "parent": d.parent,
            "log_likelihood": d.log_likelihood(),
        }

    def copy(self) -> Dendrogram:
        """An independent copy (same structure and counts)."""
        new = object.__new__(Dendrogram)
        for k, v in self.__dict__.items():
            setattr(new, k, v.copy() if isinstance(v, np.ndarray) else v)
        return new

    # -- moves ------------------------------------------------------------------------------------
    def move(
        self,
        c: int,
        kind: int,
        *,
        a_pub: float = 0.0,
        a_pri: float = 0.0,
        log_u: float = -np.inf,
    ) -> bool:
        r"""Propose the Fig. 5 rearrangement at non-root internal node ``c`` (internal index).

        ``kind`` 0 pairs ``left[c]`` with the sibling of ``c``, 1 pairs ``right[c]`` with it (the
        two alternatives to the current configuration). Accepted when
        ``log_u < a_pub * dL_pub + a_pri * dL_pri``; the defaults accept every move.

        Returns:
            bool: whether the move was made (the counts are updated incrementally).
        """
        n = self.n
        if not 0 <= int(c) < self.num_internal or n + int(c) == self.root:
            raise ValueError(f"c must be a non-root internal index in [0, {self.num_internal}), got {c}")
        if kind not in (0, 1):
            raise ValueError(f"kind must be 0 or 1, got {kind!r}")
        acc = mcmc_step(
            np.int64(n), np.int64(n + int(c)), np.int64(kind), float(a_pub), float(a_pri), float(log_u),
            self._state, self.left, self.right, self.parent, self.cnt_pub, self.cnt_pri, self.work,
            self.e_pub, self.e_pri, self.lca, self.indptr, self.adj, np.int64(self.m_pub),
            self._stack, self._buf, self.ll,
        )
        return bool(acc)

    def run_moves(
        self,
        picks: np.ndarray,
        moves: np.ndarray,
        log_u: np.ndarray,
        a_pub: float,
        a_pri: float,
        *,
        step0: int = 0,
        trace_every: int = 0,
        trace: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None = None,
    ) -> int:
        """Run ``picks.size`` proposals in one jitted loop (the MCMC's inner loop).

        ``picks`` uniform in ``[0, n - 2)`` index the non-root internal nodes (skipping the current
        root), ``moves`` in ``{0, 1}``, ``log_u`` the logs of uniforms. ``trace`` is
        ``(pub, pri, step, pos)`` buffers written every ``trace_every`` global steps. Returns the
        number of accepted moves.
        """
        if self.n < 3:
            return 0
        if trace is None:
            z = np.zeros(0, dtype=np.float64)
            trace = (z, z.copy(), np.zeros(0, dtype=np.int64), np.zeros(1, dtype=np.int64))
        tp, tq, ts, pos = trace
        return int(
            run_chunk(
                np.int64(self.n), picks, moves, log_u, float(a_pub), float(a_pri), self._state,
                self.left, self.right, self.parent, self.cnt_pub, self.cnt_pri, self.work,
                self.e_pub, self.e_pri, self.lca, self.indptr, self.adj, np.int64(self.m_pub),
                self._stack, self._buf, self.ll, np.int64(step0), np.int64(trace_every), tp, tq, ts, pos,
            )
        )

    # -- leaf orderings -----------------------------------------------------------------------------
    def private_leaf_ranges(self) -> tuple[np.ndarray, np.ndarray]:
        """Private leaves in in-order (leaf indices) and each internal node's first position.

        The private leaves under internal node ``i`` are ``order[start[i] : start[i] + L_i + R_i]``
        with its left subtree's first (``L_i = cnt_pri[left[i]]`` of them), then its right's.
        """
        if self.n == 0:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
        return inorder_ranges(np.int64(self.n), np.int64(self.root), self.left, self.right,
                              self.w_pri.astype(np.bool_))

    def __repr__(self) -> str:
        return (
            f"Dendrogram(leaves={self.n}, edges_public={self.m_pub}, "
            f"edges_private={self.num_edges - self.m_pub})"
        )
