"""The ArtifactStore contract: every backend (see conftest ``backend``) must pass all of it."""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import pickle

import numpy as np
import pytest

from privgraph.errors import ArtifactError, ArtifactExistsError, ArtifactIntegrityError
from privgraph.storage import (
    ArtifactNameError,
    PendingVersion,
    VersionInfo,
    graph_to_objects,
    objects_to_graph,
)
from privgraph.storage.manifest import manifest_bytes
from privgraph.storage.staging import gc_staged, put_version, stage_version

PIPE = "cora-feature-rr"


def _sorted_cols(e):
    return e[:, np.lexsort((e[1], e[0]))]


def test_empty_store(backend):
    assert backend.store.list_versions() == []
    assert backend.store.list_versions(PIPE) == []
    with pytest.raises(ArtifactError, match="list_versions"):
        backend.store.find_version("20240101T000000000000Z-0123456789ab")


def test_graph_round_trip(backend, graph, manifest):
    store = backend.store
    version = put_version(store, PIPE, graph_to_objects(graph), manifest)
    assert store.find_version(version) == (PIPE, version)
    objects = store.read_objects(PIPE, version)
    assert set(objects) == {"features.npy", "labels.npy", "edges.parquet", "splits.npz", "graph.json"}
    back = objects_to_graph(objects, num_nodes=store.read_manifest(PIPE, version)["num_nodes"])
    np.testing.assert_array_equal(back.x, graph.x)
    np.testing.assert_array_equal(back.y, graph.y)
    np.testing.assert_array_equal(_sorted_cols(back.edges_public), _sorted_cols(graph.edges_public))
    np.testing.assert_array_equal(_sorted_cols(back.edges_private), _sorted_cols(graph.edges_private))
    for m in ("train_mask", "val_mask", "test_mask"):
        np.testing.assert_array_equal(getattr(back, m), getattr(graph, m))
    assert back.keyed_digest(b"test-key-0123456789") == graph.replace(
        edges_public=_sorted_cols(graph.edges_public),
        edges_private=_sorted_cols(graph.edges_private),
    ).keyed_digest(b"test-key-0123456789")
    loaded, fingerprint = store.load_graph(PIPE, version)
    assert loaded.keyed_digest(b"test-key-0123456789") == back.keyed_digest(b"test-key-0123456789")
    assert fingerprint == manifest["public_input_fingerprint"]


def test_manifest_gets_version_created_and_checksums(backend, graph, manifest):
    store = backend.store
    objects = graph_to_objects(graph)
    version = put_version(store, PIPE, objects, manifest)
    stored = store.read_manifest(PIPE, version)
    assert stored["version"] == version
    assert stored["pipeline"] == PIPE
    assert stored["format"] == "privgraph.manifest/2"
    assert set(stored["objects"]) == set(objects)
    assert stored["objects"]["edges.parquet"]["size"] == len(objects["edges.parquet"])
    for key in manifest:
        assert stored[key] == json.loads(json.dumps(manifest[key]))
    created = dt.datetime.strptime(stored["created"], "%Y-%m-%dT%H:%M:%S.%fZ")
    assert version.startswith(created.strftime("%Y%m%dT%H%M%S%fZ-"))
    assert "objects" not in manifest and "version" not in manifest  # caller's dict untouched


def test_version_ids_are_time_plus_content_hash(backend, graph, manifest, monkeypatch):
    store = backend.store
    fixed = dt.datetime(2024, 1, 31, 12, 0, 0, 123456, tzinfo=dt.timezone.utc)
    monkeypatch.setattr(store, "_now", lambda: fixed)
    v1 = put_version(store, PIPE, graph_to_objects(graph), manifest)
    assert v1.startswith("20240131T120000123456Z-")
    # different content at the same instant: a different id
    v2 = put_version(store, PIPE, {"edges.parquet": b"other"}, manifest)
    assert v2.startswith("20240131T120000123456Z-") and v2 != v1
    # the same content in another pipeline: a different id
    manifest["pipeline"] = "other"
    v3 = put_version(store, "other", graph_to_objects(graph), manifest)
    assert v3 != v1


