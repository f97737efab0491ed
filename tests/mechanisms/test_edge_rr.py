"""EdgeRR and PrivHRG: validation, guarantee data, the schedule and its budget, output validity,
the per-chunk sampling API, diagnostics, reproducibility."""

from __future__ import annotations

import json
import math
from typing import Any

import numpy as np
import pytest

from privgraph.graph import GraphData, in_sorted
from privgraph.guarantee import GuaranteeKind, Scope
from privgraph.mechanisms.edges.edge_rr import HRG_EPSILON_RANGE, EdgeRR
from privgraph.mechanisms.edges.priv_hrg import PrivHRG
from privgraph.mechanisms.hrg import FittedHRG, NoisyDendrogram, exponent, private_sensitivity
from privgraph.mechanisms.hrg.convergence import MAX_STEPS_PER_LEAF

BAD_EPSILONS = [
    (float("nan"), ValueError),
    (float("inf"), ValueError),
    (0.0, ValueError),
    (-0.5, ValueError),
    (True, TypeError),
    ("1", TypeError),
    (None, TypeError),
]


def _graph(n: int = 300, seed: int = 0, rho: float = 0.5) -> GraphData:
    rng = np.random.default_rng(seed)
    m = 3 * n
    e = rng.integers(0, n, size=(2, m))
    e = e[:, e[0] != e[1]]
    return GraphData.from_edges(n, e, private=rng.random(e.shape[1]) < rho, deduplicate=True)


def _keys(e: np.ndarray, n: int) -> np.ndarray:
    return np.sort(e[0] * np.int64(n) + e[1])


# the steps come from the public convergence check ("auto"); one round keeps the tests fast
FAST = {"rounds": 1}


# -- validation -----------------------------------------------------------------------------------
@pytest.mark.parametrize("cls", [EdgeRR, PrivHRG])
@pytest.mark.parametrize("eps, exc", BAD_EPSILONS)
def test_bad_epsilon(cls: type, eps: Any, exc: type) -> None:
    with pytest.raises(exc, match="epsilon"):
        cls(epsilon=eps)


@pytest.mark.parametrize(
    "kw, exc, match",
    [
        ({"eps1_share": 0.0}, ValueError, "eps1_share"),
        ({"eps1_share": 1.0}, ValueError, "eps1_share"),
        ({"eps1_share": float("nan")}, ValueError, "eps1_share"),
        ({"eps1_share": True}, TypeError, "eps1_share"),
        ({"rounds": 0}, ValueError, "rounds"),
        ({"rounds": 2.0}, TypeError, "rounds"),
        ({"rounds": True}, TypeError, "rounds"),
        ({"public_steps_per_leaf": -1.0}, ValueError, "public_steps_per_leaf"),
        ({"private_steps_per_leaf": float("inf")}, ValueError, "private_steps_per_leaf"),
        ({"private_steps_per_leaf": float("nan")}, ValueError, "private_steps_per_leaf"),
        ({"public_steps_per_leaf": False}, TypeError, "public_steps_per_leaf"),
        ({"private_steps_per_leaf": "10"}, ValueError, "private_steps_per_leaf"),
        ({"private_steps_per_leaf": 5000.0}, ValueError, "both be 'auto' or both numbers"),
        ({"public_steps_per_leaf": 10.0, "private_steps_per_leaf": 10.0, "rounds": 1}, ValueError,
         "below the documented minimum"),
        ({"convergence_chains": 1}, ValueError, "convergence_chains"),
        ({"convergence_max_steps_per_leaf": 999}, ValueError, "convergence_max_steps_per_leaf"),
        ({"convergence_seed": -1}, ValueError, "convergence_seed"),
        ({"convergence_seed": 1.0}, TypeError, "convergence_seed"),
        ({"trace_every": -1}, ValueError, "trace_every"),
        ({"leaves": "some"}, ValueError, "leaves"),
        ({"schedule": "max-max"}, ValueError, "schedule"),
        ({"tau_b": -0.1}, ValueError, "tau_b"),
        ({"tau_c": float("nan")}, ValueError, "tau_c"),
    ],
)
def test_bad_parameters(kw: dict[str, Any], exc: type, match: str) -> None:
    with pytest.raises(exc, match=match):
        EdgeRR(epsilon=1.0, **kw)


