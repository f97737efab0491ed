"""Cluster-GCN over a STORED partitioned version (privgraph.evaluate.minibatch_parts): Cora privatized
through the partitioned path (DPRR on half its edges, label RR on the training labels) and written
as a partitioned version by the partitions' tasks; the source's clusters are those of
GraphClusterSource over the version loaded whole, training over both gives the same result, the
source reads one part at a time through the store's verified reads, and a tampered part fails."""

from __future__ import annotations

import datetime as dt
import functools
import shutil

import numpy as np
import pytest
import scipy.sparse as sp

from privgraph.errors import ArtifactError, ArtifactIntegrityError
from privgraph.evaluate.minibatch import ClusterSource, GraphClusterSource, fit_cluster_gcn
from privgraph.evaluate.minibatch_parts import VersionPartsSource, _cluster_bytes
from privgraph.graph import SPLIT_MASKS
from privgraph.mechanisms import build_mechanism
from privgraph.parts.partition import partition_graph
from privgraph.privatize.partitioned import privatize_through_files
from privgraph.publish.release_parts import commit_release_parts, write_release_parts
from privgraph.storage import LocalStore, graph_to_objects, put_version
from privgraph.storage.parts import open_parts_area
from tests.storage.conftest import make_manifest

pytestmark = [pytest.mark.dataset, pytest.mark.filterwarnings("ignore:Sparse CSR tensor support is in beta")]

PIPE = "cora-parts"
WHEN = dt.datetime(2026, 12, 1, 12, 0, tzinfo=dt.timezone.utc)
PARTS = 6
FAST = {"epochs": 4, "patience": None, "device": "cpu", "clusters_per_batch": 2}


@pytest.fixture(scope="module")
def stored(cora, tmp_path_factory):
    """``(store root, version, the version loaded whole)``: Cora with every other edge private,
    partitioned by METIS over its public edges, privatized and stored by the partitions' tasks."""
    e = cora.edges_public
    g = cora.replace(edges_public=e[:, ::2], edges_private=e[:, 1::2])
    tmp = tmp_path_factory.mktemp("parts-source")
    store = LocalStore(tmp / "store")
    area = open_parts_area(store, PIPE, WHEN)
    res = privatize_through_files(
        g, partitioning=partition_graph(g, PARTS, "metis"), staging=tmp / "staging", features=None,
        edges=build_mechanism("dprr", {"epsilon": 2.0}),
        labels=build_mechanism("label_rr", {"epsilon": 1.0, "num_classes": 7, "mask": ["train_mask"]}),
        root_seed=np.random.SeedSequence(5), write_parts=functools.partial(write_release_parts, area=area))
    version = commit_release_parts(area, res.parts, g.num_nodes).publish(make_manifest(PIPE, num_nodes=g.num_nodes))
    loaded, _ = store.load_graph(PIPE, version)
    assert loaded.edges_private.shape[1] > 0 and not np.array_equal(loaded.y, cora.y)  # privatized
    return tmp / "store", version, loaded


class CountingStore(LocalStore):
    """A local store that logs the objects read through its verified read."""

    def __init__(self, root) -> None:
        super().__init__(root)
        self.reads: list[str] = []

    def read_object(self, pipeline, version, name):
        self.reads.append(name)
        return super().read_object(pipeline, version, name)


def _in_memory(source: VersionPartsSource, graph) -> GraphClusterSource:
    """GraphClusterSource over ``graph`` with the version's parts as its clusters."""
    assignment = np.full(graph.num_nodes, -1, dtype=np.int64)
    for i in range(source.num_clusters):
        assignment[source.cluster(i, features=False).nodes] = i
    assert (assignment >= 0).all()
    return GraphClusterSource(graph, assignment)


