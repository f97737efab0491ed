"""The validation checkpoint over per-partition summaries: the same verdict as over the whole
release, for clean releases and for planted faults (an edge out of range, a non-canonical edge, a
feature outside the mechanism's range, a NaN), whatever the partitioning."""

from __future__ import annotations

import numpy as np
import pytest

from privgraph.graph import GraphData
from privgraph.guarantee import Guarantee, Scope
from privgraph.guarantee.budget import BudgetPolicy
from privgraph.guarantee.ledger import LedgerEntry, PrivacyLedger
from privgraph.privatize.summary import release_summary
from privgraph.validate import run_checkpoint, run_checkpoint_from_summaries

N = 200


def _ledger(eps: float = 1.0) -> PrivacyLedger:
    ledger = PrivacyLedger()
    ledger.record(LedgerEntry(stage="privatize.features", mechanism="feature_rr",
                              guarantee=Guarantee(kind="feature_ldp", epsilon=eps, scope=Scope.FEATURES),
                              partitions=(0,), params={"epsilon": eps}))
    return ledger


def _release(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    e = rng.integers(0, N, (2, 600))
    e = np.unique(np.sort(e[:, e[0] != e[1]], axis=0), axis=1)
    return e, rng.uniform(0.25, 1.0, (N, 8)).astype(np.float32)


def _parts_summaries(edges: np.ndarray, x: np.ndarray, parts: int, rng: np.random.Generator) -> list[dict]:
    """Summaries as the partitioned layout computes them: rows by node part, edges by the part of
    their smaller end (a planted edge by its first end)."""
    assignment = rng.integers(0, parts, N)
    owner = assignment[np.clip(np.minimum(edges[0], edges[1]), 0, N - 1)]
    return [release_summary(edges[:, owner == p], x[assignment == p], N) for p in range(parts)]


def _verdicts(edges: np.ndarray, x: np.ndarray, rng: np.random.Generator, parts: int) -> tuple[bool, bool]:
    """The verdict over one summary of the whole release (what :func:`run_checkpoint` computes for a
    graph in memory; a GraphData refuses a planted fault itself) and over ``parts`` summaries."""
    policy = BudgetPolicy({"features": 1.0})
    whole = run_checkpoint_from_summaries([release_summary(edges, x, N)], _ledger(), policy, feature_range=(0.25, 1.0))
    split = run_checkpoint_from_summaries(_parts_summaries(edges, x, parts, rng), _ledger(), policy,
                                          feature_range=(0.25, 1.0))
    return whole.success, split.success


def test_the_in_memory_checkpoint_is_the_one_summary_checkpoint() -> None:
    rng = np.random.default_rng(0)
    edges, x = _release(rng)
    graph = GraphData(num_nodes=N, x=x, edges_public=np.zeros((2, 0), np.int64), edges_private=edges)
    policy = BudgetPolicy({"features": 1.0})
    whole = run_checkpoint(graph, _ledger(), policy, feature_range=(0.25, 1.0))
    one = run_checkpoint_from_summaries([release_summary(edges, x, N)], _ledger(), policy, feature_range=(0.25, 1.0))
    assert whole.success and whole.to_dict() == one.to_dict()
    assert [r["suite"] for r in whole.results].count("output-features") == 3


@pytest.mark.parametrize("parts", [1, 3, 8])
def test_a_clean_release_passes_whole_and_by_parts(parts: int) -> None:
    rng = np.random.default_rng(parts)
    edges, x = _release(rng)
    assert _verdicts(edges, x, rng, parts) == (True, True)


def _plant(kind: str, edges: np.ndarray, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    edges, x = edges.copy(), x.copy()
    if kind == "an edge past the last node":
        edges[1, 7] = N
    elif kind == "an edge with dst < src":
        edges[:, 7] = edges[::-1, 7]
    elif kind == "a self-loop":
        edges[1, 7] = edges[0, 7]
    elif kind == "a feature below the range":
        x[17, 3] = 0.1
    elif kind == "a feature above the range":
        x[17, 3] = 1.5
    elif kind == "a NaN feature":
        x[17, 3] = np.nan
    return edges, x


@pytest.mark.parametrize("kind", ["an edge past the last node", "an edge with dst < src", "a self-loop",
                                  "a feature below the range", "a feature above the range", "a NaN feature"])
@pytest.mark.parametrize("parts", [1, 5])
def test_a_planted_fault_fails_whole_and_by_parts(kind: str, parts: int) -> None:
    rng = np.random.default_rng(7)
    edges, x = _plant(kind, *_release(rng))
    assert _verdicts(edges, x, rng, parts) == (False, False)


def test_a_failure_says_which_suite_and_the_budget_still_runs() -> None:
    rng = np.random.default_rng(3)
    edges, x = _plant("an edge past the last node", *_release(rng))
    report = run_checkpoint_from_summaries(_parts_summaries(edges, x, 4, rng), _ledger(2.0),
                                           BudgetPolicy({"features": 1.0}), feature_range=(0.25, 1.0))
    failures = report.failures()
    assert any("exceeds the cap 1" in f for f in failures), failures
    assert any(f.startswith("output-edges.") and "1 unexpected" in f for f in failures), failures
    assert not any(f.startswith("output-features.") for f in failures), failures


def test_without_a_feature_range_features_are_not_checked() -> None:
    rng = np.random.default_rng(4)
    edges, x = _plant("a feature above the range", *_release(rng))
    report = run_checkpoint_from_summaries(_parts_summaries(edges, x, 2, rng), _ledger(), BudgetPolicy({"features": 1.0}))
    assert report.success and not any(r["suite"] == "output-features" for r in report.results)


def test_the_partitioned_layout_summaries_give_the_whole_release_report(tmp_path) -> None:
    """FeatureRR + DPRR + LabelRR through the files layout: the checkpoint over the summaries its
    tasks computed equals the checkpoint over the release read back whole."""
    from privgraph.ingest.datasets.split import split_public_private
    from privgraph.ingest.datasets.synthetic import sbm_graph
    from privgraph.mechanisms import build_mechanism
    from privgraph.parts.partition import partition_graph
    from privgraph.privatize.partitioned import load_partitioned_release, privatize_partitioned, write_partitioned_input

    graph = split_public_private(sbm_graph(1200, num_classes=3, avg_degree=6.0, num_features=8, seed=1), 0.2, seed=2)
    source = write_partitioned_input(graph, partition_graph(graph, 3, "metis"), tmp_path / "input")
    res = privatize_partitioned(
        source, tmp_path / "release", features=build_mechanism("feature_rr", {"epsilon": 1.0, "bins": 4}),
        edges=build_mechanism("dprr", {"epsilon": 1.0}), root_seed=np.random.SeedSequence(5))
    assert len(res.summaries) == 3 and sum(s["release_edges"] for s in res.summaries) > graph.edges_public.shape[1]
    loaded = load_partitioned_release(source, res.directory)
    policy = BudgetPolicy({"features": 1.0, "edges": 2.0})  # DPRR's eps 1 edge LDP is edge DP 2
    rng = tuple(res.stats["feature_range"])
    whole = run_checkpoint(loaded, res.ledger, policy, feature_range=rng)
    split = run_checkpoint_from_summaries(res.summaries, res.ledger, policy, feature_range=rng)
    assert whole.success and whole.to_dict() == split.to_dict()
