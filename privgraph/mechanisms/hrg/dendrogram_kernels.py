"""The numba kernels of :class:`~privgraph.mechanisms.hrg.dendrogram.Dendrogram`: the random
coalescent, the traversals, the counts from scratch and the incremental Fig. 5 move (one step and
the chunked inner loop of the MCMC). The arrays and the counts they keep are described in
:mod:`privgraph.mechanisms.hrg.dendrogram`.
"""

from __future__ import annotations

import numba
import numpy as np

__all__ = ["build_random", "inorder_ranges", "mcmc_step", "preorder", "recompute_counts", "run_chunk"]


@numba.njit(cache=True)
def _ll(e: float, pairs: float) -> float:
    """``e ln(e/N) + (N - e) ln(1 - e/N)`` with ``0 ln 0 = 0`` (one internal node of Eq. 10)."""
    if e <= 0.0 or e >= pairs:
        return 0.0
    p = e / pairs
    return e * np.log(p) + (pairs - e) * np.log1p(-p)


@numba.njit(cache=True)
def build_random(n, pick_a, pick_b, parent, left, right):  # pragma: no cover - jitted
    """Random coalescent: repeatedly join two uniformly chosen clusters (pre-drawn picks)."""
    active = np.arange(n, dtype=np.int64)
    size = n
    for k in range(n - 1):
        i = pick_a[k]
        j = pick_b[k]
        if j >= i:
            j += 1
        a = active[i]
        b = active[j]
        node = n + k
        left[k] = a
        right[k] = b
        parent[a] = node
        parent[b] = node
        lo = min(i, j)
        hi = max(i, j)
        active[lo] = node
        active[hi] = active[size - 1]
        size -= 1
    parent[2 * n - 2] = -1


@numba.njit(cache=True)
def preorder(n, root, left, right):  # pragma: no cover - jitted
    """All node ids in pre-order (left subtree before right), and each node's depth."""
    total = 2 * n - 1
    order = np.empty(total, dtype=np.int64)
    depth = np.zeros(total, dtype=np.int64)
    stack = np.empty(total + 1, dtype=np.int64)
    top = 0
    stack[top] = root
    top += 1
    k = 0
    while top > 0:
        top -= 1
        x = stack[top]
        order[k] = x
        k += 1
        if x >= n:
            i = x - n
            depth[left[i]] = depth[x] + 1
            depth[right[i]] = depth[x] + 1
            stack[top] = right[i]
            stack[top + 1] = left[i]
            top += 2
    return order[:k], depth


@numba.njit(cache=True)
def recompute_counts(n, root, left, right, parent, w_pub, w_pri, w_work, eu, ev, m_pub,
                     cnt_pub, cnt_pri, work, e_pub, e_pri, lca):  # pragma: no cover - jitted
    """Every count from the structure: leaf counts bottom-up, each edge's LCA by climbing."""
    order, depth = preorder(n, root, left, right)
    if order.size != 2 * n - 1:
        return False
    parent[root] = -1
    for k in range(order.size - 1, -1, -1):
        x = order[k]
        if x < n:
            cnt_pub[x] = w_pub[x]
            cnt_pri[x] = w_pri[x]
            work[x] = w_work[x]
        else:
            i = x - n
            a = left[i]
            b = right[i]
            parent[a] = x
            parent[b] = x
            cnt_pub[x] = cnt_pub[a] + cnt_pub[b]
            cnt_pri[x] = cnt_pri[a] + cnt_pri[b]
            work[x] = work[a] + work[b]
            e_pub[i] = 0
            e_pri[i] = 0
    for e in range(eu.size):
        a = eu[e]
        b = ev[e]
        while depth[a] > depth[b]:
            a = parent[a]
        while depth[b] > depth[a]:
            b = parent[b]
        while a != b:
            a = parent[a]
            b = parent[b]
        i = a - n
        lca[e] = i
        if e < m_pub:
            e_pub[i] += 1
        else:
            e_pri[i] += 1
    return True


@numba.njit(cache=True, inline="always")
def _edges_at(S, n, ri, ci, left, right, lca, indptr, adj, m_pub, stack, buf):  # pragma: no cover - jitted
    """The edges incident to the leaves of subtree ``S`` whose LCA is internal node ``ri`` (S-C
    edges) or ``ci`` (A-B edges), into ``buf``; returns their number and how many of the S-C
    edges are public and private (edge ids below ``m_pub`` are public)."""
    nb = 0
    sc_pub = 0
    sc_pri = 0
    stack[0] = S
    top = 1
    while top > 0:
        top -= 1
        x = stack[top]
        if x < n:
            for p in range(indptr[x], indptr[x + 1]):
                e = adj[p]
                el = lca[e]
                if el == ri:
                    if e < m_pub:
                        sc_pub += 1
                    else:
                        sc_pri += 1
                    buf[nb] = e
                    nb += 1
                elif el == ci:
                    buf[nb] = e
                    nb += 1
        else:
            xi = x - n
            stack[top] = left[xi]
            stack[top + 1] = right[xi]
            top += 2
    return nb, sc_pub, sc_pri