def _same_clusters(a: ClusterSource, b: ClusterSource) -> None:
    """The same clusters: nodes, features, labels, masks, and edges as sets (each edge once)."""
    assert (a.num_nodes, a.num_clusters, a.num_classes, a.feature_dim) == \
           (b.num_nodes, b.num_clusters, b.num_classes, b.feature_dim)
    for i in range(a.num_clusters):
        ca, cb = a.cluster(i), b.cluster(i)
        np.testing.assert_array_equal(ca.nodes, cb.nodes)
        dense = [c.x.toarray() if sp.issparse(c.x) else c.x for c in (ca, cb)]
        np.testing.assert_array_equal(*dense)
        np.testing.assert_array_equal(ca.y, cb.y)
        for m in SPLIT_MASKS:
            np.testing.assert_array_equal(getattr(ca, m), getattr(cb, m))
        ea, eb = (set(map(tuple, c.edges.T.tolist())) for c in (ca, cb))
        assert len(ea) == ca.edges.shape[1] and ea == eb, f"cluster {i}: the edges differ"


def test_the_clusters_are_those_of_the_version_loaded_whole(stored):
    root, version, loaded = stored
    with VersionPartsSource(LocalStore(root), PIPE, version) as source:
        assert isinstance(source, ClusterSource) and source.num_clusters == PARTS
        assert source.num_classes == 7 and source.feature_dim == loaded.x.shape[1]
        _same_clusters(source, _in_memory(source, loaded))
        assert sp.issparse(source.cluster(0).x)  # bag-of-words: handed out as CSR
        assert source.cluster(1, features=False).x is None
        # every released edge once per direction, across the clusters
        directed = np.concatenate([source.cluster(i, features=False).edges for i in range(PARTS)], axis=1)
        whole = loaded.edges("all")
        assert directed.shape[1] == 2 * whole.shape[1]


def test_the_comparison_sees_a_missing_edge(stored):
    """The check above can fail: one released private edge less in the in-memory graph."""
    root, version, loaded = stored
    with VersionPartsSource(LocalStore(root), PIPE, version) as source:
        fewer = loaded.replace(edges_private=loaded.edges_private[:, 1:])
        with pytest.raises(AssertionError, match="edges differ"):
            _same_clusters(source, _in_memory(source, fewer))


def test_training_over_the_stored_parts_equals_training_in_memory(stored):
    root, version, loaded = stored
    with VersionPartsSource(LocalStore(root), PIPE, version) as source:
        stored_run = fit_cluster_gcn(source, seed=3, **FAST)
        memory_run = fit_cluster_gcn(_in_memory(source, loaded), seed=3, **FAST)
    assert stored_run == memory_run
    assert stored_run["num_clusters"] == PARTS and stored_run["epochs_run"] == FAST["epochs"]


def test_the_source_reads_one_part_at_a_time(stored):
    """Built part by part (features of part 0 only); a cluster reads its own part's objects
    and nothing else (no features without features); it holds no per-node array."""
    root, version, _ = stored
    store = CountingStore(root)
    with VersionPartsSource(store, PIPE, version) as source:
        parts = [int(n[5:10]) for n in store.reads if n.startswith("part-")]
        assert parts == sorted(parts) and sorted(set(parts)) == list(range(PARTS))
        assert [n for n in store.reads if n.endswith(".features.npy")] == ["part-00000.features.npy"]
        held = [k for k, v in vars(source).items() if isinstance(v, np.ndarray) and v.size > PARTS + 1]
        assert not held
        for i in (4, 1):
            store.reads.clear()
            source.cluster(i)
            assert {n.split(".")[0] for n in store.reads} == {f"part-{i:05d}"}
            assert any(n.endswith(".features.npy") for n in store.reads)
            store.reads.clear()
            source.cluster(i, features=False)
            assert not any(n.endswith(".features.npy") for n in store.reads)
    assert not source._spill.exists()  # closed: the spill directory is gone


@pytest.mark.parametrize("cache_bytes", [0, 10**9, "one part"])
def test_parts_are_read_once_within_the_cache_budget(stored, cache_bytes):
    """A part read with its features is kept while the budget lasts and served again unread (the
    same cluster); past the budget, or with none, each call reads and verifies it again."""
    root, version, _ = stored
    store = CountingStore(root)
    with VersionPartsSource(store, PIPE, version, cache_bytes=0) as probe:
        sizes = [_cluster_bytes(probe.cluster(i)) for i in range(PARTS)]
    budget = sizes[0] if cache_bytes == "one part" else cache_bytes
    with VersionPartsSource(store, PIPE, version, cache_bytes=budget) as source:
        first = [source.cluster(i) for i in range(PARTS)]
        store.reads.clear()
        again = [source.cluster(i) for i in range(PARTS)]
        reread = sorted({int(n[5:10]) for n in store.reads})
        kept = {0: [], 10**9: list(range(PARTS))}.get(budget, [0])
        assert reread == [i for i in range(PARTS) if i not in kept]
        for a, b in zip(first, again, strict=True):
            assert np.array_equal(a.nodes, b.nodes) and np.array_equal(a.edges, b.edges)
        assert source.cluster(0, features=False).x is None