@pytest.mark.parametrize(
    "kw, exc",
    [({"steps_per_leaf": -1.0}, ValueError), ({"steps_per_leaf": float("nan")}, ValueError),
     ({"steps_per_leaf": True}, TypeError), ({"eps1_share": 1.5}, ValueError),
     ({"steps_per_leaf": 999.0}, ValueError), ({"proxy_mean_degree": float("inf")}, ValueError),
     ({"convergence_chains": 0}, ValueError)],
)
def test_priv_hrg_bad_parameters(kw: dict[str, Any], exc: type) -> None:
    with pytest.raises(exc, match=next(iter(kw))):
        PrivHRG(epsilon=1.0, **kw)


@pytest.mark.parametrize("cls", [EdgeRR, PrivHRG])
def test_bad_inputs(cls: type) -> None:
    m = cls(epsilon=1.0)
    g = _graph(20)
    with pytest.raises(TypeError, match="Generator"):
        m.privatize(g, np.random.RandomState(0))
    with pytest.raises(TypeError, match="GraphData"):
        m.fit(g.edges_private, np.random.default_rng(0))
    with pytest.raises(TypeError, match="fitted"):
        m.sample(g, [0], np.random.default_rng(0))
    with pytest.raises(TypeError, match="fitted"):
        m.diagnostics(g)


# -- guarantee, params, budget -------------------------------------------------------------------------
@pytest.mark.parametrize("cls", [EdgeRR, PrivHRG])
@pytest.mark.parametrize("eps", [0.1, 0.7, 1.0, 3.3])
@pytest.mark.parametrize("share", [0.1, 0.5, 0.9])
def test_guarantee_and_budget_split(cls: type, eps: float, share: float) -> None:
    m = cls(epsilon=eps, eps1_share=share)
    g = m.guarantee
    assert g.kind is GuaranteeKind.EDGE_DP and g.scope is Scope.EDGES
    assert g.epsilon == eps
    assert g.check(eps) and not g.check(eps * (1 - 1e-9))
    assert m.eps1 + m.eps2 <= g.epsilon  # in floats, as the ledger adds them
    assert m.eps1 == pytest.approx(share * eps) and m.eps2 == pytest.approx((1 - share) * eps)
    assert any("law after the recorded number of steps" in a and "stationary law" in a for a in g.assumptions)
    assert any("PUBLIC convergence check" in a and "does not prove" in a for a in g.assumptions)
    assert any("Delta" in a and "floor" in a for a in g.assumptions)
    assert any("discrete Laplace" in a and "parallel composition" in a for a in g.assumptions)
    assert any("not covered" in a for a in g.assumptions)
    d = g.to_dict()
    json.dumps(d)


@pytest.mark.parametrize("cls", [EdgeRR, PrivHRG])
def test_epsilon_range_covers_both_parts(cls: type) -> None:
    assert cls.epsilon_range is HRG_EPSILON_RANGE
    m = cls(epsilon=20.0)  # 10 + 10: both parts in [2^-20, 13]
    assert m.eps1 == 10.0 and m.eps2 == 10.0
    with pytest.raises(ValueError, match="eps_e1 .*MCMC.* outside \\[9.53674e-07, 13\\]"):
        cls(epsilon=14.0, eps1_share=0.95)
    with pytest.raises(ValueError, match="eps_e2 .*discrete Laplace.* outside"):
        cls(epsilon=2.0**-19, eps1_share=0.9)
    with pytest.raises(ValueError, match="eps_e1"):
        cls(epsilon=2.0**-19, eps1_share=0.1)
    with pytest.raises(ValueError, match="epsilon = 27 is outside \\[1.90735e-06, 26\\]"):
        cls(epsilon=27.0)
    assert cls(epsilon=26.0).eps1 == 13.0
    # above 26 (the default split's bound) refused whatever the split
    with pytest.raises(ValueError, match="epsilon = 40"):
        cls(epsilon=40.0, eps1_share=0.25)