def test_list_versions(backend, graph, manifest_factory):
    store = backend.store
    a1 = put_version(store, "pipe-a", graph_to_objects(graph), manifest_factory("pipe-a"))
    a2 = put_version(store, "pipe-a", {"edges.parquet": b"x"}, manifest_factory("pipe-a", note="2"))
    b1 = put_version(store, "pipe-b", {"edges.parquet": b"y"}, manifest_factory("pipe-b"))
    infos = store.list_versions()
    assert [(i.pipeline, i.version) for i in infos] == [("pipe-a", a1), ("pipe-a", a2), ("pipe-b", b1)]
    assert [i.version for i in store.list_versions("pipe-a")] == [a1, a2]
    assert store.latest_version("pipe-a").version == a2
    info = infos[0]
    assert isinstance(info, VersionInfo)
    assert info.code_version == "test" and info.public_input_fingerprint == "0" * 64
    assert info.num_objects == 5 and info.total_bytes > 0 and info.validation_success is True
    assert info.epsilon_summary == "features 1"
    assert info.to_dict()["epsilon_summary"] == "features 1"
    assert info.created.endswith("Z")
    assert store.find_version(b1) == ("pipe-b", b1)


def test_a_version_without_manifest_does_not_exist(backend, graph, manifest):
    store = backend.store
    version = put_version(store, PIPE, {"edges.parquet": b"e"}, manifest)
    # a half-written version: data objects but no manifest.json
    ghost = "20240101T000000000000Z-0123456789ab"
    backend.overwrite(f"{PIPE}/{ghost}/edges.parquet", b"partial")
    assert [i.version for i in store.list_versions()] == [version]
    assert [i.version for i in store.list_versions(PIPE)] == [version]
    with pytest.raises(ArtifactError, match="list_versions"):
        store.find_version(ghost)
    with pytest.raises(ArtifactError, match="no version"):
        store.read_manifest(PIPE, ghost)
    with pytest.raises(ArtifactError, match="no version"):
        store.read_object(PIPE, ghost, "edges.parquet")


def test_never_overwrite_same_version_id(backend, graph, manifest, monkeypatch):
    store = backend.store
    fixed = dt.datetime(2024, 1, 31, 12, 0, 0, tzinfo=dt.timezone.utc)
    monkeypatch.setattr(store, "_now", lambda: fixed)  # same time + same content = same id
    objects = graph_to_objects(graph)
    version = put_version(store, PIPE, objects, manifest)
    before = {k: store.read_object(PIPE, version, k) for k in objects}
    keys_before = backend.raw_keys()
    with pytest.raises(ArtifactExistsError, match="immutable"):
        put_version(store, PIPE, objects, manifest)
    assert backend.raw_keys() == keys_before
    assert {k: store.read_object(PIPE, version, k) for k in objects} == before


def test_never_overwrite_via_the_id_function(backend, manifest, monkeypatch):
    store = backend.store
    fixed_id = "20240131T120000000000Z-aaaaaaaaaaaa"
    monkeypatch.setattr(store, "_make_version_id", lambda *args: fixed_id)
    assert put_version(store, PIPE, {"edges.parquet": b"first"}, manifest) == fixed_id
    with pytest.raises(ArtifactExistsError):
        put_version(store, PIPE, {"edges.parquet": b"second"}, manifest)
    assert backend.raw_keys() == [f"{PIPE}/{fixed_id}/edges.parquet", f"{PIPE}/{fixed_id}/manifest.json"]
    with pytest.raises(ArtifactIntegrityError):  # the forged id does not match the content hash
        store.read_manifest(PIPE, fixed_id)
    assert backend.raw_keys()[0].endswith("edges.parquet")


def test_put_new_refuses_existing_data_object(backend, manifest, monkeypatch):
    """Leftover data objects of a crashed write under the same id are not overwritten either."""
    store = backend.store
    fixed_id = "20240131T120000000000Z-bbbbbbbbbbbb"
    monkeypatch.setattr(store, "_make_version_id", lambda *args: fixed_id)
    backend.overwrite(f"{PIPE}/{fixed_id}/edges.parquet", b"leftover")
    with pytest.raises(ArtifactExistsError):
        put_version(store, PIPE, {"edges.parquet": b"new", "features.npy": b"f"}, manifest)
    assert backend.raw_keys() == [f"{PIPE}/{fixed_id}/edges.parquet"]


