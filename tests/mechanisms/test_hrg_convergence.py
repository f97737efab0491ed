"""The PUBLIC convergence check of EdgeRR and privHRG: its diagnostic (split R-hat), its proxies,
determinism given the public seed, that its record is a function of public data only (one private
edge changed: identical record), the documented minimum (refused at construction and at config
load), and the refusal of step counts below what the check requires (before the private chain
runs)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml

from privgraph.errors import ConfigError, ValidationFailedError
from privgraph.graph import GraphData, in_sorted
from privgraph.mechanisms import build_mechanism
from privgraph.mechanisms.edges.edge_rr import EdgeRR, chosen_steps
from privgraph.mechanisms.edges.priv_hrg import PrivHRG
from privgraph.mechanisms.hrg import Dendrogram, Phase, exponent
from privgraph.mechanisms.hrg.convergence import (
    MIN_STEPS_PER_LEAF,
    RHAT_THRESHOLD,
    SAFETY_FACTOR,
    Proxy,
    clear_check_cache,
    convergence_check,
    split_rhat,
)
from privgraph.mechanisms.hrg.proxy import edge_rr_proxy, priv_hrg_proxy, synthetic_edges
from privgraph.storage.manifest import seed_key_paths

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def _fresh_checks():
    """Every test runs its checks' chains: no record kept from another test."""
    clear_check_cache()
    yield
    clear_check_cache()


def _graph(n: int = 80, seed: int = 1, rho: float = 0.5) -> GraphData:
    rng = np.random.default_rng(seed)
    e = rng.integers(0, n, size=(2, 3 * n))
    e = e[:, e[0] != e[1]]
    return GraphData.from_edges(n, e, private=rng.random(e.shape[1]) < rho, deduplicate=True)


def _karate(rho: float = 0.5, seed: int = 0) -> GraphData:
    """Zachary's karate club (a small real graph), each edge private with probability ``rho``."""
    import networkx as nx

    g = nx.karate_club_graph()
    e = np.array(sorted(g.edges()), dtype=np.int64).T
    return GraphData.from_edges(g.number_of_nodes(), e, private=np.random.default_rng(seed).random(e.shape[1]) < rho)


def _one_private_edge_moved(g: GraphData) -> GraphData:
    """A neighbouring input: one private edge (u, v) replaced by (u, w), V_pri unchanged."""
    pri = g.edges_private
    deg = np.bincount(pri.ravel(), minlength=g.num_nodes)
    keys = set((pri[0] * g.num_nodes + pri[1]).tolist()) | set((g.edges_public[0] * g.num_nodes + g.edges_public[1]).tolist())
    v_pri = g.private_nodes()
    for k in range(pri.shape[1]):
        u, v = int(pri[0, k]), int(pri[1, k])
        if deg[v] < 2:
            continue
        for w in v_pri.tolist():
            a, b = min(u, w), max(u, w)
            if w not in (u, v) and a * g.num_nodes + b not in keys:
                new = pri.copy()
                new[:, k] = (a, b)
                out = g.replace(edges_private=new[:, np.lexsort((new[1], new[0]))])
                assert np.array_equal(out.private_nodes(), v_pri)
                assert out.edges_private.shape == pri.shape and not np.array_equal(out.edges_private, pri)
                return out
    raise AssertionError("no movable private edge")


# -- the diagnostic ------------------------------------------------------------------------------
def test_split_rhat() -> None:
    rng = np.random.default_rng(0)
    iid = rng.normal(size=(4, 1000))
    assert split_rhat(iid) < 1.01
    shifted = iid + np.array([[0.0], [0.0], [0.0], [1.0]])
    assert split_rhat(shifted) > 1.05  # one chain in another mode
    trend = iid + np.linspace(0, 3, 1000)  # every chain still drifting: caught by the split
    assert split_rhat(trend) > 1.05
    wide = iid * np.array([[1.0], [1.0], [1.0], [4.0]])  # same mean, other spread: the folded part
    assert split_rhat(wide) > 1.05
    assert split_rhat(np.ones((4, 50))) == 1.0
    assert split_rhat(np.ones((4, 3))) is None
    with pytest.raises(ValueError, match="chains"):
        split_rhat(np.ones(10))


def test_synthetic_edges_are_valid_heavy_tailed_and_seeded() -> None:
    leaves = np.arange(5, 2005, 2, dtype=np.int64)
    e = synthetic_edges(3000, leaves, 4.0, np.random.default_rng(1))
    assert e.dtype == np.int64 and np.all(e[0] < e[1])
    keys = e[0] * 3000 + e[1]
    assert np.all(np.diff(keys) > 0) and np.all(in_sorted(e.ravel(), leaves))
    deg = np.bincount(np.searchsorted(leaves, e.ravel()), minlength=leaves.size)
    assert 3.5 < deg.mean() <= 4.0 and deg.min() >= 1
    assert deg.max() > 8 * deg.mean()  # preferential attachment: hubs
    assert np.array_equal(e, synthetic_edges(3000, leaves, 4.0, np.random.default_rng(1)))


