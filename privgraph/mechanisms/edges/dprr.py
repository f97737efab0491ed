"""DPRR: degree-preserving randomized response on the private edges (paper 004, Algorithm 1)."""

from __future__ import annotations

import math
from typing import Any, ClassVar

import numpy as np

from privgraph.graph import GraphData, in_sorted, sorted_unique
from privgraph.guarantee import Guarantee, GuaranteeKind, Scope
from privgraph.guarantee.params import check_epsilon, check_int, check_probability
from privgraph.mechanisms.base import MAX_EXACT_EPSILON, MIN_EXACT_EPSILON, EpsilonRange, check_generator
from privgraph.mechanisms.edges.edge_arrays import (
    check_node_inputs,
    merge_with_public,
    neighbour_ends,
    private_csr,
    symmetrize_reports,
)
from privgraph.mechanisms.edges.shapes import LocalReports
from privgraph.mechanisms.exact_binomial import binomial_exact
from privgraph.mechanisms.noise import discrete_laplace
from privgraph.mechanisms.registry import register_mechanism
from privgraph.mechanisms.sampling import DISCRETE_LAPLACE_RANGE, bernoulli_exact

__all__ = [
    "DPRR",
    "check_node_inputs",
    "neighbour_ends",
    "private_csr",
    "symmetrize_reports",
    "merge_with_public",
    "expected_report_probability",
    "expected_noisy_degree",
]

# _place_false_reports gives up after this many rejection rounds (each accepts >= ~1/4 of the
# pending draws, so a few dozen rounds suffice; hitting the cap means a broken precondition).
_MAX_ROUNDS = 10_000
# expected_report_probability truncates the discrete Laplace sum where the tail mass is below this.
_TAIL_MASS = 1e-15


def _first_copies(keys: np.ndarray) -> np.ndarray:
    """Boolean mask of the first occurrence of each value of ``keys`` (in array order)."""
    order = np.argsort(keys, kind="stable")
    sk = keys[order]
    first = np.ones(keys.size, dtype=bool)
    first[order[1:]] = sk[1:] != sk[:-1]
    return first


def _report_probabilities(eps2: float) -> tuple[float, float, float]:
    """``p``, ``1 - p`` and ``2 p - 1`` of Warner's RR at ``eps2``, computed without cancellation."""
    p = 1.0 / (1.0 + math.exp(-eps2))
    p_flip = 1.0 / (1.0 + math.exp(eps2)) if eps2 < 700 else 0.0
    return p, p_flip, math.tanh(eps2 / 2.0)


def _sampling_probability(d_star: np.ndarray, n_candidates: int, eps2: float) -> np.ndarray:
    """Eq. 6 with the projection onto [0, 1]; ``q = 0`` when the noisy degree is <= 0."""
    _, p_flip, two_p_minus_1 = _report_probabilities(eps2)
    d_star = np.asarray(d_star, dtype=np.float64)
    pos = d_star > 0
    denom = np.where(pos, d_star * two_p_minus_1 + n_candidates * p_flip, 1.0)
    return np.where(pos, np.minimum(d_star / denom, 1.0), 0.0)


def _true_neighbour_probabilities(
    d_star: np.ndarray, n_candidates: int, eps2: float
) -> tuple[np.ndarray, np.ndarray]:
    """``(p q, 1 - p q)`` per node: a true neighbour is reported / not reported (Eq. 7).

    Both without cancellation: ``1 - p q = (1 - q) + q (1 - p)`` with
    ``1 - q = (1 - p)(N - 2 d*) / (d* (2p - 1) + N (1 - p))`` for ``0 < d* < N / 2`` (``q < 1``),
    0 where the projection clips ``q`` to 1 (``d* >= N / 2``) and 1 where ``q = 0`` (``d* <= 0``).
    """
    p, p_flip, two_p_minus_1 = _report_probabilities(eps2)
    d = np.asarray(d_star, dtype=np.float64)
    q = _sampling_probability(d, n_candidates, eps2)
    pos = d > 0
    denom = np.where(pos, d * two_p_minus_1 + n_candidates * p_flip, 1.0)
    one_minus_q = np.where(pos, np.maximum(p_flip * (n_candidates - 2.0 * d) / denom, 0.0), 1.0)
    return p * q, one_minus_q + q * p_flip


