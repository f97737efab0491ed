r"""What every node classifier shares: the registry of models by name, the base class with the
layer loop (:class:`NodeGNN`, the shape of PyG's ``BasicGNN``), dropout from an explicit
generator, and the checks and generators the models build with.

Every parameter and every dropout mask is drawn from an explicit :class:`torch.Generator`: nothing
here reads or advances torch's global random state.

Adding a GNN is one module in this package: a subclass of :class:`NodeGNN` that implements
``_check_aggr`` (the aggregations it admits), ``_build`` (its layers, drawn from the generator),
``reset_parameters``, ``propagation`` (what its layers read of the edges) and ``layer`` (layer
``i`` over it), registered by name with :func:`register_model` and its declaration (what ``evaluate.model``
admits: the aggregations, the multiple ``hidden`` must be of), which the configuration reads
from the source without torch (:func:`privgraph.config.evaluate.declared_models`); the package
imports every module that registers one.

>>> from privgraph.evaluate.models import MODELS
>>> sorted(MODELS)
['gap', 'gat', 'gcn', 'gin', 'sage']
>>> check_positive_int(3, "hidden_channels", "GCN")
3
"""

from __future__ import annotations

import numbers
from collections.abc import Callable
from typing import Any, ClassVar, TypeVar

import numpy as np
import torch
from torch import Tensor
from torch.nn import Module

from privgraph.config.evaluate import GNNModel
from privgraph.evaluate.models.sparse import cached_pair
from privgraph.seeding import as_seed_sequence

__all__ = ["DECLARED", "MODELS", "NORMALIZE", "GeneratorDropout", "NodeGNN", "check_generator", "check_normalize",
           "check_positive_int", "fresh_generator", "register_model", "torch_seed"]

#: the node classifiers by the name ``fit_node_classifier(model=...)`` takes, filled by :func:`register_model`
MODELS: dict[str, type[Module]] = {}
#: the declarations of the models ``evaluate.model`` names, as :func:`register_model` received them
DECLARED: dict[str, GNNModel] = {}
#: the normalisations of a propagation over the closed neighbourhood (GCN layers, KProp)
NORMALIZE = ("mean", "gcn")

_M = TypeVar("_M", bound=type[Module])


def register_model(name: str, **declaration: Any) -> Callable[[_M], _M]:
    """A class decorator: the model is trained by ``fit_node_classifier(model=name)``. Its
    constructor takes ``(in_channels, hidden_channels, out_channels, *, dropout, cached,
    generator, **model_kwargs)`` as :class:`NodeGNN`'s, and ``reset_parameters(generator)``.

    ``declaration`` (literal values: the configuration reads them from the source without torch,
    :func:`privgraph.config.evaluate.declared_models`): ``what``, ``aggrs``, ``aggregates`` and
    optionally ``hidden_multiple``, the fields of :class:`~privgraph.config.evaluate.GNNModel`;
    without them the model is not one ``evaluate.model`` names (GAP's, over released aggregates)."""
    spec = GNNModel(**{**declaration, "aggrs": tuple(declaration["aggrs"])}) if declaration else None

    def add(cls: _M) -> _M:
        if name in MODELS and MODELS[name] is not cls:
            raise ValueError(f"register_model: {name!r} is already {MODELS[name].__name__}")
        MODELS[name] = cls
        if spec is not None:
            DECLARED[name] = spec
        return cls
    return add


def torch_seed(seed: Any) -> int:
    """A 64-bit integer for ``torch.Generator.manual_seed`` from an int or a SeedSequence.

    >>> torch_seed(0) == torch_seed(np.random.SeedSequence(0))
    True
    """
    ss = as_seed_sequence(seed)
    return int(ss.generate_state(1, dtype=np.uint64)[0])


def fresh_generator(device: torch.device) -> torch.Generator:
    """A generator on ``device`` seeded from OS entropy (``Generator.seed``), not the global RNG."""
    g = torch.Generator(device=device)
    g.seed()
    return g


def check_generator(generator: Any, tensor: Tensor, owner: str) -> None:
    """Refuse (one line naming ``owner``) a ``generator`` that is no :class:`torch.Generator` or
    lies on another device type than ``tensor``."""
    if not isinstance(generator, torch.Generator):
        raise TypeError(
            f"{owner}: generator must be a torch.Generator, got {type(generator).__name__}"
        )
    if generator.device.type != tensor.device.type:
        raise ValueError(
            f"{owner}: generator is on {generator.device} but the tensors are on {tensor.device}; "
            f"create it with torch.Generator(device={str(tensor.device)!r})"
        )


