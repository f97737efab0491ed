"""The dataset options that ``privgraph ingest`` applies while it writes a partitioned graph: the
node split drawn from fractions (``--train/--val``, seeded by ``--node-split-seed``), the edges
between split parts dropped (``--drop-cut-edges``) and the private edges marked by ``--rho``
(seeded by ``--split-seed``).

The path at scale reads a graph as ingest wrote it and refuses these options in ``pipelines.yaml``
(:mod:`privgraph.ingest.option_support`), so they are applied here, by the in-memory loader's own
functions and in its order (split, then cut, then rho: :func:`~privgraph.ingest.datasets.load_dataset`):
:func:`~privgraph.ingest.datasets.split.random_node_split`,
:func:`~privgraph.ingest.datasets.split.uncut_edges` and
:func:`~privgraph.ingest.datasets.split.private_edge_positions` over the edges in sorted ``(u, v)``
order, which is the order of the ranges one after the other. A graph that fits in memory gets the
same split, edges and marking both ways for the same seeds (tests/test_partitioned_options.py).
"""

from __future__ import annotations

import dataclasses
import math
import numbers
from collections.abc import Callable
from typing import Any

import numpy as np

from privgraph.errors import ConfigError
from privgraph.ingest.datasets.split import node_parts, private_edge_positions, random_node_split, uncut_edges

__all__ = ["IngestOptions", "EdgePlan", "plan_edges"]


def _seed(value: Any, flag: str) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 0:
        raise ConfigError(f"{flag}: a seed is a non-negative integer, got {value!r}")
    return int(value)


def _share(value: Any, flag: str, *, closed: bool) -> float | None:
    """``value`` as a float in [0, 1] (``closed``) or (0, 1); None stays None."""
    if value is None:
        return None
    ok = not isinstance(value, bool) and isinstance(value, numbers.Real) and math.isfinite(float(value))
    v = float(value) if ok else math.nan
    inside = 0.0 <= v <= 1.0 if closed else 0.0 < v < 1.0
    if not inside:
        raise ConfigError(f"{flag}: expected a fraction in {'[0, 1]' if closed else '(0, 1)'}, got {value!r}")
    return v


@dataclasses.dataclass(frozen=True)
class IngestOptions:
    """The dataset options an ingest applies (each the ``pipelines.yaml`` option of that name;
    seeds, like there, are configuration and never written into the graph or a manifest)."""

    rho: float | None = None
    split_seed: int = 0
    train: float | None = None
    val: float | None = None
    node_split_seed: int = 0
    drop_cut_edges: bool = False

    def checked(self, *, split_file: bool) -> IngestOptions:
        """The options with their values checked, before any data is read (``split_file``: a
        ``--split`` file is given).

        Raises:
            ConfigError: one line naming the flag (exit code 2).
        """
        rho = _share(self.rho, "--rho", closed=True)
        train = _share(self.train, "--train", closed=False)
        val = _share(self.val, "--val", closed=False)
        if split_file and (train is not None or val is not None):
            raise ConfigError(f"--{'train' if train is not None else 'val'}: give a split file (--split) or "
                              "random fractions (--train, --val), not both")
        if train is not None or val is not None:  # the missing one: LPGNN's 0.5 / 0.25, as in memory
            train, val = (0.5 if train is None else train), (0.25 if val is None else val)
            if train + val >= 1.0:
                raise ConfigError(f"--val: train + val must leave test nodes (< 1), got {train:g} + {val:g}")
        if not isinstance(self.drop_cut_edges, bool):
            raise ConfigError(f"--drop-cut-edges: expected true or false, got {self.drop_cut_edges!r}")
        if self.drop_cut_edges and not split_file and train is None:
            raise ConfigError("--drop-cut-edges: the graph has no node split to cut along; give --split or "
                              "--train/--val")
        return IngestOptions(rho, _seed(self.split_seed, "--split-seed"), train, val,
                             _seed(self.node_split_seed, "--node-split-seed"), self.drop_cut_edges)

    @property
    def fractions(self) -> tuple[float, float] | None:
        return None if self.train is None else (self.train, float(self.val or 0.0))

    def random_split(self, num_nodes: int, labelled: np.ndarray | None) -> np.ndarray | None:
        """Each node's part (:func:`~privgraph.ingest.datasets.split.node_parts`) of the seeded
        random split, or None without fractions (the in-memory loader's call)."""
        if self.fractions is None:
            return None
        train, val = self.fractions
        masks = random_node_split(num_nodes, train=train, val=val, seed=self.node_split_seed, labelled=labelled)
        return node_parts(num_nodes, masks)

    def source_notes(self) -> dict[str, str]:
        """What ``graph.json``'s ``source`` says of the options applied (values, never seeds)."""
        notes: dict[str, str] = {}
        if self.fractions is not None:
            train, val = self.fractions
            notes["node_split"] = f"random node split {train:g}/{val:g}/{1 - train - val:g} (seeded)"
        if self.drop_cut_edges:
            notes["cut_edges"] = "edges between split parts dropped (drop_cut_edges)"
        if self.rho is not None:
            notes["private_edges"] = f"rho {self.rho:g}: round(rho * m) of the m edges marked private (seeded)"
        return notes


@dataclasses.dataclass(frozen=True)
class EdgePlan:
    """Which edges of each range are kept and which are private: built by :func:`plan_edges`."""

    part: np.ndarray | None  # each node's split part, when cut edges are dropped
    offsets: np.ndarray | None  # [ranges + 1]: the first kept edge's position of each range, when rho marks
    positions: np.ndarray | None  # the sorted positions of the private edges, when rho marks

    def apply(self, i: int, lo: np.ndarray, hi: np.ndarray, private: np.ndarray) -> tuple[np.ndarray, ...]:
        """Range ``i``'s edges (sorted ``(lo, hi)``, their file flags): the kept ones, and their
        flags (rho's marking in place of the file's, which rho refuses to replace)."""
        if self.part is not None:
            keep = uncut_edges(self.part, np.stack([lo, hi]))
            lo, hi, private = lo[keep], hi[keep], private[keep]
        if self.positions is not None and self.offsets is not None:
            start, stop = int(self.offsets[i]), int(self.offsets[i + 1])
            if stop - start != lo.size:
                raise AssertionError(f"range {i}: {lo.size} edges where the first pass counted {stop - start}")
            mine = self.positions[np.searchsorted(self.positions, start):np.searchsorted(self.positions, stop)]
            private = np.zeros(lo.size, dtype=bool)
            private[mine - start] = True
        return lo, hi, private


def plan_edges(options: IngestOptions, part: np.ndarray | None, num_ranges: int,
               range_edges: Callable[[int], np.ndarray]) -> EdgePlan:
    """The plan for ``options`` (checked) over a graph whose split parts are ``part``: with rho, one
    pass over the ranges (``range_edges(i)``: range ``i``'s edges ``[2, k]``) counts the edges that
    stay, then THE rule draws the private positions among them. Memory: ``8 m`` bytes while the
    rule draws (``m`` edges), then 8 bytes per private edge."""
    cut = part if options.drop_cut_edges else None
    if options.rho is None:
        return EdgePlan(cut, None, None)
    counts = np.zeros(num_ranges + 1, dtype=np.int64)
    for i in range(num_ranges):
        e = range_edges(i)
        counts[i + 1] = int(uncut_edges(cut, e).sum()) if cut is not None else e.shape[1]
    offsets = np.cumsum(counts)
    return EdgePlan(cut, offsets, private_edge_positions(int(offsets[-1]), options.rho, seed=options.split_seed))