def test_edge_rr_proxy_reads_public_edges_and_tops_up() -> None:
    g = _graph(200)
    m = EdgeRR(epsilon=1.0)
    leaves, pub, mask, _ = m._inputs(g)
    px = edge_rr_proxy(g.num_nodes, leaves, pub, mask, 0)
    assert np.array_equal(px.edges_public, pub) and np.array_equal(px.edges_private, pub)
    assert px.info["synthetic_edges"] == 0 and px.info["private_role_edges"] == pub.shape[1]
    d = px.dendrogram(np.random.default_rng(0))  # one pair in both roles: counts stay exact
    d.run_moves(np.random.default_rng(1).integers(0, d.num_internal - 1, 2000), np.zeros(2000, np.int64),
                np.full(2000, -np.inf), 1.0, 0.5)
    s = d.counts_from_scratch()
    assert np.array_equal(s["e_pub"], d.e_pub) and np.array_equal(s["e_pri"], d.e_pri)
    # few public edges among the private leaves: topped up to ceil(|V_pri| / 2), the public bound
    few = edge_rr_proxy(g.num_nodes, leaves, pub[:, :3], mask, 0)
    assert few.edges_private.shape[1] == (leaves.size + 1) // 2
    assert few.info["synthetic_edges"] == (leaves.size + 1) // 2 - 3
    with pytest.raises(ValueError, match="both public and private"):
        Dendrogram.random(g.num_nodes, leaves, pub, pub, np.random.default_rng(0))


# -- determinism and publicness ---------------------------------------------------------------------
def _record_is_public(rec: dict[str, Any]) -> None:
    text = json.dumps(rec)
    assert not seed_key_paths(rec) and "seed" not in text
    assert rec["reads_private_data"] is False


def test_check_is_deterministic_given_its_public_seed() -> None:
    g = _graph(100)
    leaves, pub, mask, v = EdgeRR(epsilon=1.0)._inputs(g)
    px = edge_rr_proxy(g.num_nodes, leaves, pub, mask, 0)
    kernel = Phase("private", 0, 0.0, exponent(0.5, v.size))
    a = convergence_check(px, kernel, seed=3, threads=1)
    clear_check_cache()
    b = convergence_check(px, kernel, seed=3, threads=2)
    assert a == b and a["passed"]
    c = convergence_check(px, kernel, seed=4, threads=2)
    assert c["budgets"][0]["rhat"] != a["budgets"][0]["rhat"]
    _record_is_public(a)
    assert a["required_steps_per_leaf"] == int(SAFETY_FACTOR * a["passed_steps_per_leaf"])
    assert a["budgets"][0]["steps_per_leaf"] == MIN_STEPS_PER_LEAF
    assert a["proxy_steps_run"] == 4 * a["passed_steps_per_leaf"] * leaves.size


@pytest.mark.parametrize(
    "mech",
    [EdgeRR(epsilon=1.0, rounds=1), EdgeRR(epsilon=1.0, rounds=1, leaves="all"), PrivHRG(epsilon=1.0)],
    ids=["edge_rr", "edge_rr_all_leaves", "priv_hrg"],
)
def test_check_record_is_identical_when_one_private_edge_changes(mech: Any) -> None:
    g = _graph(100)
    h = _one_private_edge_moved(g)
    if isinstance(mech, PrivHRG):  # every edge is private to privHRG: move one, same leaf set
        assert np.array_equal(np.unique(g.edges("all")), np.unique(h.edges("all")))
    a = mech.convergence_check(g)
    clear_check_cache()
    b = mech.convergence_check(h)
    assert a == b
    _record_is_public(a)
    # and through the fit: the record in the release's info is the same; the release is not
    fa, fb = mech.fit(g, np.random.default_rng(5)), mech.fit(h, np.random.default_rng(5))
    assert fa.info["convergence_check"] == fb.info["convergence_check"] == a
    assert fa.info["steps"] == fb.info["steps"]
    assert fa.mcmc.final_log_likelihood != fb.mcmc.final_log_likelihood  # the chain did read them


