r"""Mini-batch evaluation: Cluster-GCN training over the clusters of a :class:`ClusterSource`.

:func:`fit_cluster_gcn` trains the full-batch evaluation's :class:`~privgraph.evaluate.models.GCN`
as Cluster-GCN does (Chiang et al., KDD 2019, Algorithm 1): every epoch the clusters are shuffled
and cut into batches of ``q = clusters_per_batch``; each step trains on the subgraph INDUCED by
one batch's nodes (edges between two clusters of the batch kept, edges leaving it dropped),
normalised within the batch (self-loops added, the model's aggregation: average by default, or
Kipf & Welling's symmetric one), with the loss over the batch's training nodes. After every epoch
every node is scored (``inference``, below) and the parameters of the best validation accuracy
are kept, as the full-batch loop does (:func:`~privgraph.evaluate.training._train_loop`).

Memory: a step holds one batch (its features ``[k, d]``, its induced edges, the model's
activations); nothing of size ``n x feature_dim`` is ever allocated. Inference:

- ``"layerwise"`` (default): the exact full-graph forward pass, one layer at a time over the
  clusters (``X W_1`` per cluster, then each layer's propagation over every edge of each
  cluster, with the GLOBAL degrees): the full-batch model's own predictions, up to float
  summation order. Holds ``n x hidden`` and ``n x num_classes`` float32 besides one cluster.
- ``"batch"``: the clusters in fixed batches of ``q`` (ids ``0..q-1``, ``q..2q-1``, ...), each
  scored on its induced subgraph as in training: memory bounded by the batch, but the edges
  between batches are not seen.

Randomness: the initial parameters and every dropout mask come from a :class:`torch.Generator`
seeded as the full-batch run's (:func:`~privgraph.evaluate.models.basic.torch_seed`), the
batches from a ``numpy`` generator of the seed's child ``"cluster_batches"``: nothing else is read.
With one cluster a run trains exactly as :func:`~privgraph.evaluate.training.fit_node_classifier`
(same parameters, masks and steps). Measurements: docs/evaluation-cost.md, "Mini-batch
evaluation (Cluster-GCN)".
"""

from __future__ import annotations

import dataclasses
import numbers
from collections.abc import Iterator
from typing import Any

import numpy as np
import scipy.sparse as sp
import torch
import torch.nn.functional as F

from privgraph.evaluate.minibatch_source import Cluster, ClusterSource, GraphClusterSource, public_clusters
from privgraph.evaluate.models.basic import torch_seed
from privgraph.evaluate.models import GCN
from privgraph.evaluate.models.sparse import quiet_sparse_beta
from privgraph.evaluate.sparsity import SPARSE_DENSITY
from privgraph.evaluate.training import choose_device
from privgraph.graph import SPLIT_MASKS
from privgraph.seeding import as_seed_sequence, stage_seed

__all__ = ["INFERENCE", "Cluster", "ClusterSource", "GraphClusterSource", "fit_cluster_gcn", "public_clusters"]

#: how :func:`fit_cluster_gcn` scores every node after an epoch (the module docstring)
INFERENCE = ("layerwise", "batch")
_WHO = "fit_cluster_gcn"


@dataclasses.dataclass
class _Plan:
    """What one pass over the source found: the model input's form (sparse CSR, or dense centred
    by ``center``, the column mean over all nodes, as full batch) and the degrees."""

    num_nodes: int
    sparse: bool
    center: torch.Tensor | None
    degree: np.ndarray  # int64 [n]: the edges at each node (no self-loop)

    def model_input(self, x: np.ndarray | sp.csr_array, dev: torch.device) -> torch.Tensor:
        """Features ``[k, d]`` (dense, or scipy CSR) as the first layer reads them: full batch's
        form (:func:`~privgraph.evaluate.model_inputs._model_input`), chosen for the whole graph."""
        if self.sparse:
            return _csr(x if sp.issparse(x) else sp.csr_array(np.asarray(x, dtype=np.float32))).to(dev)
        assert self.center is not None
        dense = x.toarray() if sp.issparse(x) else x
        return torch.from_numpy(np.ascontiguousarray(dense, dtype=np.float32)).to(dev) - self.center.to(dev)


