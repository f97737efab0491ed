"""EdgeRand: randomized response on the adjacency of the private pairs (LinkTeller's baseline).

Also the pair-space helpers that the sparse edge baselines share (EdgeRand, LapGraph, LocalLap,
Warner RR): the ranks of the private edges among the unordered pairs of ``V_pri``, and
:func:`sample_excluding`, which places ``k`` items uniformly without replacement in an index space
minus an excluded set (the true edges, or a node and its neighbours) in ``O(k + |excluded|)``.
"""

from __future__ import annotations

import math
from typing import Any, ClassVar

import numpy as np

from privgraph.graph import GraphData
from privgraph.guarantee import Guarantee, GuaranteeKind, Scope
from privgraph.guarantee.params import check_epsilon, check_int
from privgraph.mechanisms.base import EpsilonRange, check_generator
from privgraph.mechanisms.edges.edge_arrays import as_ids, merge_with_public
from privgraph.mechanisms.edges.shapes import Central
from privgraph.mechanisms.exact_binomial import binomial_exact
from privgraph.mechanisms.registry import register_mechanism
from privgraph.mechanisms.sampling import (
    bernoulli_exact,
    rank_pairs,
    sample_excluding,
    unrank_pairs,
)

__all__ = ["EdgeRand", "private_pair_ranks", "pairs_of_ranks", "flip_probability"]


def flip_probability(epsilon: float) -> float:
    r""":math:`1 / (e^\varepsilon + 1)`, the flip probability of eps-randomized response on one bit
    (computed without overflow; 0.0 beyond ``epsilon = 745``)."""
    eps = check_epsilon(epsilon, "epsilon")
    return 1.0 / (1.0 + math.exp(eps)) if eps < 709 else math.exp(-eps)


def private_pair_ranks(graph: GraphData) -> tuple[np.ndarray, np.ndarray]:
    """The pair space of the edge mechanisms: ``V_pri`` and the ranks of the private edges in it.

    Returns:
        tuple: ``candidates`` (sorted ``V_pri``, int64 ``[N]``) and ``ranks`` (int64 ``[m]``,
        ascending): private edge ``(candidates[i], candidates[j])``, ``i < j``, has the row-major
        upper-triangle rank :func:`~privgraph.mechanisms.sampling.rank_pairs` ``(i, j, N)`` among
        the ``N (N - 1) / 2`` unordered pairs of ``V_pri``.
    """
    if not isinstance(graph, GraphData):
        raise TypeError(f"graph must be a GraphData, got {type(graph).__name__}")
    candidates = graph.private_nodes()
    e = graph.edges_private
    i = np.searchsorted(candidates, e[0])
    j = np.searchsorted(candidates, e[1])  # u < v and candidates ascending: i < j
    return candidates, np.sort(rank_pairs(i, j, candidates.size))


def pairs_of_ranks(ranks: np.ndarray, candidates: np.ndarray) -> np.ndarray:
    """The edges ``[2, k]`` (``u < v``) of pair ranks in the pair space of ``candidates``;
    ascending ranks give edges sorted by ``(u, v)``."""
    ranks = as_ids(ranks, "ranks", 1)
    if ranks.size == 0:
        return np.zeros((2, 0), dtype=np.int64)
    i, j = unrank_pairs(ranks, candidates.size)
    return np.stack([candidates[i], candidates[j]]).astype(np.int64)


def num_pairs(n: int) -> int:
    """``n (n - 1) / 2``, the number of unordered pairs of ``n`` nodes."""
    return n * (n - 1) // 2


