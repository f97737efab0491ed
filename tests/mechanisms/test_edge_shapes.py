"""The edge-mechanism contract: every registered edge mechanism is one shape, declares what it
supports, and a new one is one module (its class, the decorator, its shape's hooks): the registry,
the config's checks, the release and the partitioned layout read the declaration, nothing else."""

from __future__ import annotations

import sys
import textwrap
from typing import Any, ClassVar

import numpy as np
import pytest

from privgraph.config.loader import parse_config
from privgraph.errors import ConfigError
from privgraph.guarantee import Guarantee, GuaranteeKind, Scope
from privgraph.ingest.datasets.split import split_public_private
from privgraph.ingest.datasets.synthetic import sbm_graph
from privgraph.mechanisms import MECHANISMS, build_mechanism, edge_mechanisms
from privgraph.mechanisms.edges.edge_arrays import symmetrize_reports
from privgraph.mechanisms.edges.shapes import SHAPES, Aggregates, EdgeMechanism, LocalReports
from privgraph.mechanisms.registry import import_registering_modules, register_mechanism
from privgraph.parts.partition import partition_graph
from privgraph.privatize.partitioned import privatize_through_files
from privgraph.privatize.release import privatize_graph

EDGES = {n: c for n, c in MECHANISMS.items() if c.scope is Scope.EDGES}


def test_every_edge_mechanism_is_exactly_one_shape_and_declares_what_its_shape_does():
    assert len(EDGES) >= 10  # not vacuous: the shipped edge mechanisms are all registered
    for name, cls in EDGES.items():
        shapes = [s.__name__ for s in SHAPES if issubclass(cls, s)]
        assert len(shapes) == 1, (name, shapes)
        assert cls.runs_partitioned == issubclass(cls, LocalReports), name
        assert cls.releases_aggregates == issubclass(cls, Aggregates), name
    # and nothing else: every other registered mechanism protects features or labels
    assert all(not issubclass(c, EdgeMechanism) for c in MECHANISMS.values() if c.scope is not Scope.EDGES)
    assert edge_mechanisms(releases_aggregates=True) == sorted(n for n, c in EDGES.items() if issubclass(c, Aggregates))


class _CoinReports(LocalReports):
    """A throwaway local-reports mechanism: each node of V_pri reports every other one with
    probability 1/2, reading no neighbour list (so its output does not depend on the private
    edges: epsilon 0)."""

    name: ClassVar[str] = "coin_reports_test"
    epsilon_range: ClassVar[None] = None

    @property
    def guarantee(self) -> Guarantee:
        return Guarantee(kind=GuaranteeKind.EDGE_DP, epsilon=0.0, scope=Scope.EDGES,
                         assumptions=("the reports read no private edge",))

    def params(self) -> dict[str, Any]:
        return {}

    def privatize_nodes(self, nodes, indptr, indices, candidates, rng):
        reporter = np.repeat(nodes, candidates.size)
        reported = np.tile(candidates, nodes.size)
        keep = (reporter != reported) & (rng.random(reporter.size) < 0.5)
        return np.stack([reporter[keep], reported[keep]]).astype(np.int64)

    def combine_reports(self, arcs, num_nodes):
        return symmetrize_reports(arcs, num_nodes)


@pytest.fixture
def coin_reports():
    """The throwaway mechanism registered for one test, and unregistered after it."""
    cls = register_mechanism(_CoinReports)
    try:
        yield cls
    finally:
        MECHANISMS.pop(cls.name)
    assert cls.name not in MECHANISMS


def test_a_new_mechanism_is_one_class_with_the_decorator(coin_reports, tmp_path):
    mech = build_mechanism("coin_reports_test", {})
    assert isinstance(mech, coin_reports) and "coin_reports_test" in edge_mechanisms(runs_partitioned=True)
    # the config's checks read its declaration: a local-reports mechanism runs in the files layout
    pipeline = {"dataset": {"name": "cora"}, "edges": {"mechanism": "coin_reports_test"}, "partitions": {"layout": "files"}}
    cfg = parse_config({"pipelines": {"p": pipeline}})
    assert cfg.pipelines["p"].edges.mechanism == "coin_reports_test"
    with pytest.raises(ConfigError, match=r"pipelines\.p\.partitions\.layout: files runs the per-node edge "
                                          r"mechanisms \(coin_reports_test, dprr, warner_rr\)"):
        parse_config({"pipelines": {"p": {**pipeline, "edges": {"mechanism": "edge_rand", "epsilon": 1.0}}}})
    # the release: its shape's template runs it per partition, in memory and through files alike
    graph = split_public_private(sbm_graph(60, num_classes=3, avg_degree=4.0, num_features=4, seed=1), 0.5, seed=2)
    parts = partition_graph(graph, 3, "hash")
    seed = np.random.SeedSequence(5)
    res = privatize_graph(graph, features=None, edges=mech, partitioning=parts, root_seed=seed)
    v_pri = graph.private_nodes().size
    assert res.graph.edges_private.shape[1] > 0 and np.isin(res.graph.edges_private, graph.private_nodes()).all()
    assert res.stats["edges"] == {"private_nodes": v_pri}
    assert 0 < res.release["edges"]["reports"] <= v_pri * (v_pri - 1)
    assert res.ledger.entries[0].mechanism == "coin_reports_test"
    files = privatize_through_files(graph, partitioning=parts, staging=tmp_path / "staging", features=None,
                                    edges=mech, root_seed=seed)
    assert np.array_equal(files.graph.edges_private, res.graph.edges_private)


def test_the_registry_refuses_a_name_taken_or_missing(coin_reports):
    class Other(_CoinReports):
        name: ClassVar[str] = "coin_reports_test"

    with pytest.raises(ValueError, match="'coin_reports_test' is taken by _CoinReports"):
        register_mechanism(Other)

    class Nameless(_CoinReports):  # inherits a name but sets none of its own
        pass

    with pytest.raises(TypeError, match="Nameless: a mechanism sets its registry name"):
        register_mechanism(Nameless)
    assert MECHANISMS["coin_reports_test"] is coin_reports


def test_a_module_that_registers_a_mechanism_is_imported_by_its_package(tmp_path, monkeypatch):
    """What makes a new module enough: the package imports every module of its own whose source
    applies the decorator, and no other (a helper module may import torch)."""
    pkg = tmp_path / "shapes_probe_pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "coin.py").write_text(textwrap.dedent('''
        from privgraph.mechanisms.edges.shapes import Central
        from privgraph.mechanisms.registry import register_mechanism


        @register_mechanism
        class ModuleCoin(Central):
            name = "coin_module_test"
            epsilon_range = None
    '''))
    (pkg / "helper.py").write_text("raise RuntimeError('a helper module is not imported by the registry')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        import_registering_modules("shapes_probe_pkg", [str(pkg)])
        assert MECHANISMS["coin_module_test"].__module__ == "shapes_probe_pkg.coin"
        assert "shapes_probe_pkg.helper" not in sys.modules
    finally:
        MECHANISMS.pop("coin_module_test", None)
        for mod in [m for m in sys.modules if m.startswith("shapes_probe_pkg")]:
            del sys.modules[mod]
