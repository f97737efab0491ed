"""Edge-privacy baselines: Warner RR, LocalLap (edge LDP per node), EdgeRand, LapGraph,
NonPriv-Part (edge DP), their shared sparse samplers, and DPRR's combine_reports.

Exact worst-case ratios where the output distribution of one bit / pair is computable; Monte Carlo
checks with fixed seeds (deterministic as written; the stated false-failure rates are what each
test would have over random seeds); a distributional match of the sparse LapGraph selection
against a brute-force dense implementation; no N^2 memory on a 200k-node graph.
"""

from __future__ import annotations

import itertools
import math
import re
import tracemalloc
from collections import Counter

import numpy as np
import pytest
from scipy import stats

from privgraph.graph import GraphData
from privgraph.guarantee import Guarantee, GuaranteeKind, Scope
from privgraph.mechanisms.edges.dprr import DPRR, merge_with_public, private_csr, symmetrize_reports
from privgraph.mechanisms.edges.edge_rand import (
    EdgeRand,
    flip_probability,
    pairs_of_ranks,
    private_pair_ranks,
    sample_excluding,
)
from privgraph.mechanisms.edges.lapgraph import LapGraph, select_top_pairs, top_laplace_order_statistics
from privgraph.mechanisms.edges.local_lap import LocalLap
from privgraph.mechanisms.edges.nonpriv_part import NonPrivPart
from privgraph.mechanisms.edges.warner_rr import WarnerRR

N_NODES = 30
RUNS = 2000
ALL = [WarnerRR, LocalLap, EdgeRand, LapGraph, NonPrivPart]
WITH_EPS = [WarnerRR, LocalLap, EdgeRand, LapGraph]


def _build(cls: type, eps: float = 1.0):  # noqa: ANN202
    return cls() if cls is NonPrivPart else cls(epsilon=eps)


def _small_graph() -> GraphData:
    """30 nodes: a hub of degree 20 (more than half of its candidates), a sparse random rest,
    one public edge, nodes 28 and 29 outside V_pri."""
    rng = np.random.default_rng(123)
    hub = np.stack([np.zeros(20, np.int64), np.arange(1, 21)])
    rest = rng.integers(1, 28, size=(2, 40))
    e = np.concatenate([hub, rest], axis=1)
    e = e[:, e[0] != e[1]]
    g = GraphData.from_edges(N_NODES, e, private=np.ones(e.shape[1], bool), deduplicate=True)
    adj = _dense_adjacency(g)
    cand = g.private_nodes()
    a, b = next((a, b) for a, b in itertools.combinations(cand.tolist(), 2) if not adj[a, b])
    pub = np.array([[a, 3, 28], [b, 28, 29]])  # one public pair inside V_pri, two outside
    return GraphData(num_nodes=N_NODES, edges_private=g.edges_private, edges_public=pub)


def _dense_adjacency(g: GraphData) -> np.ndarray:
    adj = np.zeros((g.num_nodes, g.num_nodes), bool)
    adj[g.edges_private[0], g.edges_private[1]] = True
    return adj | adj.T


# -- the interface every baseline shares --------------------------------------------------------
@pytest.mark.parametrize("cls", ALL)
def test_interface(cls: type) -> None:
    m = _build(cls, 0.7)
    assert cls.name in {"warner_rr", "local_lap", "edge_rand", "lapgraph", "nonpriv_part"}
    assert cls.scope is Scope.EDGES and m.scope is Scope.EDGES
    g = m.guarantee
    assert isinstance(g, Guarantee) and g.scope is Scope.EDGES
    assert Guarantee.from_dict(g.to_dict()) == g
    local = cls in (WarnerRR, LocalLap)
    assert g.kind is (GuaranteeKind.EDGE_LDP if local else GuaranteeKind.EDGE_DP)
    if cls is NonPrivPart:
        assert g.epsilon == 0.0 and g.check(0.0)
    else:
        assert g.epsilon == 0.7 and g.check(0.7) and not g.check(0.7 * (1 - 1e-9))
    # every edge mechanism treats V_pri as public (NonPriv-Part records |V_pri| too)
    assert any("V_pri" in a and "public" in a for a in g.assumptions)
    if local:
        assert any("relationship DP" in a and "2*eps" in a for a in g.assumptions)
        assert hasattr(m, "privatize_nodes" if cls is WarnerRR else "noisy_degrees")
    assert "public edges are released as they are" in g.assumptions
    p = m.params()
    assert cls(**p).params() == p
    assert m.params_for(17)["n_max"] == 17
    assert repr(m).startswith(cls.__name__ + "(")
    if cls is not NonPrivPart:
        assert "epsilon=0.7" in repr(m)
        with pytest.raises(TypeError):
            cls(0.7)


def test_repr_and_params() -> None:
    assert repr(WarnerRR(epsilon=1.0)) == "WarnerRR(epsilon=1.0)"
    assert repr(EdgeRand(epsilon=1.0)) == "EdgeRand(epsilon=1.0)"
    assert repr(LapGraph(epsilon=1.0)) == "LapGraph(epsilon=1.0, count_share=0.01)"
    assert repr(LocalLap(epsilon=1.0)) == "LocalLap(epsilon=1.0, degree_share=0.1)"
    assert repr(NonPrivPart()) == "NonPrivPart()"
    assert LapGraph(epsilon=2.0).params_for(5) == {
        "epsilon": 2.0, "count_share": 0.01, "n_max": 5, "eps1": 0.02, "eps2": 1.98}
    assert LocalLap(epsilon=2.0).params_for(5) == {
        "epsilon": 2.0, "degree_share": 0.1, "n_max": 5, "eps1": 0.2, "eps2": 1.8}
    assert EdgeRand(epsilon=1.0).params_for(9)["s"] == pytest.approx(2 / (math.e + 1), rel=1e-15)
    flip = WarnerRR(epsilon=1.0).params_for(9)["flip_probability"]
    assert flip == pytest.approx(1 / (math.e + 1), rel=1e-15)
    assert NonPrivPart().params() == {} and NonPrivPart().params_for(3) == {"n_max": 3}


