"""The evaluation at scale (privgraph.evaluate.scale_metrics): a STAGED partitioned version of Cora
(FeatureRR on the features, DPRR on half the edges, written by the partitions' tasks, no manifest
yet) evaluated from its parts; each figure is the in-memory function's over the version loaded
whole (Cluster-GCN over the same parts, label propagation over the public edges), the summary has
the in-memory evaluation's keys, a tampered staged part is refused, and the options Cluster-GCN
does not implement are refused in one line."""

from __future__ import annotations

import datetime as dt
import functools
import shutil

import numpy as np
import pytest

from privgraph.config.disclosure import disclosure_of
from privgraph.config.evaluate import OFF_AT_SCALE, EvaluateConfig
from privgraph.config.pipeline import PipelinesConfig
from privgraph.errors import ArtifactIntegrityError, ConfigError
from privgraph.evaluate.minibatch import GraphClusterSource, fit_cluster_gcn
from privgraph.evaluate.minibatch_kprop import PropagatedSource
from privgraph.evaluate.minibatch_parts import VersionPartsSource, version_public_graph
from privgraph.evaluate.minibatch_source import SampledSource, sampled_parts
from privgraph.evaluate.models.kprop import LPGNN_KPROP
from privgraph.evaluate.models.kprop import KProp
from privgraph.evaluate.public_reference import public_only_reference
from privgraph.evaluate.minibatch_source import EdgelessSource
from privgraph.evaluate.scale_metrics import version_metrics_at_scale
from privgraph.mechanisms import build_mechanism
from privgraph.parts.executor import SerialExecutor
from privgraph.parts.partition import partition_graph
from privgraph.privatize.partitioned import privatize_through_files
from privgraph.publish.release_parts import commit_release_parts, write_release_parts
from privgraph.storage import LocalStore
from privgraph.storage.parts import open_parts_area
from privgraph.seeding import as_seed_sequence, partition_seeds, stage_seed

pytestmark = [pytest.mark.dataset, pytest.mark.filterwarnings("ignore:Sparse CSR tensor support is in beta")]

PIPE = "cora-scale"
PARTS = 6
ENTROPY = 1234
EVALUATE = {"runs": 2, "epochs": 6, "patience": None, "device": "cpu", "clusters_per_batch": 2}


def _config(tmp_path, **evaluate):
    """The pipeline's configuration: FeatureRR on the features, DPRR on the private edges."""
    raw = {"pipelines": {PIPE: {
        "dataset": {"name": "cora"},
        "features": {"mechanism": "feature_rr", "epsilon": 1.0, "bins": 2, "lower": 0.0, "upper": 1.0},
        "edges": {"mechanism": "dprr", "epsilon": 2.0},
        "partitions": {"num_parts": PARTS, "method": "metis", "layout": "files"},
        "private_records": str(tmp_path / "private"), "evaluate": {**EVALUATE, **evaluate}}}}
    return PipelinesConfig.model_validate(raw)


@pytest.fixture(scope="module")
def staged(cora, tmp_path_factory):
    """``(store, pending version, the version loaded whole, disclosure, config)``."""
    tmp = tmp_path_factory.mktemp("scale-metrics")
    cfgs = _config(tmp)
    e = cora.edges_public
    g = cora.replace(edges_public=e[:, ::2], edges_private=e[:, 1::2])
    store = LocalStore(tmp / "store")
    area = open_parts_area(store, PIPE, dt.datetime(2026, 12, 1, tzinfo=dt.timezone.utc))
    res = privatize_through_files(
        g, partitioning=partition_graph(g, PARTS, "metis"), staging=tmp / "staging",
        features=build_mechanism("feature_rr", cfgs.get(PIPE).features.params()),
        edges=build_mechanism("dprr", {"epsilon": 2.0}), labels=None,
        root_seed=np.random.SeedSequence(5), write_parts=functools.partial(write_release_parts, area=area))
    pending = commit_release_parts(area, res.parts, g.num_nodes)
    loaded, _ = store.load_graph(PIPE, pending.version, staged=True)
    return store, pending, loaded, disclosure_of(cfgs, PIPE), cfgs.get(PIPE)


