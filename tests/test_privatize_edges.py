"""Every edge mechanism through privatize_graph: per node partition (or globally), seeded,
public edges kept, released pairs inside V_pri, the same private graph with 1 and 2 Dask workers."""

from __future__ import annotations

import json

import numpy as np
import pytest

from privgraph.ingest.datasets.split import split_public_private
from privgraph.ingest.datasets.synthetic import sbm_graph
from privgraph.mechanisms import MECHANISMS, build_mechanism
from privgraph.guarantee import Scope
from privgraph.parts.executor import SerialExecutor
from tasks.dask_executor import DaskExecutor
from privgraph.parts.partition import partition_graph
from privgraph.privatize.release import privatize_graph

EDGE_PARAMS = {
    "dprr": {"epsilon": 2.0},
    "warner_rr": {"epsilon": 4.0},
    "local_lap": {"epsilon": 2.0},
    "edge_rand": {"epsilon": 6.0},
    "lapgraph": {"epsilon": 2.0},
    "nonpriv_part": {},
    "edge_rr": {"epsilon": 1.0, "rounds": 1},  # steps: auto, from the public convergence check
    "priv_hrg": {"epsilon": 0.2},
    "blink": {"epsilon": 4.0, "variant": "hybrid"},
}
# per-node mechanisms: their reports are computed per partition through parallel.py
PER_NODE = ("dprr", "warner_rr", "local_lap", "blink")
# EdgeRR's sampling runs per chunk of dendrogram internal nodes through the same map
MAPPED = PER_NODE + ("edge_rr",)


#: the MCMC mechanisms sample a dendrogram over V_pri (privHRG: over every node with an edge): their
#: release test runs on a 500-node graph (the mapping and the seeding are the same at any size)
MCMC = ("edge_rr", "priv_hrg")


@pytest.fixture(scope="module")
def graph():
    g = sbm_graph(1500, num_classes=3, avg_degree=6.0, num_features=4, seed=3)
    return split_public_private(g, 0.2, seed=4)


@pytest.fixture(scope="module")
def small_graph():
    g = sbm_graph(500, num_classes=3, avg_degree=6.0, num_features=4, seed=3)
    return split_public_private(g, 0.2, seed=4)


def _run(graph, name, executor, seed=5):
    return privatize_graph(
        graph, features=None, edges=build_mechanism(name, EDGE_PARAMS[name]),
        partitioning=partition_graph(graph, 3, "metis"), root_seed=np.random.SeedSequence(seed),
        executor=executor,
    )


def test_every_registered_edge_mechanism_is_covered():
    edge = {n for n, c in MECHANISMS.items() if c.scope is Scope.EDGES}
    # gap and class_counts release aggregates instead of edges: tests/test_gap_pipeline.py and
    # tests/mechanisms/test_class_counts.py cover their releases
    aggregates = {n for n in edge if MECHANISMS[n].releases_aggregates}
    assert aggregates == {"class_counts", "gap"}
    assert edge - aggregates <= set(EDGE_PARAMS)


@pytest.mark.parametrize("name", sorted(EDGE_PARAMS))
def test_edge_mechanism_release(graph, small_graph, name):
    graph = small_graph if name in MCMC else graph
    a = _run(graph, name, SerialExecutor())
    b = _run(graph, name, SerialExecutor())
    assert np.array_equal(a.graph.edges_private, b.graph.edges_private)
    if name == "priv_hrg":  # every edge private: nothing released as it is
        assert a.graph.edges_public.shape == (2, 0)
    else:
        assert np.array_equal(a.graph.edges_public, graph.edges_public)
    e = a.graph.edges_private
    vpri = graph.private_nodes()
    assert np.all(e[0] < e[1])
    if name != "priv_hrg":  # privHRG samples over every node with an edge
        assert np.all(np.isin(e, vpri))
    keys = e[0] * graph.num_nodes + e[1]
    assert np.all(np.diff(keys) > 0)
    assert not np.isin(keys, a.graph.edges_public[0] * graph.num_nodes + a.graph.edges_public[1]).any()
    if name in ("edge_rr", "priv_hrg"):
        # the MCMC trace is private-record material, not a published stat
        assert "log_likelihood_private" in json.dumps(a.private_record)
        assert "log_likelihood" not in json.dumps(a.stats) and "acceptance" not in json.dumps(a.stats)
        assert a.stats["edges"]["hrg"]["steps"]["private"] > 0
        check = a.stats["edges"]["hrg"]["convergence_check"]  # public: published in the manifest
        assert check["passed"] and check["reads_private_data"] is False
        assert a.release["edges"]["dendrogram"]["internal_nodes"] > 0
    (entry,) = a.ledger.entries
    assert entry.mechanism == name and entry.scope is Scope.EDGES
    assert entry.partitions == (0, 1, 2)
    assert a.release["edges"]["released_private_edges"] == e.shape[1]
    if name == "nonpriv_part":
        assert e.shape[1] == 0 and entry.epsilon == 0.0
    else:
        c = _run(graph, name, SerialExecutor(), seed=6)
        assert not np.array_equal(c.graph.edges_private, e)


@pytest.mark.dask
@pytest.mark.parametrize("name", MAPPED)
def test_per_node_edge_mechanisms_same_with_one_and_two_dask_workers(graph, name):
    serial = _run(graph, name, SerialExecutor())
    for workers in (1, 2):
        with DaskExecutor(n_workers=workers, threads_per_worker=1) as ex:
            got = _run(graph, name, ex)
        assert np.array_equal(serial.graph.edges_private, got.graph.edges_private), (name, workers)