def _csr(x: sp.csr_array) -> torch.Tensor:
    """A scipy CSR matrix as a float32 torch CSR tensor."""
    x = sp.csr_array(x, dtype=np.float32)
    x.sort_indices()
    with quiet_sparse_beta():
        return torch.sparse_csr_tensor(torch.from_numpy(x.indptr.astype(np.int64)),
                                       torch.from_numpy(x.indices.astype(np.int64)),
                                       torch.from_numpy(x.data), x.shape, check_invariants=False)


@dataclasses.dataclass
class _Batch:
    """The subgraph induced by some clusters, on the device."""

    clusters: tuple[int, ...]
    nodes: np.ndarray  # global ids, cluster after cluster (ascending within each)
    x: torch.Tensor
    edge_index: torch.Tensor  # local ids, both directions
    y: torch.Tensor
    masks: dict[str, torch.Tensor]  # bool [k] per split

    @property
    def size(self) -> int:
        return int(self.nodes.size)


class _Batches:
    """Builds batches from the source, keeping the last one (a batch drawn again, e.g. the only
    one of a single cluster, is reused with its cached propagation operator); ``peak``: the most
    nodes of one batch. ``local_of``: int64 ``[n]``, -1 but while a batch is induced (its nodes'
    local ids): a lookup in O(1) per edge end, where a sorted search took 40% of an epoch at 10^6
    nodes (docs/evaluation-cost.md)."""

    def __init__(self, source: ClusterSource, plan: _Plan, dev: torch.device) -> None:
        self.source, self.plan, self.dev = source, plan, dev
        self.last: _Batch | None = None
        self.peak = 0
        self.local_of = np.full(source.num_nodes, -1, dtype=np.int64)

    def get(self, ids: tuple[int, ...]) -> _Batch:
        if self.last is not None and self.last.clusters == ids:
            return self.last
        self.last = None  # the previous batch is released before the next one is read
        self.last = _induced_batch([self.source.cluster(i) for i in ids], ids, self.plan, self.dev, self.local_of)
        self.peak = max(self.peak, self.last.size)
        return self.last


def _local_edges(nodes: np.ndarray, edges: np.ndarray, local_of: np.ndarray) -> np.ndarray:
    """int64 ``[2, e']``: the ``edges`` (global ids, first end in ``nodes``) whose second end is in
    ``nodes`` too, in their order, as local ids (positions in ``nodes``, distinct ids). ``local_of``:
    int64 ``[n]`` of -1, used as the global -> local map and left as it was. O(nodes + edges)."""
    local_of[nodes] = np.arange(nodes.size, dtype=np.int64)
    try:
        target = local_of[edges[1]]
        inside = target >= 0
        return np.stack([local_of[edges[0][inside]], target[inside]]) if edges.size else np.zeros((2, 0), np.int64)
    finally:
        local_of[nodes] = -1


def _induced_batch(parts: list[Cluster], ids: tuple[int, ...], plan: _Plan, dev: torch.device,
                   local_of: np.ndarray) -> _Batch:
    """The clusters' union (in the clusters' order) and the edges between its nodes (local ids, in
    the clusters' edge order; an edge's first end is always the cluster's own node).
    ``local_of``: int64 ``[n]`` of -1, used as the global -> local map and left as it was."""
    nodes = np.concatenate([p.nodes for p in parts])
    edge_index = _local_edges(nodes, np.concatenate([p.edges for p in parts], axis=1), local_of)
    xs = [p.x for p in parts]
    x = sp.vstack(xs, format="csr") if any(sp.issparse(v) for v in xs) else np.concatenate(xs)
    masks = {m: torch.from_numpy(np.concatenate([getattr(p, m) for p in parts])).to(dev) for m in SPLIT_MASKS}
    return _Batch(ids, nodes, plan.model_input(x, dev), torch.from_numpy(edge_index).to(dev),
                  torch.from_numpy(np.concatenate([p.y for p in parts]).astype(np.int64)).to(dev), masks)


