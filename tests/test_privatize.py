"""The privatize stage: per-partition seeds, determinism across executors, ledger entries."""

from __future__ import annotations

import numpy as np
import pytest

from privgraph.ingest.datasets.split import split_public_private
from privgraph.ingest.datasets.synthetic import sbm_graph
from privgraph.mechanisms import build_mechanism
from privgraph.guarantee import GuaranteeKind, Scope
from privgraph.parts.executor import SerialExecutor
from tasks.dask_executor import DaskExecutor
from privgraph.parts.partition import partition_graph
from privgraph.privatize.release import privatize_graph


@pytest.fixture(scope="module")
def graph():
    g = sbm_graph(3000, num_classes=3, avg_degree=8.0, num_features=16, seed=1)
    return split_public_private(g, 0.2, seed=2)


@pytest.fixture(scope="module")
def public_graph(graph):
    """The same graph with every edge public (a feature- or label-only pipeline)."""
    return graph.replace(edges_public=graph.edges("all"), edges_private=np.zeros((2, 0), np.int64))


def test_private_edges_without_an_edge_mechanism_are_refused(graph):
    """Before issue 9 a features-only pipeline on a graph with private edges (cora-lpgnn with rho
    0.2) stored the raw private edges as kind 'private'."""
    from privgraph.errors import ConfigError

    with pytest.raises(ConfigError, match="no edge mechanism"):
        privatize_graph(
            graph, features=build_mechanism("feature_rr", {"epsilon": 1.0}), edges=None,
            partitioning=partition_graph(graph, 2, "hash"), root_seed=np.random.SeedSequence(1),
            executor=SerialExecutor(),
        )


def _run(graph, executor, seed=123, parts=4):
    return privatize_graph(
        graph,
        features=build_mechanism("feature_rr", {"epsilon": 1.0, "bins": 4}),
        edges=build_mechanism("dprr", {"epsilon": 1.0}),
        partitioning=partition_graph(graph, parts, "metis"),
        root_seed=np.random.SeedSequence(seed),
        executor=executor,
    )


def _same(a, b) -> bool:
    return (
        np.array_equal(a.graph.x, b.graph.x)
        and np.array_equal(a.graph.edges_private, b.graph.edges_private)
        and np.array_equal(a.graph.edges_public, b.graph.edges_public)
    )


def test_seeded_run_is_reproducible_and_seed_matters(graph):
    a, b = _run(graph, SerialExecutor()), _run(graph, SerialExecutor())
    assert _same(a, b)
    c = _run(graph, SerialExecutor(), seed=124)
    assert not np.array_equal(a.graph.x, c.graph.x)
    assert not np.array_equal(a.graph.edges_private, c.graph.edges_private)


@pytest.mark.dask
def test_same_output_with_one_and_two_dask_workers(graph):
    serial = _run(graph, SerialExecutor())
    for workers in (1, 2):
        with DaskExecutor(n_workers=workers, threads_per_worker=1) as ex:
            assert ex.describe()["workers"] == workers
            assert _same(serial, _run(graph, ex)), f"differs with {workers} Dask worker(s)"


def test_public_part_is_kept_and_private_part_replaced(graph):
    res = _run(graph, SerialExecutor())
    out = res.graph
    assert np.array_equal(out.edges_public, graph.edges_public)
    assert np.array_equal(out.y, graph.y) and np.array_equal(out.test_mask, graph.test_mask)
    assert not np.array_equal(out.x, graph.x)
    # released private edges never coincide with public ones and touch only V_pri
    pub = set(map(tuple, graph.edges_public.T.tolist()))
    assert not any(tuple(e) in pub for e in out.edges_private.T.tolist())
    assert np.isin(out.edges_private, graph.private_nodes()).all()
    # degree preserving: the release is of the order of the input, far from RR's dense graph
    # (DPRR inflates degree-1..2 nodes at eps1 = 0.1: E[noisy degree | d=1] is about 5.5)
    n_pri = graph.private_nodes().size
    warner_rr = n_pri * (n_pri - 1) / 2 / (1 + np.e)
    assert 0.5 * graph.edges_private.shape[1] < out.edges_private.shape[1] < 0.05 * warner_rr
    assert res.stats["partitions"] and sum(res.stats["partitions"]) == graph.num_nodes


def test_ledger_has_one_entry_per_mechanism_with_parallel_composition(graph):
    res = _run(graph, SerialExecutor(), parts=4)
    entries = res.ledger.entries
    assert [e.mechanism for e in entries] == ["feature_rr", "dprr"]
    assert entries[0].guarantee.kind is GuaranteeKind.FEATURE_LDP
    assert entries[1].guarantee.kind is GuaranteeKind.EDGE_LDP
    assert res.ledger.spent(Scope.FEATURES) == pytest.approx(1.0)
    assert res.ledger.spent(Scope.EDGES) == pytest.approx(2.0)  # edge-level: both ends report
    assert res.ledger.spent(Scope.EDGES, GuaranteeKind.EDGE_LDP) == pytest.approx(1.0)
    assert entries[0].partitions == (0, 1, 2, 3)
    assert "eps1" in entries[1].params and "eps2" in entries[1].params


