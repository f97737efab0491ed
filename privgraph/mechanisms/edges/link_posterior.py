"""The server's side of a link-LDP release (Blink, Zhu, Tan and Xiao, CCS 2023, Sec. 4): the prior
of every pair of ``V_pri`` from the noisy degrees (the beta-model), shifted where a public signal
says more (common public neighbours, similar released features), the posterior of each pair from
its two randomized reports, and the releases that select pairs by it. Everything here is
post-processing of the reports and of public data; nothing holds an ``N x N`` array.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import ClassVar

import numpy as np

from privgraph.graph import in_sorted

__all__ = ["FeatureSimilarityPrior", "LinkPosterior", "PairClasses", "PublicNeighbourPrior", "beta_model_fit",
           "closure_classes", "pairs_above", "report_counts"]


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
    from scipy.special import expit

    return expit(z)


class PairClasses:
    """Pairs of ``V_pri`` that a prior treats apart: ``(i, j)`` positions in ``candidates``
    (``i < j``, sorted by key), their class ``b`` in ``1 .. classes`` (every other pair is class 0),
    and either fixed shifts of the prior logit per class (``log_odds[b]``, ``log_odds[0] = 0``)
    or None: the shifts are fitted to the reports (:class:`LinkPosterior`, EM)."""

    def __init__(self, i: np.ndarray, j: np.ndarray, b: np.ndarray, classes: int,
                 log_odds: np.ndarray | None = None) -> None:
        self.i, self.j, self.b = i.astype(np.int64), j.astype(np.int64), b.astype(np.int64)
        self.classes = int(classes)
        self.log_odds = log_odds


class PublicNeighbourPrior:
    r"""Pair classes from the public edges: class :math:`b` (1, 2, 3 = 3 or more) holds the pairs
    with :math:`b` common public neighbours, and its shift is fixed by the public edges alone:
    :math:`\lambda_b`, the log odds ratio of a public edge between two nodes with :math:`b` common
    public neighbours against two with none, over every pair of the graph (+0.5 smoothing). Where
    the private edges were drawn like the public ones (a random split), the same ratio holds for
    them.

    Args:
        edges_public (np.ndarray): int64 ``[2, m_pub]``.
        num_nodes (int): ``n``.
    """

    CLASSES: ClassVar[int] = 3

    def __init__(self, edges_public: np.ndarray, num_nodes: int) -> None:
        import scipy.sparse as sp

        n = int(num_nodes)
        e = np.asarray(edges_public, dtype=np.int64)
        a = sp.coo_matrix((np.ones(e.shape[1] * 2), (np.r_[e[0], e[1]], np.r_[e[1], e[0]])), shape=(n, n)).tocsr()
        self.adjacency = a
        two = sp.triu(a @ a, k=1).tocoo()  # every pair with a common public neighbour, and how many
        bucket = np.minimum(two.data.astype(np.int64), self.CLASSES)
        keys = two.row.astype(np.int64) * n + two.col
        is_edge = np.isin(keys, e[0] * np.int64(n) + e[1])
        pairs = np.bincount(bucket, minlength=self.CLASSES + 1).astype(np.float64)
        edges = np.bincount(bucket[is_edge], minlength=self.CLASSES + 1).astype(np.float64)
        pairs[0] = n * (n - 1) / 2.0 - pairs[1:].sum()
        edges[0] = e.shape[1] - edges[1:].sum()
        odds = (edges + 0.5) / (pairs - edges + 0.5)
        #: lambda_b for b = 0 .. CLASSES (lambda_0 = 0): public, from the public edges alone
        self.log_odds_ratio = np.log(odds) - math.log(odds[0])

    def classes(self, candidates: np.ndarray) -> PairClasses:
        """The pairs of ``candidates`` with a common public neighbour, by how many."""
        sub = self.adjacency[candidates]
        two = (sub @ sub.T).tocoo()
        keep = two.row < two.col
        i, j = two.row[keep].astype(np.int64), two.col[keep].astype(np.int64)
        b = np.minimum(two.data[keep].astype(np.int64), self.CLASSES)
        order = np.lexsort((j, i))
        return PairClasses(i[order], j[order], b[order], self.CLASSES, self.log_odds_ratio)


class FeatureSimilarityPrior:
    r"""Pair classes from the released features: pair :math:`\{u, v\}` is in class 1, 2 or 3 when
    :math:`v` is among the ``ranks[0]``, ``ranks[1]`` or ``ranks[2]`` nodes of ``V_pri`` most
    cosine-similar to :math:`u` (or :math:`u` to :math:`v`; the closer rank counts). The shifts are
    fitted to the reports (EM, :class:`LinkPosterior`): how much likelier a link is between
    similar nodes is learnt from the noisy reports, not from any private edge.

    Cost: :math:`O(N^2 d)` arithmetic in row blocks of 512 (:math:`O(N r)` memory), the one part of
    the server quadratic in the nodes; :attr:`MAX_NODES` bounds it.

    Args:
        x (np.ndarray): the released features ``[n, d]`` (public, or a mechanism's output).
        ranks (tuple): the class boundaries (default: ``(5, 20, 50)``).
    """

    MAX_NODES: ClassVar[int] = 100_000

    def __init__(self, x: np.ndarray, ranks: tuple[int, int, int] = (5, 20, 50)) -> None:
        self.x = x
        self.ranks = ranks

    def classes(self, candidates: np.ndarray) -> PairClasses:
        """The pairs of ``candidates`` within each other's nearest ``ranks[-1]``, by class."""
        import scipy.sparse as sp

        n_c = candidates.size
        if n_c > self.MAX_NODES:
            raise ValueError(f"the feature-similarity prior serves at most {self.MAX_NODES} nodes of V_pri, got {n_c}")
        rows = np.asarray(self.x[candidates], dtype=np.float64)
        norm = np.linalg.norm(rows, axis=1)
        rows = rows / np.where(norm > 0, norm, 1.0)[:, None]
        sparse = np.count_nonzero(rows) < 0.05 * rows.size
        mat = sp.csr_matrix(rows) if sparse else rows
        k = min(self.ranks[-1], n_c - 1)
        src, dst, rank = [], [], []
        for lo in range(0, n_c, 512):
            hi = min(lo + 512, n_c)
            sim = mat[lo:hi] @ mat.T
            sim = sim.toarray() if sparse else np.asarray(sim)
            sim[np.arange(hi - lo), np.arange(lo, hi)] = -np.inf
            top = np.argpartition(-sim, k - 1, axis=1)[:, :k] if k > 0 else np.zeros((hi - lo, 0), np.int64)
            order = np.argsort(-np.take_along_axis(sim, top, axis=1), axis=1, kind="stable")
            top = np.take_along_axis(top, order, axis=1)
            src.append(np.repeat(np.arange(lo, hi), k))
            dst.append(top.ravel())
            rank.append(np.tile(np.arange(1, k + 1), hi - lo))
        s, d, r = (np.concatenate(a) if a else np.zeros(0, np.int64) for a in (src, dst, rank))
        i, j = np.minimum(s, d), np.maximum(s, d)
        key = i * np.int64(n_c) + j
        order = np.lexsort((r, key))
        key, r = key[order], r[order]
        first = np.r_[True, key[1:] != key[:-1]] if key.size else np.zeros(0, bool)
        key, r = key[first], r[first]  # the closer of the two directions' ranks
        b = 1 + np.searchsorted(np.asarray(self.ranks), r, side="left")
        keep = b <= len(self.ranks)
        return PairClasses(key[keep] // n_c, key[keep] % n_c, b[keep], len(self.ranks))


def closure_classes(i: np.ndarray, j: np.ndarray, n_c: int, base: PairClasses | None = None,
                    cap: int = 2) -> PairClasses:
    r"""Pair classes from a first estimate of the graph (triadic closure): the pairs of ``V_pri``
    with 1 or ``cap``-or-more common neighbours in the estimate's pairs ``(i, j)`` (positions in
    ``V_pri``, :math:`n_c` of them), crossed with ``base``'s classes (a pair in ``base``'s class
    :math:`b` and with :math:`c` common neighbours is in class :math:`b + (B + 1) c`, :math:`B`
    ``base``'s number of classes). Every shift is fitted to the reports (EM, :class:`LinkPosterior`):
    how much likelier a link is between nodes that the reports already join through a third one
    is learnt from the reports. Cost: the estimate's two-paths, :math:`O(\sum_v \hat d_v^2)`.

    >>> c = closure_classes(np.array([0, 0]), np.array([1, 2]), 4)  # 1 and 2 share 0
    >>> c.i.tolist(), c.j.tolist(), c.b.tolist(), c.classes
    ([1], [2], [1], 2)
    """
    import scipy.sparse as sp

    a = sp.coo_matrix((np.ones(2 * i.size), (np.r_[i, j], np.r_[j, i])), shape=(n_c, n_c)).tocsr()
    two = sp.triu(a @ a, k=1).tocoo()
    c_key = two.row.astype(np.int64) * n_c + two.col
    c_val = np.minimum(two.data.astype(np.int64), cap)
    width = 1 if base is None else base.classes + 1
    b_key = np.zeros(0, np.int64) if base is None else base.i * np.int64(n_c) + base.j
    b_val = np.zeros(0, np.int64) if base is None else base.b
    keys = np.union1d(b_key, c_key)
    joint = np.zeros(keys.size, np.int64)
    joint[np.searchsorted(keys, b_key)] += b_val
    joint[np.searchsorted(keys, c_key)] += width * c_val
    keep = joint > 0
    return PairClasses(keys[keep] // n_c, keys[keep] % n_c, joint[keep], width * (cap + 1) - 1)


class LinkPosterior:
    r"""The server's estimate from the reports (post-processing): the prior, the reported pairs
    with their counts and posterior logits, and the two selections.

    The prior logit of a pair is :math:`\beta_u + \beta_v + c + \lambda_{b(u, v)}`: :math:`\beta`
    the beta-model of the noisy degrees (projected onto :math:`[1, N - 2]`, :func:`beta_model_fit`:
    Blink's Eq. 5), :math:`b` the pair's class under ``classes`` (0: no class, :math:`\lambda_0 =
    0`). Blink's prior has no class (:math:`c = 0`). With fixed shifts (``classes.log_odds``),
    ``c`` makes the prior expect :math:`\sum \tilde d / 2` edges; without, ``c`` and
    :math:`\lambda` are fitted to the reports by EM (``em_steps``: the posterior's expected edges in
    each class become the prior's). The posterior logit adds
    :math:`\varepsilon_a (2 x_{uv} - 2)` for the :math:`x_{uv}` reports of the pair (Eq. 6, 7).

    Args:
        candidates (np.ndarray): sorted ``V_pri``.
        noisy_degrees (np.ndarray): their noisy degrees, in that order.
        arcs (np.ndarray): the directed reports ``[2, k]``.
        num_nodes (int): ``n``, for the pair keys.
        eps_a (float): the links' budget.
        classes (PairClasses, optional): the pairs the prior treats apart (default: none).
        em_steps (int): at most this many EM iterations where the shifts are fitted, fewer where
            no shift moves by 1e-7 (default: 30).
        beta (np.ndarray, optional): the beta-model already fitted to these noisy degrees (another
            estimate's ``beta``; default: fitted here).
    """

    def __init__(self, candidates: np.ndarray, noisy_degrees: np.ndarray, arcs: np.ndarray, num_nodes: int,
                 eps_a: float, classes: PairClasses | None = None, em_steps: int = 30,
                 beta: np.ndarray | None = None) -> None:
        self.candidates, self.num_nodes, self.eps_a = candidates, int(num_nodes), float(eps_a)
        n_c = candidates.size
        d = np.clip(np.asarray(noisy_degrees, dtype=np.float64), 1.0, max(n_c - 2.0, 1.0))
        if beta is not None:
            self.beta = np.asarray(beta, dtype=np.float64)
        else:
            self.beta = beta_model_fit(d) if n_c >= 3 else np.zeros(n_c)
        self.keys, self.x = report_counts(arcs, num_nodes)
        self.u = np.searchsorted(candidates, self.keys // num_nodes)
        self.v = np.searchsorted(candidates, self.keys % num_nodes)
        z = np.zeros(0, np.int64)
        cls = classes if classes is not None else PairClasses(z, z, z, 0, np.zeros(1))
        self.off_i, self.off_j, self.off_b = cls.i, cls.j, cls.b
        self.off_keys = candidates[cls.i] * np.int64(num_nodes) + candidates[cls.j]
        self.rep_b = self._class_of(self.keys)  # each reported pair's class
        self.off_reported = np.isin(self.off_keys, self.keys)
        self.shift, self.log_odds = 0.0, np.zeros(cls.classes + 1)
        if classes is not None and cls.log_odds is not None:
            self.log_odds = np.asarray(cls.log_odds, dtype=np.float64)
            self.shift = _solve(lambda c: self._prior_sums(c, self.log_odds).sum(), float(d.sum()) / 2.0)
        elif classes is not None:
            self._fit(em_steps)
        self.off = self.log_odds[self.off_b]
        self.prior_logit = self.beta[self.u] + self.beta[self.v] + self.shift + self.log_odds[self.rep_b]
        self.logit = self.posterior_logit(self.prior_logit, self.x)

    def posterior_logit(self, prior_logit: np.ndarray, x: np.ndarray) -> np.ndarray:
        r"""A pair's posterior logit from its prior logit and its ``x`` reports (Eq. 6, 7):
        :math:`\mathrm{prior} + \varepsilon_a (2 x - 2)`."""
        return prior_logit + self.eps_a * (2.0 * x - 2.0)

    def _class_of(self, keys: np.ndarray) -> np.ndarray:
        out = np.zeros(keys.size, np.int64)
        if self.off_keys.size == 0:
            return out
        at = np.searchsorted(self.off_keys, keys)
        hit = (at < self.off_keys.size) & (self.off_keys[np.minimum(at, self.off_keys.size - 1)] == keys)
        out[hit] = self.off_b[at[hit]]
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

    def _prior_sums(self, shift: float, log_odds: np.ndarray) -> np.ndarray:
        """The prior's expected edges per class at ``shift`` and ``log_odds``."""
        base = self.beta[self.off_i] + self.beta[self.off_j] + shift
        out = np.bincount(self.off_b, weights=_sigmoid(base + log_odds[self.off_b]), minlength=log_odds.size)
        out[0] = self._plain_sum(shift) - float(_sigmoid(base).sum())
        return out

    def _posterior_sums(self, shift: float, log_odds: np.ndarray) -> np.ndarray:
        """The posterior's expected edges per class at ``shift`` and ``log_odds``."""
        rep = self.beta[self.u] + self.beta[self.v] + shift
        out = np.bincount(self.rep_b, weights=_sigmoid(rep + log_odds[self.rep_b] + self.eps_a * (2.0 * self.x - 2.0)),
                          minlength=log_odds.size)
        silent = ~self.off_reported  # the classed pairs no endpoint reported
        base = self.beta[self.off_i[silent]] + self.beta[self.off_j[silent]] + shift - 2.0 * self.eps_a
        out += np.bincount(self.off_b[silent], weights=_sigmoid(base + log_odds[self.off_b[silent]]),
                           minlength=log_odds.size)
        out[0] += (self._plain_sum(shift - 2.0 * self.eps_a) - float(_sigmoid(rep - 2.0 * self.eps_a).sum())
                   - float(_sigmoid(base).sum()))
        return out

    def _fit(self, steps: int) -> None:
        """EM: the shift ``c`` (class 0) and each class's shift, so that the prior expects as many
        edges in each class as the posterior does."""
        lam = np.zeros(self.log_odds.size)
        shift = 0.0
        for _ in range(steps):
            target = self._posterior_sums(shift, lam)
            before = np.r_[shift, lam]
            base = self.beta[self.off_i] + self.beta[self.off_j]
            shift = _solve(lambda c: self._plain_sum(c) - float(_sigmoid(base + c).sum()), target[0], shift)
            base = self.beta[self.off_i] + self.beta[self.off_j] + shift
            for b in range(1, lam.size):
                sel = base[self.off_b == b]
                if sel.size:
                    lam[b] = _solve(lambda t, s=sel: float(_sigmoid(s + t).sum()), target[b], lam[b])
            if np.max(np.abs(np.r_[shift, lam] - before)) < 1e-7:  # the fixed point
                break
        self.shift, self.log_odds = shift, lam

    def _unreported(self, threshold: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(i, j, logit)``: the pairs (positions in ``candidates``) that no endpoint reported,
        with posterior logit above ``threshold``."""
        i, j = pairs_above(self.beta, threshold + 2.0 * self.eps_a - self.shift)
        k = self.candidates[i] * np.int64(self.num_nodes) + self.candidates[j]
        keep = ~np.isin(k, self.keys) & ~np.isin(k, self.off_keys)  # the classed ones: their own logits
        i, j = i[keep], j[keep]
        logit = self.beta[i] + self.beta[j] + self.shift - 2.0 * self.eps_a
        o = ~self.off_reported
        oi, oj = self.off_i[o], self.off_j[o]
        ol = self.beta[oi] + self.beta[oj] + self.shift + self.off[o] - 2.0 * self.eps_a
        above = ol > threshold
        return np.concatenate([i, oi[above]]), np.concatenate([j, oj[above]]), np.concatenate([logit, ol[above]])

    def reach_size(self) -> int:
        r"""How many pairs :meth:`reach` holds, counted without listing them (the unclassed ones
        from the sorted :math:`\beta`, within one float step of the boundary)."""
        lowest = -2.0 * self.eps_a
        classed = self.beta[self.off_i] + self.beta[self.off_j] + self.shift
        unclassed = _count_above(np.sort(self.beta), lowest - self.shift) - int(np.count_nonzero(classed > lowest))
        return max(unclassed, 0) + int(np.count_nonzero(classed + self.off > lowest))

    def reach(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        r"""``(i, j, prior_logit)``: every pair (positions in ``candidates``, ``i < j``) whose
        posterior can pass 1/2, i.e. whose prior logit exceeds :math:`-2 \varepsilon_a` (two reports
        add at most :math:`2 \varepsilon_a`); no other pair is ever in :meth:`hard`. Reads the prior
        only: valid where it was not fitted to the reports (no classes, or fixed shifts)."""
        lowest = -2.0 * self.eps_a
        i, j = pairs_above(self.beta, lowest - self.shift)
        if self.off_keys.size:
            k = self.candidates[i] * np.int64(self.num_nodes) + self.candidates[j]
            keep = ~in_sorted(k, self.off_keys)  # the classed pairs: their own prior
            i, j = i[keep], j[keep]
        prior = self.beta[i] + self.beta[j] + self.shift
        ol = self.beta[self.off_i] + self.beta[self.off_j] + self.shift + self.off
        above = ol > lowest
        return (np.concatenate([i, self.off_i[above]]), np.concatenate([j, self.off_j[above]]),
                np.concatenate([prior, ol[above]]))

    def pair_edges(self, i: np.ndarray, j: np.ndarray) -> np.ndarray:
        """The pairs ``(i, j)`` (positions in ``candidates``) as node ids ``[2, m]``, sorted."""
        u, v = self.candidates[i], self.candidates[j]
        order = np.lexsort((v, u))
        return np.ascontiguousarray(np.stack([u[order], v[order]]).astype(np.int64))

    def hard(self) -> np.ndarray:
        """Blink-hard: every pair of posterior above 1/2 (logit > 0), ``[2, m']`` sorted."""
        r = self.logit > 0
        i0, j0, _ = self._unreported(0.0)
        return self.pair_edges(np.concatenate([self.u[r], i0]), np.concatenate([self.v[r], j0]))

    def expected_edges(self) -> float:
        r""":math:`\sum_{u<v} \hat p_{uv}` over every pair of ``V_pri`` (the posterior's sums per class)."""
        return float(self._posterior_sums(self.shift, self.log_odds).sum())

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
        return self.pair_edges(i[keep], j[keep])


def _solve(f: Callable[[float], float], target: float, guess: float = 0.0) -> float:
    """The ``t`` with ``f(t) = target`` for an increasing ``f``: a bracket grown from ``guess``
    (steps 1, 2, 4, ... up to +-60), then 42 bisections (to ~1e-12 of a unit bracket)."""
    lo, hi, step = guess - 1.0, guess + 1.0, 1.0
    while f(lo) > target and lo > -60.0:
        lo, step = max(lo - step, -60.0), 2.0 * step
    step = 1.0
    while f(hi) < target and hi < 60.0:
        hi, step = min(hi + step, 60.0), 2.0 * step
    for _ in range(42):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if f(mid) < target else (lo, mid)
    return 0.5 * (lo + hi)