def _check_cluster(c: Any, i: int, n: int, d: int, classes: int) -> None:
    """One cluster as the protocol says (shapes, ids in range, labels of split nodes in range)."""
    if not isinstance(c, Cluster):
        raise TypeError(f"{_WHO}: source.cluster({i}) returned a {type(c).__name__}, not a Cluster")
    k = c.nodes.shape[0]
    ok = (c.nodes.ndim == 1 and c.x is not None and c.x.shape == (k, d) and c.y.shape == (k,)
          and all(getattr(c, m).shape == (k,) for m in SPLIT_MASKS) and c.edges.ndim == 2 and c.edges.shape[0] == 2)
    if not ok:
        raise ValueError(f"{_WHO}: cluster {i} has inconsistent shapes (nodes {list(c.nodes.shape)}, x "
                         f"{None if c.x is None else list(c.x.shape)}, y {list(c.y.shape)}, edges {list(c.edges.shape)}; feature_dim {d})")
    if k and (c.nodes.min() < 0 or c.nodes.max() >= n or (np.diff(c.nodes) <= 0).any()):
        raise ValueError(f"{_WHO}: cluster {i}'s nodes must be ascending distinct ids in [0, {n})")
    if not all(np.issubdtype(a.dtype, np.integer) for a in (c.nodes, c.y, c.edges)):
        raise ValueError(f"{_WHO}: cluster {i}'s nodes, y and edges must be integer arrays")
    if c.edges.size:
        pos = np.minimum(np.searchsorted(c.nodes, c.edges[0]), max(k - 1, 0))
        if not k or (c.nodes[pos] != c.edges[0]).any():
            raise ValueError(f"{_WHO}: cluster {i} has edges whose first end is not one of its nodes")
        if c.edges[1].min() < 0 or c.edges[1].max() >= n:
            raise ValueError(f"{_WHO}: cluster {i} has edges to ids outside [0, {n})")
    split = c.train_mask | c.val_mask | c.test_mask
    if split.any() and (c.y[split].min() < 0 or c.y[split].max() >= classes):
        raise ValueError(f"{_WHO}: cluster {i} has split nodes with labels outside [0, {classes})")


def _survey(source: ClusterSource) -> _Plan:
    """One pass over the clusters: checks them (a training and a validation node at least), counts
    the features' non-zeros and column sums (the model input's form) and the degrees."""
    n, d, classes = int(source.num_nodes), int(source.feature_dim), int(source.num_classes)
    seen = np.zeros(n, dtype=bool)
    degree = np.zeros(n, dtype=np.int64)
    colsum = np.zeros(d, dtype=np.float64)
    counts = dict.fromkeys(SPLIT_MASKS, 0)
    nnz = 0
    for i in range(source.num_clusters):
        c = source.cluster(i)
        _check_cluster(c, i, n, d, classes)
        if seen[c.nodes].any():
            raise ValueError(f"{_WHO}: cluster {i} repeats nodes of an earlier cluster")
        seen[c.nodes] = True
        nnz += int(c.x.count_nonzero() if sp.issparse(c.x) else np.count_nonzero(c.x))
        colsum += np.asarray(c.x.sum(axis=0, dtype=np.float64)).reshape(-1)
        degree[c.nodes] += np.bincount(np.searchsorted(c.nodes, c.edges[0]), minlength=c.size)
        for m in SPLIT_MASKS:
            counts[m] += int(np.count_nonzero(getattr(c, m)))
    if not seen.all():
        raise ValueError(f"{_WHO}: the clusters miss {int((~seen).sum())} of the {n} nodes")
    for m in ("train_mask", "val_mask"):
        if not counts[m]:
            raise ValueError(f"{_WHO}: {m} selects no node")
    sparse = n * d > 0 and nnz <= SPARSE_DENSITY * n * d
    center = None if sparse else torch.from_numpy((colsum / max(n, 1)).astype(np.float32))
    return _Plan(n, sparse, center, degree)


