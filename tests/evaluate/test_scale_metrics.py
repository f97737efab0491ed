"""The evaluation at scale (privgraph.evaluate.scale_metrics): a STAGED partitioned version of Cora
(FeatureRR on the features, DPRR on half the edges, written by the partitions' tasks, no manifest
yet) evaluated from its parts; each figure is the in-memory function's over the version loaded
whole (Cluster-GCN over the same parts, label propagation over the public edges), the summary has
the in-memory evaluation's keys, a tampered staged part is refused, and the options Cluster-GCN
does not implement are refused in one line."""

from __future__ import annotations

import datetime as dt
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
from privgraph.evaluate.model_inputs import _KPROP
from privgraph.evaluate.models.kprop import KProp
from privgraph.evaluate.public_reference import public_only_reference
from privgraph.evaluate.scale_metrics import EdgelessSource, version_metrics_at_scale
from privgraph.privatize.mechanisms import build_mechanism
from privgraph.privatize.parallel import SerialExecutor
from privgraph.privatize.partition import partition_graph
from privgraph.privatize.partitioned import commit_release_parts, privatize_through_files
from privgraph.publish.storage import LocalStore
from privgraph.publish.storage.parts import open_parts_area
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
        root_seed=np.random.SeedSequence(5), parts_area=area)
    pending = commit_release_parts(area, res.parts, g.num_nodes)
    loaded, _ = store.load_graph(PIPE, pending.version, staged=True)
    return store, pending, loaded, disclosure_of(cfgs, PIPE), cfgs.get(PIPE)


def test_each_figure_is_the_in_memory_functions_over_the_version(staged):
    store, pending, loaded, disclosure, cfg = staged
    metrics = version_metrics_at_scale(str(store.root), PIPE, pending.version, cfg.evaluate, ENTROPY, disclosure,
                                       SerialExecutor(), staged=dict(pending.objects))
    # the same clusters as the parts, over the version loaded whole
    parts = partition_graph(loaded, PARTS, "metis").assignment
    whole = GraphClusterSource(loaded, parts)
    seeds = partition_seeds(stage_seed(as_seed_sequence(ENTROPY), "evaluate"), 2)
    options = {k: v for k, v in EVALUATE.items() if k != "runs"} | {"inference": "layerwise"}
    gnn = [fit_cluster_gcn(whole, seed=s, **options)["test_acc"] for s in seeds]
    floor = [fit_cluster_gcn(EdgelessSource(whole), seed=s, **options)["test_acc"] for s in seeds]
    reference = public_only_reference(loaded, np.ones(loaded.num_nodes, dtype=bool), whole.num_classes)
    assert metrics["private"]["test_acc"] == pytest.approx(gnn, abs=1e-9)
    assert metrics["feature_only"]["test_acc"] == pytest.approx(floor, abs=1e-9)
    assert metrics["public_only"]["test_acc"] == pytest.approx([reference["test_acc_own_labels"]] * 2, abs=1e-12)
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
    expected = KProp(steps, **_KPROP)(data.x, data.edge_index).numpy()
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