@pytest.mark.parametrize("cls", [LapGraph, LocalLap])
@pytest.mark.parametrize("eps", [1e-3, 0.3, 1.0, 7.0, 50.0])
def test_budget_split_never_overspends(cls: type, eps: float) -> None:
    """At budgets across the range, up to its top (50): eps1 + eps2 <= epsilon in floats. A budget
    above the range (1e4, which this test used to split) is refused at construction instead."""
    eps1, eps2 = cls(epsilon=eps).allocate()
    assert eps1 > 0 and eps2 > 0 and eps1 + eps2 <= eps
    assert eps1 == pytest.approx(eps * (0.01 if cls is LapGraph else 0.1), rel=1e-15)
    with pytest.raises(ValueError, match=r"epsilon = 10000 is outside \[.*, 50\]"):
        cls(epsilon=1e4)


@pytest.mark.parametrize("cls, share", [(LapGraph, "count_share"), (LocalLap, "degree_share")])
def test_budget_split_never_overspends_over_random_budgets(cls: type, share: str) -> None:
    """2000 random (epsilon, share) in the range, log-uniform: every split that is accepted has
    eps1 + eps2 <= epsilon in floats and both parts in [2^-20, 50]; a split refused names its part."""
    rng = np.random.default_rng(3)
    r = cls.epsilon_range
    for eps, sh in zip(np.exp(rng.uniform(math.log(r.low), math.log(r.high), 2000)), rng.uniform(1e-4, 1 - 1e-4, 2000)):
        try:
            eps1, eps2 = cls(epsilon=float(eps), **{share: float(sh)}).allocate()
        except ValueError as exc:
            assert re.search(r"eps[12] \(.*\) = .* is outside \[9.53674e-07, 50\]", str(exc)), exc
            continue
        assert eps1 + eps2 <= eps and 2.0**-20 <= min(eps1, eps2) and max(eps1, eps2) <= 50


@pytest.mark.parametrize("cls", ALL)
def test_outputs_are_valid_pairs_of_v_pri(cls: type) -> None:
    """Over 40 seeds: sorted, u < v, no duplicates, inside V_pri; privatize keeps the public edges
    and removes released pairs that are public; same seed, same release."""
    g = _small_graph()
    cand = g.private_nodes()
    m = _build(cls, 1.0)
    for seed in range(40):
        out = m.privatize_edges(g, np.random.default_rng(seed))
        assert out.dtype == np.int64 and out.shape[0] == 2
        assert np.all(out[0] < out[1])
        keys = out[0] * N_NODES + out[1]
        assert np.all(np.diff(keys) > 0)  # sorted, distinct
        assert np.isin(out, cand).all()
        again = m.privatize_edges(g, np.random.default_rng(seed))
        assert np.array_equal(out, again)
        pg = m.privatize(g, np.random.default_rng(seed))
        assert np.array_equal(pg.edges_public, g.edges_public)
        assert np.array_equal(pg.edges_private, merge_with_public(out, g.edges_public))


@pytest.mark.parametrize("cls", ALL)
def test_without_private_edges(cls: type) -> None:
    g = GraphData(num_nodes=4, edges_public=np.array([[0, 1], [1, 2]]))
    m = _build(cls)
    assert m.privatize_edges(g, np.random.default_rng(0)).shape == (2, 0)
    out = m.privatize(g, np.random.default_rng(0))
    assert out.edges_private.shape == (2, 0) and np.array_equal(out.edges_public, g.edges_public)


@pytest.mark.parametrize("cls", ALL)
def test_privatize_edges_takes_a_graph_and_a_generator(cls: type) -> None:
    """(Same seed, same release, no global RNG: tests/mechanisms/test_contract.py.)"""
    g = _small_graph()
    m = _build(cls)
    with pytest.raises(TypeError, match="Generator"):
        m.privatize_edges(g, 0)
    with pytest.raises(TypeError, match="GraphData"):
        m.privatize_edges(g.edges_private, np.random.default_rng(0))


# -- validation ----------------------------------------------------------------------------------
BAD_EPSILONS = [
    (float("nan"), ValueError), (float("inf"), ValueError), (0.0, ValueError), (-1.0, ValueError),
    (True, TypeError), ("1", TypeError), (None, TypeError),
]


@pytest.mark.parametrize("cls", WITH_EPS)
@pytest.mark.parametrize("eps, exc", BAD_EPSILONS)
def test_bad_epsilon(cls: type, eps: object, exc: type) -> None:
    with pytest.raises(exc, match="epsilon"):
        cls(epsilon=eps)


@pytest.mark.parametrize("cls, share", [(LapGraph, "count_share"), (LocalLap, "degree_share")])
@pytest.mark.parametrize("value, exc", [(0.0, ValueError), (1.0, ValueError), (1.5, ValueError),
                                         (float("nan"), ValueError), (True, TypeError), ("0.1", TypeError)])
