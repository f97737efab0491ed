"""Cluster-GCN mini-batch evaluation (privgraph.evaluate.minibatch): the clusters a source hands
out, a seed fixes a run, arguments are checked in one line, the trainer holds one batch, and on
Cora it reaches full batch's accuracy (exactly full batch's run with one cluster)."""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest
import scipy.sparse as sp

from privgraph.evaluate.minibatch import Cluster, ClusterSource, GraphClusterSource, fit_cluster_gcn, public_clusters
from privgraph.evaluate.training import fit_node_classifier
from privgraph.ingest.datasets.synthetic import sbm_graph

pytestmark = pytest.mark.filterwarnings("ignore:Sparse CSR tensor support is in beta")

FAST = {"epochs": 15, "patience": None, "device": "cpu"}


@pytest.fixture(scope="module")
def cora_source(cora):
    return GraphClusterSource.from_partition(cora, 16)


def _planted():
    """A small planted partition with dense features (the centred, non-CSR input path)."""
    return sbm_graph(300, num_classes=3, avg_degree=8.0, homophily=0.9, num_features=16, feature_signal=0.5, seed=0)


class CountingSource:
    """A source that records every call: the nodes it handed out, with or without features."""

    def __init__(self, inner: GraphClusterSource) -> None:
        self.inner = inner
        self.calls: list[tuple[int, bool]] = []
        self.num_nodes, self.num_clusters = inner.num_nodes, inner.num_clusters
        self.num_classes, self.feature_dim = inner.num_classes, inner.feature_dim

    def cluster(self, i: int, *, features: bool = True) -> Cluster:
        c = self.inner.cluster(i, features=features)
        self.calls.append((c.size, features))
        return c


# -- the source -------------------------------------------------------------------------------------
def test_the_clusters_partition_the_nodes_and_carry_every_edge_once_per_direction():
    g = _planted()
    g = g.replace(edges_public=g.edges_public[:, ::2], edges_private=g.edges_public[:, 1::2])
    src = GraphClusterSource(g, public_clusters(g, 5))
    assert isinstance(src, ClusterSource) and src.num_clusters == 5 and src.num_classes == 3
    nodes, directed = [], []
    for i in range(src.num_clusters):
        c = src.cluster(i)
        assert np.all(np.diff(c.nodes) > 0) and c.x.shape == (c.size, 16)
        np.testing.assert_array_equal(c.x, g.x[c.nodes])  # dense features: handed out dense
        np.testing.assert_array_equal(c.y, g.y[c.nodes])
        assert np.isin(c.edges[0], c.nodes).all()
        nodes.append(c.nodes)
        directed.append(c.edges)
        assert src.cluster(i, features=False).x is None
    np.testing.assert_array_equal(np.sort(np.concatenate(nodes)), np.arange(g.num_nodes))
    e = np.concatenate(directed, axis=1)
    want = g.edges("all")
    want = np.concatenate([want, want[::-1]], axis=1)
    assert sorted(map(tuple, e.T.tolist())) == sorted(map(tuple, want.T.tolist()))


def test_the_public_clusters_read_no_private_edge():
    g = _planted()
    pub = g.replace(edges_public=g.edges_public[:, ::2], edges_private=g.edges_public[:, 1::2])
    other = pub.replace(edges_private=np.zeros((2, 0), np.int64))
    np.testing.assert_array_equal(public_clusters(pub, 6), public_clusters(other, 6))


@pytest.mark.dataset
def test_sparse_features_are_handed_out_as_csr(cora_source, cora):
    c = cora_source.cluster(3)
    assert sp.issparse(c.x) and c.x.dtype == np.float32
    np.testing.assert_array_equal(c.x.toarray(), cora.x[c.nodes])


# -- seeds and arguments ----------------------------------------------------------------------------
@pytest.mark.dataset
def test_a_seed_fixes_the_run_and_another_seed_changes_it(cora_source, one_torch_thread):
    a = fit_cluster_gcn(cora_source, seed=7, **FAST)
    assert a == fit_cluster_gcn(cora_source, seed=7, **FAST)
    b = fit_cluster_gcn(cora_source, seed=8, **FAST)
    assert (a["test_acc"], a["val_acc"], a["train_acc"]) != (b["test_acc"], b["val_acc"], b["train_acc"])


@pytest.mark.parametrize("name, value", [
    ("clusters_per_batch", 0), ("clusters_per_batch", 2.0), ("hidden", 0), ("epochs", True), ("lr", 0.0),
    ("lr", float("nan")), ("weight_decay", -1e-4), ("dropout", 1.0), ("patience", 0), ("aggr", "max"),
    ("inference", "full"),
])
def test_a_bad_argument_is_refused_in_one_line_naming_it(name, value):
    src = GraphClusterSource(_planted(), np.zeros(300, np.int64))
    with pytest.raises(ValueError, match=rf"^fit_cluster_gcn: {name} must ") as err:
        fit_cluster_gcn(src, seed=0, **{name: value})
    assert "\n" not in str(err.value)


