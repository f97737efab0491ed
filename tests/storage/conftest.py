"""Fixtures of the artifact-store tests: one harness per backend (LocalStore, S3Store on moto).

The contract tests (``test_contract.py``) take the parametrised ``backend`` fixture and so run
unchanged against every backend. The S3 backend talks to moto's standalone server on 127.0.0.1
(a real HTTP S3 endpoint), started once per session on a free port.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from privgraph.guarantee.ledger import LedgerEntry, PrivacyLedger
from privgraph.graph import GraphData
from privgraph.guarantee import Guarantee, GuaranteeKind, Scope
from privgraph.storage import ArtifactStore, LocalStore


@dataclasses.dataclass
class Backend:
    """A store plus raw access to its objects, for simulating damage and inspecting writes."""

    name: str
    store: ArtifactStore
    raw_keys: Callable[[], list[str]]  # every stored key (relative to the store), sorted
    overwrite: Callable[[str, bytes], None]  # replace the bytes at a key, bypassing the store
    delete: Callable[[str], None]  # remove a key, bypassing the store


def _local_backend(root: Path) -> Backend:
    store = LocalStore(root)

    def raw_keys() -> list[str]:
        if not root.exists():
            return []
        return sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file())

    def overwrite(key: str, data: bytes) -> None:
        path = root / key
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)

    return Backend("local", store, raw_keys, overwrite, lambda key: (root / key).unlink())


@pytest.fixture(scope="session")
def s3_client(moto_endpoint):
    import boto3

    return boto3.client(
        "s3",
        endpoint_url=moto_endpoint,
        region_name="us-east-1",
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
    )


_bucket_ids = itertools.count()


@pytest.fixture
def s3_bucket(s3_client):
    """A fresh, empty bucket per test."""
    name = f"privgraph-test-{next(_bucket_ids)}"
    s3_client.create_bucket(Bucket=name)
    return name


def _s3_backend(client: Any, bucket: str, prefix: str = "artifacts") -> Backend:
    from privgraph.storage.s3 import S3Store

    store = S3Store(bucket, prefix, client=client)
    lead = f"{prefix}/"

    def raw_keys() -> list[str]:
        keys: list[str] = []
        for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=lead):
            keys += [o["Key"][len(lead):] for o in page.get("Contents", [])]
        return sorted(keys)

    def overwrite(key: str, data: bytes) -> None:
        client.put_object(Bucket=bucket, Key=lead + key, Body=data)

    def delete(key: str) -> None:
        client.delete_object(Bucket=bucket, Key=lead + key)

    return Backend("s3", store, raw_keys, overwrite, delete)


@pytest.fixture(params=["local", "s3"])
def backend(request, tmp_path) -> Backend:
    if request.param == "local":
        return _local_backend(tmp_path / "store")
    client = request.getfixturevalue("s3_client")
    bucket = request.getfixturevalue("s3_bucket")
    return _s3_backend(client, bucket)


# -- sample content ------------------------------------------------------------------------------
@pytest.fixture
def graph() -> GraphData:
    """A 6-node attributed graph with public and (already privatized) private edges."""
    x = np.arange(12, dtype=np.float32).reshape(6, 2) / 12
    y = np.array([0, 1, 0, 1, 2, 2])
    train = np.array([1, 1, 0, 0, 0, 0], bool)
    return GraphData(
        num_nodes=6,
        x=x,
        y=y,
        edges_public=np.array([[0, 1, 2], [1, 2, 3]]),
        edges_private=np.array([[3, 0, 4], [5, 5, 5]]),
        train_mask=train,
        val_mask=np.roll(train, 2),
        test_mask=np.roll(train, 4),
    )


def make_manifest(pipeline: str = "cora-feature-rr", **extra: Any) -> dict[str, Any]:
    ledger = PrivacyLedger([
        LedgerEntry(
            "privatize_features", "feature_rr",
            Guarantee(GuaranteeKind.FEATURE_LDP, 1.0, Scope.FEATURES),
            partitions=(0, 1), params={"bins": 4},
        )
    ])
    manifest = {
        "pipeline": pipeline,
        "ledger": ledger.to_dict(),
        "mechanisms": [{"name": "feature_rr", "params": {"epsilon": 1.0, "bins": 4}}],
        "public_input_fingerprint": "0" * 64,
        "public": {"edges_public": {"what": "the public edges", "declared_by": "test"}},
        "code_version": "test",
        "validation": {"success": True},
        "num_nodes": 6,
    }
    manifest.update(extra)
    return manifest


@pytest.fixture
def manifest() -> dict[str, Any]:
    return make_manifest()


@pytest.fixture
def manifest_factory() -> Callable[..., dict[str, Any]]:
    """``manifest_factory(pipeline="...", **extra)`` -> a valid manifest."""
    return make_manifest
