"""HRG machinery: the dendrogram's counts and likelihood (Eq. 10/11), the incremental Fig. 5 move
against recomputation from scratch, Lemma 4's sensitivity, the MCMC's acceptance rule and
stationary law, CalculateNoisyProb's noise, and the O(output) sampler.

Statistical tests use fixed seeds (deterministic as written); the stated false-failure rates are
what each test would have over random seeds.
"""

from __future__ import annotations

import dataclasses
import decimal
import itertools
import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scipy import stats

from privgraph.mechanisms.hrg import (
    Dendrogram,
    NoisyDendrogram,
    Phase,
    binary_log_likelihood,
    calculate_noisy_prob,
    convergence_stats,
    exponent,
    noisy_dendrogram,
    private_sensitivity,
    run_mcmc,
    sample_all,
    sample_internal_nodes,
    split_internal_nodes,
)
from privgraph.mechanisms.noise import discrete_laplace

COUNT_FIELDS = ("lca", "e_pub", "e_pri", "cnt_pub", "cnt_pri", "work", "parent")


def _edges(pairs: list[tuple[int, int]]) -> np.ndarray:
    if not pairs:
        return np.zeros((2, 0), dtype=np.int64)
    return np.array(pairs, dtype=np.int64).T


def _assert_consistent(d: Dendrogram) -> None:
    s = d.counts_from_scratch()
    for k in COUNT_FIELDS:
        assert np.array_equal(s[k], getattr(d, k)), k
    ll = d.log_likelihood()
    assert ll == pytest.approx(s["log_likelihood"], abs=1e-9)
    assert d.running_log_likelihood == pytest.approx(ll, abs=1e-8)


def _random_graph(rng: np.random.Generator, n: int, p_pub: float, p_pri: float) -> tuple[np.ndarray, np.ndarray]:
    pub, pri = [], []
    for i, j in itertools.combinations(range(n), 2):
        u = rng.random()
        if u < p_pub:
            pub.append((i, j))
        elif u < p_pub + p_pri:
            pri.append((i, j))
    return _edges(pub), _edges(pri)


def _clusters(d: Dendrogram) -> frozenset[frozenset[int]]:
    """The tree as its set of clusters (leaf sets of internal nodes): a canonical topology."""
    n = d.n
    memo: dict[int, frozenset[int]] = {}

    def leaves(x: int) -> frozenset[int]:
        if x < n:
            return frozenset([x])
        if x not in memo:
            memo[x] = leaves(int(d.left[x - n])) | leaves(int(d.right[x - n]))
        return memo[x]

    return frozenset(leaves(n + i) for i in range(n - 1))


def _all_trees(leaves: tuple[int, ...]) -> list[object]:
    """Every rooted binary tree on ``leaves`` as nested tuples ((2n - 3)!! of them)."""
    if len(leaves) == 1:
        return [leaves[0]]
    first, rest = leaves[0], leaves[1:]
    out = []
    for k in range(len(rest)):
        for left_rest in itertools.combinations(rest, k):
            left = (first, *left_rest)
            right = tuple(x for x in rest if x not in left_rest)
            for a in _all_trees(left):
                for b in _all_trees(right):
                    out.append((a, b))
    return out


def _from_nested(tree: object, n: int, pub: np.ndarray, pri: np.ndarray) -> Dendrogram:
    left: list[int] = []
    right: list[int] = []

    def build(t: object) -> int:
        if isinstance(t, int):
            return t
        a, b = build(t[0]), build(t[1])  # type: ignore[index]
        left.append(a)
        right.append(b)
        return n + len(left) - 1

    root = build(tree)
    return Dendrogram.from_structure(n, np.arange(n), pub, pri, np.array(left), np.array(right), root)


