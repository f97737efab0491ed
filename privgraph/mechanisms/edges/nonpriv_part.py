"""NonPriv-Part: release only the public edges; the private edges are dropped (paper 004)."""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from privgraph.graph import GraphData
from privgraph.guarantee import Guarantee, GuaranteeKind, Scope
from privgraph.mechanisms.base import check_generator
from privgraph.mechanisms.edges.shapes import Central
from privgraph.mechanisms.registry import register_mechanism
from privgraph.guarantee.params import check_int

__all__ = ["NonPrivPart"]


@register_mechanism
class NonPrivPart(Central):
    r"""NonPriv-Part: the graph of the non-private part only (paper 004, Sec. V-A: "discards
    friend lists of private users and uses only friend lists of non-private users").

    The private edges are dropped and the public edges released as they are; no private edge is
    read, so the release is :math:`0`-edge DP for the private edges (the output does not depend
    on them). The node set, features and labels are untouched by this mechanism. With every edge
    public it is paper 004's NonPriv-Full.

    It takes no parameters: there is no budget to set, so it has no :attr:`epsilon_range`
    (``None``; a pipeline that gives it an ``epsilon`` is refused when it is loaded). The nodes with
    private edges, :math:`V_{pri}`, are treated as public, as by the other edge mechanisms: their
    number :math:`n_{max} = |V_{pri}|` is recorded (:meth:`params_for`), so the epsilon 0 promise
    covers the private edges given :math:`V_{pri}`, not the membership of :math:`V_{pri}`.

    Shapes:
        - input: ``edges_private`` :math:`[2, m]`
        - output: released private edges :math:`[2, 0]`

    Runtime:
        :math:`O(1)` (plus the copy of the graph in :meth:`privatize`).
    """

    name: ClassVar[str] = "nonpriv_part"
    epsilon_range: ClassVar[None] = None  # takes no budget (no sampler to bound)
    scope: ClassVar[Scope] = Scope.EDGES

    def __init__(self) -> None:
        pass

    @property
    def guarantee(self) -> Guarantee:
        return Guarantee(
            kind=GuaranteeKind.EDGE_DP,
            epsilon=0.0,
            scope=Scope.EDGES,
            assumptions=(
                "no private edge is released or read: the output does not depend on them",
                (
                    "V_pri (nodes with private edges) is treated as public: its size n_max = |V_pri| "
                    "is recorded with the release"
                ),
                "public edges are released as they are",
            ),
        )

    def params(self) -> dict[str, Any]:
        return {}

    def params_for(self, n_max: int) -> dict[str, Any]:
        """:meth:`params` plus ``n_max = |V_pri|`` (for the record)."""
        return {"n_max": check_int(n_max, "n_max", minimum=0)}

    def __repr__(self) -> str:
        return "NonPrivPart()"

    def privatize_edges(self, graph: GraphData, rng: np.random.Generator) -> np.ndarray:
        """No private edge is released: int64 ``[2, 0]`` (``rng`` is checked, never used)."""
        if not isinstance(graph, GraphData):
            raise TypeError(f"graph must be a GraphData, got {type(graph).__name__}")
        check_generator(rng)
        return np.zeros((2, 0), dtype=np.int64)

    def privatize(self, graph: GraphData, rng: np.random.Generator) -> GraphData:
        """A copy of ``graph`` without private edges; ``edges_public`` are kept as they are."""
        return graph.replace(edges_private=self.privatize_edges(graph, rng))
