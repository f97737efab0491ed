"""LapGraph: a noisy edge count T and the T pairs of largest Laplace-noised adjacency
(LinkTeller's edge-DP baseline), without materialising the N^2 noisy values."""

from __future__ import annotations

import math
from typing import Any, ClassVar

import numpy as np

from privgraph.graph import GraphData
from privgraph.guarantee import Guarantee, GuaranteeKind, Scope
from privgraph.guarantee.params import check_epsilon, check_int, check_probability
from privgraph.mechanisms.base import MAX_EXACT_EPSILON, MIN_EXACT_EPSILON, EpsilonRange, check_generator
from privgraph.mechanisms.edges.edge_arrays import as_ids, merge_with_public
from privgraph.mechanisms.edges.edge_rand import (
    num_pairs,
    pairs_of_ranks,
    private_pair_ranks,
)
from privgraph.mechanisms.edges.shapes import Central
from privgraph.mechanisms.noise import discrete_laplace
from privgraph.mechanisms.registry import register_mechanism
from privgraph.mechanisms.sampling import DISCRETE_LAPLACE_RANGE, sample_excluding

__all__ = [
    "LapGraph",
    "split_budget",
    "top_laplace_order_statistics",
    "select_top_pairs",
    "split_epsilon_range",
    "SCORE_RANGE",
]


def split_epsilon_range(share_name: str, default_share: float, counts: str) -> EpsilonRange:
    """The configured budget of a mechanism that splits it into discrete Laplace count noise
    (``eps1 = share * epsilon``) and per-pair Laplace scores (``eps2 = epsilon - eps1``), LapGraph
    and LocalLap. Each part must reach 2^-20 (checked by :func:`split_budget`, which knows the
    share); the configured budget must reach ``2^-20 / default_share``, where the default split
    leaves the count exactly 2^-20, and at most 50, the cap of every privgraph budget."""
    return EpsilonRange(
        low=MIN_EXACT_EPSILON / default_share,
        high=MAX_EXACT_EPSILON,
        note=(
            f"epsilon = eps1 + eps2: eps1 = {share_name} * epsilon pays the discrete Laplace noise of "
            f"{counts} (noise.discrete_laplace, exact at its dyadic parameter) and eps2 the per-pair "
            f"Laplace scores; each part must be >= 2^-20, below which float64 rounding is no longer "
            f"negligible against it, so epsilon >= 2^-20 / {default_share:g} (the default "
            f"{share_name}), and <= 50, the cap of every privgraph budget"
        ),
    )


#: The per-pair scores' part eps2: continuous float64 Laplace values that only rank pairs (not
#: released); bounded like every privgraph budget.
SCORE_RANGE = EpsilonRange(
    low=MIN_EXACT_EPSILON,
    high=MAX_EXACT_EPSILON,
    note=(
        "the scores' Laplace noise of scale 1/eps2 only ranks pairs; below 2^-20 float64 rounding is "
        "no longer negligible against eps2, and no privgraph budget exceeds 50"
    ),
)


def split_budget(
    epsilon: float, share: float, *, owner: str = "", share_name: str = "share"
) -> tuple[float, float]:
    """``(eps1, eps2) = (share * epsilon, epsilon - eps1)``, with ``eps1 + eps2 <= epsilon`` in floats.

    Each part is checked against the range of the sampler it pays for: ``eps1`` (discrete Laplace
    count noise) against :data:`~privgraph.mechanisms.sampling.DISCRETE_LAPLACE_RANGE`, ``eps2``
    (per-pair Laplace scores) against :data:`SCORE_RANGE` (both ``[2^-20, 50]``); a
    ``ValueError`` names the part, prefixed by ``owner``.
    """
    eps = check_epsilon(epsilon, "epsilon")
    share = check_probability(share, share_name, open_low=True, open_high=True)
    eps1 = share * eps
    eps2 = eps - eps1
    while eps2 > 0 and eps1 + eps2 > eps:  # never let float rounding overspend
        eps2 = math.nextafter(eps2, 0.0)
    if not (eps1 > 0 and eps2 > 0):
        raise ValueError(f"epsilon={eps} with {share_name}={share} leaves no budget for one of the two parts")
    DISCRETE_LAPLACE_RANGE.check(eps1, f"eps1 ({share_name} * epsilon: the count's discrete Laplace noise)", owner)
    SCORE_RANGE.check(eps2, "eps2 (epsilon - eps1: the per-pair Laplace scores)", owner)
    return eps1, eps2


