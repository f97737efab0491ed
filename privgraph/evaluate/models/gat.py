"""GAT (graph attention network) for privgraph's utility evaluation, with generator-drawn
parameters.

Like :class:`~privgraph.evaluate.models.GraphSAGE`, building, initialising or training a :class:`GAT` never
reads or advances torch's global random state: the layers are
:class:`torch_geometric.nn.GATConv` modules created on the ``meta`` device (PyG's own
initialisation then draws nothing) and initialised from an explicit :class:`torch.Generator`;
the attention dropout, when asked for, draws its masks from the generator passed to
:meth:`GAT.forward` (``GATConv``'s own ``dropout`` argument would draw from the global random
state, so the layers keep it at 0).
"""

from __future__ import annotations

import math
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor
from torch.nn import ModuleList
from torch_geometric.nn import GATConv
from torch_geometric.utils import add_self_loops, remove_self_loops, scatter, softmax

from privgraph.evaluate.models.basic import (GeneratorDropout, NodeGNN, check_generator, check_positive_int, fresh_generator,
                                             register_model)
from privgraph.evaluate.models.sparse import sparse_aware_linear

__all__ = ["GAT"]


def _check_attention_mean(aggr: Any) -> str:
    if aggr != "mean":
        raise ValueError(
            f"GAT: aggregation must be 'mean' (the attention-weighted mean), got {aggr!r}; for "
            "symmetric normalisation use the GCN (model 'gcn', aggr 'gcn')"
        )
    return "mean"


@register_model("gat", what="GAT (8 attention heads; hidden a multiple of 8)", aggrs=("mean",),
                aggregates="aggregates by attention-weighted mean", hidden_multiple=8)
