"""privHRG (Xiao, Chen, Tan, KDD 2014): the all-private HRG baseline of the HeteroRR paper."""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from privgraph.graph import GraphData, sorted_unique
from privgraph.mechanisms.base import (
    EpsilonRange,
    Guarantee,
    GuaranteeKind,
    Scope,
    check_generator,
    check_int,
    check_probability,
)
from privgraph.mechanisms.edges.edge_rr import EdgeRR, _threshold, check_steps, split_budget
from privgraph.mechanisms.hrg.fit import FittedHRG, fit_hrg
from privgraph.mechanisms.hrg.mcmc import Phase
from privgraph.mechanisms.hrg.noisy_prob import TAU_B, TAU_C, NoisyDendrogram
from privgraph.mechanisms.hrg.sample import sample_all, sample_internal_nodes, split_internal_nodes

__all__ = ["PrivHRG"]


class PrivHRG:
    r"""privHRG: every edge private; one exponential-mechanism MCMC, then CalculateNoisyProb.

    The dendrogram's leaves are the nodes with at least one edge (treated as public). The chain
    accepts with :math:`\min(1, \exp(\varepsilon_1 \Delta\log\mathcal{L} / (2\Delta)))`,
    :math:`\Delta = \ln N + (N - 1)\ln(N/(N - 1))`, :math:`N = \lfloor n^2/4 \rfloor` (privHRG's
    code and paper 002's Lemma 4); the probabilities get discrete Laplace noise
    (:math:`\varepsilon_2`, Alg. 3, parallel composition); edges are sampled over all leaf pairs.
    Same machinery as :class:`~privgraph.mechanisms.edges.edge_rr.EdgeRR` without public steps.

    Args:
        epsilon (float): :math:`\varepsilon = \varepsilon_1 + \varepsilon_2` (> 0).
        eps1_share (float, optional): :math:`\varepsilon_1 / \varepsilon`, in (0, 1) (default: ``0.5``).
        steps_per_leaf (float, optional): MCMC steps per leaf (default: ``100``).
        trace_every (int, optional): trace interval; ``0``: about 1000 points (default: ``0``).
        tau_b, tau_c (float, optional): CalculateNoisyProb's thresholds (default: ``0.05``, ``0.01``).

    Shapes:
        - input: all edges :math:`[2, |E|]` (public and private alike)
        - output: ``edges_private`` :math:`[2, m']` sampled, ``edges_public`` empty.

    Runtime: as EdgeRR; sampling :math:`O(n + \text{output})`.
    """

    name: ClassVar[str] = "priv_hrg"
    epsilon_range: ClassVar[EpsilonRange] = EpsilonRange()
    scope: ClassVar[Scope] = Scope.EDGES
    #: public edges are privatized too: the release has no public edges
    all_edges_private: ClassVar[bool] = True

    def __init__(
        self,
        *,
        epsilon: float,
        eps1_share: float = 0.5,
        steps_per_leaf: float = 100.0,
        trace_every: int = 0,
        tau_b: float = TAU_B,
        tau_c: float = TAU_C,
    ) -> None:
        self.epsilon = type(self).epsilon_range.check(epsilon, "epsilon", type(self).name)
        self.eps1_share = check_probability(eps1_share, "eps1_share", open_low=True, open_high=True)
        self.steps_per_leaf = check_steps(steps_per_leaf, "steps_per_leaf")
        self.trace_every = check_int(trace_every, "trace_every", minimum=0)
        self.tau_b = _threshold(tau_b, "tau_b")
        self.tau_c = _threshold(tau_c, "tau_c")
        self.eps1, self.eps2 = split_budget(self.epsilon, self.eps1_share)

    @property
    def guarantee(self) -> Guarantee:
        return Guarantee(
            kind=GuaranteeKind.EDGE_DP,
            epsilon=self.epsilon,
            scope=Scope.EDGES,
            assumptions=(
                "every edge is treated as private (public edges are privatized too)",
                "the set of nodes with at least one edge is public",
                f"the MCMC approximates the exponential mechanism (eps_1 = {self.eps1!r}) only at "
                f"convergence; steps = {self.steps_per_leaf!r} per leaf, fixed in advance",
                "acceptance exp(eps_1 / (2 Delta) * dL), Delta = ln N + (N - 1) ln(N / (N - 1)), "
                "N = floor(n^2 / 4)",
                f"CalculateNoisyProb: discrete Laplace noise (eps_2 = {self.eps2!r}) on edge counts, "
                "each edge counted once (parallel composition)",
                "the MCMC trace (diagnostics) is not covered and is never published",
            ),
        )

    def params(self) -> dict[str, Any]:
        return {
            "epsilon": self.epsilon,
            "eps1_share": self.eps1_share,
            "steps_per_leaf": self.steps_per_leaf,
            "trace_every": self.trace_every,
            "tau_b": self.tau_b,
            "tau_c": self.tau_c,
        }

    def __repr__(self) -> str:
        return (
            f"PrivHRG(epsilon={self.epsilon!r}, eps1_share={self.eps1_share!r}, "
            f"steps_per_leaf={self.steps_per_leaf!r})"
        )

    def _phases(self, n_leaves: int, a_pri: float) -> list[Phase]:
        return [Phase("private", int(round(self.steps_per_leaf * n_leaves)), 0.0, a_pri)]

    def fit(self, graph: GraphData, rng: np.random.Generator) -> FittedHRG:
        """MCMC over all edges (as private), then CalculateNoisyProb."""
        if not isinstance(graph, GraphData):
            raise TypeError(f"graph must be a GraphData, got {type(graph).__name__}")
        rng = check_generator(rng)
        edges = graph.edges("all")
        leaf_nodes = sorted_unique(edges.ravel())
        return fit_hrg(
            graph.num_nodes, leaf_nodes, np.zeros((2, 0), dtype=np.int64), edges, None,
            eps1=self.eps1, eps2=self.eps2, schedule=self._phases, rng=rng,
            trace_every=self.trace_every, tau_b=self.tau_b, tau_c=self.tau_c,
        )

    def split(self, fitted: FittedHRG | NoisyDendrogram, parts: int) -> list[np.ndarray]:
        return split_internal_nodes(EdgeRR._release(fitted), parts)

    def sample(
        self, fitted: FittedHRG | NoisyDendrogram, internal_nodes: Any, rng: np.random.Generator
    ) -> np.ndarray:
        """Edges sampled at ``internal_nodes``: int64 ``[2, k]``, ``u < v``, sorted."""
        return sample_internal_nodes(EdgeRR._release(fitted), internal_nodes, rng)

    def diagnostics(self, fitted: FittedHRG) -> dict[str, Any]:
        """MCMC trace and convergence statistics (private run record; not covered by the guarantee)."""
        if not isinstance(fitted, FittedHRG):
            raise TypeError(f"fitted must be a FittedHRG, got {type(fitted).__name__}")
        return fitted.diagnostics()

    def privatize(self, graph: GraphData, rng: np.random.Generator) -> GraphData:
        """Fit and sample; the result has no public edges and the sampled edges as private."""
        if not isinstance(graph, GraphData):
            raise TypeError(f"graph must be a GraphData, got {type(graph).__name__}")
        rng = check_generator(rng)
        fitted = self.fit(graph, rng)
        return graph.replace(
            edges_public=np.zeros((2, 0), dtype=np.int64), edges_private=sample_all(fitted.release, rng)
        )
