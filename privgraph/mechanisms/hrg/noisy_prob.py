r"""CalculateNoisyProb (paper 002, Alg. 3; privHRG, Xiao et al. 2014) and the released dendrogram.

Top-down from the root, internal node :math:`r` with private leaf counts
:math:`\bar L_r, \bar R_r` computes

.. math::
    \lambda_b = \frac{1}{\varepsilon_{e2} \bar L_r \bar R_r}, \qquad
    \lambda_c = \frac{1}{\varepsilon_{e2} T_r}, \quad T_r = \binom{\bar L_r + \bar R_r}{2}.

- If :math:`\lambda_b \ge \tau_b` and :math:`\lambda_c \ge \tau_c` (the per-node noise would be
  large but the subtree is small enough), the whole subtree is merged: its private edge count
  :math:`E_r` (the edges among its private leaves, i.e. every :math:`\bar e_s` of the subtree)
  gets one noise draw and every internal node of the subtree gets
  :math:`\tilde p = \mathrm{clip}((E_r + Z) / T_r, 0, 1)`.
- Otherwise :math:`\tilde p_r = \mathrm{clip}((\bar e_r + Z) / (\bar L_r \bar R_r), 0, 1)` and the
  procedure recurses into both children.

:math:`Z` is DISCRETE Laplace, :math:`\Pr(Z = z) \propto e^{-\varepsilon_{e2}|z|}` (integer counts
take the two-sided geometric, not floating-point Laplace). Every private edge is counted at exactly
one place (its LCA, or the one merged subtree that contains its LCA), so one edge changes exactly
one noised count by one: the release is :math:`\varepsilon_{e2}`-DP by parallel composition.
Which nodes merge depends only on the dendrogram and :math:`V_{pri}` (already public).
Counts over zero pairs (a node without private leaves on one side) are identically 0 for every
input and get neither noise nor budget. The thresholds default to privHRG's code
(:math:`\tau_b = 0.05`, :math:`\tau_c = 0.01`, with :math:`T_r` the number of pairs); the
paper's Alg. 3 prints :math:`\lambda_c` without the 1/2 of :math:`T_r`.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import numba
import numpy as np

from privgraph.guarantee.params import check_epsilon
from privgraph.mechanisms.base import check_generator
from privgraph.mechanisms.hrg.dendrogram import Dendrogram
from privgraph.mechanisms.noise import discrete_laplace

__all__ = ["NoisyDendrogram", "calculate_noisy_prob", "noisy_dendrogram"]

TAU_B = 0.05
TAU_C = 0.01


@numba.njit(cache=True)
def _merge_plan(n, root, left, right, ok):  # pragma: no cover - jitted
    """Top-down: ``owner[i]`` is the merge root covering internal node ``i`` (itself when it
    merges), or ``-1`` when ``i`` is noised on its own. Also returns the pre-order of internal nodes."""
    n_int = n - 1
    owner = np.full(n_int, -1, dtype=np.int64)
    order = np.empty(n_int, dtype=np.int64)
    stack = np.empty(2 * n + 1, dtype=np.int64)
    stack[0] = root
    top = 1
    k = 0
    while top > 0:
        top -= 1
        x = stack[top]
        if x < n:
            continue
        i = x - n
        order[k] = i
        k += 1
        if owner[i] == -1 and ok[i]:
            owner[i] = i
        for ch in (left[i], right[i]):
            if ch >= n:
                if owner[i] != -1:
                    owner[ch - n] = owner[i]
                stack[top] = ch
                top += 1
    return owner, order


@numba.njit(cache=True)
def _subtree_sums(n, order, left, right, values):  # pragma: no cover - jitted
    """``sums[i]`` = sum of ``values`` over the internal nodes of the subtree at ``i``."""
    sums = values.copy()
    for k in range(order.size - 1, -1, -1):
        i = order[k]
        a = left[i]
        b = right[i]
        if a >= n:
            sums[i] += sums[a - n]
        if b >= n:
            sums[i] += sums[b - n]
    return sums


def calculate_noisy_prob(
    dendrogram: Dendrogram,
    eps2: float,
    rng: np.random.Generator,
    *,
    tau_b: float = TAU_B,
    tau_c: float = TAU_C,
) -> tuple[np.ndarray, np.ndarray]:
    r"""Alg. 3 over the whole dendrogram: the noisy private probabilities :math:`\tilde p_r`.

    Args:
        dendrogram (Dendrogram): the sampled dendrogram :math:`D^*` with its private counts.
        eps2 (float): :math:`\varepsilon_{e2}` (> 0).
        rng (np.random.Generator): the only source of randomness.
        tau_b, tau_c (float, optional): the thresholds on :math:`\lambda_b`, :math:`\lambda_c`
            (default: privHRG's ``0.05`` and ``0.01``).

    Returns:
        tuple: ``prob`` float64 ``[n - 1]`` in [0, 1] and ``owner`` int64 ``[n - 1]`` (the merge
        root covering each internal node, ``-1`` when noised on its own).

    Runtime: ``O(n)``; one discrete Laplace draw per noised count.
    """
    rng = check_generator(rng)
    eps2 = check_epsilon(eps2, "eps2")
    for name, v in (("tau_b", tau_b), ("tau_c", tau_c)):
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
            raise ValueError(f"{name} must be a finite number >= 0, got {v!r}")
    d = dendrogram
    n_int = d.num_internal
    if n_int == 0:
        return np.zeros(0, dtype=np.float64), np.zeros(0, dtype=np.int64)
    lc = d.cnt_pri[d.left]
    rc = d.cnt_pri[d.right]
    pairs = lc * rc
    tot = lc + rc
    total_pairs = tot * (tot - 1) // 2
    with np.errstate(divide="ignore"):
        lam_b = np.where(pairs > 0, 1.0 / (eps2 * np.maximum(pairs, 1).astype(np.float64)), np.inf)
        lam_c = np.where(total_pairs > 0, 1.0 / (eps2 * np.maximum(total_pairs, 1).astype(np.float64)), np.inf)
    ok = (lam_b >= tau_b) & (lam_c >= tau_c)
    owner, order = _merge_plan(np.int64(d.n), np.int64(d.root), d.left, d.right, ok)
    idx = np.arange(n_int, dtype=np.int64)
    single = (owner == -1) & (pairs > 0)
    merge_root = (owner == idx) & (total_pairs > 0)
    counts = np.where(single, d.e_pri, 0)
    denom = np.where(single, pairs, 0)
    if merge_root.any():
        sums = _subtree_sums(np.int64(d.n), order, d.left, d.right, d.e_pri.astype(np.int64))
        counts = np.where(merge_root, sums, counts)
        denom = np.where(merge_root, total_pairs, denom)
    noised = single | merge_root
    # one draw per noised count, in internal-index order (deterministic given rng)
    noisy = counts.astype(np.int64)
    k = int(noised.sum())
    if k:
        noisy[noised] += discrete_laplace(rng, eps2, k)
    prob = np.zeros(n_int, dtype=np.float64)
    prob[noised] = np.clip(noisy[noised] / denom[noised].astype(np.float64), 0.0, 1.0)
    covered = owner >= 0
    prob[covered] = prob[owner[covered]]
    return prob, owner


@dataclasses.dataclass(frozen=True, eq=False)
class NoisyDendrogram:
    r"""The released dendrogram :math:`(D^*, \{\tilde p_r\})`: everything the sampler needs.

    Holds the structure and the noisy probabilities only (no true edge count), all of it
    :math:`(\varepsilon_{e1} + \varepsilon_{e2})`-DP given :math:`V_{pri}`; sampling graphs from it is
    post-processing.

    Attributes:
        num_nodes: node count of the graph.
        leaf_nodes: int64 ``[n]`` graph node ids of the leaves.
        left, right: int64 ``[n - 1]`` children (ids: leaves ``0..n-1``, internal ``n + i``).
        root: root id.
        n_left, n_right: int64 ``[n - 1]`` private leaves under each child (:math:`\bar L_r, \bar R_r`).
        prob: float64 ``[n - 1]`` noisy probabilities :math:`\tilde p_r`.
        merged: int64 ``[n - 1]`` the merge root covering each node (``-1``: noised alone).
        private_order: int64 ``[n_pri]`` graph node ids of the private leaves, in-order.
        private_start: int64 ``[n - 1]`` position in ``private_order`` of each node's first one.
    """

    num_nodes: int
    leaf_nodes: np.ndarray
    left: np.ndarray
    right: np.ndarray
    root: int
    n_left: np.ndarray
    n_right: np.ndarray
    prob: np.ndarray
    merged: np.ndarray
    private_order: np.ndarray
    private_start: np.ndarray

    @property
    def num_internal(self) -> int:
        return int(self.prob.size)

    def pairs(self) -> np.ndarray:
        r""":math:`\bar L_r \bar R_r` per internal node (int64)."""
        return self.n_left * self.n_right

    def expected_edges(self) -> np.ndarray:
        r""":math:`\bar L_r \bar R_r \tilde p_r` per internal node (the sampler's mean output)."""
        return self.pairs().astype(np.float64) * self.prob

    def summary(self) -> dict[str, Any]:
        """Public-safe numbers (functions of the release) for logs and manifests."""
        return {
            "leaves": int(self.leaf_nodes.size),
            "private_leaves": int(self.private_order.size),
            "internal_nodes": self.num_internal,
            "merged_subtrees": int(np.sum(self.merged == np.arange(self.num_internal))),
            "expected_edges": float(self.expected_edges().sum()),
        }

    def __repr__(self) -> str:
        s = self.summary()
        return (
            f"NoisyDendrogram(leaves={s['leaves']}, private_leaves={s['private_leaves']}, "
            f"expected_edges={s['expected_edges']:.1f})"
        )


def noisy_dendrogram(
    dendrogram: Dendrogram,
    eps2: float,
    rng: np.random.Generator,
    *,
    tau_b: float = TAU_B,
    tau_c: float = TAU_C,
) -> NoisyDendrogram:
    """Run :func:`calculate_noisy_prob` and package the release for :mod:`~privgraph.mechanisms.hrg.sample`."""
    prob, owner = calculate_noisy_prob(dendrogram, eps2, rng, tau_b=tau_b, tau_c=tau_c)
    order, start = dendrogram.private_leaf_ranges()
    d = dendrogram
    return NoisyDendrogram(
        num_nodes=d.num_nodes,
        leaf_nodes=d.leaf_nodes.copy(),
        left=d.left.copy(),
        right=d.right.copy(),
        root=d.root,
        n_left=d.cnt_pri[d.left].copy(),
        n_right=d.cnt_pri[d.right].copy(),
        prob=prob,
        merged=owner,
        private_order=d.leaf_nodes[order],
        private_start=start,
    )
