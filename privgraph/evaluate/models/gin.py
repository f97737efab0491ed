"""GIN-0 (graph isomorphism network) for privgraph's utility evaluation, with generator-drawn
parameters.

Like :class:`~privgraph.evaluate.models.GraphSAGE`, building, initialising or training a :class:`GIN` never
reads or advances torch's global random state: the layers are
:class:`torch_geometric.nn.GINConv` modules (each with a two-layer MLP) created on the ``meta``
device (PyG's and torch's own initialisation then draw nothing) and initialised from an explicit
:class:`torch.Generator`.
"""

from __future__ import annotations

import math
from typing import Any, ClassVar

import torch
from torch import Tensor
from torch.nn import Linear, ModuleList, ReLU, Sequential
from torch_geometric.nn import GINConv

from privgraph.evaluate.models.basic import NodeGNN, check_generator, fresh_generator, register_model
from privgraph.evaluate.models.sparse import FixedSpMM, propagation_pair, sparse_aware_linear

__all__ = ["GIN"]

def _check_sum(aggr: Any) -> str:
    if aggr != "sum":
        raise ValueError(
            f"GIN: GIN-0 aggregates by sum; aggr must be 'sum', got {aggr!r}; for a mean use "
            "GraphSAGE or the GCN (aggr 'mean'), for symmetric normalisation the GCN (aggr 'gcn')"
        )
    return "sum"


def _sum_operator(
    edge_index: Tensor, num_nodes: int, dtype: torch.dtype
) -> tuple[Tensor, Tensor | None]:
    r"""``(S, S^T)`` CSR ``[n, n]`` (row = target), :math:`\mathbf{S} = \mathbf{A} + \mathbf{I}`:
    :math:`(\mathbf{S} \mathbf{h})_v = \mathbf{h}_v + \sum_{u \in \mathcal{N}(v)} \mathbf{h}_u`,
    GINConv's ``(1 + eps) x_v + sum`` with ``eps = 0``; an edge listed twice (or a self-loop in
    ``edge_index``) counts twice, as in GINConv's scatter-sum."""
    loops = torch.arange(num_nodes, device=edge_index.device).repeat(2, 1)
    ei = torch.cat([edge_index, loops], dim=1)
    w = torch.ones(ei.size(1), device=ei.device, dtype=dtype)
    return propagation_pair(ei, w, num_nodes)