# -- likelihood on hand-built dendrograms ------------------------------------------------------------
def test_four_leaf_likelihood_by_hand() -> None:
    # ((0,1),(2,3)): ids 4 = (0,1), 5 = (2,3), 6 = root
    pri = _edges([(0, 1), (0, 2), (0, 3), (1, 2)])
    pub = _edges([(2, 3)])
    d = Dendrogram.from_structure(4, np.arange(4), pub, pri, np.array([0, 2, 4]), np.array([1, 3, 5]), 6)
    # private: (0,1) p = 1 -> 0; (2,3) e = 0 -> 0; root 2x2 pairs, e = 3 -> 3 ln 3/4 + ln 1/4
    # public leaves are 2 and 3 only: (2,3) has L = R = 1, e = 1 -> 0; the root has L = 0 -> 0
    assert d.e_pri.tolist() == [1, 0, 3]
    assert d.e_pub.tolist() == [0, 1, 0]
    assert d.pairs("private").tolist() == [1, 1, 4]
    assert d.pairs("public").tolist() == [0, 1, 0]
    lp, lq = d.log_likelihood()
    assert lp == 0.0
    assert lq == pytest.approx(3 * math.log(3 / 4) + math.log(1 / 4), rel=1e-15)
    # caterpillar (((0,1),2),3) with public edges (0,3), (1,2) and no private ones
    d2 = Dendrogram.from_structure(
        4, np.arange(4), _edges([(0, 3), (1, 2), (0, 2)]), _edges([]),
        np.array([0, 4, 5]), np.array([1, 2, 3]), 6,
    )
    # (0,1): e = 0 -> 0; ((0,1),2): 2 pairs, e = 2 -> 0; root: 3 pairs, e = 1 -> ln 1/3 + 2 ln 2/3
    assert d2.log_likelihood()[0] == pytest.approx(math.log(1 / 3) + 2 * math.log(2 / 3), rel=1e-15)
    assert d2.log_likelihood()[1] == 0.0


def test_binary_log_likelihood_terms() -> None:
    e = np.array([0, 1, 2, 4, 0, 3])
    pairs = np.array([5, 1, 4, 4, 0, 7])
    expect = [e_ * math.log(e_ / n) + (n - e_) * math.log(1 - e_ / n) if 0 < e_ < n else 0.0
              for e_, n in zip(e.tolist(), pairs.tolist())]
    assert np.allclose(binary_log_likelihood(e, pairs), expect, rtol=1e-15, atol=0)
    with pytest.raises(ValueError, match="0 <= e"):
        binary_log_likelihood(np.array([3]), np.array([2]))


def test_structure_validation() -> None:
    with pytest.raises(ValueError, match="binary tree"):
        Dendrogram.from_structure(3, np.arange(3), _edges([]), _edges([]), np.array([0, 0]), np.array([1, 3]), 4)
    with pytest.raises(ValueError, match="leaf"):
        Dendrogram.from_structure(3, np.array([0, 1, 2]), _edges([(0, 5)]), _edges([]),
                                  np.array([0, 3]), np.array([1, 2]), 4)
    with pytest.raises(ValueError, match="both public and private"):
        Dendrogram.from_structure(3, np.arange(3), _edges([(0, 1)]), _edges([(0, 1)]),
                                  np.array([0, 3]), np.array([1, 2]), 4)
    with pytest.raises(ValueError, match="private leaf"):
        Dendrogram.from_structure(3, np.arange(3), _edges([]), _edges([(0, 1)]),
                                  np.array([0, 3]), np.array([1, 2]), 4,
                                  private_leaf=np.array([True, False, True]))
    d = Dendrogram.random(5, np.arange(5), _edges([]), _edges([(0, 1)]), np.random.default_rng(0))
    with pytest.raises(ValueError, match="non-root"):
        d.move(d.root - d.n, 0)
    with pytest.raises(TypeError, match="Generator"):
        Dendrogram.random(5, np.arange(5), _edges([]), _edges([]), np.random.RandomState(0))