def top_laplace_order_statistics(n: int, k: int, scale: float, rng: np.random.Generator) -> np.ndarray:
    r"""The ``k`` largest of ``n`` iid Laplace(0, ``scale``) values, descending, in ``O(k)``.

    The descending uniform order statistics are :math:`U_{(n)} = V_1^{1/n}`,
    :math:`U_{(n-i)} = U_{(n-i+1)} V_{i+1}^{1/(n-i)}` (Renyi's representation), computed in logs:
    :math:`\log U_{(n-i)} = -\sum_{l \le i+1} E_l / (n - l + 1)`, :math:`E_l \sim \mathrm{Exp}(1)`;
    the inverse CDF is applied through the upper tail :math:`1 - U = -\mathrm{expm1}(\log U)`, so
    values far in the tail (``n`` up to ~1e18) keep full relative precision.

    Args:
        n (int): number of iid draws (>= 0).
        k (int): how many of the largest to return, ``0 <= k <= n``.
        scale (float): the Laplace scale ``b`` (> 0).
        rng (np.random.Generator): the only source of randomness.

    Returns:
        np.ndarray: float64 ``[k]``, descending.
    """
    rng = check_generator(rng)
    n = check_int(n, "n", minimum=0)
    k = check_int(k, "k", minimum=0)
    if k > n:
        raise ValueError(f"k must be <= n, got k={k}, n={n}")
    scale = check_epsilon(scale, "scale")
    if k == 0:
        return np.zeros(0, dtype=np.float64)
    log_u = -np.cumsum(rng.standard_exponential(k) / (n - np.arange(k, dtype=np.float64)))
    tail = -np.expm1(log_u)  # 1 - U, accurate for U near 1
    with np.errstate(divide="ignore"):
        upper = -scale * np.log(2.0 * tail)  # F^-1(U) for U >= 1/2: 1 - F(x) = exp(-x / b) / 2
        lower = scale * (math.log(2.0) + log_u)  # for U < 1/2: F(x) = exp(x / b) / 2
    return np.where(tail <= 0.5, upper, lower)


def select_top_pairs(
    edge_ranks: np.ndarray, total: int, count: int, scale: float, rng: np.random.Generator
) -> np.ndarray:
    r"""LapGraph's selection: score every pair (``1 + Lap(scale)`` for the true edges,
    ``Lap(scale)`` for the ``total - m`` other pairs) and keep the ``count`` largest; ``O(m + count)``.

    Exact in distribution, without drawing ``total`` values: a non-edge outside the ``count``
    largest non-edge scores has ``count`` scores above it and is never kept, so only those
    (:func:`top_laplace_order_statistics`) compete with the ``m`` true-edge scores; the non-edge
    scores are exchangeable over the non-edge pairs, so the ``k`` kept non-edges are a uniform
    ``k``-subset of the non-edge pairs (:func:`~privgraph.mechanisms.sampling.sample_excluding`).

    Args:
        edge_ranks (np.ndarray): int64 ``[m]`` ascending distinct ranks of the true edges in ``[0, total)``.
        total (int): the number of pairs ``M``.
        count (int): ``T``, how many pairs to keep (clipped to ``[0, total]``).
        scale (float): the Laplace scale of the scores, ``1 / eps2``.
        rng (np.random.Generator): the only source of randomness.

    Returns:
        np.ndarray: int64 ascending ranks of the kept pairs (``min(T, total)`` of them).
    """
    rng = check_generator(rng)
    ranks = as_ids(edge_ranks, "edge_ranks", 1)
    total = check_int(total, "total", minimum=0)
    count = min(max(int(count), 0), total)
    m = ranks.size
    if m and (ranks[0] < 0 or ranks[-1] >= total or np.any(np.diff(ranks) <= 0)):
        raise ValueError(f"edge_ranks must be ascending, distinct, in [0, {total})")
    true_scores = 1.0 + rng.laplace(0.0, scale, m)
    non_scores = top_laplace_order_statistics(total - m, min(count, total - m), scale, rng)
    if count == 0:
        return np.zeros(0, dtype=np.int64)
    scores = np.concatenate([true_scores, non_scores])
    top = np.argpartition(-scores, count - 1)[:count] if count < scores.size else np.arange(scores.size)
    kept_true = ranks[np.sort(top[top < m])]
    n_new = count - kept_true.size  # the kept non-edges are the n_new largest of non_scores
    _, new = sample_excluding(
        np.array([total], np.int64), np.array([n_new], np.int64), np.zeros(m, np.int64), ranks, rng
    )
    return np.sort(np.concatenate([kept_true, new]))