@register_mechanism
class EdgeRand(Central):
    r"""EdgeRand: randomized response on every unordered pair of private nodes (the edge-DP
    baseline of LinkTeller, Wu et al., IEEE S&P 2022, as its public code runs it; a baseline of
    paper 000, HeteroRR).

    Every pair :math:`\{u, v\}` of nodes of :math:`V_{pri}` (the nodes with a private edge,
    treated as public) is, with probability :math:`s = 2 / (e^\varepsilon + 1)`, replaced by a fair
    coin, and otherwise kept:

    .. math::
        \Pr(\{u, v\} \text{ released}) = \begin{cases} 1 - s/2 = \frac{e^\varepsilon}{e^\varepsilon + 1}
        & \{u, v\} \in E_{pri} \\ s/2 = \frac{1}{e^\varepsilon + 1} & \text{otherwise,} \end{cases}

    independently over pairs. One private edge changes one pair, whose output probabilities differ
    by the factor :math:`(1 - s/2) / (s/2) = e^\varepsilon` exactly: pure
    :math:`\varepsilon`-edge DP. Public edges are released as they are.

    Args:
        epsilon (float): the privacy budget, in :math:`[2^{-20}, 50]` (:attr:`epsilon_range`).

    Shapes:
        - input: ``edges_private`` :math:`[2, m]`, :math:`m = |E_{pri}|`
        - output: released private edges :math:`[2, m']`,
          :math:`E[m'] = m (1 - s/2) + (M - m) s/2`, :math:`M = N (N - 1) / 2`, :math:`N = |V_{pri}|`

    Runtime:
        :math:`O((m + \text{output}) \log(m + \text{output}))` time and memory: one exact Bernoulli
        draw per true edge (:func:`~privgraph.mechanisms.sampling.bernoulli_exact`); the number of
        non-edges that turn into edges is drawn as :math:`\mathrm{Binomial}(M - m, s/2)`
        (:func:`~privgraph.mechanisms.exact_binomial.binomial_exact`: its :math:`\Pr(0)` realised
        exactly however small :math:`(M - m) s / 2` is) and that many non-edge pairs are placed
        uniformly without replacement (:func:`sample_excluding` over the pair ranks). LinkTeller's code
        draws a dense :math:`N \times N` Bernoulli matrix; the output distribution here is the same.

    Utility:
        Dense for small :math:`\varepsilon`: about :math:`M / (e^\varepsilon + 1)` false edges.
    """

    name: ClassVar[str] = "edge_rand"
    epsilon_range: ClassVar[EpsilonRange] = EpsilonRange(
        note=(
            "every pair's flip probability 1/(e^eps + 1) (bernoulli_exact) and the number of "
            "non-edges released (binomial_exact) are realised exactly up to 50, where e^-eps is still "
            "far above the 2^-106 resolution; below 2^-20 the float64 rounding of 1/2 - eps/4 is no "
            "longer negligible against eps"
        ),
    )
    scope: ClassVar[Scope] = Scope.EDGES

    def __init__(self, *, epsilon: float) -> None:
        self.epsilon = type(self).epsilon_range.check(epsilon, "epsilon", type(self).name)

    @property
    def s(self) -> float:
        """The replacement probability :math:`s = 2 / (e^\\varepsilon + 1)`."""
        return 2.0 * flip_probability(self.epsilon)

    def pair_probabilities(self) -> tuple[float, float]:
        """``(Pr(released | edge), Pr(released | non-edge)) = (1 - s/2, s/2)`` for one pair."""
        q = flip_probability(self.epsilon)
        keep = 1.0 / (1.0 + math.exp(-self.epsilon))  # 1 - q, without cancellation
        return keep, q

    @property
    def guarantee(self) -> Guarantee:
        return Guarantee(
            kind=GuaranteeKind.EDGE_DP,
            epsilon=self.epsilon,
            scope=Scope.EDGES,
            assumptions=(
                "V_pri (nodes with private edges) is public; the pair space is the unordered "
                "pairs of V_pri",
                "public edges are released as they are",
            ),
        )

    def params(self) -> dict[str, Any]:
        return {"epsilon": self.epsilon}

    def params_for(self, n_max: int) -> dict[str, Any]:
        """:meth:`params` plus ``n_max = |V_pri|`` and ``s``."""
        n_max = check_int(n_max, "n_max", minimum=0)
        return {**self.params(), "n_max": n_max, "s": self.s}

    def __repr__(self) -> str:
        return f"EdgeRand(epsilon={self.epsilon!r})"

    def privatize_edges(self, graph: GraphData, rng: np.random.Generator) -> np.ndarray:
        """The released private edges among ``V_pri``: int64 ``[2, m']``, ``u < v``, sorted by
        ``(u, v)``, not yet merged with the public edges (which may coincide with some)."""
        rng = check_generator(rng)
        candidates, ranks = private_pair_ranks(graph)
        total = num_pairs(candidates.size)
        if total == 0:
            return np.zeros((2, 0), dtype=np.int64)
        _, q = self.pair_probabilities()
        kept = ranks[~bernoulli_exact(q, rng.random(ranks.size), rng)]  # an edge flips w.p. q = s/2, exactly
        n_new = int(binomial_exact(total - ranks.size, q, rng))  # Pr(0) realised exactly at any M q
        z = np.zeros(ranks.size, dtype=np.int64)
        _, new = sample_excluding(
            np.array([total], np.int64), np.array([n_new], np.int64), z, ranks, rng
        )
        return pairs_of_ranks(np.sort(np.concatenate([kept, new])), candidates)

    def privatize(self, graph: GraphData, rng: np.random.Generator) -> GraphData:
        """A copy of ``graph`` whose ``edges_private`` are the released pairs that are not public
        edges; ``edges_public`` are kept as they are."""
        released = self.privatize_edges(graph, rng)
        return graph.replace(edges_private=merge_with_public(released, graph.edges_public))