def _check_args(source: Any, *, clusters_per_batch: Any, hidden: Any, epochs: Any, lr: Any, weight_decay: Any,
                dropout: Any, patience: Any, aggr: Any, inference: Any) -> None:
    """One-line ValueErrors naming the argument."""
    if not isinstance(source, ClusterSource):
        raise TypeError(f"{_WHO}: source must be a ClusterSource (num_nodes, num_clusters, num_classes, "
                        f"feature_dim, cluster(i)), got {type(source).__name__}")
    if int(source.num_clusters) < 1:
        raise ValueError(f"{_WHO}: the source has no cluster")

    def real(value: Any) -> bool:
        return isinstance(value, numbers.Real) and not isinstance(value, bool) and bool(np.isfinite(float(value)))

    for name, value in (("clusters_per_batch", clusters_per_batch), ("hidden", hidden), ("epochs", epochs),
                        ("patience", 1 if patience is None else patience)):
        if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
            raise ValueError(f"{_WHO}: {name} must be an int >= 1, got {value!r}")
    if not real(lr) or lr <= 0:
        raise ValueError(f"{_WHO}: lr must be a finite number > 0, got {lr!r}")
    if not real(weight_decay) or weight_decay < 0:
        raise ValueError(f"{_WHO}: weight_decay must be a finite number >= 0, got {weight_decay!r}")
    if not real(dropout) or not 0 <= dropout < 1:
        raise ValueError(f"{_WHO}: dropout must be a number in [0, 1), got {dropout!r}")
    if aggr not in (None, "mean", "gcn"):
        raise ValueError(f"{_WHO}: aggr must be None (the GCN's own, 'mean'), 'mean' or 'gcn', got {aggr!r}")
    if inference not in INFERENCE:
        raise ValueError(f"{_WHO}: inference must be one of {', '.join(map(repr, INFERENCE))}, got {inference!r}")


def fit_cluster_gcn(
    source: ClusterSource, *, seed: int | np.random.SeedSequence, clusters_per_batch: int = 4, hidden: int = 64,
    epochs: int = 200, lr: float = 0.01, weight_decay: float = 5e-4, dropout: float = 0.5, patience: int | None = 25,
    aggr: str | None = None, inference: str = "layerwise", device: str = "auto",
) -> dict[str, Any]:
    """Train a 2-layer :class:`~privgraph.evaluate.models.GCN` by Cluster-GCN over ``source``'s
    clusters (the module docstring) and score it at the epoch of best validation accuracy.

    Args:
        source: the clusters (:class:`ClusterSource`; e.g. :class:`GraphClusterSource`).
        seed: seeds the parameters, the dropout masks and the batches; same seed, source and
            arguments: the same result on the CPU.
        clusters_per_batch: ``q``, the clusters of one step (default 4).
        hidden, epochs, lr, weight_decay, dropout, patience, aggr: as
            :func:`~privgraph.evaluate.training.fit_node_classifier` (64, 200, 0.01, 5e-4, 0.5,
            25, the GCN's own aggregation ``"mean"``; ``"gcn"``: symmetric). An epoch is one pass
            over every cluster.
        inference: ``"layerwise"`` (exact, default) or ``"batch"`` (bounded by the batch).
        device: see :func:`~privgraph.evaluate.training.choose_device`.

    Returns:
        dict: ``test_acc``, ``val_acc``, ``train_acc`` (at the selected epoch), ``best_epoch``
        (1-based), ``epochs_run``, ``device``, ``peak_batch_nodes`` (the most nodes of one batch
        held), ``num_clusters``, ``clusters_per_batch``, ``inference``.

    Raises:
        ValueError: a bad argument, a cluster that breaks the protocol, no training or validation node.
    """
    _check_args(source, clusters_per_batch=clusters_per_batch, hidden=hidden, epochs=epochs, lr=lr,
                weight_decay=weight_decay, dropout=dropout, patience=patience, aggr=aggr, inference=inference)
    dev = choose_device(device)
    plan = _survey(source)
    g = torch.Generator(device=dev)
    g.manual_seed(torch_seed(seed))
    # as full batch's _seeded_net: built from a throwaway generator, moved, then drawn from the run's
    net = GCN(int(source.feature_dim), int(hidden), int(source.num_classes), dropout=float(dropout), cached=True,
              input_dropout=plan.sparse, generator=torch.Generator().manual_seed(0),
              **({} if aggr is None else {"aggr": aggr})).to(dev)
    net.reset_parameters(g)
    rng = np.random.default_rng(stage_seed(as_seed_sequence(seed), "cluster_batches"))
    batches = _Batches(source, plan, dev)
    loop = _Loop(net, batches, g, rng, clusters_per_batch=int(clusters_per_batch), inference=inference)
    best_epoch, epochs_run, scores = loop.run(epochs=int(epochs), lr=float(lr), weight_decay=float(weight_decay),
                                              patience=patience)
    return {**scores, "best_epoch": best_epoch, "epochs_run": epochs_run, "device": str(dev),
            "peak_batch_nodes": batches.peak, "num_clusters": int(source.num_clusters),
            "clusters_per_batch": int(clusters_per_batch), "inference": inference}


