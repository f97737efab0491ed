r"""GAP's classification module over released hop-wise aggregates, with generator-drawn parameters.

Sajadmanesh et al., "GAP: Differentially Private Graph Neural Networks with Aggregation
Perturbation" (USENIX Security 2023), Section 4.4, as paper 001 runs it (Section 4.3): every hop's
aggregate :math:`\check{X}^{(k)}` (``k = 0 .. K``; hop 0 the encoded features) passes through its
own MLP, the outputs are concatenated and a head maps them to the class logits. The model reads
no edge: its input is the release of
:class:`~privgraph.mechanisms.edges.gap.AggregationPerturbation`, so training it is
post-processing. Because hop 0 has its own MLP, the model can always use the node's own
(structure-free) information, however noisy the other hops are.
"""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import Tensor
from torch.nn import Linear, Module, ModuleList

from privgraph.evaluate.models.basic import GeneratorDropout, check_generator, check_positive_int, fresh_generator, register_model

__all__ = ["GAPClassifier"]


@register_model("gap")  # over a GAP version's released aggregates (graph.aggregates), no edges
class GAPClassifier(Module):
    r"""Per-hop MLPs and a head: :math:`\mathrm{logits} = W_h [\,\mathrm{ReLU}(W_0 x^{(0)} + b_0)
    \,\|\, \dots \,\|\, \mathrm{ReLU}(W_K x^{(K)} + b_K)\,] + b_h`, dropout before each layer.

    Args:
        in_channels (int): the width of the input, ``(K + 1) * d`` (the hops concatenated,
            hop-major: columns ``k d .. (k + 1) d - 1`` are hop ``k``).
        hidden_channels (int): each hop MLP's output width.
        out_channels (int): number of classes.
        hops (int): the number of blocks ``K + 1`` in the input (default: ``2``).
        dropout (float, optional): in ``[0, 1)`` (default: ``0.5``).
        aggr (str, optional): ``"none"`` only: the model aggregates nothing (the keyword exists so
            that the other models' keywords are accepted) (default: ``"none"``).
        cached (bool, optional): accepted for the common constructor; nothing to cache.
        generator (torch.Generator, optional): draws the initial parameters
            (``U(-1/sqrt(F_in), 1/sqrt(F_in))``, torch's default for a linear layer).

    Shapes: input ``[n, (K + 1) d]`` (``edge_index`` is ignored), output ``[n, C]``.
    """

    def __init__(
        self,
        in_channels: int,
        hidden_channels: int,
        out_channels: int,
        *,
        hops: int = 2,
        dropout: float = 0.5,
        aggr: str = "none",
        cached: bool = False,
        generator: torch.Generator | None = None,
    ) -> None:
        super().__init__()
        self.in_channels = check_positive_int(in_channels, "in_channels", "GAPClassifier")
        self.hidden_channels = check_positive_int(hidden_channels, "hidden_channels", "GAPClassifier")
        self.out_channels = check_positive_int(out_channels, "out_channels", "GAPClassifier")
        self.hops = check_positive_int(hops, "hops", "GAPClassifier")
        if self.in_channels % self.hops:
            raise ValueError(
                f"GAPClassifier: in_channels {self.in_channels} is not a multiple of hops {self.hops}"
            )
        if aggr != "none":
            raise ValueError(f"GAPClassifier: it aggregates nothing (its input is aggregated); aggr must be 'none', got {aggr!r}")
        self.aggr = "none"
        self.cached = bool(cached)
        self.block = self.in_channels // self.hops
        self.dropout = GeneratorDropout(dropout)
        with torch.device("meta"):
            mlps = [Linear(self.block, self.hidden_channels) for _ in range(self.hops)]
            head = Linear(self.hops * self.hidden_channels, self.out_channels)
        self.mlps = ModuleList(mlps).to_empty(device="cpu")
        self.head = head.to_empty(device="cpu")
        self.reset_parameters(fresh_generator(torch.device("cpu")) if generator is None else generator)

    def reset_parameters(self, generator: torch.Generator | None = None) -> None:
        """Re-draw every parameter from ``generator``: each hop's ``Linear`` in order, then the head."""
        w0 = self.head.weight
        g = fresh_generator(w0.device) if generator is None else generator
        check_generator(g, w0, "GAPClassifier")
        with torch.no_grad():
            for lin in [*self.mlps, self.head]:
                bound = 1.0 / math.sqrt(lin.in_features)
                torch.nn.init.uniform_(lin.weight, -bound, bound, generator=g)
                torch.nn.init.uniform_(lin.bias, -bound, bound, generator=g)

    def forward(self, x: Tensor, edge_index: Any = None, *, generator: torch.Generator | None = None) -> Tensor:
        """Logits ``[n, out_channels]``; ``generator`` draws the dropout masks in training mode."""
        if x.layout != torch.strided:
            x = x.to_dense()
        parts = []
        for k, lin in enumerate(self.mlps):
            h = self.dropout(x[:, k * self.block:(k + 1) * self.block], generator)
            parts.append(lin(h).relu())
        return self.head(self.dropout(torch.cat(parts, dim=1), generator))

    def __repr__(self) -> str:
        return (f"{self.__class__.__name__}({self.in_channels}, {self.hidden_channels}, "
                f"{self.out_channels}, hops={self.hops})")
