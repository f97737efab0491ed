"""Exact counts and decisions of the edge mechanisms where float64 sampling fails.

numpy's ``Generator.binomial`` returns 0 for every uniform once ``(1 - p)^n`` rounds to within
2^-53 of 1 (``n p`` below ~1e-16), so the number of false reports of DPRR / Warner RR and of
false edges of EdgeRand was realised as 0 at large budgets. A Monte Carlo test cannot see a
probability of 1e-20; these tests feed crafted uniforms instead (a ``Generator`` whose first
``random`` calls are scripted) and show the DECISION BOUNDARY: the count is >= 1 exactly when the
106-bit uniform ``U = u_hi + 2^-53 u_lo`` is below ``q0 = 1 - (1 - p)^n``, so the realised
Pr(K >= 1) is ``ceil(2^106 q0) 2^-106``: ``q0`` itself when ``q0 >= 2^-54``, within 2^-106 below.
First for :func:`binomial_exact` alone, then through each mechanism's own code path, where they
fail with the former ``rng.binomial`` / one-uniform comparison (checked by reverting those calls).
"""

from __future__ import annotations

import math
import re
from fractions import Fraction
from typing import Any

import numpy as np
import pytest

import privgraph.mechanisms.edges.dprr as dprr_module
from privgraph.graph import GraphData
from privgraph.mechanisms.edges.dprr import (
    DPRR,
    _report_probabilities,
    _sampling_probability,
    _true_neighbour_probabilities,
    private_csr,
)
from privgraph.mechanisms.edges.edge_rand import EdgeRand, flip_probability
from privgraph.mechanisms.edges.warner_rr import WarnerRR
from privgraph.mechanisms.exact_binomial import binomial_exact, binomial_nonzero_probability

ULP = 2.0**-53


class ScriptedGenerator(np.random.Generator):
    """A ``numpy.random.Generator`` whose first ``random`` calls return scripted uniforms (each
    checked against the size asked for); later calls, and every other method, use its PCG64."""

    def __init__(self, script: list[list[float]], seed: int = 0) -> None:
        super().__init__(np.random.PCG64(seed))
        self.script = [np.asarray(s, dtype=np.float64) for s in script]

    def random(
        self, size: int | tuple[int, ...] | None = None, dtype: Any = np.float64, out: np.ndarray | None = None
    ) -> Any:
        if not self.script:
            return super().random(size, dtype, out)
        values = self.script.pop(0)
        n = int(np.prod(size)) if size is not None else 1
        assert values.size == n, f"scripted call of {values.size} uniforms, the sampler asked for {n}"
        return values.reshape(size) if size is not None else float(values[0])


def _exact_nonzero(n: int, p: float) -> Fraction:
    """1 - (1 - p)^n for the float p, by the alternating series (5 terms: the rest is below
    C(n, 6) p^6, negligible next to n p for n p <= 1e-10)."""
    pf = Fraction(p)
    return sum((Fraction((-1) ** (j + 1) * math.comb(n, j)) * pf**j for j in range(1, 6)), Fraction(0))


# -- binomial_exact alone -------------------------------------------------------------------------------
# (n, p): n p = 1e-16, 1e-20, 1e-25 (and 1e-16 with n = 1 and n = 10)
TINY_MEANS = [(10**6, 1e-22), (1, 1e-16), (10, 1e-17), (10**4, 1e-24), (10**9, 1e-34)]


@pytest.mark.parametrize("n, p", TINY_MEANS)
def test_numpy_binomial_cannot_realise_tiny_means(n: int, p: float) -> None:
    """Why binomial_exact exists: numpy's inversion starts at X = 0 with px = exp(n log(1 - p)) and
    moves on only while the 53-bit uniform U (at most 1 - 2^-53) exceeds px. Here px >= 1 - 2^-53
    in float64, so it returns 0 for EVERY uniform: Pr(K >= 1) is realised as 0, not n p."""
    px = float(np.exp(n * np.log(1.0 - p)))
    assert px >= 1.0 - 2.0**-53
    assert not np.random.default_rng(0).binomial(n, p, size=10_000).any()
    assert float(binomial_nonzero_probability(n, p)) > 0.0


