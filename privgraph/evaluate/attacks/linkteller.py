r"""LinkTeller: edge re-identification by influence analysis (Wu et al., IEEE S&P 2022, Alg. 1).

The adversary holds the node features and can query a node-classification API that runs a GNN
over a graph it keeps secret. For each node :math:`u` it queries the API twice: with the features
as they are, and with :math:`u`'s row scaled by :math:`1 + \Delta`. The influence of :math:`u` on
every node is the finite difference

.. math::
    \mathbf{I}_u = \frac{f(\mathbf{X}') - f(\mathbf{X})}{\Delta}, \qquad
    \mathbf{X}' = \mathbf{X} \text{ with } \mathbf{x}_u \leftarrow (1 + \Delta)\, \mathbf{x}_u,

and a pair :math:`(u, v)` scores :math:`\lVert \mathbf{I}_u[v] \rVert_2`: a GNN's output at
:math:`v` moves with :math:`u` only when :math:`u` is in :math:`v`'s receptive field, most of all
when they are adjacent. The API answers class posteriors (softmax) in float64, so that a small
:math:`\Delta` (default :math:`10^{-4}`, the authors' choice) is above rounding.

Settings (the paper's): *transductive*, the API serves the graph the model was trained on;
*inductive*, it serves another graph (``x``, ``edge_index``) with the trained weights. Cost: one
query per distinct queried node (the first node of each pair), independent of how many pairs
share a node. A GCN's query is answered from the rows the perturbation reaches
(:class:`_LocalGCN`: O(rows within its layers' hops of ``u``), after one full forward pass); other
models (or KProp on the features) run one forward pass per query.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import scipy.sparse as sp
import torch

from privgraph.evaluate.attacks.pairs import PairSample
from privgraph.evaluate.attacks.scoring import AttackResult, score_attack
from privgraph.errors import GraphValidationError
from privgraph.evaluate.models import GCN
from privgraph.evaluate.training import TrainedClassifier

__all__ = ["linkteller_scores", "linkteller"]


def linkteller_scores(
    model: TrainedClassifier,
    pairs: np.ndarray,
    *,
    delta: float = 1e-4,
    x: np.ndarray | torch.Tensor | None = None,
    edge_index: np.ndarray | torch.Tensor | None = None,
    progress: Callable[[int, int], None] | None = None,
    reuse_input: bool = True,
    local: bool = True,
) -> np.ndarray:
    """The influence score of each pair (columns of ``pairs``, ``[2, m]``), querying node
    ``pairs[0, j]``; ``x``/``edge_index``: the graph the API serves (default: the training graph,
    the transductive setting). ``progress(k, N)`` is called after each query.

    ``reuse_input``: answer each query by scaling row ``u`` of the model's prepared input in place
    (exact when the input transform is row-wise, i.e. without KProp on the features) instead of
    preparing the whole perturbed matrix again (``False``: the reference path, 3-4x slower on Cora).
    ``local`` (with ``reuse_input``, for a :class:`~privgraph.evaluate.models.GCN`): answer each query from
    the rows its perturbation reaches (:class:`_LocalGCN`, O(neighbourhood) instead of one forward
    pass over every edge; the same scores to float64 rounding)."""
    if not (isinstance(delta, float) and 0 < delta <= 0.1):
        raise ValueError(f"linkteller: delta must be a float in (0, 0.1], got {delta!r}")
    pairs = np.asarray(pairs)
    if pairs.ndim != 2 or pairs.shape[0] != 2 or pairs.shape[1] == 0:
        raise GraphValidationError(f"linkteller: pairs must be a non-empty [2, m] array, got shape {list(pairs.shape)}")
    feats = model.x if x is None else torch.as_tensor(x)
    feats = feats.to(torch.float64).clone()
    n = feats.shape[0]
    if pairs.min() < 0 or pairs.max() >= n:
        raise GraphValidationError(f"linkteller: pair ids must be in [0, {n}), got [{pairs.min()}, {pairs.max()}]")
    ei = None if edge_index is None else torch.as_tensor(edge_index)
    inplace = reuse_input and model.kprop_features == 0
    xp = model.prepare(feats, ei)
    fast = _LocalGCN(model, xp, ei) if inplace and local and isinstance(model.net, GCN) else None
    base = model.forward_prepared(xp, ei) if fast is None else None
    order = np.argsort(pairs[0], kind="stable")
    sources, starts = np.unique(pairs[0][order], return_index=True)
    ends = np.append(starts[1:], order.size)
    scores = np.empty(pairs.shape[1])
    for k, (u, a, b) in enumerate(zip(sources.tolist(), starts, ends)):
        if fast is not None:
            cols = order[a:b]
            scores[cols] = fast.influence(u, delta * fast.input_row(u, feats[u]), pairs[1][cols]) / delta
            if progress is not None:
                progress(k + 1, sources.size)
            continue
        if inplace:
            out = _query_scaled_row(model, xp, feats, u, delta, ei)
        else:
            row = feats[u].clone()
            feats[u] = row * (1.0 + delta)
            out = model.query(feats, ei)
            feats[u] = row
        cols = order[a:b]
        v = torch.as_tensor(pairs[1][cols], device=out.device)
        scores[cols] = ((out[v] - base[v]) / delta).norm(dim=1).cpu().numpy()
        if progress is not None:
            progress(k + 1, sources.size)
    return scores


def linkteller(
    model: TrainedClassifier, sample: PairSample, rng: np.random.Generator, *, delta: float = 1e-4,
    setting: str = "transductive", x: np.ndarray | torch.Tensor | None = None,
    edge_index: np.ndarray | torch.Tensor | None = None, progress: Callable[[int, int], None] | None = None,
) -> AttackResult:
    """LinkTeller on ``sample`` (private edges vs non-edges of V_pri): ROC-AUC with a bootstrap
    interval and precision@k (k = #edges: also recall and F1)."""
    if setting not in ("transductive", "inductive"):
        raise ValueError(f"linkteller: setting must be 'transductive' or 'inductive', got {setting!r}")
    if setting == "inductive" and (x is None or edge_index is None):
        raise ValueError("linkteller: the inductive setting needs the served graph's x and edge_index")
    s = linkteller_scores(model, sample.pairs, delta=delta, x=x, edge_index=edge_index, progress=progress)
    return score_attack("linkteller", s, sample.labels, rng, params={"delta": delta, "setting": setting})


def _query_scaled_row(
    model: TrainedClassifier, xp: torch.Tensor, feats: torch.Tensor, u: int, delta: float, ei: torch.Tensor | None
) -> torch.Tensor:
    """The API's answer for ``feats`` with row ``u`` scaled by ``1 + delta``, from the prepared
    input ``xp`` changed in place and restored (CSR: row ``u``'s stored values; dense, centred by a
    fixed mean (and projected): ``delta * x_u`` (projected) added to row ``u``)."""
    if xp.layout == torch.sparse_csr:
        crow, vals = xp.crow_indices(), xp.values()
        a, b = int(crow[u]), int(crow[u + 1])
        saved = vals[a:b].clone()
        vals[a:b] *= 1.0 + delta
        try:
            return model.forward_prepared(xp, ei)
        finally:
            vals[a:b] = saved
    saved = xp[u].clone()
    xp[u] += delta * model.input_row(feats[u])
    try:
        return model.forward_prepared(xp, ei)
    finally:
        xp[u] = saved


class _LocalGCN:
    r"""LinkTeller's queries on a :class:`~privgraph.evaluate.models.GCN` answered locally.

    The GCN (eval mode, float64) computes :math:`A_l = P H_{l-1} W_l^\top + b_l`,
    :math:`H_l = \mathrm{ReLU}(A_l)`, the posteriors :math:`\mathrm{softmax}(A_L)`. Changing row
    ``u`` of the input by :math:`\delta` changes :math:`A_1` only in the rows :math:`r` with
    :math:`P_{ru} \neq 0` (by :math:`P_{ru} \delta W_1^\top`), and each further layer only in the
    rows that read a changed row. So one query costs the rows within ``L`` hops of ``u``, not a
    forward pass over every edge: the influence of ``u`` on ``targets`` is
    :math:`\mathrm{softmax}(A_L + \Delta A_L) - \mathrm{softmax}(A_L)` on those rows. The full
    activations are computed once (on the model's device), the queries on the CPU with scipy.
    """

    def __init__(self, model: TrainedClassifier, xp: torch.Tensor, ei: torch.Tensor | None) -> None:
        net = model._net64()
        edges = model._edges(ei)
        n = xp.shape[0]
        self.model = model
        self.sparse_input = xp.layout == torch.sparse_csr
        self.xp = xp
        self.weights = [conv.weight.detach().cpu().numpy() for conv in net.convs]
        self.pre: list[np.ndarray] = []  # A_l, [n, width_l]
        with torch.no_grad():
            h = xp
            for i, conv in enumerate(net.convs):
                a = conv(h, edges)
                self.pre.append(a.cpu().numpy())
                h = a.relu() if i < len(net.convs) - 1 else a
        op = net.convs[0]._operator(edges, n)[0].cpu()  # P: row v, column u = the weight of u -> v
        crow, col = op.crow_indices().numpy(), op.col_indices().numpy()  # one index dtype: scipy copies none
        self.p = sp.csr_matrix((op.values().numpy(), col, crow.astype(col.dtype)), shape=(n, n))
        self.pt = self.p.T.tocsr()  # row u: the rows r that read u

    def input_row(self, u: int, feats_u: torch.Tensor) -> np.ndarray:
        """Row ``u`` of the prepared input per unit of scale (what scaling ``x_u`` by ``1 + d``
        adds, divided by ``d``): its CSR row, or the transformed dense row."""
        if self.sparse_input:
            crow, col, val = self.xp.crow_indices(), self.xp.col_indices(), self.xp.values()
            a, b = int(crow[u]), int(crow[u + 1])
            row = np.zeros(self.xp.shape[1])
            row[col[a:b].cpu().numpy()] = val[a:b].cpu().numpy()
            return row
        return self.model.input_row(feats_u).cpu().numpy()

    def influence(self, u: int, delta_row: np.ndarray, targets: np.ndarray) -> np.ndarray:
        """The norm of the change of the posteriors of ``targets`` when row ``u`` of the prepared
        input changes by ``delta_row``."""
        a, b = self.pt.indptr[u], self.pt.indptr[u + 1]
        rows, coef = self.pt.indices[a:b], self.pt.data[a:b]  # the rows r that read u, and P[r, u]
        change = delta_row @ self.weights[0].T  # the change of row u of H_0 W_1^T
        last = len(self.weights) - 1
        if last == 0:
            delta_a = np.asarray(self.p[targets][:, [u]] @ change[None, :])
        else:
            delta_a = coef[:, None] * change[None, :]  # the change of A_1 at rows
        for i in range(1, last + 1):
            pre = self.pre[i - 1][rows]
            change = (np.maximum(pre + delta_a, 0.0) - np.maximum(pre, 0.0)) @ self.weights[i].T
            reached = targets if i == last else np.unique(self.pt[rows].indices)
            delta_a = np.asarray(self.p[reached][:, rows] @ change)
            rows = reached
        z = self.pre[last][targets]
        return np.linalg.norm(_softmax(z + delta_a) - _softmax(z), axis=1)


def _softmax(z: np.ndarray) -> np.ndarray:
    e = np.exp(z - z.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)