def test_bad_share(cls: type, share: str, value: object, exc: type) -> None:
    with pytest.raises(exc, match=share):
        cls(epsilon=1.0, **{share: value})


def test_nonpriv_part_takes_no_parameters() -> None:
    with pytest.raises(TypeError):
        NonPrivPart(epsilon=1.0)  # type: ignore[call-arg]


# -- the shared sampler ------------------------------------------------------------------------
def test_sample_excluding_is_uniform_over_allowed_subsets() -> None:
    """Block 0: 3 of [0, 8) minus {1, 4, 5} (56 -> C(5, 3) = 10 subsets); block 1: 4 of [0, 6)
    minus {0} (more than half: the enumerating path, C(5, 4) = 5 subsets); block 2: nothing
    excluded. Chi-square over the subsets of each block, alpha = 1e-3 each."""
    rng = np.random.default_rng(31)
    sizes = np.array([8, 6, 5], np.int64)
    counts = np.array([3, 4, 2], np.int64)
    eb = np.array([0, 0, 0, 1], np.int64)
    ex = np.array([1, 4, 5, 0], np.int64)
    seen: list[Counter] = [Counter(), Counter(), Counter()]
    for _ in range(4000):
        blk, idx = sample_excluding(sizes, counts, eb, ex, rng)
        assert np.array_equal(np.bincount(blk, minlength=3), counts)
        for b in range(3):
            seen[b][tuple(idx[blk == b])] += 1
    allowed = [[0, 2, 3, 6, 7], [1, 2, 3, 4, 5], [0, 1, 2, 3, 4]]
    for b in range(3):
        subsets = list(itertools.combinations(allowed[b], int(counts[b])))
        assert set(seen[b]) == set(subsets)
        assert stats.chisquare([seen[b][s] for s in subsets]).pvalue > 1e-3


def test_sample_excluding_huge_space_and_validation() -> None:
    rng = np.random.default_rng(4)
    ex = np.sort(rng.choice(10**6, 1000, replace=False)).astype(np.int64) * 10**9
    blk, idx = sample_excluding(np.array([10**15]), np.array([5000]), np.zeros(1000, np.int64), ex, rng)
    assert idx.size == 5000 and np.all(np.diff(idx) > 0) and not np.isin(idx, ex).any()
    assert idx.max() < 10**15
    with pytest.raises(ValueError, match="exceeds"):
        sample_excluding(np.array([4]), np.array([3]), np.array([0, 0]), np.array([1, 2]), rng)
    with pytest.raises(ValueError, match="distinct"):
        sample_excluding(np.array([4]), np.array([1]), np.array([0, 0]), np.array([2, 1]), rng)
    with pytest.raises(ValueError, match="outside"):
        sample_excluding(np.array([4]), np.array([1]), np.array([0]), np.array([4]), rng)


def test_pair_ranks_round_trip() -> None:
    g = _small_graph()
    cand, ranks = private_pair_ranks(g)
    assert np.array_equal(cand, g.private_nodes())
    assert np.all(np.diff(ranks) > 0)
    back = pairs_of_ranks(ranks, cand)
    order = np.lexsort((g.edges_private[1], g.edges_private[0]))
    assert np.array_equal(back, g.edges_private[:, order])


# -- Warner RR -------------------------------------------------------------------------------------
@pytest.mark.parametrize("eps", [0.05, 0.5, 1.0, 3.0, 30.0])
def test_warner_rr_exact_ratio(eps: float) -> None:
    """Per bit: Pr(report | 1) / Pr(report | 0) = p / (1 - p) and Pr(silent | 0) / Pr(silent | 1)
    = (1 - q) / (1 - p): both e^eps. The worst case passes at eps and fails just below. The OR
    combination of the two endpoints' bits is exactly 2 eps for one pair."""
    m = WarnerRR(epsilon=eps)
    p, q = m.report_probabilities()
    assert p + q == pytest.approx(1.0, abs=1e-15)
    # the channel as implemented: a bit flips iff a uniform draw is < q
    channel = {1: (math.log1p(-q), math.log(q)), 0: (math.log(q), math.log1p(-q))}  # log (report, silent)
    worst = max(abs(channel[1][o] - channel[0][o]) for o in (0, 1))
    assert worst <= m.guarantee.epsilon * (1 + 1e-12)
    assert not m.guarantee.check(worst * (1 - 1e-9))  # a claim slightly below would be false
    # graph level, OR rule: present w.p. 1 - (1 - r)^2 where r = 1 - q (edge) or q (non-edge)
    absent_edge, absent_non = q**2, (1 - q) ** 2
    present_edge, present_non = 1 - absent_edge, 1 - absent_non
    pair = max(math.log(absent_non / absent_edge), math.log(present_edge / present_non))
    assert pair == pytest.approx(2 * eps, rel=1e-9)


@pytest.fixture(scope="module")
def warner_monte_carlo() -> dict:
    g = _small_graph()
    cand = g.private_nodes()
    indptr, indices = private_csr(g.edges_private, g.num_nodes)
    m = WarnerRR(epsilon=1.0)
    rng = np.random.default_rng(2024)
    counts = np.zeros((N_NODES, N_NODES), np.int64)
    problems = []
    for r in range(RUNS):
        rep = m.privatize_nodes(cand, indptr, indices, cand, rng)
        if np.any(rep[0] == rep[1]):
            problems.append(("self", r))
        keys = rep[0] * N_NODES + rep[1]
        if np.any(np.diff(keys) <= 0):
            problems.append(("unsorted or duplicate", r))
        if not np.isin(rep, cand).all():
            problems.append(("outside candidates", r))
        np.add.at(counts, (rep[0], rep[1]), 1)
    return {"graph": g, "cand": cand, "counts": counts, "problems": problems, "mech": m}


