"""The GCN used by privgraph's utility evaluation: average ("mean") or symmetric aggregation.

Every parameter and every dropout mask is drawn from an explicit :class:`torch.Generator`:
building, initialising or training a :class:`GCN` never reads or advances torch's global random
state.
"""

from __future__ import annotations

import numbers
from typing import Any, ClassVar

import torch
from torch import Tensor
from torch.nn import Module, ModuleList, Parameter
from torch_geometric.nn.conv import MessagePassing
from torch_geometric.nn.conv.gcn_conv import gcn_norm
from torch_geometric.utils import add_remaining_self_loops, scatter

from privgraph.evaluate.models.sparse import (
    StructuredInput,
    _FixedSpMM,
    cached_pair,
    propagation_pair,
    sparse_csr_transpose,
)

__all__ = ["GCN", "GraphConvolution", "GeneratorDropout", "NodeGNN"]

_NORMALIZE = ("mean", "gcn")


def _fresh_generator(device: torch.device) -> torch.Generator:
    """A generator on ``device`` seeded from OS entropy (``Generator.seed``), not the global RNG."""
    g = torch.Generator(device=device)
    g.seed()
    return g


def _check_generator(generator: Any, tensor: Tensor, owner: str) -> None:
    if not isinstance(generator, torch.Generator):
        raise TypeError(
            f"{owner}: generator must be a torch.Generator, got {type(generator).__name__}"
        )
    if generator.device.type != tensor.device.type:
        raise ValueError(
            f"{owner}: generator is on {generator.device} but the tensors are on {tensor.device}; "
            f"create it with torch.Generator(device={str(tensor.device)!r})"
        )


def _check_positive_int(value: Any, name: str, owner: str) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or int(value) < 1:
        raise ValueError(f"{owner}: {name} must be an int >= 1, got {value!r}")
    return int(value)


def _check_normalize(normalize: Any, owner: str) -> str:
    if normalize not in _NORMALIZE:
        raise ValueError(
            f"{owner}: aggregation must be 'mean' (average over the closed neighbourhood) or "
            f"'gcn' (symmetric normalisation), got {normalize!r}; for another aggregation use "
            "another model (e.g. torch_geometric.nn.SAGEConv)"
        )
    return str(normalize)


def _dropout_values(x: Tensor, p: float, generator: torch.Generator) -> Tensor:
    # u < 1 - p with u ~ U[0, 1) is Bernoulli(1 - p); torch.rand is several times faster than
    # Tensor.bernoulli_ on the CPU and has the same 2^-24 resolution
    keep = torch.rand(x.shape, generator=generator, device=x.device) < (1.0 - p)
    return x * keep.to(x.dtype).div_(1.0 - p)


class GeneratorDropout(Module):
    r"""Inverted dropout whose Bernoulli masks come from an explicit :class:`torch.Generator`.

    In training mode each entry is kept with probability :math:`1 - p` and scaled by
    :math:`1 / (1 - p)`; in evaluation mode (or with :math:`p = 0`) the input is returned as is.
    A sparse (CSR or COO) input keeps its layout and only its stored values are drawn for, which
    is the same distribution (a zero stays zero) at a fraction of the cost. Unlike
    :class:`torch.nn.Dropout` it never touches torch's global random state: the generator is
    passed to :meth:`forward`, or set once as the :attr:`generator` attribute.

    Args:
        p (float): probability of zeroing an entry, in :math:`[0, 1)` (default: ``0.5``).

    Raises:
        RuntimeError: in training mode with :math:`p > 0` and no generator.
    """

    def __init__(self, p: float = 0.5) -> None:
        super().__init__()
        if isinstance(p, bool) or not isinstance(p, numbers.Real) or not 0.0 <= float(p) < 1.0:
            raise ValueError(f"GeneratorDropout: p must be a float in [0, 1), got {p!r}")
        self.p = float(p)
        self.generator: torch.Generator | None = None

    def forward(self, x: Tensor, generator: torch.Generator | None = None) -> Tensor:
        if not self.training or self.p == 0.0:
            return x
        g = generator if generator is not None else self.generator
        if g is None:
            raise RuntimeError(
                "GeneratorDropout: training mode needs a torch.Generator (pass generator=... or "
                "set .generator); privgraph never draws from torch's global random state"
            )
        _check_generator(g, x, "GeneratorDropout")
        if x.layout == torch.sparse_csr:
            v = _dropout_values(x.values(), self.p, g)
            return torch.sparse_csr_tensor(
                x.crow_indices(), x.col_indices(), v, x.shape, check_invariants=False
            )
        if x.layout == torch.sparse_coo:
            x = x.coalesce()
            v = _dropout_values(x.values(), self.p, g)
            return torch.sparse_coo_tensor(
                x.indices(), v, x.shape, is_coalesced=True, check_invariants=False
            )
        return _dropout_values(x, self.p, g)

    def extra_repr(self) -> str:
        return f"p={self.p}"


