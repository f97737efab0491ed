"""Blink (Zhu, Tan, Xiao, CCS 2023): link LDP with the budget split between each node's degree
and its links, and the server's Bayesian estimate of every link."""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any, ClassVar

import numpy as np

from privgraph.errors import GraphValidationError
from privgraph.graph import GraphData, canonical_edges, in_sorted, sorted_unique
from privgraph.guarantee import Guarantee, GuaranteeKind, Scope
from privgraph.guarantee.params import check_epsilon, check_int, check_probability
from privgraph.mechanisms.base import MIN_EXACT_EPSILON, EpsilonRange, check_generator
from privgraph.mechanisms.edges.edge_arrays import as_ids, check_node_inputs, merge_with_public, private_csr
from privgraph.mechanisms.edges.link_posterior import (
    FeatureSimilarityPrior,
    LinkPosterior,
    PairClasses,
    PublicNeighbourPrior,
    closure_classes,
)
from privgraph.mechanisms.edges.shapes import NoisyDegrees
from privgraph.mechanisms.edges.warner_rr import WarnerRR
from privgraph.mechanisms.noise import discrete_laplace
from privgraph.mechanisms.registry import register_mechanism
from privgraph.mechanisms.sampling import DISCRETE_LAPLACE_RANGE, bernoulli_exact

__all__ = ["Blink"]

#: Blink's server variants that release a set of edges (Blink-soft, the posterior itself as a dense
#: weighted adjacency, is no edge set: a release carries no edge weight)
VARIANTS = ("hard", "hybrid")
#: the server's priors: Blink's (the beta-model of the noisy degrees), and the same shifted where
#: two nodes share public neighbours (:class:`~privgraph.mechanisms.edges.link_posterior.PublicNeighbourPrior`)
#: or have similar released features (:class:`~privgraph.mechanisms.edges.link_posterior.FeatureSimilarityPrior`)
PRIORS = ("degrees", "public_neighbours", "features")