@numba.njit(cache=True, inline="always")
def _delta_ll(lo, hi, e, cnt, ci, ri, X, C, Y):  # pragma: no cover - jitted
    """The change of one kind's log-likelihood when ``c = (X, Y)`` under ``r = (c, C)`` becomes
    ``(X, C)`` under ``(., Y)``: ``lo``/``hi`` edges over the new lower/upper pairs, against
    ``e[ci]``/``e[ri]`` over the old ones (pair counts from ``cnt``, as floats)."""
    x = float(cnt[X])
    cc = float(cnt[C])
    y = float(cnt[Y])
    return (_ll(float(lo), x * cc) + _ll(float(hi), (x + cc) * y)
            - _ll(float(e[ci]), x * y) - _ll(float(e[ri]), (x + y) * cc))


@numba.njit(cache=True, inline="always")
def _keep_top(n, c, r, X, Y, C, nb, buf, lca, left, right, parent, cnt_pub, cnt_pri, work,
              e_pub, e_pri, lo_pub, lo_pri, hi_pub, hi_pri):  # pragma: no cover - jitted
    """An accepted move when the lighter subtree is ``X``: id r stays the top node, id c becomes
    (X, C): X-Y edges move up to r, X-C edges down to c."""
    ci = c - n
    ri = r - n
    for q in range(nb):
        e = buf[q]
        if lca[e] == ri:
            lca[e] = ci
        else:
            lca[e] = ri
    left[ci] = X
    right[ci] = C
    parent[C] = c
    right[ri] = Y
    left[ri] = c
    parent[Y] = r
    cnt_pub[c] = cnt_pub[X] + cnt_pub[C]
    cnt_pri[c] = cnt_pri[X] + cnt_pri[C]
    work[c] = work[X] + work[C]
    e_pub[ci] = lo_pub
    e_pri[ci] = lo_pri
    e_pub[ri] = hi_pub
    e_pri[ri] = hi_pri


@numba.njit(cache=True, inline="always")
def _swap_top(n, c, r, X, Y, C, nb, buf, lca, state, left, right, parent, cnt_pub, cnt_pri, work,
              e_pub, e_pri, lo_pub, lo_pri, hi_pub, hi_pri):  # pragma: no cover - jitted
    """An accepted move when the lighter subtree is ``Y``: id c becomes the top node in r's place,
    id r becomes (X, C): only the Y-C edges (incident to Y) change label, from r to c."""
    ci = c - n
    ri = r - n
    for q in range(nb):
        e = buf[q]
        if lca[e] == ri:
            lca[e] = ci
    g = parent[r]
    if g == -1:
        state[0] = c
    else:
        gi = g - n
        if left[gi] == r:
            left[gi] = c
        else:
            right[gi] = c
    tot_pub = cnt_pub[r]
    tot_pri = cnt_pri[r]
    tot_work = work[r]
    parent[c] = g
    left[ri] = X
    right[ri] = C
    parent[X] = r
    parent[C] = r
    left[ci] = r
    right[ci] = Y
    parent[r] = c
    parent[Y] = c
    cnt_pub[c] = tot_pub
    cnt_pri[c] = tot_pri
    work[c] = tot_work
    cnt_pub[r] = cnt_pub[X] + cnt_pub[C]
    cnt_pri[r] = cnt_pri[X] + cnt_pri[C]
    work[r] = work[X] + work[C]
    e_pub[ri] = lo_pub
    e_pri[ri] = lo_pri
    e_pub[ci] = hi_pub
    e_pri[ci] = hi_pri