def expected_report_probability(d: int, n_candidates: int, eps1: float, eps2: float) -> tuple[float, float]:
    """The exact marginal probabilities that a node of private degree ``d`` reports a candidate.

    Averages Eq. 7 over the discrete Laplace noise of the degree (the sum over ``z`` is
    truncated where the remaining tail mass is below 1e-15; ``q`` lies in [0, 1], so the
    result is exact to 1e-15).

    Returns:
        tuple: ``(p E[q], (1 - p) E[q])``: for a true neighbour and for a non-neighbour.
    """
    d = check_int(d, "d", minimum=0)
    n_candidates = check_int(n_candidates, "n_candidates", minimum=1)
    if d > n_candidates:
        raise ValueError(f"d must be <= n_candidates, got d={d}, n_candidates={n_candidates}")
    eps1 = check_epsilon(eps1, "eps1")
    eps2 = check_epsilon(eps2, "eps2")
    a = math.exp(-eps1)
    # Pr(|Z| > zmax) = 2 a^(zmax + 1) / (1 + a) < _TAIL_MASS
    zmax = max(0, math.ceil((math.log(2.0 / (1.0 + a)) - math.log(_TAIL_MASS)) / eps1))
    if zmax > 10**7:
        raise ValueError(f"eps1={eps1} is too small for the exact sum ({2 * zmax + 1} terms)")
    z = np.arange(-zmax, zmax + 1, dtype=np.float64)
    pmf = math.tanh(eps1 / 2.0) * np.exp(-eps1 * np.abs(z))  # (1 - a) / (1 + a) * a^|z|
    eq = math.fsum((pmf * _sampling_probability(d + z, n_candidates, eps2)).tolist())
    p, p_flip, _ = _report_probabilities(eps2)
    return p * eq, p_flip * eq


def expected_noisy_degree(d: int, n_candidates: int, eps1: float, eps2: float) -> float:
    """The exact expectation of a node's noisy degree (the number of candidates it reports).

    ``E[d~] = d p E[q] + (N - d) (1 - p) E[q]`` with the expectation over the discrete Laplace
    noise of ``d* = d + Z`` and the projection of ``q`` (paper 004, Sec. IV-E; Eq. 11 says
    ``E[d~] ~= d`` for ``d << N``).
    """
    t, f = expected_report_probability(d, n_candidates, eps1, eps2)
    return d * t + (n_candidates - d) * f


