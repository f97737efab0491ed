"""privHRG (Xiao, Chen, Tan, KDD 2014): the all-private HRG baseline of the HeteroRR paper."""

from __future__ import annotations

import math
import numbers
from typing import Any, ClassVar

import numpy as np

from privgraph.graph import GraphData, sorted_unique
from privgraph.guarantee import Guarantee, GuaranteeKind, Scope
from privgraph.mechanisms.base import EpsilonRange, check_generator
from privgraph.guarantee.params import check_int, check_probability
from privgraph.mechanisms.edges.edge_rr import EdgeRR
from privgraph.mechanisms.edges.hrg_settings import (
    HRG_EPSILON_RANGE,
    check_threshold,
    chosen_steps,
    fit_schedule,
    split_budget,
)
from privgraph.mechanisms.edges.shapes import FittedModel
from privgraph.mechanisms.registry import register_mechanism
from privgraph.mechanisms.hrg.convergence import (
    CHECK_CHAINS,
    MAX_STEPS_PER_LEAF,
    MIN_STEPS_PER_LEAF,
    RHAT_THRESHOLD,
    SAFETY_FACTOR,
    check_convergence_settings,
    block_convergence_check,
    check_steps_setting,
    convergence_check,
)
from privgraph.mechanisms.hrg.proxy import DEFAULT_PROXY_MEAN_DEGREE, priv_hrg_proxy
from privgraph.mechanisms.hrg.blocks import LeafBlocks, check_block_leaves, range_blocks
from privgraph.mechanisms.hrg.fit import FittedHRG, fit_hrg
from privgraph.mechanisms.hrg.mcmc import Phase, exponent
from privgraph.mechanisms.hrg.noisy_prob import TAU_B, TAU_C, NoisyDendrogram
from privgraph.mechanisms.hrg.sample import sample_all, sample_internal_nodes, split_internal_nodes

__all__ = ["PrivHRG"]


def _mean_degree(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"proxy_mean_degree must be a real number, got {type(value).__name__} {value!r}")
    v = float(value)
    if not math.isfinite(v) or v < 1.0:
        raise ValueError(f"proxy_mean_degree must be finite and >= 1 (every leaf has an edge), got {v}")
    return v


