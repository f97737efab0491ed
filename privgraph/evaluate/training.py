r"""Training and evaluation loops: how useful is a (privatized) graph for node classification?

:func:`train_node_classifier` trains a :class:`~privgraph.evaluate.models.GCN`, a
:class:`~privgraph.evaluate.models.GraphSAGE`, a :class:`~privgraph.evaluate.models.GAT` or a
:class:`~privgraph.evaluate.models.GIN` in full batch on a :class:`~privgraph.graph.GraphData` and
reports accuracies at the epoch of best validation accuracy, optionally with LPGNN's denoising
(KProp on the features, KProp on the labels, the Drop algorithm for labels under randomized
response); :func:`evaluate_utility` compares a private graph with its clean original over several
seeded runs with the same split.

Randomness: each run derives one integer from a ``numpy.random.SeedSequence`` and seeds a
:class:`torch.Generator` on the model's device with it; that generator draws the initial
parameters and every dropout mask. torch's global random state is never read or changed, and on
the CPU the same seed gives bit-identical results. On CUDA, PyG's scatter aggregation uses atomic
additions, so results can differ in the last bits between runs with the same seed.

LPGNN's denoising options (KProp on the labels, Drop) are :mod:`privgraph.evaluate.label_denoising`'s;
the model inputs (KProp on the features, their cheaper forms) :mod:`privgraph.evaluate.model_inputs`'s;
the evaluation of a version against the clean graph and the public data alone
:mod:`privgraph.evaluate.utility`'s.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from privgraph.graph import SPLIT_MASKS, GraphData
from privgraph.evaluate.label_denoising import Targets, training_targets
from privgraph.evaluate.model_inputs import EDGE_SETS, InputCache, ModelInputs
from privgraph.evaluate.models import MODELS, KProp
from privgraph.evaluate.models.basic import torch_seed
from privgraph.evaluate.models.kprop import LPGNN_KPROP
from privgraph.evaluate.training_args import check_choice, check_fit_args
from privgraph.evaluate.models.sparse import quiet_sparse_beta
from privgraph.guarantee.params import check_int
from privgraph.evaluate.progress import ProgressCallback, ProgressTracker
from privgraph.seeding import as_seed_sequence

__all__ = [
    "DENOISING_OPTIONS",
    "EDGE_SETS",
    "MODELS",
    "TrainedClassifier",
    "choose_device",
    "encode_features",
    "fit_ensemble",
    "fit_node_classifier",
    "member_seeds",
    "output_classes",
    "public_classes",
    "search_kprop",
    "split_accuracies",
    "train_node_classifier",
]
# the options of train_node_classifier that denoise a PRIVATE graph; evaluate_utility does not
# apply them to the clean baseline (LPGNN's setting: the non-private model has nothing to denoise)
DENOISING_OPTIONS = ("kprop_features", "kprop_labels", "drop", "label_epsilon", "label_classes", "kprop_search",
                     "kprop_search_labels")
_LOG_FLOOR = 1e-20  # log(p) of a propagated probability that is exactly zero


def choose_device(prefer: str = "auto") -> torch.device:
    """The device to train on.

    Args:
        prefer (str): ``"auto"`` (CUDA when available, else the CPU), ``"cpu"``, ``"cuda"`` or
            ``"cuda:<index>"`` (default: ``"auto"``).

    Raises:
        ValueError: CUDA requested but not available, a CUDA index out of range, or an unknown
            device string.
    """
    if not isinstance(prefer, str):
        raise ValueError(f"choose_device: prefer must be a string, got {prefer!r}")
    if prefer == "auto":
        return torch.device("cuda") if torch.cuda.is_available() else torch.device("cpu")
    if prefer == "cpu":
        return torch.device("cpu")
    if prefer == "cuda" or prefer.startswith("cuda:"):
        if not torch.cuda.is_available():
            raise ValueError(
                f"choose_device: {prefer!r} requested but CUDA is not available on this machine "
                "(torch.cuda.is_available() is False); use 'auto' or 'cpu'"
            )
        dev = torch.device(prefer)
        if dev.index is not None and dev.index >= torch.cuda.device_count():
            raise ValueError(
                f"choose_device: {prefer!r} requested but only {torch.cuda.device_count()} CUDA "
                "device(s) are visible"
            )
        return dev
    raise ValueError(
        f"choose_device: prefer must be 'auto', 'cpu', 'cuda' or 'cuda:N', got {prefer!r}"
    )


def output_classes(graph: GraphData, label_classes: int | None = None) -> int:
    """The size of a node classifier's output layer for ``graph``: the largest of the PUBLIC class
    count (``label_classes``, the labels mechanism's configured ``num_classes``, else
    ``graph.meta["num_classes"]``) and the classes present in ``graph.y``. A function of the graph
    trained on and public configuration only (for a version: post-processing of its release)."""
    declared = label_classes if label_classes is not None else graph.meta.get("num_classes")
    return max(graph.num_classes, int(declared) if declared is not None else 0)


def train_node_classifier(graph: GraphData, **kwargs: Any) -> dict[str, Any]:
    """Train as :func:`fit_node_classifier` does and return its accuracies (``.result``)."""
    return fit_node_classifier(graph, **kwargs).result


def encode_features(
    graph: GraphData, *, seed: int | np.random.SeedSequence, dim: int = 16, epochs: int = 100,
    device: str = "auto",
) -> np.ndarray:
    """GAP's encoder (Sajadmanesh et al. 2023, Algorithm 2 lines 1-2): an MLP trained on the
    features and the training labels of ``graph`` without any edge, whose hidden layer of width
    ``dim`` (after ReLU) is the node encoding; float32 ``[n, dim]``.

    It is the feature-only floor's model (the 2-layer GCN over no edges: ``x -> dim -> classes``,
    :func:`fit_node_classifier` with ``edges="none"``, model selection on the validation labels),
    so given a version's released features and labels it is post-processing.
    """
    trained = fit_node_classifier(graph, seed=seed, edges="none", model="gcn", aggr="mean", hidden=dim,
                                  epochs=epochs, device=device)
    net = trained._net64()
    no_edges = torch.zeros((2, 0), dtype=torch.long, device=trained.device)
    with torch.no_grad():
        h = net.convs[0](trained.prepare(edge_index=no_edges), no_edges).relu()
    return h.cpu().numpy().astype(np.float32)


def public_classes(
    graph: GraphData, *, seed: int | np.random.SeedSequence, epochs: int = 100, device: str = "auto",
) -> np.ndarray:
    """One class per node, one-hot float64 ``[n, C]``: the node's label where it is a labelled
    training node of ``graph``, else the class the feature-only floor's model (trained on the
    features and training labels of ``graph`` without any edge, model selection on the validation
    labels) predicts. Given a version's released features and labels it is post-processing: the
    public classes that :class:`~privgraph.mechanisms.edges.class_counts.NeighbourClassCounts`
    counts."""
    trained = fit_node_classifier(graph, seed=seed, edges="none", model="gcn", epochs=epochs, device=device)
    label = np.asarray(trained.posteriors).argmax(axis=1)
    known = graph.train_mask & graph.labelled()
    label[known] = graph.y[known]
    out = np.zeros((graph.num_nodes, output_classes(graph)), dtype=np.float64)
    out[np.arange(graph.num_nodes), label] = 1.0
    return out


@dataclasses.dataclass
class TrainedClassifier:
    """A trained node classifier as a black box: :meth:`query` answers the class posteriors for
    any features (and, inductively, any graph), as a prediction API would; ``result`` holds the
    accuracies of :func:`fit_node_classifier`. The attacks (:mod:`privgraph.evaluate.attacks`) see only
    :meth:`query`, ``edge_index`` (the graph the model serves) and ``x`` (the features it was
    trained on, as given).
    """

    net: torch.nn.Module
    x: torch.Tensor  # the features as given (before the model's own input transform), on the CPU
    edge_index: torch.Tensor  # the graph the model serves, both directions, on the model's device
    kprop_features: int
    center: torch.Tensor | None  # the training input's column mean (dense input), None: sparse input
    result: dict[str, Any]
    projection: torch.Tensor | None = None  # [d, feature_dim] principal axes applied after centring
    #: the class probabilities [n, C] of every node at the selected epoch (float32, CPU), as trained:
    #: the base predictions of Correct and Smooth (:mod:`privgraph.evaluate.correct_and_smooth`)
    posteriors: np.ndarray | None = dataclasses.field(default=None, repr=False)
    _query_net: torch.nn.Module | None = dataclasses.field(default=None, repr=False)

    def __post_init__(self) -> None:
        # the net is never trained again: its cached sparse operators (float32 P and P^T, the CSR
        # features' transpose) are dropped; a query builds its own, float64 and P alone (_net64)
        for m in self.net.modules():
            for a in ("_cache", "_x_cache"):
                if hasattr(m, a):
                    setattr(m, a, None)

    @property
    def device(self) -> torch.device:
        return self.edge_index.device

    def _net64(self) -> torch.nn.Module:
        """A float64 copy, for queries (finite differences need the precision)."""
        if self._query_net is None:
            self._query_net = copy.deepcopy(self.net).double().eval()
        return self._query_net

    def prepare(self, x: np.ndarray | torch.Tensor | None = None, edge_index: torch.Tensor | np.ndarray | None = None) -> torch.Tensor:
        """The model's input for features ``x`` (float64, on the model's device): KProp steps over
        ``edge_index`` (default: the served graph), then CSR, or centred by the TRAINING mean (a
        query never shifts other nodes' inputs). Without KProp, scaling row ``u`` of ``x`` scales
        row ``u`` of this input (sparse: its stored values; dense: ``x_u`` is added to it)."""
        xt = self.x if x is None else (x if torch.is_tensor(x) else torch.as_tensor(np.asarray(x)))
        xt = xt.to(self.device, torch.float64)
        if self.kprop_features:
            xt = KProp(self.kprop_features, **LPGNN_KPROP)(xt, self._edges(edge_index))
        if self.center is None:
            with quiet_sparse_beta():
                return xt.to_sparse_csr()
        xt = xt - self.center.to(self.device, torch.float64)
        return xt if self.projection is None else xt @ self.projection.to(self.device, torch.float64)

    def input_row(self, row: torch.Tensor) -> torch.Tensor:
        """What adding ``row`` to one node's features adds to its row of a dense prepared input
        (without KProp the transform is affine: the row itself, or its projection)."""
        row = row.to(self.device, torch.float64)
        return row if self.projection is None else row @ self.projection.to(self.device, torch.float64)

    def _edges(self, edge_index: torch.Tensor | np.ndarray | None) -> torch.Tensor:
        return self.edge_index if edge_index is None else torch.as_tensor(edge_index).to(self.device)

    @torch.no_grad()
    def forward_prepared(self, xp: torch.Tensor, edge_index: torch.Tensor | np.ndarray | None = None) -> torch.Tensor:
        """Softmax posteriors ``[n, C]`` for an input made by :meth:`prepare`."""
        return self._net64()(xp, self._edges(edge_index)).softmax(dim=1)

    def query(self, x: np.ndarray | torch.Tensor | None = None, edge_index: torch.Tensor | np.ndarray | None = None) -> torch.Tensor:
        """Softmax posteriors ``[n, C]`` (float64, on the model's device) for features ``x``
        (default: the training features) on the graph ``edge_index`` (default: the served
        graph), as a prediction API answers them."""
        return self.forward_prepared(self.prepare(x, edge_index), edge_index)


def fit_node_classifier(
    graph: GraphData, *, seed: int | np.random.SeedSequence, edges: str = "all", hidden: int = 64, epochs: int = 200,
    lr: float = 0.01, weight_decay: float = 5e-4, dropout: float = 0.5, aggr: str | None = None, device: str = "auto",
    patience: int | None = 25, eval_y: np.ndarray | None = None, model: str = "gcn", kprop_features: int = 0,
    kprop_labels: int = 0, drop: bool = False, label_epsilon: float | None = None, label_classes: int | None = None,
    feature_dim: int | None = None, kprop_search: Sequence[int] | None = None, kprop_search_labels: bool = True,
    progress: ProgressCallback | None = None, propagate_val_labels: bool = True, input_cache: InputCache | None = None,
) -> TrainedClassifier:
    r"""Train a 2-layer GNN (:class:`~privgraph.evaluate.models.GCN`, :class:`~privgraph.evaluate.models.GraphSAGE`,
    :class:`~privgraph.evaluate.models.GAT` or :class:`~privgraph.evaluate.models.GIN`) on ``graph.train_mask`` in
    full batch; the epoch of best validation accuracy against ``graph.y`` is kept (:func:`_train_loop`).
    LPGNN's denoising (the module docstring) is off by default, and then the run is bit-identical to
    one without those arguments (reasoning: docs/evaluation-cost.md, The evaluation's design).

    Args:
        graph (GraphData): needs ``x``, single-label ``y`` and all three masks.
        seed (int or SeedSequence): seeds the run's :class:`torch.Generator` (initial parameters,
            dropout masks): same seed, graph and arguments, bit-identical results on the CPU.
        edges (str): ``"all"``, ``"public"``, ``"private"`` or ``"none"`` (the feature-only floor:
            the same models as MLPs) (default: ``"all"``).
        hidden, epochs, lr, weight_decay, dropout, patience: the hidden width, the epoch cap, Adam's
            rate and L2 penalty, the dropout before each layer (the first: sparse input only,
            :func:`_model_input`), the patience (``None``: no early stop) (64, 200, 0.01, 5e-4, 0.5, 25).
        aggr (str, optional): the model's aggregation (:class:`~privgraph.evaluate.models.basic.NodeGNN`;
            ``None``: the model's own).
        device (str): see :func:`choose_device` (default: ``"auto"``).
        eval_y (np.ndarray, optional): labels ``[n]`` that ``test_acc`` is scored against instead
            of ``graph.y``; training and model selection read ``graph.y`` only.
        model (str): ``"gcn"``, ``"sage"``, ``"gat"`` (8 heads; ``hidden`` a multiple of 8),
            ``"gin"``, or ``"gap"``: GAP's classification module over ``graph.aggregates``, with
            ``edges="none"`` (default: ``"gcn"``).
        kprop_features, kprop_labels, drop, label_epsilon, label_classes, propagate_val_labels:
            LPGNN's denoising (the module docstring); ``label_classes``, a PUBLIC count, also sizes
            the output layer (:func:`output_classes`).
        kprop_search (sequence of int, optional), kprop_search_labels (bool), progress: LPGNN's
            search of the KProp steps (:func:`search_kprop`; ``kprop_features`` and ``kprop_labels``
            then 0), over ``K_y`` too unless ``kprop_search_labels`` is ``False`` (``K_y = 0``).
        feature_dim (int, optional): project DENSE features onto their first ``feature_dim``
            principal axes (:func:`principal_basis`; post-processing) (default: ``None``: off).
        input_cache (InputCache, optional): reuse inputs prepared for ``graph`` before (same result).

    Returns:
        TrainedClassifier: the model at the selected epoch and its ``result``: ``test_acc``,
        ``test_acc_own_labels``, ``val_acc``, ``train_acc`` (at that epoch), ``best_epoch``
        (1-based), ``epochs_run``, ``device``; with ``drop`` ``drop_bound`` and ``drop_stopped``.

    Raises:
        ValueError: a graph without ``x``, ``y`` or masks, multi-label ``y``, a bad hyper-parameter.
    """
    if kprop_search is not None:
        if kprop_features or kprop_labels:
            raise ValueError("train_node_classifier: kprop_search chooses kprop_features and kprop_labels; leave them 0")
        return search_kprop(graph, kprop_search, labels=kprop_search_labels, seed=seed, edges=edges, hidden=hidden,
                            epochs=epochs, lr=lr, weight_decay=weight_decay, dropout=dropout, aggr=aggr, device=device,
                            patience=patience, eval_y=eval_y, model=model, drop=drop, label_epsilon=label_epsilon,
                            label_classes=label_classes, feature_dim=feature_dim, progress=progress,
                            input_cache=input_cache)
    eval_y = check_fit_args(graph, edges=edges, model=model, hidden=hidden, epochs=epochs, lr=lr, weight_decay=weight_decay,
                            patience=patience, kprop_features=kprop_features, kprop_labels=kprop_labels, drop=drop,
                            propagate_val_labels=propagate_val_labels, label_epsilon=label_epsilon,
                            label_classes=label_classes, feature_dim=feature_dim, eval_y=eval_y)
    model_cls = MODELS[check_choice(model, "model", tuple(MODELS))]
    # the output layer is sized from the trained graph and public configuration only, never from
    # eval_y (issue 24, leak 4: docs/evaluation-cost.md, The evaluation's design)
    num_classes = output_classes(graph, label_classes)
    dev = choose_device(device)
    inp = (input_cache or InputCache()).get(graph, dict(edges=edges, model=model, aggr=aggr, kprop_features=kprop_features,
                                            feature_dim=feature_dim, seed=seed if feature_dim else None, dev=dev))
    y = inp.data.y.to(dev)
    idx = {name: torch.from_numpy(np.flatnonzero(getattr(inp.graph, name))).to(dev) for name in SPLIT_MASKS}
    targets = training_targets(y, idx, num_classes, inp, dev, kprop_labels=kprop_labels, drop=drop,
                               propagate_val_labels=propagate_val_labels, label_epsilon=label_epsilon,
                               label_classes=label_classes)
    net, g = _seeded_net(model_cls, inp, hidden, num_classes, dropout, seed, dev)
    best_epoch, epochs_run, stopped = _train_loop(net, inp.x, inp.edge_index, g, idx, y, targets, epochs=epochs,
                                                  lr=lr, weight_decay=weight_decay, patience=patience)
    return _trained_classifier(net, inp, eval_y, targets, int(kprop_features), best_epoch, epochs_run, stopped)


def _seeded_net(model_cls: type[torch.nn.Module], inp: ModelInputs, hidden: int, num_classes: int, dropout: float,
                seed: int | np.random.SeedSequence, dev: torch.device) -> tuple[torch.nn.Module, torch.Generator]:
    """The model on ``dev`` with its parameters drawn from the run's generator, and the generator
    (which then draws the dropout masks)."""
    g = torch.Generator(device=dev)
    g.manual_seed(torch_seed(seed))
    # built on the CPU from a throwaway generator, moved, then drawn on `dev` from the run's own
    net = model_cls(
        int(inp.x.shape[1]), hidden, num_classes, dropout=dropout, cached=True, **inp.model_kwargs,
        generator=torch.Generator().manual_seed(0),
    ).to(dev)
    net.reset_parameters(g)
    return net, g


def _trained_classifier(net: torch.nn.Module, inp: ModelInputs, eval_y: np.ndarray | None, targets: Targets,
                        kprop_features: int, best_epoch: int, epochs_run: int, stopped: bool) -> TrainedClassifier:
    """The trained model (at its selected epoch, in evaluation mode) with its ``result`` and posteriors."""
    with torch.no_grad():
        out = net(inp.x, inp.edge_index)
    res: dict[str, Any] = {
        **split_accuracies(inp.graph, out.argmax(1).cpu().numpy(), eval_y),
        "best_epoch": best_epoch, "epochs_run": epochs_run, "device": str(inp.x.device),
    }
    if targets.bound is not None:
        res["drop_bound"] = targets.bound
        res["drop_stopped"] = stopped
    return TrainedClassifier(net=net, x=inp.data.x, edge_index=inp.edge_index, kprop_features=kprop_features,
                             center=inp.center, result=res, projection=inp.projection,
                             posteriors=out.softmax(dim=1).cpu().numpy())


def split_accuracies(graph: GraphData, pred: np.ndarray, eval_y: np.ndarray | None = None) -> dict[str, float]:
    """The accuracies of the predicted classes ``pred`` ``[n]`` on ``graph``'s split:
    ``val_acc``, ``train_acc`` and ``test_acc_own_labels`` against ``graph.y`` (for a private
    version, its own released labels), ``test_acc`` against ``eval_y`` (default: ``graph.y``)."""
    y = np.asarray(graph.y)
    y_test = y if eval_y is None else np.asarray(eval_y)

    def acc(mask: str, labels: np.ndarray) -> float:
        rows = np.flatnonzero(getattr(graph, mask))
        return int(np.count_nonzero(pred[rows] == labels[rows])) / rows.size

    return {"test_acc": acc("test_mask", y_test), "test_acc_own_labels": acc("test_mask", y),
            "val_acc": acc("val_mask", y), "train_acc": acc("train_mask", y)}


#: the spawn-key tag of the ensemble members' seeds (:func:`member_seeds`)
_ENSEMBLE_TAG = 0x656E73


def member_seeds(seed: int | np.random.SeedSequence, members: int) -> list[np.random.SeedSequence]:
    """The seeds of an ensemble's ``members``: member 0 trains with ``seed`` itself (so one member
    is exactly the single model), member ``j`` with ``seed``'s child ``(tag, j)``."""
    ss = as_seed_sequence(seed)
    return [ss] + [np.random.SeedSequence(ss.entropy, spawn_key=tuple(ss.spawn_key) + (_ENSEMBLE_TAG, j))
                   for j in range(1, members)]


def fit_ensemble(
    graph: GraphData, *, seed: int | np.random.SeedSequence, members: int = 1,
    eval_y: np.ndarray | None = None, **kwargs: Any,
) -> tuple[dict[str, Any], np.ndarray]:
    """``members`` models of :func:`fit_node_classifier` (same graph and arguments, seeds of
    :func:`member_seeds`) and the mean of their class probabilities: ``(result, posteriors)``.

    The result is member 0's (its ``best_epoch``, ``kprop``, Drop's bound) with the accuracies of
    the averaged posteriors (:func:`split_accuracies`) and ``ensemble`` (the member count). With
    ``kprop_search`` the search runs once, for member 0; the others train with the ``[K_x, K_y]``
    it chose. Averaging the predictions of models trained on the version is post-processing: the
    guarantee is the version's. One member: exactly :func:`fit_node_classifier`'s result."""
    members = check_int(members, "members", minimum=1)
    seeds = member_seeds(seed, members)
    first = fit_node_classifier(graph, seed=seeds[0], eval_y=eval_y, **kwargs)
    if members == 1:
        return first.result, first.posteriors
    rest = dict(kwargs)
    rest.pop("kprop_search_labels", None)
    if rest.pop("kprop_search", None) is not None:
        rest["kprop_features"], rest["kprop_labels"] = first.result["kprop"]
    rest.pop("progress", None)
    total = first.posteriors.astype(np.float64)
    for s in seeds[1:]:
        total += fit_node_classifier(graph, seed=s, eval_y=eval_y, **rest).posteriors
    mean = total / members
    result = {**first.result, **split_accuracies(graph, mean.argmax(axis=1), eval_y), "ensemble": members}
    return result, mean.astype(np.float32)


def search_kprop(
    graph: GraphData, kprop_search: Sequence[int], progress: ProgressCallback | None = None, *,
    labels: bool = True, **args: Any
) -> TrainedClassifier:
    """LPGNN's search of the KProp steps: every ``(K_x, K_y)`` of the grid ``kprop_search`` (e.g.
    ``[0, 2, 4, 8, 16]``; with ``labels=False`` only ``(K_x, 0)``: for labels that were not
    randomized) is trained with the same seed and the other arguments ``args`` of
    :func:`fit_node_classifier`, and the model with the highest validation accuracy against
    ``graph.y`` (the version's own, possibly randomized, labels: no clean label is read; ties: the
    smaller ``K_x + K_y``, then the smaller ``K_x``) is returned, its ``result["kprop"]`` the
    chosen ``[K_x, K_y]``. ``progress`` receives a ``kprop search`` event per cell (its label: the
    cell's ``K_x, K_y``, never a score), then one for the final training. The validation labels are inside the label propagation of a trained
    model, so its agreement with them is inflated (and capped by Drop's bound) and a poor cell
    can win; every cell is therefore SCORED by a model whose propagation reads the training labels
    only (``propagate_val_labels=False``) and the chosen cell is then trained as usual."""
    grid = sorted({int(k) for k in kprop_search})
    if not grid or any(k < 0 for k in grid) or any(isinstance(k, bool) for k in kprop_search):
        raise ValueError(f"train_node_classifier: kprop_search must be a non-empty list of steps >= 0, got {kprop_search!r}")
    if not isinstance(labels, bool):
        raise ValueError(f"train_node_classifier: kprop_search_labels must be a bool, got {labels!r}")
    label_grid = grid if labels else [0]
    best: tuple[tuple[float, int, int], tuple[int, int]] | None = None
    tracker = ProgressTracker("kprop search", len(grid) * len(label_grid) + 1, progress)
    for kx, ky in sorted(((kx, ky) for kx in grid for ky in label_grid), key=lambda k: (k[0] + k[1], k[0])):
        scored = fit_node_classifier(graph, kprop_features=kx, kprop_labels=ky, propagate_val_labels=False, **args)
        key = (scored.result["val_acc"], -(kx + ky), -kx)
        if best is None or key > best[0]:
            best = (key, (kx, ky))
        tracker.advance(detail=f"K_x={kx}, K_y={ky}")
    assert best is not None
    kx, ky = best[1]
    trained = fit_node_classifier(graph, kprop_features=kx, kprop_labels=ky, **args)
    tracker.advance(detail="the chosen cell")
    trained.result["kprop"] = [kx, ky]
    trained.result["kprop_searched"] = len(grid) * len(label_grid)
    return trained


def _train_loop(
    net: torch.nn.Module, x: torch.Tensor, edge_index: torch.Tensor, g: torch.Generator, idx: dict[str, torch.Tensor],
    y: torch.Tensor, t: Targets, *, epochs: int, lr: float, weight_decay: float, patience: int | None,
) -> tuple[int, int, bool]:
    """Adam, full batch; after every epoch the model is scored without dropout and the parameters
    of the best validation accuracy (ties: the lower validation loss, then the earlier epoch) are
    kept, then loaded into ``net`` (left in evaluation mode). Returns the best epoch, the epochs
    run, and whether Drop's bound stopped training."""
    opt = torch.optim.Adam(net.parameters(), lr=lr, weight_decay=weight_decay, foreach=True)  # bit-identical to the default, one kernel per step
    train_idx, val_idx = idx["train_mask"], idx["val_mask"]
    y_train, y_val = t.y_fit[train_idx], y[val_idx]
    best_key: tuple[float, float] | None = None
    best_epoch = epochs_run = 0
    best_state: dict[str, torch.Tensor] = {}
    stopped = False
    # without input dropout the first layer is the same in both modes: one product per epoch
    # serves the scoring of the parameters and the next step from them (same results, 2/3 of the
    # first layer's cost)
    share = bool(getattr(net, "shares_first_layer", False))
    first = net.first_layer(x, edge_index) if share else None
    for epoch in range(1, epochs + 1):
        net.train()
        opt.zero_grad(set_to_none=True)
        out = net(x, edge_index, generator=g, first=first) if share else net(x, edge_index, generator=g)
        if t.drop and t.label_prop is not None:
            q = out.softmax(dim=1)
            p = t.label_prop(q if t.forward is None else q @ t.forward[:q.shape[1], :q.shape[1]], edge_index)
            p = p / p.sum(dim=1, keepdim=True)
            loss = F.nll_loss(p[train_idx].clamp_min(_LOG_FLOOR).log(), y_train)
        else:
            loss = F.cross_entropy(out[train_idx], y_train)
        loss.backward()
        opt.step()
        epochs_run = epoch
        net.eval()
        if share:
            first = net.first_layer(x, edge_index)
        with torch.no_grad():
            out_val = (net(x, edge_index, first=first.detach()) if share else net(x, edge_index))[val_idx]
            val_acc = float((out_val.argmax(1) == y_val).float().mean())
            # Drop: the accuracy against the noisy labels y' may not exceed Acc*
            stopped = t.bound is not None and val_acc > t.bound
            # the loss breaks ties only: below the best accuracy it cannot change the choice
            key = (val_acc, -float(F.cross_entropy(out_val, y_val))
                   if best_key is None or val_acc >= best_key[0] else float("-inf"))
        if stopped and best_key is not None:
            break
        if best_key is None or key > best_key:
            best_key, best_epoch = key, epoch
            best_state = {k: v.detach().clone() for k, v in net.state_dict().items()}
        elif patience is not None and epoch - best_epoch >= patience:
            break
        if stopped:
            break
    net.load_state_dict(best_state)
    net.eval()
    return best_epoch, epochs_run, stopped