def check_positive_int(value: Any, name: str, owner: str) -> int:
    """``value`` as an int >= 1, else a ValueError naming ``owner`` and ``name``."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or int(value) < 1:
        raise ValueError(f"{owner}: {name} must be an int >= 1, got {value!r}")
    return int(value)


def check_normalize(normalize: Any, owner: str) -> str:
    """``normalize`` if one of :data:`NORMALIZE`, else a ValueError naming ``owner``."""
    if normalize not in NORMALIZE:
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
        check_generator(g, x, "GeneratorDropout")
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


class NodeGNN(Module):
    r"""What every node classifier of privgraph shares (:class:`~privgraph.evaluate.models.GCN`,
    :class:`~privgraph.evaluate.models.GraphSAGE`, :class:`~privgraph.evaluate.models.GIN`,
    :class:`~privgraph.evaluate.models.GAT`): one constructor signature, so that models are swapped
    by name, its checked sizes, one :meth:`forward` (the layer loop: dropout, layer, activation
    between layers), dropout whose masks come from an explicit generator
    (:class:`GeneratorDropout`), and parameters drawn from an explicit generator: nothing reads
    torch's global random state. A model implements ``_check_aggr``, ``_build``,
    ``reset_parameters``, :meth:`propagation` and :meth:`layer`, and declares ``default_aggr``,
    ``deterministic_first_layer`` and, where it is not ReLU, :meth:`activation`.

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
    #: the first layer draws nothing random in training mode (GAT's attention dropout does), so
    #: without input dropout its output is the same in both modes (:meth:`first_layer`)
    deterministic_first_layer: ClassVar[bool] = True

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
        self.in_channels = check_positive_int(in_channels, "in_channels", owner)
        self.hidden_channels = check_positive_int(hidden_channels, "hidden_channels", owner)
        self.out_channels = check_positive_int(out_channels, "out_channels", owner)
        self.num_layers = check_positive_int(num_layers, "num_layers", owner)
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

    def propagation(self, edge_index: Tensor, num_nodes: int) -> Any:
        """What every layer reads of the edges (an operator, the edges with self-loops, ...),
        computed once per :meth:`forward`."""
        raise NotImplementedError

    def layer(self, i: int, x: Tensor, propagation: Any, generator: torch.Generator | None = None) -> Tensor:
        """Layer ``i`` (0-based) over ``propagation`` (:meth:`propagation`), before its activation;
        ``generator``: draws what the layer itself draws in training mode (GAT's attention dropout)."""
        raise NotImplementedError

    def activation(self, x: Tensor) -> Tensor:
        """The non-linearity between layers (ReLU)."""
        return x.relu()

    def forward(
        self, x: Tensor, edge_index: Tensor, *, generator: torch.Generator | None = None,
        first: Tensor | None = None,
    ) -> Tensor:
        """Logits ``[n, out_channels]``; ``generator`` draws the dropout masks in training mode;
        ``first``: :meth:`first_layer`'s output for these parameters, reused."""
        prop = self.propagation(edge_index, x.size(0))
        for i in range(self.num_layers):
            if i == 0 and first is not None:
                x = first
            else:
                x = self.layer(i, self.layer_dropout(x, i, generator), prop, generator)
            if i < self.num_layers - 1:
                x = self.activation(x)
        return x

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

    @property
    def shares_first_layer(self) -> bool:
        """Whether :meth:`first_layer` is what :meth:`forward` computes first in either mode, so
        that one product can serve a training step and the scoring of the same parameters."""
        return not self.input_dropout and self.deterministic_first_layer

    def first_layer(self, x: Tensor, edge_index: Tensor) -> Tensor:
        """The first layer's output (before its activation) without input dropout: pass it to
        :meth:`forward` as ``first`` (while the parameters are unchanged) to skip that layer."""
        return self.layer(0, x, self.propagation(edge_index, x.size(0)))

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
        return fresh_generator(torch.device("cpu")) if generator is None else generator

    def __repr__(self) -> str:
        return (
            f"{self.__class__.__name__}({self.in_channels}, {self.hidden_channels}, "
            f"{self.out_channels}, num_layers={self.num_layers}, aggr={self.aggr!r})"
        )
