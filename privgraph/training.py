r"""Training and evaluation loops: how useful is a (privatized) graph for node classification?

:func:`train_node_classifier` trains a :class:`~privgraph.models.GCN`, a
:class:`~privgraph.models.GraphSAGE`, a :class:`~privgraph.models.GAT` or a
:class:`~privgraph.models.GIN` in full batch on a :class:`~privgraph.graph.GraphData` and
reports accuracies at the epoch of best validation accuracy, optionally with LPGNN's denoising
(KProp on the features, KProp on the labels, the Drop algorithm for labels under randomized
response); :func:`evaluate_utility` compares a private graph with its clean original over several
seeded runs with the same split.

Randomness: each run derives one integer from a ``numpy.random.SeedSequence`` and seeds a
:class:`torch.Generator` on the model's device with it; that generator draws the initial
parameters and every dropout mask. torch's global random state is never read or changed, and on
the CPU the same seed gives bit-identical results. On CUDA, PyG's scatter aggregation uses atomic
additions, so results can differ in the last bits between runs with the same seed.

LPGNN's denoising (`Sajadmanesh & Gatica-Perez, CCS 2021 <https://arxiv.org/abs/2006.05535>`_;
all off by default, and then the run is bit-identical to one without these arguments). Its
KProp operator is LPGNN's: :math:`\mathbf{P} = \mathbf{D}^{-1/2} \mathbf{A} \mathbf{D}^{-1/2}`
over the neighbours, the node itself excluded (:class:`~privgraph.models.KProp` with
``aggr="gcn"``, ``self_loops=False``; the authors' code), whatever the model's ``aggr``:

- ``kprop_features = K_x > 0``: the features are replaced, once before training, by
  :math:`\mathbf{P}^{K_x} \mathbf{X}`.
- ``kprop_labels = K_y > 0``: the training targets are the denoised labels
  :math:`\tilde{y}_v = \arg\max_c (\mathbf{P}^{K_y} \mathbf{Y}')_{vc}`, with
  :math:`\mathbf{Y}'` the one-hot labels of the training and validation nodes and zero rows
  elsewhere (test labels are never read); ties and unreached rows keep :math:`y'_v`.
  Without ``drop`` the model is trained on them with plain cross-entropy.
- ``drop``: LPGNN's Drop (Label Denoising with Propagation). (1) The same :math:`K_y` steps
  are applied to the model's predicted class probabilities and the loss compares the
  propagated prediction with the propagated label,
  :math:`\mathcal{L} = -\frac{1}{|V_T|} \sum_{v \in V_T} \log \hat{p}(\tilde{y}_v \mid x)`,
  :math:`\hat{p}(\tilde{y} \mid x) = \mathbf{P}^{K_y} (\mathrm{softmax}(f(\mathbf{X})) \mathbf{T})`
  (rows renormalised to sum to one), so that the GNN is not pushed to reproduce the noise
  left in :math:`\tilde{y}`; :math:`\mathbf{T}` is the label RR's transition matrix at
  ``label_epsilon`` (forward correction, LPGNN's Drop; the identity without
  ``label_epsilon``). (2) Training STOPS at the first epoch whose model (evaluation mode)
  scores above :math:`\mathrm{Acc}^*` (:func:`drop_bound`) against the noisy labels
  :math:`y'` of the validation nodes (``graph.y``): a model that predicted every true label
  would score :math:`\mathrm{Acc}^*` there in expectation, so a higher score means it has
  absorbed noise of :math:`y'` (the validation labels enter :math:`\tilde{y}` through the
  propagation). That epoch is not eligible for selection (unless it is the first). With
  ``kprop_labels=0``, Drop is plain cross-entropy on :math:`y'` with this stopping rule.
"""

from __future__ import annotations

import copy
import dataclasses
import numbers
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from privgraph.errors import GraphValidationError
from privgraph.graph import SPLIT_MASKS, GraphData
from privgraph.params import check_int
from privgraph.randomized_response import label_rr_keep_probability, label_rr_transition_matrix
from privgraph.models import GAT, GCN, GIN, GAPClassifier, GraphSAGE, KProp
from privgraph.models.sparse import FactoredInput, PropagatedInput, quiet_sparse_beta
from privgraph.progress import ProgressCallback, ProgressTracker
from privgraph.seeding import as_seed_sequence, partition_seeds, stage_seed

__all__ = [
    "DENOISING_OPTIONS",
    "EDGE_SETS",
    "MODELS",
    "OWNER_ONLY",
    "choose_device",
    "drop_bound",
    "encode_features",
    "evaluate_utility",
    "feature_only_kwargs",
    "version_kwargs",
    "paired_test",
    "principal_basis",
    "public_classes",
    "public_edges_kwargs",
    "select_by_validation",
    "fit_node_classifier",
    "fit_ensemble",
    "member_seeds",
    "search_kprop",
    "split_accuracies",
    "output_classes",
    "train_node_classifier",
    "TrainedClassifier",
]

_SPARSE_DENSITY = 0.1
MODELS: dict[str, type[torch.nn.Module]] = {
    "gcn": GCN, "sage": GraphSAGE, "gat": GAT, "gin": GIN,
    "gap": GAPClassifier,  # over a GAP version's released aggregates (graph.aggregates), no edges
}
#: the edge sets a model can be trained over; "none" is the feature-only floor
EDGE_SETS = ("all", "public", "private", "none")
# the options of train_node_classifier that denoise a PRIVATE graph; evaluate_utility does not
# apply them to the clean baseline (LPGNN's setting: the non-private model has nothing to denoise)
DENOISING_OPTIONS = ("kprop_features", "kprop_labels", "drop", "label_epsilon", "label_classes", "kprop_search",
                     "kprop_search_labels")
_LOG_FLOOR = 1e-20  # log(p) of a propagated probability that is exactly zero
# LPGNN's KProp operator (the authors' code: KProp(aggregator="add", normalize=True,
# add_self_loops=False)): symmetric normalisation, the node itself excluded
_KPROP = {"aggr": "gcn", "self_loops": False}


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