def test_failed_manifest_write_leaves_no_version(backend, graph, manifest, monkeypatch):
    store = backend.store
    real_put = store._put_new

    def failing_put(key, data):
        if key.endswith("/manifest.json"):
            raise OSError("disk full while writing the manifest")
        real_put(key, data)

    monkeypatch.setattr(store, "_put_new", failing_put)
    with pytest.raises(OSError, match="disk full"):
        put_version(store, PIPE, graph_to_objects(graph), manifest)
    assert store.list_versions() == []
    assert not any(k.endswith("manifest.json") for k in backend.raw_keys())
    assert backend.raw_keys() == []  # the data objects written first were cleaned up
    monkeypatch.undo()
    version = put_version(store, PIPE, graph_to_objects(graph), manifest)  # a retry works
    assert store.find_version(version) == (PIPE, version)


def test_failed_data_write_leaves_no_version(backend, graph, manifest, monkeypatch):
    store = backend.store
    real_put = store._put_new
    calls = []

    def failing_put(key, data):
        calls.append(key)
        if len(calls) == 2:
            raise OSError("connection reset")
        real_put(key, data)

    monkeypatch.setattr(store, "_put_new", failing_put)
    with pytest.raises(OSError):
        put_version(store, PIPE, graph_to_objects(graph), manifest)
    assert backend.raw_keys() == []
    version = calls[0].split("/")[1]
    with pytest.raises(ArtifactError):
        store.find_version(version)


def test_corrupt_object_is_detected(backend, graph, manifest):
    store = backend.store
    version = put_version(store, PIPE, graph_to_objects(graph), manifest)
    key = f"{PIPE}/{version}/features.npy"
    good = store.read_object(PIPE, version, "features.npy")
    backend.overwrite(key, good[:-1] + bytes([good[-1] ^ 1]))
    with pytest.raises(ArtifactIntegrityError, match="features.npy.*corrupt"):
        store.read_object(PIPE, version, "features.npy")
    with pytest.raises(ArtifactIntegrityError):
        store.read_objects(PIPE, version)
    store.read_object(PIPE, version, "labels.npy")  # the other objects are fine


def test_missing_object_is_detected(backend, graph, manifest):
    store = backend.store
    version = put_version(store, PIPE, graph_to_objects(graph), manifest)
    backend.delete(f"{PIPE}/{version}/labels.npy")
    with pytest.raises(ArtifactIntegrityError, match="missing"):
        store.read_object(PIPE, version, "labels.npy")


def test_swapped_object_with_edited_checksum_is_detected(backend, graph, manifest):
    """Replacing an object AND its checksum in the manifest breaks the id's content hash."""
    store = backend.store
    version = put_version(store, PIPE, graph_to_objects(graph), manifest)
    key = f"{PIPE}/{version}/manifest.json"
    stored = store.read_manifest(PIPE, version)
    fake = b"swapped"
    backend.overwrite(f"{PIPE}/{version}/features.npy", fake)
    stored["objects"]["features.npy"] = {"sha256": hashlib.sha256(fake).hexdigest(), "size": len(fake)}
    backend.overwrite(key, manifest_bytes(stored))  # as the store writes it: only the content hash can tell
    with pytest.raises(ArtifactIntegrityError, match="content hash"):
        store.read_manifest(PIPE, version)
    with pytest.raises(ArtifactIntegrityError):
        store.read_object(PIPE, version, "features.npy")
    backend.overwrite(key, b"{not json")
    with pytest.raises(ArtifactIntegrityError, match="JSON"):
        store.read_manifest(PIPE, version)


def test_unknown_object(backend, manifest):
    version = put_version(backend.store, PIPE, {"edges.parquet": b"e"}, manifest)
    with pytest.raises(ArtifactError, match="no object 'labels.npy'.*edges.parquet"):
        backend.store.read_object(PIPE, version, "labels.npy")


