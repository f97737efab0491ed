"""The public-only reference: what one learns from the public data alone, with no release.

A release is worth privatizing only if a model learns more from it than from its public part. The
reference here reads only what the pipeline declares public (:mod:`privgraph.config.disclosure`): the
public edges, the split, and the training labels that no label mechanism privatizes. It spends no
budget and depends on no private data, so it may be published beside the version's metrics. It
is label propagation (:func:`privgraph.evaluate.label_propagation.label_propagation`, Zhou et al. 2004) of
those labels over the public edges. Where the features are public too (the pipeline privatizes no
feature) and every training label is public, the feature-only floor (the model over the public
features and training labels, no edge) is public-only as well, and per run the reference is
whichever of the two has the higher validation accuracy (:func:`per_run_reference`): with every
edge private, propagation over no public edge is the majority class, not what the public data say.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from privgraph.graph import GraphData
from privgraph.evaluate.label_propagation import LP_ALPHA, LP_ITERATIONS, label_propagation, propagation_scores

__all__ = ["FLOOR_METHOD", "METHOD", "per_run_reference", "public_only_reference"]

METHOD = (f"label propagation of the public training labels over the public edges "
          f"(Zhou et al. 2004, alpha {LP_ALPHA}, {LP_ITERATIONS} iterations)")
FLOOR_METHOD = "the feature-only model over the public features and training labels (no edge)"


def public_only_reference(
    version: GraphData, public_train: np.ndarray, num_classes: int, raw_y: np.ndarray | None = None,
) -> dict[str, Any] | None:
    """Label propagation of the labels at ``public_train`` (the training nodes whose label is
    public) over ``version``'s public edges, scored on the version's own validation and test labels
    (``val_acc``, ``test_acc_own_labels``) and, with ``raw_y`` (the owner's), on the raw test labels
    (``test_acc``). None when no training label is public: there is then no public-only model."""
    if version.y is None or version.y.ndim != 1 or version.train_mask is None or version.test_mask is None:
        return None
    seeds = np.asarray(public_train, dtype=bool) & version.train_mask & version.labelled()
    if not seeds.any():
        return None
    scores = label_propagation(version.num_nodes, version.edges_public, version.y, seeds, num_classes)
    return {"method": METHOD, **propagation_scores(version, seeds, scores, num_classes, raw_y)}


def per_run_reference(
    reference: dict[str, Any] | None, floor_runs: list[dict[str, Any]], *, public_features: bool,
    all_train_public: bool,
) -> list[dict[str, Any]] | None:
    """The public-only reference of each run: ``reference`` (label propagation, the same in every
    run), or, where ``public_features`` and ``all_train_public`` make the feature-only floor a
    model of public data alone, whichever of it and the floor run has the higher validation
    accuracy (ties to label propagation), each with its ``method``. None without ``reference``."""
    if reference is None:
        return None
    if not (public_features and all_train_public):
        return [reference] * len(floor_runs)
    return [reference if reference["val_acc"] >= f["val_acc"] else {**f, "method": FLOOR_METHOD} for f in floor_runs]