def test_edge_rr_assumptions_and_params() -> None:
    m = EdgeRR(epsilon=1.0, rounds=4, public_steps_per_leaf=1000, private_steps_per_leaf=3000, schedule="joint")
    a = m.guarantee.assumptions
    assert "V_pri (nodes with private edges) is public" in a
    assert "public edges are released as they are" in a
    assert any("4 rounds of 1000.0 public and 3000.0 private steps per leaf" in x for x in a)
    p = m.params()
    assert p == {
        "epsilon": 1.0, "eps1_share": 0.5, "rounds": 4, "public_steps_per_leaf": 1000.0,
        "private_steps_per_leaf": 3000.0, "trace_every": 0, "leaves": "private",
        "schedule": "joint", "tau_b": 0.05, "tau_c": 0.01, "convergence_chains": 4,
        "convergence_max_steps_per_leaf": MAX_STEPS_PER_LEAF, "block_leaves": None,
    }
    json.dumps(p)
    assert EdgeRR(**p).params() == p
    pf = m.params_for(1000)
    assert pf["steps"] == {"joint": 4_000_000}
    assert pf["sensitivity"] == private_sensitivity(1000)
    assert pf["exponent"] == exponent(0.5, 1000)
    assert pf["exponent"] * 2 * pf["sensitivity"] <= pf["eps1"]  # the factor 2
    alt = EdgeRR(epsilon=1.0, rounds=2, public_steps_per_leaf=2000, private_steps_per_leaf=4000)
    assert alt.params_for(100)["steps"] == {"public": 200_000, "private": 400_000}
    auto = EdgeRR(epsilon=1.0)
    assert auto.params()["public_steps_per_leaf"] == auto.params()["private_steps_per_leaf"] == "auto"
    assert auto.params_for(100)["steps"] == "auto"
    assert "convergence_seed" not in auto.params()  # public, but no manifest key may name a seed
    assert any("chosen by the public convergence check" in x for x in auto.guarantee.assumptions)
    assert any("schedule 'alternating'" in x for x in auto.guarantee.assumptions)
    r = repr(m)
    assert r.startswith("EdgeRR(") and "epsilon=1.0" in r
    pr = PrivHRG(epsilon=1.0)
    assert repr(pr).startswith("PrivHRG(") and "epsilon=1.0" in repr(pr)
    assert PrivHRG(**pr.params()).params() == pr.params()
    assert pr.params()["steps_per_leaf"] == "auto"
    assert "every edge is treated as private (public edges are privatized too)" in pr.guarantee.assumptions


def test_schedule_alternates_public_and_private_phases() -> None:
    m = EdgeRR(epsilon=2.0, rounds=3, public_steps_per_leaf=6000, private_steps_per_leaf=3000)
    a = exponent(1.0, 50)
    phases = m._phases(50, a)
    assert [(p.kind, p.steps) for p in phases] == [("public", 100_000), ("private", 50_000)] * 3
    assert all(p.a_pub == 1.0 and p.a_pri == 0.0 for p in phases[::2])
    assert all(p.a_pub == 0.0 and p.a_pri == a for p in phases[1::2])
    # 'auto' alternating: the check certifies ONE private phase; public phases as long
    auto = EdgeRR(epsilon=2.0, rounds=3)._phases(50, a, 2000.0)
    assert [(p.kind, p.steps) for p in auto] == [("public", 100_000), ("private", 100_000)] * 3
    # 'auto' joint: the check certifies the joint chain's length; rounds split it
    joint = EdgeRR(epsilon=2.0, rounds=3, schedule="joint")._phases(50, a, 3000.0)
    assert [(p.kind, p.steps, p.a_pub, p.a_pri) for p in joint] == [("joint", 50_000, 1.0, a)] * 3
    with pytest.raises(ValueError, match="auto"):
        EdgeRR(epsilon=2.0)._phases(50, a)
    # the private coefficient is eps1 / (2 Delta_e) with N = floor(|V_pri|^2 / 4)
    big_n = 50 * 50 // 4
    delta = math.log(big_n) + (big_n - 1) * math.log(big_n / (big_n - 1))
    assert a == pytest.approx(1.0 / (2 * delta), rel=1e-11) and a <= 1.0 / (2 * delta)