@pytest.mark.parametrize(
    "bad",
    [
        {"seed": 1},
        {"mechanisms": [{"name": "feature_rr", "params": {"random_seed": 1}}]},
        {"run": {"SeedSequence": [1, 2]}},
        {"validation": {"success": True, "checks": [{"rng": {"seed_entropy": 7}}]}},
    ],
)
def test_manifest_with_a_seed_is_refused_and_nothing_written(backend, manifest, bad):
    manifest.update(bad)
    with pytest.raises(ArtifactError, match="manifests never hold seeds") as info:
        put_version(backend.store, PIPE, {"edges.parquet": b"e"}, manifest)
    assert "seed" in str(info.value).split("found key")[1].lower()
    assert backend.raw_keys() == []
    assert backend.store.list_versions() == []


def test_seed_key_path_is_named(backend, manifest):
    manifest["mechanisms"] = [{"name": "a"}, {"params": {"random_seed": 1}}]
    with pytest.raises(ArtifactError, match=r"mechanisms\[1\]\.params\.random_seed"):
        put_version(backend.store, PIPE, {"edges.parquet": b"e"}, manifest)


@pytest.mark.parametrize(
    "pipeline",
    ["", "Cora", "a/b", "..", "a..b", "../etc", ".hidden", "-x", "a b", "ä", "x" * 129, 3],
)
def test_bad_pipeline_names_are_refused(backend, manifest_factory, pipeline):
    with pytest.raises(ArtifactNameError, match="pipeline"):
        put_version(backend.store, pipeline, {"edges.parquet": b"e"}, manifest_factory("ok"))
    assert backend.raw_keys() == []


@pytest.mark.parametrize("name", ["a/b.npy", "../x", "Features.npy", ".x", "", "manifest.json"])
def test_bad_object_names_are_refused(backend, manifest, name):
    with pytest.raises(ArtifactNameError):
        put_version(backend.store, PIPE, {name: b"e"}, manifest)
    assert backend.raw_keys() == []


def test_manifest_pipeline_must_match(backend, manifest_factory):
    with pytest.raises(ArtifactError, match="other"):
        put_version(backend.store, PIPE, {"edges.parquet": b"e"}, manifest_factory("other"))
    assert backend.raw_keys() == []


@pytest.mark.parametrize("version", ["latest", "../x", "20240101T000000000000Z-XYZ"])
def test_bad_version_ids_are_refused(backend, version):
    with pytest.raises(ArtifactNameError, match="version id"):
        backend.store.read_manifest(PIPE, version)
    with pytest.raises(ArtifactNameError):
        backend.store.find_version(version)


def test_objects_must_be_bytes(backend, manifest):
    with pytest.raises(TypeError, match="bytes"):
        put_version(backend.store, PIPE, {"edges.parquet": "text"}, manifest)


# -- staging: write the objects, measure them, publish the manifest last --------------------------
def test_stage_then_publish(backend, graph, manifest):
    store = backend.store
    pending = stage_version(store, PIPE, graph_to_objects(graph))
    assert isinstance(pending, PendingVersion) and pending.pipeline == PIPE
    assert not pending.published
    # staged: invisible to readers, but the flow can measure it
    assert store.list_versions() == []
    with pytest.raises(ArtifactError):
        store.find_version(pending.version)
    with pytest.raises(ArtifactError):
        store.load_graph(PIPE, pending.version)
    staged_graph, fingerprint = store.load_graph(PIPE, pending.version, staged=True)
    assert fingerprint is None
    np.testing.assert_array_equal(staged_graph.x, graph.x)
    assert staged_graph.num_nodes == graph.num_nodes

    assert pending.publish(manifest) == pending.version
    assert pending.published
    assert store.find_version(pending.version) == (PIPE, pending.version)
    assert store.read_manifest(PIPE, pending.version)["created"] == pending.created
    assert store.load_graph(PIPE, pending.version, staged=True)[1] == manifest["public_input_fingerprint"]