def test_warner_rr_reports_are_valid(warner_monte_carlo: dict) -> None:
    assert warner_monte_carlo["problems"] == []


def test_warner_rr_report_probabilities(warner_monte_carlo: dict) -> None:
    """Every (reporter, candidate): reported in Binomial(2000, p) runs for a true neighbour,
    Binomial(2000, 1 - p) otherwise (exact binomial tests, Bonferroni over all pairs: false-failure
    rate <= 1e-3 in total); covers the hub (degree 20 of 27 candidates: the enumerating path) and
    the sparse nodes (rejection). Nodes outside V_pri never report and are never reported."""
    d = warner_monte_carlo
    cand, counts = d["cand"], d["counts"]
    p, q = d["mech"].report_probabilities()
    adj = _dense_adjacency(d["graph"])
    pairs = [(v, j) for v in cand for j in cand if v != j]
    for v, j in pairs:
        pval = stats.binomtest(int(counts[v, j]), RUNS, p if adj[v, j] else q).pvalue
        assert pval > 1e-3 / len(pairs), (v, j, adj[v, j], counts[v, j])
    outside = np.setdiff1d(np.arange(N_NODES), cand)
    assert counts[outside].sum() == 0 and counts[:, outside].sum() == 0
    assert np.all(np.diag(counts) == 0)


def test_warner_rr_combine_reports_is_the_or_rule() -> None:
    arcs = np.array([[0, 3, 1, 2, 1], [3, 0, 2, 4, 0]])
    assert WarnerRR(epsilon=1.0).combine_reports(arcs, 5).tolist() == [[0, 0, 1, 2], [1, 3, 2, 4]]
    assert np.array_equal(WarnerRR(epsilon=1.0).combine_reports(arcs, 5), symmetrize_reports(arcs, 5))


def test_warner_rr_partitions_compose() -> None:
    """Reports of a node partition depend only on its own nodes: running the parts and
    concatenating gives valid reports for every node, and the empty part gives nothing."""
    g = _small_graph()
    cand = g.private_nodes()
    indptr, indices = private_csr(g.edges_private, g.num_nodes)
    m = WarnerRR(epsilon=2.0)
    parts = [m.privatize_nodes(cand[i::3], indptr, indices, cand, np.random.default_rng(i)) for i in range(3)]
    arcs = np.concatenate(parts, axis=1)
    assert set(np.unique(arcs[0])) <= set(cand.tolist())
    out = m.combine_reports(arcs, g.num_nodes)
    assert np.all(out[0] < out[1])
    assert m.privatize_nodes(cand[:0], indptr, indices, cand, np.random.default_rng(0)).shape == (2, 0)


def test_warner_rr_node_validation() -> None:
    g = _small_graph()
    cand = g.private_nodes()
    indptr, indices = private_csr(g.edges_private, g.num_nodes)
    m = WarnerRR(epsilon=1.0)
    rng = np.random.default_rng(0)
    with pytest.raises(ValueError, match="candidates"):
        m.privatize_nodes(np.array([28]), indptr, indices, cand, rng)
    with pytest.raises(ValueError, match="distinct"):
        m.privatize_nodes(cand[[0, 0]], indptr, indices, cand, rng)
    with pytest.raises(ValueError, match="sorted"):
        m.privatize_nodes(cand[:2], indptr, indices, cand[::-1], rng)
    with pytest.raises(TypeError, match="Generator"):
        m.privatize_nodes(cand, indptr, indices, cand, 0)  # type: ignore[arg-type]


# -- EdgeRand --------------------------------------------------------------------------------------
@pytest.mark.parametrize("eps", [0.05, 0.5, 1.0, 3.0, 30.0])
def test_edge_rand_exact_ratio(eps: float) -> None:
    """Per pair: released w.p. 1 - s/2 (edge) or s/2 (non-edge), s = 2 / (e^eps + 1): the worst
    ratio over both outputs is e^eps, passing at eps and failing just below."""
    m = EdgeRand(epsilon=eps)
    keep, flip = m.pair_probabilities()
    assert flip == pytest.approx(m.s / 2, rel=1e-15) and keep == pytest.approx(1 - m.s / 2, rel=1e-12)
    # the channel as implemented: a pair's bit flips iff a uniform draw is < s/2
    channel = {1: (math.log1p(-flip), math.log(flip)), 0: (math.log(flip), math.log1p(-flip))}
    worst = max(abs(channel[1][o] - channel[0][o]) for o in (0, 1))
    assert worst <= m.guarantee.epsilon * (1 + 1e-12)
    assert not m.guarantee.check(worst * (1 - 1e-9))