@register_mechanism
class LapGraph(Central):
    r"""LapGraph: the Laplace mechanism on the adjacency, keeping the noisy number of largest
    entries (LinkTeller, Wu et al., IEEE S&P 2022, as its public code runs it; a baseline of
    paper 000, HeteroRR; the central form of paper 004's LocalLap).

    On the :math:`M = N (N - 1) / 2` unordered pairs of :math:`V_{pri}` (the nodes with a private
    edge, treated as public), :math:`m = |E_{pri}|`:

    .. math::
        T = \mathrm{clip}_{[0, M]}(m + Z), \quad \Pr(Z = z) \propto e^{-\varepsilon_1 |z|}, \qquad
        \text{score}(\{u, v\}) = a_{uv} + \mathrm{Lap}(1 / \varepsilon_2),

    and the :math:`T` pairs of largest score are released. :math:`\varepsilon_1 = 0.01\,\varepsilon`
    (``count_share``, LinkTeller's ``eps_factor``), :math:`\varepsilon_2 = \varepsilon - \varepsilon_1`.
    One private edge changes :math:`m` by 1 (:math:`\varepsilon_1`) and one score by 1
    (:math:`\varepsilon_2`): pure :math:`\varepsilon`-edge DP. The edge count gets DISCRETE
    Laplace noise (privgraph's rule for released integer counts; LinkTeller truncates a continuous
    draw); the scores only rank pairs and keep the continuous form. LinkTeller's top-k also
    ranks the unnoised zeros of the other triangle, which can matter only when :math:`T` exceeds
    the number of positive scores (about :math:`M / 2`); here only real pairs are ranked.
    Public edges are released as they are.

    Args:
        epsilon (float): the privacy budget, in :math:`[100 \cdot 2^{-20}, 50]`
            (:attr:`epsilon_range`: the default split leaves :math:`\varepsilon_1 = 2^{-20}` at the
            bottom).
        count_share (float, optional): :math:`\varepsilon_1 / \varepsilon`, in (0, 1)
            (default: ``0.01``); both parts must lie in :math:`[2^{-20}, 50]`
            (:func:`split_budget`), checked at construction.

    Shapes:
        - input: ``edges_private`` :math:`[2, m]`
        - output: released private edges :math:`[2, T]`

    Runtime:
        :math:`O((m + T) \log(m + T))` time and memory: the :math:`m` true-edge scores, the
        :math:`T` largest of the :math:`M - m` non-edge scores (their order statistics, drawn
        directly), and the kept non-edges placed uniformly without replacement. LinkTeller's code
        builds the dense :math:`N \times N` noisy matrix; the output distribution here is the same.
    """

    name: ClassVar[str] = "lapgraph"
    epsilon_range: ClassVar[EpsilonRange] = split_epsilon_range("count_share", 0.01, "the edge count T")
    scope: ClassVar[Scope] = Scope.EDGES

    def __init__(self, *, epsilon: float, count_share: float = 0.01) -> None:
        self.epsilon = type(self).epsilon_range.check(epsilon, "epsilon", type(self).name)
        self.count_share = check_probability(count_share, "count_share", open_low=True, open_high=True)
        self.allocate()

    def allocate(self) -> tuple[float, float]:
        """``(eps1, eps2)``: the budget of the edge count and of the scores, ``eps1 + eps2 <= epsilon``;
        each part in its sampler's range (:func:`split_budget`)."""
        return split_budget(self.epsilon, self.count_share, owner=self.name, share_name="count_share")

    def noisy_edge_count(self, num_edges: int, total: int, rng: np.random.Generator) -> int:
        """``T = clip(num_edges + Z, 0, total)``, ``Z`` discrete Laplace at ``eps1``."""
        rng = check_generator(rng)
        num_edges = check_int(num_edges, "num_edges", minimum=0)
        total = check_int(total, "total", minimum=0)
        eps1, _ = self.allocate()
        z = int(discrete_laplace(rng, eps1, 1)[0])
        return min(max(num_edges + z, 0), total)

    @property
    def guarantee(self) -> Guarantee:
        return Guarantee(
            kind=GuaranteeKind.EDGE_DP,
            epsilon=self.epsilon,  # allocate() keeps eps1 + eps2 <= epsilon in floats
            scope=Scope.EDGES,
            assumptions=(
                "V_pri (nodes with private edges) is public; the pair space is the unordered "
                "pairs of V_pri",
                "public edges are released as they are",
                "the edge count T uses discrete Laplace (two-sided geometric) noise",
                "the per-pair Laplace scores are not released; only the set of the T largest is",
            ),
        )

    def params(self) -> dict[str, Any]:
        return {"epsilon": self.epsilon, "count_share": self.count_share}

    def params_for(self, n_max: int) -> dict[str, Any]:
        """:meth:`params` plus ``n_max = |V_pri|`` and the split ``eps1``, ``eps2``."""
        n_max = check_int(n_max, "n_max", minimum=0)
        eps1, eps2 = self.allocate()
        return {**self.params(), "n_max": n_max, "eps1": eps1, "eps2": eps2}

    def __repr__(self) -> str:
        return f"LapGraph(epsilon={self.epsilon!r}, count_share={self.count_share!r})"

    def privatize_edges(self, graph: GraphData, rng: np.random.Generator) -> np.ndarray:
        """The released private edges among ``V_pri``: int64 ``[2, T]``, ``u < v``, sorted by
        ``(u, v)``, not yet merged with the public edges."""
        rng = check_generator(rng)
        candidates, ranks = private_pair_ranks(graph)
        total = num_pairs(candidates.size)
        _, eps2 = self.allocate()
        t = self.noisy_edge_count(ranks.size, total, rng)
        return pairs_of_ranks(select_top_pairs(ranks, total, t, 1.0 / eps2, rng), candidates)

    def privatize(self, graph: GraphData, rng: np.random.Generator) -> GraphData:
        """A copy of ``graph`` whose ``edges_private`` are the released pairs that are not public
        edges; ``edges_public`` are kept as they are."""
        released = self.privatize_edges(graph, rng)
        return graph.replace(edges_private=merge_with_public(released, graph.edges_public))