def test_publish_is_idempotent_but_immutable(backend, manifest, manifest_factory):
    pending = stage_version(backend.store, PIPE, {"edges.parquet": b"e"})
    version = pending.publish(manifest)
    assert pending.publish(manifest) == version  # a retried publish
    with pytest.raises(ArtifactExistsError, match="another manifest"):
        pending.publish(manifest_factory(PIPE, note="changed"))
    pending.abort()  # a no-op once published
    assert backend.store.read_object(PIPE, version, "edges.parquet") == b"e"


def test_abort_removes_the_staged_objects(backend, graph):
    pending = stage_version(backend.store, PIPE, graph_to_objects(graph))
    assert backend.raw_keys()
    pending.abort()
    assert backend.raw_keys() == []
    with pytest.raises(ArtifactError):
        backend.store.load_graph(PIPE, pending.version, staged=True)


def test_publishing_a_bad_manifest_writes_no_manifest(backend, manifest):
    pending = stage_version(backend.store, PIPE, {"edges.parquet": b"e"})
    manifest["mechanisms"] = [{"params": {"seed": 3}}]
    with pytest.raises(ArtifactError, match="never hold seeds"):
        pending.publish(manifest)
    assert not pending.published
    pending.abort()
    assert backend.raw_keys() == []


def test_pending_version_pickles(backend, manifest):
    pending = stage_version(backend.store, PIPE, {"edges.parquet": b"e"})
    copy = pickle.loads(pickle.dumps(pending))
    if backend.name == "s3":  # the copy makes its own client; point it at the test endpoint
        copy.store._client = backend.store._client
    assert copy.version == pending.version
    assert copy.publish(manifest) == pending.version
    assert pending.published


def test_a_retried_staging_resumes_the_same_version_id(backend, graph, manifest):
    """An interrupted staging, retried with the same time, completes under ONE id (no orphan)."""
    objects = graph_to_objects(graph)
    created = dt.datetime(2026, 11, 24, 3, 0, tzinfo=dt.timezone.utc)
    # what a failed attempt leaves (its cleanup failed too): the first object only
    full = stage_version(backend.store, PIPE, objects, created=created)
    for name in sorted(objects)[1:]:
        backend.store._delete(backend.store._key(PIPE, full.version, name))
    retried = stage_version(backend.store, PIPE, objects, created=created)
    assert retried.version == full.version
    assert retried.publish(manifest) == full.version
    assert {k.split("/")[-2] for k in backend.raw_keys()} == {full.version}
    assert backend.store.verify_version(PIPE, full.version)["objects"] == len(objects)


def test_resuming_refuses_other_bytes_under_the_same_name(backend):
    created = dt.datetime(2026, 11, 24, 3, 0, tzinfo=dt.timezone.utc)
    pending = stage_version(backend.store, PIPE, {"edges.parquet": b"e"}, created=created)
    backend.store._delete(backend.store._key(PIPE, pending.version, "edges.parquet"))
    backend.store._put_new(backend.store._key(PIPE, pending.version, "edges.parquet"), b"other")
    with pytest.raises(ArtifactExistsError):
        stage_version(backend.store, PIPE, {"edges.parquet": b"e"}, created=created)
    with pytest.raises(TypeError, match="timezone-aware"):
        stage_version(backend.store, PIPE, {"edges.parquet": b"e"}, created=dt.datetime(2026, 1, 1))


def test_verify_version_finds_a_corrupt_object(backend, graph, manifest):
    version = put_version(backend.store, PIPE, graph_to_objects(graph), manifest)
    info = backend.store.verify_version(PIPE, version)
    assert info["objects"] == len(graph_to_objects(graph)) and info["bytes"] > 0
    name = sorted(graph_to_objects(graph))[0]
    key = backend.store._key(PIPE, version, name)
    backend.store._delete(key)
    backend.store._put_new(key, b"tampered")
    with pytest.raises(ArtifactIntegrityError, match="corrupt"):
        backend.store.verify_version(PIPE, version)