def _same_figures(metrics, graph, source) -> dict:
    """The metrics' GNN, floor and public-only figures are the in-memory functions' over ``graph``
    and its clusters ``source`` (the evaluation's seeds); returns the reference."""
    seeds = partition_seeds(stage_seed(as_seed_sequence(ENTROPY), "evaluate"), 2)
    options = {k: v for k, v in EVALUATE.items() if k != "runs"} | {"inference": "layerwise"}
    gnn = [fit_cluster_gcn(source, seed=s, **options)["test_acc"] for s in seeds]
    floor = [fit_cluster_gcn(EdgelessSource(source), seed=s, **options)["test_acc"] for s in seeds]
    reference = public_only_reference(graph, np.ones(graph.num_nodes, dtype=bool), source.num_classes)
    assert metrics["private"]["test_acc"] == pytest.approx(gnn, abs=1e-9)
    assert metrics["feature_only"]["test_acc"] == pytest.approx(floor, abs=1e-9)
    assert metrics["public_only"]["test_acc"] == pytest.approx([reference["test_acc_own_labels"]] * 2, abs=1e-12)
    return reference


def _evaluate(staged, **update) -> dict:
    """``version_metrics_at_scale`` of the staged version, the pipeline's ``evaluate`` updated."""
    store, pending, _, disclosure, cfg = staged
    return version_metrics_at_scale(str(store.root), PIPE, pending.version, cfg.evaluate.model_copy(update=update),
                                    ENTROPY, disclosure, SerialExecutor(), staged=dict(pending.objects))


@pytest.fixture(scope="module")
def whole_metrics(staged):
    """The evaluation over every part (computed once for the tests that compare with it)."""
    return _evaluate(staged)


def test_each_figure_is_the_in_memory_functions_over_the_version(staged, whole_metrics):
    loaded, metrics = staged[2], whole_metrics
    # the same clusters as the parts, over the version loaded whole
    reference = _same_figures(metrics, loaded, GraphClusterSource(loaded, partition_graph(loaded, PARTS, "metis").assignment))
    chosen = metrics["selected"]["test_acc"]
    assert metrics["value_of_release"]["mean_difference"] == pytest.approx(
        np.mean(chosen) - reference["test_acc_own_labels"], abs=1e-12)
    assert set(metrics["selected"]["models"]) <= {"public_only", "feature_only", "gnn"}
    assert metrics["evaluation"]["parts"] == PARTS and metrics["runs"] == 2
    assert "owner_only" not in metrics and "clean" not in metrics  # nothing from the raw graph
    # the public edges feed the reference: propagation over half of Cora's edges beats its largest
    # class (0.32 of the test nodes) by far
    assert reference["test_acc_own_labels"] > 0.4


def test_the_partitioning_of_the_version_is_its_public_one(staged):
    """The parts the evaluation trains over are the version's, i.e. METIS over the PUBLIC edges."""
    store, pending, loaded, _, _ = staged
    public, num_parts = version_public_graph(store, PIPE, pending.version, staged=dict(pending.objects))
    assert num_parts == PARTS
    with VersionPartsSource(store, PIPE, pending.version, staged=dict(pending.objects)) as source:
        order = lambda e: e[:, np.lexsort((e[1], e[0]))]  # noqa: E731 - stored part by part
        assert np.array_equal(order(public.edges_public), order(loaded.edges_public))
        assert public.edges_private.size == 0 and public.x is None
        assign = np.full(loaded.num_nodes, -1)
        for i in range(source.num_clusters):
            assign[source.cluster(i, features=False).nodes] = i
    assert np.array_equal(assign, partition_graph(loaded, PARTS, "metis").assignment)