def _propagation_weights(
    edge_index: Tensor, num_nodes: int, normalize: str
) -> tuple[Tensor, Tensor]:
    r"""Edges ``[2, m']`` with one self-loop per node and their propagation weights ``[m']``.

    ``normalize="mean"``: :math:`w_{uv} = 1 / \hat{d}_v` (the mean over :math:`v`'s closed
    neighbourhood); ``"gcn"``: :math:`w_{uv} = 1 / \sqrt{\hat{d}_u \hat{d}_v}` (Kipf & Welling;
    :func:`torch_geometric.nn.conv.gcn_conv.gcn_norm`). :math:`\hat{d}_v` counts the edges into
    ``v`` (``edge_index[1] == v``) plus its self-loop.
    """
    normalize = _check_normalize(normalize, "GraphConvolution")
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
        self.in_channels = _check_positive_int(in_channels, "in_channels", "GraphConvolution")
        self.out_channels = _check_positive_int(out_channels, "out_channels", "GraphConvolution")
        self.normalize = _check_normalize(normalize, "GraphConvolution")
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
        g = _fresh_generator(self.weight.device) if generator is None else generator
        _check_generator(g, self.weight, "GraphConvolution")
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
            h = _FixedSpMM.apply(self.weight.t(), x, self._sparse_transpose(x))
        else:
            h = x @ self.weight.t()
        if self.cached:
            op, op_t = self._operator(edge_index, n)
            out = _FixedSpMM.apply(h, op, op_t)
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


