"""KProp: LPGNN's parameter-free K-step neighbourhood aggregation (feature and label denoising)."""

from __future__ import annotations

import numbers
from typing import Any

import torch
from torch import Tensor
from torch.nn import Module
from torch_geometric.utils import add_remaining_self_loops, remove_self_loops, scatter

from privgraph.evaluate.models.basic import check_normalize
from privgraph.evaluate.models.sparse import FixedSpMM, cached_pair, propagation_pair

__all__ = ["LPGNN_KPROP", "KProp", "kprop_operator"]

#: LPGNN's KProp operator, ``KProp(steps, **LPGNN_KPROP)`` (the authors' code: KProp(aggregator="add",
#: normalize=True, add_self_loops=False)): symmetric normalisation, the node itself excluded
LPGNN_KPROP = {"aggr": "gcn", "self_loops": False}


def _check_steps(steps: Any) -> int:
    if isinstance(steps, bool) or not isinstance(steps, numbers.Integral) or int(steps) < 0:
        raise ValueError(f"KProp: steps must be an int >= 0, got {steps!r}")
    return int(steps)


def kprop_operator(
    edge_index: Tensor,
    num_nodes: int,
    *,
    aggr: str = "mean",
    self_loops: bool = False,
    dtype: torch.dtype = torch.float32,
) -> tuple[Tensor, Tensor | None]:
    r"""One KProp step as sparse CSR matrices: ``(P, P^T)``, both ``[n, n]``, row = target.

    ``self_loops=False``: existing self-loops are removed and a node :math:`v` aggregates over
    its neighbours :math:`\mathcal{N}(v)`; a node without any neighbour gets a self-loop (it
    keeps its own value: an empty mean would erase it). ``self_loops=True``: every node
    aggregates over :math:`\mathcal{N}(v) \cup \{v\}` (an existing self-loop counted once).
    With :math:`\tilde{\mathcal{N}}(v)` the resulting neighbourhood and
    :math:`\tilde{d}_v = |\tilde{\mathcal{N}}(v)|`, the weight of
    :math:`u \in \tilde{\mathcal{N}}(v)` is :math:`1/\tilde{d}_v` (``aggr="mean"``) or
    :math:`1/\sqrt{\tilde{d}_u \tilde{d}_v}` (``aggr="gcn"``). Degrees count the edges into a
    node (``edge_index[1]``); pass both directions of every undirected edge.
    """
    aggr = check_normalize(aggr, "KProp")
    if self_loops:
        ei, _ = add_remaining_self_loops(edge_index, num_nodes=num_nodes)
    else:
        ei, _ = remove_self_loops(edge_index)
        ones = torch.ones(ei.size(1), device=ei.device)
        deg = scatter(ones, ei[1], dim=0, dim_size=num_nodes, reduce="sum")
        lonely = torch.nonzero(deg == 0).view(-1)
        ei = torch.cat([ei, lonely.unsqueeze(0).repeat(2, 1)], dim=1)
    ones = torch.ones(ei.size(1), device=ei.device, dtype=torch.float64)
    deg = scatter(ones, ei[1], dim=0, dim_size=num_nodes, reduce="sum")
    if aggr == "mean":
        w = deg.reciprocal()[ei[1]]
    else:
        inv_sqrt = deg.rsqrt()
        w = inv_sqrt[ei[0]] * inv_sqrt[ei[1]]
    w = w.to(dtype)
    return propagation_pair(ei, w, num_nodes)