def test_a_source_that_breaks_the_protocol_is_refused():
    g = _planted()
    src = CountingSource(GraphClusterSource(g, np.zeros(300, np.int64)))
    src.num_nodes = 301  # one node in no cluster
    with pytest.raises(ValueError, match="the clusters miss 1 of the 301 nodes"):
        fit_cluster_gcn(src, seed=0, **FAST)
    with pytest.raises(TypeError, match="source must be a ClusterSource"):
        fit_cluster_gcn(g, seed=0)
    with pytest.raises(ValueError, match="assignment must be integers of shape"):
        GraphClusterSource(g, np.zeros(299, np.int64))


# -- memory: one batch at a time ----------------------------------------------------------------------
@pytest.mark.parametrize("inference", ["layerwise", "batch"])
@pytest.mark.dataset
def test_the_trainer_holds_one_batch_of_clusters(cora, inference):
    inner = GraphClusterSource.from_partition(cora, 16)
    src = CountingSource(inner)
    res = fit_cluster_gcn(src, seed=0, clusters_per_batch=4, inference=inference, epochs=3, patience=None, device="cpu")
    sizes = np.bincount(public_clusters(cora, 16))
    largest = int(np.sort(sizes)[-4:].sum())
    assert max(size for size, _ in src.calls) == sizes.max()  # one cluster per call
    assert res["peak_batch_nodes"] <= largest < cora.num_nodes / 3
    # a survey pass, then per epoch 4 batches of 4 clusters and the scoring (layerwise: one pass
    # with features, two without; batch: 4 batches of 4)
    per_epoch = 16 + (48 if inference == "layerwise" else 16)
    assert len(src.calls) <= 16 + 3 * per_epoch
    assert sum(not f for _, f in src.calls) == (3 * 32 if inference == "layerwise" else 0)


def test_nothing_of_the_size_of_the_dense_features_is_allocated():
    rng = np.random.default_rng(0)
    g = sbm_graph(2000, num_classes=4, avg_degree=6.0, homophily=0.8, num_features=8, feature_signal=0.5, seed=1)
    g = g.replace(x=np.concatenate([g.x, rng.standard_normal((2000, 392)).astype(np.float32)], axis=1))
    src = GraphClusterSource.from_partition(g, 40)
    fit_cluster_gcn(src, seed=0, clusters_per_batch=2, epochs=1, device="cpu")  # lazy imports, kernels

    def peak(q: int) -> int:
        tracemalloc.start()
        try:
            fit_cluster_gcn(src, seed=0, clusters_per_batch=q, epochs=2, patience=None, device="cpu")
            return tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()

    assert peak(2) < g.x.nbytes / 4 < g.x.nbytes < peak(40)  # all 40 clusters in one batch: the whole x


# -- accuracy -------------------------------------------------------------------------------------------
@pytest.mark.dataset
def test_one_cluster_is_full_batch(cora, one_torch_thread):
    full = fit_node_classifier(cora, seed=3, epochs=40, device="cpu").result
    src = GraphClusterSource(cora, np.zeros(cora.num_nodes, np.int64))
    for inference in ("layerwise", "batch"):
        mini = fit_cluster_gcn(src, seed=3, clusters_per_batch=1, epochs=40, inference=inference, device="cpu")
        assert mini["best_epoch"] == full["best_epoch"] and mini["epochs_run"] == full["epochs_run"]
        for key in ("test_acc", "val_acc", "train_acc"):
            assert mini[key] == pytest.approx(full[key], abs=0.002), (inference, key)


def test_one_cluster_of_dense_features_is_full_batch_closely(one_torch_thread):
    g = _planted()
    full = fit_node_classifier(g, seed=1, epochs=40, device="cpu").result
    mini = fit_cluster_gcn(GraphClusterSource(g, np.zeros(300, np.int64)), seed=1, epochs=40, device="cpu")
    for key in ("test_acc", "val_acc", "train_acc"):
        assert mini[key] == pytest.approx(full[key], abs=0.01), key


@pytest.mark.dataset
def test_cluster_gcn_on_cora_is_as_accurate_as_full_batch(cora, cora_source, one_torch_thread):
    full = fit_node_classifier(cora, seed=0, device="cpu").result
    mini = fit_cluster_gcn(cora_source, seed=0, clusters_per_batch=4, device="cpu")
    assert full["test_acc"] > 0.78  # not vacuous: both are trained models (chance: 0.3)
    assert abs(mini["test_acc"] - full["test_acc"]) <= 0.03, (mini, full)
    # "batch" inference scores each batch on its own subgraph: the edges between batches unseen
    batch = fit_cluster_gcn(cora_source, seed=0, clusters_per_batch=4, inference="batch", device="cpu")
    assert batch["test_acc"] > 0.75