# -- incremental moves against recomputation ------------------------------------------------------------
@st.composite
def _chains(draw: st.DrawFn) -> tuple:
    n = draw(st.integers(3, 11))
    n_pairs = n * (n - 1) // 2
    kinds = draw(st.lists(st.sampled_from([0, 0, 1, 2]), min_size=n_pairs, max_size=n_pairs))
    private_flags = draw(st.lists(st.booleans(), min_size=n, max_size=n))
    ids = draw(st.lists(st.integers(0, 40), min_size=n, max_size=n, unique=True))
    seed = draw(st.integers(0, 2**32 - 1))
    a_pub = draw(st.sampled_from([0.0, 0.5, 1.0]))
    a_pri = draw(st.sampled_from([0.0, 0.05, 1.0]))
    moves = draw(
        st.lists(
            st.tuples(st.integers(0, 10**6), st.integers(0, 1),
                      st.one_of(st.just(-math.inf), st.floats(-3.0, 0.0))),
            min_size=1, max_size=25,
        )
    )
    return n, kinds, private_flags, sorted(ids), seed, a_pub, a_pri, moves


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_chains())
def test_incremental_counts_equal_recomputation(chain: tuple) -> None:
    n, kinds, private_flags, ids, seed, a_pub, a_pri, moves = chain
    pairs = list(itertools.combinations(range(n), 2))
    pub = [p for p, k in zip(pairs, kinds) if k == 1]
    pri = [p for p, k in zip(pairs, kinds) if k == 2]
    private_leaf = np.array(private_flags)
    for u, v in pri:
        private_leaf[[u, v]] = True
    leaf_nodes = np.array(ids, dtype=np.int64)
    to_ids = lambda ps: leaf_nodes[_edges(ps)] if ps else _edges([])  # noqa: E731
    d = Dendrogram.random(41, leaf_nodes, to_ids(pub), to_ids(pri), np.random.default_rng(seed),
                          private_leaf=private_leaf)
    _assert_consistent(d)
    for pick, kind, log_u in moves:
        nonroot = [i for i in range(n - 1) if n + i != d.root]
        c = nonroot[pick % len(nonroot)]
        trial = d.copy()
        assert trial.move(c, kind)  # forced acceptance: the proposed dendrogram
        before, after = d.log_likelihood(), trial.log_likelihood()
        lp = a_pub * (after[0] - before[0]) + a_pri * (after[1] - before[1])
        accepted = d.move(c, kind, a_pub=a_pub, a_pri=a_pri, log_u=log_u)
        if abs(log_u - lp) > 1e-9:
            assert accepted == (lp >= 0 or log_u < lp)
        if accepted:
            assert _clusters(d) == _clusters(trial)
        _assert_consistent(d)


def test_moves_reach_the_two_other_configurations() -> None:
    # ((0,1),2): moving at (0,1) gives ((0,2),1) and ((1,2),0)
    d = Dendrogram.from_structure(3, np.arange(3), _edges([]), _edges([]), np.array([0, 3]), np.array([1, 2]), 4)
    seen = set()
    for kind in (0, 1):
        t = d.copy()
        assert t.move(0, kind)
        seen.add(_clusters(t))
    assert seen == {
        frozenset({frozenset({0, 2}), frozenset({0, 1, 2})}),
        frozenset({frozenset({1, 2}), frozenset({0, 1, 2})}),
    }


def test_long_chain_on_a_larger_graph_stays_consistent() -> None:
    rng = np.random.default_rng(3)
    pub, pri = _random_graph(rng, 120, 0.03, 0.03)
    d = Dendrogram.random(120, np.arange(120), pub, pri, rng)
    res = run_mcmc(d, [Phase("public", 20_000, 1.0, 0.0), Phase("private", 20_000, 0.0, 0.5),
                       Phase("joint", 20_000, 1.0, 0.5)], rng, trace_every=500)
    _assert_consistent(d)
    assert res.steps == {"public": 20_000, "private": 20_000, "joint": 20_000}
    assert res.trace_step.tolist() == list(range(500, 60_001, 500))
    assert [res.phase_kinds[i] for i in res.trace_phase[[0, 40, 80]]] == ["public", "private", "joint"]
    assert res.final_log_likelihood == pytest.approx(d.log_likelihood())
    assert 0 < res.accepted["public"] < 20_000


