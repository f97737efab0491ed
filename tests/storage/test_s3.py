"""S3Store specifics, against moto's standalone S3 server on 127.0.0.1 (see conftest).

The shared behaviour runs in ``test_contract.py`` with ``backend="s3"``.
"""

from __future__ import annotations

import pytest

from privgraph.errors import ArtifactError, ArtifactExistsError
from privgraph.storage import open_store

pytest.importorskip("boto3")
pytest.importorskip("moto")

from privgraph.storage.s3 import S3Store  # noqa: E402
from privgraph.storage.staging import put_version

PIPE = "cora-feature-rr"


def test_conditional_put_is_enforced_by_the_server(s3_client, s3_bucket):
    """Bypass the base class's existence check: the If-None-Match put alone refuses."""
    store = S3Store(s3_bucket, "p", client=s3_client)
    store._put_new("x/y/a.bin", b"one")
    with pytest.raises(ArtifactExistsError, match="never overwritten"):
        store._put_new("x/y/a.bin", b"two")
    body = s3_client.get_object(Bucket=s3_bucket, Key="p/x/y/a.bin")["Body"].read()
    assert body == b"one"


def test_keys_live_under_the_prefix(s3_client, s3_bucket, manifest):
    store = S3Store(s3_bucket, "/team/artifacts/", client=s3_client)
    assert store.prefix == "team/artifacts"
    version = put_version(store, PIPE, {"edges.parquet": b"e"}, manifest)
    keys = sorted(o["Key"] for o in s3_client.list_objects_v2(Bucket=s3_bucket)["Contents"])
    assert keys == [
        f"team/artifacts/{PIPE}/{version}/edges.parquet",
        f"team/artifacts/{PIPE}/{version}/manifest.json",
    ]
    # another prefix in the same bucket is another store
    assert S3Store(s3_bucket, "elsewhere", client=s3_client).list_versions() == []
    assert S3Store(s3_bucket, "team/artifacts", client=s3_client).find_version(version) == (PIPE, version)


def test_no_prefix(s3_client, s3_bucket, manifest):
    store = S3Store(s3_bucket, client=s3_client)
    version = put_version(store, PIPE, {"edges.parquet": b"e"}, manifest)
    assert store.read_object(PIPE, version, "edges.parquet") == b"e"
    assert [i.version for i in store.list_versions()] == [version]


def test_open_store_s3_uri(moto_endpoint, s3_bucket, manifest, monkeypatch):
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    store = open_store(f"s3://{s3_bucket}/runs", endpoint_url=moto_endpoint)
    assert isinstance(store, S3Store)
    assert (store.bucket, store.prefix) == (s3_bucket, "runs")
    assert repr(store) == f"S3Store('s3://{s3_bucket}/runs', endpoint_url={moto_endpoint!r})"
    version = put_version(store, PIPE, {"edges.parquet": b"e"}, manifest)
    assert store.read_object(PIPE, version, "edges.parquet") == b"e"


def test_missing_bucket(s3_client):
    store = S3Store("privgraph-no-such-bucket", "p", client=s3_client)
    with pytest.raises(ArtifactError, match="does not exist"):
        store.list_versions()


@pytest.mark.parametrize("prefix", ["a/../b", "./x"])
def test_bad_prefix(s3_client, prefix):
    with pytest.raises(ValueError, match="prefix"):
        S3Store("bucket", prefix, client=s3_client)
