"""GraphSAGE (mean aggregation) for privgraph's utility evaluation, with generator-drawn parameters.

Like :class:`~privgraph.evaluate.models.GCN`, building, initialising or training a :class:`GraphSAGE`
never reads or advances torch's global random state: the layers are
:class:`torch_geometric.nn.SAGEConv` modules created on the ``meta`` device (PyG's own
initialisation then draws nothing) and initialised from an explicit :class:`torch.Generator`.
"""

from __future__ import annotations

import math
from typing import Any, ClassVar

import torch
from torch import Tensor
from torch.nn import ModuleList
from torch_geometric.nn import SAGEConv
from torch_geometric.utils import scatter

from privgraph.evaluate.models.basic import NodeGNN, check_generator, fresh_generator, register_model
from privgraph.evaluate.models.sparse import FixedSpMM, propagation_pair, sparse_aware_linear

__all__ = ["GraphSAGE"]


def _check_mean(aggr: Any) -> str:
    if aggr != "mean":
        raise ValueError(
            f"GraphSAGE: aggregation must be 'mean' (GraphSAGE-mean), got {aggr!r}; for "
            "symmetric normalisation use the GCN (model 'gcn', aggr 'gcn')"
        )
    return "mean"


def _mean_operator(edge_index: Tensor, num_nodes: int, dtype: torch.dtype) -> tuple[Tensor, Tensor | None]:
    r"""``(M, M^T)`` CSR ``[n, n]`` (row = target) with :math:`M_{vu} = 1/|\mathcal{N}(v)|`: the
    mean over the edges into :math:`v`, exactly as :class:`~torch_geometric.nn.SAGEConv`'s
    ``aggr="mean"`` (a node without incoming edges aggregates to zero)."""
    ones = torch.ones(edge_index.size(1), device=edge_index.device, dtype=torch.float64)
    deg = scatter(ones, edge_index[1], dim=0, dim_size=num_nodes, reduce="sum")
    w = deg.reciprocal()[edge_index[1]].to(dtype)
    return propagation_pair(edge_index, w, num_nodes)


@register_model("sage", what="GraphSAGE (mean)", aggrs=("mean",), aggregates="aggregates by mean")
class GraphSAGE(NodeGNN):
    r"""A multi-layer GraphSAGE network (mean aggregator) for node classification.

    From `Hamilton, Ying & Leskovec, "Inductive Representation Learning on Large Graphs"
    (NeurIPS 2017) <https://arxiv.org/abs/1706.02216>`_, the base GNN of LPGNN's experiments:
    ``num_layers`` :class:`torch_geometric.nn.SAGEConv` layers (``aggr="mean"``, root weight, no
    output normalisation), ReLU between them, dropout before each. Each layer computes

    .. math::
        \mathbf{X}^{\prime} = \mathbf{X} \mathbf{W}_1^{\top}
        + \mathbf{D}^{-1} \mathbf{A} \mathbf{X} \mathbf{W}_2^{\top} + \mathbf{b},

    node-wise

    .. math::
        \mathbf{x}^{\prime}_v = \mathbf{W}_1 \mathbf{x}_v + \mathbf{W}_2 \,
        \frac{1}{|\mathcal{N}(v)|} \sum_{u \in \mathcal{N}(v)} \mathbf{x}_u + \mathbf{b},

    where :math:`\mathcal{N}(v)` are the sources of the edges into :math:`v` (the node itself is
    not among them: it enters through the root weight :math:`\mathbf{W}_1`, ``lin_r``),
    :math:`\mathbf{W}_2` and :math:`\mathbf{b}` are ``lin_l``, and a node without neighbours
    aggregates to zero. The product with the weights is taken before aggregating (the mean is
    linear), with the sparse mean operator built once per ``edge_index`` when ``cached``; the
    result equals :meth:`SAGEConv.forward` (checked in the tests) and a sparse (CSR/COO) input
    is used as such.

    Initialisation is PyG's default for the layers' :class:`~torch_geometric.nn.dense.Linear`
    (Kaiming-uniform with :math:`a = \sqrt{5}`: weights and bias
    :math:`\sim \mathcal{U}(-1/\sqrt{F_{in}}, 1/\sqrt{F_{in}})`), drawn from an explicit
    generator (:meth:`reset_parameters`); dropout masks come from the generator passed to
    :meth:`forward` (:class:`~privgraph.evaluate.models.GeneratorDropout`).

    The constructor and :meth:`forward` take the same arguments as :class:`~privgraph.evaluate.models.GCN`,
    so that the two can be swapped by name.

    Args: as :class:`~privgraph.evaluate.models.basic.NodeGNN`; ``aggr``: ``"mean"`` only (GraphSAGE-mean; the
    argument exists so that the GCN's keywords are accepted); ``cached`` also keeps the mean operator.
    """

    default_aggr: ClassVar[str] = "mean"

    def _check_aggr(self, aggr: Any) -> str:
        return _check_mean(aggr)

    def _build(self, generator: torch.Generator) -> None:
        dims = self.dims
        # on the meta device SAGEConv's own reset_parameters draws nothing from the global RNG
        with torch.device("meta"):
            convs = [SAGEConv(i, o, aggr="mean") for i, o in zip(dims[:-1], dims[1:])]
        self.convs = ModuleList(convs).to_empty(device="cpu")
        self.reset_parameters(generator)

    def reset_parameters(self, generator: torch.Generator | None = None) -> None:
        """Re-draw every parameter from ``generator`` (on the parameters' device).

        Per layer, in order: ``lin_l.weight``, ``lin_l.bias``, ``lin_r.weight``, each
        :math:`\\mathcal{U}(-1/\\sqrt{F_{in}}, 1/\\sqrt{F_{in}})`. ``None`` draws from a fresh
        generator seeded with OS entropy.
        """
        self._cache = self._x_cache = None
        w0 = self.convs[0].lin_l.weight
        g = fresh_generator(w0.device) if generator is None else generator
        check_generator(g, w0, "GraphSAGE")
        with torch.no_grad():
            for conv in self.convs:
                bound = 1.0 / math.sqrt(conv.lin_l.in_channels)
                for p in (conv.lin_l.weight, conv.lin_l.bias, conv.lin_r.weight):
                    torch.nn.init.uniform_(p, -bound, bound, generator=g)

    def propagation(self, edge_index: Tensor, num_nodes: int) -> tuple[Tensor, Tensor | None]:
        """The mean operator and its transpose (:func:`_mean_operator`), kept while ``cached``."""
        return self._cached_operator(edge_index, num_nodes, self.convs[0].lin_l.weight.dtype, _mean_operator)

    def layer(self, i: int, x: Tensor, propagation: tuple[Tensor, Tensor | None],
              generator: torch.Generator | None = None) -> Tensor:
        conv, (op, op_t) = self.convs[i], propagation
        o = conv.out_channels
        # one product for both weights: [W_2; W_1] -> columns [:o] aggregated, [o:] the root
        h = sparse_aware_linear(self, x, torch.cat([conv.lin_l.weight, conv.lin_r.weight], dim=0))
        return FixedSpMM.apply(h[:, :o].contiguous(), op, op_t) + h[:, o:] + conv.lin_l.bias
