"""What the validation checkpoint reads of a release: a few numbers per partition, not the release.

:func:`release_summary` is computed where a partition of the release is (a worker's task in the
partitioned layout, or this process over the whole in-memory graph) and is a function of the
RELEASE alone (released edges and features, public edges): post-processing, covered by the
release's guarantees. The checkpoint's output suites
(:func:`privgraph.validate.checkpoint.run_checkpoint_from_summaries`) run on one row per
partition and give the same verdict as on the whole release: every edge canonical
(``0 <= src < dst < n``) and every released feature inside the mechanism's output range hold for
the whole release exactly when they hold for each part.
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["SUMMARY_FIELDS", "release_summary"]

#: the keys of a summary (``None`` where a partition has no edges or no features)
SUMMARY_FIELDS = (
    "release_edges", "edges_out_of_range", "edges_not_increasing", "x_min", "x_max", "x_nonfinite", "y_max",
)


def release_summary(edges: np.ndarray, x: np.ndarray | None, num_nodes: int,
                    y: np.ndarray | None = None) -> dict[str, Any]:
    """Counts over ``edges`` (int ``[2, m]``: the part's released and public edges) and the range
    of ``x`` (its released feature rows, or None): ``release_edges`` (their count);
    ``edges_out_of_range`` (an end outside ``[0, num_nodes)``); ``edges_not_increasing``
    (``dst <= src``); ``x_min``, ``x_max`` (None without rows, or when some entry is NaN or
    infinite: then ``x_nonfinite`` is 1, else 0); ``y_max`` (the largest label of ``y``, the
    labels the version holds; None without): the manifest's class count. O(m + rows x d)."""
    e = np.asarray(edges)
    if e.ndim != 2 or e.shape[0] != 2:
        raise ValueError(f"edges must be [2, m], got shape {e.shape}")
    src, dst = e[0], e[1]
    out = (src < 0) | (src >= num_nodes) | (dst < 0) | (dst >= num_nodes)
    lo = hi = None
    if x is not None and x.size > 0:
        lo, hi = float(np.min(x)), float(np.max(x))  # NaN propagates through min and max
    finite = lo is None or (np.isfinite(lo) and np.isfinite(hi))
    return {
        "release_edges": int(e.shape[1]),
        "edges_out_of_range": int(np.count_nonzero(out)),
        "edges_not_increasing": int(np.count_nonzero(dst <= src)),
        "x_min": lo if finite else None,
        "x_max": hi if finite else None,
        "x_nonfinite": 0 if finite else 1,
        "y_max": int(np.max(y)) if y is not None and y.size and y.ndim == 1 else None,
    }