def _epoch_batches(rng: np.random.Generator, num_clusters: int, q: int) -> Iterator[tuple[int, ...]]:
    """One epoch's batches: the clusters in a random order, ``q`` at a time (Cluster-GCN's
    sampling of ``q`` clusters without replacement until every cluster was drawn)."""
    order = rng.permutation(num_clusters)
    for i in range(0, num_clusters, q):
        yield tuple(sorted(int(c) for c in order[i:i + q]))


class _Tally:
    """Correct predictions per split and the validation loss, over the nodes scored so far."""

    def __init__(self) -> None:
        self.correct = dict.fromkeys(SPLIT_MASKS, 0)
        self.total = dict.fromkeys(SPLIT_MASKS, 0)
        self.val_loss = 0.0

    def add(self, logits: torch.Tensor, y: torch.Tensor, masks: dict[str, torch.Tensor]) -> None:
        hit = logits.argmax(1) == y
        for m in SPLIT_MASKS:
            self.correct[m] += int(hit[masks[m]].sum())
            self.total[m] += int(masks[m].sum())
        if bool(masks["val_mask"].any()):
            v = masks["val_mask"]
            self.val_loss += float(F.cross_entropy(logits[v], y[v], reduction="sum"))

    def scores(self) -> dict[str, float]:
        acc = {m: self.correct[m] / self.total[m] if self.total[m] else float("nan") for m in SPLIT_MASKS}
        return {"test_acc": acc["test_mask"], "val_acc": acc["val_mask"], "train_acc": acc["train_mask"],
                "val_loss": self.val_loss / max(self.total["val_mask"], 1)}


class _Loop:
    """Cluster-GCN's epochs and the model selection of the full-batch loop."""

    def __init__(self, net: GCN, batches: _Batches, g: torch.Generator, rng: np.random.Generator, *,
                 clusters_per_batch: int, inference: str) -> None:
        self.net, self.batches, self.g, self.rng = net, batches, g, rng
        self.q, self.inference = clusters_per_batch, inference

    def step(self, opt: torch.optim.Optimizer, batch: _Batch) -> None:
        """One Adam step on the batch's training nodes (none: no step)."""
        train = batch.masks["train_mask"]
        if not bool(train.any()):
            return
        opt.zero_grad(set_to_none=True)
        out = self.net(batch.x, batch.edge_index, generator=self.g)
        F.cross_entropy(out[train], batch.y[train]).backward()
        opt.step()

    def run(self, *, epochs: int, lr: float, weight_decay: float, patience: int | None
            ) -> tuple[int, int, dict[str, float]]:
        """Train; keep the parameters of the best validation accuracy (ties: the lower validation
        loss, then the earlier epoch), load them; returns the best epoch, the epochs run and the
        scores at the best epoch."""
        net = self.net
        opt = torch.optim.Adam(net.parameters(), lr=lr, weight_decay=weight_decay, foreach=True)
        best_key: tuple[float, float] | None = None
        best_epoch = epochs_run = 0
        best_state: dict[str, torch.Tensor] = {}
        best_scores: dict[str, float] = {}
        for epoch in range(1, epochs + 1):
            net.train()
            for ids in _epoch_batches(self.rng, self.batches.source.num_clusters, self.q):
                self.step(opt, self.batches.get(ids))
            epochs_run = epoch
            net.eval()
            scores = self.score()
            key = (scores["val_acc"], -scores["val_loss"])
            if best_key is None or key > best_key:
                best_key, best_epoch, best_scores = key, epoch, scores
                best_state = {k: v.detach().clone() for k, v in net.state_dict().items()}
            elif patience is not None and epoch - best_epoch >= patience:
                break
        net.load_state_dict(best_state)
        net.eval()
        best_scores = {k: v for k, v in best_scores.items() if k != "val_loss"}
        return best_epoch, epochs_run, best_scores

    @torch.no_grad()
    def score(self) -> dict[str, float]:
        """Every node's prediction by the current parameters (``inference``), tallied."""
        tally = _Tally()
        if self.inference == "batch":
            for i in range(0, self.batches.source.num_clusters, self.q):
                batch = self.batches.get(tuple(range(i, min(i + self.q, self.batches.source.num_clusters))))
                if batch.size:
                    tally.add(self.net(batch.x, batch.edge_index), batch.y, batch.masks)
        else:
            _layerwise(self.net, self.batches.source, self.batches.plan, self.batches.dev, tally)
        return tally.scores()


