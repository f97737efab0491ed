"""LocalLap: the local-model LapGraph of paper 004 (noisy degrees give the edge count T)."""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from privgraph.graph import GraphData
from privgraph.guarantee import Guarantee, GuaranteeKind, Scope, sum_upper
from privgraph.mechanisms.base import EpsilonRange, check_generator
from privgraph.guarantee.params import check_int, check_probability
from privgraph.mechanisms.edges.edge_arrays import as_ids, check_node_inputs, merge_with_public, private_csr
from privgraph.mechanisms.edges.edge_rand import num_pairs, pairs_of_ranks, private_pair_ranks
from privgraph.mechanisms.edges.lapgraph import select_top_pairs, split_budget, split_epsilon_range
from privgraph.mechanisms.edges.shapes import NoisyDegrees
from privgraph.mechanisms.noise import discrete_laplace
from privgraph.mechanisms.registry import register_mechanism

__all__ = ["LocalLap"]


@register_mechanism
class LocalLap(NoisyDegrees):
    r"""LocalLap: a local-model version of LapGraph (paper 004, Sec. V-A, the LocalLap baseline).

    Every node :math:`v_i \in V_{pri}` (the nodes with a private edge, treated as public) sends

    - a noisy degree :math:`d^*_i = d_i + Z_i`, :math:`\Pr(Z_i = z) \propto e^{-\varepsilon_1 |z|}`, and
    - its part of the upper triangle of the adjacency with Laplace noise,
      :math:`a_{ij} + \mathrm{Lap}(1 / \varepsilon_2)` for the candidates :math:`j > i`;

    the server computes :math:`T = \lfloor \sum_i d^*_i / 2 \rfloor` (clipped to :math:`[0, M]`,
    :math:`M = N (N - 1) / 2` pairs of :math:`V_{pri}`) and releases the :math:`T` pairs of
    largest noisy value, as LapGraph does. Paper 004 sets
    :math:`\varepsilon_1 = \varepsilon / 10` (``degree_share``), :math:`\varepsilon_2 = 9 \varepsilon / 10`.

    Guarantee: one bit of :math:`v_i`'s neighbour list changes :math:`d_i` by 1
    (:math:`\varepsilon_1`) and at most one of its noisy values by 1 (:math:`\varepsilon_2`):
    :math:`\varepsilon = \varepsilon_1 + \varepsilon_2` edge LDP per node. One undirected edge
    changes two degrees and one noisy value (the one sent by its smaller endpoint), so the release
    is :math:`(2 \varepsilon_1 + \varepsilon_2)`-relationship DP, within the
    :math:`2 \varepsilon` of Prop. 1. The degrees are integers and get DISCRETE Laplace noise
    (privgraph's rule; the paper uses the continuous Laplace mechanism); the noisy values only
    rank the pairs and keep the continuous form. Public edges are released as they are.

    Use: the noisy degrees are per node (:meth:`noisy_degrees`, the per-partition function, with
    :meth:`privatize_nodes`'s arguments); the selection of the :math:`T` largest is global, so
    the graph is released by :meth:`privatize_edges` (optionally given the noisy degrees that the
    partitions computed). The simulation draws the users' noisy values directly in sorted form
    (:func:`~privgraph.mechanisms.edges.lapgraph.select_top_pairs`); the released graph has the
    same distribution as the protocol's. Paper 004's degree-preservation comparison (Fig. 7) uses
    the degrees of this released graph against the true degrees; the noisy degrees
    :math:`d^*_i` are part of the users' reports and may be shown as well (no extra cost).

    Args:
        epsilon (float): the per-node budget :math:`\varepsilon = \varepsilon_1 + \varepsilon_2`, in
            :math:`[10 \cdot 2^{-20}, 50]` (:attr:`epsilon_range`: the default split leaves
            :math:`\varepsilon_1 = 2^{-20}` at the bottom).
        degree_share (float, optional): :math:`\varepsilon_1 / \varepsilon`, in (0, 1) (default: ``0.1``);
            both parts (:math:`\varepsilon_1`: the degrees' discrete Laplace noise) must lie in
            :math:`[2^{-20}, 50]`, checked at construction.

    Shapes:
        - input: ``edges_private`` :math:`[2, m]`
        - output: released private edges :math:`[2, T]`, :math:`E[T] \approx m`

    Runtime:
        :math:`O(|V_{pri}| + (m + T) \log(m + T))`; no :math:`N \times N` values (paper 004,
        Table II: :math:`O(|E|)` at the server).
    """

    name: ClassVar[str] = "local_lap"
    epsilon_range: ClassVar[EpsilonRange] = split_epsilon_range("degree_share", 0.1, "the noisy degrees")
    scope: ClassVar[Scope] = Scope.EDGES

    def __init__(self, *, epsilon: float, degree_share: float = 0.1) -> None:
        self.epsilon = type(self).epsilon_range.check(epsilon, "epsilon", type(self).name)
        self.degree_share = check_probability(degree_share, "degree_share", open_low=True, open_high=True)
        self.allocate()

    def allocate(self) -> tuple[float, float]:
        """``(eps1, eps2)``: the budget of the degree and of the noisy values, ``eps1 + eps2 <= epsilon``;
        each part in its sampler's range (:func:`~privgraph.mechanisms.edges.lapgraph.split_budget`)."""
        return split_budget(self.epsilon, self.degree_share, owner=self.name, share_name="degree_share")

    @property
    def guarantee(self) -> Guarantee:
        eps1, eps2 = self.allocate()
        return Guarantee(
            kind=GuaranteeKind.EDGE_LDP,
            epsilon=self.epsilon,  # allocate() keeps eps1 + eps2 <= epsilon in floats
            scope=Scope.EDGES,
            unit_epsilon=sum_upper(eps1, eps1, eps2),  # two degrees and one noisy value
            assumptions=(
                "V_pri (nodes with private edges) is public",
                f"an undirected edge changes both endpoints' degrees and one noisy value: "
                f"2*eps1 + eps2 = {2 * eps1 + eps2!r} <= 2*eps relationship DP (paper 004, Prop. 1)",
                "public edges are released as they are",
                "the noisy degrees use discrete Laplace (two-sided geometric) noise",
                "the per-pair Laplace values are not released; only the set of the T largest is",
            ),
        )

    def params(self) -> dict[str, Any]:
        return {"epsilon": self.epsilon, "degree_share": self.degree_share}

    def params_for(self, n_max: int) -> dict[str, Any]:
        """:meth:`params` plus ``n_max = |V_pri|`` and the split ``eps1``, ``eps2``."""
        n_max = check_int(n_max, "n_max", minimum=0)
        eps1, eps2 = self.allocate()
        return {**self.params(), "n_max": n_max, "eps1": eps1, "eps2": eps2}

    def __repr__(self) -> str:
        return f"LocalLap(epsilon={self.epsilon!r}, degree_share={self.degree_share!r})"

    # -- the users' degrees and the server's count ----------------------------------------------
    def noisy_degrees(
        self,
        nodes: np.ndarray,
        indptr: np.ndarray,
        indices: np.ndarray,
        candidates: np.ndarray,
        rng: np.random.Generator,
    ) -> np.ndarray:
        """The noisy private degrees :math:`d^*` of ``nodes`` (the per-partition function; the
        arguments are those of DPRR's ``privatize_nodes``): int64 ``[b]``, ``d + Z``, ``Z``
        discrete Laplace at ``eps1``. Unbiased; variance ``2 a / (1 - a)^2``, ``a = e^-eps1``."""
        rng = check_generator(rng)
        nodes, indptr, _, _, _ = check_node_inputs(nodes, indptr, indices, candidates)
        eps1, _ = self.allocate()
        deg = indptr[nodes + 1] - indptr[nodes]
        return (deg + discrete_laplace(rng, eps1, nodes.size)).astype(np.int64)

    @staticmethod
    def edge_count(noisy_degrees: np.ndarray, total: int) -> int:
        """The server's ``T = floor(sum(d*) / 2)``, clipped to ``[0, total]`` (post-processing)."""
        d = as_ids(noisy_degrees, "noisy_degrees", 1)
        total = check_int(total, "total", minimum=0)
        return min(max(int(d.sum()) // 2, 0), total)

    # -- release ----------------------------------------------------------------------------------
    def privatize_edges(
        self, graph: GraphData, rng: np.random.Generator, *, noisy_degrees: np.ndarray | None = None
    ) -> np.ndarray:
        """The released private edges among ``V_pri``: int64 ``[2, T]``, ``u < v``, sorted by
        ``(u, v)``, not yet merged with the public edges.

        Args:
            graph (GraphData): the graph.
            rng (np.random.Generator): the only source of randomness.
            noisy_degrees (np.ndarray, optional): the users' :meth:`noisy_degrees`, one per node of
                ``graph.private_nodes()`` in that order (default: drawn here from ``rng``).
        """
        rng = check_generator(rng)
        candidates, ranks = private_pair_ranks(graph)
        if noisy_degrees is None:
            indptr, indices = private_csr(graph.edges_private, graph.num_nodes)
            noisy_degrees = self.noisy_degrees(candidates, indptr, indices, candidates, rng)
        else:
            noisy_degrees = as_ids(noisy_degrees, "noisy_degrees", 1)
            if noisy_degrees.size != candidates.size:
                raise ValueError(
                    f"noisy_degrees must hold one value per node of V_pri ({candidates.size}), "
                    f"got {noisy_degrees.size}"
                )
        total = num_pairs(candidates.size)
        _, eps2 = self.allocate()
        t = self.edge_count(noisy_degrees, total)
        return pairs_of_ranks(select_top_pairs(ranks, total, t, 1.0 / eps2, rng), candidates)

    def privatize(self, graph: GraphData, rng: np.random.Generator) -> GraphData:
        """A copy of ``graph`` whose ``edges_private`` are the released pairs that are not public
        edges; ``edges_public`` are kept as they are."""
        released = self.privatize_edges(graph, rng)
        return graph.replace(edges_private=merge_with_public(released, graph.edges_public))