def _torch_seed(seed: Any) -> int:
    """A 64-bit integer for ``torch.Generator.manual_seed`` from an int or a SeedSequence."""
    ss = as_seed_sequence(seed)
    return int(ss.generate_state(1, dtype=np.uint64)[0])


def _model_input(x: torch.Tensor) -> torch.Tensor:
    """Sparse CSR features when at most 1/10 of the entries are non-zero, else dense and centred.

    Bag-of-words features (Cora: 1.3% non-zero) then cost a sparse product and a dropout draw
    per stored value instead of per entry: several times faster on a CPU, same distribution.

    Dropout before the first layer applies to sparse input only: on dense input (released,
    propagated or centred features) it is skipped, which costs the same accuracy within noise
    and a third of the time (docs/evaluation-cost.md).

    Dense features are centred per column (their mean over all nodes subtracted). Privatized
    features are dense with a large common offset (FeatureRR's grid {1/k, ..., 1} puts every 0 at
    1/k); input dropout on such an offset is noise of order sqrt(d) that drowns the signal, and
    the model does not train at all (measured on Cora: train accuracy 0.14 with features
    0.5 + 0.5 x, 1.0 once centred). Centring the released features is post-processing: free.
    """
    if x.numel() and torch.count_nonzero(x).item() <= _SPARSE_DENSITY * x.numel():
        with quiet_sparse_beta():
            return x.to_sparse_csr()
    return x - x.mean(dim=0, keepdim=True)


#: the relative error (Frobenius norm) within which a smooth dense input is trained through its
#: low-rank factors (:func:`_factored_input`)
FACTOR_TOLERANCE = 1e-4


def _factored_input(x: torch.Tensor, raw: torch.Tensor | None, center: torch.Tensor) -> torch.Tensor | FactoredInput:
    """The centred dense model input ``x`` in a form whose first-layer product is cheaper
    (:class:`~privgraph.models.sparse.FactoredInput`), else ``x`` itself.

    ``raw`` (the features ``x`` was centred from, ``center`` their column mean; None after KProp):
    where at most 1/10 of its entries differ from its most common value ``m`` (a Piecewise
    release), ``x = CSR(raw - m) - (center - m)``: exact. Otherwise (a propagated, smooth input):
    ``x ~ (x V) V^T`` for the top-``k`` right singular vectors ``V`` (:func:`principal_basis`'s
    randomized SVD, of 128 vectors, doubled up to where the factors would cost half the dense
    product), ``k`` the smallest rank whose residual is within :data:`FACTOR_TOLERANCE` of ``x``'s
    norm (checked). Post-processing of ``x``; deterministic (a fixed seed)."""
    n, d = x.shape
    if raw is not None:
        form = _one_value_form(raw)
        return x if form is None else FactoredInput(form.left, shift=center - form.mode)
    norm = _frobenius(x)
    k_max = (n * d) // (2 * (n + d))  # the factors must cost at most half the dense product
    g = torch.Generator(device=x.device).manual_seed(0)
    k = min(128, k_max)
    while k >= 16 and norm > 0:
        s, vh = _top_singular(x, k, g, power_iterations=2)
        # the residual energy at each rank j <= k: what lies beyond the k vectors (measured, in
        # float64: norm^2 - sum s^2 cannot resolve 1e-8 in float32) plus s_{j+1}^2 + ... + s_k^2
        beyond = _frobenius(x, x @ vh.T, vh.T) ** 2
        tail = beyond + torch.flip(torch.cumsum(torch.flip(s.double() ** 2, [0]), 0), [0])
        tail = torch.cat([tail[1:], tail.new_tensor([beyond])])
        fits = torch.nonzero(tail <= (FACTOR_TOLERANCE * norm) ** 2)
        if fits.numel():
            v = vh[: int(fits[0]) + 1].T.contiguous()
            a = x @ v
            if _frobenius(x, a, v) <= FACTOR_TOLERANCE * norm:
                return FactoredInput(a, v.T.contiguous())
        if k == k_max:
            break
        k = min(2 * k, k_max)
    return x


@dataclasses.dataclass
class _OneValueForm:
    mode: float
    left: torch.Tensor  # CSR(raw - mode)


def _one_value_form(raw: torch.Tensor) -> _OneValueForm | None:
    """``raw`` as ``CSR(raw - m) + m`` for its most common value ``m`` (of its first 65,536
    entries), where at most 1/10 of its entries differ from ``m``; else None."""
    m = float(raw.reshape(-1)[: 1 << 16].mode().values)
    if torch.count_nonzero(raw != m).item() > _SPARSE_DENSITY * raw.numel():
        return None
    with quiet_sparse_beta():
        return _OneValueForm(m, (raw - m).to_sparse_csr())


#: the propagated input (:class:`~privgraph.models.sparse.PropagatedInput`) is used where its
#: product costs at most this fraction of the dense product's multiply-adds: a CSR product of
#: 64-128 columns does 10-35 times fewer per second than a dense one on a CPU (measured on Cora,
#: docs/evaluation-cost.md)
PROPAGATION_COST_SHARE = 1 / 24


def _propagated_input(x: torch.Tensor, edge_index: torch.Tensor, steps: int) -> PropagatedInput | None:
    """KProp's ``steps`` over features ``x`` that are one value ``m != 0`` almost everywhere (a
    Piecewise or FeatureRR release), centred, as :class:`~privgraph.models.sparse.PropagatedInput`
    ``P^K (CSR(x - m) + m) - 1 c^T``, ``c`` the column mean of ``P^K x``
    (``(P^T)^K 1`` weighting ``x``'s rows); None where that is not cheaper than the dense
    input (:data:`PROPAGATION_COST_SHARE`) or ``x`` has no such form. Exact up to float summation order."""
    form = _one_value_form(x)
    if form is None or form.mode == 0.0:
        return None
    n, d = x.shape
    with torch.enable_grad():  # the operator's transpose serves the backward
        op, op_t = KProp(steps, **_KPROP).operator(edge_index, n, x.dtype)
    if steps * op.values().numel() + form.left.values().numel() > PROPAGATION_COST_SHARE * n * d:
        return None
    base = FactoredInput(form.left, shift=torch.full((d,), -form.mode, dtype=x.dtype, device=x.device))
    weights = torch.ones(n, dtype=x.dtype, device=x.device)
    for _ in range(steps):
        weights = op_t @ weights
    return PropagatedInput(base, op, op_t, steps, base.column_sums(weights) / n)


