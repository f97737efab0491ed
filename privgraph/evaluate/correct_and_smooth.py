r"""Correct and Smooth over a version: a base model's predictions corrected and smoothed along the
public and released edges with the version's own training labels.

Huang, He, Singh, Lim & Benson, "Combining Label Propagation and Simple Models Out-performs Graph
Neural Networks", ICLR 2021, Section 3, with :math:`S = D^{-1/2} W D^{-1/2}`
(:func:`privgraph.evaluate.label_propagation.propagation_operator`) and the iteration
:math:`F^{(t+1)} = \alpha S F^{(t)} + (1 - \alpha) F^{(0)}` (:func:`~privgraph.evaluate.label_propagation.propagate`):

- correct (eq. 2, with the fixed scale :math:`s = 1` of their "FDiff-scale"): the residuals
  :math:`E_L = Y_L - Z_L` on the training nodes (zero elsewhere) are propagated to :math:`\hat E`
  and added, :math:`Z + \hat E`. (Their "autoscale", which rescales every reached node's
  correction to the mean residual norm however little reached it, moved a 90%-right base model to
  62% over edges between random pairs; the fixed scale keeps 86-88%: tests/test_correct_and_smooth.py);
- smooth (eq. 4): :math:`G` is the corrected prediction with the training rows set to
  :math:`Y_L`, propagated again; a node's class is the argmax.

The propagation's :math:`\alpha` is chosen from :data:`CS_ALPHAS` on validation: a large one
trusts the edges, a small one the base model.

:func:`release_correct_and_smooth` runs it over a version for several base models (the floor,
the public-edges GNN, the GNN: each trained on the version only) and the released private edges
at the weights of :data:`~privgraph.evaluate.label_propagation.RELEASE_WEIGHTS` or left out, and keeps the
combination of highest validation accuracy on the version's own labels. When the base model
carries nothing, smoothing is label propagation of the training labels; when the edges carry
nothing, correcting leaves the base model's ranking. A class-count release
(:class:`~privgraph.mechanisms.edges.class_counts.NeighbourClassCounts`: no edges, each node's
noisy count of private neighbours per public class) is smoothed in one step instead: each base's
probabilities times :math:`e^{\beta \tilde c_v}`
(:func:`~privgraph.mechanisms.edges.class_counts.decode_class_counts`), :math:`\beta` of
:data:`~privgraph.mechanisms.edges.class_counts.COUNT_WEIGHTS` chosen on validation with the
rest. It reads the release and public data only:
post-processing, so it changes no guarantee and spends no budget. O(iterations x edges x
classes): no node pairs.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import torch

from privgraph.graph import GraphData
from privgraph.mechanisms.edges.class_counts import COUNT_WEIGHTS, decode_class_counts, released_class_counts
from privgraph.evaluate.label_propagation import (
    LP_ALPHA, LP_ITERATIONS, RELEASE_WEIGHTS, propagate, propagation_operator, propagation_scores,
)

__all__ = ["CS_ALPHAS", "correct_and_smooth", "release_correct_and_smooth"]

#: the propagation strengths tried (Huang et al. tune alpha per dataset in [0, 1])
CS_ALPHAS = (0.5, LP_ALPHA)


def correct_and_smooth(
    s: Any, base: np.ndarray, y: np.ndarray, seeds: np.ndarray, num_classes: int,
    *, alpha: float = LP_ALPHA, iterations: int = LP_ITERATIONS, device: str | torch.device | None = None,
) -> np.ndarray:
    """Class scores ``[n, num_classes]``: ``base`` (``[n, num_classes]`` class probabilities of a
    model, or several models side by side ``[n, k * num_classes]``) corrected and smoothed over
    the operator ``s`` from the training labels ``y`` at ``seeds`` (boolean ``[n]``) (Huang et al.
    2021, eq. 2-4 with the fixed scale 1; see the module docstring). Several models' columns are
    corrected and smoothed each on their own, in one pass."""
    base = np.asarray(base, dtype=np.float64)
    n, width = base.shape
    if width % num_classes:
        raise ValueError(f"base has {width} columns, not a multiple of num_classes = {num_classes}")
    models = width // num_classes
    seeds = np.asarray(seeds, dtype=bool)
    labels = np.asarray(y)[seeds]
    if labels.size and (labels.min() < 0 or labels.max() >= num_classes):
        raise ValueError(f"seed labels must lie in [0, {num_classes}), got [{labels.min()}, {labels.max()}]")
    onehot = np.zeros((int(seeds.sum()), num_classes))
    onehot[np.arange(labels.size), labels] = 1.0
    target = np.tile(onehot, models)
    residual = np.zeros_like(base)
    residual[seeds] = target - base[seeds]
    corrected = base + propagate(s, residual, alpha=alpha, iterations=iterations, device=device)
    corrected[seeds] = target
    return propagate(s, corrected, alpha=alpha, iterations=iterations, device=device)


def release_correct_and_smooth(
    version: GraphData, bases: Mapping[str, np.ndarray], num_classes: int, raw_y: np.ndarray | None = None,
    weights: Sequence[float] = RELEASE_WEIGHTS, device: str | torch.device | None = None,
) -> dict[str, Any] | None:
    """Correct and Smooth of each base model of ``bases`` (name -> class probabilities ``[n, C]``,
    models trained on the version) from the version's own training labels, over its public edges
    alone and over its public edges (weight 1) with its released private edges (weight ``w`` of
    ``weights``), at each alpha of :data:`CS_ALPHAS`; the combination of highest validation accuracy
    on the version's own labels (ties: the public edges alone, then the smaller weight, the smaller
    alpha, the earlier base) with ``val_acc``, ``test_acc_own_labels``, ``test_acc`` (``raw_y``, the
    owner's, when given), ``base``, ``alpha`` and ``release_weight`` (0.0: the released edges left
    out). A class-count release adds the one-step smoothing over its counts (``count_weight``
    beta, ``alpha`` None; ties to the edges' combinations). Propagation runs on ``device``
    (:func:`~privgraph.evaluate.label_propagation.propagate`). None without bases, training labels or a
    split."""
    if (not bases or version.y is None or version.y.ndim != 1 or version.train_mask is None
            or version.test_mask is None or version.val_mask is None):
        return None
    seeds = version.train_mask & version.labelled()
    if not seeds.any():
        return None
    names = list(bases)
    stacked = np.concatenate([np.asarray(bases[k], dtype=np.float64) for k in names], axis=1)
    public, released = version.edges_public, version.edges_private
    options = [0.0] + ([float(w) for w in sorted(weights)] if released.shape[1] else [])
    best: dict[str, Any] | None = None
    for w in options:
        if w == 0.0:
            s = propagation_operator(version.num_nodes, public)
        else:
            s = propagation_operator(version.num_nodes, np.concatenate([public, released], axis=1),
                                     np.concatenate([np.ones(public.shape[1]), np.full(released.shape[1], w)]))
        for alpha in CS_ALPHAS:
            scores = correct_and_smooth(s, stacked, version.y, seeds, num_classes, alpha=alpha, device=device)
            for i, name in enumerate(names):
                cols = scores[:, i * num_classes:(i + 1) * num_classes]
                r = propagation_scores(version, seeds, cols, num_classes, raw_y)
                if best is None or r["val_acc"] > best["val_acc"]:
                    best = {**r, "base": name, "alpha": alpha, "release_weight": w}
    counts = released_class_counts(version.aggregates, num_classes)
    for weight in COUNT_WEIGHTS if counts is not None else ():  # a class-count release: one smoothing step
        for name in names:
            r = propagation_scores(version, seeds, decode_class_counts(bases[name], counts, weight), num_classes, raw_y)
            if r["val_acc"] > best["val_acc"]:
                best = {**r, "base": name, "alpha": None, "release_weight": 0.0, "count_weight": weight}
    return best
