"""Seeded splits: which edges are private (``split_public_private``) and train/val/test nodes.

Both draw their randomness only from a ``numpy.random.Generator`` built by
:func:`privgraph.seeding.as_generator`; the same seed gives the same split. Seeds are never
written into ``meta`` (a seed plus the raw data replays the split).
"""

from __future__ import annotations

import math
import numbers
from typing import Any

import numpy as np

from privgraph.graph import GraphData
from privgraph.seeding import as_generator

__all__ = ["split_public_private", "random_node_split"]

PRIVATE_EDGE_SELECTION = (
    "uniform without replacement: exactly round(rho * m) of all m undirected edges "
    "(edges in sorted (u, v) order, seeded numpy Generator)"
)


def _fraction(value: Any, name: str) -> float:
    """``value`` as a float in [0, 1]; ValueError naming ``name`` otherwise (NaN, bool, str, ...)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ValueError(f"{name} must be a real number in [0, 1], got {value!r}")
    v = float(value)
    if not math.isfinite(v) or v < 0.0 or v > 1.0:
        raise ValueError(f"{name} must be in [0, 1], got {value!r}")
    return v


def split_public_private(graph: GraphData, rho: float, *, seed: Any) -> GraphData:
    """Mark a uniformly random fraction ``rho`` of ALL edges private, the rest public.

    Exactly ``round(rho * m)`` of the graph's ``m`` undirected edges become private (papers use
    ``rho`` in {0.05, 0.1, 0.2}). Any previous public/private marking is replaced: the selection
    is made over all edges taken in sorted ``(u, v)`` order, so it depends only on the edge set
    and the seed, not on how the input was split before.

    Args:
        graph (GraphData): the input graph (not mutated).
        rho (float): the private fraction, in ``[0, 1]``.
        seed: ``None``, a non-negative int, a ``SeedSequence`` or a ``Generator``.

    Returns:
        GraphData: a copy with new ``edges_public`` / ``edges_private`` and
        ``meta["private_edge_fraction"] = rho``, ``meta["private_edge_selection"]``.

    Raises:
        ValueError: ``rho`` is not a number in ``[0, 1]``.
    """
    rho = _fraction(rho, "rho")
    rng = as_generator(seed)
    e = graph.edges("all")
    m = e.shape[1]
    if m:
        order = np.lexsort((e[1], e[0]))
        e = e[:, order]
    k = int(round(rho * m))
    private = np.zeros(m, dtype=bool)
    if k:
        private[rng.choice(m, size=k, replace=False)] = True
    meta = dict(graph.meta)
    meta["private_edge_fraction"] = rho
    meta["private_edge_selection"] = PRIVATE_EDGE_SELECTION
    return graph.replace(
        edges_public=np.ascontiguousarray(e[:, ~private]),
        edges_private=np.ascontiguousarray(e[:, private]),
        meta=meta,
    )


def random_node_split(
    num_nodes: int, *, train: float = 0.5, val: float = 0.25, seed: Any
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A seeded random train/val/test node split (disjoint boolean masks covering all nodes).

    ``round(train * n)`` nodes go to train, ``round(val * n)`` to val and the rest to test.

    Args:
        num_nodes (int): number of nodes ``n``.
        train (float): training fraction (default: ``0.5``).
        val (float): validation fraction (default: ``0.25``); ``train + val <= 1``.
        seed: ``None``, a non-negative int, a ``SeedSequence`` or a ``Generator``.

    Returns:
        tuple: ``(train_mask, val_mask, test_mask)``, boolean arrays of shape ``[n]``.
    """
    if isinstance(num_nodes, bool) or not isinstance(num_nodes, numbers.Integral) or num_nodes < 0:
        raise ValueError(f"num_nodes must be a non-negative int, got {num_nodes!r}")
    n = int(num_nodes)
    train = _fraction(train, "train")
    val = _fraction(val, "val")
    if train + val > 1.0 + 1e-12:
        raise ValueError(f"train + val must be <= 1, got train={train!r}, val={val!r}")
    n_train = int(round(train * n))
    n_val = min(int(round(val * n)), n - n_train)
    perm = as_generator(seed).permutation(n)
    masks = []
    for idx in (perm[:n_train], perm[n_train : n_train + n_val], perm[n_train + n_val :]):
        mask = np.zeros(n, dtype=bool)
        mask[idx] = True
        masks.append(mask)
    return masks[0], masks[1], masks[2]
