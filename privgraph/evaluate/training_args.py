"""The arguments of a node classifier's training, checked: each refusal is one line that names
the argument (:func:`check_fit_args`, :func:`check_graph`, :func:`check_choice`).

>>> check_choice("public", "edges", ("all", "public"))
'public'
"""

from __future__ import annotations

import numbers
from typing import Any

import numpy as np

from privgraph.graph import SPLIT_MASKS, GraphData

__all__ = ["check_choice", "check_fit_args", "check_graph"]


def check_choice(value: Any, name: str, choices: tuple[str, ...]) -> str:
    """``value`` if it is one of ``choices``, else a ValueError naming ``name`` and the choices."""
    if not isinstance(value, str) or value not in choices:
        raise ValueError(
            f"train_node_classifier: {name} must be one of {', '.join(map(repr, choices))}, "
            f"got {value!r}"
        )
    return value


def _check_number(
    value: Any, name: str, *, low: float, low_inclusive: bool, integer: bool = False
) -> None:
    ok_type = (
        isinstance(value, numbers.Integral) if integer else isinstance(value, numbers.Real)
    ) and not isinstance(value, bool)
    ok = ok_type and np.isfinite(float(value)) and (
        float(value) >= low if low_inclusive else float(value) > low
    )
    if not ok:
        kind = "an int" if integer else "a finite number"
        op = ">=" if low_inclusive else ">"
        raise ValueError(f"train_node_classifier: {name} must be {kind} {op} {low}, got {value!r}")


def check_graph(graph: GraphData) -> None:
    """Refuse a graph node classification cannot train on: no ``x``, ``y`` or masks, multi-label
    ``y``, a mask that selects no node or nodes with negative labels."""
    if not isinstance(graph, GraphData):
        raise TypeError(f"train_node_classifier: expected a GraphData, got {type(graph).__name__}")
    missing = [name for name in ("x", "y", *SPLIT_MASKS) if getattr(graph, name) is None]
    if missing:
        raise ValueError(
            f"train_node_classifier: the graph has no {', '.join(missing)}; node classification "
            "needs features x, labels y and train/val/test masks"
        )
    if graph.y.ndim != 1:
        raise ValueError(
            f"train_node_classifier: multi-label y of shape {list(graph.y.shape)} is not supported "
            "(single-label int64 y [n] only)"
        )
    for name in SPLIT_MASKS:
        m = getattr(graph, name)
        if not m.any():
            raise ValueError(f"train_node_classifier: {name} selects no node")
        if (graph.y[m] < 0).any():
            raise ValueError(f"train_node_classifier: {name} selects nodes with negative labels")


def check_fit_args(
    graph: GraphData, *, edges: Any, model: Any, hidden: Any, epochs: Any, lr: Any, weight_decay: Any, patience: Any, kprop_features: Any,
    kprop_labels: Any, drop: Any, propagate_val_labels: Any, label_epsilon: Any, label_classes: Any,
    feature_dim: Any, eval_y: Any,
) -> np.ndarray | None:
    """The hyper-parameters of :func:`fit_node_classifier`, checked; returns ``eval_y`` as an array."""
    check_graph(graph)
    _check_number(hidden, "hidden", low=1, low_inclusive=True, integer=True)
    _check_number(epochs, "epochs", low=1, low_inclusive=True, integer=True)
    _check_number(lr, "lr", low=0, low_inclusive=False)
    _check_number(weight_decay, "weight_decay", low=0, low_inclusive=True)
    if patience is not None:
        _check_number(patience, "patience", low=1, low_inclusive=True, integer=True)
    _check_number(kprop_features, "kprop_features", low=0, low_inclusive=True, integer=True)
    _check_number(kprop_labels, "kprop_labels", low=0, low_inclusive=True, integer=True)
    if not isinstance(drop, bool):
        raise ValueError(f"train_node_classifier: drop must be a bool, got {drop!r}")
    if not isinstance(propagate_val_labels, bool):
        raise ValueError(f"train_node_classifier: propagate_val_labels must be a bool, got {propagate_val_labels!r}")
    if label_epsilon is not None:
        _check_number(label_epsilon, "label_epsilon", low=0, low_inclusive=False)
    if label_classes is not None:
        _check_number(label_classes, "label_classes", low=2, low_inclusive=True, integer=True)
    if feature_dim is not None:
        _check_number(feature_dim, "feature_dim", low=1, low_inclusive=True, integer=True)
    if model == "gap" and (edges != "none" or kprop_features or kprop_labels or feature_dim is not None):
        raise ValueError("train_node_classifier: model 'gap' reads no edges (edges='none') and takes "
                         "no KProp or feature_dim")
    if edges == "none" and (kprop_features or kprop_labels):
        raise ValueError("train_node_classifier: edges='none' (the feature-only floor) cannot run KProp, which "
                         "propagates over edges; set kprop_features = kprop_labels = 0")
    if eval_y is None:
        return None
    eval_y = np.asarray(eval_y)
    if eval_y.shape != graph.y.shape or not np.issubdtype(eval_y.dtype, np.integer):
        raise ValueError(
            "train_node_classifier: eval_y must be integer labels of shape "
            f"{list(graph.y.shape)}, got dtype {eval_y.dtype} shape {list(eval_y.shape)}"
        )
    return eval_y