def _place_false_reports(
    owners: np.ndarray,
    counts: np.ndarray,
    neighbour_keys: np.ndarray,
    candidates: np.ndarray,
    num_nodes: int,
    rng: np.random.Generator,
) -> np.ndarray:
    """For each owner ``v``, ``counts[v]`` distinct candidates uniformly without replacement
    from ``candidates \\ ({v} \u222a N(v))`` (all owners at once, by rejection in rounds).

    ``neighbour_keys`` holds the sorted keys ``v * n + w`` of the owners' true neighbours. The
    caller ensures every owner has at least half of its non-neighbour candidates left unchosen
    and at most half of all candidates as neighbours, so each draw is accepted with probability
    above about 1/4 and the rounds end quickly. The chosen set is uniform by symmetry: the
    process is invariant under any permutation of an owner's valid candidates.

    Returns:
        np.ndarray: int64 ``[2, sum(counts)]`` reports ``(owner, candidate)``, sorted by key.
    """
    n = np.int64(num_nodes)
    accepted = np.zeros(0, dtype=np.int64)
    pending = np.repeat(owners, counts)
    rounds = 0
    while pending.size:
        rounds += 1
        if rounds > _MAX_ROUNDS:
            raise RuntimeError(
                f"false-report placement did not finish in {_MAX_ROUNDS} rounds "
                "(an owner has too few allowed candidates for the rejection path)"
            )
        picked = candidates[rng.integers(0, candidates.size, size=pending.size)]
        keys = pending * n + picked
        ok = picked != pending
        ok &= ~in_sorted(keys, neighbour_keys)
        ok &= ~in_sorted(keys, accepted)
        ok &= _first_copies(keys)  # among this round's draws, keep the first copy of a key
        accepted = np.sort(np.concatenate([accepted, keys[ok]]))
        pending = pending[~ok]
    return np.stack([accepted // n, accepted % n])


@register_mechanism
class DPRR(LocalReports):
    r"""Degree-preserving randomized response (DPRR) on the private edges (paper 004:
    Algorithm 1, Eq. 6-8, Propositions 1-2, Sec. IV-D to IV-F).

    Every node :math:`v` incident to a private edge (the set :math:`V_{pri}`, treated as
    public) randomizes its private neighbour list over the candidates
    :math:`C = V_{pri} \setminus \{v\}`, :math:`N = |C| = n_{max} - 1`:

    .. math::
        d^*_v = d_v + Z, \quad \Pr(Z = z) \propto e^{-\varepsilon_1 |z|}, \qquad
        p = \frac{e^{\varepsilon_2}}{e^{\varepsilon_2} + 1}, \qquad
        q_v = \mathrm{Proj}_{[0,1]}\left(\frac{d^*_v}{d^*_v (2p - 1) + N (1 - p)}\right),

    .. math::
        \Pr(v \text{ reports } j) = \begin{cases} p\, q_v & j \in \mathcal{N}_{pri}(v) \\
        (1 - p)\, q_v & \text{otherwise} \end{cases}
        \qquad (j \in C),

    with the budget split of Eq. 8:
    :math:`\varepsilon_1 = \max(\sqrt{8 / (n_{max} - 1)}, (1 - \alpha) \varepsilon)`,
    :math:`\varepsilon_2 = \varepsilon - \varepsilon_1`. Each neighbour list is
    :math:`\varepsilon`-edge LDP (Prop. 2: :math:`\varepsilon_1` for the degree, :math:`\varepsilon_2`
    for Warner's RR; edge sampling and the tuning of :math:`q` are post-processing).

    The noisy degree uses DISCRETE Laplace noise (the two-sided geometric, the difference of two
    geometric draws), as privgraph requires for integer counts (floating-point Laplace leaks
    through its low bits, Mironov 2012); the paper's footnote 2 uses the continuous Laplace
    mechanism. The projection sets :math:`q_v = 0` whenever :math:`d^*_v \le 0` (the literal
    Eq. 6 would give a positive ratio of two negatives for a very negative :math:`d^*_v`); this is
    post-processing of :math:`d^*_v` and does not change the guarantee.

    The undirected release contains an edge when EITHER endpoint reports it; one edge changes
    two neighbour lists, so the graph-level promise is :math:`2\varepsilon` relationship DP
    (Prop. 1). Public edges are released as they are.

    Args:
        epsilon (float): the per-node budget :math:`\varepsilon = \varepsilon_1 + \varepsilon_2`,
            in :math:`[2^{-19}, 50]` (:attr:`epsilon_range`; see Budgets).
        alpha (float, optional): the share parameter of Eq. 8, in (0, 1] (default: ``0.9``).

    Shapes:
        - input: ``edges_private`` :math:`[2, |E_{pri}|]`
        - output: noisy private edges :math:`[2, m']`, :math:`E[m'] \approx |E_{pri}|` for sparse graphs

    Runtime:
        :math:`O(|E_{pri}| \log |E_{pri}| + \text{output})` time and memory: true neighbours are
        kept by one exact Bernoulli draw per edge end
        (:func:`~privgraph.mechanisms.sampling.bernoulli_exact` on the smaller of
        :math:`p q_v` and :math:`1 - p q_v`, each computed without cancellation, so both are
        realised exactly: about one uniform per edge end); false reports are
        :math:`K_v \sim \mathrm{Binomial}(N - d_v, (1 - p) q_v)`
        (:func:`~privgraph.mechanisms.exact_binomial.binomial_exact`: :math:`\Pr(K_v = 0)` realised
        exactly even where :math:`(N - d_v)(1 - p) q_v` is below :math:`10^{-16}`, about one
        uniform per node) candidates placed uniformly without replacement (rejection in rounds;
        an explicit complement, :math:`O(N)`, only for a node whose :math:`K_v` or :math:`d_v`
        exceeds half of what is available, where :math:`O(N)` is :math:`O(K_v + d_v)`). No
        :math:`N \times N` array is ever built.

    Budgets (:attr:`epsilon_range`): :math:`\varepsilon \in [2^{-19}, 50]`, and each part of the
    split in :math:`[2^{-20}, 50]`: :math:`\varepsilon_2 \le 50` keeps Warner's flip probability
    and the false-report counts realisable exactly, :math:`\varepsilon_1` is the degree's discrete
    Laplace noise (:data:`~privgraph.mechanisms.sampling.DISCRETE_LAPLACE_RANGE`); below
    :math:`2^{-20}` float64 probabilities stop being meaningful against the part. Checked at
    construction as far as ``alpha`` decides the split (:math:`\varepsilon_2 \le \alpha
    \varepsilon`), and by :meth:`allocate` once :math:`n_{max}` is known.

    Utility:
        :math:`E[\tilde d_v] \approx d_v` for :math:`d_v \ll N` (Eq. 11;
        :func:`expected_noisy_degree` gives it exactly);
        :math:`V[\tilde d_v] \lesssim (n_{max} - 1)/4 + 2/\varepsilon_1^2` (Eq. 15).
    """

    name: ClassVar[str] = "dprr"
    epsilon_range: ClassVar[EpsilonRange] = EpsilonRange(
        low=2.0 * MIN_EXACT_EPSILON,
        high=MAX_EXACT_EPSILON,
        note=(
            "epsilon = eps1 + eps2 (Eq. 8); the randomized response's eps2 <= epsilon <= 50 keeps "
            "its flip probability 1/(e^eps2 + 1) and false-report counts realisable exactly "
            "(bernoulli_exact, binomial_exact), and each part (eps1: the degree's discrete Laplace "
            "noise) must be >= 2^-20, below which float64 probabilities stop being meaningful "
            "against it: so epsilon >= 2^-19"
        ),
    )
    #: The randomized response's part eps2: Warner's flip probability 1/(e^eps2 + 1) and the
    #: false-report counts are realised exactly (bernoulli_exact, binomial_exact) up to 50.
    rr_range: ClassVar[EpsilonRange] = EpsilonRange(
        note="the flip probability 1/(e^eps2 + 1) and the false-report counts are realised exactly up to 50",
    )
    scope: ClassVar[Scope] = Scope.EDGES
    takes_n_max: ClassVar[bool] = True  # paper 004's dataset-wide n_max (multi-graph data)

    def __init__(self, *, epsilon: float, alpha: float = 0.9, n_max: int | None = None) -> None:
        self.epsilon = type(self).epsilon_range.check(epsilon, "epsilon", type(self).name)
        self.alpha = check_probability(alpha, "alpha", open_low=True)
        # paper 004 (Sec. V-A) on multi-graph data: "n_max is the maximum number of nodes (users)
        # in all graphs": one public, dataset-wide n_max instead of each graph's |V_pri|
        self.n_max = None if n_max is None else check_int(n_max, "n_max", minimum=2)
        if self.n_max is not None:
            self.allocate(self.n_max)  # refuse an unusable split now, before any data is read
        # the part of Eq. 8 that alpha already decides: eps2 <= alpha eps (eps1 <= epsilon <= 50)
        high_eps2 = self.alpha * self.epsilon
        if high_eps2 < self.rr_range.low:
            self.rr_range.check(high_eps2, "eps2 <= alpha * epsilon (Eq. 8: the randomized response)", self.name)

    # -- public parameters --------------------------------------------------------------------
    def allocate(self, n_max: int) -> tuple[float, float]:
        """The budget split of Eq. 8 for ``n_max = |V_pri|`` (or the configured dataset-wide
        ``n_max``, which then takes precedence): ``(eps1, eps2)``, ``eps1 + eps2 = epsilon``."""
        n_max = check_int(n_max if self.n_max is None else self.n_max, "n_max", minimum=2)
        eps1 = max(math.sqrt(8.0 / (n_max - 1)), (1.0 - self.alpha) * self.epsilon)
        eps2 = self.epsilon - eps1
        while eps2 > 0 and eps1 + eps2 > self.epsilon:  # never let float rounding overspend
            eps2 = math.nextafter(eps2, 0.0)
        if not eps2 > 0:
            raise ValueError(
                f"DPRR: epsilon={self.epsilon} is too small for a graph with n_max={n_max} nodes "
                f"with private edges: Eq. 8 needs eps1 = max(sqrt(8 / (n_max - 1)), "
                f"(1 - alpha) * epsilon) = {eps1:.6g}, which leaves eps2 = epsilon - eps1 <= 0 "
                f"for the randomized response; use epsilon > {eps1:.6g} (or a larger alpha)"
            )
        # each part in the range of the sampler it pays for (its message names the part)
        DISCRETE_LAPLACE_RANGE.check(
            eps1, f"eps1 (Eq. 8 at n_max={n_max}: the degree's discrete Laplace noise)", self.name
        )
        self.rr_range.check(
            eps2, f"eps2 (Eq. 8 at n_max={n_max}: epsilon - eps1, the randomized response)", self.name
        )
        return eps1, eps2

    @property
    def guarantee(self) -> Guarantee:
        return Guarantee(
            kind=GuaranteeKind.EDGE_LDP,
            epsilon=self.epsilon,  # allocate() keeps eps1 + eps2 <= epsilon in floats
            scope=Scope.EDGES,
            unit_epsilon=2.0 * self.epsilon,  # both endpoints report an edge (x2 is exact in floats)
            assumptions=(
                "V_pri (nodes with private edges) is public",
                "each undirected edge is reported by both endpoints: 2*eps relationship DP "
                "(paper 004, Prop. 1)",
                "public edges are released as they are",
                "the noisy degree uses discrete Laplace (two-sided geometric) noise",
            ),
        )

    def params(self) -> dict[str, Any]:
        """Public parameters for the manifest (``eps1``/``eps2`` depend on ``n_max``: :meth:`params_for`)."""
        return {"epsilon": self.epsilon, "alpha": self.alpha,
                **({} if self.n_max is None else {"n_max": self.n_max})}

    def params_for(self, n_max: int) -> dict[str, Any]:
        """:meth:`params` plus ``n_max`` (the one Eq. 8 used) and the Eq. 8 split ``eps1``, ``eps2``."""
        eps1, eps2 = self.allocate(n_max)
        used = int(n_max) if self.n_max is None else self.n_max
        return {**self.params(), "n_max": used, "eps1": eps1, "eps2": eps2}

    def __repr__(self) -> str:
        n_max = "" if self.n_max is None else f", n_max={self.n_max!r}"
        return f"DPRR(epsilon={self.epsilon!r}, alpha={self.alpha!r}{n_max})"

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
                (:func:`private_csr`).
            indices (np.ndarray): int64 ``[2 |E_pri|]``, neighbours sorted per row.
            candidates (np.ndarray): int64 sorted ``V_pri`` (``n_max = len(candidates)``).
            rng (np.random.Generator): the only source of randomness.

        Returns:
            np.ndarray: int64 ``[2, k]`` directed reports ``(reporter, reported)``, sorted.
        """
        rng = check_generator(rng)
        nodes, indptr, indices, candidates, n = check_node_inputs(nodes, indptr, indices, candidates)
        if nodes.size == 0:
            return np.zeros((2, 0), dtype=np.int64)
        eps1, eps2 = self.allocate(candidates.size)
        _, p_flip, _ = _report_probabilities(eps2)
        n_cand = candidates.size - 1  # N = |C| for every reporter

        # the reporters' edge ends (v, w), in the order of ``nodes``
        deg, owner, nbr = neighbour_ends(nodes, indptr, indices, candidates)
        total = owner.size

        d_star = deg + discrete_laplace(rng, eps1, nodes.size)
        q = _sampling_probability(d_star, n_cand, eps2)
        # a true neighbour is reported w.p. p q: decided on the smaller of p q and 1 - p q, exactly
        report, silent = _true_neighbour_probabilities(d_star, n_cand, eps2)
        by_report = report <= silent
        hit = bernoulli_exact(np.repeat(np.where(by_report, report, silent), deg), rng.random(total), rng)
        kept = hit == np.repeat(by_report, deg)
        n_false = binomial_exact(n_cand - deg, p_flip * q, rng)  # Pr(K = 0) exact at any n p

        # false reports: rejection for the light nodes, explicit complement for the heavy ones
        free = n_cand - deg
        heavy = (n_false > 0) & ((2 * n_false > free) | (2 * deg > n_cand))
        light = (n_false > 0) & ~heavy
        light_nodes = nodes[light]
        sel = in_sorted(owner, np.sort(light_nodes))
        neighbour_keys = np.sort(owner[sel] * np.int64(n) + nbr[sel])
        parts = [
            np.stack([owner[kept], nbr[kept]]),
            _place_false_reports(light_nodes, n_false[light], neighbour_keys, candidates, n, rng),
        ]
        for i in np.flatnonzero(heavy):
            v = nodes[i]
            allowed = np.ones(candidates.size, dtype=bool)
            allowed[np.searchsorted(candidates, indices[indptr[v] : indptr[v + 1]])] = False
            allowed[np.searchsorted(candidates, v)] = False
            chosen = rng.choice(candidates[allowed], size=int(n_false[i]), replace=False)
            parts.append(np.stack([np.full(chosen.size, v, dtype=np.int64), chosen.astype(np.int64)]))
        reports = np.concatenate(parts, axis=1)
        order = np.argsort(reports[0] * np.int64(n) + reports[1], kind="stable")
        return np.ascontiguousarray(reports[:, order])

    def combine_reports(self, arcs: np.ndarray, num_nodes: int) -> np.ndarray:
        """The server's undirected graph: ``{u, v}`` when either endpoint reported the other
        (OR rule, :func:`symmetrize_reports`; 2 eps relationship DP): int64 ``[2, m]``, ``u < v``,
        sorted, no duplicates."""
        return symmetrize_reports(arcs, num_nodes)

    def privatize(self, graph: GraphData, rng: np.random.Generator) -> GraphData:
        """Privatize all private edges in one partition.

        Returns a copy of ``graph`` whose ``edges_private`` are the symmetrized noisy reports
        that are not public edges; ``edges_public`` are kept as they are.
        """
        if not isinstance(graph, GraphData):
            raise TypeError(f"graph must be a GraphData, got {type(graph).__name__}")
        rng = check_generator(rng)
        n = graph.num_nodes
        if graph.edges_private.shape[1] == 0:
            return graph.replace(edges_private=np.zeros((2, 0), dtype=np.int64))
        candidates = sorted_unique(graph.edges_private.ravel())  # V_pri, as graph.private_nodes()
        indptr, indices = private_csr(graph.edges_private, n)
        reports = self.privatize_nodes(candidates, indptr, indices, candidates, rng)
        noisy = symmetrize_reports(reports, n)
        return graph.replace(edges_private=merge_with_public(noisy, graph.edges_public))
