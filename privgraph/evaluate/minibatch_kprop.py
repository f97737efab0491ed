r"""KProp over a :class:`~privgraph.evaluate.minibatch_source.ClusterSource`, out of core: the
released features propagated once, cluster by cluster, for a Cluster-GCN to train on.

LPGNN's KProp (Sajadmanesh & Gatica-Perez, CCS 2021; :class:`~privgraph.evaluate.models.kprop.KProp`
with the evaluation's settings: symmetric normalisation, no self-loop except for a node without a
neighbour) computes :math:`\mathbf{X}^{(K)} = \mathbf{P}^K \mathbf{X}` with
:math:`\mathbf{P} = \mathbf{D}^{-1/2}\mathbf{A}\mathbf{D}^{-1/2}` over every edge of the source.
:class:`PropagatedSource` does the same in ``K`` passes over the clusters: two float32 ``[n, d]``
arrays memory-mapped from files of a private temporary directory (the current and the next
step), each pass writing a cluster's rows of the next from its edges and the current rows of
their other ends. It then serves the clusters of the source with :math:`\mathbf{X}^{(K)}` as their
features (dense, as full batch's propagated input: centred, no input dropout), so
:func:`~privgraph.evaluate.minibatch.fit_cluster_gcn` over it trains the full-batch evaluation's
GCN with ``kprop_features=K`` (the ``[n, d]`` input precomputed once per evaluation and shared by
its runs). Post-processing of the release: it reads the source's released features and edges only.

Memory: one cluster and its rows; disk: ``2 n d`` float32 (the page cache keeps what fits).
"""

from __future__ import annotations

import dataclasses
import numbers
import os
import shutil
import tempfile
import weakref
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp

from privgraph.evaluate.minibatch_source import Cluster, ClusterSource, SourceView

__all__ = ["PropagatedSource"]

_WHO = "PropagatedSource"


class PropagatedSource(SourceView):
    """``source``'s clusters with their features replaced by ``K = steps`` KProp steps over all of
    its edges (the module docstring); ``steps=0`` serves the features as they are, dense.

    Raises:
        ValueError: ``steps`` is not an int >= 0.
    """

    def __init__(self, source: ClusterSource, steps: int, *, spill_dir: str | os.PathLike[str] | None = None) -> None:
        if isinstance(steps, bool) or not isinstance(steps, numbers.Integral) or steps < 0:
            raise ValueError(f"{_WHO}: steps must be an int >= 0, got {steps!r}")
        super().__init__(source)
        self.steps = int(steps)
        self._dir = Path(tempfile.mkdtemp(prefix="privgraph-kprop-", dir=spill_dir))
        self._cleanup = weakref.finalize(self, shutil.rmtree, str(self._dir), True)
        try:
            self._x = _propagate(source, self.steps, self._dir)
        except BaseException:
            self.close()
            raise

    def cluster(self, i: int, *, features: bool = True) -> Cluster:
        """Cluster ``i`` of the source, its features the propagated rows (dense float32)."""
        c = self.source.cluster(i, features=False)
        if not self._dir.is_dir():
            raise ValueError(f"{_WHO}: the source is closed")
        return dataclasses.replace(c, x=np.array(self._x[c.nodes]) if features else None)

    def close(self) -> None:
        """Remove the propagated features' files."""
        self._x = None
        self._cleanup()

    def __enter__(self) -> PropagatedSource:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def _degrees(source: ClusterSource) -> np.ndarray:
    """float64 ``[n]``: each node's edges (a cluster lists every edge at its nodes once per
    direction), 1 for a node without any (it keeps its own value, as KProp's added self-loop)."""
    deg = np.zeros(source.num_nodes, dtype=np.float64)
    for i in range(source.num_clusters):
        e = source.cluster(i, features=False).edges
        deg += np.bincount(e[0], minlength=source.num_nodes)
    return deg


def _propagate(source: ClusterSource, steps: int, where: Path) -> np.ndarray:
    """The ``[n, d]`` float32 memory map of ``P^steps X`` (written in ``where``)."""
    n, d = int(source.num_nodes), int(source.feature_dim)
    current = np.lib.format.open_memmap(where / "x-0.npy", mode="w+", dtype=np.float32, shape=(n, d))
    for i in range(source.num_clusters):
        c = source.cluster(i)
        current[c.nodes] = c.x.toarray() if sp.issparse(c.x) else c.x
    if not steps:
        return current
    deg = _degrees(source)
    lonely = deg == 0
    inv_sqrt = 1.0 / np.sqrt(np.where(lonely, 1.0, deg))
    for step in range(1, steps + 1):
        nxt = np.lib.format.open_memmap(where / f"x-{step % 2}.npy", mode="w+", dtype=np.float32, shape=(n, d))
        for i in range(source.num_clusters):
            c = source.cluster(i, features=False)
            local = np.searchsorted(c.nodes, c.edges[0])
            w = (inv_sqrt[c.edges[0]] * inv_sqrt[c.edges[1]]).astype(np.float32)
            op = sp.csr_array((w, (local, c.edges[1])), shape=(c.nodes.size, n))
            rows = op @ current
            alone = lonely[c.nodes]
            if alone.any():
                rows[alone] = current[c.nodes[alone]]
            nxt[c.nodes] = rows
        nxt.flush()
        current = nxt
    return current
