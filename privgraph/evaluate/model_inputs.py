r"""The model inputs of a node classifier: features as the first layer reads them.

A graph's features become a centred model input once per graph and input arguments
(:class:`InputCache`), in the cheapest form that gives the same first-layer product: sparse rows,
a Piecewise or FeatureRR release's one-value form (:class:`~privgraph.evaluate.models.sparse.FactoredInput`),
LPGNN's KProp :math:`\mathbf{P}^{K_x} \mathbf{X}` carried in the hidden width
(:class:`~privgraph.evaluate.models.sparse.PropagatedInput`), or the low-rank factors of a smooth dense
input within :data:`FACTOR_TOLERANCE`. Every form is post-processing of the features it reads;
why each keeps the measurement: ``docs/evaluation-cost.md``.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import torch

from privgraph.graph import GraphData
from privgraph.evaluate.models import KProp
from privgraph.evaluate.models.basic import torch_seed
from privgraph.evaluate.models.kprop import LPGNN_KPROP
from privgraph.evaluate.models.sparse import FactoredInput, PropagatedInput, quiet_sparse_beta
from privgraph.evaluate.sparsity import SPARSE_DENSITY
from privgraph.evaluate.training_args import check_choice
from privgraph.seeding import as_seed_sequence, stage_seed

__all__ = ["EDGE_SETS", "FACTOR_TOLERANCE", "InputCache", "ModelInputs", "PROPAGATION_COST_SHARE", "principal_basis"]

#: the edge sets a model can be trained over; "none" is the feature-only floor
EDGE_SETS = ("all", "public", "private", "none")


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
    if x.numel() and torch.count_nonzero(x).item() <= SPARSE_DENSITY * x.numel():
        with quiet_sparse_beta():
            return x.to_sparse_csr()
    return x - x.mean(dim=0, keepdim=True)


#: the relative error (Frobenius norm) within which a smooth dense input is trained through its
#: low-rank factors (:func:`_factored_input`)
FACTOR_TOLERANCE = 1e-4


def _factored_input(x: torch.Tensor, raw: torch.Tensor | None, center: torch.Tensor) -> torch.Tensor | FactoredInput:
    """The centred dense model input ``x`` in a form whose first-layer product is cheaper
    (:class:`~privgraph.evaluate.models.sparse.FactoredInput`), else ``x`` itself.

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
    if torch.count_nonzero(raw != m).item() > SPARSE_DENSITY * raw.numel():
        return None
    with quiet_sparse_beta():
        return _OneValueForm(m, (raw - m).to_sparse_csr())


#: the propagated input (:class:`~privgraph.evaluate.models.sparse.PropagatedInput`) is used where its
#: product costs at most this fraction of the dense product's multiply-adds: a CSR product of
#: 64-128 columns does 10-35 times fewer per second than a dense one on a CPU (measured on Cora,
#: docs/evaluation-cost.md)
PROPAGATION_COST_SHARE = 1 / 24


def _propagated_input(x: torch.Tensor, edge_index: torch.Tensor, steps: int) -> PropagatedInput | None:
    """KProp's ``steps`` over features ``x`` that are one value ``m != 0`` almost everywhere (a
    Piecewise or FeatureRR release), centred, as :class:`~privgraph.evaluate.models.sparse.PropagatedInput`
    ``P^K (CSR(x - m) + m) - 1 c^T``, ``c`` the column mean of ``P^K x``
    (``(P^T)^K 1`` weighting ``x``'s rows); None where that is not cheaper than the dense
    input (:data:`PROPAGATION_COST_SHARE`) or ``x`` has no such form. Exact up to float summation order."""
    form = _one_value_form(x)
    if form is None or form.mode == 0.0:
        return None
    n, d = x.shape
    with torch.enable_grad():  # the operator's transpose serves the backward
        op, op_t = KProp(steps, **LPGNN_KPROP).operator(edge_index, n, x.dtype)
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


@dataclasses.dataclass
class ModelInputs:
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
) -> ModelInputs:
    check_choice(edges, "edges", EDGE_SETS)
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
            return ModelInputs(graph, data, edge_index, propagated, propagated.center, None, {**model_kwargs, "input_dropout": False})
    raw = KProp(kprop_features, **LPGNN_KPROP)(data.x.to(dev), edge_index) if kprop_features else data.x.to(dev)
    x = _model_input(raw) if kprop_features else _model_input(data.x).to(dev)
    if model == "gap":
        x = data.x.to(dev)  # unit rows already: no centring
    projection = None
    if feature_dim is not None and x.layout == torch.strided and x.shape[1] > feature_dim:
        g_proj = torch.Generator(device=dev)
        g_proj.manual_seed(torch_seed(stage_seed(as_seed_sequence(seed), "feature_projection")))
        projection = principal_basis(x, int(feature_dim), g_proj)
        x = x @ projection
    center = None if x.layout == torch.sparse_csr else raw.mean(dim=0).detach()
    if model != "gap":  # GAP's module keeps its own dropout over the aggregates
        model_kwargs["input_dropout"] = x.layout != torch.strided
        if x.layout == torch.strided and projection is None:
            x = _factored_input(x, None if kprop_features else raw, center)
    return ModelInputs(graph, data, edge_index, x, center, projection, model_kwargs)


class InputCache:
    """The model inputs of ONE graph (its PyG data and KProp'd, centred or projected features),
    each prepared once and shared by every training over that graph object with the same input
    arguments: the members of an ensemble, the runs and candidates of an evaluation. Preparing
    is deterministic (a projection's seed is part of the key), so a cached input equals a fresh one."""

    def __init__(self) -> None:
        self._graph: GraphData | None = None
        self._inputs: dict[tuple[Any, ...], ModelInputs] = {}

    def get(self, graph: GraphData, prepare: dict[str, Any]) -> ModelInputs:
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