FEATURE_MECHANISMS = ["feature_rr", "laplace", "duchi", "piecewise", "hybrid", "three_output", "pm_sub", "multibit"]


@pytest.mark.parametrize("name", FEATURE_MECHANISMS)
def test_every_feature_mechanism_runs_per_partition(public_graph, name):
    graph = public_graph
    mech = build_mechanism(name, {"epsilon": 2.0})
    run = lambda: privatize_graph(  # noqa: E731
        graph, features=mech, edges=None, partitioning=partition_graph(graph, 3, "hash"),
        root_seed=np.random.SeedSequence(5), executor=SerialExecutor(),
    )
    a, b = run(), run()
    assert np.array_equal(a.graph.x, b.graph.x)  # seeded: reproducible
    assert a.graph.x.shape == graph.x.shape and np.isfinite(a.graph.x).all()
    assert not np.array_equal(a.graph.x, graph.x)
    assert a.ledger.spent(Scope.FEATURES) == 2.0
    # the stored features are in feature units: unbiased mechanisms average back to the input,
    # within 5 standard errors of the mean noise (Laplace at eps 2 over 16 features: a noise std
    # of about 11 per entry, 0.05 for the mean of these 48,000 entries)
    if name != "feature_rr":
        noise = a.graph.x.astype(np.float64) - graph.x.astype(np.float64)
        assert abs(noise.mean()) < 5 * noise.std() / np.sqrt(noise.size)


def test_label_rr_per_partition_perturbs_only_masked_labels(public_graph):
    graph = public_graph
    mech = build_mechanism("label_rr", {"epsilon": 1.0, "num_classes": 3, "mask": ["train_mask", "val_mask"]})
    res = privatize_graph(
        graph, features=None, edges=None, labels=mech, partitioning=partition_graph(graph, 3, "hash"),
        root_seed=np.random.SeedSequence(9), executor=SerialExecutor(),
    )
    y, y0 = res.graph.y, graph.y
    assert np.array_equal(y[graph.test_mask], y0[graph.test_mask])  # test labels untouched
    sel = graph.train_mask | graph.val_mask
    flipped = float((y[sel] != y0[sel]).mean())
    # keep probability e / (e + 2) = 0.576: flips 0.424; 2,250 labels -> std 0.010; 5 std slack
    assert abs(flipped - 2 / (np.e + 2)) < 0.05
    assert res.ledger.spent(Scope.LABELS) == 1.0
    assert [e.stage for e in res.ledger.entries] == ["privatize.labels"]
    with pytest.raises(ValueError, match="num_classes"):
        privatize_graph(
            graph, features=None, edges=None, labels=build_mechanism("label_rr", {"epsilon": 1.0}),
            partitioning=partition_graph(graph, 3, "hash"), root_seed=np.random.SeedSequence(9),
        )


def test_laplace_features_are_the_grid_statistic_plus_the_seeds_noise(public_graph):
    """A statistic-plus-noise feature mechanism's release is exactly that (issue 42): each entry
    of ``laplace``'s output, per partition, is the input's grid index ``rint(clip(x) 2^20)`` plus
    the discrete Laplace draw of that partition's seed from the audited sampler, times ``2^-20``,
    stored as float32, and nothing else (a value hidden in it would move one of them)."""
    from privgraph.mechanisms.features.laplace import laplace_noise_parameter
    from privgraph.mechanisms.noise import discrete_laplace_dyadic
    from privgraph.seeding import as_seed_sequence, noise_generator, partition_seeds, stage_seed

    mech = build_mechanism("laplace", {"epsilon": 4.0, "lower": 0.0, "upper": 1.0})
    parts = partition_graph(public_graph, 3, "hash")
    root = as_seed_sequence(7)
    out = privatize_graph(public_graph, features=mech, edges=None, partitioning=parts, root_seed=root).graph.x
    x = public_graph.x.astype(np.float64)
    s, T = laplace_noise_parameter(4.0, x.shape[1])
    for rows, seed in zip(parts.parts, partition_seeds(stage_seed(root, "features"), len(parts.parts)), strict=True):
        statistic = np.rint(np.clip(x[rows], 0.0, 1.0) * 2.0**20).astype(np.int64)
        noise = discrete_laplace_dyadic(noise_generator(seed), s, T, statistic.size).reshape(statistic.shape)
        assert np.array_equal(out[rows], np.ldexp((statistic + noise).astype(np.float64), -20).astype(np.float32))
    assert np.abs(out - np.clip(public_graph.x, 0, 1)).max() > 1e-3  # noise was added
