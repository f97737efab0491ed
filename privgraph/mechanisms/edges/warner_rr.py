"""Warner's randomized response on each private neighbour list (the RR baseline of paper 004)."""

from __future__ import annotations

import math
from typing import Any, ClassVar

import numpy as np

from privgraph.graph import GraphData
from privgraph.guarantee import Guarantee, GuaranteeKind, Scope
from privgraph.mechanisms.base import EpsilonRange, check_generator
from privgraph.guarantee.params import check_int
from privgraph.mechanisms.edges.edge_arrays import (
    check_node_inputs,
    merge_with_public,
    neighbour_ends,
    private_csr,
    symmetrize_reports,
)
from privgraph.mechanisms.edges.edge_rand import flip_probability
from privgraph.mechanisms.edges.shapes import LocalReports
from privgraph.mechanisms.exact_binomial import binomial_exact
from privgraph.mechanisms.registry import register_mechanism
from privgraph.mechanisms.sampling import bernoulli_exact, sample_excluding

__all__ = ["WarnerRR"]


@register_mechanism
class WarnerRR(LocalReports):
    r"""Warner's randomized response on each private neighbour list (the RR baseline of paper 004,
    Sec. III-B and V-A; Qin et al., CCS 2017, randomized neighbour lists).

    Every node :math:`v \in V_{pri}` (the nodes with a private edge, treated as public) reports
    each candidate :math:`j \in C_v = V_{pri} \setminus \{v\}` with

    .. math::
        \Pr(v \text{ reports } j) = \begin{cases} p = \frac{e^\varepsilon}{e^\varepsilon + 1}
        & j \in \mathcal{N}_{pri}(v) \\ 1 - p = \frac{1}{e^\varepsilon + 1} & \text{otherwise,}
        \end{cases}

    independently over :math:`j` (each bit flipped with probability :math:`1 / (e^\varepsilon + 1)`).
    One bit's output probabilities differ by :math:`p / (1 - p) = e^\varepsilon` exactly:
    :math:`\varepsilon`-edge LDP per node.

    The server builds the undirected graph by the OR rule (:meth:`combine_reports`, as DPRR):
    :math:`\{u, v\}` is released when :math:`u` reports :math:`v` or :math:`v` reports :math:`u`.
    Paper 004 forms the noisy adjacency from the rows :math:`\tilde{\mathbf a}_i` and does not
    symmetrize explicitly; its customized setting (an edge is disclosed when either endpoint
    reveals it) is the union of both endpoints' reports. One undirected edge is two bits, one in
    each endpoint's list, so the release is :math:`2\varepsilon` relationship DP (Prop. 1); for
    one pair the OR release has :math:`\Pr(\text{absent} \mid \text{non-edge}) /
    \Pr(\text{absent} \mid \text{edge}) = p^2 / (1 - p)^2 = e^{2\varepsilon}` exactly, so the factor
    2 is tight. Public edges are released as they are.

    Args:
        epsilon (float): the per-node budget, in :math:`[2^{-20}, 50]` (:attr:`epsilon_range`).

    Shapes:
        - input: ``edges_private`` :math:`[2, |E_{pri}|]`
        - output: directed reports :math:`[2, k]`, :math:`E[k] = \sum_v d_v p + (N - d_v)(1 - p)`,
          :math:`N = |V_{pri}| - 1`

    Runtime:
        :math:`O(d_v + K_v)` per node, up to a log factor: one exact Bernoulli draw per true
        neighbour (:func:`~privgraph.mechanisms.sampling.bernoulli_exact`); the false reports are
        :math:`K_v \sim \mathrm{Binomial}(N - d_v, 1 - p)`
        (:func:`~privgraph.mechanisms.exact_binomial.binomial_exact`, :math:`\Pr(K_v = 0)` realised
        exactly however small :math:`(N - d_v)(1 - p)` is: about one uniform per node) candidates
        placed uniformly without replacement among the non-neighbours other than :math:`v`
        (:func:`~privgraph.mechanisms.sampling.sample_excluding`). Paper 004's RR costs
        :math:`O(n)` per user and :math:`O(n^2)` at the server; here only the output is of that
        size (at small :math:`\varepsilon` the output itself is dense).

    Utility:
        Makes a sparse graph dense: about :math:`N / (e^\varepsilon + 1)` false reports per node
        (paper 004, Sec. I).
    """

    name: ClassVar[str] = "warner_rr"
    epsilon_range: ClassVar[EpsilonRange] = EpsilonRange(
        note=(
            "every bit's flip probability 1/(e^eps + 1) (bernoulli_exact) and each node's number of "
            "false reports (binomial_exact) are realised exactly up to 50, where e^-eps is still far "
            "above the 2^-106 resolution; below 2^-20 the float64 rounding of 1/2 - eps/4 is no longer "
            "negligible against eps"
        ),
    )
    scope: ClassVar[Scope] = Scope.EDGES

    def __init__(self, *, epsilon: float) -> None:
        self.epsilon = type(self).epsilon_range.check(epsilon, "epsilon", type(self).name)

    def report_probabilities(self) -> tuple[float, float]:
        """``(p, 1 - p)``: the probabilities that a true neighbour / a non-neighbour is reported."""
        q = flip_probability(self.epsilon)
        return 1.0 / (1.0 + math.exp(-self.epsilon)), q

    @property
    def guarantee(self) -> Guarantee:
        return Guarantee(
            kind=GuaranteeKind.EDGE_LDP,
            epsilon=self.epsilon,
            scope=Scope.EDGES,
            unit_epsilon=2.0 * self.epsilon,  # OR of two reports: tight (see above); x2 is exact
            assumptions=(
                "V_pri (nodes with private edges) is public",
                "each undirected edge is reported by both endpoints (OR rule): 2*eps relationship "
                "DP (paper 004, Prop. 1)",
                "public edges are released as they are",
            ),
        )

    def params(self) -> dict[str, Any]:
        return {"epsilon": self.epsilon}

    def params_for(self, n_max: int) -> dict[str, Any]:
        """:meth:`params` plus ``n_max = |V_pri|`` and the flip probability ``1 / (e^eps + 1)``."""
        n_max = check_int(n_max, "n_max", minimum=0)
        return {**self.params(), "n_max": n_max, "flip_probability": flip_probability(self.epsilon)}

    def __repr__(self) -> str:
        return f"WarnerRR(epsilon={self.epsilon!r})"

    # -- privatization ------------------------------------------------------------------------
    def privatize_nodes(
        self,
        nodes: np.ndarray,
        indptr: np.ndarray,
        indices: np.ndarray,
        candidates: np.ndarray,
        rng: np.random.Generator,
    ) -> np.ndarray:
        """Randomize the private neighbour lists of ``nodes`` (the per-partition function).

        Args:
            nodes (np.ndarray): int64 ``[b]`` distinct reporters, each in ``candidates``.
            indptr (np.ndarray): int64 ``[n + 1]``, the symmetric CSR of ALL private edges
                (:func:`~privgraph.mechanisms.edges.dprr.private_csr`).
            indices (np.ndarray): int64 ``[2 |E_pri|]``, neighbours sorted per row.
            candidates (np.ndarray): int64 sorted ``V_pri``.
            rng (np.random.Generator): the only source of randomness.

        Returns:
            np.ndarray: int64 ``[2, k]`` directed reports ``(reporter, reported)``, sorted.
        """
        rng = check_generator(rng)
        nodes, indptr, indices, candidates, n = check_node_inputs(nodes, indptr, indices, candidates)
        if nodes.size == 0:
            return np.zeros((2, 0), dtype=np.int64)
        _, q = self.report_probabilities()
        n_cand = candidates.size - 1

        deg, owner, nbr = neighbour_ends(nodes, indptr, indices, candidates)
        kept = ~bernoulli_exact(q, rng.random(owner.size), rng)  # a true bit flips w.p. q, realised exactly
        n_false = binomial_exact(n_cand - deg, q, rng)  # Pr(K = 0) realised exactly at any (N - d) q

        # excluded per reporter (block i): its own and its neighbours' positions in candidates
        blocks = np.arange(nodes.size, dtype=np.int64)
        ex_block = np.concatenate([np.repeat(blocks, deg), blocks])
        ex_index = np.concatenate([np.searchsorted(candidates, nbr), np.searchsorted(candidates, nodes)])
        order = np.lexsort((ex_index, ex_block))
        sizes = np.full(nodes.size, candidates.size, dtype=np.int64)
        blk, pos = sample_excluding(sizes, n_false, ex_block[order], ex_index[order], rng)

        src = np.concatenate([owner[kept], nodes[blk]])
        dst = np.concatenate([nbr[kept], candidates[pos]])
        order = np.argsort(src * np.int64(n) + dst, kind="stable")
        return np.ascontiguousarray(np.stack([src[order], dst[order]]).astype(np.int64))

    def combine_reports(self, arcs: np.ndarray, num_nodes: int) -> np.ndarray:
        """The server's undirected graph: ``{u, v}`` when either endpoint reported the other
        (OR rule, :func:`~privgraph.mechanisms.edges.dprr.symmetrize_reports`): int64 ``[2, m]``,
        ``u < v``, sorted, no duplicates."""
        return symmetrize_reports(arcs, num_nodes)

    def privatize_edges(self, graph: GraphData, rng: np.random.Generator) -> np.ndarray:
        """Every node of ``V_pri`` reports (one ``rng`` for all), combined by :meth:`combine_reports`:
        the released private edges, not yet merged with the public ones."""
        if not isinstance(graph, GraphData):
            raise TypeError(f"graph must be a GraphData, got {type(graph).__name__}")
        rng = check_generator(rng)
        candidates = graph.private_nodes()
        if candidates.size == 0:
            return np.zeros((2, 0), dtype=np.int64)
        indptr, indices = private_csr(graph.edges_private, graph.num_nodes)
        arcs = self.privatize_nodes(candidates, indptr, indices, candidates, rng)
        return self.combine_reports(arcs, graph.num_nodes)

    def privatize(self, graph: GraphData, rng: np.random.Generator) -> GraphData:
        """A copy of ``graph`` whose ``edges_private`` are the combined reports that are not public
        edges; ``edges_public`` are kept as they are."""
        released = self.privatize_edges(graph, rng)
        return graph.replace(edges_private=merge_with_public(released, graph.edges_public))