def _frobenius(x: torch.Tensor, a: torch.Tensor | None = None, v: torch.Tensor | None = None, rows: int = 4096) -> float:
    """``||x - a v^T||_F`` (``||x||_F`` without ``a``), in float64, ``rows`` rows at a time."""
    total = 0.0
    for i in range(0, x.shape[0], rows):
        r = x[i:i + rows] if a is None or v is None else x[i:i + rows] - a[i:i + rows] @ v.T
        total += float(torch.linalg.vector_norm(r.double()) ** 2)
    return total ** 0.5


def principal_basis(
    x: torch.Tensor, dim: int, generator: torch.Generator, *, power_iterations: int = 3, oversample: int = 16
) -> torch.Tensor:
    r"""An orthonormal basis ``[d, dim]`` of the top-``dim`` right singular subspace of ``x``
    ``[n, d]`` (for centred ``x``: its first ``dim`` principal axes).

    The randomized range finder with subspace iteration (Halko, Martinsson & Tropp, SIAM Review
    2011, Alg. 4.4 and 5.1): :math:`\mathbf{Q} = \mathrm{orth}((\mathbf{X}\mathbf{X}^\top)^q
    \mathbf{X}\boldsymbol{\Omega})` for a Gaussian :math:`\boldsymbol{\Omega}` of
    ``dim + oversample`` columns drawn from ``generator`` (never torch's global state), then the
    exact SVD of the small :math:`\mathbf{Q}^\top \mathbf{X}`. Cost O(n d (dim + oversample)
    (2 q + 2)), no ``d x d`` matrix. Applied to released features it is post-processing.
    """
    _, vh = _top_singular(x, dim, generator, power_iterations=power_iterations, oversample=oversample)
    return vh[: min(int(dim), vh.shape[0])].T.contiguous()


def _top_singular(
    x: torch.Tensor, dim: int, generator: torch.Generator, *, power_iterations: int = 3, oversample: int = 16
) -> tuple[torch.Tensor, torch.Tensor]:
    """The randomized SVD of :func:`principal_basis`: the top ``dim`` singular values of ``x``
    (estimates from below) and their right singular vectors ``[dim, d]``."""
    n, d = x.shape
    k = min(int(dim) + int(oversample), d, n)
    omega = torch.randn(d, k, generator=generator, device=x.device, dtype=x.dtype)
    q = torch.linalg.qr(x @ omega).Q
    for _ in range(int(power_iterations)):
        q = torch.linalg.qr(x @ torch.linalg.qr(x.T @ q).Q).Q
    _, s, vh = torch.linalg.svd(q.T @ x, full_matrices=False)
    return s[: int(dim)], vh[: int(dim)]


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


def _check_graph(graph: GraphData) -> None:
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


def _check_choice(value: Any, name: str, choices: tuple[str, ...]) -> str:
    if not isinstance(value, str) or value not in choices:
        raise ValueError(
            f"train_node_classifier: {name} must be one of {', '.join(map(repr, choices))}, "
            f"got {value!r}"
        )
    return value


def output_classes(graph: GraphData, label_classes: int | None = None) -> int:
    """The size of a node classifier's output layer for ``graph``: the largest of the PUBLIC class
    count (``label_classes``, the labels mechanism's configured ``num_classes``, else
    ``graph.meta["num_classes"]``) and the classes present in ``graph.y``. A function of the graph
    trained on and public configuration only (for a version: post-processing of its release)."""
    declared = label_classes if label_classes is not None else graph.meta.get("num_classes")
    return max(graph.num_classes, int(declared) if declared is not None else 0)


def drop_bound(label_epsilon: float | None, num_classes: int) -> float:
    r"""LPGNN's :math:`\mathrm{Acc}^*`, the highest expected accuracy on RR-perturbed labels.

    Labels perturbed by :math:`c`-ary randomized response with budget :math:`\varepsilon_y`
    (:class:`~privgraph.mechanisms.features.label_rr.LabelRR`) equal the true label with
    probability

    .. math::
        \mathrm{Acc}^* = \Pr(y' = y) = \frac{e^{\varepsilon_y}}{e^{\varepsilon_y} + c - 1},

    so a classifier that predicts every TRUE label is expected to score :math:`\mathrm{Acc}^*`
    against the noisy labels :math:`y'` and any classifier that scores above it agrees with the
    noise (LPGNN talk, "Prevent absorbing noise in :math:`y'`"; the slide's :math:`e^c` is a typo
    for :math:`e^{\varepsilon}`). ``label_epsilon=None`` (labels not randomized) gives ``1.0``.
    """
    if label_epsilon is None:
        return 1.0
    return label_rr_keep_probability(label_epsilon, num_classes)


