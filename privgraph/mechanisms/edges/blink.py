"""Blink (Zhu, Tan, Xiao, CCS 2023): link LDP with the budget split between each node's degree
and its links, and the server's Bayesian estimate of every link."""

from __future__ import annotations

import math
from typing import Any, ClassVar

import numpy as np

from privgraph.graph import GraphData
from privgraph.guarantee import Guarantee, GuaranteeKind, Scope, sum_upper
from privgraph.guarantee.params import check_epsilon, check_int, check_probability
from privgraph.mechanisms.base import MIN_EXACT_EPSILON, EpsilonRange, check_generator
from privgraph.mechanisms.edges.edge_arrays import as_ids, check_node_inputs, merge_with_public, private_csr
from privgraph.mechanisms.edges.shapes import NoisyDegrees
from privgraph.mechanisms.edges.warner_rr import WarnerRR
from privgraph.mechanisms.noise import discrete_laplace
from privgraph.mechanisms.registry import register_mechanism
from privgraph.mechanisms.sampling import DISCRETE_LAPLACE_RANGE

__all__ = ["Blink", "BlinkEstimate", "PublicNeighbourPrior", "beta_model_fit", "pairs_above", "report_counts"]

#: Blink's server variants that release a set of edges (Blink-soft, the posterior itself as a dense
#: weighted adjacency, is no edge set: a release carries no edge weight)
VARIANTS = ("hard", "hybrid")
#: the server's priors: Blink's (the beta-model of the noisy degrees) and the same shifted by the
#: public edges' common neighbours (:class:`PublicNeighbourPrior`)
PRIORS = ("degrees", "public_neighbours")


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

    The server (post-processing, :class:`BlinkEstimate`): projects :math:`\tilde d` onto
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
        prior (str, optional): ``"degrees"`` (Blink's) or ``"public_neighbours"``: Blink's prior
            shifted, pair by pair, by the odds ratio that the PUBLIC edges show for two nodes with
            1, 2 or 3+ common public neighbours (:class:`PublicNeighbourPrior`; public data only,
            so it spends nothing; without public edges it is Blink's) (default: ``"degrees"``).

    Shapes:
        - input: ``edges_private`` :math:`[2, m]`
        - output: released private edges :math:`[2, m']`

    Runtime:
        :math:`O(k \log k + N \log N + U^2 I)` for :math:`k` reports, :math:`U \le N` distinct
        noisy degrees and :math:`I \le 1000` fixed-point steps; no :math:`N \times N` array (the
        paper's server is dense). The pairs no endpoint reported enter only through sorted
        sums (:func:`pairs_above`).
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
                 prior: str = "degrees") -> None:
        self.epsilon = type(self).epsilon_range.check(epsilon, "epsilon", type(self).name)
        self.degree_share = check_probability(degree_share, "degree_share", open_low=True, open_high=True)
        if variant not in VARIANTS:
            raise ValueError(f"blink: variant must be one of {', '.join(VARIANTS)}, got {variant!r}")
        self.variant = variant
        if prior not in PRIORS:
            raise ValueError(f"blink: prior must be one of {', '.join(PRIORS)}, got {prior!r}")
        self.prior = prior
        self.allocate()

    def allocate(self) -> tuple[float, float]:
        """``(eps_d, eps_a)``: the degree's and the links' budget, ``eps_d + eps_a <= epsilon`` in
        floats; each part in its sampler's range (a ``ValueError`` names it)."""
        eps = check_epsilon(self.epsilon)
        eps_d = self.degree_share * eps
        eps_a = eps - eps_d
        while eps_a > 0 and eps_d + eps_a > eps:  # never let float rounding overspend
            eps_a = math.nextafter(eps_a, 0.0)
        DISCRETE_LAPLACE_RANGE.check(eps_d, "eps_d (degree_share * epsilon: the degrees' noise)", self.name)
        WarnerRR.epsilon_range.check(eps_a, "eps_a (epsilon - eps_d: the links' randomized response)", self.name)
        return eps_d, eps_a

    @property
    def guarantee(self) -> Guarantee:
        eps_d, eps_a = self.allocate()
        return Guarantee(
            kind=GuaranteeKind.EDGE_LDP,
            epsilon=self.epsilon,
            scope=Scope.EDGES,
            unit_epsilon=sum_upper(eps_d, eps_d, eps_a, eps_a),  # two degrees and two reported bits
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
                "prior": self.prior}

    def params_for(self, n_max: int) -> dict[str, Any]:
        """:meth:`params` plus ``n_max = |V_pri|`` and the split ``eps_d``, ``eps_a``."""
        n_max = check_int(n_max, "n_max", minimum=0)
        eps_d, eps_a = self.allocate()
        return {**self.params(), "n_max": n_max, "eps_d": eps_d, "eps_a": eps_a}

    def __repr__(self) -> str:
        return (f"Blink(epsilon={self.epsilon!r}, degree_share={self.degree_share!r}, variant={self.variant!r}, "
                f"prior={self.prior!r})")

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
    def estimate(self, candidates: np.ndarray, noisy_degrees: np.ndarray, arcs: np.ndarray, num_nodes: int,
                 edges_public: np.ndarray | None = None) -> BlinkEstimate:
        """The server's posterior from the reports and, with ``prior="public_neighbours"``, the
        public edges (post-processing): :class:`BlinkEstimate`."""
        _, eps_a = self.allocate()
        prior = None
        if self.prior == "public_neighbours" and edges_public is not None and edges_public.shape[1]:
            prior = PublicNeighbourPrior(edges_public, num_nodes)
        return BlinkEstimate(candidates, noisy_degrees, arcs, num_nodes, eps_a, prior)

    def privatize_edges(
        self, graph: GraphData, rng: np.random.Generator, *, noisy_degrees: np.ndarray | None = None
    ) -> np.ndarray:
        """The released private edges among ``V_pri``: int64 ``[2, m']``, ``u < v``, sorted, not yet
        merged with the public edges.

        Args:
            graph (GraphData): the graph.
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
        arcs = self.link_reports(candidates, indptr, indices, candidates, rng)
        est = self.estimate(candidates, noisy_degrees, arcs, graph.num_nodes, graph.edges_public)
        return est.hard() if self.variant == "hard" else est.hybrid()

    def privatize(self, graph: GraphData, rng: np.random.Generator) -> GraphData:
        """A copy of ``graph`` whose ``edges_private`` are the released pairs that are not public
        edges; ``edges_public`` are kept as they are."""
        return graph.replace(edges_private=merge_with_public(self.privatize_edges(graph, rng), graph.edges_public))


def report_counts(arcs: np.ndarray, num_nodes: int) -> tuple[np.ndarray, np.ndarray]:
    """``(keys, x)``: every unordered pair reported by at least one endpoint, as the sorted keys
    ``u * num_nodes + v`` (``u < v``), and ``x`` in {1, 2}, how many of its endpoints reported it.

    >>> report_counts(np.array([[0, 2, 1, 2], [2, 0, 2, 1]]), 3)
    (array([2, 5]), array([2, 2]))
    """
    u, v = np.minimum(arcs[0], arcs[1]), np.maximum(arcs[0], arcs[1])
    keys, x = np.unique(u.astype(np.int64) * np.int64(num_nodes) + v, return_counts=True)
    return keys.astype(np.int64), x.astype(np.int64)


def beta_model_fit(degrees: np.ndarray, *, tol: float = 1e-10, max_steps: int = 1000) -> np.ndarray:
    r"""The :math:`\beta`-model whose expected degrees are ``degrees`` (each in :math:`[1, N - 2]`,
    :math:`N` the number of nodes): :math:`\beta_i = \log d_i - \log \sum_{j \ne i}
    (e^{\beta_i} + e^{-\beta_j})^{-1}`, iterated from 0 (Blink's Eq. 5; Chatterjee, Diaconis and
    Sly's fixed point) until no :math:`\beta` moves by ``tol`` or ``max_steps``. Nodes of one
    degree share one :math:`\beta`, so each step costs :math:`O(U^2)` over the :math:`U`
    distinct degrees.

    >>> b = beta_model_fit(np.full(6, 2.0))
    >>> round(float(5 / (1 + np.exp(-2 * b[0]))), 6)  # each node's expected degree
    2.0
    """
    d = np.asarray(degrees, dtype=np.float64)
    values, inverse, counts = np.unique(d, return_inverse=True, return_counts=True)
    log_d, log_c = np.log(values), np.log(counts.astype(np.float64))
    beta = np.zeros(values.size)
    for _ in range(max_steps):
        # log r_ab = -log(e^{beta_a} + e^{-beta_b}); sum over b with multiplicity, minus the self term
        log_r = -np.logaddexp(beta[:, None], -beta[None, :])
        top = log_r + log_c[None, :]
        peak = top.max(axis=1)
        total = np.exp(top - peak[:, None]).sum(axis=1)
        own = np.exp(np.diagonal(log_r) - peak)
        new = log_d - (peak + np.log(np.maximum(total - own, np.finfo(float).tiny)))
        done = np.max(np.abs(new - beta)) < tol
        beta = new
        if done:
            break
    return beta[inverse]


def pairs_above(values: np.ndarray, threshold: float) -> tuple[np.ndarray, np.ndarray]:
    """``(i, j)``, ``i < j``: every pair of positions with ``values[i] + values[j] > threshold``,
    found from the sorted values in time linear in the output (no pair below it is visited).

    >>> pairs_above(np.array([0.0, 3.0, 1.0, 2.5]), 3.2)
    (array([2, 1, 1]), array([3, 2, 3]))
    """
    order = np.argsort(values, kind="stable")
    b = values[order]
    n = b.size
    start = np.maximum(np.searchsorted(b, threshold - b, side="right"), np.arange(n) + 1)
    counts = np.maximum(n - start, 0)
    i = np.repeat(np.arange(n), counts)
    offsets = np.repeat(np.cumsum(counts) - counts, counts)
    j = start[i] + (np.arange(i.size) - offsets)
    keep = b[i] + b[j] > threshold
    a, c = order[i[keep]], order[j[keep]]
    return np.minimum(a, c), np.maximum(a, c)


def _count_above(b_sorted: np.ndarray, threshold: float) -> int:
    """How many pairs ``i < j`` of the sorted values have ``b_i + b_j > threshold`` (an upper bound
    within one float step of the boundary)."""
    n = b_sorted.size
    start = np.maximum(np.searchsorted(b_sorted, threshold - b_sorted, side="right"), np.arange(n) + 1)
    return int(np.maximum(n - start, 0).sum())


def _sigmoid(z: np.ndarray) -> np.ndarray:
    return np.exp(-np.logaddexp(0.0, -z))


class BlinkEstimate:
    r"""The server's estimate from the reports (post-processing): the prior's :math:`\beta` (and,
    with ``prior``, a shift per pair), the reported pairs with their counts and posterior logits,
    and the two selections.

    The prior logit of a pair is :math:`\beta_u + \beta_v + c + \lambda_{uv}`: ``c = 0`` and
    :math:`\lambda = 0` for Blink's prior; a :class:`PublicNeighbourPrior` sets :math:`\lambda_{uv}`
    on the pairs with a common public neighbour and ``c`` so that the prior's expected number of
    private edges is the noisy degrees' :math:`\sum \tilde d / 2`.

    Args:
        candidates (np.ndarray): sorted ``V_pri``.
        noisy_degrees (np.ndarray): their noisy degrees, in that order.
        arcs (np.ndarray): the directed reports ``[2, k]``.
        num_nodes (int): ``n``, for the pair keys.
        eps_a (float): the links' budget.
        prior (PublicNeighbourPrior, optional): the shifts from the public edges (default: none).
    """

    def __init__(self, candidates: np.ndarray, noisy_degrees: np.ndarray, arcs: np.ndarray, num_nodes: int,
                 eps_a: float, prior: PublicNeighbourPrior | None = None) -> None:
        self.candidates, self.num_nodes, self.eps_a = candidates, int(num_nodes), float(eps_a)
        n_c = candidates.size
        d = np.clip(np.asarray(noisy_degrees, dtype=np.float64), 1.0, max(n_c - 2.0, 1.0))
        self.beta = beta_model_fit(d) if n_c >= 3 else np.zeros(n_c)
        keys, self.x = report_counts(arcs, num_nodes)
        self.keys = keys
        self.u = np.searchsorted(candidates, keys // num_nodes)
        self.v = np.searchsorted(candidates, keys % num_nodes)
        # the pairs whose prior is shifted (positions in candidates, sorted keys) and the shift
        if prior is None:
            self.off_i = self.off_j = np.zeros(0, np.int64)
            self.off_keys, self.off = np.zeros(0, np.int64), np.zeros(0)
        else:
            self.off_i, self.off_j, self.off = prior.shifts(candidates)
            self.off_keys = candidates[self.off_i] * np.int64(num_nodes) + candidates[self.off_j]
        self.shift = 0.0
        self.prior_logit = self.beta[self.u] + self.beta[self.v] + self._offset_of(keys)
        if prior is not None:
            self.shift = self._calibrated_shift(float(d.sum()) / 2.0)
        self.prior_logit = self.prior_logit + self.shift
        self.logit = self.prior_logit + self.eps_a * (2.0 * self.x - 2.0)

    def _offset_of(self, keys: np.ndarray) -> np.ndarray:
        out = np.zeros(keys.size)
        if self.off_keys.size == 0:
            return out
        at = np.searchsorted(self.off_keys, keys)
        hit = (at < self.off_keys.size) & (self.off_keys[np.minimum(at, self.off_keys.size - 1)] == keys)
        out[hit] = self.off[at[hit]]
        return out

    def _plain_sum(self, shift: float) -> float:
        r""":math:`\sum_{u<v} \sigma(\beta_u + \beta_v + \text{shift})` over every pair of
        ``V_pri``, summed over the distinct :math:`\beta` values (:math:`O(U^2)`)."""
        values, counts = np.unique(self.beta, return_counts=True)
        c = counts.astype(np.float64)
        every = 0.0
        for lo in range(0, values.size, 2048):
            s = values[lo:lo + 2048, None] + values[None, :] + shift
            every += float((c[lo:lo + 2048, None] * c[None, :] * _sigmoid(s)).sum())
        return 0.5 * (every - float((c * _sigmoid(2.0 * values + shift)).sum()))

    def _prior_sum(self, shift: float) -> float:
        """The prior's expected number of edges among ``V_pri`` at the global ``shift``."""
        base = self.beta[self.off_i] + self.beta[self.off_j] + shift
        return self._plain_sum(shift) - float(_sigmoid(base).sum()) + float(_sigmoid(base + self.off).sum())

    def _calibrated_shift(self, edges: float) -> float:
        """The global shift ``c`` whose prior expects ``edges`` edges (bisection; the sum is
        increasing in ``c``)."""
        lo, hi = -60.0, 60.0
        for _ in range(80):
            mid = 0.5 * (lo + hi)
            lo, hi = (mid, hi) if self._prior_sum(mid) < edges else (lo, mid)
        return 0.5 * (lo + hi)

    def _unreported(self, threshold: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(i, j, logit)``: the pairs (positions in ``candidates``) that no endpoint reported,
        with posterior logit above ``threshold``."""
        i, j = pairs_above(self.beta, threshold + 2.0 * self.eps_a - self.shift)
        k = self.candidates[i] * np.int64(self.num_nodes) + self.candidates[j]
        keep = ~np.isin(k, self.keys) & ~np.isin(k, self.off_keys)  # those apart: their own logits
        i, j = i[keep], j[keep]
        logit = self.beta[i] + self.beta[j] + self.shift - 2.0 * self.eps_a
        o = ~np.isin(self.off_keys, self.keys)
        oi, oj = self.off_i[o], self.off_j[o]
        ol = self.beta[oi] + self.beta[oj] + self.shift + self.off[o] - 2.0 * self.eps_a
        above = ol > threshold
        return np.concatenate([i, oi[above]]), np.concatenate([j, oj[above]]), np.concatenate([logit, ol[above]])

    def _edges(self, i: np.ndarray, j: np.ndarray) -> np.ndarray:
        u, v = self.candidates[i], self.candidates[j]
        order = np.lexsort((v, u))
        return np.ascontiguousarray(np.stack([u[order], v[order]]).astype(np.int64))

    def hard(self) -> np.ndarray:
        """Blink-hard: every pair of posterior above 1/2 (logit > 0), ``[2, m']`` sorted."""
        r = self.logit > 0
        i0, j0, _ = self._unreported(0.0)
        return self._edges(np.concatenate([self.u[r], i0]), np.concatenate([self.v[r], j0]))

    def expected_edges(self) -> float:
        r""":math:`\sum_{u<v} \hat p_{uv}` over every pair of ``V_pri``: the reported pairs'
        posteriors plus the unreported pairs' (:math:`x = 0`), the pairs without a shift summed over
        the distinct :math:`\beta` values (:math:`O(U^2)`) and the shifted ones one by one."""
        shift = self.shift - 2.0 * self.eps_a
        plain = self._plain_sum(shift)
        reported_plain = self.beta[self.u] + self.beta[self.v] + shift
        o = ~np.isin(self.off_keys, self.keys)
        off_plain = self.beta[self.off_i[o]] + self.beta[self.off_j[o]] + shift
        unreported = (plain - float(_sigmoid(reported_plain).sum()) - float(_sigmoid(off_plain).sum())
                      + float(_sigmoid(off_plain + self.off[o]).sum()))
        return float(_sigmoid(self.logit).sum()) + max(unreported, 0.0)

    def hybrid(self) -> np.ndarray:
        r"""Blink-hybrid's support: the :math:`K = \mathrm{round}(\sum \hat p)` pairs of largest
        posterior, every pair tied with the :math:`K`-th kept, ``[2, m']`` sorted."""
        k = int(round(self.expected_edges()))
        if k <= 0:
            return np.zeros((2, 0), dtype=np.int64)
        if self.logit.size >= k:
            tau = float(np.partition(self.logit, self.logit.size - k)[self.logit.size - k])
        else:  # fewer reported pairs than K: lower the bar until enough unreported ones clear it
            b = np.sort(self.beta)
            top = 2.0 * float(np.abs(b).max()) + abs(self.shift) + float(np.abs(self.off).max(initial=0.0)) + 1.0
            lo, hi = -top - 2.0 * self.eps_a, top
            for _ in range(100):
                mid = 0.5 * (lo + hi)
                enough = _count_above(b, mid + 2.0 * self.eps_a - self.shift) >= k
                lo, hi = (mid, hi) if enough else (lo, mid)
            tau = lo
        i0, j0, l0 = self._unreported(np.nextafter(tau, -np.inf))
        logits = np.concatenate([self.logit, l0])
        i = np.concatenate([self.u, i0])
        j = np.concatenate([self.v, j0])
        kth = float(np.partition(logits, logits.size - k)[logits.size - k]) if logits.size >= k else -np.inf
        keep = logits >= kth
        return self._edges(i[keep], j[keep])


class PublicNeighbourPrior:
    r"""A prior for a private pair from the public edges (post-processing of public data):
    :math:`\lambda_b`, the log odds ratio of an edge between two nodes with :math:`b` common public
    neighbours (buckets 1, 2, 3 or more) against two with none, measured on the PUBLIC edges and
    pairs of the whole graph. Where the private edges were drawn like the public ones (a random
    split), the same ratio holds for them; :class:`BlinkEstimate` adds :math:`\lambda_b` to the
    prior logit of every pair of ``V_pri`` with :math:`b \ge 1` common public neighbours.

    Args:
        edges_public (np.ndarray): int64 ``[2, m_pub]``.
        num_nodes (int): ``n``.
    """

    BUCKETS: ClassVar[int] = 3

    def __init__(self, edges_public: np.ndarray, num_nodes: int) -> None:
        import scipy.sparse as sp

        n = int(num_nodes)
        e = np.asarray(edges_public, dtype=np.int64)
        a = sp.coo_matrix((np.ones(e.shape[1] * 2), (np.r_[e[0], e[1]], np.r_[e[1], e[0]])), shape=(n, n)).tocsr()
        self.adjacency = a
        two = sp.triu(a @ a, k=1).tocoo()  # every pair with a common public neighbour, and how many
        bucket = np.minimum(two.data.astype(np.int64), self.BUCKETS)
        keys = two.row.astype(np.int64) * n + two.col
        edge_keys = np.sort(e[0] * np.int64(n) + e[1])
        is_edge = np.isin(keys, edge_keys)
        pairs = np.bincount(bucket, minlength=self.BUCKETS + 1).astype(np.float64)
        edges = np.bincount(bucket[is_edge], minlength=self.BUCKETS + 1).astype(np.float64)
        pairs[0] = n * (n - 1) / 2.0 - pairs[1:].sum()
        edges[0] = e.shape[1] - edges[1:].sum()
        odds = (edges + 0.5) / (pairs - edges + 0.5)
        #: lambda_b for b = 0 .. BUCKETS (lambda_0 = 0): public, from the public edges alone
        self.log_odds_ratio = np.log(odds) - math.log(odds[0])
        self.n = n

    def shifts(self, candidates: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(i, j, lambda)``: the pairs ``i < j`` (positions in ``candidates``) with a common public
        neighbour, sorted by key, and their shift."""
        sub = self.adjacency[candidates]
        two = (sub @ sub.T).tocoo()
        keep = two.row < two.col
        i, j = two.row[keep].astype(np.int64), two.col[keep].astype(np.int64)
        lam = self.log_odds_ratio[np.minimum(two.data[keep].astype(np.int64), self.BUCKETS)]
        order = np.lexsort((j, i))
        return i[order], j[order], lam[order]