def _propagate(c: Cluster, h: torch.Tensor, deg_hat: np.ndarray, normalize: str, dev: torch.device) -> torch.Tensor:
    """Rows ``c.nodes`` of ``P h`` over the whole graph: each node's closed neighbourhood, with
    the GLOBAL degrees (``deg_hat``: edges + the self-loop), as the GCN's layer weighs it; one
    CSR ``[k, n]`` product."""
    k = c.size
    src = np.concatenate([np.searchsorted(c.nodes, c.edges[0]), np.arange(k)])
    dst = np.concatenate([c.edges[1], c.nodes])
    d_src = deg_hat[c.nodes][src]
    w = 1.0 / d_src if normalize == "mean" else 1.0 / np.sqrt(d_src * deg_hat[dst])
    w[c.edges.shape[1]:] = 1.0 / deg_hat[c.nodes]  # the self-loop: 1/d in both normalisations
    order = np.argsort(src, kind="stable")
    crow = np.zeros(k + 1, dtype=np.int64)
    np.cumsum(np.bincount(src, minlength=k), out=crow[1:])
    with quiet_sparse_beta():
        op = torch.sparse_csr_tensor(torch.from_numpy(crow), torch.from_numpy(dst[order].astype(np.int64)),
                                     torch.from_numpy(w[order].astype(np.float32)), (k, h.shape[0]),
                                     check_invariants=False)
    return op.to(dev) @ h


def _layerwise(net: GCN, source: ClusterSource, plan: _Plan, dev: torch.device, tally: _Tally) -> None:
    """The GCN's exact forward pass (evaluation mode) one layer at a time over the clusters:
    ``H = X W_1^T`` per cluster, then per layer and cluster ``P H + b`` (ReLU and the next
    layer's weight applied before storing), the last layer's logits tallied per cluster. Holds
    one ``[n, width]`` array per layer boundary, never ``[n, feature_dim]``."""
    convs = net.convs
    n = plan.num_nodes
    deg_hat = (plan.degree + 1).astype(np.float64)
    h = torch.empty((n, convs[0].out_channels), dtype=torch.float32, device=dev)
    for i in range(source.num_clusters):
        c = source.cluster(i)
        if c.size:
            h[torch.from_numpy(c.nodes).to(dev)] = plan.model_input(c.x, dev) @ convs[0].weight.t()
    for layer, conv in enumerate(convs):
        last = layer == len(convs) - 1
        nxt = None if last else torch.empty((n, convs[layer + 1].out_channels), dtype=torch.float32, device=dev)
        for i in range(source.num_clusters):
            c = source.cluster(i, features=False)
            if not c.size:
                continue
            a = _propagate(c, h, deg_hat, conv.normalize, dev)
            if conv.bias is not None:
                a = a + conv.bias
            if last:
                tally.add(a, torch.from_numpy(c.y).to(dev),
                          {m: torch.from_numpy(getattr(c, m)).to(dev) for m in SPLIT_MASKS})
            else:
                assert nxt is not None
                nxt[torch.from_numpy(c.nodes).to(dev)] = a.relu() @ convs[layer + 1].weight.t()
        if nxt is not None:
            h = nxt