def test_a_tampered_staged_part_is_refused(staged, tmp_path):
    store, pending, _, disclosure, cfg = staged

    copy = LocalStore(tmp_path / "store")
    shutil.copytree(store.root, copy.root, dirs_exist_ok=True)
    target = copy.root / PIPE / pending.version / "part-00003.edges.parquet"
    blob = bytearray(target.read_bytes())
    blob[len(blob) // 2] ^= 0xFF
    target.write_bytes(bytes(blob))
    with pytest.raises(ArtifactIntegrityError, match="corrupt"):
        version_metrics_at_scale(str(copy.root), PIPE, pending.version, cfg.evaluate, ENTROPY, disclosure,
                                 SerialExecutor(), staged=dict(pending.objects))


@pytest.mark.parametrize("name", sorted(OFF_AT_SCALE))
def test_what_cluster_gcn_does_not_implement_is_refused_in_one_line(name):
    on = {"model": "sage", "kprop_labels": 2, "drop": True, "kprop_search": [0, 2],
          "ensemble": 3, "feature_dim": 16, "attacks": ["linkteller"]}[name]
    cfg = EvaluateConfig.model_validate({name: on})
    with pytest.raises(ConfigError) as err:
        cfg.check_at_scale()
    assert str(err.value).startswith(f"evaluate.{name}: ") and "\n" not in str(err.value)
    EvaluateConfig().check_at_scale()  # the defaults are evaluable at scale


@pytest.mark.parametrize("steps", [0, 3])
def test_kprop_out_of_core_equals_kprop_in_memory(staged, steps):
    """PropagatedSource's features are KProp's (the evaluation's settings) over the version's
    edges, row for row, whatever the clusters; the floor source keeps the raw features."""
    _, _, loaded, _, _ = staged
    whole = GraphClusterSource(loaded, partition_graph(loaded, PARTS, "metis").assignment)
    data = loaded.to_pyg("all")
    expected = KProp(steps, **LPGNN_KPROP)(data.x, data.edge_index).numpy()
    with PropagatedSource(whole, steps) as source:
        got = np.zeros_like(expected)
        for i in range(source.num_clusters):
            c = source.cluster(i)
            assert isinstance(c.x, np.ndarray) and c.x.dtype == np.float32
            got[c.nodes] = c.x
            assert np.array_equal(c.edges, whole.cluster(i).edges)
        assert source.cluster(0, features=False).x is None
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-6)
    assert steps == 0 or not np.allclose(got, loaded.x)  # propagated: not the released rows


def _induced(graph, keep: np.ndarray):
    """``graph`` restricted to the nodes ``keep`` selects, renumbered in ascending order."""
    nodes = np.flatnonzero(keep)
    local = np.full(graph.num_nodes, -1, dtype=np.int64)
    local[nodes] = np.arange(nodes.size)
    edges = {k: local[e[:, keep[e[0]] & keep[e[1]]]] for k, e in
             (("edges_public", graph.edges_public), ("edges_private", graph.edges_private))}
    return graph.replace(num_nodes=int(nodes.size), x=graph.x[nodes], y=graph.y[nodes], train_mask=graph.train_mask[nodes],
                         val_mask=graph.val_mask[nodes], test_mask=graph.test_mask[nodes], **edges)


def test_an_evaluation_sample_is_the_same_functions_over_the_sampled_parts(staged, whole_metrics):
    """``sample_parts: 3`` of 6: every figure is the in-memory function's over the induced subgraph
    of parts 0, 2 and 5 of the version (Cluster-GCN over those parts, label propagation over their
    public edges), and the metrics say which parts and how many nodes."""
    loaded, metrics = staged[2], _evaluate(staged, sample_parts=3)
    chosen = sampled_parts(PARTS, 3)
    assert chosen.tolist() == [0, 2, 5]
    parts = partition_graph(loaded, PARTS, "metis").assignment
    keep = np.isin(parts, chosen)
    sub = _induced(loaded, keep)
    assert 0 < sub.num_nodes < loaded.num_nodes and sub.test_mask.any()
    assert metrics["evaluation"]["sample"] == {"parts": [0, 2, 5], "nodes": sub.num_nodes}
    _same_figures(metrics, sub, GraphClusterSource(sub, np.searchsorted(chosen, parts[keep])))
    assert whole_metrics["evaluation"]["sample"] is None
    assert whole_metrics["private"]["test_acc"] != metrics["private"]["test_acc"]


