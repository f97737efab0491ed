"""The GCN used by privgraph's utility evaluation: average ("mean") or symmetric aggregation.

Every parameter and every dropout mask is drawn from an explicit :class:`torch.Generator`:
building, initialising or training a :class:`GCN` never reads or advances torch's global random
state.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor
from torch.nn import ModuleList, Parameter
from torch_geometric.nn.conv import MessagePassing
from torch_geometric.nn.conv.gcn_conv import gcn_norm
from torch_geometric.utils import add_remaining_self_loops, scatter

from privgraph.evaluate.models.basic import (
    NodeGNN,
    check_generator,
    check_normalize,
    check_positive_int,
    fresh_generator,
    register_model,
)
from privgraph.evaluate.models.sparse import (
    FixedSpMM,
    StructuredInput,
    cached_pair,
    propagation_pair,
    sparse_csr_transpose,
)

__all__ = ["GCN", "GraphConvolution"]


def _propagation_weights(
    edge_index: Tensor, num_nodes: int, normalize: str
) -> tuple[Tensor, Tensor]:
    r"""Edges ``[2, m']`` with one self-loop per node and their propagation weights ``[m']``.

    ``normalize="mean"``: :math:`w_{uv} = 1 / \hat{d}_v` (the mean over :math:`v`'s closed
    neighbourhood); ``"gcn"``: :math:`w_{uv} = 1 / \sqrt{\hat{d}_u \hat{d}_v}` (Kipf & Welling;
    :func:`torch_geometric.nn.conv.gcn_conv.gcn_norm`). :math:`\hat{d}_v` counts the edges into
    ``v`` (``edge_index[1] == v``) plus its self-loop.
    """
    normalize = check_normalize(normalize, "GraphConvolution")
    if normalize == "gcn":
        ei, w = gcn_norm(edge_index, None, num_nodes, add_self_loops=True)
        return ei, w
    ei, _ = add_remaining_self_loops(edge_index, num_nodes=num_nodes)
    ones = torch.ones(ei.size(1), device=ei.device)
    deg = scatter(ones, ei[1], dim=0, dim_size=num_nodes, reduce="sum")
    return ei, deg.reciprocal()[ei[1]]


class GraphConvolution(MessagePassing):
    r"""The graph convolution of the GCN, with average or symmetric neighbourhood normalisation.

    From `Kipf & Welling, "Semi-Supervised Classification with Graph Convolutional Networks"
    (ICLR 2017) <https://arxiv.org/abs/1609.02907>`_:

    .. math::
        \mathbf{X}^{\prime} = \mathbf{P} \mathbf{X} \mathbf{\Theta}^{\top} + \mathbf{b},
        \qquad \mathbf{\hat{A}} = \mathbf{A} + \mathbf{I},

    where :math:`\hat{D}_{ii} = \sum_{j} \hat{A}_{ij}` and the propagation matrix
    :math:`\mathbf{P}` is, with ``normalize="mean"`` (the default), the row-normalised
    :math:`\mathbf{\hat{D}}^{-1} \mathbf{\hat{A}}`: the "average aggregation function for each
    layer" with which the HeteroRR paper (Section V-a) trains its GCNs. Node-wise:

    .. math::
        \mathbf{x}^{\prime}_v = \mathbf{\Theta} \, \frac{1}{|\mathcal{N}(v)| + 1}
        \sum_{u \in \mathcal{N}(v) \cup \{ v \}} \mathbf{x}_u + \mathbf{b}.

    With ``normalize="gcn"`` it is Kipf & Welling's symmetric
    :math:`\mathbf{\hat{D}}^{-1/2} \mathbf{\hat{A}} \mathbf{\hat{D}}^{-1/2}`, the same layer as
    :class:`torch_geometric.nn.GCNConv`:

    .. math::
        \mathbf{x}^{\prime}_v = \mathbf{\Theta} \sum_{u \in \mathcal{N}(v) \cup \{ v \}}
        \frac{1}{\sqrt{\hat{d}_u \hat{d}_v}} \mathbf{x}_u + \mathbf{b},
        \qquad \hat{d}_v = |\mathcal{N}(v)| + 1.

    :math:`\mathcal{N}(v)` are the sources of the edges into :math:`v`, :math:`\mathbf{\Theta}`
    the weight (:attr:`weight`, ``[out_channels, in_channels]``, Glorot-uniform) and
    :math:`\mathbf{b}` the bias (zero at initialisation). The linear map is applied before
    aggregating (the two commute), which is cheaper when ``out_channels < in_channels``.

    Args:
        in_channels (int): size of each input sample :math:`F`.
        out_channels (int): size of each output sample :math:`F'`.
        normalize (str, optional): ``"mean"`` or ``"gcn"`` (default: ``"mean"``).
        bias (bool, optional): learn an additive bias (default: ``True``).
        cached (bool, optional): build :math:`\mathbf{P}` as a sparse matrix on the first call and
            reuse it while the same ``edge_index`` tensor object is passed (transductive training);
            several times faster than scattering messages on every call. Also keeps the transposed
            structure of sparse CSR features (checked for equality on every call)
            (default: ``False``).
        generator (torch.Generator, optional): generator of the initial parameters; ``None``
            draws a fresh one from OS entropy (default: ``None``).

    Shapes:
        - **input:** node features :math:`(|\mathcal{V}|, F)` (dense, or sparse CSR/COO), edge
          indices :math:`(2, |\mathcal{E}|)` (both directions of an undirected edge; existing
          self-loops are kept once)
        - **output:** node features :math:`(|\mathcal{V}|, F')`
    """

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        *,
        normalize: str = "mean",
        bias: bool = True,
        cached: bool = False,
        generator: torch.Generator | None = None,
    ) -> None:
        super().__init__(aggr="add")
        self.in_channels = check_positive_int(in_channels, "in_channels", "GraphConvolution")
        self.out_channels = check_positive_int(out_channels, "out_channels", "GraphConvolution")
        self.normalize = check_normalize(normalize, "GraphConvolution")
        self.cached = bool(cached)
        self._cache: tuple[Tensor, Tensor, Tensor | None] | None = None  # (edge_index, P, P^T)
        self._x_cache: tuple[Tensor, Tensor, Tensor, Tensor] | None = None  # CSR x's transpose
        # torch.empty, not torch.nn.Linear: Linear initialises itself from the global RNG
        self.weight = Parameter(torch.empty(self.out_channels, self.in_channels))
        if bias:
            self.bias = Parameter(torch.empty(self.out_channels))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters(generator)

    def reset_parameters(self, generator: torch.Generator | None = None) -> None:
        """Glorot-uniform weight (as Kipf & Welling), zero bias, drawn from ``generator``."""
        super().reset_parameters()
        self._cache = self._x_cache = None
        g = fresh_generator(self.weight.device) if generator is None else generator
        check_generator(g, self.weight, "GraphConvolution")
        with torch.no_grad():
            torch.nn.init.xavier_uniform_(self.weight, generator=g)
            if self.bias is not None:
                self.bias.zero_()

    def _operator(self, edge_index: Tensor, num_nodes: int) -> tuple[Tensor, Tensor | None]:
        hit = cached_pair(self._cache, edge_index, num_nodes)
        if hit is not None:
            return hit
        ei, w = _propagation_weights(edge_index, num_nodes, self.normalize)
        w = w.to(self.weight.dtype)
        # row = target: (P h)_v = sum_u w_uv h_u
        op, op_t = propagation_pair(ei, w, num_nodes)
        self._cache = (edge_index, op, op_t)
        return op, op_t

    def _sparse_transpose(self, x: Tensor) -> Tensor:
        """``x.t()`` as CSR; with ``cached``, the sparsity structure is transposed only once."""
        t, c = sparse_csr_transpose(x, self._x_cache)
        if self.cached:
            self._x_cache = c
        return t

    def forward(self, x: Tensor, edge_index: Tensor) -> Tensor:
        n = x.size(0)
        if isinstance(x, StructuredInput):
            h = x.linear(self.weight)
        elif x.layout == torch.sparse_csr and torch.is_grad_enabled() and not x.requires_grad:
            # torch's backward of a CSR product re-transposes x every call; do it once
            h = FixedSpMM.apply(self.weight.t(), x, self._sparse_transpose(x))
        else:
            h = x @ self.weight.t()
        if self.cached:
            op, op_t = self._operator(edge_index, n)
            out = FixedSpMM.apply(h, op, op_t)
        else:
            ei, w = _propagation_weights(edge_index, n, self.normalize)
            out = self.propagate(ei, x=h, edge_weight=w.to(h.dtype), size=(n, n))
        if self.bias is not None:
            out = out + self.bias
        return out

    def message(self, x_j: Tensor, edge_weight: Tensor) -> Tensor:
        return edge_weight.view(-1, 1) * x_j

    def __repr__(self) -> str:
        return (
            f"{self.__class__.__name__}({self.in_channels}, {self.out_channels}, "
            f"normalize={self.normalize!r})"
        )


@register_model("gcn", what="GCN", aggrs=("mean", "gcn"), aggregates="aggregates by mean or symmetric normalisation")
class GCN(NodeGNN):
    r"""A multi-layer graph convolutional network for node classification.

    The GCN of `Kipf & Welling (ICLR 2017) <https://arxiv.org/abs/1609.02907>`_: ``num_layers``
    :class:`GraphConvolution` layers, ReLU between them, dropout before each. With
    ``aggr="mean"`` (the default) each layer averages over the closed neighbourhood, as the
    HeteroRR paper's GCNs do ("an average aggregation function for each layer", Section V-a):

    .. math::
        \mathbf{x}^{\prime}_v = \mathbf{\Theta} \, \frac{1}{|\mathcal{N}(v)| + 1}
        \sum_{u \in \mathcal{N}(v) \cup \{ v \}} \mathbf{x}_u + \mathbf{b};

    with ``aggr="gcn"`` each layer is Kipf & Welling's symmetric normalisation (the layer of
    :class:`torch_geometric.nn.GCNConv`):

    .. math::
        \mathbf{x}^{\prime}_v = \mathbf{\Theta} \sum_{u \in \mathcal{N}(v) \cup \{ v \}}
        \frac{1}{\sqrt{\hat{d}_u \hat{d}_v}} \mathbf{x}_u + \mathbf{b},
        \qquad \hat{d}_v = |\mathcal{N}(v)| + 1.

    Parameters are Glorot-uniform with zero biases, drawn from an explicit generator
    (:meth:`reset_parameters`); dropout is :class:`GeneratorDropout`, whose masks come from the
    generator passed to :meth:`forward`. Nothing here reads torch's global random state.

    Args: as :class:`NodeGNN`; ``aggr``: ``"mean"`` (average aggregation, the default) or
    ``"gcn"`` (symmetric normalisation); ``cached``: cache each layer's propagation matrix (see
    :class:`GraphConvolution`).
    """

    def _check_aggr(self, aggr: Any) -> str:
        return check_normalize(aggr, "GCN")

    def _build(self, generator: torch.Generator) -> None:
        dims = self.dims
        # one generator for all layers, drawn in layer order: the same order as reset_parameters
        self.convs = ModuleList(
            GraphConvolution(i, o, normalize=self.aggr, cached=self.cached, generator=generator)
            for i, o in zip(dims[:-1], dims[1:])
        )

    def reset_parameters(self, generator: torch.Generator | None = None) -> None:
        """Re-draw every parameter from ``generator`` (on the parameters' device).

        ``None`` draws from a fresh generator seeded with OS entropy. The layers draw in order,
        so the same generator state gives the same parameters as the constructor does.
        """
        g = fresh_generator(self.convs[0].weight.device) if generator is None else generator
        for conv in self.convs:
            conv.reset_parameters(g)

    def propagation(self, edge_index: Tensor, num_nodes: int) -> Tensor:
        """The edges: each :class:`GraphConvolution` builds (and caches) its own operator."""
        return edge_index

    def layer(self, i: int, x: Tensor, propagation: Tensor,
              generator: torch.Generator | None = None) -> Tensor:
        return self.convs[i](x, propagation)