# -- sensitivity (Lemma 4, Appendix B) and the exponent ----------------------------------------------
@pytest.mark.parametrize("n", [3, 4, 5, 6, 7, 10, 101, 2708, 10**6])
def test_sensitivity_formula(n: int) -> None:
    # reference in 50-digit decimal arithmetic (the float form of ln(N / (N - 1)) loses digits)
    with decimal.localcontext() as ctx:
        ctx.prec = 50
        big_n = decimal.Decimal((n * n) // 4)
        expect = float(big_n.ln() + (big_n - 1) * (big_n / (big_n - 1)).ln())
    delta = private_sensitivity(n)
    assert delta == pytest.approx(expect, rel=1e-11)
    assert delta >= expect  # never understated
    assert exponent(0.8, n) == pytest.approx(0.8 / (2 * expect), rel=1e-11)
    assert exponent(0.8, n) * 2 * delta <= 0.8  # the factor 2, rounded down
    assert private_sensitivity(2) == 0.0 and private_sensitivity(0) == 0.0 and exponent(1.0, 2) == 0.0


def _max_change_one_edge(n: int, rng: np.random.Generator, trees: int, graphs: int) -> float:
    worst = 0.0
    pairs = list(itertools.combinations(range(n), 2))
    for _ in range(graphs):
        _, pri = _random_graph(rng, n, 0.0, rng.uniform(0.1, 0.9))
        base = set(map(tuple, pri.T.tolist()))
        for _ in range(trees):
            d = Dendrogram.random(n, np.arange(n), _edges([]), pri, rng)
            l0 = d.log_likelihood()[1]
            for p in pairs:
                other = _edges(sorted(base ^ {p}))
                d2 = Dendrogram.from_structure(n, np.arange(n), _edges([]), other, d.left, d.right, d.root)
                worst = max(worst, abs(d2.log_likelihood()[1] - l0))
    return worst


@pytest.mark.parametrize("n", [3, 4, 5, 6, 7])
def test_one_private_edge_changes_the_likelihood_by_at_most_delta(n: int) -> None:
    worst = _max_change_one_edge(n, np.random.default_rng(n), trees=6, graphs=6)
    assert worst <= private_sensitivity(n) + 1e-9


def test_the_bound_is_attained_and_the_leaf_count_would_understate_it() -> None:
    # 6 leaves, root split 3 x 3 with no edge across; adding one edge across costs exactly Delta(6)
    n = 6
    left, right = np.array([0, 6, 3, 8, 7]), np.array([1, 2, 4, 5, 9])  # ((0,1),2), ((3,4),5), root
    d0 = Dendrogram.from_structure(n, np.arange(n), _edges([]), _edges([(0, 1)]), left, right, 10)
    d1 = Dendrogram.from_structure(n, np.arange(n), _edges([]), _edges([(0, 1), (0, 3)]), left, right, 10)
    change = abs(d1.log_likelihood()[1] - d0.log_likelihood()[1])
    assert change == pytest.approx(private_sensitivity(6), rel=1e-11)
    assert change <= private_sensitivity(6)
    with_leaf_count = math.log(6) + 5 * math.log(6 / 5)  # N = |V_pri| instead of |V_pri|^2 / 4
    assert change > with_leaf_count + 0.4


def test_stationary_law_is_the_exponential_mechanism() -> None:
    """4 leaves, 15 dendrograms: the chain's visit frequencies match exp(a_pub L_pub + a_pri L_pri).

    Chi-square over the 15 topologies, chain thinned every 25 steps (the chain mixes within a few
    steps on 15 states); false-failure rate about 1e-3 over seeds."""
    n = 4
    pub = _edges([(0, 1), (2, 3)])
    pri = _edges([(0, 2), (1, 3), (0, 3)])
    a_pub, a_pri = 1.0, 1.5
    trees = _all_trees(tuple(range(n)))
    assert len(trees) == 15
    weights = {}
    for t in trees:
        dt = _from_nested(t, n, pub, pri)
        lp, lq = dt.log_likelihood()
        weights[_clusters(dt)] = math.exp(a_pub * lp + a_pri * lq)
    rng = np.random.default_rng(2024)
    d = Dendrogram.random(n, np.arange(n), pub, pri, rng)
    counts = dict.fromkeys(weights, 0)
    samples, thin = 12_000, 25
    for _ in range(samples):
        run_mcmc(d, [Phase("joint", thin, a_pub, a_pri)], rng, trace_every=thin)
        counts[_clusters(d)] += 1
    keys = list(weights)
    w = np.array([weights[k] for k in keys])
    obs = np.array([counts[k] for k in keys])
    assert stats.chisquare(obs, samples * w / w.sum()).pvalue > 1e-3


# -- MCMC bookkeeping -------------------------------------------------------------------------------------
def test_phase_and_mcmc_validation() -> None:
    with pytest.raises(ValueError, match="a_pri"):
        Phase("private", 10, 0.0, float("nan"))
    with pytest.raises(ValueError, match="steps"):
        Phase("private", -1, 0.0, 1.0)
    with pytest.raises(TypeError, match="steps"):
        Phase("private", 1.5, 0.0, 1.0)  # type: ignore[arg-type]
    d = Dendrogram.random(5, np.arange(5), _edges([]), _edges([(0, 1)]), np.random.default_rng(0))
    with pytest.raises(TypeError, match="Generator"):
        run_mcmc(d, [Phase("private", 10, 0.0, 1.0)], np.random.RandomState(0))
    with pytest.raises(TypeError, match="Phase"):
        run_mcmc(d, [("private", 10, 0.0, 1.0)], np.random.default_rng(0))  # type: ignore[list-item]


def test_mcmc_is_reproducible() -> None:
    rng = np.random.default_rng(5)
    pub, pri = _random_graph(rng, 60, 0.05, 0.05)
    runs = []
    for _ in range(2):
        d = Dendrogram.random(60, np.arange(60), pub, pri, np.random.default_rng(11))
        res = run_mcmc(d, [Phase("public", 3000, 1.0, 0.0), Phase("private", 3000, 0.0, 0.3)],
                       np.random.default_rng(12))
        runs.append((d.left.copy(), d.right.copy(), res.trace_private.copy(), res.accepted))
    assert all(np.array_equal(a, b) for a, b in zip(runs[0][:3], runs[1][:3]))
    assert runs[0][3] == runs[1][3]


def test_convergence_stats() -> None:
    rng = np.random.default_rng(0)
    flat = -1000 + rng.normal(size=2000)
    trend = -1000 + np.linspace(-50, 0, 2000) + rng.normal(size=2000)
    s_flat, s_trend = convergence_stats(flat), convergence_stats(trend)
    assert abs(s_flat["geweke_z"]) < 3 and s_flat["relative_change"] < 1e-3
    assert abs(s_trend["geweke_z"]) > 10 and s_trend["relative_change"] > s_flat["relative_change"]
    assert convergence_stats(flat[:10]) == {"points": 10, "relative_change": None, "geweke_z": None}


# -- CalculateNoisyProb -----------------------------------------------------------------------------------
def _balanced(n: int, pri: np.ndarray, private_leaf: np.ndarray | None = None) -> Dendrogram:
    """A balanced dendrogram over 0..n-1 (n a power of two)."""
    level = list(range(n))
    left, right = [], []
    while len(level) > 1:
        nxt = []
        for a, b in zip(level[::2], level[1::2]):
            left.append(a)
            right.append(b)
            nxt.append(n + len(left) - 1)
        level = nxt
    return Dendrogram.from_structure(n, np.arange(n), _edges([]), pri, np.array(left), np.array(right),
                                     level[0], private_leaf=private_leaf)


def test_noisy_prob_noise_is_discrete_laplace() -> None:
    """Without merging, p~ L R - e is the noise: its law is discrete Laplace with scale 1/eps2.

    e_r is set to half the pairs and only nodes with >= 256 pairs are read, so clipping never acts
    (|Z| > 128 has probability e^-90); chi-square over z in [-6, 6] plus both tails (alpha = 1e-3)
    and the variance 2a / (1 - a)^2, a = e^-eps, within 6 % (about 8 standard errors at
    2 x 10^4 draws)."""
    n, eps2 = 1024, 0.7
    d = _balanced(n, _edges([]))
    pairs = d.pairs("private")
    d.e_pri[:] = pairs // 2  # counts need not come from edges for this check
    big = pairs >= 256
    rng = np.random.default_rng(77)
    zs = []
    while sum(z.size for z in zs) < 20_000:
        prob, owner = calculate_noisy_prob(d, eps2, rng, tau_b=1e300)
        assert np.all(owner == -1)
        zs.append(np.rint(prob[big] * pairs[big]).astype(np.int64) - d.e_pri[big])
    z = np.concatenate(zs)
    a = math.exp(-eps2)
    support = np.arange(-6, 7)
    pmf = (1 - a) / (1 + a) * a ** np.abs(support)
    tail = (1 - pmf.sum()) / 2
    obs = np.array([np.sum(z < -6)] + [np.sum(z == s) for s in support] + [np.sum(z > 6)])
    exp_ = z.size * np.concatenate([[tail], pmf, [tail]])
    assert stats.chisquare(obs, exp_).pvalue > 1e-3
    assert z.var() == pytest.approx(2 * a / (1 - a) ** 2, rel=0.06)
    assert abs(z.mean()) < 5 * math.sqrt(2 * a / (1 - a) ** 2 / z.size)


def test_noisy_prob_counts_every_edge_once_and_merges_subtrees() -> None:
    rng = np.random.default_rng(8)
    n = 256
    _, pri = _random_graph(rng, n, 0.0, 0.02)
    d = _balanced(n, pri)
    eps2 = 0.5
    prob, owner = calculate_noisy_prob(d, eps2, rng)
    assert np.all((prob >= 0) & (prob <= 1))
    lc, rc = d.cnt_pri[d.left], d.cnt_pri[d.right]
    pairs, tot = lc * rc, (lc + rc) * (lc + rc - 1) // 2
    ok = (1 / (eps2 * pairs) >= 0.05) & (1 / (eps2 * tot) >= 0.01)
    parent = {int(ch) - n: i for i in range(n - 1) for ch in (d.left[i], d.right[i]) if ch >= n}
    roots = np.flatnonzero(owner == np.arange(n - 1))
    assert roots.size > 0 and np.all(ok[roots])
    for i in range(n - 1):
        up = parent.get(i)
        if owner[i] == -1:
            assert not ok[i] and (up is None or owner[up] == -1)
        elif owner[i] == i:  # a merge root: its parent is noised alone (top-most merge)
            assert up is None or owner[up] == -1
        else:  # covered: same owner as its parent, same probability
            assert owner[up] == owner[i] and prob[i] == prob[owner[i]]
    # a merged subtree's probability is (its edge count + integer noise) / its pairs, clipped
    for r in roots:
        members = np.flatnonzero(owner == r)
        e_sub, t_sub = d.e_pri[members].sum(), tot[r]
        assert pairs[members].sum() == t_sub  # every pair of the subtree counted once
        z = prob[r] * t_sub - e_sub
        if 0 < prob[r] < 1:
            assert z == pytest.approx(round(z), abs=1e-6)


def test_noisy_prob_skips_empty_blocks_and_validates() -> None:
    # leaves 2 and 3 are not private: counts over zero pairs are 0 for every input, get p = 0
    # and consume no noise; only node (0,1) is noised
    d = Dendrogram.from_structure(4, np.arange(4), _edges([(2, 3)]), _edges([(0, 1)]),
                                  np.array([0, 2, 4]), np.array([1, 3, 5]), 6,
                                  private_leaf=np.array([True, True, False, False]))
    assert d.pairs("private").tolist() == [1, 0, 0]
    prob, owner = calculate_noisy_prob(d, 1.0, np.random.default_rng(0), tau_b=1e300, tau_c=1e300)
    z = discrete_laplace(np.random.default_rng(0), 1.0, 1)[0]
    assert prob.tolist() == [min(1.0, max(0.0, 1.0 + z)), 0.0, 0.0]
    with pytest.raises(ValueError, match="eps2"):
        calculate_noisy_prob(d, float("nan"), np.random.default_rng(0))
    with pytest.raises(TypeError, match="eps2"):
        calculate_noisy_prob(d, True, np.random.default_rng(0))
    with pytest.raises(ValueError, match="tau_b"):
        calculate_noisy_prob(d, 1.0, np.random.default_rng(0), tau_b=-1.0)


# -- sampling ---------------------------------------------------------------------------------------------
def _release_with(d: Dendrogram, prob: np.ndarray) -> NoisyDendrogram:
    nd = noisy_dendrogram(d, 1.0, np.random.default_rng(0))
    return dataclasses.replace(nd, prob=np.asarray(prob, dtype=np.float64))


def test_sampler_means_blocks_and_validity() -> None:
    """Mean count per internal node over 400 seeds within 5 standard errors of L R p
    (false-failure rate below 1e-5 over all nodes); every pair inside its L x R block."""
    rng = np.random.default_rng(1)
    n = 40
    private_leaf = rng.random(n) < 0.8
    d = Dendrogram.random(200, np.arange(100, 100 + n), _edges([]), _edges([]), rng, private_leaf=private_leaf)
    prob = rng.uniform(0, 1, n - 1) * (rng.random(n - 1) < 0.7)
    nd = _release_with(d, prob)
    pairs = nd.pairs()
    reps = 400
    totals = np.zeros(n - 1)
    allowed = set(int(x) for x in np.arange(100, 100 + n)[private_leaf])
    for s in range(reps):
        e = sample_all(nd, np.random.default_rng(1000 + s))
        assert e.dtype == np.int64 and e.shape[0] == 2
        assert np.all(e[0] < e[1])
        keys = e[0] * 1000 + e[1]
        assert np.unique(keys).size == keys.size
        assert set(e.ravel().tolist()) <= allowed
        # count per LCA: the sampled edges as the private edges of the same structure
        check = Dendrogram.from_structure(200, nd.leaf_nodes, _edges([]), e, nd.left, nd.right, nd.root,
                                          private_leaf=private_leaf)
        totals += check.e_pri
    mean = totals / reps
    sd = np.sqrt(pairs * prob * (1 - prob) / reps)
    assert np.all(np.abs(mean - pairs * prob) <= 5 * sd + 1e-12)
    assert np.all(mean[prob == 0] == 0)
    assert np.all(mean[(prob == 1)] == pairs[prob == 1])


def test_sampler_pairs_are_uniform_within_a_block() -> None:
    # 5 = (0,1), 6 = (3,4), 7 = (2,6), root 8 = (5,7): the root's block is {0,1} x {2,3,4}
    d = Dendrogram.from_structure(5, np.arange(5), _edges([]), _edges([]),
                                  np.array([0, 3, 2, 5]), np.array([1, 4, 6, 7]), 8)
    nd = _release_with(d, np.array([0.0, 0.0, 0.0, 0.5]))
    assert nd.pairs().tolist() == [1, 1, 2, 6]
    rng = np.random.default_rng(3)
    hits: dict[tuple[int, int], int] = {}
    reps = 3000
    for _ in range(reps):
        for u, v in sample_internal_nodes(nd, [3], rng).T.tolist():
            hits[(u, v)] = hits.get((u, v), 0) + 1
    expected_pairs = {(a, b) for a in (0, 1) for b in (2, 3, 4)}
    assert set(hits) == expected_pairs
    obs = np.array([hits[p] for p in sorted(expected_pairs)])
    assert stats.binomtest(int(obs.sum()), 6 * reps, 0.5).pvalue > 1e-3
    assert stats.chisquare(obs).pvalue > 1e-3


def test_split_and_chunked_sampling() -> None:
    rng = np.random.default_rng(4)
    pub, pri = _random_graph(rng, 300, 0.0, 0.02)
    d = Dendrogram.random(300, np.arange(300), pub, pri, rng)
    nd = noisy_dendrogram(d, 1.0, rng)
    for parts in (1, 3, 8):
        chunks = split_internal_nodes(nd, parts)
        assert len(chunks) == parts
        assert np.array_equal(np.sort(np.concatenate(chunks)), np.arange(299))
    chunks = split_internal_nodes(nd, 4)
    loads = [nd.expected_edges()[c].sum() + c.size for c in chunks]
    assert max(loads) < 0.5 * sum(loads)
    parts = [sample_internal_nodes(nd, c, np.random.default_rng(i)) for i, c in enumerate(chunks)]
    union = np.concatenate(parts, axis=1)
    keys = union[0] * 300 + union[1]
    assert np.unique(keys).size == keys.size  # chunks never produce the same pair
    with pytest.raises(ValueError, match="distinct"):
        sample_internal_nodes(nd, [1, 1], rng)
    with pytest.raises(ValueError, match="internal_nodes"):
        sample_internal_nodes(nd, [299], rng)
    with pytest.raises(ValueError, match="parts"):
        split_internal_nodes(nd, 0)
    assert sample_internal_nodes(nd, [], rng).shape == (2, 0)


def test_sampler_never_enumerates_all_pairs() -> None:
    # 200,000 private leaves (2 x 10^10 pairs): sampling a sparse release is O(output)
    import tracemalloc

    n = 200_000
    rng = np.random.default_rng(9)
    d = Dendrogram.random(n, np.arange(n), _edges([]), _edges([]), rng)
    pairs = d.pairs("private").astype(np.float64)
    nd = _release_with(d, np.minimum(1.0, 3.0 / np.maximum(pairs, 1.0)))
    tracemalloc.start()
    e = sample_all(nd, rng)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    expected = nd.expected_edges().sum()
    assert 0.95 * expected < e.shape[1] < 1.05 * expected and expected > 2 * n
    assert peak < 300 * 1024 * 1024  # far below the 160 GB of one byte per pair