# -- privatization --------------------------------------------------------------------------------------
@pytest.mark.parametrize("leaves", ["private", "all"])
@pytest.mark.parametrize("schedule", ["alternating", "joint"])
def test_edge_rr_output(leaves: str, schedule: str) -> None:
    g = _graph(300 if schedule == "alternating" else 80, seed=1)  # the joint chain needs longer runs
    m = EdgeRR(epsilon=2.0, leaves=leaves, schedule=schedule, **FAST)
    out = m.privatize(g, np.random.default_rng(0))
    assert isinstance(out, GraphData) and out.num_nodes == g.num_nodes
    assert np.array_equal(out.edges_public, g.edges_public)
    e = out.edges_private
    assert e.dtype == np.int64 and np.all(e[0] < e[1])
    v_pri = g.private_nodes()
    assert np.all(in_sorted(e.ravel(), v_pri))  # only pairs of V_pri are private candidates
    assert not np.any(in_sorted(_keys(e, g.num_nodes), _keys(g.edges_public, g.num_nodes)))
    # the edge count is of the order of the private edge count
    assert 0.3 * g.edges_private.shape[1] < e.shape[1] < 3 * g.edges_private.shape[1]


def test_fit_sample_split_diagnostics() -> None:
    g = _graph(400, seed=2)
    m = EdgeRR(epsilon=1.0, trace_every=100, rounds=2)
    fitted = m.fit(g, np.random.default_rng(3))
    assert isinstance(fitted, FittedHRG) and isinstance(fitted.release, NoisyDendrogram)
    n_pri = g.private_nodes().size
    assert fitted.release.private_order.size == n_pri
    need = fitted.info["convergence_check"]["required_steps_per_leaf"]
    assert fitted.info["certified_steps_per_leaf"] == need  # one private phase
    assert fitted.info["steps"] == {"public": 2 * need * n_pri, "private": 2 * need * n_pri}
    assert fitted.info["sensitivity"] == private_sensitivity(n_pri)
    chunks = m.split(fitted, 3)
    assert np.array_equal(np.sort(np.concatenate(chunks)), np.arange(fitted.release.num_internal))
    parts = [m.sample(fitted, c, np.random.default_rng(10 + i)) for i, c in enumerate(chunks)]
    union = np.concatenate(parts, axis=1)
    assert np.unique(_keys(union, 400)).size == union.shape[1]
    assert np.all(union[0] < union[1])
    # the release alone suffices for sampling (what the parallel map ships)
    again = m.sample(fitted.release, chunks[0], np.random.default_rng(10))
    assert np.array_equal(again, parts[0])
    diag = m.diagnostics(fitted)
    text = json.dumps(diag)
    assert "seed" not in text
    assert diag["covered_by_guarantee"] is False
    mc = diag["mcmc"]
    assert len(mc["trace"]["step"]) == sum(fitted.info["steps"].values()) // 100
    assert set(mc["trace"]["phase"]) == {"public", "private"}
    assert set(mc["convergence"]) == {"public", "private"}
    assert {"relative_change", "geweke_z", "points"} <= set(mc["convergence"]["private"])
    assert 0 < mc["acceptance_rate"]["private"] <= 1


def test_release_holds_no_true_counts() -> None:
    g = _graph(200, seed=4)
    fitted = EdgeRR(epsilon=1.0, **FAST).fit(g, np.random.default_rng(0))
    names = {f for f in vars(fitted.release)}
    assert not any(n.startswith("e_") or n in ("lca", "edges") for n in names)


