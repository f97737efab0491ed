"""Partitioned versions: each partition's task writes its objects into the store's parts area
(local or S3 on moto), the client commits by copying them; the version loads to the same graph
as the whole release, streams part by part, and leaves nothing behind when a task fails."""

from __future__ import annotations

import datetime as dt
import json

import numpy as np
import pytest

from privgraph.errors import ArtifactError, ArtifactIntegrityError
from privgraph.mechanisms import build_mechanism
from privgraph.privatize.partitioned import load_partitioned_release, privatize_partitioned
from privgraph.publish.release_parts import parts_writer, store_partitioned_release
from privgraph.storage.graph_io import (
    GRAPH_INFO,
    GraphPart,
    assemble_parts,
    graph_to_objects,
    part_to_objects,
    partitioned_graph_info,
    objects_to_graph,
    read_graph_info,
)
from privgraph.storage.parts import open_parts_area
from privgraph.storage.staging import gc_staged, put_version
from tests.storage.conftest import make_manifest
from tests.test_partitioned import graph, partitioning, source  # noqa: F401 - the shared input fixtures

PIPE = "sbm-parts"
WHEN = dt.datetime(2026, 11, 28, 12, 0, tzinfo=dt.timezone.utc)


@pytest.fixture(scope="module")
def release(source, tmp_path_factory):
    mechs = {
        "features": build_mechanism("feature_rr", {"epsilon": 1.0, "bins": 4}),
        "edges": build_mechanism("dprr", {"epsilon": 1.0}),
        "labels": build_mechanism("label_rr", {"epsilon": 1.0, "num_classes": 3, "mask": ["train_mask"]}),
    }
    return privatize_partitioned(source, tmp_path_factory.mktemp("rel") / "release", root_seed=np.random.SeedSequence(4), **mechs)


def _same_graph(a, b) -> None:
    assert a.num_nodes == b.num_nodes
    for field in ("x", "y", "edges_public", "edges_private", "train_mask", "val_mask", "test_mask"):
        assert np.array_equal(getattr(a, field), getattr(b, field)), field


def test_a_partitioned_version_is_the_whole_release(backend, source, release, partitioning):
    """Committed, published, loaded: the same graph as the release read back whole and as the
    same graph stored whole; streamed, one part per partition with its own nodes; the parts
    area is gone and the version verifies."""
    area = open_parts_area(backend.store, PIPE, WHEN)
    pending = store_partitioned_release(source, release, area)
    version = pending.publish(make_manifest(PIPE, num_nodes=3000))
    loaded, _ = backend.store.load_graph(PIPE, version)
    whole = load_partitioned_release(source, release.directory)
    _same_graph(loaded, whole)
    other = put_version(backend.store, "sbm-whole", graph_to_objects(whole), make_manifest("sbm-whole", num_nodes=3000))
    _same_graph(backend.store.load_graph("sbm-whole", other)[0], loaded)
    parts = list(backend.store.iter_parts(PIPE, version))
    assert [p.index for p in parts] == [0, 1, 2, 3]
    for p, nodes in zip(parts, partitioning.parts, strict=True):
        assert np.array_equal(p.nodes, nodes)
        assert p.fields["x"].shape == (nodes.size, whole.x.shape[1])
    assert sum(p.edges_private.shape[1] for p in parts) == whole.edges_private.shape[1]
    assert not [k for k in backend.raw_keys() if "/parts-" in k]
    assert backend.store.verify_version(PIPE, version)["objects"] == 4 * 5 + 1
    with pytest.raises(ArtifactError, match="not a partitioned version"):
        list(backend.store.iter_parts("sbm-whole", other))


def test_the_client_never_reads_a_part(backend, source, release, monkeypatch):
    """Committing copies the parts (a hard link, a server-side copy): the store's read primitive
    is never called, so no partition's bytes pass through the client."""
    calls = []
    original = type(backend.store)._get
    monkeypatch.setattr(type(backend.store), "_get", lambda self, key: calls.append(key) or original(self, key))
    pending = store_partitioned_release(source, release, open_parts_area(backend.store, PIPE, WHEN))
    assert calls == []
    assert len(pending.objects) == 21