@register_mechanism
class PrivHRG(FittedModel):
    r"""privHRG: every edge private; one exponential-mechanism MCMC, then CalculateNoisyProb.

    The dendrogram's leaves are the nodes with at least one edge (treated as public). The chain
    accepts with :math:`\min(1, \exp(\varepsilon_1 \Delta\log\mathcal{L} / (2\Delta)))`,
    :math:`\Delta = \ln N + (N - 1)\ln(N/(N - 1))`, :math:`N = \lfloor n^2/4 \rfloor` (privHRG's
    code and paper 002's Lemma 4); the probabilities get discrete Laplace noise
    (:math:`\varepsilon_2`, Alg. 3, parallel composition); edges are sampled over all leaf pairs.
    Same machinery as :class:`~privgraph.mechanisms.edges.edge_rr.EdgeRR` without public steps.

    The chain's length comes from the PUBLIC convergence check
    (:mod:`privgraph.mechanisms.hrg.convergence`) on a synthetic preferential-attachment
    (Barabasi-Albert) graph over the same leaves with the configured public mean degree (no edge is public here, and the edge
    count is private): 4 chains with the same coefficient, budgets doubling from
    :data:`~privgraph.mechanisms.hrg.convergence.MIN_STEPS_PER_LEAF` until the rank-normalized
    split R-hat of the log-likelihood traces is below 1.05; ``"auto"`` runs twice the first
    passing budget.

    Args:
        epsilon (float): :math:`\varepsilon = \varepsilon_1 + \varepsilon_2`, in ``[2^-19, 26]``;
            :math:`\varepsilon_1` in ``[2^-20, 13]``, :math:`\varepsilon_2` in the discrete Laplace
            range (:data:`~privgraph.mechanisms.edges.edge_rr.HRG_EPSILON_RANGE`).
        eps1_share (float, optional): :math:`\varepsilon_1 / \varepsilon`, in (0, 1) (default: ``0.5``).
        steps_per_leaf (float or ``"auto"``, optional): MCMC steps per leaf: ``"auto"`` (the
            check's ``required_steps_per_leaf``) or a number ``>=``
            :data:`~privgraph.mechanisms.hrg.convergence.MIN_STEPS_PER_LEAF` (refused here) and
            ``>=`` what the check requires (refused by :meth:`fit`) (default: ``"auto"``).
        trace_every (int, optional): trace interval; ``0``: about 1000 points (default: ``0``).
        tau_b, tau_c (float, optional): CalculateNoisyProb's thresholds (default: ``0.05``, ``0.01``).
        proxy_mean_degree (float, optional): the PUBLIC mean degree of the check's synthetic
            proxy, ``>= 1``: an assumption about the private graph's density, never read from it
            (default: :data:`~privgraph.mechanisms.hrg.proxy.DEFAULT_PROXY_MEAN_DEGREE`).
        convergence_chains, convergence_max_steps_per_leaf, convergence_seed: as for
            :class:`~privgraph.mechanisms.edges.edge_rr.EdgeRR` (``convergence_seed`` is public and
            left out of :meth:`params`).
        block_leaves (int, optional): ``None``: one chain; an int ``>= 16``: with more leaves, the
            dendrogram's top is a PUBLIC block tree of halves of the sorted leaf ids (every edge
            is private here, so no edge can shape it), one chain and one public check per block,
            in parallel threads (:mod:`~privgraph.mechanisms.hrg.blocks`) (default: ``None``).

    Shapes:
        - input: all edges :math:`[2, |E|]` (public and private alike)
        - output: ``edges_private`` :math:`[2, m']` sampled, ``edges_public`` empty.

    Runtime: as EdgeRR; sampling :math:`O(n + \text{output})`.

    Notes:
        What holds at finite steps: the released dendrogram's law is the chain's law after the
        recorded number of steps; :math:`\varepsilon_1` is the exponential mechanism's only to the
        extent that law is at its stationary law; the check supports convergence on a public
        synthetic proxy, it does not prove it on the private target.
    """

    name: ClassVar[str] = "priv_hrg"
    epsilon_range: ClassVar[EpsilonRange] = HRG_EPSILON_RANGE
    scope: ClassVar[Scope] = Scope.EDGES
    #: public edges are privatized too: the release has no public edges
    all_edges_private: ClassVar[bool] = True

    def __init__(
        self,
        *,
        epsilon: float,
        eps1_share: float = 0.5,
        steps_per_leaf: float | str = "auto",
        trace_every: int = 0,
        tau_b: float = TAU_B,
        tau_c: float = TAU_C,
        proxy_mean_degree: float = DEFAULT_PROXY_MEAN_DEGREE,
        convergence_chains: int = CHECK_CHAINS,
        convergence_max_steps_per_leaf: int = MAX_STEPS_PER_LEAF,
        convergence_seed: int = 0,
        block_leaves: int | None = None,
    ) -> None:
        self.epsilon = type(self).epsilon_range.check(epsilon, "epsilon", type(self).name)
        self.block_leaves = check_block_leaves(block_leaves)
        self.eps1_share = check_probability(eps1_share, "eps1_share", open_low=True, open_high=True)
        self.steps_per_leaf: float | str = check_steps_setting(steps_per_leaf, "steps_per_leaf")
        self.trace_every = check_int(trace_every, "trace_every", minimum=0)
        self.tau_b = check_threshold(tau_b, "tau_b")
        self.tau_c = check_threshold(tau_c, "tau_c")
        self.proxy_mean_degree = _mean_degree(proxy_mean_degree)
        self.convergence_chains, self.convergence_max_steps_per_leaf, self.convergence_seed = (
            check_convergence_settings(convergence_chains, convergence_max_steps_per_leaf, convergence_seed)
        )
        self.eps1, self.eps2 = split_budget(self.epsilon, self.eps1_share, owner=type(self).name)

    @property
    def guarantee(self) -> Guarantee:
        steps = (
            f"steps per leaf chosen by the public convergence check (SAFETY_FACTOR {SAFETY_FACTOR:g} x its "
            "first passing budget), recorded with the release"
            if self.steps_per_leaf == "auto"
            else f"{self.steps_per_leaf!r} steps per leaf, fixed in advance and at least what the public "
            "convergence check requires"
        )
        blocks = () if self.block_leaves is None else (
            f"with more than {self.block_leaves} leaves, the dendrogram's top is a PUBLIC block tree (halves "
            f"of the sorted leaf ids, blocks of at most {self.block_leaves}): the exponential mechanism ranges "
            f"over the dendrograms with that top (same score and Delta); its law is the product of one per "
            f"block, sampled by one chain per block, each block's length from its own public check",
        )
        return Guarantee(
            kind=GuaranteeKind.EDGE_DP,
            epsilon=self.epsilon,
            scope=Scope.EDGES,
            assumptions=blocks + (
                "every edge is treated as private (public edges are privatized too)",
                "the set of nodes with at least one edge is public",
                f"finite-step MCMC: the released dendrogram's law is the chain's law after the recorded "
                f"number of steps ({steps}); eps_1 = {self.eps1!r} is the exponential mechanism's only "
                f"to the extent that law is at the chain's stationary law",
                f"the steps come from a PUBLIC convergence check ({self.convergence_chains} chains from "
                f"random dendrograms on a synthetic preferential-attachment graph over the same leaves "
                f"with public mean degree {self.proxy_mean_degree:g}, same coefficient; rank-normalized split "
                f"R-hat < {RHAT_THRESHOLD:g} on the log-likelihood traces; at least {MIN_STEPS_PER_LEAF} "
                f"steps per leaf); it supports convergence on the public proxy, it does not prove it on "
                f"the private target",
                "acceptance exp(eps_1 / (2 Delta) * dL), Delta = ln N + (N - 1) ln(N / (N - 1)), "
                "N = floor(n^2 / 4)",
                f"CalculateNoisyProb: discrete Laplace noise (eps_2 = {self.eps2!r}) on edge counts, "
                "each edge counted once (parallel composition)",
                "the MCMC trace (diagnostics) is not covered and is never published",
            ),
        )

    def params(self) -> dict[str, Any]:
        """Public parameters (``convergence_seed`` left out: no manifest key may name a seed)."""
        return {
            "epsilon": self.epsilon,
            "eps1_share": self.eps1_share,
            "steps_per_leaf": self.steps_per_leaf,
            "trace_every": self.trace_every,
            "tau_b": self.tau_b,
            "tau_c": self.tau_c,
            "proxy_mean_degree": self.proxy_mean_degree,
            "convergence_chains": self.convergence_chains,
            "convergence_max_steps_per_leaf": self.convergence_max_steps_per_leaf,
            "block_leaves": self.block_leaves,
        }

    def __repr__(self) -> str:
        return (
            f"PrivHRG(epsilon={self.epsilon!r}, eps1_share={self.eps1_share!r}, "
            f"steps_per_leaf={self.steps_per_leaf!r}, block_leaves={self.block_leaves!r})"
        )

    def _phases(self, n_leaves: int, a_pri: float, steps_per_leaf: float | None = None) -> list[Phase]:
        s = float(self.steps_per_leaf) if steps_per_leaf is None else float(steps_per_leaf)
        return [Phase("private", int(round(s * n_leaves)), 0.0, a_pri)]

    @staticmethod
    def _leaves(graph: GraphData) -> np.ndarray:
        return sorted_unique(graph.edges("all").ravel())

    def convergence_check(self, graph: GraphData) -> dict[str, Any]:
        """The PUBLIC convergence check: reads the leaf set (public) and the public parameters only
        (with blocks: one check per block, ``per_block`` in the record)."""
        return self._check(graph)[0]

    def _check(self, graph: GraphData) -> tuple[dict[str, Any], LeafBlocks | None]:
        if not isinstance(graph, GraphData):
            raise TypeError(f"graph must be a GraphData, got {type(graph).__name__}")
        leaf_nodes = self._leaves(graph)
        kernel = Phase("private", 0, 0.0, exponent(self.eps1, int(leaf_nodes.size)))
        settings = dict(seed=self.convergence_seed, chains=self.convergence_chains,
                        max_steps_per_leaf=self.convergence_max_steps_per_leaf,
                        schedule_info={"schedule": "private", "rounds": 1, "certifies": "chain length"})
        if self.block_leaves is None or leaf_nodes.size <= self.block_leaves:
            proxy = priv_hrg_proxy(graph.num_nodes, leaf_nodes, self.proxy_mean_degree, self.convergence_seed)
            return convergence_check(proxy, kernel, **settings), None
        blocks = range_blocks(int(leaf_nodes.size), self.block_leaves)
        proxies = [priv_hrg_proxy(graph.num_nodes, leaf_nodes[idx], self.proxy_mean_degree, self.convergence_seed)
                   for idx in blocks.blocks]
        return block_convergence_check(proxies, blocks, kernel, **settings), blocks

    def fit(self, graph: GraphData, rng: np.random.Generator) -> FittedHRG:
        """The public convergence check, then the MCMC over all edges (as private), then
        CalculateNoisyProb. Raises ``ValidationFailedError`` (before the chain runs) when the check
        fails or the configured steps are below what it requires."""
        if not isinstance(graph, GraphData):
            raise TypeError(f"graph must be a GraphData, got {type(graph).__name__}")
        rng = check_generator(rng)
        record, blocks = self._check(graph)
        steps = chosen_steps(self.steps_per_leaf, record, self.name, "steps_per_leaf")
        edges = graph.edges("all")
        leaf_nodes = sorted_unique(edges.ravel())
        schedule = fit_schedule(self._phases, steps, self.steps_per_leaf == "auto", record, blocks)
        return fit_hrg(
            graph.num_nodes, leaf_nodes, np.zeros((2, 0), dtype=np.int64), edges, None,
            eps1=self.eps1, eps2=self.eps2, schedule=schedule, rng=rng,
            trace_every=self.trace_every, tau_b=self.tau_b, tau_c=self.tau_c, blocks=blocks,
            extra_info={
                "steps_per_leaf": {"private": float(steps)}, "certified_steps_per_leaf": float(steps),
                "convergence_check": record,
            },
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
