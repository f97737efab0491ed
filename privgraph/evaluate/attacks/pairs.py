"""The candidate pairs an edge attack is scored on (LinkTeller's and link stealing's protocol).

Positives are the PRIVATE edges of the raw graph (a uniform sample of ``max_positive`` when there
are more); negatives are as many pairs of nodes of V_pri (the nodes incident to a private edge,
which the pipeline declares public) that are not edges of the raw graph, public or private, drawn
uniformly without replacement. The classes are balanced, so precision@k with k = #positives is
also the recall and the F1 of an adversary who predicts as many edges as the density of V_pri
says there are (LinkTeller's density-aware protocol). Sampling is by rejection over the edge keys:
O(E + pairs), never over all node pairs. Randomness: the Generator passed in only.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from privgraph.errors import GraphValidationError
from privgraph.graph import GraphData

__all__ = ["PairSample", "private_edge_pairs", "public_edge_pairs", "pair_keys"]

MIN_POSITIVE = 10


def pair_keys(pairs: np.ndarray, num_nodes: int) -> np.ndarray:
    """``min(u, v) * n + max(u, v)`` for each column of ``pairs`` (an undirected pair's key)."""
    u, v = np.minimum(pairs[0], pairs[1]).astype(np.int64), np.maximum(pairs[0], pairs[1]).astype(np.int64)
    return u * np.int64(num_nodes) + v


@dataclasses.dataclass(frozen=True)
class PairSample:
    """``pairs`` ``[2, m]`` (u < v) and ``labels`` ``[m]`` (True: a private edge of the raw graph)."""

    pairs: np.ndarray
    labels: np.ndarray

    @property
    def num_positive(self) -> int:
        return int(self.labels.sum())


def private_edge_pairs(raw: GraphData, rng: np.random.Generator, *, max_positive: int | None = 1000) -> PairSample:
    """Private edges of ``raw`` against equally many non-edges among its V_pri.

    Raises:
        GraphValidationError: no private edges, fewer than ``MIN_POSITIVE`` of them, or too few
            non-adjacent pairs in V_pri to match them.
    """
    return _edge_pairs(raw, raw.edges_private, raw.private_nodes(), rng, max_positive, "private")


def public_edge_pairs(graph: GraphData, rng: np.random.Generator, *, max_positive: int | None = 1000) -> PairSample:
    """PUBLIC edges against equally many non-edges among the nodes they touch: pairs whose answer
    an adversary knows (the training set of supervised link stealing). Raises as
    :func:`private_edge_pairs`."""
    nodes = np.unique(graph.edges_public.ravel())
    return _edge_pairs(graph, graph.edges_public, nodes, rng, max_positive, "public")


def _edge_pairs(
    raw: GraphData, e: np.ndarray, vpri: np.ndarray, rng: np.random.Generator, max_positive: int | None, kind: str
) -> PairSample:
    if not isinstance(rng, np.random.Generator):
        raise TypeError(f"edge pairs: rng must be a numpy Generator, got {type(rng).__name__}")
    if e.shape[1] == 0:
        raise GraphValidationError(f"edge attack: the graph has no {kind} edges")
    if e.shape[1] < MIN_POSITIVE:
        raise GraphValidationError(f"edge attack: {e.shape[1]} {kind} edges, at least {MIN_POSITIVE} are needed for a score")
    n = raw.num_nodes
    keys = np.unique(pair_keys(e, n))
    if max_positive is not None:
        if isinstance(max_positive, bool) or int(max_positive) < MIN_POSITIVE:
            raise ValueError(f"private_edge_pairs: max_positive must be an int >= {MIN_POSITIVE}, got {max_positive!r}")
        if keys.size > max_positive:
            keys = np.sort(rng.choice(keys, int(max_positive), replace=False))
    existing = np.unique(pair_keys(raw.edges("all"), n))
    free = vpri.size * (vpri.size - 1) // 2 - _within(existing, vpri, n).size
    if free < keys.size:
        raise GraphValidationError(
            f"edge attack: the {vpri.size} nodes of the {kind} edges have {free} non-adjacent pairs, "
            f"fewer than the {keys.size} {kind} edges to match"
        )
    neg = np.empty(0, dtype=np.int64)
    while neg.size < keys.size:
        need = keys.size - neg.size
        u = rng.choice(vpri, 2 * need + 16)
        v = rng.choice(vpri, 2 * need + 16)
        ok = u != v
        cand = pair_keys(np.stack([u[ok], v[ok]]), n)
        cand = cand[~np.isin(cand, existing)]
        cand = cand[~np.isin(cand, neg)]
        _, first = np.unique(cand, return_index=True)  # drop repeats, keep the draw order
        neg = np.concatenate([neg, cand[np.sort(first)][:need]])
    all_keys = np.concatenate([keys, neg])
    pairs = np.stack([all_keys // n, all_keys % n])
    labels = np.concatenate([np.ones(keys.size, bool), np.zeros(neg.size, bool)])
    return PairSample(pairs=pairs, labels=labels)


def _within(keys: np.ndarray, nodes: np.ndarray, n: int) -> np.ndarray:
    """The keys whose both ends are in ``nodes``."""
    inside = np.zeros(n, bool)
    inside[nodes] = True
    return keys[inside[keys // n] & inside[keys % n]]