@numba.njit(cache=True)
def mcmc_step(n, c, move, a_pub, a_pri, logu, state, left, right, parent, cnt_pub, cnt_pri, work,
              e_pub, e_pri, lca, indptr, adj, m_pub, stack, buf, ll):  # pragma: no cover - jitted
    """One proposal of Fig. 5 at non-root internal node id ``c``; returns 1 when accepted.

    ``move`` 0 pairs ``left[c]`` with c's sibling, 1 pairs ``right[c]`` with it. The step is
    accepted when ``logu < a_pub * dL_pub + a_pri * dL_pri`` (always when that is >= 0).
    ``state[0]`` is the root id; ``ll`` the running (public, private) log-likelihoods.
    """
    ci = c - n
    r = parent[c]
    ri = r - n
    if left[ri] == c:
        C = right[ri]
    else:
        C = left[ri]
    A = left[ci]
    B = right[ci]
    if move == 0:
        X = A
        Y = B
    else:
        X = B
        Y = A
    S = A if work[A] <= work[B] else B
    nb, sc_pub, sc_pri = _edges_at(S, n, ri, ci, left, right, lca, indptr, adj, m_pub, stack, buf)
    if S == X:
        xc_pub = sc_pub
        xc_pri = sc_pri
    else:
        xc_pub = e_pub[ri] - sc_pub
        xc_pri = e_pri[ri] - sc_pri
    lo_pub = xc_pub
    lo_pri = xc_pri
    hi_pub = e_pub[ci] + e_pub[ri] - xc_pub
    hi_pri = e_pri[ci] + e_pri[ri] - xc_pri
    # a kind's change is computed before the decision only when it weighs in it (a != 0), and
    # after acceptance otherwise (the running log-likelihoods track both kinds)
    d_pub = _delta_ll(lo_pub, hi_pub, e_pub, cnt_pub, ci, ri, X, C, Y) if a_pub != 0.0 else 0.0
    d_pri = _delta_ll(lo_pri, hi_pri, e_pri, cnt_pri, ci, ri, X, C, Y) if a_pri != 0.0 else 0.0
    lp = a_pub * d_pub + a_pri * d_pri
    if not (lp >= 0.0 or logu < lp):
        return 0
    if a_pub == 0.0:
        d_pub = _delta_ll(lo_pub, hi_pub, e_pub, cnt_pub, ci, ri, X, C, Y)
    if a_pri == 0.0:
        d_pri = _delta_ll(lo_pri, hi_pri, e_pri, cnt_pri, ci, ri, X, C, Y)
    if S == X:
        _keep_top(n, c, r, X, Y, C, nb, buf, lca, left, right, parent, cnt_pub, cnt_pri, work,
                  e_pub, e_pri, lo_pub, lo_pri, hi_pub, hi_pri)
    else:
        _swap_top(n, c, r, X, Y, C, nb, buf, lca, state, left, right, parent, cnt_pub, cnt_pri, work,
                  e_pub, e_pri, lo_pub, lo_pri, hi_pub, hi_pri)
    ll[0] += d_pub
    ll[1] += d_pri
    return 1


@numba.njit(cache=True, nogil=True)
def run_chunk(n, picks, moves, logu, a_pub, a_pri, state, left, right, parent, cnt_pub, cnt_pri,
              work, e_pub, e_pri, lca, indptr, adj, m_pub, stack, buf, ll,
              step0, trace_every, trace_pub, trace_pri, trace_step, trace_pos):  # pragma: no cover
    """``picks.size`` MCMC steps; ``picks[k]`` uniform in ``[0, n - 2)`` indexes the non-root
    internal nodes. Records ``ll`` every ``trace_every`` global steps. Returns accepted count."""
    accepted = 0
    for k in range(picks.size):
        ci = picks[k]
        if ci >= state[0] - n:
            ci += 1
        accepted += mcmc_step(n, n + ci, moves[k], a_pub, a_pri, logu[k], state, left, right, parent,
                              cnt_pub, cnt_pri, work, e_pub, e_pri, lca, indptr, adj, m_pub, stack,
                              buf, ll)
        t = step0 + k + 1
        if trace_every > 0 and t % trace_every == 0 and trace_pos[0] < trace_pub.size:
            trace_pub[trace_pos[0]] = ll[0]
            trace_pri[trace_pos[0]] = ll[1]
            trace_step[trace_pos[0]] = t
            trace_pos[0] += 1
    return accepted


@numba.njit(cache=True)
def inorder_ranges(n, root, left, right, flag):  # pragma: no cover - jitted
    """Flagged leaves in in-order, and for each internal node the position of its first one."""
    order = np.empty(n, dtype=np.int64)
    start = np.zeros(max(n - 1, 0), dtype=np.int64)
    stack = np.empty(2 * n + 1, dtype=np.int64)
    top = 0
    stack[0] = root
    top = 1
    k = 0
    while top > 0:
        top -= 1
        x = stack[top]
        if x < n:
            if flag[x]:
                order[k] = x
                k += 1
        else:
            i = x - n
            start[i] = k
            stack[top] = right[i]
            stack[top + 1] = left[i]
            top += 2
    return order[:k], start