def test_check_never_reads_private_edges() -> None:
    """Every private edge replaced by another set on the same V_pri: the same record."""
    g = _graph(100)
    v = g.private_nodes()
    pub_keys = set((g.edges_public[0] * 100 + g.edges_public[1]).tolist())
    for seed in range(50):
        rng = np.random.default_rng(seed)
        perm = rng.permutation(v)
        pairs = {tuple(sorted((int(perm[i]), int(perm[(i + 1) % v.size])))) for i in range(v.size)}  # a cycle
        pairs = {p for p in pairs if p[0] * 100 + p[1] not in pub_keys}
        new = np.array(sorted(pairs), dtype=np.int64).T
        h = g.replace(edges_private=new)
        if np.array_equal(h.private_nodes(), v):
            break
    else:
        raise AssertionError("no replacement kept V_pri")
    assert not np.array_equal(h.edges_private, g.edges_private)
    m = EdgeRR(epsilon=1.0, rounds=1)
    a = m.convergence_check(g)
    clear_check_cache()
    assert m.convergence_check(h) == a


def test_the_same_check_again_is_kept_not_rerun(monkeypatch) -> None:
    """The record is a function of public inputs: the same check again in the process is a copy
    of the kept one (no chain runs, on_budget called per budget as before); another seed, kernel
    or proxy runs its chains."""
    import privgraph.mechanisms.hrg.convergence as conv

    g = _graph(100)
    leaves, pub, mask, v = EdgeRR(epsilon=1.0)._inputs(g)
    px = edge_rr_proxy(g.num_nodes, leaves, pub, mask, 0)
    kernel = Phase("private", 0, 0.0, exponent(0.5, v.size))
    first_budgets: list[dict[str, Any]] = []
    a = convergence_check(px, kernel, seed=3, on_budget=first_budgets.append)
    calls = []
    real = conv.run_mcmc
    monkeypatch.setattr(conv, "run_mcmc", lambda *args, **kw: calls.append(1) or real(*args, **kw))
    again_budgets: list[dict[str, Any]] = []
    b = convergence_check(px, kernel, seed=3, on_budget=again_budgets.append)
    assert b == a and b is not a and calls == [] and again_budgets == first_budgets
    b["budgets"].clear()  # a copy: the kept record is not changed through it
    assert convergence_check(px, kernel, seed=3) == a and calls == []
    convergence_check(px, kernel, seed=4)
    assert calls
    n = len(calls)
    convergence_check(px, Phase("private", 0, 0.0, exponent(1.0, v.size)), seed=3)
    assert len(calls) > n
    n = len(calls)
    import dataclasses

    convergence_check(dataclasses.replace(px, edges_public=px.edges_public[:, 1:]), kernel, seed=3)
    assert len(calls) > n