class GAT(NodeGNN):
    r"""A multi-layer graph attention network for node classification.

    From `Veličković et al., "Graph Attention Networks" (ICLR 2018)
    <https://arxiv.org/abs/1710.10903>`_: ``num_layers`` :class:`torch_geometric.nn.GATConv`
    layers, ELU between them, dropout before each. Each hidden layer has :math:`K` = ``heads``
    attention heads whose outputs are concatenated (the paper's Eq. 5); the output layer has one
    head (``concat=False``). Head :math:`k` of a layer computes (Eqs. 1-4)

    .. math::
        \alpha^{k}_{vu} = \operatorname{softmax}_{u \in \mathcal{N}(v) \cup \{v\}} \Big(
        \mathrm{LeakyReLU}_{0.2}\big(\mathbf{a}^{k\top}_{s} \mathbf{W}^{k} \mathbf{x}_u
        + \mathbf{a}^{k\top}_{t} \mathbf{W}^{k} \mathbf{x}_v\big)\Big),
        \qquad
        \mathbf{x}^{\prime k}_v = \sum_{u \in \mathcal{N}(v) \cup \{v\}} \alpha^{k}_{vu}
        \mathbf{W}^{k} \mathbf{x}_u,

    an attention-weighted mean over the closed neighbourhood (hence ``aggr="mean"``), and the
    layer outputs :math:`\Vert_{k=1}^{K} \mathbf{x}^{\prime k}_v + \mathbf{b}`.
    :math:`\mathcal{N}(v)` are the sources of the edges into :math:`v`; as ``GATConv`` does
    (``add_self_loops=True``), existing self-loops are dropped and one is added per node, so
    over a graph without edges the network is a per-node MLP (the feature-only floor).
    :math:`[\mathbf{a}_s \Vert \mathbf{a}_t]` is the paper's attention vector :math:`\mathbf{a}`
    (``att_src``, ``att_dst``).

    Width: ``hidden_channels`` is the width of a hidden layer's OUTPUT, split over the heads:
    each head has ``hidden_channels // heads`` channels (``hidden_channels`` must be a multiple of
    ``heads``), so a GAT and a GCN with the same ``hidden_channels`` have hidden representations
    of the same size. The default 64 with 8 heads is the paper's Cora model (8 heads of 8
    features). (PyG's ``GATConv(out_channels=C, heads=K)`` outputs :math:`KC` channels: here
    :math:`C` = ``hidden_channels // heads``.)

    The computation is written out over the layers' parameters (the linear map taken first,
    with a sparse product for sparse CSR/COO input); it equals ``GATConv.forward`` (checked in
    the tests). Initialisation is PyG's: :math:`\mathbf{W}` and the attention vectors
    Glorot-uniform, zero bias, drawn from an explicit generator (:meth:`reset_parameters`).
    Dropout (of the layer inputs, and of the attention coefficients with
    ``attention_dropout > 0``; the paper uses 0.6 for both) is
    :class:`~privgraph.evaluate.models.GeneratorDropout`: its masks come from the generator passed to
    :meth:`forward`.

    The constructor and :meth:`forward` take the same arguments as :class:`~privgraph.evaluate.models.GCN`,
    so that the two can be swapped by name.

    Args: as :class:`~privgraph.evaluate.models.basic.NodeGNN` (``hidden_channels``: each hidden layer's
    output, all heads together, a multiple of ``heads``); ``aggr``: ``"mean"`` only (the
    attention-weighted mean; the argument exists so that the GCN's keywords are accepted);
    ``cached`` keeps ``edge_index`` with its self-loops; and
        heads (int, optional): attention heads :math:`K` of each hidden layer (default: ``8``).
        attention_dropout (float, optional): dropout probability of the normalised attention
            coefficients in training mode, in :math:`[0, 1)` (default: ``0.0``).
    """

    #: attention dropout draws in the first layer too: nothing to share between the modes
    deterministic_first_layer = False

    def _check_aggr(self, aggr: Any) -> str:
        return _check_attention_mean(aggr)

    def _build(self, generator: torch.Generator, heads: int = 8, attention_dropout: float = 0.0) -> None:
        self.heads = check_positive_int(heads, "heads", "GAT")
        if self.num_layers > 1 and self.hidden_channels % self.heads:
            raise ValueError(
                f"GAT: hidden_channels ({self.hidden_channels}) must be a multiple of heads "
                f"({self.heads}): each head has hidden_channels // heads channels"
            )
        self.attention_dropout = GeneratorDropout(attention_dropout)
        per_head = self.hidden_channels // self.heads
        # (in, out per head, heads, concat): hidden layers concatenate, the output layer 1 head
        dims = self.dims[:-1]
        specs = [(d, per_head, self.heads, True) for d in dims[:-1]]
        specs.append((dims[-1], self.out_channels, 1, False))
        # on the meta device GATConv's own reset_parameters draws nothing from the global RNG;
        # dropout=0: GATConv's attention dropout would draw from the global RNG
        with torch.device("meta"):
            convs = [
                GATConv(i, o, heads=h, concat=c, dropout=0.0, add_self_loops=True)
                for i, o, h, c in specs
            ]
        self.convs = ModuleList(convs).to_empty(device="cpu")
        self.reset_parameters(generator)

    def reset_parameters(self, generator: torch.Generator | None = None) -> None:
        """Re-draw every parameter from ``generator`` (on the parameters' device).

        Per layer, in order (PyG's initialisation of ``GATConv``): ``lin.weight``
        ``[K C', F]`` Glorot-uniform :math:`\\mathcal{U}(\\pm\\sqrt{6 / (F + K C')})`, ``att_src``
        and ``att_dst`` ``[1, K, C']`` Glorot-uniform as PyG computes it for them,
        :math:`\\mathcal{U}(\\pm\\sqrt{6 / (K + C')})`, and a zero ``bias``. ``None`` draws from
        a fresh generator seeded with OS entropy.
        """
        self._cache = self._x_cache = None
        w0 = self.convs[0].lin.weight
        g = fresh_generator(w0.device) if generator is None else generator
        check_generator(g, w0, "GAT")
        with torch.no_grad():
            for conv in self.convs:
                for p in (conv.lin.weight, conv.att_src, conv.att_dst):
                    bound = math.sqrt(6.0 / (p.size(-2) + p.size(-1)))
                    torch.nn.init.uniform_(p, -bound, bound, generator=g)
                conv.bias.zero_()

    def _edges(self, edge_index: Tensor, num_nodes: int) -> Tensor:
        """``edge_index`` without its self-loops and with one per node (as ``GATConv``)."""
        c = self._cache
        if c is not None and c[0] is edge_index and c[1] == num_nodes:
            return c[2]
        ei, _ = remove_self_loops(edge_index)
        ei, _ = add_self_loops(ei, num_nodes=num_nodes)
        if self.cached:
            self._cache = (edge_index, num_nodes, ei)
        return ei

    def propagation(self, edge_index: Tensor, num_nodes: int) -> Tensor:
        """The edges every layer attends over: :meth:`_edges`."""
        return self._edges(edge_index, num_nodes)

    def layer(self, i: int, x: Tensor, propagation: Tensor,
              generator: torch.Generator | None = None) -> Tensor:
        conv, n, src, dst = self.convs[i], x.size(0), propagation[0], propagation[1]
        h_, c_ = conv.heads, conv.out_channels
        h = sparse_aware_linear(self, x, conv.lin.weight).view(n, h_, c_)  # W x, per head
        score = (h * conv.att_src).sum(dim=-1)[src] + (h * conv.att_dst).sum(dim=-1)[dst]
        alpha = softmax(F.leaky_relu(score, conv.negative_slope), dst, num_nodes=n)
        alpha = self.attention_dropout(alpha, generator)  # [edges, heads]
        out = scatter(alpha.unsqueeze(-1) * h[src], dst, dim=0, dim_size=n, reduce="sum")
        out = out.reshape(n, h_ * c_) if conv.concat else out.mean(dim=1)
        return out + conv.bias

    def activation(self, x: Tensor) -> Tensor:
        return F.elu(x)

    def __repr__(self) -> str:
        return (
            f"{self.__class__.__name__}({self.in_channels}, {self.hidden_channels}, "
            f"{self.out_channels}, num_layers={self.num_layers}, heads={self.heads}, "
            f"aggr={self.aggr!r})"
        )
