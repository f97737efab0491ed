"""When features are sparse: one threshold for every place that holds them (numpy only).

The in-memory models' inputs (:mod:`~privgraph.evaluate.model_inputs`), the clusters of
mini-batch training (:mod:`~privgraph.evaluate.minibatch_source`,
:mod:`~privgraph.evaluate.minibatch_parts`) and the mini-batch plan hold a feature matrix as sparse
(CSR, never densified) when at most :data:`SPARSE_DENSITY` of its entries are nonzero: bag-of-words
features (Cora's 1.3%), not dense embeddings.
"""

from __future__ import annotations

import numpy as np

__all__ = ["SPARSE_DENSITY", "mostly_zero"]

#: the largest share of nonzero entries at which features are held and multiplied as sparse
SPARSE_DENSITY = 0.1


def mostly_zero(x: np.ndarray) -> bool:
    """Whether ``x`` is non-empty with at most :data:`SPARSE_DENSITY` of its entries nonzero."""
    return bool(x.size) and int(np.count_nonzero(x)) <= SPARSE_DENSITY * x.size