@register_model("gin", what="GIN-0 (sum)", aggrs=("sum",), aggregates="sums (GIN-0)")
class GIN(NodeGNN):
    r"""A multi-layer graph isomorphism network (GIN-0) for node classification.

    From `Xu, Hu, Leskovec & Jegelka, "How Powerful are Graph Neural Networks?" (ICLR 2019)
    <https://arxiv.org/abs/1810.00826>`_: ``num_layers`` :class:`torch_geometric.nn.GINConv`
    layers with :math:`\epsilon = 0` fixed (GIN-0, ``train_eps=False``), ReLU between them,
    dropout before each. Each layer is the paper's Eq. 4.1,

    .. math::
        \mathbf{x}^{\prime}_v = \mathrm{MLP}\Big( (1 + \epsilon) \, \mathbf{x}_v
        + \sum_{u \in \mathcal{N}(v)} \mathbf{x}_u \Big),
        \qquad
        \mathrm{MLP}(\mathbf{h}) = \mathbf{W}_2 \, \mathrm{ReLU}(\mathbf{W}_1 \mathbf{h}
        + \mathbf{b}_1) + \mathbf{b}_2,

    i.e. :math:`\mathbf{X}^{\prime} = \mathrm{MLP}((\mathbf{A} + \mathbf{I}) \mathbf{X})`, where
    :math:`\mathcal{N}(v)` are the sources of the edges into :math:`v`. The MLP has two
    :class:`torch.nn.Linear` layers (``F_in -> hidden_channels -> F_out``, ``F_out`` =
    ``hidden_channels`` except ``out_channels`` in the last layer) and no batch normalisation
    (nothing then depends on the batch or on train/eval mode besides dropout). Over a graph
    without edges the network is a per-node MLP (the feature-only floor).

    :math:`\mathbf{W}_1` is linear, so :math:`(\mathbf{A} + \mathbf{I})(\mathbf{X}
    \mathbf{W}_1^{\top}) = ((\mathbf{A} + \mathbf{I}) \mathbf{X}) \mathbf{W}_1^{\top}` exactly:
    the product with :math:`\mathbf{W}_1` is taken first (a sparse product for sparse CSR/COO
    input, and fewer columns to sum), then the sum over the closed neighbourhood (a sparse
    operator, built once per ``edge_index`` when ``cached``), then :math:`\mathbf{b}_1`; the
    result equals ``GINConv.forward`` (checked in the tests).

    Aggregation: GIN's is the sum by definition (a mean or max aggregator is strictly less
    expressive, the paper's Section 5), so ``aggr`` takes ``"sum"`` only (the keyword exists so
    that the GCN's keywords are accepted); :func:`privgraph.evaluate.training.fit_node_classifier` and
    ``evaluate.aggr`` leave it at this default when none is given.

    Initialisation is PyG's and torch's default for a linear layer (Kaiming-uniform with
    :math:`a = \sqrt{5}`: weights and biases :math:`\sim \mathcal{U}(-1/\sqrt{F_{in}},
    1/\sqrt{F_{in}})`), drawn from an explicit generator (:meth:`reset_parameters`); dropout
    masks come from the generator passed to :meth:`forward`
    (:class:`~privgraph.evaluate.models.GeneratorDropout`).

    The constructor and :meth:`forward` take the same arguments as :class:`~privgraph.evaluate.models.GCN`,
    so that the two can be swapped by name.

    Args: as :class:`~privgraph.evaluate.models.basic.NodeGNN` (``hidden_channels``: the width of every MLP's
    hidden layer and of each hidden GIN layer's output); ``aggr``: ``"sum"`` only (see above);
    ``cached`` also keeps the sum operator.
    """

    default_aggr: ClassVar[str] = "sum"

    def _check_aggr(self, aggr: Any) -> str:
        return _check_sum(aggr)

    def _build(self, generator: torch.Generator) -> None:
        self.eps = 0.0  # GIN-0
        dims = self.dims
        hid = self.hidden_channels
        # on the meta device neither torch.nn.Linear nor GINConv draws from the global RNG
        with torch.device("meta"):
            convs = [
                GINConv(Sequential(Linear(i, hid), ReLU(), Linear(hid, o)), eps=0.0,
                        train_eps=False)
                for i, o in zip(dims[:-1], dims[1:])
            ]
        self.convs = ModuleList(convs).to_empty(device="cpu")
        self.reset_parameters(generator)

    def reset_parameters(self, generator: torch.Generator | None = None) -> None:
        """Re-draw every parameter from ``generator`` (on the parameters' device).

        Per layer, in order: the MLP's first ``Linear`` (weight, bias), then its second, each
        :math:`\\mathcal{U}(-1/\\sqrt{F_{in}}, 1/\\sqrt{F_{in}})` with that ``Linear``'s input
        width; the fixed :math:`\\epsilon` buffer is set to 0. ``None`` draws from a fresh
        generator seeded with OS entropy.
        """
        self._cache = self._x_cache = None
        w0 = self.convs[0].nn[0].weight
        g = fresh_generator(w0.device) if generator is None else generator
        check_generator(g, w0, "GIN")
        with torch.no_grad():
            for conv in self.convs:
                conv.eps.fill_(self.eps)  # to_empty left the buffer uninitialised
                for lin in (conv.nn[0], conv.nn[2]):
                    bound = 1.0 / math.sqrt(lin.in_features)
                    torch.nn.init.uniform_(lin.weight, -bound, bound, generator=g)
                    torch.nn.init.uniform_(lin.bias, -bound, bound, generator=g)

    def propagation(self, edge_index: Tensor, num_nodes: int) -> tuple[Tensor, Tensor | None]:
        """The sum operator and its transpose (:func:`_sum_operator`), kept while ``cached``."""
        return self._cached_operator(edge_index, num_nodes, self.convs[0].nn[0].weight.dtype, _sum_operator)

    def layer(self, i: int, x: Tensor, propagation: tuple[Tensor, Tensor | None],
              generator: torch.Generator | None = None) -> Tensor:
        (op, op_t), lin1, lin2 = propagation, self.convs[i].nn[0], self.convs[i].nn[2]
        h = sparse_aware_linear(self, x, lin1.weight)  # X W_1^T
        h = FixedSpMM.apply(h, op, op_t) + lin1.bias  # (A + I) X W_1^T + b_1
        return lin2(h.relu())