# -- the documented minimum -----------------------------------------------------------------------
@pytest.mark.parametrize(
    "cls, kw, match",
    [
        (EdgeRR, {"schedule": "joint", "public_steps_per_leaf": 50, "private_steps_per_leaf": 50},
         "public_steps_per_leaf \\+ private_steps_per_leaf = 100 is below the documented minimum"),
        (EdgeRR, {"public_steps_per_leaf": 5000, "private_steps_per_leaf": 5000, "rounds": 10},
         "private_steps_per_leaf / rounds .* = 500 is below the documented minimum"),
        (PrivHRG, {"steps_per_leaf": 100}, "steps_per_leaf = 100 is below the documented minimum"),
    ],
)
def test_minimum_is_refused_at_construction(cls: type, kw: dict[str, Any], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        cls(epsilon=1.0, **kw)
    with pytest.raises(ValueError, match="MIN_STEPS_PER_LEAF"):
        build_mechanism(cls.name, {"epsilon": 1.0, **kw})


def test_minimum_is_refused_when_the_config_is_loaded() -> None:
    from privgraph.config.loader import parse_config

    data = yaml.safe_load((REPO / "pipelines.yaml").read_text())
    edges = data["pipelines"]["cora-heterorr"]["edges"]
    edges.update(schedule="joint", public_steps_per_leaf=50, private_steps_per_leaf=50)
    with pytest.raises(ConfigError, match="cora-heterorr.edges.*below the documented minimum") as exc:
        parse_config(data)
    assert exc.value.exit_code == 2


# -- refusals before the private chain --------------------------------------------------------------
def test_schedule_below_what_the_check_needs_is_refused_before_the_chain() -> None:
    g = _graph(80)
    auto = EdgeRR(epsilon=1.0, rounds=1).convergence_check(g)
    need = auto["required_steps_per_leaf"]
    assert need >= SAFETY_FACTOR * MIN_STEPS_PER_LEAF
    short = EdgeRR(epsilon=1.0, rounds=1, public_steps_per_leaf=need - 1, private_steps_per_leaf=need - 1)
    rng = np.random.default_rng(0)
    before = rng.bit_generator.state
    with pytest.raises(ValidationFailedError, match="below what the public convergence check needs") as exc:
        short.fit(g, rng)
    assert exc.value.exit_code == 3
    assert rng.bit_generator.state == before  # the private chain never ran
    ok = EdgeRR(epsilon=1.0, rounds=1, public_steps_per_leaf=need, private_steps_per_leaf=need)
    f = ok.fit(g, np.random.default_rng(0))
    n = g.private_nodes().size
    assert f.info["steps"] == {"public": need * n, "private": need * n}
    pr = PrivHRG(epsilon=1.0).convergence_check(g)
    with pytest.raises(ValidationFailedError, match="steps_per_leaf"):
        PrivHRG(epsilon=1.0, steps_per_leaf=pr["required_steps_per_leaf"] - 1).fit(g, np.random.default_rng(0))


def test_joint_schedule_below_the_check_and_a_failed_check_are_refused() -> None:
    g = _graph(60)
    rng = np.random.default_rng(0)
    before = rng.bit_generator.state
    # the joint chain (exp(dL_pub + a dL_pri)) mixes slowly: 2000 steps per leaf are not enough here
    with pytest.raises(ValidationFailedError, match="below what the public convergence check needs"):
        EdgeRR(epsilon=1.0, schedule="joint", public_steps_per_leaf=1000, private_steps_per_leaf=1000).fit(g, rng)
    # a check that does not pass within its cap refuses the release, 'auto' included
    capped = EdgeRR(epsilon=1.0, schedule="joint", convergence_max_steps_per_leaf=MIN_STEPS_PER_LEAF)
    with pytest.raises(ValidationFailedError, match="did not pass within its cap of 1000"):
        capped.fit(g, rng)
    assert rng.bit_generator.state == before


def test_chosen_steps() -> None:
    rec = {"passed": True, "required_steps_per_leaf": 4000, "passed_steps_per_leaf": 2000, "safety_factor": 2.0,
           "chains": 4, "rhat_threshold": RHAT_THRESHOLD, "max_steps_per_leaf": 64000, "proxy": {"leaves": 9}}
    assert chosen_steps("auto", rec, "edge_rr", "x") == 4000.0
    assert chosen_steps(5000.0, rec, "edge_rr", "x") == 5000.0
    with pytest.raises(ValidationFailedError, match="x = 3999 MCMC steps per leaf are below"):
        chosen_steps(3999.0, rec, "edge_rr", "x")
    with pytest.raises(ValidationFailedError, match="did not pass within its cap of 64000"):
        chosen_steps("auto", {**rec, "passed": False}, "edge_rr", "x")


# -- the default on a small real graph ----------------------------------------------------------------
@pytest.mark.parametrize("schedule", ["alternating", "joint"])
def test_default_passes_the_check_on_a_small_real_graph(schedule: str) -> None:
    g = _karate()
    m = EdgeRR(epsilon=1.0, schedule=schedule)
    f = m.fit(g, np.random.default_rng(0))
    rec = f.info["convergence_check"]
    assert rec["passed"] and all(r < RHAT_THRESHOLD for r in rec["budgets"][-1]["rhat"].values() if r is not None)
    n = g.private_nodes().size
    need = rec["required_steps_per_leaf"]
    if schedule == "joint":  # the joint chain's length is certified
        assert sum(f.info["steps"].values()) == pytest.approx(need * n, abs=m.rounds)
    else:  # each private phase is certified
        assert f.info["steps"]["private"] == pytest.approx(need * n * m.rounds, abs=m.rounds)
    _record_is_public(rec)
    out = m.privatize(g, np.random.default_rng(1))
    assert np.array_equal(out.edges_public, g.edges_public)
    p = PrivHRG(epsilon=1.0).fit(g, np.random.default_rng(0))
    assert p.info["convergence_check"]["passed"]
    assert p.info["steps"]["private"] == p.info["convergence_check"]["required_steps_per_leaf"] * 34


def test_guarantee_states_what_holds_at_finite_steps() -> None:
    for m in (EdgeRR(epsilon=1.0), EdgeRR(epsilon=1.0, schedule="joint"), PrivHRG(epsilon=1.0)):
        text = " ".join(m.guarantee.assumptions)
        assert "law after the recorded number of steps" in text
        assert "only to the extent that law is at the chain's stationary law" in text
        assert "it does not prove it on the private target" in text
        assert "PUBLIC convergence check" in text


def test_priv_hrg_proxy_uses_the_configured_density_only() -> None:
    leaves = np.arange(0, 400, dtype=np.int64)
    a = priv_hrg_proxy(400, leaves, 4.0, 0)
    b = priv_hrg_proxy(400, leaves, 8.0, 0)
    assert a.info["kind"] == "synthetic_preferential_attachment" and a.info["mean_degree"] == 4.0
    assert b.edges_private.shape[1] > 1.8 * a.edges_private.shape[1]
    assert isinstance(a, Proxy) and a.edges_public.shape == (2, 0)
    with pytest.raises(ValueError, match="proxy_mean_degree"):
        PrivHRG(epsilon=1.0, proxy_mean_degree=0.5)