def test_edge_rand_pair_probabilities_monte_carlo() -> None:
    """Every pair of V_pri released in Binomial(2000, 1 - s/2) runs if an edge, Binomial(2000, s/2)
    otherwise (exact binomial tests, Bonferroni: false-failure rate <= 1e-3 in total)."""
    g = _small_graph()
    cand = g.private_nodes()
    m = EdgeRand(epsilon=1.0)
    keep, flip = m.pair_probabilities()
    rng = np.random.default_rng(77)
    counts = np.zeros((N_NODES, N_NODES), np.int64)
    for _ in range(RUNS):
        out = m.privatize_edges(g, rng)
        counts[out[0], out[1]] += 1
    adj = _dense_adjacency(g)
    pairs = list(itertools.combinations(cand.tolist(), 2))
    for u, v in pairs:
        pval = stats.binomtest(int(counts[u, v]), RUNS, keep if adj[u, v] else flip).pvalue
        assert pval > 1e-3 / len(pairs), (u, v, adj[u, v], counts[u, v])
    assert counts.sum() == np.triu(counts, 1).sum()


@pytest.mark.parametrize("eps", [0.5, 3.0])
def test_edge_rand_expected_edge_count(eps: float) -> None:
    """E[m'] = m (1 - s/2) + (M - m) s/2 and Var[m'] = m p(1-p) + (M - m) q(1-q) (independent
    pairs): the mean of 300 runs on 200 private nodes is within 4 standard errors (normal
    approximation: false-failure rate 6e-5)."""
    rng = np.random.default_rng(5)
    e = rng.integers(0, 200, size=(2, 500))
    e = e[:, e[0] != e[1]]
    g = GraphData.from_edges(200, e, private=np.ones(e.shape[1], bool), deduplicate=True)
    big_m = math.comb(g.private_nodes().size, 2)
    m_true = g.edges_private.shape[1]
    mech = EdgeRand(epsilon=eps)
    keep, flip = mech.pair_probabilities()
    mean = m_true * keep + (big_m - m_true) * flip
    var = m_true * keep * (1 - keep) + (big_m - m_true) * flip * (1 - flip)
    sizes = np.array([mech.privatize_edges(g, rng).shape[1] for _ in range(300)])
    assert abs(sizes.mean() - mean) < 4 * math.sqrt(var / 300), (sizes.mean(), mean)
    assert sizes.var(ddof=1) == pytest.approx(var, rel=0.3)


# -- LapGraph --------------------------------------------------------------------------------------
def test_top_order_statistics_match_sorting() -> None:
    """The 4 largest of 40 iid Laplace(0, 0.7): 20,000 direct draws against the sorted columns of
    20,000 dense samples, two-sample KS per rank (alpha = 1e-3 each)."""
    rng = np.random.default_rng(8)
    fast = np.stack([top_laplace_order_statistics(40, 4, 0.7, rng) for _ in range(20_000)])
    dense = -np.sort(-rng.laplace(0.0, 0.7, size=(20_000, 40)), axis=1)[:, :4]
    assert np.all(np.diff(fast, axis=1) < 0)
    for r in range(4):
        assert stats.ks_2samp(fast[:, r], dense[:, r]).pvalue > 1e-3, r
    assert top_laplace_order_statistics(5, 0, 1.0, rng).size == 0
    with pytest.raises(ValueError, match="k must be <= n"):
        top_laplace_order_statistics(3, 4, 1.0, rng)


def test_top_order_statistic_far_in_the_tail() -> None:
    """The maximum of n = 1e15 Laplace(0, 1): b (ln(n / 2) + Gumbel); mean b (ln(n/2) + gamma),
    sd b pi / sqrt(6); 4000 draws within 4 standard errors (false-failure rate 6e-5). Float
    uniforms near 1 would lose this tail entirely."""
    rng = np.random.default_rng(3)
    n = 10**15
    top = np.array([top_laplace_order_statistics(n, 1, 1.0, rng)[0] for _ in range(4000)])
    mean = math.log(n / 2) + np.euler_gamma
    assert abs(top.mean() - mean) < 4 * (math.pi / math.sqrt(6)) / math.sqrt(4000)


def _dense_lapgraph_kept(
    adj_pairs: np.ndarray, count: int, scale: float, runs: int, rng: np.random.Generator
) -> np.ndarray:
    """Brute force, as LinkTeller: noise on every pair, keep the `count` largest; returns the
    number of true edges kept per run."""
    kept = []
    for start in range(0, runs, 5000):
        r = min(5000, runs - start)
        scores = adj_pairs[None, :] + rng.laplace(0.0, scale, size=(r, adj_pairs.size))
        top = np.argpartition(-scores, count - 1, axis=1)[:, :count]
        kept.append(adj_pairs[top].sum(axis=1))
    return np.concatenate(kept).astype(np.int64)


