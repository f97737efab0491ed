r"""Label propagation over a graph's edges, and its candidate over a version's release.

Zhou, Bousquet, Lal, Weston & Schoelkopf, "Learning with Local and Global Consistency", NIPS 2004,
eq. 4 iterated: with :math:`S = D^{-1/2} W D^{-1/2}` for the (weighted) adjacency :math:`W` and
:math:`Y` the one-hot seed labels, :math:`F^{(t+1)} = \alpha S F^{(t)} + (1 - \alpha) Y`,
:math:`F^{(0)} = Y`; a node's prediction is :math:`\arg\max_c F_{vc}` (a node no seed label
reaches gets the most frequent seed label). O(iterations x edges): no node pairs.

:func:`release_propagation` runs it over a version: its public edges (weight 1) and its released
private edges (weight ``w``, chosen on the version's own validation labels), from the version's
own training labels. It reads the release and public data only: post-processing, so it changes
no guarantee.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import scipy.sparse as sp

from privgraph.graph import GraphData

if TYPE_CHECKING:
    import torch

__all__ = ["LP_ALPHA", "LP_ITERATIONS", "RELEASE_WEIGHTS", "label_propagation", "propagate", "propagation_operator",
           "propagation_scores", "release_propagation"]

#: Zhou et al.'s alpha (their experiments use 0.99; 0.9 is the common default for citation graphs)
LP_ALPHA = 0.9
#: iterations of the fixed-point update (alpha^50 < 0.006: converged for the argmax)
LP_ITERATIONS = 50
#: the weights tried for the released private edges against the public ones (1)
RELEASE_WEIGHTS = (0.25, 0.5, 1.0)


def label_propagation(
    num_nodes: int, edges: np.ndarray, y: np.ndarray, seeds: np.ndarray, num_classes: int,
    *, weights: np.ndarray | None = None, alpha: float = LP_ALPHA, iterations: int = LP_ITERATIONS,
    device: str | torch.device | None = None,
) -> np.ndarray:
    """Class scores ``[num_nodes, num_classes]`` of label propagation from the labelled ``seeds``
    (boolean ``[num_nodes]``; ``y`` read there only) over the undirected ``edges`` ``[2, m]``
    (``weights`` ``[m]`` > 0, default 1; a pair listed twice counts once, with its largest weight);
    iterated on ``device`` (:func:`propagate`)."""
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must be in (0, 1), got {alpha!r}")
    if not isinstance(iterations, int) or iterations < 1:
        raise ValueError(f"iterations must be an int >= 1, got {iterations!r}")
    seeds = np.asarray(seeds, dtype=bool)
    labels = np.asarray(y)[seeds]
    if labels.size and (labels.min() < 0 or labels.max() >= num_classes):
        raise ValueError(f"seed labels must lie in [0, {num_classes}), got [{labels.min()}, {labels.max()}]")
    s = propagation_operator(num_nodes, edges, weights)
    y0 = np.zeros((num_nodes, num_classes))
    y0[np.flatnonzero(seeds), labels] = 1.0
    return propagate(s, y0, alpha=alpha, iterations=iterations, device=device)


def propagation_operator(num_nodes: int, edges: np.ndarray, weights: np.ndarray | None = None) -> sp.csr_matrix:
    """Zhou et al.'s :math:`S = D^{-1/2} W D^{-1/2}` (sparse ``[num_nodes, num_nodes]``) of the
    undirected ``edges`` ``[2, m]`` with ``weights`` ``[m]`` > 0 (default 1; a pair listed twice
    counts once, with its largest weight; self-loops dropped; an isolated node's row is zero)."""
    e = np.asarray(edges, dtype=np.int64).reshape(2, -1)
    w = np.ones(e.shape[1]) if weights is None else np.asarray(weights, dtype=np.float64)
    if w.shape != (e.shape[1],) or not np.all(w > 0):
        raise ValueError(f"weights must be [{e.shape[1]}] positive numbers")
    keep = e[0] != e[1]
    n = np.int64(num_nodes)
    keys = np.minimum(e[0], e[1])[keep] * n + np.maximum(e[0], e[1])[keep]
    w = w[keep]
    # the distinct pairs (lo, hi) in order, each with its largest weight: O(m log m), never over node pairs
    if weights is None:
        keys = np.sort(keys)
    else:
        order = np.argsort(keys)
        keys, w = keys[order], w[order]
    first = np.ones(keys.size, dtype=bool)
    first[1:] = keys[1:] != keys[:-1]
    w = np.maximum.reduceat(w, np.flatnonzero(first)) if keys.size else w
    keys = keys[first]
    lo, hi = keys // n, keys % n
    # the upper triangle is already in CSR order (rows lo, columns hi ascending): no COO conversion
    upper = sp.csr_matrix((w, hi, np.concatenate([[0], np.cumsum(np.bincount(lo, minlength=num_nodes))])),
                          shape=(num_nodes, num_nodes))
    a = (upper + upper.T.tocsr()).tocsr()
    deg = np.asarray(a.sum(axis=1)).ravel()
    inv_sqrt = np.zeros(num_nodes)
    inv_sqrt[deg > 0] = deg[deg > 0] ** -0.5
    a.data *= np.repeat(inv_sqrt, np.diff(a.indptr)) * inv_sqrt[a.indices]
    return a


def propagate(
    s: sp.spmatrix, f0: np.ndarray, *, alpha: float = LP_ALPHA, iterations: int = LP_ITERATIONS,
    device: str | torch.device | None = None,
) -> np.ndarray:
    r"""Zhou et al.'s eq. 4 iterated from :math:`F^{(0)} = F_0`:
    :math:`F^{(t+1)} = \alpha S F^{(t)} + (1 - \alpha) F_0` (``s`` from :func:`propagation_operator`),
    in float64 as torch CSR products on ``device`` (default: the CPU, on all of torch's threads;
    a GPU for releases of tens of millions of edges)."""
    import torch  # lazy: a process that only summarises results (the evaluation at scale's) loads no torch

    from privgraph.evaluate.models.sparse import quiet_sparse_beta  # lazy: torch

    dev = torch.device("cpu" if device is None else device)
    s = s.tocsr()
    if not s.has_sorted_indices:
        s = s.sorted_indices()
    index = torch.int32 if max(s.nnz, s.shape[0]) < 2**31 - 1 else torch.int64
    with quiet_sparse_beta():  # scipy's canonical CSR: the invariants hold
        op = torch.sparse_csr_tensor(torch.from_numpy(s.indptr).to(dev, index), torch.from_numpy(s.indices).to(dev, index),
                                     torch.from_numpy(np.asarray(s.data, np.float64)).to(dev), s.shape,
                                     check_invariants=False)
    start = torch.from_numpy(np.ascontiguousarray(f0, dtype=np.float64)).to(dev)
    keep = (1.0 - alpha) * start
    f = start
    for _ in range(iterations):
        f = torch.addmm(keep, op, f, alpha=alpha)
    return f.cpu().numpy()


def propagation_scores(
    version: GraphData, seeds: np.ndarray, scores: np.ndarray, num_classes: int, raw_y: np.ndarray | None,
) -> dict[str, Any]:
    """``val_acc`` and ``test_acc_own_labels`` (the version's own labels) and ``test_acc`` (``raw_y``,
    the owner's, when given) of the predictions of ``scores`` (no seed reached: the most frequent
    seed label)."""
    pred = scores.argmax(axis=1)
    pred[scores.max(axis=1) <= 0.0] = int(np.bincount(version.y[seeds], minlength=num_classes).argmax())

    def acc(mask: np.ndarray | None, y: np.ndarray) -> float:
        m = None if mask is None else mask & (y >= 0)
        return float((pred[m] == y[m]).mean()) if m is not None and m.any() else float("nan")

    own = acc(version.test_mask, version.y)
    return {"val_acc": acc(version.val_mask, version.y), "test_acc_own_labels": own,
            "test_acc": own if raw_y is None else acc(version.test_mask, raw_y)}


def release_propagation(
    version: GraphData, num_classes: int, raw_y: np.ndarray | None = None,
    weights: Sequence[float] = RELEASE_WEIGHTS, device: str | torch.device | None = None,
) -> dict[str, Any] | None:
    """Label propagation of the version's own training labels over its public edges (weight 1) and
    its released private edges (weight ``w`` of ``weights``, the one of highest validation accuracy
    on the version's own labels; ties to the smaller), iterated on ``device``. None without
    released private edges, training labels or a split."""
    if (version.y is None or version.y.ndim != 1 or version.train_mask is None or version.test_mask is None
            or not version.edges_private.shape[1]):
        return None
    seeds = version.train_mask & version.labelled()
    if not seeds.any():
        return None
    edges = version.edges("all")
    best: dict[str, Any] | None = None
    for w in sorted(weights):
        ew = np.concatenate([np.ones(version.edges_public.shape[1]), np.full(version.edges_private.shape[1], w)])
        r = propagation_scores(version, seeds, label_propagation(version.num_nodes, edges, version.y, seeds,
                                                                 num_classes, weights=ew, device=device),
                               num_classes, raw_y)
        if best is None or r["val_acc"] > best["val_acc"]:
            best = {**r, "release_weight": float(w)}
    return best