class NodeGNN(Module):
    r"""What every node classifier of privgraph shares (:class:`GCN`,
    :class:`~privgraph.evaluate.models.GraphSAGE`, :class:`~privgraph.evaluate.models.GIN`,
    :class:`~privgraph.evaluate.models.GAT`): one constructor signature, so that models are swapped by name,
    its checked sizes, dropout whose masks come from an explicit generator
    (:class:`GeneratorDropout`), and parameters drawn from an explicit generator: nothing reads
    torch's global random state.

    Args:
        in_channels (int): size of each input sample :math:`F`.
        hidden_channels (int): size of each hidden layer's output (unused when ``num_layers=1``).
        out_channels (int): number of classes :math:`C` (the output is logits).
        num_layers (int, optional): number of layers (default: ``2``).
        dropout (float, optional): dropout probability before each layer, in :math:`[0, 1)`
            (default: ``0.5``).
        input_dropout (bool, optional): dropout before the first layer too; ``False``: only
            before the hidden layers (default: ``True``).
        aggr (str, optional): the aggregation; each model admits its own (default: the model's).
        cached (bool, optional): reuse the propagation operator while the same ``edge_index``
            tensor object is passed, and transpose the structure of sparse CSR features only once
            (default: ``False``).
        generator (torch.Generator, optional): generator of the initial parameters; ``None``
            draws a fresh one from OS entropy (default: ``None``).

    Shapes:
        - **input:** node features :math:`(|\mathcal{V}|, F)` (dense, or sparse CSR/COO), edge
          indices :math:`(2, |\mathcal{E}|)` with both directions of each undirected edge
        - **output:** logits :math:`(|\mathcal{V}|, C)`
    """

    #: the model's own aggregation (``aggr=None``)
    default_aggr: ClassVar[str] = "mean"

    def __init__(
        self,
        in_channels: int,
        hidden_channels: int,
        out_channels: int,
        *,
        num_layers: int = 2,
        dropout: float = 0.5,
        input_dropout: bool = True,
        aggr: str | None = None,
        cached: bool = False,
        generator: torch.Generator | None = None,
        **options: Any,
    ) -> None:
        super().__init__()
        owner = type(self).__name__
        self.in_channels = _check_positive_int(in_channels, "in_channels", owner)
        self.hidden_channels = _check_positive_int(hidden_channels, "hidden_channels", owner)
        self.out_channels = _check_positive_int(out_channels, "out_channels", owner)
        self.num_layers = _check_positive_int(num_layers, "num_layers", owner)
        self.dropout = GeneratorDropout(dropout)
        if not isinstance(input_dropout, bool):
            raise ValueError(f"{owner}: input_dropout must be a bool, got {input_dropout!r}")
        self.input_dropout = input_dropout
        self.cached = bool(cached)
        self.aggr = self._check_aggr(self.default_aggr if aggr is None else aggr)
        self._cache: Any = None  # the propagation operator while edge_index is the same object
        self._x_cache: Any = None  # the structure of sparse CSR features' transpose
        self._build(self.parameter_generator(generator), **options)

    def _check_aggr(self, aggr: Any) -> str:
        """The aggregation this model admits (each model refuses the others in one line)."""
        raise NotImplementedError

    def _build(self, generator: torch.Generator, **options: Any) -> None:
        """Create the layers and draw their parameters from ``generator``; ``options``: the
        model's own keywords (GAT's ``heads``, ``attention_dropout``)."""
        raise NotImplementedError

    def _cached_operator(self, edge_index: Tensor, num_nodes: int, dtype: torch.dtype,
                         build: Any) -> tuple[Tensor, Tensor | None]:
        """``build(edge_index, num_nodes, dtype)`` (an operator and its transpose), kept while
        ``cached`` and the same ``edge_index`` tensor object is passed."""
        hit = cached_pair(self._cache, edge_index, num_nodes, dtype)
        if hit is not None:
            return hit
        op, op_t = build(edge_index, num_nodes, dtype)
        if self.cached:
            self._cache = (edge_index, op, op_t)
        return op, op_t

    #: the first layer draws nothing random in training mode (GAT's attention dropout does), so
    #: without input dropout its output is the same in both modes (:meth:`first_layer`)
    deterministic_first_layer: ClassVar[bool] = True

    @property
    def shares_first_layer(self) -> bool:
        """Whether :meth:`first_layer` is what :meth:`forward` computes first in either mode, so
        that one product can serve a training step and the scoring of the same parameters."""
        return not self.input_dropout and self.deterministic_first_layer

    def first_layer(self, x: Tensor, edge_index: Tensor) -> Tensor:
        """The first layer's output (before its activation) without input dropout: pass it to
        :meth:`forward` as ``first`` (while the parameters are unchanged) to skip that layer."""
        raise NotImplementedError

    def layer_dropout(self, x: Tensor, layer: int, generator: torch.Generator | None) -> Tensor:
        """The dropout before layer ``layer`` (0-based): none before the first layer without
        ``input_dropout``."""
        return x if layer == 0 and not self.input_dropout else self.dropout(x, generator)

    @property
    def dims(self) -> list[int]:
        """The widths at the layer boundaries: input, ``num_layers - 1`` hidden, output."""
        return [self.in_channels] + [self.hidden_channels] * (self.num_layers - 1) + [self.out_channels]

    @staticmethod
    def parameter_generator(generator: torch.Generator | None) -> torch.Generator:
        """``generator``, or a fresh one seeded from OS entropy (never the global RNG)."""
        return _fresh_generator(torch.device("cpu")) if generator is None else generator


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
        return _check_normalize(aggr, "GCN")

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
        g = _fresh_generator(self.convs[0].weight.device) if generator is None else generator
        for conv in self.convs:
            conv.reset_parameters(g)

    def first_layer(self, x: Tensor, edge_index: Tensor) -> Tensor:
        return self.convs[0](x, edge_index)

    def forward(
        self, x: Tensor, edge_index: Tensor, *, generator: torch.Generator | None = None,
        first: Tensor | None = None,
    ) -> Tensor:
        """Logits ``[n, out_channels]``; ``generator`` draws the dropout masks in training mode;
        ``first``: :meth:`first_layer`'s output for these parameters, reused."""
        for i, conv in enumerate(self.convs):
            if i == 0 and first is not None:
                x = first
            else:
                x = conv(self.layer_dropout(x, i, generator), edge_index)
            if i < self.num_layers - 1:
                x = x.relu()
        return x

    def __repr__(self) -> str:
        return (
            f"{self.__class__.__name__}({self.in_channels}, {self.hidden_channels}, "
            f"{self.out_channels}, num_layers={self.num_layers}, aggr={self.aggr!r})"
        )