@pytest.mark.parametrize("n_pri, m, count, scale", [(10, 12, 12, 1.0), (10, 12, 30, 0.5), (30, 40, 50, 0.6)])
def test_select_top_pairs_matches_dense_brute_force(n_pri: int, m: int, count: int, scale: float) -> None:
    """The number of true edges among the T kept: 3000 sparse runs against 40,000 dense runs,
    chi-square contingency test (bins with fewer than 5 expected merged), alpha = 1e-3; and the kept
    non-edges are uniform over the non-edge pairs (chi-square over their inclusion counts, 1e-3)."""
    rng = np.random.default_rng(n_pri * 1000 + count)
    total = math.comb(n_pri, 2)
    ranks = np.sort(rng.choice(total, m, replace=False)).astype(np.int64)
    adj_pairs = np.zeros(total)
    adj_pairs[ranks] = 1.0
    dense = _dense_lapgraph_kept(adj_pairs, count, scale, 40_000, rng)
    runs = 3000
    sparse = np.empty(runs, np.int64)
    incl = np.zeros(total, np.int64)
    for r in range(runs):
        out = select_top_pairs(ranks, total, count, scale, rng)
        assert out.size == count and np.all(np.diff(out) > 0)
        sparse[r] = np.isin(out, ranks).sum()
        incl[out] += 1
    hi = max(dense.max(), sparse.max()) + 1
    table = np.stack([np.bincount(sparse, minlength=hi), np.bincount(dense, minlength=hi)])
    expected_sparse = table.sum(axis=0) * runs / table.sum()
    # merge sparse bins from both ends until every bin expects >= 5 sparse runs
    groups, acc = [], np.zeros(2, np.int64)
    acc_exp = 0.0
    for k in range(hi):
        acc = acc + table[:, k]
        acc_exp += expected_sparse[k]
        if acc_exp >= 5:
            groups.append(acc)
            acc, acc_exp = np.zeros(2, np.int64), 0.0
    if acc.sum():
        groups[-1] = groups[-1] + acc
    merged = np.stack(groups, axis=1)
    if merged.shape[1] > 1:
        assert stats.chi2_contingency(merged).pvalue > 1e-3, merged
    assert abs(sparse.mean() - dense.mean()) < 4 * math.sqrt(sparse.var() / runs + dense.var() / dense.size)
    non_edges = np.setdiff1d(np.arange(total), ranks)
    if 0 < incl[non_edges].sum():
        assert stats.chisquare(incl[non_edges]).pvalue > 1e-3


def test_select_top_pairs_edge_cases() -> None:
    rng = np.random.default_rng(0)
    ranks = np.array([1, 4], np.int64)
    assert select_top_pairs(ranks, 6, 0, 1.0, rng).size == 0
    assert select_top_pairs(ranks, 6, -3, 1.0, rng).size == 0
    assert select_top_pairs(ranks, 6, 6, 1.0, rng).tolist() == list(range(6))
    assert select_top_pairs(ranks, 6, 99, 1.0, rng).tolist() == list(range(6))  # clipped to M
    # with a huge eps2 the scores barely move: the T = m largest are the true edges
    assert select_top_pairs(ranks, 6, 2, 1e-6, rng).tolist() == [1, 4]
    with pytest.raises(ValueError, match="edge_ranks"):
        select_top_pairs(np.array([4, 1]), 6, 2, 1.0, rng)


def _discrete_laplace_pmf(z: np.ndarray, eps: float) -> np.ndarray:
    return math.tanh(eps / 2) * np.exp(-eps * np.abs(z))


def _check_discrete_laplace(sample: np.ndarray, eps: float) -> None:
    """Chi-square goodness of fit to Pr(z) ∝ e^(-eps |z|) on the bins |z| <= K (expected >= 5
    each) plus the two tails; alpha = 1e-3."""
    n = sample.size
    zs = np.arange(-2000, 2001)
    pmf = _discrete_laplace_pmf(zs, eps)
    k = int(zs[(pmf * n >= 5)].max())
    inner = np.arange(-k, k + 1)
    obs = [np.sum(sample < -k)] + [np.sum(sample == z) for z in inner] + [np.sum(sample > k)]
    tail = (1 - pmf[np.abs(zs) <= k].sum()) / 2
    exp = np.concatenate([[tail], _discrete_laplace_pmf(inner, eps), [tail]]) * n
    assert stats.chisquare(obs, exp * (n / exp.sum())).pvalue > 1e-3


def test_lapgraph_edge_count_noise_is_discrete_laplace() -> None:
    """T - m is discrete Laplace at eps1 = 0.01 eps (scale 1/eps1): 20,000 draws, chi-square; and
    the released graph has exactly T edges (T drawn first from the same generator)."""
    m = LapGraph(epsilon=10.0)
    eps1, _ = m.allocate()
    assert eps1 == pytest.approx(0.1, rel=1e-15)
    rng = np.random.default_rng(11)
    z = np.array([m.noisy_edge_count(1000, 10**6, rng) - 1000 for _ in range(20_000)])
    _check_discrete_laplace(z, eps1)
    assert abs(z.mean()) < 4 * math.sqrt(2 * math.exp(-eps1) / (1 - math.exp(-eps1)) ** 2 / z.size)
    assert m.noisy_edge_count(3, 10, np.random.default_rng(0)) in range(11)
    g = _small_graph()
    total = math.comb(g.private_nodes().size, 2)
    lg = LapGraph(epsilon=1.0)
    for seed in range(20):
        t = lg.noisy_edge_count(g.edges_private.shape[1], total, np.random.default_rng(seed))
        assert lg.privatize_edges(g, np.random.default_rng(seed)).shape[1] == t