def test_a_failing_task_leaves_nothing(backend, source, release, monkeypatch):
    """A task that fails after others wrote their parts: the area is removed, no version exists."""
    from privgraph.publish import release_parts

    real = release_parts.part_to_objects

    def failing(part):
        if part.index == 2:
            raise OSError("disk gone")
        return real(part)

    monkeypatch.setattr(release_parts, "part_to_objects", failing)
    with pytest.raises(OSError, match="disk gone"):
        store_partitioned_release(source, release, open_parts_area(backend.store, PIPE, WHEN))
    assert backend.raw_keys() == []
    assert backend.store.list_versions() == []


def test_a_failure_after_the_parts_are_written_leaves_nothing(backend, source, release):
    """The privatize stage's writer (parts_writer): every part written, then the block fails (a
    refusal, a crash before the commit): the area is removed, no version exists."""
    with pytest.raises(RuntimeError, match="after the parts"):
        with parts_writer(open_parts_area(backend.store, PIPE, WHEN)) as write_parts:
            parts = write_parts(source, release.directory)
            assert len(parts) == 4 * 5 and len(backend.raw_keys()) == 4 * 5
            raise RuntimeError("after the parts")
    assert backend.raw_keys() == []
    assert backend.store.list_versions() == []


def test_a_part_changed_after_its_checksum_fails_every_read(backend, source, release):
    pending = store_partitioned_release(source, release, open_parts_area(backend.store, PIPE, WHEN))
    version = pending.publish(make_manifest(PIPE, num_nodes=3000))
    backend.overwrite(f"{PIPE}/{version}/part-00001.features.npy", b"tampered")
    with pytest.raises(ArtifactIntegrityError, match="part-00001.features.npy"):
        backend.store.load_graph(PIPE, version)
    parts = backend.store.iter_parts(PIPE, version)
    next(parts)  # part 0 is intact
    with pytest.raises(ArtifactIntegrityError):
        next(parts)


def test_gc_removes_an_abandoned_parts_area(backend):
    """A run killed before its commit leaves a parts area; gc_staged removes it once old."""
    old = open_parts_area(backend.store, PIPE, WHEN - dt.timedelta(days=3))
    old.put("part-00000.nodes.npy", b"x")
    young = open_parts_area(backend.store, PIPE, backend.store._now())
    young.put("part-00000.nodes.npy", b"y")
    assert gc_staged(backend.store, dt.timedelta(days=1)) == [(PIPE, old.area)]
    assert [k.split("/")[1] for k in backend.raw_keys()] == [young.area]


@pytest.mark.dask
def test_same_version_on_two_dask_workers(source, release, tmp_path):
    from privgraph.storage import LocalStore
    from tasks.dask_executor import DaskExecutor

    serial = store_partitioned_release(source, release, open_parts_area(LocalStore(tmp_path / "a"), PIPE, WHEN))
    with DaskExecutor(n_workers=2, threads_per_worker=1) as ex:
        dask = store_partitioned_release(source, release, open_parts_area(LocalStore(tmp_path / "b"), PIPE, WHEN),
                                         executor=ex)
    assert dask.version == serial.version and dask.objects == serial.objects


def _part(i: int, nodes: list[int], edges: list[list[int]]) -> GraphPart:
    e = np.array(edges, dtype=np.int64).reshape(2, -1)
    return GraphPart(index=i, nodes=np.array(nodes, np.int64), fields={"y": np.array(nodes, np.int64)},
                     edges_public=e, edges_private=np.zeros((2, 0), np.int64))


