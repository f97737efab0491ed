"""The per-partition steps of the node-level scopes (features and labels): each partition's rows
randomized with the generator of its own seed. The in-memory release
(:mod:`privgraph.privatize.release`) and the partitioned layout (:mod:`privgraph.privatize.partitioned`)
both map these over the partitions, so the two release the same bytes for the same seeds.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from privgraph.graph import UNLABELLED
from privgraph.seeding import noise_generator

__all__ = ["label_selection", "privatize_feature_rows", "privatize_label_rows"]


def privatize_feature_rows(x_rows: np.ndarray, seed: np.random.SeedSequence, *, mechanism: Any) -> np.ndarray:
    """The released feature rows of one partition (``fn`` of
    :func:`~privgraph.parts.executor.map_partitions`): ``mechanism.privatize_rows``, decoded
    to feature units where the release is an encoding."""
    released = mechanism.privatize_rows(x_rows, noise_generator(seed))
    # an encoding (multibit, three_output, pm_sub) is decoded to its unbiased estimate in
    # feature units: post-processing (FeatureMechanism.estimate; the identity otherwise)
    return mechanism.estimate(released)


def privatize_label_rows(
    payload: tuple[np.ndarray, np.ndarray], seed: np.random.SeedSequence, *, mechanism: Any, num_classes: int
) -> np.ndarray:
    """The released labels of one partition: ``payload = (y_rows, selected)``; the selected rows
    randomized by ``mechanism.privatize_labels``, the others as they are."""
    y_rows, selected = payload
    out = y_rows.copy()
    out[selected] = mechanism.privatize_labels(y_rows[selected], num_classes, noise_generator(seed))
    return out


def label_selection(mechanism: Any, y: np.ndarray, masks: dict[str, np.ndarray]) -> np.ndarray:
    """The rows a label mechanism randomizes: those of its ``mask`` splits (all rows without one),
    labelled ones only (an unlabelled node's ``-1`` stays ``-1``). Works on any rows of ``y``
    with the same rows of the masks."""
    selected = np.ones(y.shape[0], bool)
    if mechanism.mask is not None:
        selected[:] = False
        for name in mechanism.mask:
            selected |= masks[name]
    return selected & (y != UNLABELLED)