def test_the_sample_source_renumbers_and_drops_the_edges_that_leave_it(staged):
    store, pending, loaded, _, _ = staged
    with VersionPartsSource(store, PIPE, pending.version, staged=dict(pending.objects)) as whole:
        source = SampledSource(whole, [1, 4])
        nodes = np.sort(np.concatenate([whole.cluster(i, features=False).nodes for i in (1, 4)]))
        assert source.num_nodes == nodes.size and source.num_clusters == 2 and np.array_equal(source.nodes, nodes)
        assert source.num_classes == whole.num_classes and source.feature_dim == whole.feature_dim
        seen = 0
        for j, i in enumerate((1, 4)):
            c, o = source.cluster(j), whole.cluster(i)
            assert np.array_equal(nodes[c.nodes], o.nodes) and np.array_equal(c.y, o.y)
            inside = np.isin(o.edges[1], nodes)
            assert not inside.all()  # METIS parts of Cora are not closed: some edges leave the sample
            assert np.array_equal(nodes[c.edges], o.edges[:, inside])
            seen += c.size
        assert seen == source.num_nodes
        for bad in ([], [0, 0], [6], [-1]):
            with pytest.raises(ValueError, match="distinct clusters in \\[0, 6\\)"):
                SampledSource(whole, bad)


@pytest.mark.parametrize(("num_parts", "sample", "want"), [(8, 1, [0]), (8, 2, [0, 7]), (8, 4, [0, 2, 5, 7]),
                                                           (8, 8, list(range(8))), (5, None, list(range(5))),
                                                           (3, 4, [0, 1, 2])])  # fewer parts than asked: all
def test_the_sampled_parts_are_evenly_spaced(num_parts, sample, want):
    assert sampled_parts(num_parts, sample).tolist() == want


@pytest.mark.parametrize("sample", [0, -1, 2.0, True])
def test_a_sample_that_is_not_a_count_is_refused(sample):
    with pytest.raises(ValueError, match=r"evaluate.sample_parts: must be an int >= 1"):
        sampled_parts(8, sample)


def test_a_sample_is_refused_where_the_graph_is_evaluated_in_memory(tmp_path):
    with pytest.raises(ValueError, match="evaluate.sample_parts: an evaluation sample is a choice"):
        _config(tmp_path, sample_parts=2)  # cora: evaluated in memory
    scale = {"dataset": {"name": "partitioned", "options": {"path": "g"}},
             "edges": {"mechanism": "dprr", "epsilon": 1.0},
             "partitions": {"num_parts": 4, "layout": "files"}, "evaluate": {"sample_parts": 5}}
    with pytest.raises(ValueError, match="evaluate.sample_parts: 5 parts of the 4 of partitions.num_parts"):
        PipelinesConfig.model_validate({"pipelines": {"p": scale}})
    scale["evaluate"] = {"sample_parts": 4}
    assert PipelinesConfig.model_validate({"pipelines": {"p": scale}}).get("p").evaluate.sample_parts == 4


def test_the_report_says_the_figures_are_a_samples():
    from privgraph.publish.run_report import scale_note

    e = {"method": "Cluster-GCN", "parts": 8, "clusters_per_batch": 4, "inference": "layerwise"}
    assert scale_note({"evaluation": {**e, "sample": None}}).startswith("evaluated at scale over 8 parts, 4 per step")
    note = scale_note({"evaluation": {**e, "sample": {"parts": [0, 7], "nodes": 2500}}})
    assert note.startswith("evaluated at scale over an evaluation sample of 2 of the 8 parts (2500 nodes; "
                           "every figure is the sample's), 4 per step")


def test_a_sample_of_every_part_is_the_whole_evaluation(staged, whole_metrics):
    every = _evaluate(staged, sample_parts=PARTS)
    assert every["evaluation"]["sample"] is None and every == whole_metrics
