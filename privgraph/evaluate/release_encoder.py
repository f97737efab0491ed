"""The encoder an aggregates release trains over the released features and labels, supplied to
:func:`~privgraph.privatize.release.privatize_graph` by its caller (the privatize task, a
comparison), so that the mechanisms and the privatize stage import no model.

It is the feature-only floor's model (:func:`~privgraph.evaluate.training.encode_features`: GAP's
MLP encoding, Sajadmanesh et al. 2023, Algorithm 2 lines 1-2; or
:func:`~privgraph.evaluate.training.public_classes`: the public classes that class counts count),
trained on a view with no edge: post-processing of the released features and labels. Importing
this module imports no torch; training does.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

from privgraph.graph import GraphData
from privgraph.mechanisms.edges.shapes import ReleaseEncoder

__all__ = ["encode_released", "encoder_on"]

ENCODINGS = ("hidden", "classes")


def encode_released(
    view: GraphData, *, encoding: str, dim: int | None, epochs: int, seed: Any, device: str = "auto",
) -> np.ndarray:
    """The encoding ``encoding`` of ``view`` (released features and labels, no edge): ``"hidden"``,
    the floor model's hidden layer ``[n, dim]``; ``"classes"``, the public classes ``[n, C]``.

    >>> encode_released(GraphData(num_nodes=1), encoding="words", dim=4, epochs=1, seed=0)
    Traceback (most recent call last):
    ...
    ValueError: encoding must be one of ('hidden', 'classes'), got 'words'
    """
    if encoding not in ENCODINGS:
        raise ValueError(f"encoding must be one of {ENCODINGS}, got {encoding!r}")
    from privgraph.evaluate.training import encode_features, public_classes  # lazy: torch, only here

    if encoding == "classes":
        return public_classes(view, seed=seed, epochs=epochs, device=device)
    return encode_features(view, seed=seed, dim=dim, epochs=epochs, device=device)


def encoder_on(device: str = "auto") -> ReleaseEncoder:
    """The :data:`~privgraph.mechanisms.edges.shapes.ReleaseEncoder` that trains on ``device``.

    >>> encoder_on("cpu").keywords
    {'device': 'cpu'}
    """
    return functools.partial(encode_released, device=device)
