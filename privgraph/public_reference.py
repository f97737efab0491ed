"""The public-only reference: what one learns from the public data alone, with no release.

A release is worth privatizing only if a model learns more from it than from its public part. The
reference here reads only what the pipeline declares public (:mod:`privgraph.disclosure`): the
public edges, the split, and the training labels that no label mechanism privatizes. It spends no
budget and depends on no private data, so it may be published beside the version's metrics. It
is label propagation (:func:`privgraph.label_propagation.label_propagation`, Zhou et al. 2004) of
those labels over the public edges.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from privgraph.graph import GraphData
from privgraph.label_propagation import LP_ALPHA, LP_ITERATIONS, label_propagation, propagation_scores

__all__ = ["METHOD", "public_only_reference"]

METHOD = (f"label propagation of the public training labels over the public edges "
          f"(Zhou et al. 2004, alpha {LP_ALPHA}, {LP_ITERATIONS} iterations)")


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
