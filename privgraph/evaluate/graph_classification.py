"""Graph classification under edge LDP: paper 004's (DPRR's) experiment, library side.

* :class:`GIN0GraphClassifier`: GIN-0 for whole graphs as in the code paper 004 used ([3], Xu et
  al.'s ``powerful-gnns``) with paper 004's mean readout.
* :func:`cross_validate`: stratified k-fold accuracy and ROC AUC of GIN-0 on a
  :class:`~privgraph.ingest.datasets.graph_set.GraphSet`.
* :func:`privatize_graph_set` / :func:`privatize_one_graph`: an edge mechanism (DPRR, Warner RR,
  LocalLap, NonPriv-Part, ...) applied to every graph's private edges independently, through
  :func:`privgraph.privatize.release.privatize_graph` and :func:`privgraph.parts.executor.map_partitions`.

Randomness: model parameters and dropout masks come from a :class:`torch.Generator` seeded from
the ``numpy.random.Generator`` passed in (via :func:`privgraph.evaluate.models.basic.torch_seed`), batch order
from numpy generators derived from it; torch's and numpy's global states are never touched. On the
CPU the same seed gives the same result; on CUDA scatter additions may differ in the last bits.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from typing import Any, Literal

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor
from torch.nn import BatchNorm1d, Linear, Module, ModuleList

from privgraph.guarantee.ledger import LedgerEntry, PrivacyLedger
from privgraph.ingest.datasets.graph_set import GraphSet
from privgraph.graph import GraphData
from privgraph.mechanisms import EdgeMechanism, edge_mechanisms
from privgraph.guarantee.params import check_int
from privgraph.evaluate.models.basic import GeneratorDropout, check_generator, check_positive_int, fresh_generator, torch_seed
from privgraph.parts.executor import Executor, map_partitions
from privgraph.parts.partition import Partitioning
from privgraph.privatize.release import privatize_graph
from privgraph.seeding import as_generator, as_seed_sequence, partition_seeds, stage_seed
from privgraph.evaluate.training import choose_device

__all__ = [
    "GIN0GraphClassifier",
    "cross_validate",
    "graph_seeds",
    "privatize_graph_set",
    "privatize_one_graph",
]

_READOUTS = ("mean", "sum")


# -- the model ------------------------------------------------------------------------------------
class GIN0GraphClassifier(Module):
    r"""GIN-0 for graph classification (Xu et al., ICLR 2019, Eq. 4.1-4.2; paper 004, Sec. V-A).

    As in the implementation paper 004 used (``weihua916/powerful-gnns``, ``GraphCNN`` with
    ``learn_eps=False``), with ``num_layers`` counting the input layer (default 5: four GIN layers):

    .. math::
        h^{(k)}_v = \mathrm{ReLU}\Big(\mathrm{BN}\big(\mathrm{MLP}^{(k)}\big(h^{(k-1)}_v
        + \textstyle\sum_{u \in \mathcal{N}(v)} h^{(k-1)}_u\big)\big)\Big),\quad
        \mathrm{MLP}(z) = W_2\,\mathrm{ReLU}(\mathrm{BN}(W_1 z + b_1)) + b_2,

    .. math::
        \mathrm{logits}(G) = \textstyle\sum_{k=0}^{L-1} \mathrm{Dropout}_{0.5}\big(
        W^{(k)}_{\mathrm{pred}}\, \mathrm{READOUT}(\{h^{(k)}_v : v \in G\})\big),

    i.e. :math:`\epsilon = 0` (sum over the closed neighbourhood), two-layer MLPs with batch
    normalisation on the hidden layer and on each GIN layer's output, and a linear prediction of
    every layer's pooled representation (the input layer's included), each followed by dropout
    (``final_dropout`` in [3]), summed. READOUT is the mean (paper 004: "we used the mean readout")
    or the sum (Xu et al.'s default).

    Linear layers are initialised as torch's default (:math:`\mathcal{U}(\pm 1/\sqrt{F_{in}})`
    for weights and biases) from the generator given; batch norms start at weight 1, bias 0.
    Construction on the ``meta`` device draws nothing from torch's global state.

    Args:
        in_channels (int): node feature width (1 for the constant feature).
        hidden_channels (int): width of every hidden layer (default: ``64``).
        out_channels (int): number of classes (default: ``2``).
        num_layers (int): layers INCLUDING the input layer, >= 2 (default: ``5``).
        dropout (float): dropout on each layer's prediction score (default: ``0.5``).
        readout (str): ``"mean"`` (default, paper 004) or ``"sum"`` (Xu et al.).
        generator (torch.Generator, optional): draws the initial parameters (default: fresh OS
            entropy).

    Shapes:
        - input: ``x`` :math:`(|V|, F)`, ``edge_index`` :math:`(2, |E|)` both directions,
          ``batch`` :math:`(|V|)` graph index of each node
        - output: logits :math:`(G, C)`
    """

    def __init__(
        self,
        in_channels: int,
        hidden_channels: int = 64,
        out_channels: int = 2,
        *,
        num_layers: int = 5,
        dropout: float = 0.5,
        readout: str = "mean",
        generator: torch.Generator | None = None,
    ) -> None:
        super().__init__()
        owner = "GIN0GraphClassifier"
        self.in_channels = check_positive_int(in_channels, "in_channels", owner)
        self.hidden_channels = hid = check_positive_int(hidden_channels, "hidden_channels", owner)
        self.out_channels = check_positive_int(out_channels, "out_channels", owner)
        self.num_layers = check_positive_int(num_layers, "num_layers", owner)
        if self.num_layers < 2:
            raise ValueError(f"{owner}: num_layers counts the input layer and must be >= 2, got {num_layers}")
        if readout not in _READOUTS:
            raise ValueError(f"{owner}: readout must be 'mean' or 'sum', got {readout!r}")
        self.readout = readout
        self.dropout = GeneratorDropout(dropout)
        ins = [self.in_channels] + [hid] * (self.num_layers - 2)
        with torch.device("meta"):  # neither Linear nor BatchNorm1d draws from the global RNG here
            self.lin1 = ModuleList([Linear(i, hid) for i in ins])
            self.mlp_norm = ModuleList([BatchNorm1d(hid) for _ in ins])
            self.lin2 = ModuleList([Linear(hid, hid) for _ in ins])
            self.norm = ModuleList([BatchNorm1d(hid) for _ in ins])
            self.pred = ModuleList([Linear(self.in_channels, self.out_channels)]
                                   + [Linear(hid, self.out_channels) for _ in ins])
        self.to_empty(device="cpu")
        self.reset_parameters(fresh_generator(torch.device("cpu")) if generator is None else generator)

    def reset_parameters(self, generator: torch.Generator) -> None:
        """Re-draw every parameter from ``generator`` (on the parameters' device), in order: per
        GIN layer ``lin1``, ``lin2``, then the prediction heads; batch norms reset (weight 1,
        bias 0, running mean 0, running variance 1)."""
        w0 = self.lin1[0].weight
        check_generator(generator, w0, "GIN0GraphClassifier")
        with torch.no_grad():
            for lin in [*(m for pair in zip(self.lin1, self.lin2) for m in pair), *self.pred]:
                bound = 1.0 / math.sqrt(lin.in_features)
                torch.nn.init.uniform_(lin.weight, -bound, bound, generator=generator)
                torch.nn.init.uniform_(lin.bias, -bound, bound, generator=generator)
            for bn in [*self.mlp_norm, *self.norm]:
                bn.reset_parameters()

    def _pool(self, h: Tensor, batch: Tensor, num_graphs: int) -> Tensor:
        out = torch.zeros(num_graphs, h.size(1), dtype=h.dtype, device=h.device).index_add_(0, batch, h)
        if self.readout == "mean":
            count = torch.bincount(batch, minlength=num_graphs).clamp_min(1).to(h.dtype)
            out = out / count.unsqueeze(1)
        return out

    def forward(
        self, x: Tensor, edge_index: Tensor, batch: Tensor, num_graphs: int | None = None, *,
        generator: torch.Generator | None = None,
    ) -> Tensor:
        """Logits ``[num_graphs, C]``; ``generator`` draws the dropout masks in training mode."""
        g_count = int(batch.max()) + 1 if num_graphs is None else int(num_graphs)
        src, dst = edge_index[0], edge_index[1]
        reps = [x]
        h = x
        for k in range(self.num_layers - 1):
            agg = h.index_add(0, dst, h[src])  # (A + I) h: GIN-0's sum over the closed neighbourhood
            z = self.lin2[k](F.relu(self.mlp_norm[k](self.lin1[k](agg))))
            h = F.relu(self.norm[k](z))
            reps.append(h)
        score = None
        for k, h_k in enumerate(reps):
            s = self.dropout(self.pred[k](self._pool(h_k, batch, g_count)), generator)
            score = s if score is None else score + s
        assert score is not None
        return score

    def __repr__(self) -> str:
        return (f"GIN0GraphClassifier({self.in_channels}, {self.hidden_channels}, {self.out_channels}, "
                f"num_layers={self.num_layers}, readout={self.readout!r})")


# -- batching ---------------------------------------------------------------------------------------
def _tensors(graph_set: GraphSet, edges: str) -> list[tuple[Tensor, Tensor]]:
    """``(x, edge_index)`` per graph; ``x`` a constant 1 per node for unattributed graphs (Xu et
    al. and paper 004: "we used a constant value as the initial feature vector")."""
    out = []
    for g in graph_set.graphs:
        e = g.edges(edges)  # type: ignore[arg-type]
        ei = torch.from_numpy(np.ascontiguousarray(np.concatenate([e, e[::-1]], axis=1)))
        x = torch.ones(g.num_nodes, 1) if g.x is None else torch.from_numpy(g.x)
        out.append((x, ei))
    return out


def _collate(items: list[tuple[Tensor, Tensor]], device: torch.device) -> tuple[Tensor, Tensor, Tensor, int]:
    """Block-diagonal batch: features stacked, edge ids offset, ``batch`` the graph of each node."""
    sizes = [x.size(0) for x, _ in items]
    offsets = np.cumsum([0] + sizes[:-1])
    x = torch.cat([x for x, _ in items], dim=0)
    ei = torch.cat([e + int(o) for (_, e), o in zip(items, offsets, strict=True)], dim=1)
    batch = torch.repeat_interleave(torch.arange(len(items)), torch.tensor(sizes))
    return x.to(device), ei.to(device), batch.to(device), len(items)


def _predict(net: GIN0GraphClassifier, data: list[tuple[Tensor, Tensor]], idx: np.ndarray,
             batch_size: int, device: torch.device) -> np.ndarray:
    net.eval()
    probs = []
    with torch.no_grad():
        for s in range(0, len(idx), batch_size):
            x, ei, b, g = _collate([data[i] for i in idx[s : s + batch_size]], device)
            probs.append(torch.softmax(net(x, ei, b, g).double(), dim=1).cpu().numpy())
    p = np.concatenate(probs, axis=0)
    return p / p.sum(axis=1, keepdims=True)


def _auc(y: np.ndarray, p: np.ndarray, num_classes: int) -> float:
    """ROC AUC: binary, of the class-1 probability; else macro one-vs-rest (sklearn)."""
    from sklearn.metrics import roc_auc_score  # lazy: scikit-learn, only for the AUC

    if num_classes == 2:
        return float(roc_auc_score(y, p[:, 1]))
    return float(roc_auc_score(y, p, multi_class="ovr", average="macro", labels=np.arange(num_classes)))


def _std(v: Sequence[float]) -> float:
    a = np.asarray(v, dtype=np.float64)
    return float(a.std(ddof=1)) if a.size > 1 else 0.0


def _train_fold(
    data: list[Any], y_t: torch.Tensor, train_idx: np.ndarray, test_idx: np.ndarray, fold_seed: np.random.SeedSequence,
    dev: torch.device, *, in_channels: int, hidden_channels: int, num_classes: int, num_layers: int, dropout: float,
    readout: str, lr: float, lr_step: int, lr_gamma: float, epochs: int, batch_size: int, every_epoch: bool,
) -> list[np.ndarray]:
    """One fold: a fresh GIN-0 (parameters from the fold's ``init`` child, batch order from its
    ``batches`` child) trained on ``train_idx``; the test fold's class probabilities after every
    epoch (``every_epoch``) or the last one."""
    g = torch.Generator(device=dev)
    g.manual_seed(torch_seed(stage_seed(fold_seed, "init")))
    order_rng = as_generator(stage_seed(fold_seed, "batches"))
    net = GIN0GraphClassifier(in_channels, hidden_channels, num_classes, num_layers=num_layers, dropout=dropout,
                              readout=readout, generator=torch.Generator().manual_seed(0)).to(dev)
    net.reset_parameters(g)
    opt = torch.optim.Adam(net.parameters(), lr=lr)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=lr_step, gamma=lr_gamma)
    per_epoch: list[np.ndarray] = []
    for epoch in range(1, epochs + 1):
        net.train()
        perm = train_idx[order_rng.permutation(train_idx.size)]
        for s in range(0, perm.size, batch_size):
            chunk = perm[s : s + batch_size]
            x, ei, b, n_g = _collate([data[i] for i in chunk], dev)
            if x.size(0) < 2:  # batch norm needs more than one node (a lone 1-node graph)
                continue
            opt.zero_grad(set_to_none=True)
            loss = F.cross_entropy(net(x, ei, b, n_g, generator=g), y_t[chunk].to(dev))
            loss.backward()
            opt.step()
        sched.step()
        if every_epoch or epoch == epochs:
            per_epoch.append(_predict(net, data, test_idx, batch_size, dev))
    return per_epoch


def _check_cv_args(
    graph_set: Any, rng: Any, edges: Any, selection: Any, folds: Any, epochs: Any, batch_size: Any, lr_step: Any,
    device: str | torch.device | None,
) -> tuple[int, int, int, int, torch.device]:
    """:func:`cross_validate`'s arguments, checked: ``(folds, epochs, batch_size, lr_step, device)``."""
    if not isinstance(graph_set, GraphSet):
        raise TypeError(f"cross_validate: expected a GraphSet, got {type(graph_set).__name__}")
    if not isinstance(rng, np.random.Generator):
        raise TypeError(f"cross_validate: rng must be a numpy.random.Generator, got {type(rng).__name__}")
    if edges not in ("all", "public"):
        raise ValueError(f"cross_validate: edges must be 'all' or 'public', got {edges!r}")
    if selection not in ("final", "best_mean_epoch"):
        raise ValueError(f"cross_validate: selection must be 'final' or 'best_mean_epoch', got {selection!r}")
    folds = check_int(folds, "folds", minimum=2)
    epochs = check_int(epochs, "epochs", minimum=1)
    batch_size = check_int(batch_size, "batch_size", minimum=2)  # batch norm needs > 1 value
    lr_step = check_int(lr_step, "lr_step", minimum=1)
    c = graph_set.num_classes
    counts = np.bincount(np.asarray(graph_set.labels), minlength=c)
    if counts.min() < folds:
        k = int(np.argmin(counts))
        raise ValueError(f"cross_validate: class {k} has {int(counts[k])} graphs; {folds}-fold stratified "
                         f"cross-validation needs at least {folds} per class (labels 0..{c - 1})")
    dev = choose_device("auto") if device is None else (device if isinstance(device, torch.device) else choose_device(device))
    return folds, epochs, batch_size, lr_step, dev


def _fold_scores(
    probs: list[list[np.ndarray]], splits: list[Any], y: np.ndarray, num_classes: int, selection: str, epochs: int,
) -> tuple[list[float], list[float], int]:
    """Per fold the accuracy and ROC AUC at the reported epoch, and that epoch (1-based): the last
    one (``"final"``), or the first of the best accuracy averaged over the folds."""
    if selection == "best_mean_epoch":
        accs = np.array([[float((p.argmax(1) == y[te]).mean()) for p in per] for per, (_, te) in zip(probs, splits, strict=True)])
        best = int(np.argmax(accs.mean(axis=0)))  # first epoch of the best mean accuracy
        epoch_reported = best + 1
    else:
        best = -1
        epoch_reported = epochs
    fold_acc, fold_auc = [], []
    for per, (_, te) in zip(probs, splits, strict=True):
        p = per[best]
        fold_acc.append(float((p.argmax(1) == y[te]).mean()))
        fold_auc.append(_auc(y[te], p, num_classes))
    return fold_acc, fold_auc, epoch_reported


def _protocol(graph_set: GraphSet, folds: int, *, num_layers: int, hidden_channels: int, readout: str,
              dropout: float, lr: float, lr_gamma: float, lr_step: int, batch_size: int) -> dict[str, Any]:
    """The model and optimiser settings of a :func:`cross_validate` result (``protocol``)."""
    return {
        "model": "GIN-0 (eps = 0, sum aggregation), powerful-gnns GraphCNN layout",
        "num_layers": num_layers, "hidden_channels": hidden_channels, "readout": readout,
        "dropout": dropout, "optimizer": "adam", "lr": lr, "lr_schedule": f"x{lr_gamma} every {lr_step} epochs",
        "batch_size": batch_size,
        "input_features": "constant 1 per node" if graph_set.graphs[0].x is None else "node features",
        "folds": f"stratified {folds}-fold (sklearn StratifiedKFold, shuffled)",
    }


def cross_validate(
    graph_set: GraphSet,
    *,
    folds: int = 10,
    epochs: int = 100,
    rng: np.random.Generator,
    edges: Literal["all", "public"] = "all",
    device: str | torch.device | None = None,
    hidden_channels: int = 64,
    num_layers: int = 5,
    dropout: float = 0.5,
    readout: str = "mean",
    lr: float = 0.01,
    lr_step: int = 50,
    lr_gamma: float = 0.5,
    batch_size: int = 64,
    selection: Literal["final", "best_mean_epoch"] = "final",
) -> dict[str, Any]:
    """Stratified ``folds``-fold cross-validation of :class:`GIN0GraphClassifier` (Xu et al. 2019,
    Sec. 7; paper 004, Sec. V-A).

    Per fold (:func:`_train_fold`): a fresh GIN-0 trained for ``epochs`` epochs (shuffled batches
    of ``batch_size``, paper 004's 64) with Adam (``lr`` 0.01) and [3]'s schedule (the learning
    rate halved every 50 epochs); then the test fold's accuracy and ROC AUC (binary: of the
    class-1 probability; multi-class: macro one-vs-rest). ``selection``: ``"final"`` (default)
    reports each fold at the last epoch; ``"best_mean_epoch"`` (Xu et al.'s protocol) the single
    epoch of the best test accuracy averaged over the folds (why the default is ``"final"``:
    docs/results.md, Graph classification).

    Args:
        graph_set: the graphs and labels (labels ``0 .. C-1``, each class with >= ``folds`` graphs).
        rng: the only source of randomness (fold assignment, initial parameters, dropout, batches).
        edges: ``"all"`` (public + private, e.g. a privatized release) or ``"public"`` only.
        device: ``None`` / ``"auto"`` (CUDA when present), ``"cpu"``, ``"cuda[:i]"``.

    Returns:
        dict: ``fold_acc``, ``fold_auc`` (lists), ``acc_mean``, ``acc_std``, ``auc_mean``,
        ``auc_std`` (std over folds, ``ddof=1``), ``epoch`` (the reported epoch), ``selection``,
        ``folds``, ``epochs``, ``edges``, ``device``, ``protocol`` (the model and optimiser
        settings), ``seconds``.
    """
    from sklearn.model_selection import StratifiedKFold  # lazy: scikit-learn, only for the folds

    folds, epochs, batch_size, lr_step, dev = _check_cv_args(graph_set, rng, edges, selection, folds, epochs,
                                                              batch_size, lr_step, device)
    y = np.asarray(graph_set.labels)
    c = graph_set.num_classes
    fold_state = int(rng.integers(0, 2**31 - 1))
    run_seed = np.random.SeedSequence([int(v) for v in rng.integers(0, 2**63 - 1, size=4)])
    splits = list(StratifiedKFold(n_splits=folds, shuffle=True, random_state=fold_state).split(np.zeros(len(y)), y))
    data = _tensors(graph_set, edges)
    in_channels = 1 if graph_set.graphs[0].x is None else graph_set.num_features
    y_t = torch.from_numpy(y.copy())
    started = time.perf_counter()

    # per fold: the test-fold probabilities after each evaluated epoch
    probs: list[list[np.ndarray]] = []
    for k, (train_idx, test_idx) in enumerate(splits):
        probs.append(_train_fold(
            data, y_t, train_idx, test_idx, partition_seeds(run_seed, folds)[k], dev, in_channels=in_channels,
            hidden_channels=hidden_channels, num_classes=c, num_layers=num_layers, dropout=dropout, readout=readout,
            lr=lr, lr_step=lr_step, lr_gamma=lr_gamma, epochs=epochs, batch_size=batch_size,
            every_epoch=selection == "best_mean_epoch",
        ))
    fold_acc, fold_auc, epoch_reported = _fold_scores(probs, splits, y, c, selection, epochs)
    return {
        "fold_acc": fold_acc, "fold_auc": fold_auc,
        "acc_mean": float(np.mean(fold_acc)), "acc_std": _std(fold_acc),
        "auc_mean": float(np.mean(fold_auc)), "auc_std": _std(fold_auc),
        "epoch": epoch_reported, "selection": selection, "folds": folds, "epochs": epochs, "edges": edges,
        "device": str(dev),
        "protocol": _protocol(graph_set, folds, num_layers=num_layers, hidden_channels=hidden_channels,
                              readout=readout, dropout=dropout, lr=lr, lr_gamma=lr_gamma, lr_step=lr_step,
                              batch_size=batch_size),
        "seconds": time.perf_counter() - started,
    }


# -- privatization -----------------------------------------------------------------------------------
def graph_seeds(root: Any, num_graphs: int) -> list[np.random.SeedSequence]:
    """Per-graph seeds: child ``i`` of the run's ``"graphs"`` stage for graph ``i``
    (:func:`~privgraph.seeding.stage_seed`, :func:`~privgraph.seeding.partition_seeds`)."""
    return partition_seeds(stage_seed(as_seed_sequence(root), "graphs"), check_int(num_graphs, "num_graphs", minimum=0))


def privatize_one_graph(graph: GraphData, seed: np.random.SeedSequence, *, mechanism: Any) -> GraphData:
    """Privatize ONE graph's private edges with ``mechanism`` (picklable; the per-item function of
    :func:`privgraph.parts.executor.map_partitions`: ``fn(payload, seed, **shared)``).

    :func:`privgraph.privatize.release.privatize_graph` with one partition holding every node and
    ``root_seed=seed``: public edges released as they are, ``edges_private`` replaced by the
    mechanism's release; features and labels untouched.
    """
    n = graph.num_nodes
    result = privatize_graph(
        graph, features=None, edges=mechanism, partitioning=Partitioning(np.zeros(n, dtype=np.int64), "single"),
        root_seed=as_seed_sequence(seed),
    )
    return result.graph


def privatize_graph_set(
    graph_set: GraphSet,
    mechanism: Any,
    seeds: Sequence[np.random.SeedSequence],
    *,
    executor: Executor | None = None,
    stage: str = "privatize",
) -> tuple[GraphSet, PrivacyLedger]:
    """Apply the edge ``mechanism`` to EACH graph's private edges independently (paper 004,
    Sec. IV-A: every user of every graph randomizes her own neighbour list).

    Graph ``i`` is privatized by :func:`privatize_one_graph` with ``seeds[i]`` through
    :func:`~privgraph.parts.executor.map_partitions` (serially, or on ``executor``, e.g. a Dask one):
    its output depends on its graph and its seed only, never on the order of the graphs or the
    number of workers.

    Accounting: the graphs are disjoint record holders (no user, no edge is in two graphs), so
    the per-graph guarantees compose in PARALLEL: the ledger gets ONE entry whose guarantee is
    the mechanism's (e.g. DPRR at eps: eps-edge LDP, 2 eps relationship DP), not a sum over
    graphs. Node features, if any, are released unchanged (paper 004's graphs are unattributed).

    Returns:
        tuple: the privatized :class:`GraphSet` (``meta["privatized"]`` names the mechanism) and
        the :class:`~privgraph.guarantee.ledger.PrivacyLedger`.

    Raises:
        ValueError: not an edge mechanism, one seed per graph missing, or a graph the mechanism
            cannot serve (e.g. DPRR's Eq. 8 split on a graph with few private nodes: set a dataset-wide
            :class:`~privgraph.mechanisms.edges.dprr.DPRR`'s ``n_max``), named by its index.
    """
    if not isinstance(graph_set, GraphSet):
        raise TypeError(f"privatize_graph_set: expected a GraphSet, got {type(graph_set).__name__}")
    if not isinstance(mechanism, EdgeMechanism):
        raise ValueError(f"privatize_graph_set: {mechanism!r} does not protect edges")
    seeds = list(seeds)
    if len(seeds) != len(graph_set):
        raise ValueError(f"privatize_graph_set: {len(seeds)} seeds for {len(graph_set)} graphs (one per graph)")
    for i, s in enumerate(seeds):
        if not isinstance(s, np.random.SeedSequence):
            raise TypeError(f"privatize_graph_set: seeds[{i}] must be a numpy SeedSequence, got {type(s).__name__}")
    if mechanism.releases_aggregates or mechanism.all_edges_private:
        what = "noisy aggregates, not edges" if mechanism.releases_aggregates else "a graph of its own model (all edges private)"
        per_graph = ", ".join(edge_mechanisms(releases_aggregates=False, all_edges_private=False))
        raise ValueError(f"privatize_graph_set: {mechanism.name} releases {what}; use a per-graph edge mechanism ({per_graph})")
    for i, g in enumerate(graph_set.graphs):  # refuse before any noise is drawn
        n_pri = int(g.private_nodes().size)
        if n_pri > 1:
            try:
                mechanism.params_for(n_pri)
            except ValueError as exc:
                raise ValueError(f"graph {i} ({n_pri} nodes with private edges): {exc}") from exc
    graphs = map_partitions(privatize_one_graph, list(graph_set.graphs), seeds, executor=executor, mechanism=mechanism)
    ledger = PrivacyLedger()
    ledger.record(LedgerEntry(
        stage=f"{stage}.edges", mechanism=mechanism.name, guarantee=mechanism.guarantee, partitions=None,
        params={**mechanism.params(), "num_graphs": len(graph_set)},
        note=(f"applied to each of {len(graph_set)} graphs independently; the graphs are disjoint record "
              "holders, so the guarantee composes in parallel (the mechanism's, not summed over graphs)"),
    ))
    return graph_set.replace_graphs(graphs, privatized=mechanism.name), ledger