def test_a_tampered_part_fails_with_the_store_verification_error(stored, tmp_path):
    root, version, _ = stored
    copy = tmp_path / "store"
    shutil.copytree(root, copy)
    target = copy / PIPE / version / "part-00002.features.npy"
    blob = bytearray(target.read_bytes())
    blob[-1] ^= 1
    target.chmod(0o600)
    target.write_bytes(bytes(blob))
    with VersionPartsSource(LocalStore(copy), PIPE, version) as source:  # built without part 2's features
        source.cluster(1)
        with pytest.raises(ArtifactIntegrityError, match="part-00002.features.npy.*corrupt"):
            source.cluster(2)
    edges = copy / PIPE / version / "part-00003.edges.parquet"
    edges.chmod(0o600)
    edges.write_bytes(edges.read_bytes() + b"\0")
    with pytest.raises(ArtifactIntegrityError, match="part-00003.edges.parquet.*corrupt"):
        VersionPartsSource(LocalStore(copy), PIPE, version, spill_dir=tmp_path)
    assert not list(tmp_path.glob("privgraph-parts-*"))  # a failed build leaves no spill


def test_a_file_the_manifest_does_not_list_is_refused(stored, tmp_path):
    """Issue 57 (5): the evaluation at scale reads a version through this source: a file dropped
    into the version's folder stops it before any part is read, naming the file."""
    root, version, _ = stored
    copy = tmp_path / "store"
    shutil.copytree(root, copy)
    (copy / PIPE / version / "part-00000.secret.npy").write_bytes(b"not part of the release")
    with pytest.raises(ArtifactIntegrityError, match=f"{PIPE}/{version} holds 'part-00000.secret.npy', which its "
                                                     "manifest does not list"):
        VersionPartsSource(LocalStore(copy), PIPE, version, spill_dir=tmp_path)
    assert not list(tmp_path.glob("privgraph-parts-*"))


def test_a_whole_version_is_refused(stored, tmp_path):
    _, _, loaded = stored
    store = LocalStore(tmp_path / "whole")
    other = put_version(store, "cora-whole", graph_to_objects(loaded), make_manifest("cora-whole", num_nodes=loaded.num_nodes))
    with pytest.raises(ArtifactError, match="not a partitioned version"):
        VersionPartsSource(store, "cora-whole", other, spill_dir=tmp_path)
    assert not list(tmp_path.glob("privgraph-parts-*"))


def test_the_same_clusters_from_the_version_on_s3(stored, moto_endpoint):
    """The version's objects copied as they are into an S3 bucket (moto's server): the source
    over the S3 store serves the clusters of the local one."""
    import boto3

    from privgraph.storage.s3 import S3Store

    root, version, _ = stored
    client = boto3.client("s3", endpoint_url=moto_endpoint, region_name="us-east-1",
                          aws_access_key_id="testing", aws_secret_access_key="testing")
    client.create_bucket(Bucket="privgraph-parts-source")
    for f in sorted((root / PIPE / version).iterdir()):
        client.put_object(Bucket="privgraph-parts-source", Key=f"artifacts/{PIPE}/{version}/{f.name}", Body=f.read_bytes())
    with VersionPartsSource(S3Store("privgraph-parts-source", "artifacts", client=client), PIPE, version) as remote, \
            VersionPartsSource(LocalStore(root), PIPE, version) as local:
        assert (remote.num_nodes, remote.num_classes, remote.feature_dim) == \
               (local.num_nodes, local.num_classes, local.feature_dim)
        for i in (0, PARTS - 1):
            a, b = remote.cluster(i), local.cluster(i)
            for field in ("nodes", "y", "train_mask", "test_mask", "edges"):
                np.testing.assert_array_equal(getattr(a, field), getattr(b, field))
            assert (a.x != b.x).nnz == 0