def test_lapgraph_end_to_end_matches_dense() -> None:
    """Whole mechanism (random T) on a 10-node pair space with count_share 0.3, eps 3: the number
    of true edges released, 2000 sparse runs against 20,000 dense LinkTeller-style runs (with the
    same discrete Laplace T): means within 4 standard errors, KS two-sample at alpha 1e-3 (the
    discrete statistic makes KS conservative)."""
    rng = np.random.default_rng(99)
    e = np.array([[0, 0, 1, 2, 3, 4, 5, 6, 7, 1, 2, 5], [1, 2, 3, 3, 4, 5, 9, 8, 9, 9, 7, 8]])
    g = GraphData.from_edges(10, e, private=np.ones(e.shape[1], bool))
    cand, ranks = private_pair_ranks(g)
    total = math.comb(cand.size, 2)
    mech = LapGraph(epsilon=3.0, count_share=0.3)
    eps1, eps2 = mech.allocate()
    true_keys = _keys(g.edges_private)
    sparse = np.array([np.isin(_keys(mech.privatize_edges(g, rng)), true_keys).sum() for _ in range(2000)])
    adj_pairs = np.zeros(total)
    adj_pairs[ranks] = 1.0
    dense = []
    for _ in range(20_000):
        t = mech.noisy_edge_count(ranks.size, total, rng)
        if t == 0:
            dense.append(0)
            continue
        scores = adj_pairs + rng.laplace(0.0, 1 / eps2, total)
        dense.append(int(adj_pairs[np.argpartition(-scores, t - 1)[:t]].sum()))
    dense_a = np.array(dense)
    assert abs(sparse.mean() - dense_a.mean()) < 4 * math.sqrt(sparse.var() / 2000 + dense_a.var() / 20_000)
    assert stats.ks_2samp(sparse, dense_a).pvalue > 1e-3


def _keys(e: np.ndarray) -> np.ndarray:
    return e[0] * 1_000_000 + e[1]


# -- LocalLap --------------------------------------------------------------------------------------
def test_local_lap_degree_noise_and_unbiasedness() -> None:
    """d* - d is discrete Laplace at eps1 = eps / 10 (pooled over nodes, 4000 runs, chi-square at
    1e-3), and E[d*] = d for every node (4 standard errors of the known variance 2a / (1 - a)^2,
    a = e^-eps1; Bonferroni-free rate 6e-5 per node)."""
    g = _small_graph()
    cand = g.private_nodes()
    indptr, indices = private_csr(g.edges_private, g.num_nodes)
    m = LocalLap(epsilon=2.0)
    eps1, _ = m.allocate()
    assert eps1 == pytest.approx(0.2, rel=1e-15)
    rng = np.random.default_rng(17)
    d = np.stack([m.noisy_degrees(cand, indptr, indices, cand, rng) for _ in range(4000)])
    deg = (indptr[cand + 1] - indptr[cand])
    _check_discrete_laplace((d - deg).ravel(), eps1)
    a = math.exp(-eps1)
    se = math.sqrt(2 * a / (1 - a) ** 2 / d.shape[0])
    assert np.all(np.abs(d.mean(axis=0) - deg) < 4 * se)
    assert d.var(axis=0, ddof=1).mean() == pytest.approx(2 * a / (1 - a) ** 2, rel=0.05)


def test_local_lap_edge_count_and_release() -> None:
    g = _small_graph()
    cand = g.private_nodes()
    total = math.comb(cand.size, 2)
    m = LocalLap(epsilon=1.0)
    assert LocalLap.edge_count(np.array([3, 4, -2]), 100) == 2
    assert LocalLap.edge_count(np.array([-5, 1]), 100) == 0
    assert LocalLap.edge_count(np.array([300, 4]), 100) == 100
    d = 2 * np.ones(cand.size, np.int64)  # given degrees: T = |V_pri|
    out = m.privatize_edges(g, np.random.default_rng(0), noisy_degrees=d)
    assert out.shape[1] == min(cand.size, total)
    with pytest.raises(ValueError, match="one value per node"):
        m.privatize_edges(g, np.random.default_rng(0), noisy_degrees=d[:-1])
    # without given degrees: T = floor(sum d* / 2) of the degrees drawn first from the generator
    indptr, indices = private_csr(g.edges_private, g.num_nodes)
    for seed in range(10):
        ds = m.noisy_degrees(cand, indptr, indices, cand, np.random.default_rng(seed))
        out = m.privatize_edges(g, np.random.default_rng(seed))
        assert out.shape[1] == LocalLap.edge_count(ds, total)
    assert any("2*eps1 + eps2" in a for a in m.guarantee.assumptions)


# -- NonPriv-Part and DPRR's combine_reports -----------------------------------------------------
def test_nonpriv_part_releases_only_public_edges() -> None:
    g = _small_graph()
    out = NonPrivPart().privatize(g, np.random.default_rng(0))
    assert out.edges_private.shape == (2, 0)
    assert np.array_equal(out.edges_public, g.edges_public)
    gu = NonPrivPart().guarantee
    assert gu.kind is GuaranteeKind.EDGE_DP and gu.epsilon == 0.0 and gu.check(0.0)
    assert Guarantee(GuaranteeKind.EDGE_DP, 0.0, Scope.EDGES).epsilon == 0.0
    with pytest.raises(ValueError, match="epsilon"):
        Guarantee(GuaranteeKind.EDGE_DP, -1e-9, Scope.EDGES)


def test_dprr_combine_reports_keeps_privatize_bit_identical() -> None:
    g = _small_graph()
    m = DPRR(epsilon=2.0)
    cand = g.private_nodes()
    indptr, indices = private_csr(g.edges_private, g.num_nodes)
    arcs = m.privatize_nodes(cand, indptr, indices, cand, np.random.default_rng(5))
    combined = m.combine_reports(arcs, g.num_nodes)
    assert np.array_equal(combined, symmetrize_reports(arcs, g.num_nodes))
    out = m.privatize(g, np.random.default_rng(5))
    assert np.array_equal(out.edges_private, merge_with_public(combined, g.edges_public))