@pytest.mark.parametrize("n, p", TINY_MEANS)
def test_binomial_exact_decides_k_positive_exactly_below_q0(n: int, p: float) -> None:
    """The decision boundary, with crafted uniforms: K >= 1 exactly when the 106-bit uniform
    U = u_hi + 2^-53 u_lo is below q0 = 1 - (1 - p)^n. q0 < 2^-53 here, so K >= 1 needs u_hi = 0
    and then u_lo = l 2^-53 with l < l* = ceil(2^106 q0): the realised Pr(K >= 1) is l* 2^-106,
    exactly q0 when q0 >= 2^-54, within 2^-106 of it below, and q0 is within relative 2^-51 of
    the exact 1 - (1 - p)^n of the float p."""
    q0 = float(binomial_nonzero_probability(n, p))
    exact = _exact_nonzero(n, p)
    assert abs(Fraction(q0) - exact) <= 2.0**-51 * exact
    assert q0 < 2.0**-53
    l_star = math.ceil(Fraction(q0) * 2**106)
    realised = Fraction(l_star, 2**106)
    if q0 >= 2.0**-54:
        assert realised == Fraction(q0)
    assert abs(realised - exact) <= Fraction(1, 2**106) + 2.0**-51 * exact
    ulp = 2.0**-53

    def draw(u_hi: float, u_lo: float | None) -> int:
        # the first uniform is u_hi, the second (drawn on a tie u_hi == 0 only) u_lo; a chain step
        # K >= 2 | K >= 1 (probability ~ n p / 2) then takes the PCG64's uniform 0.637: it stops
        rng = ScriptedGenerator([[u_hi]] + ([[u_lo]] if u_lo is not None else []))
        k = int(binomial_exact(n, p, rng))
        assert not rng.script  # the tie drew exactly the scripted low bits
        return k

    assert draw(0.0, (l_star - 1) * ulp) == 1  # the largest U below q0
    assert draw(0.0, l_star * ulp) == 0  # the smallest U at or above q0
    assert draw(0.0, 0.0) == 1
    assert draw(ulp, None) == 0  # u_hi > 0: U >= 2^-53 > q0, no low bits drawn
    assert draw(0.5, None) == 0


# -- through the mechanisms ----------------------------------------------------------------------------
def _matching() -> GraphData:
    """Six nodes, private edges {0,1}, {2,3}, {4,5}: every node has N = 5 candidates, 1 neighbour
    and 4 non-neighbours (EdgeRand: 15 pairs, 12 non-edges)."""
    e = np.array([[0, 2, 4], [1, 3, 5]])
    return GraphData(num_nodes=6, edges_private=e)


def _boundary(q: float) -> tuple[float, int]:
    """For a probability q < 1/2 decided by ``bernoulli_exact``: the u_hi of its tie,
    ``f 2^-53`` with ``f = floor(2^53 q)``, and ``l*``: on that tie, ``u_lo = l 2^-53`` hits iff
    ``l < l*``. The realised probability is ``f 2^-53 + l* 2^-106``."""
    f = math.floor(Fraction(q) * 2**53)
    l_star = math.ceil((Fraction(q) * 2**53 - f) * 2**53)
    assert Fraction(f, 2**53) + Fraction(l_star, 2**106) - Fraction(q) < Fraction(1, 2**106)
    return f * ULP, l_star


# the 106-bit uniforms of the five tied nodes, relative to the boundary l*: below (hit) or not
TIE_OFFSETS = [-1, 0, "zero", "top", -1]
HITS = [1, 0, 1, 0, 1, 0]  # node 5 draws u_hi = 0.5: no tie, no hit


def _tie_lows(l_star: int) -> list[float]:
    out = []
    for off in TIE_OFFSETS:
        out.append(0.0 if off == "zero" else 1.0 - ULP if off == "top" else (l_star + off) * ULP)
    return out


def _count_script(q0: float) -> list[list[float]]:
    """The count's uniforms for six nodes: u_hi (five ties, one 0.5) and the five tied u_lo."""
    u_tie, l_star = _boundary(q0)
    assert l_star >= 2  # the crafted lows (l* - 1, l*) are distinct from 0
    return [[u_tie] * 5 + [0.5], _tie_lows(l_star)]


def _false_reports_per_node(reports: np.ndarray, g: GraphData) -> np.ndarray:
    adj = np.zeros((6, 6), bool)
    adj[g.edges_private[0], g.edges_private[1]] = True
    adj |= adj.T
    false = ~adj[reports[0], reports[1]]
    return np.bincount(reports[0][false], minlength=6)