def test_parts_that_do_not_fit_are_refused():
    ok = [_part(0, [0, 2], [[0], [1]]), _part(1, [1, 3], [[1], [3]])]
    g = assemble_parts(ok, 4)
    assert g.y.tolist() == [0, 1, 2, 3] and g.edges_public.tolist() == [[0, 1], [1, 3]]
    with pytest.raises(ArtifactError, match="not disjoint"):
        assemble_parts([_part(0, [0, 1], [[], []]), _part(1, [1, 3], [[], []])], 4)
    with pytest.raises(ArtifactError, match="cover 3 of 4"):
        assemble_parts([_part(0, [0, 1], [[], []]), _part(1, [3], [[], []])], 4)
    with pytest.raises(ArtifactError, match="smaller end is another part's"):
        assemble_parts([_part(0, [0, 2], [[1], [3]]), _part(1, [1, 3], [[], []])], 4)
    objects = {n: b for p in ok for n, b in part_to_objects(p).items()}
    objects[GRAPH_INFO] = partitioned_graph_info(4, 2, sorted(objects))
    assert objects_to_graph(objects).y.tolist() == [0, 1, 2, 3]
    info = json.loads(objects[GRAPH_INFO])
    assert info["format"] == "privgraph.graph/2" and read_graph_info(objects[GRAPH_INFO])["parts"] == 2
    for bad in ({**info, "format": "privgraph.graph/1"}, {k: v for k, v in info.items() if k != "parts"}):
        with pytest.raises(ArtifactError, match="not a 'privgraph.graph/1' or 'privgraph.graph/2' record"):
            read_graph_info(json.dumps(bad).encode())
    del objects["part-00001.edges.parquet"]
    with pytest.raises(ArtifactError, match="lacks 'part-00001.edges.parquet'"):
        objects_to_graph(objects)


@pytest.mark.dask
def test_dask_workers_write_their_parts_to_s3_themselves(source, release, moto_endpoint, s3_client, s3_bucket, monkeypatch):
    """On a LocalCluster against moto's S3 server: the area pickles to the workers, each makes
    its own S3 client and writes its partition's objects; the client process puts graph.json
    only and copies the parts server-side. The version equals the local serial one."""
    from privgraph.storage import LocalStore
    from privgraph.storage.s3 import S3Store
    from tasks.dask_executor import DaskExecutor

    for k, v in {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": "us-east-1"}.items():
        monkeypatch.setenv(k, v)  # the workers' processes inherit them
    store = S3Store(s3_bucket, "artifacts", endpoint_url=moto_endpoint)
    puts: list[str] = []
    original = S3Store._put_new
    monkeypatch.setattr(S3Store, "_put_new", lambda self, key, data: puts.append(key) or original(self, key, data))
    with DaskExecutor(n_workers=2, threads_per_worker=1) as ex:
        pending = store_partitioned_release(source, release, open_parts_area(store, PIPE, WHEN), executor=ex)
    assert [k.rsplit("/", 1)[1] for k in puts] == [GRAPH_INFO]
    serial = store_partitioned_release(source, release, open_parts_area(LocalStore(source.parent / "serial-store"), PIPE, WHEN))
    assert pending.version == serial.version and pending.objects == serial.objects
    keys = [o["Key"] for o in s3_client.list_objects_v2(Bucket=s3_bucket)["Contents"]]
    assert len(keys) == 21 and all(k.startswith(f"artifacts/{PIPE}/{pending.version}/") for k in keys)


def test_a_file_dropped_into_a_partitioned_version_fails_every_read(backend, source, release):
    """Issue 57 (5): ``part-00000.secret.npy`` dropped into a stored partitioned version (21
    objects): verify, streaming and loading refuse the version, naming the file."""
    pending = store_partitioned_release(source, release, open_parts_area(backend.store, PIPE, WHEN))
    version = pending.publish(make_manifest(PIPE, num_nodes=3000))
    backend.overwrite(f"{PIPE}/{version}/part-00000.secret.npy", b"\x93NUMPY not listed")
    says = f"{PIPE}/{version} holds 'part-00000.secret.npy', which its manifest does not list"
    with pytest.raises(ArtifactIntegrityError, match=says):
        backend.store.verify_version(PIPE, version)
    with pytest.raises(ArtifactIntegrityError, match=says):
        next(backend.store.iter_parts(PIPE, version))
    with pytest.raises(ArtifactIntegrityError, match=says):
        backend.store.load_graph(PIPE, version)