class KProp(Module):
    r"""LPGNN's KProp: :math:`K` linear neighbourhood aggregations, no weights, no non-linearity.

    From `Sajadmanesh & Gatica-Perez, "Locally Private Graph Neural Networks" (ACM CCS 2021)
    <https://arxiv.org/abs/2006.05535>`_ (talk slides: paper 003): "applies :math:`K`
    consecutive linear AGGREGATE functions, no non-linearity in between", prepended to a GNN.
    Averaging over the :math:`K`-hop neighbourhood cancels the zero-mean noise of locally
    privatized features (multi-bit rectifier) and, applied to one-hot noisy labels, recovers
    labels by a neighbourhood vote (LPGNN's label denoising):

    .. math::
        \mathbf{X}^{(K)} = \mathbf{P}^{K} \mathbf{X}, \qquad
        \mathbf{P} = \mathbf{D}^{-1} \mathbf{A} \ (\texttt{aggr="mean"}) \quad\text{or}\quad
        \mathbf{D}^{-1/2} \mathbf{A} \mathbf{D}^{-1/2} \ (\texttt{aggr="gcn"}),

    node-wise, for ``aggr="mean"``:

    .. math::
        \mathbf{x}^{(k)}_v = \frac{1}{|\mathcal{N}(v)|}
        \sum_{u \in \mathcal{N}(v)} \mathbf{x}^{(k-1)}_u, \qquad
        \mathbf{x}^{(0)}_v = \mathbf{x}_v,

    and for ``aggr="gcn"`` the weight of :math:`u` is :math:`1/\sqrt{d_u d_v}` (the operator of
    the authors' code, which :mod:`privgraph.evaluate.training` uses). By default the node itself is
    excluded, as in LPGNN (it re-enters through paths of two or more steps);
    ``self_loops=True`` aggregates over :math:`\mathcal{N}(v) \cup \{v\}`
    (:math:`\mathbf{A} + \mathbf{I}`, degrees + 1). A node without neighbours keeps its value.
    :math:`K = 0` is the identity.

    The operator is linear, :math:`\mathbf{P}(\mathbf{X}\mathbf{W}) = (\mathbf{P}\mathbf{X})
    \mathbf{W}`, and differentiable: :mod:`privgraph.evaluate.training` also applies it to the GNN's
    predicted class probabilities (LPGNN's Drop). With ``aggr="mean"`` (row-stochastic
    :math:`\mathbf{P}`) probability rows stay probability rows and constant columns stay
    constant.

    Args:
        steps (int): :math:`K \ge 0`, the number of aggregation steps.
        aggr (str, optional): ``"mean"`` or ``"gcn"`` (default: ``"mean"``).
        self_loops (bool, optional): include the node itself in its aggregation
            (default: ``False``).
        cached (bool, optional): build :math:`\mathbf{P}` (sparse CSR) on the first call and reuse
            it while the same ``edge_index`` object is passed (default: ``False``).

    Shapes:
        - **input:** node features :math:`(|\mathcal{V}|, F)` (dense, or sparse: densified),
          edge indices :math:`(2, |\mathcal{E}|)` with both directions of each undirected edge
        - **output:** dense node features :math:`(|\mathcal{V}|, F)`

    Runtime:
        :math:`O(K |\mathcal{E}| F)`: :math:`K` sparse-dense products, never a dense
        :math:`n \times n` matrix.
    """

    def __init__(
        self, steps: int, *, aggr: str = "mean", self_loops: bool = False, cached: bool = False
    ) -> None:
        super().__init__()
        self.steps = _check_steps(steps)
        self.aggr = check_normalize(aggr, "KProp")
        if not isinstance(self_loops, bool):
            raise ValueError(f"KProp: self_loops must be a bool, got {self_loops!r}")
        self.self_loops = self_loops
        self.cached = bool(cached)
        self._cache: tuple[Tensor, Tensor, Tensor | None] | None = None  # (edge_index, P, P^T)

    def reset_parameters(self) -> None:
        """No parameters; drops the cached operator."""
        self._cache = None

    def operator(
        self, edge_index: Tensor, num_nodes: int, dtype: torch.dtype
    ) -> tuple[Tensor, Tensor | None]:
        """``(P, P^T)`` for ``edge_index`` (from the cache when ``cached``)."""
        hit = cached_pair(self._cache, edge_index, num_nodes, dtype)
        if hit is not None:
            return hit
        op, op_t = kprop_operator(
            edge_index, num_nodes, aggr=self.aggr, self_loops=self.self_loops, dtype=dtype
        )
        if self.cached:
            self._cache = (edge_index, op, op_t)
        return op, op_t

    def forward(self, x: Tensor, edge_index: Tensor) -> Tensor:
        if self.steps == 0:
            return x
        if x.layout != torch.strided:
            x = x.to_dense()
        if not x.is_floating_point():
            raise ValueError(f"KProp: x must be floating point, got {x.dtype}")
        op, op_t = self.operator(edge_index, x.size(0), x.dtype)
        track = torch.is_grad_enabled() and x.requires_grad
        for _ in range(self.steps):
            # the custom product reuses P^T in the backward instead of transposing P each call
            x = FixedSpMM.apply(x, op, op_t) if track else op @ x
        return x

    def __repr__(self) -> str:
        return (
            f"{self.__class__.__name__}({self.steps}, aggr={self.aggr!r}, "
            f"self_loops={self.self_loops})"
        )
