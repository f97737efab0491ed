r"""Sensitivity scores :math:`\beta` (HeteroRR, papers 000/002, Sec. III-A, Eq. 5).

.. math::
    \beta_i = \frac{|z_i - \hat z_i|}{\lVert z - \hat z \rVert_1}, \qquad
    z = g(x), \quad \hat z = g(\hat x),

where :math:`\hat x` is the input with its sensitive input features masked out and :math:`g`
the embedding. The paper states Eq. 5 for one input; FeatureRR uses ONE theta vector for all
nodes, so the per-node magnitudes are aggregated: :math:`\beta \propto \operatorname{mean}_v
|z_v - \hat z_v|` (the mean over rows, normalised once: a ratio of means, so rows that masking
does not change simply contribute 0).

For feature-vector datasets the features are the embedding (``embed=None``: identity) and the
sensitive inputs are columns, so :math:`\beta_i = 0` for every non-sensitive column. For images
a later stage supplies per-image masks (a boolean array of the input's shape) and an ``embed``
callable ``[n, ...] -> [n, d]``.

Privacy status: beta is a function of the rows it is given, and it is published through theta
(FeatureRR's per-feature budgets). Computed from private features it leaks a statistic of them
(for the identity embedding with ``mask_value="zero"``: the mean absolute value of each sensitive
column) with no DP guarantee. The paper computes it from the data without comment;
:func:`privgraph.ingest.scoring.compute_scores` therefore computes it on the PUBLIC node subset's rows
only, and records that in the provenance. This function itself trusts its caller.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable
from typing import Any

import numpy as np

__all__ = ["MASK_VALUES", "embedding_sensitivity", "masking_sensitivity", "mask_inputs"]

#: named mask values: ``"zero"`` (the feature removed; black pixels for images) or ``"mean"``
#: (each masked position replaced by its mean over the rows given, which must be public)
MASK_VALUES = ("zero", "mean")


def _as_selection(sensitive: Any, x: np.ndarray) -> np.ndarray:
    """A boolean selection of ``x``'s shape (or of one row's shape, broadcast to all rows)."""
    arr = np.asarray(sensitive)
    if arr.dtype == np.bool_:
        if arr.shape == x.shape or arr.shape == x.shape[1:]:
            sel = np.broadcast_to(arr, x.shape)
        else:
            raise ValueError(
                f"sensitive_columns as a boolean mask must have one row's shape {list(x.shape[1:])} "
                f"or the input's shape {list(x.shape)}, got {list(arr.shape)}"
            )
        if not sel.any():
            raise ValueError("sensitive_columns: the boolean mask selects no input feature")
        return sel
    if x.ndim != 2:
        raise ValueError(
            f"sensitive_columns as column indices needs 2-D inputs [n, d], got shape {list(x.shape)}; "
            "pass a boolean mask of the input's shape instead"
        )
    if arr.ndim != 1 or arr.size == 0:
        raise ValueError(f"sensitive_columns must be a non-empty list of column indices, got {sensitive!r}")
    if not np.issubdtype(arr.dtype, np.integer):
        raise TypeError(f"sensitive_columns must hold integer column indices, got dtype {arr.dtype}")
    d = x.shape[1]
    bad = arr[(arr < 0) | (arr >= d)]
    if bad.size:
        raise ValueError(f"sensitive_columns: indices out of range [0, {d}): {bad[:5].tolist()}")
    if np.unique(arr).size != arr.size:
        raise ValueError("sensitive_columns: duplicate column indices")
    row = np.zeros(d, dtype=bool)
    row[arr] = True
    return np.broadcast_to(row, x.shape)


def _check_inputs(x: Any) -> np.ndarray:
    arr = np.asarray(x)
    if arr.dtype == np.bool_ or not np.issubdtype(arr.dtype, np.number) or np.iscomplexobj(arr):
        raise TypeError(f"x must hold real numbers, got dtype {arr.dtype}")
    if arr.ndim < 2 or arr.shape[0] == 0 or arr[0].size == 0:
        raise ValueError(f"x must be a non-empty array [n, ...] with n >= 1, got shape {list(arr.shape)}")
    if not np.all(np.isfinite(arr)):
        raise ValueError("x must be finite (NaN or inf found)")
    return arr


def mask_inputs(x: Any, sensitive: Any, *, mask_value: str | float = "zero") -> np.ndarray:
    r""":math:`\hat x`: a float64 copy of ``x`` with the sensitive inputs replaced by the mask value.

    Args:
        x: inputs ``[n, ...]``.
        sensitive: column indices (2-D ``x``), or a boolean mask of one row's shape or of
            ``x``'s shape (per-row masks, e.g. face regions).
        mask_value: ``"zero"``, ``"mean"`` (per position, over the rows given: they must be
            public) or a finite number (a public constant).
    """
    xx = _check_inputs(x).astype(np.float64)
    sel = _as_selection(sensitive, xx)
    if isinstance(mask_value, str):
        if mask_value not in MASK_VALUES:
            raise ValueError(f"mask_value must be one of {list(MASK_VALUES)} or a number, got {mask_value!r}")
        fill = np.zeros(xx.shape[1:]) if mask_value == "zero" else xx.mean(axis=0)
    else:
        if isinstance(mask_value, bool) or not isinstance(mask_value, numbers.Real):
            raise TypeError(f"mask_value must be 'zero', 'mean' or a real number, got {mask_value!r}")
        if not math.isfinite(float(mask_value)):
            raise ValueError(f"mask_value must be finite, got {mask_value}")
        fill = np.full(xx.shape[1:], float(mask_value))
    return np.where(sel, np.broadcast_to(fill, xx.shape), xx)


def _embed(embed: Callable[[np.ndarray], Any] | None, x: np.ndarray, what: str) -> np.ndarray:
    if embed is None:
        if x.ndim != 2:
            raise ValueError(f"inputs of shape {list(x.shape)} need an embed callable [n, ...] -> [n, d]")
        return x
    z = np.asarray(embed(x))
    if z.ndim != 2 or z.shape[0] != x.shape[0]:
        raise ValueError(f"embed must map [n, ...] to [n, d]; for {what} it returned shape {list(z.shape)}")
    if z.dtype == np.bool_ or not np.issubdtype(z.dtype, np.number) or not np.all(np.isfinite(z)):
        raise ValueError(f"embed returned non-finite or non-numeric values for {what}")
    return z.astype(np.float64)


def masking_sensitivity(
    x: Any,
    sensitive_columns: Any,
    *,
    embed: Callable[[np.ndarray], Any] | None = None,
    mask_value: str | float = "zero",
) -> np.ndarray:
    r"""beta (Eq. 5), aggregated over rows: ``mean_v |g(x_v) - g(xhat_v)|`` normalised to sum 1.

    Args:
        x: inputs ``[n, ...]`` (PUBLIC rows: beta is published through theta).
        sensitive_columns: the sensitive input features: column indices for ``[n, d]`` features,
            or a boolean mask (one row's shape, or ``x``'s shape for per-row masks).
        embed: ``g``, a callable ``[n, ...] -> [n, d]`` (default: identity, the features are the
            embedding).
        mask_value: what a masked input becomes (:func:`mask_inputs`; default ``"zero"``).

    Returns:
        float64 ``[d]``, non-negative, summing to 1.

    Raises:
        ValueError: masking changes no embedding value on these rows (Eq. 5 is 0/0: e.g. the
            sensitive columns already equal the mask value on every row).
    """
    xx = _check_inputs(x)
    xhat = mask_inputs(xx, sensitive_columns, mask_value=mask_value)
    z = _embed(embed, xx.astype(np.float64), "x")
    zhat = _embed(embed, xhat, "the masked x")
    if z.shape != zhat.shape:
        raise ValueError(f"embed returned {list(z.shape)} for x but {list(zhat.shape)} for the masked x")
    return embedding_sensitivity(z, zhat, what=f"masking the sensitive inputs with mask_value={mask_value!r}")


def embedding_sensitivity(z: Any, zhat: Any, *, what: str = "masking") -> np.ndarray:
    r"""beta (Eq. 5) from the embeddings of the inputs ``z`` and of the masked inputs ``zhat``
    (``[n, d]`` each, PUBLIC rows): ``mean_v |z_v - zhat_v|`` normalised to sum 1.

    Raises:
        ValueError: the shapes differ, or masking changes no embedding value (0/0)."""
    z, zhat = np.asarray(z, dtype=np.float64), np.asarray(zhat, dtype=np.float64)
    if z.ndim != 2 or z.shape != zhat.shape or z.shape[0] == 0:
        raise ValueError(f"embedding_sensitivity: z and zhat must be equal non-empty [n, d], got {list(z.shape)} and {list(zhat.shape)}")
    raw = np.abs(z - zhat).mean(axis=0)
    total = math.fsum(raw.tolist())
    if not total > 0:
        raise ValueError(
            f"beta (Eq. 5) is 0/0: {what} changes no embedding value on the {z.shape[0]} rows given; "
            "choose another mask, more public rows, or other sensitive inputs"
        )
    return raw / total