def test_flip_probability() -> None:
    assert flip_probability(1.0) == pytest.approx(1 / (math.e + 1), rel=1e-15)
    assert flip_probability(800.0) == 0.0
    assert 0 < flip_probability(720.0) < 1e-300


# -- scale: nothing of size N^2 ----------------------------------------------------------------------
@pytest.fixture(scope="module")
def large_graph() -> GraphData:
    """200,000 nodes, ~150,000 private edges, |V_pri| > 100,000 (N^2 / 2 > 5e9 pairs)."""
    n = 200_000
    rng = np.random.default_rng(77)
    e = rng.integers(0, n, size=(2, 450_000))
    e = e[:, e[0] != e[1]]
    private = rng.random(e.shape[1]) < 1 / 3
    g = GraphData.from_edges(n, e, private=private, deduplicate=True)
    assert g.private_nodes().size > 100_000
    return g


@pytest.mark.parametrize(
    "mech", [WarnerRR(epsilon=20.0), EdgeRand(epsilon=20.0), LapGraph(epsilon=1.0), LocalLap(epsilon=1.0)],
    ids=repr,
)
def test_large_sparse_graph_without_quadratic_memory(large_graph: GraphData, mech: object) -> None:
    """With a small output (eps 20 for the RR mechanisms: about N^2 e^-20 ~ 50 false pairs; LapGraph
    and LocalLap release about |E_pri| pairs) the peak traced memory stays below 150 MB; a boolean
    N x N matrix alone would be 10 GB."""
    g = large_graph
    tracemalloc.start()
    try:
        out = mech.privatize_edges(g, np.random.default_rng(0))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 150 * 2**20, f"peak {peak / 2**20:.0f} MB"
    m = g.edges_private.shape[1]
    assert 0 < out.shape[1] < 2 * m
    assert np.all(out[0] < out[1])


@pytest.mark.parametrize("cls_name", ["warner_rr", "edge_rand", "dprr", "local_lap", "lapgraph"])
def test_budget_above_exact_sampling_cap_is_refused(cls_name: str) -> None:
    """Flip probabilities 1/(e^eps + 1) and the false-report counts are drawn exactly
    (bernoulli_exact, binomial_exact) up to eps = 50; above, float64 cannot realise them, so the
    mechanism refuses at construction (its epsilon_range) rather than weakening; the same cap
    holds for every edge mechanism."""
    from privgraph.mechanisms import build_mechanism

    build_mechanism(cls_name, {"epsilon": 50.0})
    for eps in (float(np.nextafter(50.0, np.inf)), 60.0, 1e308):
        with pytest.raises(ValueError, match=rf"^{cls_name}: epsilon = .* is outside \[.*, 50\]"):
            build_mechanism(cls_name, {"epsilon": eps})


@pytest.mark.parametrize("cls", WITH_EPS)
def test_epsilon_range_bounds(cls: type) -> None:
    """The bounds of each mechanism's range are accepted (with its default parameters), the next
    floats outside are refused with a message naming epsilon, the range and the sampler."""
    r = cls.epsilon_range
    assert r.high == 50.0 and not r.per_coordinate
    assert r.low == {WarnerRR: 2.0**-20, EdgeRand: 2.0**-20, LapGraph: 100 * 2.0**-20, LocalLap: 10 * 2.0**-20}[cls]
    sampler = {WarnerRR: "binomial_exact", EdgeRand: "binomial_exact", LapGraph: "discrete Laplace",
               LocalLap: "discrete Laplace"}[cls]
    assert sampler in r.note
    for eps in (r.low, r.high):
        assert cls(epsilon=eps).epsilon == eps
    for eps in (float(np.nextafter(r.low, 0.0)), float(np.nextafter(r.high, np.inf)), 1e-40, 1e308):
        with pytest.raises(ValueError, match=rf"^{cls.name}: epsilon = .* is outside \[.*\].*{sampler}"):
            cls(epsilon=eps)
    if cls in (LapGraph, LocalLap):  # at the bottom the default split leaves the count exactly 2^-20
        assert cls(epsilon=r.low).allocate()[0] == 2.0**-20


@pytest.mark.parametrize("cls, share", [(LapGraph, "count_share"), (LocalLap, "degree_share")])
def test_each_part_of_the_split_is_checked(cls: type, share: str) -> None:
    """Each part of the split budget must be in [2^-20, 50]: at epsilon = 2^-13, share 1/128 gives
    eps1 = 2^-20 (accepted) and the next share below refuses naming eps1; share 127/128 gives
    eps2 = 2^-20 and the next share above refuses naming eps2. LinkTeller's LapGraph at epsilon 10
    (eps1 = 0.1) is fine."""
    eps = 2.0**-13
    assert cls(epsilon=eps, **{share: 1 / 128}).allocate() == (2.0**-20, 127 * 2.0**-20)
    with pytest.raises(ValueError, match=rf"^{cls.name}: eps1 \({share} \* epsilon: .*discrete Laplace.*\) = "):
        cls(epsilon=eps, **{share: float(np.nextafter(1 / 128, 0.0))})
    assert cls(epsilon=eps, **{share: 127 / 128}).allocate() == (127 * 2.0**-20, 2.0**-20)
    with pytest.raises(ValueError, match=rf"^{cls.name}: eps2 \(epsilon - eps1: .*\) = "):
        cls(epsilon=eps, **{share: float(np.nextafter(127 / 128, 1.0))})
    assert LapGraph(epsilon=10.0, count_share=0.01).allocate() == pytest.approx((0.1, 9.9), rel=1e-15)