def _denoised_labels(
    y: torch.Tensor, known: torch.Tensor, num_classes: int, prop: KProp, edge_index: torch.Tensor
) -> torch.Tensor:
    r"""LPGNN's label denoising: :math:`\tilde{y}_v = \arg\max_c (\mathbf{P}^{K} \mathbf{Y}')_{vc}`.

    :math:`\mathbf{Y}'` holds the one-hot (noisy) labels of the ``known`` nodes (training and
    validation: the labels the server collected) and zeros elsewhere; test labels are never
    read. Ties, and rows that no known label reaches (all zero), keep the node's own label
    :math:`y'_v` (where the argmax would otherwise pick the lowest class index).
    """
    onehot = torch.zeros(y.numel(), num_classes, device=y.device)
    onehot[known, y[known]] = 1.0
    with torch.no_grad():
        votes = prop(onehot, edge_index)
    top = votes.max(dim=1, keepdim=True).values
    own_is_top = votes.gather(1, y.clamp_min(0).view(-1, 1)).squeeze(1) == top.squeeze(1)
    return torch.where(own_is_top, y, votes.argmax(dim=1))


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
    accuracies of :func:`fit_node_classifier`. The attacks (:mod:`privgraph.attacks`) see only
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
    #: the base predictions of Correct and Smooth (:mod:`privgraph.correct_and_smooth`)
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
            xt = KProp(self.kprop_features, **_KPROP)(xt, self._edges(edge_index))
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
    graph: GraphData,
    *,
    seed: int | np.random.SeedSequence,
    edges: str = "all",
    hidden: int = 64,
    epochs: int = 200,
    lr: float = 0.01,
    weight_decay: float = 5e-4,
    dropout: float = 0.5,
    aggr: str | None = None,
    device: str = "auto",
    patience: int | None = 25,
    eval_y: np.ndarray | None = None,
    model: str = "gcn",
    kprop_features: int = 0,
    kprop_labels: int = 0,
    drop: bool = False,
    label_epsilon: float | None = None,
    label_classes: int | None = None,
    feature_dim: int | None = None,
    kprop_search: Sequence[int] | None = None,
    kprop_search_labels: bool = True,
    progress: ProgressCallback | None = None,
    propagate_val_labels: bool = True,
    input_cache: InputCache | None = None,
) -> TrainedClassifier:
    r"""Train a 2-layer GNN (:class:`~privgraph.models.GCN`, :class:`~privgraph.models.GraphSAGE`,
    :class:`~privgraph.models.GAT` or :class:`~privgraph.models.GIN`) on ``graph.train_mask`` in
    full batch; the epoch of best validation accuracy is kept (:func:`_train_loop`). Validation is
    always against ``graph.y`` (on a private graph, the noisy labels: no clean label is needed).
    LPGNN's denoising is described in the module docstring (all off by default, and then the run
    is bit-identical to one without those arguments).

    Args:
        graph (GraphData): needs ``x``, single-label ``y`` and all three masks.
        seed (int or SeedSequence): seeds the run's :class:`torch.Generator` (initial parameters,
            dropout masks): same seed, graph and arguments, bit-identical results on the CPU.
        edges (str): ``"all"``, ``"public"``, ``"private"`` or ``"none"``: the feature-only floor
            (every closed neighbourhood is the node itself, so the same models become MLPs of the
            same architecture, initial parameters and dropout draws) (default: ``"all"``).
        hidden, epochs, lr, weight_decay, dropout, patience: the hidden width, the epoch cap, Adam's
            rate and L2 penalty, the dropout before each layer (the first: sparse input only,
            :func:`_model_input`), the patience (``None``: no early stop) (64, 200, 0.01, 5e-4, 0.5, 25).
        aggr (str, optional): the model's aggregation (:class:`~privgraph.models.gcn.NodeGNN`;
            ``None``: the model's own).
        device (str): see :func:`choose_device` (default: ``"auto"``).
        eval_y (np.ndarray, optional): labels ``[n]`` that ``test_acc`` is scored against instead
            of ``graph.y`` (:func:`evaluate_utility` passes the owner's raw labels); training and
            model selection read ``graph.y`` only.
        model (str): ``"gcn"``, ``"sage"``, ``"gat"`` (8 heads; ``hidden`` a multiple of 8),
            ``"gin"``, or ``"gap"``: GAP's classification module over ``graph.aggregates``, with
            ``edges="none"`` (default: ``"gcn"``).
        kprop_features, kprop_labels, drop, label_epsilon, label_classes, propagate_val_labels:
            LPGNN's denoising (the module docstring); ``label_classes``, a PUBLIC count, also sizes
            the output layer (:func:`output_classes`).
        kprop_search (sequence of int, optional): LPGNN's search of the KProp steps
            (:func:`search_kprop`; ``kprop_features`` and ``kprop_labels`` then 0).
        kprop_search_labels (bool): the search's grid covers ``K_y`` too (LPGNN's); ``False``:
            ``K_x`` only, ``K_y = 0`` (labels that were not randomized) (default: ``True``).
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
                            epochs=epochs, lr=lr,
                            weight_decay=weight_decay, dropout=dropout, aggr=aggr, device=device, patience=patience,
                            eval_y=eval_y, model=model, drop=drop, label_epsilon=label_epsilon,
                            label_classes=label_classes, feature_dim=feature_dim, progress=progress,
                            input_cache=input_cache)
    eval_y = _check_fit_args(graph, edges=edges, model=model, hidden=hidden, epochs=epochs, lr=lr,
                             weight_decay=weight_decay, patience=patience, kprop_features=kprop_features, kprop_labels=kprop_labels, drop=drop,
                             propagate_val_labels=propagate_val_labels, label_epsilon=label_epsilon,
                             label_classes=label_classes, feature_dim=feature_dim, eval_y=eval_y)
    model_cls = MODELS[_check_choice(model, "model", tuple(MODELS))]
    # the output layer is sized from the trained graph and public configuration only, never from
    # eval_y: for a version, eval_y holds raw labels, and a layer sized by their largest class
    # would make the version's shareable metrics move with one raw label (issue 24, leak 4)
    num_classes = output_classes(graph, label_classes)
    dev = choose_device(device)
    inp = (input_cache or InputCache()).get(graph, dict(edges=edges, model=model, aggr=aggr, kprop_features=kprop_features,
                                            feature_dim=feature_dim, seed=seed if feature_dim else None, dev=dev))
    y = inp.data.y.to(dev)
    idx = {name: torch.from_numpy(np.flatnonzero(getattr(inp.graph, name))).to(dev) for name in SPLIT_MASKS}
    targets = _training_targets(y, idx, num_classes, inp, dev, kprop_labels=kprop_labels, drop=drop,
                                propagate_val_labels=propagate_val_labels, label_epsilon=label_epsilon,
                                label_classes=label_classes)
    g = torch.Generator(device=dev)
    g.manual_seed(_torch_seed(seed))
    # built on the CPU from a throwaway generator, moved, then drawn on `dev` from the run's own
    net = model_cls(
        int(inp.x.shape[1]), hidden, num_classes, dropout=dropout, cached=True, **inp.model_kwargs,
        generator=torch.Generator().manual_seed(0),
    ).to(dev)
    net.reset_parameters(g)
    best_epoch, epochs_run, stopped = _train_loop(net, inp.x, inp.edge_index, g, idx, y, targets, epochs=epochs,
                                                  lr=lr, weight_decay=weight_decay, patience=patience)
    with torch.no_grad():
        out = net(inp.x, inp.edge_index)
    res: dict[str, Any] = {
        **split_accuracies(inp.graph, out.argmax(1).cpu().numpy(), eval_y),
        "best_epoch": best_epoch, "epochs_run": epochs_run, "device": str(inp.x.device),
    }
    if targets.bound is not None:
        res["drop_bound"] = targets.bound
        res["drop_stopped"] = stopped
    return TrainedClassifier(net=net, x=inp.data.x, edge_index=inp.edge_index, kprop_features=int(kprop_features),
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


def _check_fit_args(
    graph: GraphData, *, edges: Any, model: Any, hidden: Any, epochs: Any, lr: Any, weight_decay: Any, patience: Any, kprop_features: Any,
    kprop_labels: Any, drop: Any, propagate_val_labels: Any, label_epsilon: Any, label_classes: Any,
    feature_dim: Any, eval_y: Any,
) -> np.ndarray | None:
    """The hyper-parameters of :func:`fit_node_classifier`, checked; returns ``eval_y`` as an array."""
    _check_graph(graph)
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


@dataclasses.dataclass
class _Inputs:
    """What the model reads: the graph trained on (GAP: its aggregates as ``x``), its PyG data,
    the edges on the device, the model input ``x`` (KProp'd, centred, projected), the input's
    mean (``center``, None for sparse input), the projection, and the model's extra keywords."""

    graph: GraphData
    data: Any
    edge_index: torch.Tensor
    x: torch.Tensor
    center: torch.Tensor | None
    projection: torch.Tensor | None
    model_kwargs: dict[str, Any]


def _prepare_inputs(
    graph: GraphData, *, edges: str, model: str, aggr: str | None, kprop_features: int, feature_dim: int | None,
    seed: Any, dev: torch.device,
) -> _Inputs:
    _check_choice(edges, "edges", EDGE_SETS)
    model_kwargs: dict[str, Any] = {} if aggr is None else {"aggr": aggr}
    if model == "gap":  # GAP's classification module reads the released aggregates, no edge
        if graph.aggregates is None:
            raise ValueError("train_node_classifier: model 'gap' trains on a GAP version's aggregates; "
                             "this graph has none")
        a = graph.aggregates
        graph = graph.replace(x=np.ascontiguousarray(a.transpose(1, 0, 2).reshape(a.shape[1], -1)))
        model_kwargs["hops"] = int(a.shape[0])
    if edges == "none":
        no_edges = np.zeros((2, 0), np.int64)
        data = graph.replace(edges_public=no_edges, edges_private=no_edges).to_pyg("all")
    else:
        data = graph.to_pyg(edges)
    edge_index = data.edge_index.to(dev)
    if kprop_features and model != "gap" and feature_dim is None:
        propagated = _propagated_input(data.x.to(dev), edge_index, kprop_features)
        if propagated is not None:
            return _Inputs(graph, data, edge_index, propagated, propagated.center, None, {**model_kwargs, "input_dropout": False})
    raw = KProp(kprop_features, **_KPROP)(data.x.to(dev), edge_index) if kprop_features else data.x.to(dev)
    x = _model_input(raw) if kprop_features else _model_input(data.x).to(dev)
    if model == "gap":
        x = data.x.to(dev)  # unit rows already: no centring
    projection = None
    if feature_dim is not None and x.layout == torch.strided and x.shape[1] > feature_dim:
        g_proj = torch.Generator(device=dev)
        g_proj.manual_seed(_torch_seed(stage_seed(as_seed_sequence(seed), "feature_projection")))
        projection = principal_basis(x, int(feature_dim), g_proj)
        x = x @ projection
    center = None if x.layout == torch.sparse_csr else raw.mean(dim=0).detach()
    if model != "gap":  # GAP's module keeps its own dropout over the aggregates
        model_kwargs["input_dropout"] = x.layout != torch.strided
        if x.layout == torch.strided and projection is None:
            x = _factored_input(x, None if kprop_features else raw, center)
    return _Inputs(graph, data, edge_index, x, center, projection, model_kwargs)


class InputCache:
    """The model inputs of ONE graph (its PyG data and KProp'd, centred or projected features),
    each prepared once and shared by every training over that graph object with the same input
    arguments: the members of an ensemble, the runs and candidates of an evaluation. Preparing
    is deterministic (a projection's seed is part of the key), so a cached input equals a fresh one."""

    def __init__(self) -> None:
        self._graph: GraphData | None = None
        self._inputs: dict[tuple[Any, ...], _Inputs] = {}

    def get(self, graph: GraphData, prepare: dict[str, Any]) -> _Inputs:
        """:func:`_prepare_inputs` ``(graph, **prepare)``, from the cache when ``graph`` is the object
        it holds inputs of (another graph replaces them)."""
        if graph is not self._graph:
            self._graph, self._inputs = graph, {}
        seed = prepare["seed"]
        seed_key = None if seed is None else (
            (tuple(seed.spawn_key), seed.entropy) if isinstance(seed, np.random.SeedSequence) else int(seed))
        key = tuple((k, str(v)) for k, v in prepare.items() if k != "seed") + (seed_key,)
        if key not in self._inputs:
            self._inputs[key] = _prepare_inputs(graph, **prepare)
        return self._inputs[key]


@dataclasses.dataclass
class _Targets:
    """The training targets (the labels, or LPGNN's denoised ones), the label propagation, Drop's
    accuracy bound and its forward correction (the label RR's channel), and whether Drop is on."""

    y_fit: torch.Tensor
    label_prop: Any
    bound: float | None
    forward: torch.Tensor | None
    drop: bool


def _training_targets(
    y: torch.Tensor, idx: dict[str, torch.Tensor], num_classes: int, inp: _Inputs, dev: torch.device, *,
    kprop_labels: int, drop: bool, propagate_val_labels: bool, label_epsilon: float | None, label_classes: int | None,
) -> _Targets:
    """Targets from the train (and validation) labels only; the label RR's channel from its
    public parameters (:mod:`privgraph.randomized_response`)."""
    label_prop = KProp(kprop_labels, cached=True, **_KPROP) if kprop_labels else None
    y_fit = y
    if label_prop is not None:
        known = torch.cat([idx["train_mask"], idx["val_mask"]]) if propagate_val_labels else idx["train_mask"]
        y_fit = _denoised_labels(y, known, num_classes, label_prop, inp.edge_index)
    c = label_classes if label_classes is not None else inp.graph.meta.get("num_classes")
    classes = int(c) if c is not None else num_classes
    bound = drop_bound(label_epsilon, classes) if drop else None
    forward = None
    if drop and label_prop is not None and label_epsilon is not None:
        forward = torch.as_tensor(label_rr_transition_matrix(label_epsilon, classes), dtype=torch.float32, device=dev)
    return _Targets(y_fit, label_prop, bound, forward, drop)


def _train_loop(
    net: torch.nn.Module, x: torch.Tensor, edge_index: torch.Tensor, g: torch.Generator, idx: dict[str, torch.Tensor],
    y: torch.Tensor, t: _Targets, *, epochs: int, lr: float, weight_decay: float, patience: int | None,
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


def _check_evaluation_inputs(private: GraphData, clean: GraphData | None, runs: Any, train_kwargs: dict[str, Any]) -> None:
    if isinstance(runs, bool) or not isinstance(runs, numbers.Integral) or runs < 1:
        raise ValueError(f"evaluate_utility: runs must be an int >= 1, got {runs!r}")
    for reserved in ("seed", "eval_y"):
        if reserved in train_kwargs:
            raise TypeError(
                f"evaluate_utility: {reserved!r} is set per run by evaluate_utility; "
                "pass seed_sequence instead"
            )
    if clean is None:
        _check_graph(private)
    elif private.num_nodes != clean.num_nodes:
        raise ValueError(
            f"evaluate_utility: private graph has {private.num_nodes} nodes, clean graph "
            f"{clean.num_nodes}; they must be the same nodes"
        )
    for name in SPLIT_MASKS if clean is not None else ():
        a, b = getattr(private, name), getattr(clean, name)
        if a is None or b is None:
            if a is not b:
                which = "private" if a is None else "clean"
                raise ValueError(f"evaluate_utility: {name} is missing from the {which} graph")
            continue
        if not np.array_equal(a, b):
            raise ValueError(
                f"evaluate_utility: {name} of the private graph differs from the clean graph's at "
                f"{int(np.count_nonzero(a != b))} nodes; both must use the same split"
            )
    if clean is not None:
        _check_graph(clean)
        _check_graph(private)


def _utility_summary(
    runs: int, clean_res: list[dict[str, Any]], private_res: list[dict[str, Any]], floor_res: list[dict[str, Any]],
    public_res: list[dict[str, Any]], references: list[dict[str, Any]] | None = None,
    propagation: dict[str, Any] | None = None, smoothed: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """:func:`evaluate_utility`'s result from the trainings' results (no clean runs: the shareable
    part only); ``references``: the public-only reference of each run
    (:func:`~privgraph.public_reference.per_run_reference`) or None, ``propagation``: label
    propagation over the release (the same in every run) or None; ``smoothed``: Correct and Smooth
    per run (empty: none)."""
    # per run, the model of highest validation accuracy on the version's own labels (ties: the
    # simpler one: the public data alone, the floor, the public edges alone, label propagation
    # over the release, the GNN, then Correct and Smooth of the trained models)
    def every_run(r: dict[str, Any] | None) -> list[dict[str, Any]]:
        return [r] * runs if r is not None and not np.isnan(r["val_acc"]) else []

    smoothed = smoothed if smoothed and len(smoothed) == runs else []
    references = references if references and not np.isnan(references[0]["val_acc"]) else None
    candidates = [("public_only", references or []), ("feature_only", floor_res), ("public_edges", public_res),
                  ("release_propagation", every_run(propagation)), ("gnn", private_res),
                  ("correct_and_smooth", smoothed)]
    chosen, models = [], []
    for i in range(runs):
        name, res = select_by_validation([(n, r[i]) for n, r in candidates if r])
        chosen.append(res)
        models.append(name)
    extra = {"public_edges": _summary([r["test_acc_own_labels"] for r in public_res])} if public_res else {}
    if references:
        methods = sorted({r["method"] for r in references})
        extra["public_only"] = {**_summary([r["test_acc_own_labels"] for r in references]),
                                "method": methods[0] if len(methods) == 1 else "; or ".join(methods)}
        extra["value_of_release"] = paired_test([r["test_acc_own_labels"] for r in chosen],
                                                [r["test_acc_own_labels"] for r in references])
    if propagation is not None:
        extra["release_propagation"] = {**_summary([propagation["test_acc_own_labels"]] * runs),
                                        "release_weight": propagation["release_weight"]}
    if smoothed:
        extra["correct_and_smooth"] = {**_summary([r["test_acc_own_labels"] for r in smoothed]),
                                       "base": [r["base"] for r in smoothed], "alpha": [r["alpha"] for r in smoothed],
                                       "release_weight": [r["release_weight"] for r in smoothed]}
    shareable = {
        "runs": runs,
        "private": {**_summary([r["test_acc_own_labels"] for r in private_res]),
                    # LPGNN's search: the [K_x, K_y] chosen per run on the version's own labels
                    **({"kprop": [r["kprop"] for r in private_res]} if "kprop" in private_res[0] else {})},
        "feature_only": _summary([r["test_acc_own_labels"] for r in floor_res]),
        **extra,
        "selected": {**_summary([r["test_acc_own_labels"] for r in chosen]), "models": models},
        "gnn_vs_feature_only": paired_test([r["test_acc_own_labels"] for r in private_res],
                                           [r["test_acc_own_labels"] for r in floor_res]),
        "device": private_res[0]["device"],
    }
    if not clean_res:
        return shareable
    extra_raw = {"public_edges_on_raw_labels": _summary([r["test_acc"] for r in public_res])} if public_res else {}
    if propagation is not None:
        extra_raw["release_propagation_on_raw_labels"] = _summary([propagation["test_acc"]] * runs)
    if smoothed:
        extra_raw["correct_and_smooth_on_raw_labels"] = _summary([r["test_acc"] for r in smoothed])
    if references:
        extra_raw["public_only_on_raw_labels"] = _summary([r["test_acc"] for r in references])
        extra_raw["value_of_release_on_raw_labels"] = paired_test([r["test_acc"] for r in chosen],
                                                                  [r["test_acc"] for r in references])
    return {
        **shareable,
        OWNER_ONLY: {
            "note": "computed from the raw graph: the data owner's private evaluation, covered by no guarantee",
            "clean": _summary([r["test_acc"] for r in clean_res]),
            "private_on_raw_labels": _summary([r["test_acc"] for r in private_res]),
            "feature_only_on_raw_labels": _summary([r["test_acc"] for r in floor_res]),
            **extra_raw,
            "selected_on_raw_labels": _summary([r["test_acc"] for r in chosen]),
            "gnn_vs_feature_only_on_raw_labels": paired_test([r["test_acc"] for r in private_res],
                                                             [r["test_acc"] for r in floor_res]),
        },
    }


#: The key of :func:`evaluate_utility`'s result that holds what was computed from the raw graph.
OWNER_ONLY = "owner_only"


def _summary(accs: list[float]) -> dict[str, Any]:
    a = np.asarray(accs, dtype=np.float64)
    return {
        "test_acc_mean": float(a.mean()),
        "test_acc_std": float(a.std(ddof=1)) if len(a) > 1 else 0.0,
        "test_acc": [float(v) for v in a],
    }


def evaluate_utility(
    private: GraphData,
    clean: GraphData | None,
    *,
    runs: int = 5,
    seed_sequence: np.random.SeedSequence | int,
    progress: ProgressCallback | None = None,
    public_train: np.ndarray | None = None,
    ensemble: int = 1,
    public_features: bool = False,
    **train_kwargs: Any,
) -> dict[str, Any]:
    """Train on a private graph and on its clean original, ``runs`` times each, and compare.

    ``progress`` receives a ``training`` :class:`~privgraph.progress.ProgressEvent` at the start and per training.

    Both graphs must carry the same split (equal ``train_mask``, ``val_mask`` and ``test_mask``).
    Run ``i`` uses child ``i`` of ``seed_sequence`` (spawn key ``(..., i)``) for BOTH graphs, so
    that the pair differs only in the data: same initial parameters (when the feature dimensions
    agree) and the same dropout draws. The private model's shareable test accuracy is scored
    against the version's own labels (what a reader of the version can recompute); against the
    raw labels it is owner-only (see Returns).

    With ``clean=None`` only the shareable part is computed: the version's models, scored on its
    own labels, nothing under :data:`OWNER_ONLY`. That is how a reader of the version (or a test in
    a fresh process) recomputes the published metrics from the stored version and public
    configuration alone; the result equals the shareable part of a run with the raw graph (same
    seeds), because no shareable figure reads ``clean``.

    LPGNN's denoising options (:data:`DENOISING_OPTIONS`: ``kprop_features``, ``kprop_labels``,
    ``drop``, ``label_epsilon``, ``label_classes``) apply to the PRIVATE graph only; the clean
    baseline is the same model (``model``, ``aggr``, ...) trained on the raw features and clean
    labels, as LPGNN compares its private models with the non-private GNN. The difference of
    the two accuracies is then the cost of privacy after denoising.

    Args:
        private (GraphData): the privatized graph.
        clean (GraphData): the original graph.
        runs (int): number of seeded runs per graph (default: ``5``).
        seed_sequence (SeedSequence or int): root of the per-run seeds.
        public_train (ndarray): boolean ``[n]``, the nodes whose training label is public; with
            it, ``public_only`` (:func:`privgraph.public_reference.public_only_reference`: label
            propagation of those labels over the public edges, which reads no private data) is a
            candidate of ``selected``, and ``value_of_release`` (:func:`paired_test` of
            ``selected`` against it) says what the release adds to the public data alone; so is
            ``release_propagation`` (:func:`privgraph.label_propagation.release_propagation`:
            the version's training labels propagated over its public and released edges, the
            released edges' weight chosen on validation), where the version released edges.
            In every evaluation ``correct_and_smooth``
            (:func:`privgraph.correct_and_smooth.release_correct_and_smooth`: the floor's, the
            public-edges model's and the GNN's predictions of each run corrected and smoothed
            from the version's training labels over its edges) is a candidate too.
        ensemble (int): each model of a run (the clean one too) is the mean prediction of this
            many trainings (:func:`fit_ensemble`) (default: ``1``).
        public_features (bool): the features are public: the floor may be the public-only reference
            (:func:`~privgraph.public_reference.per_run_reference`) (default: ``False``).
        **train_kwargs: passed to :func:`train_node_classifier` (not ``seed`` or ``eval_y``;
            the denoising options to the private run only).

    Returns:
        dict: ``runs``, ``device`` and ``private``: the private graph's model scored on the
        version's OWN (released) test labels, a function of the stored version only and so
        shareable; and, under :data:`OWNER_ONLY`, what is computed from the raw graph and covered
        by no guarantee (the data owner's private record): ``clean`` (the same model trained on the
        raw graph) and ``private_on_raw_labels`` (the private model scored on the raw test labels;
        equal to ``private`` where the test labels are public). Beside ``private`` (the GNN):
        ``feature_only``, the floor (the same model, seeds and epochs on the version without any
        edge: :func:`feature_only_kwargs`; a GNN below it would do better ignoring the graph),
        where the version has public AND private edges (or GAP's aggregates) ``public_edges``
        (the same model over its public edges only: what the released private edges add); for a
        GAP version (``private.aggregates``) ``private`` is GAP's classification module over the
        aggregates (model ``"gap"``, the floor's other settings), ``selected`` (per run, whichever
        candidate has the highest validation accuracy on the version's own labels, and which it
        was: ``feature_only``, ``public_edges`` or ``gnn``) and ``gnn_vs_feature_only``
        (:func:`paired_test`); each again on the raw labels under :data:`OWNER_ONLY`. Each summary has
        ``test_acc_mean``, ``test_acc_std`` (sample standard deviation, ``ddof=1``; ``0.0`` for one
        run) and the per-run ``test_acc`` list.

    Raises:
        ValueError: different node counts or splits, or ``runs`` < 1.
        TypeError: ``seed`` or ``eval_y`` among ``train_kwargs``.
    """
    _check_evaluation_inputs(private, clean, runs, train_kwargs)
    ensemble, raw_y = check_int(ensemble, "ensemble", minimum=1), None if clean is None else clean.y
    seeds = partition_seeds(as_seed_sequence(seed_sequence), int(runs))
    clean_kwargs = {k: v for k, v in train_kwargs.items() if k not in DENOISING_OPTIONS}
    public_kwargs = public_edges_kwargs(private, train_kwargs)
    from privgraph.correct_and_smooth import release_correct_and_smooth

    classes, device = output_classes(private, train_kwargs.get("label_classes")), choose_device(train_kwargs.get("device", "auto"))
    clean_res, private_res, floor_res, public_res, smoothed, inputs = [], [], [], [], [], (InputCache(), InputCache())
    per_run = 2 + (clean is not None) + (public_kwargs is not None)
    tracker = ProgressTracker("training", per_run * int(runs), progress)
    for i, s in enumerate(seeds):
        if clean is not None:
            clean_res.append(fit_ensemble(clean, seed=s, members=ensemble, input_cache=inputs[1], **clean_kwargs)[0])
            tracker.advance(detail=f"clean graph, run {i + 1}/{runs}")
        bases: dict[str, np.ndarray] = {}
        for name, kwargs, out, what in (
                ("gnn", version_kwargs(private, train_kwargs), private_res, "private graph"),
                ("feature_only", feature_only_kwargs(train_kwargs), floor_res, "private graph without edges (feature-only floor)"),
                ("public_edges", public_kwargs, public_res, "private graph, public edges only")):
            if kwargs is None:
                continue
            result, bases[name] = fit_ensemble(private, seed=s, members=ensemble, eval_y=raw_y, progress=progress,
                                               input_cache=inputs[0], **kwargs)
            out.append(result)
            tracker.advance(detail=f"{what}, run {i + 1}/{runs}")
        bases = {k: bases[k] for k in ("feature_only", "public_edges", "gnn") if k in bases}  # simpler first: ties
        smoothed.append(release_correct_and_smooth(private, bases, classes, raw_y=raw_y, device=device))
    reference = propagation = None
    if public_train is not None:
        from privgraph.label_propagation import release_propagation
        from privgraph.public_reference import per_run_reference, public_only_reference
        reference = per_run_reference(public_only_reference(private, public_train, classes, raw_y=raw_y), floor_res,
                                      public_features=public_features, all_train_public=bool(public_train[private.train_mask].all()))
        propagation = release_propagation(private, classes, raw_y=raw_y, device=device)
    summary = _utility_summary(int(runs), clean_res, private_res, floor_res, public_res, reference, propagation,
                               [r for r in smoothed if r is not None])
    return {**summary, "ensemble": ensemble} if ensemble > 1 else summary


def version_kwargs(version: GraphData, train_kwargs: dict[str, Any]) -> dict[str, Any]:
    """The training arguments of a version's GNN: ``train_kwargs`` as they are, except for a GAP
    version (``version.aggregates``), whose GNN is GAP's classification module (model ``"gap"``)
    over the aggregates with the floor's other settings (no edges, KProp, ``aggr`` or
    ``feature_dim``)."""
    if version.aggregates is None:
        return dict(train_kwargs)
    out = {k: v for k, v in feature_only_kwargs(train_kwargs).items() if k not in ("aggr", "feature_dim")}
    return {**out, "model": "gap"}


def public_edges_kwargs(version: GraphData, train_kwargs: dict[str, Any]) -> dict[str, Any] | None:
    """The training arguments of the public-edges candidate (the same model over the version's
    public edges only: what its released private edges add), or None where it is no candidate:
    the version has no public edges, or nothing released from the private ones (edges or GAP's
    aggregates), or the training does not read all edges anyway."""
    released_private = version.edges_private.shape[1] or version.aggregates is not None
    if train_kwargs.get("edges", "all") == "all" and version.edges_public.shape[1] and released_private:
        return {**train_kwargs, "edges": "public"}
    return None


def select_by_validation(candidates: Sequence[tuple[str, dict[str, Any]]]) -> tuple[str, dict[str, Any]]:
    """The ``(name, result)`` of highest ``val_acc`` (accuracy on the version's own validation
    labels); ties go to the earlier candidate (list the simpler models first: the floor, the
    public edges alone, then the GNN)."""
    return max(candidates, key=lambda c: c[1]["val_acc"])


def feature_only_kwargs(train_kwargs: dict[str, Any]) -> dict[str, Any]:
    """The training arguments of the feature-only floor: the same model, epochs and seeds over
    no edges (``edges="none"``), without KProp (which propagates over edges); Drop's stopping
    rule, which reads no edge, is kept."""
    out = {k: v for k, v in train_kwargs.items()
           if k not in ("kprop_features", "kprop_labels", "kprop_search", "kprop_search_labels", "edges")}
    return {**out, "edges": "none"}


def paired_test(a: list[float], b: list[float]) -> dict[str, Any]:
    """Paired t-test of ``a`` against ``b`` (runs paired by seed; ``scipy.stats.ttest_rel``):
    ``mean_difference`` (a - b), ``statistic`` and two-sided ``pvalue`` (None with fewer than two
    runs or identical pairs)."""
    from scipy.stats import ttest_rel

    d = np.asarray(a, dtype=np.float64) - np.asarray(b, dtype=np.float64)
    out: dict[str, Any] = {"test": "paired t-test (scipy.stats.ttest_rel)", "runs": int(d.size),
                           "mean_difference": float(d.mean()) if d.size else 0.0, "statistic": None, "pvalue": None}
    if d.size >= 2 and np.any(d != d[0]):
        r = ttest_rel(a, b)
        out["statistic"], out["pvalue"] = float(r.statistic), float(r.pvalue)
    return out
