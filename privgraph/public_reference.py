"""The public-only reference: what one learns from the public data alone, with no release.

A release is worth privatizing only if a model learns more from it than from its public part. The
reference here reads only what the pipeline declares public (:mod:`privgraph.disclosure`): the
public edges, the split, and the training labels that no label mechanism privatizes. It spends no
budget and depends on no private data, so it may be published beside the version's metrics.

Label propagation (Zhou, Bousquet, Lal, Weston & Schoelkopf, "Learning with Local and Global
Consistency", NIPS 2004, eq. 4 iterated): with :math:`S = D^{-1/2} A D^{-1/2}` over the public
edges and :math:`Y` the one-hot public training labels,
:math:`F^{(t+1)} = \\alpha S F^{(t)} + (1 - \\alpha) Y`, :math:`F^{(0)} = Y`; a node's prediction is
:math:`\\arg\\max_c F_{vc}` (a node no public label reaches gets the most frequent public
training label). O(iterations x edges): no node pairs.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import scipy.sparse as sp

from privgraph.graph import GraphData

__all__ = ["LP_ALPHA", "LP_ITERATIONS", "label_propagation", "public_only_reference"]

#: Zhou et al.'s alpha (their experiments use 0.99; 0.9 is the common default for citation graphs)
LP_ALPHA = 0.9
#: iterations of the fixed-point update (alpha^50 < 0.006: converged for the argmax)
LP_ITERATIONS = 50

METHOD = (f"label propagation of the public training labels over the public edges "
          f"(Zhou et al. 2004, alpha {LP_ALPHA}, {LP_ITERATIONS} iterations)")


def label_propagation(
    num_nodes: int, edges: np.ndarray, y: np.ndarray, seeds: np.ndarray, num_classes: int,
    *, alpha: float = LP_ALPHA, iterations: int = LP_ITERATIONS,
) -> np.ndarray:
    """Class scores ``[num_nodes, num_classes]`` of label propagation from the labelled ``seeds``
    (boolean ``[num_nodes]``; ``y`` read there only) over the undirected ``edges`` ``[2, m]``."""
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must be in (0, 1), got {alpha!r}")
    if not isinstance(iterations, int) or iterations < 1:
        raise ValueError(f"iterations must be an int >= 1, got {iterations!r}")
    seeds = np.asarray(seeds, dtype=bool)
    labels = np.asarray(y)[seeds]
    if labels.size and (labels.min() < 0 or labels.max() >= num_classes):
        raise ValueError(f"seed labels must lie in [0, {num_classes}), got [{labels.min()}, {labels.max()}]")
    e = np.asarray(edges, dtype=np.int64).reshape(2, -1)
    e = e[:, e[0] != e[1]]
    rows, cols = np.concatenate([e[0], e[1]]), np.concatenate([e[1], e[0]])
    a = sp.csr_matrix((np.ones(rows.size), (rows, cols)), shape=(num_nodes, num_nodes))
    a.data[:] = 1.0  # a duplicated edge counts once
    deg = np.asarray(a.sum(axis=1)).ravel()
    inv_sqrt = np.zeros(num_nodes)
    inv_sqrt[deg > 0] = deg[deg > 0] ** -0.5
    s = sp.diags(inv_sqrt) @ a @ sp.diags(inv_sqrt)
    y0 = np.zeros((num_nodes, num_classes))
    y0[np.flatnonzero(seeds), labels] = 1.0
    f = y0.copy()
    for _ in range(iterations):
        f = alpha * (s @ f) + (1.0 - alpha) * y0
    return f


def _predict(scores: np.ndarray, fallback: int) -> np.ndarray:
    pred = scores.argmax(axis=1)
    pred[scores.max(axis=1) <= 0.0] = fallback  # no public label reaches the node
    return pred


def public_only_reference(
    version: GraphData, public_train: np.ndarray, num_classes: int, raw_y: np.ndarray | None = None,
) -> dict[str, Any] | None:
    """Label propagation of the labels at ``public_train`` (the training nodes whose label is
    public) over ``version``'s public edges, scored on the version's own validation and test labels
    (``val_acc``, ``test_acc_own_labels``) and, with ``raw_y`` (the owner's), on the raw test labels
    (``test_acc``). None when no training label is public: there is then no public-only model."""
    if version.train_mask is None or version.test_mask is None:
        return None
    seeds = np.asarray(public_train, dtype=bool) & version.train_mask & version.labelled()
    if not seeds.any():
        return None
    scores = label_propagation(version.num_nodes, version.edges_public, version.y, seeds, num_classes)
    fallback = int(np.bincount(version.y[seeds], minlength=num_classes).argmax())
    pred = _predict(scores, fallback)

    def acc(mask: np.ndarray | None, y: np.ndarray) -> float:
        m = mask & (y >= 0) if mask is not None else None
        return float((pred[m] == y[m]).mean()) if m is not None and m.any() else float("nan")

    out = {"method": METHOD, "val_acc": acc(version.val_mask, version.y),
           "test_acc_own_labels": acc(version.test_mask, version.y)}
    out["test_acc"] = acc(version.test_mask, raw_y) if raw_y is not None else out["test_acc_own_labels"]
    return out