@pytest.mark.parametrize("eps", [38.0, 45.0, 50.0])
def test_warner_rr_false_report_count_is_exact(eps: float) -> None:
    """Warner RR at eps = 38, 45, 50: a node's 4 non-neighbours are reported Binomial(4, q),
    q = 1/(e^eps + 1) ~ 3e-17 .. 2e-22, so Pr(K >= 1) = q0 ~ 1.3e-16 .. 7.7e-22, which numpy's
    binomial realises as 0. Through privatize_nodes, with the bits' keep uniforms 0.5 (kept) and
    the count's uniforms crafted around q0: a node makes a false report exactly when its 106-bit
    uniform is below q0."""
    g = _matching()
    m = WarnerRR(epsilon=eps)
    _, q = m.report_probabilities()
    q0 = float(binomial_nonzero_probability(4, q))
    exact = 1 - (1 - Fraction(q)) ** 4
    assert abs(Fraction(q0) - exact) <= exact * 2.0**-51 and q0 < 2.0**-52
    assert not np.random.default_rng(0).binomial(4, q, size=10_000).any()  # numpy: never
    rng = ScriptedGenerator([[0.5] * 6] + _count_script(q0))  # keep (6 bits), count u_hi, u_lo
    cand = g.private_nodes()
    indptr, indices = private_csr(g.edges_private, g.num_nodes)
    reports = m.privatize_nodes(cand, indptr, indices, cand, rng)
    assert _false_reports_per_node(reports, g).tolist() == HITS
    assert reports.shape[1] == 6 + sum(HITS)  # every true bit kept (its flip probability is q)
    assert not rng.script  # every crafted uniform was drawn


@pytest.mark.parametrize("eps, alpha", [(45.0, 0.9), (50.0, 0.9), (50.0, 0.75)])
def test_dprr_false_report_count_is_exact(monkeypatch: pytest.MonkeyPatch, eps: float, alpha: float) -> None:
    """DPRR with eps2 = 37.5 .. 45: a node's false reports are Binomial(N - d, (1 - p) q_v),
    Pr(K >= 1) ~ 2e-16 .. 1e-19 (numpy: never). With the degree noise pinned to 0 (d* = d = 1, so q_v is
    known), the true neighbours kept (uniforms 0.5) and the count's uniforms crafted around q0:
    false reports exactly below q0."""
    monkeypatch.setattr(dprr_module, "discrete_laplace", lambda rng, e, size: np.zeros(size, np.int64))
    g = _matching()
    m = DPRR(epsilon=eps, alpha=alpha)
    _, eps2 = m.allocate(6)
    _, p_flip, _ = _report_probabilities(eps2)
    q_v = float(_sampling_probability(np.array([1]), 5, eps2)[0])
    q0 = float(binomial_nonzero_probability(4, p_flip * q_v))
    assert 0 < q0 < 2.0**-50
    assert not np.random.default_rng(0).binomial(4, p_flip * q_v, size=10_000).any()
    rng = ScriptedGenerator([[0.5] * 6] + _count_script(q0))
    cand = g.private_nodes()
    indptr, indices = private_csr(g.edges_private, g.num_nodes)
    reports = m.privatize_nodes(cand, indptr, indices, cand, rng)
    assert _false_reports_per_node(reports, g).tolist() == HITS
    assert reports.shape[1] == 6 + sum(HITS)
    assert not rng.script


@pytest.mark.parametrize("eps", [45.0, 50.0])
def test_dprr_keep_decision_is_exact(monkeypatch: pytest.MonkeyPatch, eps: float) -> None:
    """DPRR's true neighbour is NOT reported with probability 1 - p q_v ~ 4 (1 - p) ~ 1e-19 (d* = 1,
    N = 5): the former ``rng.random() < p q`` compared one uniform with p q, which is 1.0 in
    float64, so the neighbour was always reported. Now ``bernoulli_exact`` decides on the smaller
    of p q and 1 - p q (computed without cancellation): dropped exactly when the 106-bit uniform is
    below 1 - p q."""
    monkeypatch.setattr(dprr_module, "discrete_laplace", lambda rng, e, size: np.zeros(size, np.int64))
    g = _matching()
    m = DPRR(epsilon=eps)
    _, eps2 = m.allocate(6)
    report, silent = (float(x[0]) for x in _true_neighbour_probabilities(np.array([1]), 5, eps2))
    p_flip = Fraction(_report_probabilities(eps2)[1])
    q_exact = 1 / (1 * (1 - 2 * p_flip) + 5 * p_flip)  # Eq. 6 at d* = 1 for the float 1 - p
    silent_exact = 1 - (1 - p_flip) * q_exact
    assert abs(Fraction(silent) - silent_exact) <= silent_exact * 2.0**-50
    assert report == 1.0 and 0 < silent < 2.0**-53  # p q rounds to 1: one uniform never drops
    u_tie, l_star = _boundary(silent)
    # keep: u_hi of the six edge ends (all tied) and their u_lo; the count then draws from the
    # PCG64 (Pr(K >= 1) ~ 1e-19: no false report)
    rng = ScriptedGenerator([[u_tie] * 6, _tie_lows(l_star) + [1.0 - ULP]])
    cand = g.private_nodes()
    indptr, indices = private_csr(g.edges_private, g.num_nodes)
    reports = m.privatize_nodes(cand, indptr, indices, cand, rng)
    reporters = set(reports[0].tolist())
    assert _false_reports_per_node(reports, g).sum() == 0
    # edge ends in the order of the reporters 0..5, one each: dropped where the uniform hit
    assert [int(v not in reporters) for v in range(6)] == HITS
    assert not rng.script


