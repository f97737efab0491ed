"""Tamper evidence (issue 10): a published manifest is sealed under the owner's Ed25519 key.

An edited ledger (epsilon 1 -> 0.01), a stripped seal, a manifest re-signed by another key, a
malformed seal: each is caught by every reader, on every backend. The owner's keys are files of
mode 0600, one per owner, agreed on by concurrent runs.
"""

from __future__ import annotations

import json
import stat

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from privgraph.errors import ArtifactError, ArtifactIntegrityError, ArtifactTamperedError
from privgraph.storage import graph_to_objects
from privgraph.storage.manifest import manifest_bytes
from privgraph.storage.private_record import owner_public_key, owner_signing_key, owner_signing_key_path
from privgraph.storage.seal import check_seal, public_key_hex, seal_manifest, sealed_payload
from privgraph.storage.staging import put_version, stage_version

PIPE = "cora-feature-rr"


@pytest.fixture
def key(tmp_path, monkeypatch):
    monkeypatch.delenv("PRIVGRAPH_HOME", raising=False)
    return owner_signing_key(tmp_path / "private")


def _stored(backend, version):
    return json.loads(backend.store._get(backend.store._key(PIPE, version, "manifest.json")))


def _rewrite(backend, version, manifest):
    """The manifest written back as the store writes one: only the seal can tell an edit."""
    backend.overwrite(f"{PIPE}/{version}/manifest.json", manifest_bytes(manifest))


def test_a_sealed_version_verifies_under_its_owner(backend, graph, manifest, key):
    version = put_version(backend.store, PIPE, graph_to_objects(graph), manifest, signing_key=key)
    stored = _stored(backend, version)
    assert stored["seal"]["algorithm"] == "ed25519" and stored["seal"]["public_key"] == public_key_hex(key)
    info = backend.store.verify_version(PIPE, version, trusted=[public_key_hex(key)], sealed=True)
    assert info["signer"] == public_key_hex(key)
    assert backend.store.load_graph(PIPE, version)[0].num_nodes == graph.num_nodes


def test_an_edited_epsilon_fails_every_read(backend, graph, manifest, key):
    version = put_version(backend.store, PIPE, graph_to_objects(graph), manifest, signing_key=key)
    edited = _stored(backend, version)
    edited["ledger"]["entries"][0]["guarantee"]["epsilon"] /= 100  # 1 -> 0.01: looks more private
    _rewrite(backend, version, edited)
    for read in (
        lambda: backend.store.read_manifest(PIPE, version),
        lambda: backend.store.verify_version(PIPE, version),
        lambda: backend.store.load_graph(PIPE, version),
        lambda: backend.store.read_object(PIPE, version, "edges.parquet"),
    ):
        with pytest.raises(ArtifactTamperedError, match="changed after the owner signed it"):
            read()
    # the seal covers the JSON, not the layout; but the bytes must be those the store writes
    # (issue 42): reformatted (whitespace, key order), the same content is refused by every read
    original = _stored(backend, version)
    original["ledger"]["entries"][0]["guarantee"]["epsilon"] *= 100
    _rewrite(backend, version, original)
    backend.store.verify_version(PIPE, version, trusted=[public_key_hex(key)], sealed=True)
    backend.overwrite(f"{PIPE}/{version}/manifest.json", (json.dumps(original, indent=1) + "\n").encode())
    for read in (lambda: backend.store.read_manifest(PIPE, version), lambda: backend.store.verify_version(PIPE, version)):
        with pytest.raises(ArtifactIntegrityError, match="not the bytes privgraph writes") as exc:
            read()
        assert not isinstance(exc.value, ArtifactTamperedError)


def test_a_stripped_seal_or_another_signer_is_refused(backend, graph, manifest, key):
    version = put_version(backend.store, PIPE, graph_to_objects(graph), manifest, signing_key=key)
    owner = [public_key_hex(key)]
    stripped = _stored(backend, version)
    del stripped["seal"]
    _rewrite(backend, version, stripped)
    backend.store.read_manifest(PIPE, version)  # readable as an unsealed (pre-seal) manifest...
    with pytest.raises(ArtifactIntegrityError, match="not sealed"):
        backend.store.verify_version(PIPE, version, sealed=True)  # ...but never verified
    with pytest.raises(ArtifactIntegrityError, match="not sealed"):
        backend.store.verify_version(PIPE, version, trusted=owner)
    # an attacker edits, then re-signs with a key of their own: valid signature, wrong signer
    forged = stripped
    forged["ledger"]["entries"][0]["guarantee"]["epsilon"] /= 100
    _rewrite(backend, version, seal_manifest(forged, Ed25519PrivateKey.generate()))
    backend.store.verify_version(PIPE, version, sealed=True)  # no trusted key: proves no edit only
    with pytest.raises(ArtifactTamperedError, match="not by a trusted key"):
        backend.store.verify_version(PIPE, version, trusted=owner, sealed=True)


@pytest.mark.parametrize("seal", [
    "x", {"algorithm": "hmac", "public_key": "0" * 64, "signature": "0" * 128},
    {"algorithm": "ed25519", "public_key": "zz" * 32, "signature": "0" * 128},
    {"algorithm": "ed25519", "public_key": "0" * 64, "signature": "0" * 127},
])
def test_a_malformed_seal_is_refused(seal, manifest):
    m = {**manifest, "seal": seal}
    with pytest.raises(ArtifactTamperedError, match="malformed seal"):
        check_seal(m, "p/v")


def test_sealing_is_deterministic_so_a_retried_publish_is_idempotent(backend, graph, manifest, key):
    pending = stage_version(backend.store, PIPE, graph_to_objects(graph))
    version = pending.publish(manifest, signing_key=key)
    assert pending.publish(manifest, signing_key=key) == version  # same bytes: a lost reply retried
    with pytest.raises(ArtifactError, match="another manifest"):
        pending.publish(manifest, signing_key=Ed25519PrivateKey.generate())


def test_the_seal_is_set_by_the_store_only(backend, graph, manifest):
    with pytest.raises(ArtifactError, match="set by the store"):
        put_version(backend.store, PIPE, graph_to_objects(graph), {**manifest, "seal": {}})


def test_the_signature_covers_everything_but_itself(manifest, key):
    sealed = seal_manifest(manifest, key)
    assert json.loads(sealed_payload(sealed)) == json.loads(sealed_payload(manifest))
    for field in ("pipeline", "code_version", "mechanisms"):
        changed = {**sealed, field: "other"}
        with pytest.raises(ArtifactTamperedError):
            check_seal(changed, "p/v")


def test_the_owner_signing_key_is_private_and_stable(tmp_path, monkeypatch):
    monkeypatch.delenv("PRIVGRAPH_HOME", raising=False)
    d = tmp_path / "private"
    assert owner_public_key(d) is None and not owner_signing_key_path(d).exists()  # asking creates nothing
    k1, k2 = owner_signing_key(d), owner_signing_key(d)
    assert public_key_hex(k1) == public_key_hex(k2) == owner_public_key(d)
    path = owner_signing_key_path(d)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600 and stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert path.parent == d / "keys" and len(path.read_bytes()) == 32
    monkeypatch.setenv("PRIVGRAPH_HOME", str(tmp_path / "home"))
    assert owner_signing_key_path(d) == tmp_path / "home" / "keys" / "manifest-ed25519.key"
    path.write_bytes(b"short")
    monkeypatch.delenv("PRIVGRAPH_HOME")
    with pytest.raises(ValueError, match="must hold 32 bytes"):
        owner_signing_key(d)