def test_priv_hrg_output() -> None:
    g = _graph(120, seed=5)
    m = PrivHRG(epsilon=2.0)
    out = m.privatize(g, np.random.default_rng(0))
    assert out.edges_public.shape == (2, 0)
    e = out.edges_private
    assert np.all(e[0] < e[1]) and np.unique(_keys(e, 120)).size == e.shape[1]
    touched = np.unique(g.edges("all").ravel())
    assert np.all(in_sorted(e.ravel(), touched))
    assert 0.3 * g.num_edges < e.shape[1] < 3 * g.num_edges
    fitted = m.fit(g, np.random.default_rng(1))
    need = fitted.info["convergence_check"]["required_steps_per_leaf"]
    assert fitted.info["steps"] == {"private": need * touched.size}
    assert set(m.diagnostics(fitted)["mcmc"]["trace"]["phase"]) == {"private"}


@pytest.mark.parametrize("cls, kw", [(EdgeRR, FAST), (PrivHRG, {})])
def test_reproducible(cls: type, kw: dict[str, Any]) -> None:
    g = _graph(120, seed=6)
    m = cls(epsilon=1.0, **kw)
    a = m.privatize(g, np.random.default_rng(42))
    b = m.privatize(g, np.random.default_rng(42))
    c = m.privatize(g, np.random.default_rng(43))
    assert np.array_equal(a.edges_private, b.edges_private)
    assert not np.array_equal(a.edges_private, c.edges_private)
    fa, fb = m.fit(g, np.random.default_rng(7)), m.fit(g, np.random.default_rng(7))
    for name in ("left", "right", "prob", "private_order"):
        assert np.array_equal(getattr(fa.release, name), getattr(fb.release, name))
    assert fa.mcmc.to_dict() == fb.mcmc.to_dict()


def test_degenerate_graphs() -> None:
    m = EdgeRR(epsilon=1.0, **FAST)
    empty = GraphData(num_nodes=5)
    assert m.privatize(empty, np.random.default_rng(0)).edges_private.shape == (2, 0)
    one = GraphData(num_nodes=5, edges_public=np.array([[0], [1]]), edges_private=np.array([[2], [3]]))
    out = m.privatize(one, np.random.default_rng(0))
    assert out.edges_private.shape[1] <= 1 and np.array_equal(out.edges_public, one.edges_public)
    three = GraphData(num_nodes=5, edges_private=np.array([[0, 1], [1, 2]]))
    out = EdgeRR(epsilon=1.0, **FAST).privatize(three, np.random.default_rng(0))
    assert np.all(in_sorted(out.edges_private.ravel(), np.array([0, 1, 2])))
    assert EdgeRR(epsilon=1.0, **FAST).fit(one, np.random.default_rng(0)).info["convergence_check"]["trivial"]
    assert PrivHRG(epsilon=1.0).privatize(empty, np.random.default_rng(0)).num_edges == 0


def test_priv_hrg_release_ignores_which_edges_are_public() -> None:
    """privHRG privatizes every edge: its release is a function of the edge SET, whatever part of
    it is marked public (the Cora floor bar's rho 0.2 and rho 1.0 privHRG cells are one release)."""
    rng = np.random.default_rng(6)
    e = rng.integers(0, 120, size=(2, 360))
    e = e[:, e[0] != e[1]]
    every = GraphData.from_edges(120, e, private=np.ones(e.shape[1], bool), deduplicate=True)
    fifth = GraphData.from_edges(120, e, private=rng.random(e.shape[1]) < 0.2, deduplicate=True)
    assert every.edges_public.shape[1] == 0 < fifth.edges_public.shape[1]
    m = PrivHRG(epsilon=1.0)
    a, b = m.privatize(every, np.random.default_rng(3)), m.privatize(fifth, np.random.default_rng(3))
    assert b.edges_public.shape == (2, 0)
    assert np.array_equal(a.edges_private, b.edges_private)