@pytest.mark.parametrize("eps", [38.0, 45.0, 50.0])
def test_edge_rand_false_edge_count_is_exact(eps: float) -> None:
    """EdgeRand on 12 non-edges at eps = 38 .. 50: Binomial(12, q) false edges, Pr(>= 1) ~ 4e-16 ..
    2e-21 (numpy: never). Through privatize_edges, true edges kept (uniforms 0.5): one false edge
    exactly when the count's 106-bit uniform is below q0."""
    g = _matching()
    m = EdgeRand(epsilon=eps)
    q = flip_probability(eps)
    q0 = float(binomial_nonzero_probability(12, q))
    assert not np.random.default_rng(0).binomial(12, q, size=10_000).any()
    u_tie, l_star = _boundary(q0)
    for low, want in (((l_star - 1) * ULP, 4), (l_star * ULP, 3), (0.0, 4), (1.0 - ULP, 3)):
        rng = ScriptedGenerator([[0.5] * 3, [u_tie], [low]])
        out = m.privatize_edges(g, rng)
        assert out.shape[1] == want, (low, out)
        assert not rng.script
    rng = ScriptedGenerator([[0.5] * 3, [0.5]])  # u_hi above the tie: no low bits, no false edge
    assert m.privatize_edges(g, rng).shape[1] == 3 and not rng.script


# -- the ranges at load time ---------------------------------------------------------------------------
@pytest.mark.parametrize(
    "edges, names",
    [
        ({"mechanism": "dprr", "epsilon": 1e308}, "epsilon"),
        ({"mechanism": "dprr", "epsilon": 1e-40}, "epsilon"),
        ({"mechanism": "dprr", "epsilon": 50.00000000000001}, "epsilon"),
        ({"mechanism": "warner_rr", "epsilon": 60.0}, "epsilon"),
        ({"mechanism": "edge_rand", "epsilon": 1e-7}, "epsilon"),
        ({"mechanism": "local_lap", "epsilon": 1e308}, "epsilon"),
        ({"mechanism": "lapgraph", "epsilon": 5e-5}, "epsilon"),
        ({"mechanism": "lapgraph", "epsilon": 1e-3, "count_share": 1e-4}, "eps1"),
        ({"mechanism": "local_lap", "epsilon": 1e-3, "degree_share": 0.9999}, "eps2"),
        ({"mechanism": "dprr", "epsilon": 1.0, "alpha": 1e-7}, "eps2"),
    ],
)
def test_out_of_range_budgets_are_refused_when_the_pipeline_is_loaded(
    tmp_path, monkeypatch: pytest.MonkeyPatch, edges: dict, names: str
) -> None:
    """load_config refuses the pipeline with a one-line ConfigError (exit code 2) naming the YAML
    path, the budget (or the part of the split) and the range, before any data is read (the data
    root is empty)."""
    import yaml

    from privgraph.config.loader import load_config
    from privgraph.errors import ConfigError

    monkeypatch.setenv("PRIVGRAPH_DATA_ROOT", str(tmp_path / "no-data-here"))
    data = {"pipelines": {"p": {"dataset": {"name": "cora", "rho": 0.2}, "edges": edges, "budget": {"edges": 100.0}}}}
    path = tmp_path / "pipelines.yaml"
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(ConfigError) as info:
        load_config(path)
    msg = str(info.value)
    assert "\n" not in msg and info.value.exit_code == 2
    assert re.match(rf"^pipelines\.p\.edges: {edges['mechanism']}: {names}\b.* is outside \[.*\]", msg), msg
    ok = dict(edges, epsilon=1.0)
    ok.pop("count_share", None), ok.pop("degree_share", None), ok.pop("alpha", None)
    path.write_text(yaml.safe_dump({"pipelines": {"p": {**data["pipelines"]["p"], "edges": ok}}}))
    assert load_config(path).get("p").edges.mechanism == edges["mechanism"]
