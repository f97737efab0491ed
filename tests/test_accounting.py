"""Tests of privgraph.guarantee.ledger: composition, caps, serialisation, parameter hygiene."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

from privgraph.guarantee.budget import BudgetPolicy
from privgraph.guarantee.ledger import (
    LedgerEntry,
    PrivacyLedger,
    UnsupportedCompositionError,
)
from privgraph.errors import BudgetExceededError
from privgraph.guarantee import Guarantee, GuaranteeKind, Scope

F, E, L = Scope.FEATURES, Scope.EDGES, Scope.LABELS


def entry(eps, scope=F, kind=GuaranteeKind.FEATURE_LDP, partitions=None, mechanism="feature_rr",
          stage="privatize", unit_epsilon=None, **params):
    if kind is GuaranteeKind.EDGE_LDP and unit_epsilon is None:
        unit_epsilon = 2 * eps  # what DPRR and Warner RR imply at edge level
    return LedgerEntry(stage, mechanism, Guarantee(kind, eps, scope, unit_epsilon=unit_epsilon),
                       partitions=partitions, params=params)


# -- a contract every ledger must satisfy (dp_accounting's PrivacyAccountantTest style) ----------
class LedgerContract:
    """Subclass and implement ``make_ledger`` to run the contract against another ledger."""

    def make_ledger(self, entries=()):
        raise NotImplementedError

    @pytest.mark.parametrize("scope", list(Scope))
    def test_empty_ledger_spends_zero(self, scope):
        ledger = self.make_ledger()
        assert ledger.spent(scope) == 0.0
        for kind in GuaranteeKind:
            if kind is not GuaranteeKind.RDP:
                assert ledger.spent(scope, kind) == 0.0

    def test_empty_ledger_is_within_any_policy(self):
        policy = BudgetPolicy({"features": 1e-9, "edges": 1e-9, "labels": 1e-9})
        assert policy.check(self.make_ledger()) == []

    def test_record_returns_self(self):
        ledger = self.make_ledger()
        assert ledger.record(entry(1.0)) is ledger
        assert len(ledger.entries) == 1

    def test_spend_is_monotone(self):
        ledger = self.make_ledger()
        last = 0.0
        for e in [entry(0.3, partitions=(0,)), entry(0.2), entry(0.4, partitions=(1, 2))]:
            ledger.record(e)
            now = ledger.spent(F)
            assert now >= last
            last = now

    def test_other_scopes_untouched(self):
        ledger = self.make_ledger([entry(1.0)])
        assert ledger.spent(E) == 0.0
        assert ledger.spent(L) == 0.0


class TestPrivacyLedgerContract(LedgerContract):
    def make_ledger(self, entries=()):
        return PrivacyLedger(entries)


# -- composition ---------------------------------------------------------------------------------
def test_sequential_composition_adds():
    ledger = PrivacyLedger().record(entry(0.5)).record(entry(0.5, mechanism="multibit"))
    assert ledger.spent(F) == pytest.approx(1.0)
    assert ledger.spent("features") == ledger.spent(F)


def test_parallel_composition_takes_max_over_disjoint_partitions():
    ledger = PrivacyLedger([entry(1.0, partitions=(0, 1)), entry(1.0, partitions=(2, 3))])
    assert ledger.spent(F) == 1.0


def test_mixed_whole_graph_and_partitions():
    ledger = PrivacyLedger([
        entry(0.5),
        entry(1.0, partitions=(0, 1)),
        entry(1.0, partitions=(2, 3)),
    ])
    assert ledger.spent(F) == 1.5


def test_overlapping_partitions_add_where_they_overlap():
    ledger = PrivacyLedger([entry(1.0, partitions=(0, 1)), entry(0.25, partitions=(1, 2))])
    assert ledger.spent(F) == 1.25  # partition 1 sees both


def test_sums_are_exact_float_sums():
    ledger = PrivacyLedger([entry(0.1) for _ in range(10)])
    assert ledger.spent(F) == 1.0  # math.fsum, not a drifting running sum
    assert BudgetPolicy({"features": 1.0}).check(ledger) == []


def test_edges_compose_in_one_unit_the_edge_level_epsilon():
    """Leak 3 of issue 9: a per-node (edge-LDP) guarantee counts with the edge-level figure it
    implies; kinds no longer need to be selected, and kind= still totals one kind natively."""
    ledger = PrivacyLedger([
        entry(1.0, scope=E, kind=GuaranteeKind.EDGE_DP, mechanism="edge_rr"),
        entry(2.0, scope=E, kind=GuaranteeKind.EDGE_LDP, mechanism="dprr"),
    ])
    assert ledger.spent(E) == 1.0 + 4.0
    assert ledger.spent(E, kind=GuaranteeKind.EDGE_DP) == 1.0
    assert ledger.spent(E, kind="edge_ldp") == 2.0
    (row,) = ledger.summary()
    assert row["kind"] == "edge_dp" and row["epsilon"] == 5.0 and "edge_ldp" in row["note"]


def test_a_cap_of_one_refuses_dprr_at_one():
    """The regression of leak 3: DPRR at eps = 1 releases a 2-edge-DP graph (both ends report an
    edge), so an edges cap of 1.0 must refuse it; before the fix it was charged 1.0 and admitted."""
    from privgraph.mechanisms import build_mechanism

    for name, params, unit in [("dprr", {"epsilon": 1.0}, 2.0), ("warner_rr", {"epsilon": 1.0}, 2.0),
                               ("local_lap", {"epsilon": 1.0}, 1.1)]:
        g = build_mechanism(name, params).guarantee
        assert g.kind is GuaranteeKind.EDGE_LDP and g.epsilon == 1.0
        assert g.ledger_epsilon >= unit and g.ledger_epsilon == pytest.approx(unit, rel=1e-12)
        ledger = PrivacyLedger([LedgerEntry("privatize.edges", name, g)])
        assert BudgetPolicy({"edges": 1.0}).check(ledger), name
        assert BudgetPolicy({"edges": g.ledger_epsilon}).check(ledger) == []


def test_a_local_edge_guarantee_must_state_its_edge_level_figure():
    with pytest.raises(ValueError, match="unit_epsilon"):
        Guarantee(GuaranteeKind.EDGE_LDP, 1.0, E)
    with pytest.raises(ValueError, match="unit_epsilon applies"):
        Guarantee(GuaranteeKind.EDGE_DP, 1.0, E, unit_epsilon=2.0)
    g = Guarantee.from_dict({"kind": "edge_ldp", "epsilon": 1.0, "scope": "edges"})  # a ledger/1 entry
    assert g.ledger_epsilon == pytest.approx(2.0) and g.ledger_epsilon >= 2.0


def test_rdp_entries_are_not_composed():
    ledger = PrivacyLedger([entry(1.0, scope=E, kind=GuaranteeKind.RDP, mechanism="gap")])
    with pytest.raises(UnsupportedCompositionError, match="RDP entries are not composed"):
        ledger.spent(E)
    with pytest.raises(UnsupportedCompositionError, match="converts the RDP curve"):
        ledger.spent(E, kind=GuaranteeKind.RDP)
    row = ledger.summary()[0]
    assert row["epsilon"] is None and row["delta"] is None and "RDP" in row["note"]


def test_approximate_dp_composes_by_basic_composition():
    g = Guarantee(GuaranteeKind.EDGE_DP, 1.0, E, delta=1e-6)
    ledger = PrivacyLedger([
        LedgerEntry("s", "gap", g, partitions=(0, 1)),
        LedgerEntry("t", "gap", Guarantee(GuaranteeKind.EDGE_DP, 0.5, E, delta=3e-6), partitions=(1,)),
        LedgerEntry("u", "edge_rr", Guarantee(GuaranteeKind.EDGE_DP, 0.25, E)),
    ])
    # partition 1 holds all three: epsilons add, deltas add; pure entries add no delta
    assert ledger.spent(E) == 1.75
    assert ledger.spent_delta(E) == pytest.approx(4e-6)
    row = ledger.summary()[0]
    assert row["epsilon"] == 1.75 and row["delta"] == pytest.approx(4e-6)
    assert PrivacyLedger([entry(1.0)]).spent_delta(Scope.FEATURES) == 0.0
    assert "| spent delta |" in ledger.to_markdown()


def test_a_capped_scope_admits_delta_only_under_a_delta_cap():
    ledger = PrivacyLedger([LedgerEntry("s", "gap", Guarantee(GuaranteeKind.EDGE_DP, 1.0, E, delta=1e-5))])
    [violation] = BudgetPolicy({"edges": 2.0}).check(ledger)
    assert "spent delta 1e-05 exceeds the delta cap 0.0 (no delta cap: pure DP only)" in violation
    assert BudgetPolicy({"edges": 2.0}, {"edges": 1e-5}).check(ledger) == []
    [violation] = BudgetPolicy({"edges": 2.0}, {"edges": 1e-6}).check(ledger)
    assert "exceeds the delta cap 1e-06" in violation
    assert BudgetPolicy({"edges": 2.0}, {"edges": 1e-5}).delta_caps == {E: 1e-5}
    with pytest.raises(ValueError, match="no epsilon cap"):
        BudgetPolicy({"features": 1.0}, {"edges": 1e-5})
    for bad in (0.0, 1.0, -1e-5, float("nan"), True):
        with pytest.raises(ValueError, match=r"delta_caps\['edges'\] must be in \(0, 1\)"):
            BudgetPolicy({"edges": 1.0}, {"edges": bad})


def test_summary_one_row_per_scope():
    ledger = PrivacyLedger([
        entry(0.5), entry(0.5),
        entry(1.0, scope=L, kind=GuaranteeKind.LABEL_LDP, mechanism="label_rr"),
    ])
    rows = {(r["scope"], r["kind"]): r for r in ledger.summary()}
    assert set(rows) == {("features", "feature_ldp"), ("labels", "label_ldp")}
    assert rows[("features", "feature_ldp")]["epsilon"] == 1.0
    assert rows[("features", "feature_ldp")]["entries"] == 2


# -- caps ----------------------------------------------------------------------------------------
def test_exceeding_a_cap_is_reported_and_enforced():
    policy = BudgetPolicy({"features": 1.0, Scope.EDGES: 2.0})
    ledger = PrivacyLedger([entry(0.75), entry(0.5)])
    violations = policy.check(ledger)
    assert len(violations) == 1 and "features" in violations[0] and "1.25" in violations[0]
    with pytest.raises(BudgetExceededError, match="features"):
        policy.enforce(ledger)


def test_within_caps():
    policy = BudgetPolicy({"features": 1.0})
    ledger = PrivacyLedger([entry(0.5), entry(1.0, partitions=(0,)), entry(0.5, partitions=(1,))])
    assert policy.check(ledger) == ["scope 'features': spent epsilon 1.5 exceeds the cap 1.0"]
    assert policy.check(PrivacyLedger([entry(1.0, partitions=(0,)), entry(1.0, partitions=(1,))])) == []
    policy.enforce(PrivacyLedger([entry(1.0)]))  # exactly at the cap is allowed


def test_charge_refuses_and_leaves_the_ledger_unchanged():
    policy = BudgetPolicy({"features": 1.0})
    ledger = PrivacyLedger([entry(0.75)])
    before = ledger.to_dict()
    extra = entry(0.5, mechanism="duchi")
    assert not policy.supports(ledger, extra)
    with pytest.raises(BudgetExceededError) as info:
        policy.charge(ledger, extra)
    msg = str(info.value)
    assert "'features'" in msg and "1.0" in msg and "1.25" in msg
    assert ledger.to_dict() == before
    assert len(ledger) == 1


def test_charge_records_when_supported():
    policy = BudgetPolicy({"features": 1.0})
    ledger = PrivacyLedger()
    e = entry(0.5, partitions=(0,))
    assert policy.supports(ledger, e)
    assert policy.charge(ledger, e) is ledger
    assert policy.charge(ledger, entry(0.5, partitions=(1,))) is ledger  # parallel: still 0.5
    assert ledger.spent(F) == 0.5
    other_scope = entry(100.0, scope=L, kind=GuaranteeKind.LABEL_LDP)
    assert policy.supports(ledger, other_scope)  # labels are not capped


def test_supports_is_false_when_the_capped_scope_cannot_compose():
    policy = BudgetPolicy({"edges": 10.0})
    ledger = PrivacyLedger([entry(1.0, scope=E, kind=GuaranteeKind.EDGE_DP)])
    rdp = entry(1.0, scope=E, kind=GuaranteeKind.RDP)
    assert not policy.supports(ledger, rdp)
    with pytest.raises(UnsupportedCompositionError):
        policy.charge(ledger, rdp)
    assert len(ledger) == 1


@pytest.mark.parametrize(
    "caps, exc, match",
    [
        ({"nodes": 1.0}, ValueError, "'nodes'"),
        ({"features": 0.0}, ValueError, "caps\\['features'\\]"),
        ({"features": -1.0}, ValueError, "> 0"),
        ({"features": float("nan")}, ValueError, "finite"),
        ({"features": float("inf")}, ValueError, "finite"),
        ({"features": True}, TypeError, "real number"),
        ({"features": "1"}, TypeError, "real number"),
        ({3: 1.0}, ValueError, "unknown budget scope 3"),
        ([("features", 1.0)], TypeError, "mapping"),
    ],
)
def test_policy_validation(caps, exc, match):
    with pytest.raises(exc, match=match):
        BudgetPolicy(caps)


# -- entries and serialisation -------------------------------------------------------------------
def test_serialisation_round_trip_through_json():
    ledger = PrivacyLedger([
        entry(0.5, bins=8, gamma=0.25, names=["a", "b"], nested={"k": 1}),
        entry(1.0, partitions=[3, 1, 2]),
        LedgerEntry(
            "privatize_edges", "edge_rr",
            Guarantee(GuaranteeKind.EDGE_DP, 2.0, E, assumptions=("V_pri is public",)),
            note="MCMC approximates the exponential mechanism",
        ),
    ])
    text = json.dumps(ledger.to_dict())
    back = PrivacyLedger.from_dict(json.loads(text))
    assert back == ledger
    assert back.entries[1].partitions == (1, 2, 3)
    assert back.entries[2].guarantee.assumptions == ("V_pri is public",)
    assert back.spent(F) == ledger.spent(F)
    e = ledger.entries[0]
    assert LedgerEntry.from_dict(e.to_dict()) == e


def test_from_dict_rejects_unknown_format():
    with pytest.raises(ValueError, match="format"):
        PrivacyLedger.from_dict({"format": "other/9", "entries": []})


@pytest.mark.parametrize(
    "params",
    [{"seed": 1}, {"random_seed": 1}, {"Seed_Sequence": 3}, {"mcmc": {"rng_seed": 2}},
     {"steps": [{"SEED": 1}]}],
)
def test_seed_params_are_rejected(params):
    with pytest.raises(ValueError, match="seed"):
        LedgerEntry("s", "m", Guarantee(GuaranteeKind.FEATURE_LDP, 1.0, F), params=params)


def test_arrays_and_non_json_params_are_rejected():
    g = Guarantee(GuaranteeKind.FEATURE_LDP, 1.0, F)
    with pytest.raises(TypeError, match="arrays"):
        LedgerEntry("s", "m", g, params={"alpha": np.zeros(3)})
    with pytest.raises(TypeError, match="JSON-safe"):
        LedgerEntry("s", "m", g, params={"f": object()})
    with pytest.raises(ValueError, match="finite"):
        LedgerEntry("s", "m", g, params={"x": float("nan")})
    with pytest.raises(TypeError, match="keys"):
        LedgerEntry("s", "m", g, params={1: 2})
    e = LedgerEntry("s", "m", g, params={"k": np.int64(3), "t": (1, 2), "p": np.float32(0.5)})
    assert e.params == {"k": 3, "t": [1, 2], "p": 0.5}
    assert type(e.params["k"]) is int


def test_entry_params_are_copied_and_entry_is_hashable():
    params = {"bins": 4}
    e = LedgerEntry("s", "m", Guarantee(GuaranteeKind.FEATURE_LDP, 1.0, F), params=params)
    params["bins"] = 5
    assert e.params == {"bins": 4}
    hash(e)
    with pytest.raises(AttributeError):
        e.stage = "other"  # type: ignore[misc]


@pytest.mark.parametrize(
    "kwargs, exc",
    [
        ({"partitions": ()}, ValueError),
        ({"partitions": (0, 0)}, ValueError),
        ({"partitions": (-1,)}, ValueError),
        ({"partitions": (1.5,)}, TypeError),
        ({"partitions": (True,)}, TypeError),
        ({"partitions": "01"}, TypeError),
        ({"stage": ""}, ValueError),
        ({"mechanism": 3}, TypeError),
        ({"guarantee": {"kind": "feature_ldp"}}, TypeError),
    ],
)
def test_entry_validation(kwargs, exc):
    base = dict(stage="s", mechanism="m", guarantee=Guarantee(GuaranteeKind.FEATURE_LDP, 1.0, F))
    base.update(kwargs)
    with pytest.raises(exc):
        LedgerEntry(**base)


def test_record_rejects_non_entries():
    with pytest.raises(TypeError):
        PrivacyLedger().record({"stage": "s"})  # type: ignore[arg-type]


def test_markdown_table():
    ledger = PrivacyLedger([entry(0.5, partitions=(0, 1, 2, 5)), entry(0.25, mechanism="a|b")])
    md = ledger.to_markdown()
    lines = md.splitlines()
    assert lines[0] == "| stage | mechanism | scope | kind | epsilon | partitions |"
    assert "| privatize | feature_rr | features | feature_ldp | 0.5 | 0-2, 5 |" in lines
    assert "a\\|b" in md and "| all |" in md
    assert "| features | feature_ldp | 0.75 | 0.0 |" in lines


def test_accounting_is_torch_free():
    import subprocess

    code = ("import sys, privgraph.guarantee.ledger; "
            "bad = [m for m in ('torch', 'prefect', 'dask') if m in sys.modules]; "
            "assert not bad, bad")
    root = Path(__file__).resolve().parents[1]
    subprocess.run([sys.executable, "-c", code], check=True, cwd=root)