def test_gc_removes_old_staged_versions_only(backend, graph, manifest, monkeypatch):
    old = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)
    leftover = stage_version(backend.store, PIPE, {"edges.parquet": b"killed"}, created=old)
    published = put_version(backend.store, PIPE, {"edges.parquet": b"kept"}, manifest)
    fresh = stage_version(backend.store, PIPE, {"edges.parquet": b"in flight"})
    assert gc_staged(backend.store, dt.timedelta(hours=1), dry_run=True) == [(PIPE, leftover.version)]
    assert len(backend.raw_keys()) == 4  # a dry run removes nothing
    assert gc_staged(backend.store, dt.timedelta(hours=1)) == [(PIPE, leftover.version)]
    assert {k.split("/")[-2] for k in backend.raw_keys()} == {published, fresh.version}
    assert backend.store.read_objects(PIPE, published) == {"edges.parquet": b"kept"}
    with pytest.raises(ValueError, match="min_age"):
        gc_staged(backend.store, dt.timedelta(hours=-1))


def test_one_broken_manifest_does_not_hide_the_others(backend, manifest, manifest_factory):
    good = put_version(backend.store, PIPE, {"edges.parquet": b"a"}, manifest)
    bad = put_version(backend.store, PIPE, {"edges.parquet": b"b"}, manifest_factory(PIPE, note="x"))
    key = backend.store._key(PIPE, bad, "manifest.json")
    backend.store._delete(key)
    backend.store._put_new(key, b"{not json")
    broken: list[str] = []
    assert [i.version for i in backend.store.list_versions(broken=broken)] == [good]
    assert len(broken) == 1 and bad in broken[0]


@pytest.mark.parametrize("dropped", ["part-00000.secret.npy", ".tmp-hidden", "nested/secret.npy"])
def test_a_file_the_manifest_does_not_list_fails_every_read(backend, graph, manifest, dropped):
    """Issue 57 (5): anything stored under a published version but its manifest and the objects
    it lists travels with every copy of the version: each reader of the version refuses it in
    one line naming it; a staged version (no manifest yet) is not judged, and the version reads
    again once the file is gone."""
    store = backend.store
    version = put_version(store, PIPE, graph_to_objects(graph), manifest)
    staged = stage_version(store, "staged", graph_to_objects(graph))
    for where in (f"{PIPE}/{version}", f"staged/{staged.version}"):
        backend.overwrite(f"{where}/{dropped}", b"not part of the release")
    shown = dropped if backend.name == "s3" else dropped.split("/")[0]  # a local folder as 'nested/'
    readers = {"read_manifest": lambda: store.read_manifest(PIPE, version),
               "read_objects": lambda: store.read_objects(PIPE, version),
               "verify_version": lambda: store.verify_version(PIPE, version),
               "load_graph": lambda: store.load_graph(PIPE, version)}
    for what, read in readers.items():
        with pytest.raises(ArtifactIntegrityError, match="which its manifest does not list") as exc:
            read()
        message = str(exc.value)
        assert f"{PIPE}/{version} holds '{shown}" in message and "\n" not in message, (what, message)
    assert store.read_object(PIPE, version, "graph.json")  # one listed object: no listing per read
    assert store.load_graph("staged", staged.version, staged=True)[0].num_nodes == graph.num_nodes
    backend.delete(f"{PIPE}/{version}/{dropped}")
    if backend.name == "local" and "/" in dropped:
        (store.root / PIPE / version / "nested").rmdir()  # an empty folder is refused too
    assert store.verify_version(PIPE, version)["objects"] == len(graph_to_objects(graph))


def test_an_unlisted_key_shaped_as_a_uri_is_named_redacted(s3_client, s3_bucket, manifest):
    """An S3 key may hold '://' (a local file name cannot): its userinfo and query are not shown."""
    from tests.storage.conftest import _s3_backend

    backend = _s3_backend(s3_client, s3_bucket)
    version = put_version(backend.store, PIPE, {"edges.parquet": b"e"}, manifest)
    backend.overwrite(f"{PIPE}/{version}/https://user:secret@host/x?token=t", b"x")
    with pytest.raises(ArtifactIntegrityError, match="which its manifest does not list") as exc:
        backend.store.verify_version(PIPE, version)
    assert "secret" not in str(exc.value) and "token" not in str(exc.value) and "'https://host/x'" in str(exc.value)