@register_mechanism
class Blink(NoisyDegrees):
    r"""Blink: link LDP by degree and links, with the server's posterior of every link (Zhu, Tan
    and Xiao, CCS 2023, Sec. 4).

    Every node :math:`v \in V_{pri}` (the nodes with a private edge, treated as public) sends

    - its noisy degree :math:`\tilde d_v = d_v + Z_v`, :math:`\Pr(Z_v = z) \propto
      e^{-\varepsilon_d |z|}` (discrete Laplace, privgraph's rule for an integer; the paper uses
      the continuous Laplace mechanism), :math:`\varepsilon_d = \delta \varepsilon`, and
    - its neighbour list by randomized response, every bit flipped with probability
      :math:`q = 1 / (1 + e^{\varepsilon_a})`, :math:`\varepsilon_a = \varepsilon - \varepsilon_d`
      (:class:`~privgraph.mechanisms.edges.warner_rr.WarnerRR` at :math:`\varepsilon_a`).

    The server (post-processing, :class:`~privgraph.mechanisms.edges.link_posterior.LinkPosterior`): projects :math:`\tilde d` onto
    :math:`[1, N - 2]`, fits the :math:`\beta`-model prior
    :math:`\Pr(a_{uv} = 1) = \sigma(\beta_u + \beta_v)` to it (Eq. 5, the fixed point of
    Chatterjee, Diaconis and Sly), and combines it with the two reports on each pair,
    :math:`x_{uv} \in \{0, 1, 2\}`:
    :math:`\mathrm{logit}\, \hat p_{uv} = \beta_u + \beta_v + \varepsilon_a (2 x_{uv} - 2)`
    (Eq. 6 and 7; one report is as likely under an edge as under a non-edge). It releases

    - ``variant="hard"`` (Blink-hard): every pair with :math:`\hat p_{uv} > 1/2`;
    - ``variant="hybrid"`` (Blink-hybrid's support): the :math:`K = \mathrm{round}(\sum_{u<v}
      \hat p_{uv})` pairs of largest posterior (ties at the :math:`K`-th value kept). The paper
      weights them by :math:`\hat p` in a dense GCN; an edge release carries no weight.

    Guarantee: one bit of :math:`v`'s list changes :math:`d_v` by 1 (:math:`\varepsilon_d`) and one
    reported bit (:math:`\varepsilon_a`): :math:`\varepsilon` edge LDP per node (sequential
    composition). One undirected edge is two bits and two degrees:
    :math:`2 \varepsilon` relationship DP (paper 004, Prop. 1), tight for the two reports. Public
    edges are released as they are.

    Args:
        epsilon (float): the per-node budget, in :math:`[10 \cdot 2^{-20}, 50]`.
        degree_share (float, optional): :math:`\delta = \varepsilon_d / \varepsilon`, in (0, 1)
            (default: ``0.1``, the paper's choice at :math:`\varepsilon \ge 4` on Cora and
            Facebook; its grid is 0.1, 0.4, 0.7, 0.9, 1).
        variant (str, optional): ``"hard"`` or ``"hybrid"`` (default: ``"hard"``).
        prior (str, optional): ``"degrees"`` (Blink's); ``"public_neighbours"``: Blink's prior
            shifted by the odds ratio that the PUBLIC edges show for two nodes with 1, 2 or 3+
            common public neighbours (without public edges: Blink's); ``"features"``: shifted for
            the pairs within each other's 5, 20 or 50 most similar released feature rows, by shifts
            fitted to the reports (EM). Public data and the reports only: post-processing, so it
            spends nothing (default: ``"degrees"``).
        closure (bool, optional): after a first estimate under ``prior``, estimate again with the
            pairs that it joins through 1 or 2+ common neighbours as classes of their own, crossed
            with the prior's, every class's shift fitted to the reports by EM
            (:func:`~privgraph.mechanisms.edges.link_posterior.closure_classes`; triadic closure,
            beyond Blink; post-processing) (default: ``False``).

    Shapes:
        - input: ``edges_private`` :math:`[2, m]`
        - output: released private edges :math:`[2, m']`

    Runtime:
        :math:`O(k \log k + N \log N + U^2 I)` for :math:`k` reports, :math:`U \le N` distinct
        noisy degrees and :math:`I \le 1000` fixed-point steps; no :math:`N \times N` array (the
        paper's server is dense). The pairs no endpoint reported enter only through sorted
        sums (:func:`~privgraph.mechanisms.edges.link_posterior.pairs_above`). Blink-hard with a
        prior that reads no report draws only the pairs its prior leaves within reach of 1/2
        (:meth:`hard_in_reach`, the same law) where they are fewer than the expected false
        reports :math:`|V_{pri}|^2 / (1 + e^{\varepsilon_a})`: at small :math:`\varepsilon` on a
        sparse graph, a few thousand pairs instead of :math:`O(N^2)` reports.
    """

    name: ClassVar[str] = "blink"
    epsilon_range: ClassVar[EpsilonRange] = EpsilonRange(
        low=MIN_EXACT_EPSILON / 0.1,
        note=(
            "epsilon = eps_d + eps_a: eps_d = degree_share * epsilon pays the degrees' discrete Laplace "
            "noise (exact at its dyadic parameter) and eps_a Warner RR's bits (exact up to 50); each "
            "part must be >= 2^-20, so epsilon >= 2^-20 / 0.1 (the default degree_share), and <= 50"
        ),
    )
    scope: ClassVar[Scope] = Scope.EDGES

    def __init__(self, *, epsilon: float, degree_share: float = 0.1, variant: str = "hard",
                 prior: str = "degrees", closure: bool = False) -> None:
        self.epsilon = type(self).epsilon_range.check(epsilon, "epsilon", type(self).name)
        self.degree_share = check_probability(degree_share, "degree_share", open_low=True, open_high=True)
        if variant not in VARIANTS:
            raise ValueError(f"blink: variant must be one of {', '.join(VARIANTS)}, got {variant!r}")
        self.variant = variant
        if prior not in PRIORS:
            raise ValueError(f"blink: prior must be one of {', '.join(PRIORS)}, got {prior!r}")
        self.prior = prior
        if not isinstance(closure, bool):
            raise ValueError(f"blink: closure must be true or false, got {type(closure).__name__}")
        self.closure = closure
        self.allocate()

    def allocate(self) -> tuple[float, float]:
        """``(eps_d, eps_a)``: the degree's and the links' budget, ``eps_d + eps_a <= epsilon`` as
        exact rationals (so ``2 * epsilon``, a float exactly, bounds an edge's cost); each part in
        its sampler's range (a ``ValueError`` names it)."""
        eps = check_epsilon(self.epsilon)
        eps_d = self.degree_share * eps
        eps_a = eps - eps_d
        while eps_a > 0 and Fraction(eps_d) + Fraction(eps_a) > Fraction(eps):  # exactly, not in floats
            eps_a = math.nextafter(eps_a, 0.0)
        DISCRETE_LAPLACE_RANGE.check(eps_d, "eps_d (degree_share * epsilon: the degrees' noise)", self.name)
        WarnerRR.epsilon_range.check(eps_a, "eps_a (epsilon - eps_d: the links' randomized response)", self.name)
        return eps_d, eps_a

    @property
    def guarantee(self) -> Guarantee:
        self.allocate()
        return Guarantee(
            kind=GuaranteeKind.EDGE_LDP,
            epsilon=self.epsilon,
            scope=Scope.EDGES,
            unit_epsilon=2.0 * self.epsilon,  # two degrees and two bits: 2 (eps_d + eps_a) <= 2 eps exactly
            assumptions=(
                "V_pri (nodes with private edges) is public",
                "an undirected edge changes both endpoints' degrees and one bit of each endpoint's "
                "reports: 2*eps relationship DP (paper 004, Prop. 1)",
                "the noisy degrees use discrete Laplace (two-sided geometric) noise",
                "the server's posterior and selection are post-processing of the reports",
                "public edges are released as they are",
            ),
        )

    def params(self) -> dict[str, Any]:
        return {"epsilon": self.epsilon, "degree_share": self.degree_share, "variant": self.variant,
                "prior": self.prior, "closure": self.closure}

    def params_for(self, n_max: int) -> dict[str, Any]:
        """:meth:`params` plus ``n_max = |V_pri|`` and the split ``eps_d``, ``eps_a``."""
        n_max = check_int(n_max, "n_max", minimum=0)
        eps_d, eps_a = self.allocate()
        return {**self.params(), "n_max": n_max, "eps_d": eps_d, "eps_a": eps_a}

    def __repr__(self) -> str:
        return (f"Blink(epsilon={self.epsilon!r}, degree_share={self.degree_share!r}, variant={self.variant!r}, "
                f"prior={self.prior!r}, closure={self.closure!r})")

    def check_input(self, edges_private: np.ndarray, num_nodes: int) -> None:
        """With ``prior="features"``, refuse a graph whose ``V_pri`` (public) exceeds the feature
        prior's bound, before anything is privatized.

        Raises:
            GraphValidationError: ``|V_pri|`` over :attr:`FeatureSimilarityPrior.MAX_NODES` (exit 2)."""
        if self.prior != "features":
            return
        n_pri = int(np.unique(np.asarray(edges_private, dtype=np.int64)).size)
        if n_pri > FeatureSimilarityPrior.MAX_NODES:
            raise GraphValidationError(
                f"blink: prior 'features' compares the feature rows of every pair of V_pri and serves at most "
                f"{FeatureSimilarityPrior.MAX_NODES} nodes with private edges; this graph has {n_pri} (V_pri is "
                f"public): use prior 'degrees' or 'public_neighbours'"
            )

    # -- the users' reports ------------------------------------------------------------------------
    def noisy_degrees(
        self, nodes: np.ndarray, indptr: np.ndarray, indices: np.ndarray, candidates: np.ndarray,
        rng: np.random.Generator,
    ) -> np.ndarray:
        """The noisy private degrees of ``nodes`` (the per-partition function; DPRR's
        ``privatize_nodes`` arguments): int64 ``[b]``, ``d + Z``, ``Z`` discrete Laplace at ``eps_d``."""
        rng = check_generator(rng)
        nodes, indptr, _, _, _ = check_node_inputs(nodes, indptr, indices, candidates)
        eps_d, _ = self.allocate()
        deg = indptr[nodes + 1] - indptr[nodes]
        return (deg + discrete_laplace(rng, eps_d, nodes.size)).astype(np.int64)

    def link_reports(
        self, nodes: np.ndarray, indptr: np.ndarray, indices: np.ndarray, candidates: np.ndarray,
        rng: np.random.Generator,
    ) -> np.ndarray:
        """The directed reports ``[2, k]`` ``(reporter, reported)`` of ``nodes``: Warner RR at ``eps_a``."""
        _, eps_a = self.allocate()
        return WarnerRR(epsilon=eps_a).privatize_nodes(nodes, indptr, indices, candidates, rng)

    # -- the server ----------------------------------------------------------------------------------
    def pair_classes(self, graph: GraphData, candidates: np.ndarray) -> PairClasses | None:
        """What the configured ``prior`` reads of the released view ``graph`` (its public edges, or
        its released features), as the classes of pairs it shifts; None: Blink's prior."""
        if self.prior == "public_neighbours" and graph.edges_public.shape[1]:
            return PublicNeighbourPrior(graph.edges_public, graph.num_nodes).classes(candidates)
        if self.prior == "features" and graph.x is not None:
            return FeatureSimilarityPrior(graph.x).classes(candidates)
        return None

    def estimate(self, candidates: np.ndarray, noisy_degrees: np.ndarray, arcs: np.ndarray, num_nodes: int,
                 classes: PairClasses | None = None, beta: np.ndarray | None = None) -> LinkPosterior:
        """The server's posterior from the reports (post-processing): :class:`~privgraph.mechanisms.edges.link_posterior.LinkPosterior`
        (``beta``: the degrees' beta-model where another estimate already fitted it)."""
        _, eps_a = self.allocate()
        return LinkPosterior(candidates, noisy_degrees, arcs, num_nodes, eps_a, classes, beta=beta)

    def privatize_edges(
        self, graph: GraphData, rng: np.random.Generator, *, noisy_degrees: np.ndarray | None = None
    ) -> np.ndarray:
        """The released private edges among ``V_pri``: int64 ``[2, m']``, ``u < v``, sorted, not yet
        merged with the public edges.

        Args:
            graph (GraphData): the graph: its private edges, and what the prior reads (the public
                edges, or the features: the released ones, as the shape hands them in).
            rng (np.random.Generator): the only source of randomness (the links' reports; the
                degrees' too where ``noisy_degrees`` is None).
            noisy_degrees (np.ndarray, optional): the users' :meth:`noisy_degrees`, one per node of
                ``graph.private_nodes()`` in that order (default: drawn here from ``rng``).
        """
        rng = check_generator(rng)
        candidates = graph.private_nodes()
        indptr, indices = private_csr(graph.edges_private, graph.num_nodes)
        if noisy_degrees is None:
            noisy_degrees = self.noisy_degrees(candidates, indptr, indices, candidates, rng)
        noisy_degrees = as_ids(noisy_degrees, "noisy_degrees", 1)
        if noisy_degrees.size != candidates.size:
            raise ValueError(
                f"noisy_degrees must hold one value per node of V_pri ({candidates.size}), got {noisy_degrees.size}"
            )
        if candidates.size < 2:
            return np.zeros((2, 0), dtype=np.int64)
        classes = self.pair_classes(graph, candidates)
        beta = None
        if self.variant == "hard" and not self.closure and (classes is None or classes.log_odds is not None):
            # the prior reads no report: only the pairs it leaves within reach need theirs
            prior_only = self.estimate(candidates, noisy_degrees, np.zeros((2, 0), np.int64), graph.num_nodes, classes)
            _, q = WarnerRR(epsilon=self.allocate()[1]).report_probabilities()
            if prior_only.reach_size() < q * candidates.size * (candidates.size - 1):
                return self.hard_in_reach(prior_only, graph.edges_private, rng)
            beta = prior_only.beta
        arcs = self.link_reports(candidates, indptr, indices, candidates, rng)
        est = self.estimate(candidates, noisy_degrees, arcs, graph.num_nodes, classes, beta)
        if self.closure:  # again, with the pairs the first estimate closes into triangles as classes
            first = est.hard()
            i, j = np.searchsorted(candidates, first[0]), np.searchsorted(candidates, first[1])
            est = self.estimate(candidates, noisy_degrees, arcs, graph.num_nodes,
                                closure_classes(i, j, candidates.size, classes), est.beta)
        return est.hard() if self.variant == "hard" else est.hybrid()

    def hard_in_reach(self, prior_only: LinkPosterior, edges_private: np.ndarray,
                      rng: np.random.Generator) -> np.ndarray:
        r"""Blink-hard drawn pair by pair where the prior reads no report: the same distribution as
        :meth:`link_reports` then :meth:`LinkPosterior.hard`, at a cost linear in the pairs within
        reach rather than in the reports.

        A pair's two reports are its own two bits, independent of every other pair's, so its count
        is :math:`x_{uv} \sim \mathrm{Binomial}(2, p)` on an edge and :math:`\mathrm{Binomial}(2, 1 - p)`
        off one (each bit flipped with probability :math:`1 / (1 + e^{\varepsilon_a})`,
        :func:`~privgraph.mechanisms.sampling.bernoulli_exact`, as :class:`WarnerRR`). A pair outside
        :meth:`LinkPosterior.reach` is never released whatever its reports, so only the pairs within
        reach draw theirs.

        Args:
            prior_only (LinkPosterior): the server's estimate from the noisy degrees and public data
                alone (no reports; its prior not fitted to them).
            edges_private (np.ndarray): int64 ``[2, m]``, the private edges.
            rng (np.random.Generator): the only source of randomness.
        """
        rng = check_generator(rng)
        i, j, prior = prior_only.reach()
        n = np.int64(prior_only.num_nodes)
        e = canonical_edges(edges_private)
        is_edge = in_sorted(prior_only.candidates[i] * n + prior_only.candidates[j], sorted_unique(e[0] * n + e[1]))
        _, q = WarnerRR(epsilon=prior_only.eps_a).report_probabilities()
        flipped = bernoulli_exact(q, rng.random(2 * i.size), rng).reshape(2, i.size)
        x = (flipped ^ is_edge[None, :]).sum(axis=0)
        keep = prior_only.posterior_logit(prior, x) > 0
        return prior_only.pair_edges(i[keep], j[keep])

    def privatize(self, graph: GraphData, rng: np.random.Generator) -> GraphData:
        """A copy of ``graph`` whose ``edges_private`` are the released pairs that are not public
        edges; ``edges_public`` are kept as they are."""
        return graph.replace(edges_private=merge_with_public(self.privatize_edges(graph, rng), graph.edges_public))
