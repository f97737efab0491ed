"""LocalStore specifics: directory layout, atomic hard-link writes, hidden temp files, open_store.

The behaviour every backend shares (round trip, listing, immutability, atomicity of a version,
checksums, seed refusal, names) is in ``test_contract.py``, which runs against LocalStore too.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

import privgraph.storage.local as local_mod
from privgraph.errors import ArtifactError, ArtifactExistsError, ArtifactIntegrityError
from privgraph.storage import LocalStore, graph_to_objects, open_store
from privgraph.storage.staging import put_version, stage_version

PIPE = "cora-feature-rr"


def _files(root: Path) -> list[str]:
    return sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file())


def test_layout_on_disk(tmp_path, graph, manifest):
    root = tmp_path / "store"
    store = LocalStore(root)
    assert not root.exists()  # created on the first write, not before
    assert store.list_versions() == []
    version = put_version(store, PIPE, graph_to_objects(graph), manifest)
    assert _files(root) == [
        f"{PIPE}/{version}/{n}"
        for n in ("edges.parquet", "features.npy", "graph.json", "labels.npy", "manifest.json",
                  "splits.npz")
    ]
    mode = stat.S_IMODE((root / PIPE / version / "manifest.json").stat().st_mode)
    assert mode & stat.S_IRUSR and not mode & stat.S_IWOTH
    assert repr(store) == f"LocalStore({str(root)!r})"


def test_put_new_never_overwrites_and_leaves_no_temp_file(tmp_path):
    store = LocalStore(tmp_path)
    store._put_new("p/v/a.bin", b"one")
    with pytest.raises(ArtifactExistsError, match="never overwritten"):
        store._put_new("p/v/a.bin", b"two")
    assert (tmp_path / "p/v/a.bin").read_bytes() == b"one"
    assert _files(tmp_path) == ["p/v/a.bin"]


def test_link_failure_on_manifest_leaves_no_manifest_and_no_temp(tmp_path, graph, manifest, monkeypatch):
    real_link = os.link

    def link(src, dst, *args, **kwargs):
        if str(dst).endswith("manifest.json"):
            raise OSError("simulated crash before the manifest became visible")
        return real_link(src, dst, *args, **kwargs)

    monkeypatch.setattr(local_mod.os, "link", link)
    store = LocalStore(tmp_path)
    with pytest.raises(OSError, match="simulated crash"):
        put_version(store, PIPE, graph_to_objects(graph), manifest)
    assert _files(tmp_path) == []  # data objects cleaned up, temp file removed
    assert store.list_versions() == []


def test_write_failure_mid_file_leaves_nothing_visible(tmp_path, manifest, monkeypatch):
    real_fsync = os.fsync
    calls = {"n": 0}

    def fsync(fd):
        if stat.S_ISREG(os.fstat(fd).st_mode):  # files, not the directory fsyncs
            calls["n"] += 1
            if calls["n"] == 2:  # the second file: manifest.json (one data object before it)
                raise OSError("I/O error")
        return real_fsync(fd)

    monkeypatch.setattr(local_mod.os, "fsync", fsync)
    store = LocalStore(tmp_path)
    with pytest.raises(OSError, match="I/O error"):
        put_version(store, PIPE, {"edges.parquet": b"e"}, manifest)
    assert _files(tmp_path) == []
    assert store.list_versions() == []


def test_hidden_and_stray_entries_are_ignored(tmp_path, manifest):
    store = LocalStore(tmp_path)
    version = put_version(store, PIPE, {"edges.parquet": b"e"}, manifest)
    (tmp_path / ".trash").mkdir()
    (tmp_path / "README.txt").write_text("not a pipeline")
    (tmp_path / PIPE / "notes").mkdir()
    (tmp_path / PIPE / version / ".tmp-abc").write_bytes(b"left by a crash")
    assert [(i.pipeline, i.version) for i in store.list_versions()] == [(PIPE, version)]
    assert store.read_object(PIPE, version, "edges.parquet") == b"e"


def test_corrupt_file_on_disk(tmp_path, graph, manifest):
    store = LocalStore(tmp_path)
    version = put_version(store, PIPE, graph_to_objects(graph), manifest)
    path = tmp_path / PIPE / version / "edges.parquet"
    path.write_bytes(path.read_bytes() + b"\0")
    with pytest.raises(ArtifactIntegrityError, match="edges.parquet"):
        store.read_object(PIPE, version, "edges.parquet")


def test_unsafe_keys_never_reach_the_disk(tmp_path):
    store = LocalStore(tmp_path)
    for key in ("p/../x", "p/.hidden/x", "/abs", "p//x"):
        with pytest.raises(ArtifactError):
            store._put_new(key, b"x")
    assert _files(tmp_path) == []


# -- open_store ----------------------------------------------------------------------------------
def test_open_store_paths_and_file_uris(tmp_path):
    assert open_store(tmp_path) == LocalStore(tmp_path)
    assert open_store(str(tmp_path)) == LocalStore(tmp_path)
    assert open_store(f"file://{tmp_path}") == LocalStore(tmp_path)
    assert open_store(tmp_path.as_uri()) == LocalStore(tmp_path)
    assert open_store(f"file://localhost{tmp_path}") == LocalStore(tmp_path)
    assert isinstance(open_store("relative/dir"), LocalStore)


@pytest.mark.parametrize(
    "uri, match",
    [
        ("file://otherhost/x", "host"),
        ("gs://bucket/x", "unsupported"),
        ("http://example.com/x", "unsupported"),
        ("s3:///prefix", "bucket"),
    ],
)
def test_open_store_rejects(uri, match):
    with pytest.raises(ValueError, match=match):
        open_store(uri)


def test_open_store_rejects_options_for_local(tmp_path):
    with pytest.raises(TypeError, match="options"):
        open_store(tmp_path, endpoint_url="http://x")


# -- hardening: planted links, private directory modes, the artifacts commands -------------------
def test_a_planted_symlink_is_never_followed(tmp_path, manifest):
    from privgraph.errors import ArtifactIntegrityError

    store = LocalStore(tmp_path / "store")
    version = put_version(store, "cora-feature-rr", {"edges.parquet": b"e"}, manifest)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "edges.parquet").write_bytes(b"foreign")
    # a foreign directory linked in as a pipeline is not listed
    (tmp_path / "store" / "foreign").symlink_to(outside, target_is_directory=True)
    assert [(i.pipeline, i.version) for i in store.list_versions()] == [("cora-feature-rr", version)]
    # an object replaced by a link is refused, not read through
    obj = tmp_path / "store" / "cora-feature-rr" / version / "edges.parquet"
    obj.unlink()
    obj.symlink_to(outside / "edges.parquet")
    with pytest.raises(ArtifactIntegrityError, match="symbolic link"):
        store.read_object("cora-feature-rr", version, "edges.parquet")
    # a write never goes through a linked directory into its target
    (tmp_path / "store" / "linked").symlink_to(outside, target_is_directory=True)
    with pytest.raises(ArtifactIntegrityError, match="symbolic link"):
        store._put_new("linked/20260101T000000000000Z-000000000000/edges.parquet", b"x")
    assert sorted(p.name for p in outside.iterdir()) == ["edges.parquet"]


def test_private_record_directories_are_owner_only(tmp_path):
    import stat

    from privgraph.storage.private_record import write_private_record

    old = os.umask(0o022)
    try:
        path = write_private_record(tmp_path / "a" / "records", "cora-feature-rr", "20260101T000000000000Z-000000000000", {"x": 1})
    finally:
        os.umask(old)
    for d in (tmp_path / "a", tmp_path / "a" / "records", path.parent):
        assert stat.S_IMODE(d.stat().st_mode) == 0o700, d
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


def test_artifacts_commands_verify_list_show_gc(tmp_path, graph, manifest, manifest_factory, monkeypatch):
    import datetime as dt
    import json

    from typer.testing import CliRunner

    from privgraph.cli import app
    from privgraph.storage.manifest import manifest_bytes
    from privgraph.storage.private_record import owner_signing_key
    from privgraph.storage.seal import public_key_hex

    monkeypatch.delenv("PRIVGRAPH_HOME", raising=False)
    key = owner_signing_key(tmp_path / "private")
    store = LocalStore(tmp_path / "store")
    good = put_version(store, "cora-feature-rr", graph_to_objects(graph), manifest, signing_key=key)
    bad = put_version(store, "cora-feature-rr", graph_to_objects(graph), manifest_factory(note="b"), signing_key=key)
    edited = put_version(store, "cora-feature-rr", graph_to_objects(graph), manifest_factory(note="c"), signing_key=key)
    staged = stage_version(store, "cora-feature-rr", {"edges.parquet": b"left"}, created=dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc))
    run = CliRunner().invoke
    s = ["--store", str(tmp_path / "store"), "--private-records", str(tmp_path / "private")]
    r = run(app, ["artifacts", "public-key", "--private-records", str(tmp_path / "private")])
    assert r.exit_code == 0 and r.stdout.strip() == public_key_hex(key), r.output
    assert run(app, ["artifacts", "public-key", "--private-records", str(tmp_path / "none")]).exit_code == 2
    r = run(app, ["artifacts", "verify", "--all", *s])
    assert r.exit_code == 0 and r.stdout.count("ok cora-feature-rr/") == 3, r.output
    assert f"sealed by {public_key_hex(key)[:16]}" in r.stdout
    (tmp_path / "store" / "cora-feature-rr" / bad / "edges.parquet").write_bytes(b"BAD")  # truncated/edited
    mpath = tmp_path / "store" / "cora-feature-rr" / edited / "manifest.json"
    m = json.loads(mpath.read_text())
    m["ledger"]["entries"][0]["guarantee"]["epsilon"] = 0.01  # the ledger claims more privacy
    mpath.write_bytes(manifest_bytes(m))  # as the store writes it: only the seal can tell
    r = run(app, ["artifacts", "verify", "--all", *s])
    assert r.exit_code == 2 and f"ok cora-feature-rr/{good}" in r.stdout and f"cora-feature-rr/{bad}" in r.output, r.output
    assert "2 of 3 versions failed" in r.output and "changed after the owner signed it" in r.output, r.output
    # a manifest that is not JSON: --all fails on it too (it was skipped, exit 0: issue 27)
    unreadable = put_version(store, "cora-feature-rr", graph_to_objects(graph), manifest_factory(note="d"), signing_key=key)
    (tmp_path / "store" / "cora-feature-rr" / unreadable / "manifest.json").write_text("{not json")
    r = run(app, ["artifacts", "verify", "--all", *s])
    assert r.exit_code == 2 and "3 of 4 versions failed" in r.output, r.output
    assert f"cora-feature-rr/{unreadable}" in r.output and "manifest cannot be read" in r.output, r.output
    (tmp_path / "store" / "cora-feature-rr" / unreadable / "manifest.json").unlink()
    assert run(app, ["artifacts", "show", bad, *s]).exit_code == 2
    assert run(app, ["artifacts", "show", edited, *s]).exit_code == 2
    assert run(app, ["artifacts", "show", good, *s]).exit_code == 0
    # a consumer pins the owner's public key; another key is refused
    assert run(app, ["artifacts", "verify", good, "--store", str(tmp_path / "store"), "--public-key", public_key_hex(key)]).exit_code == 0
    r = run(app, ["artifacts", "verify", good, "--store", str(tmp_path / "store"), "--public-key", "ab" * 32])
    assert r.exit_code == 2 and "not by a trusted key" in r.output, r.output
    r = run(app, ["artifacts", "verify", good, "--store", str(tmp_path / "store"), "--public-key", "xyz"])
    assert r.exit_code == 2 and "64 hex digits" in r.output, r.output
    assert run(app, ["artifacts", "verify", *s]).exit_code == 2  # neither VERSION nor --all
    (tmp_path / "store" / "cora-feature-rr" / good / "manifest.json").write_text("{")
    r = run(app, ["artifacts", "list", "--json", *s])
    assert r.exit_code == 2 and bad in r.stdout and good not in r.stdout.split("\n")[0], r.output
    assert edited not in r.stdout and f"cora-feature-rr/{edited}" in r.stderr, r.output  # its ledger was edited
    r = run(app, ["artifacts", "gc", "--min-age-hours", "1", *s[:2]])
    assert r.exit_code == 0 and f"removed staged cora-feature-rr/{staged.version}" in r.stdout, r.output
    assert not (tmp_path / "store" / "cora-feature-rr" / staged.version).exists()


def test_gc_removes_a_killed_writes_partial_file_and_the_folder(tmp_path):
    """kill -9 during a write leaves the version's folder with a data object and a ``.tmp-*`` file:
    gc removes both and the folder, once; the next gc has nothing to remove (issue 27)."""
    import datetime as dt

    from privgraph.storage.staging import gc_staged

    store = LocalStore(tmp_path / "store")
    staged = stage_version(store, PIPE, {"edges.parquet": b"left"}, created=dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc))
    folder = tmp_path / "store" / PIPE / staged.version
    (folder / ".tmp-k1ll3d").write_bytes(b"half of features.npy")
    assert gc_staged(store, dt.timedelta(hours=1)) == [(PIPE, staged.version)]
    assert not folder.exists()
    assert gc_staged(store, dt.timedelta(hours=1)) == []


def test_list_and_show_say_whether_the_seal_was_checked_against_a_trusted_key(tmp_path, graph, manifest, manifest_factory,
                                                                                   monkeypatch):
    """A hand-edited ledger is not listed as fact; list and show say which key the seal was checked
    against, or that no trusted key was at hand (issue 27)."""
    import json

    from typer.testing import CliRunner

    from privgraph.cli import app
    from privgraph.storage.manifest import manifest_bytes
    from privgraph.storage.private_record import owner_signing_key
    from privgraph.storage.seal import public_key_hex

    monkeypatch.delenv("PRIVGRAPH_HOME", raising=False)
    key = owner_signing_key(tmp_path / "private")
    store = LocalStore(tmp_path / "store")
    good = put_version(store, PIPE, graph_to_objects(graph), manifest, signing_key=key)
    edited = put_version(store, PIPE, graph_to_objects(graph), manifest_factory(note="c"), signing_key=key)
    run = CliRunner().invoke
    own = ["--store", str(tmp_path / "store"), "--private-records", str(tmp_path / "private")]
    none = ["--store", str(tmp_path / "store"), "--private-records", str(tmp_path / "nobody")]
    r = run(app, ["artifacts", "list", "--json", *own])
    assert r.exit_code == 0, r.output
    assert [row["seal"] for row in json.loads(r.stdout)] == [{"signer": public_key_hex(key), "trusted_key": True}] * 2
    r = run(app, ["artifacts", "list", *none])
    assert r.exit_code == 0 and "(unchecked signer)" in r.stdout and "no trusted public key" in r.stderr, r.output
    r = run(app, ["artifacts", "show", good, *own])
    assert r.exit_code == 0 and f"seal: signed by {public_key_hex(key)[:16]}... (a trusted key)" in r.stdout, r.output
    r = run(app, ["artifacts", "show", good, *none])
    assert r.exit_code == 0 and "not checked against a trusted key" in r.stdout and "no trusted public key" in r.stderr
    # the ledger edited by hand ("features 0.1"): left out of the listing, exit 2, named
    mpath = tmp_path / "store" / PIPE / edited / "manifest.json"
    m = json.loads(mpath.read_text())
    m["ledger"]["entries"][0]["guarantee"]["epsilon"] = 0.1
    mpath.write_bytes(manifest_bytes(m))  # as the store writes it: only the seal can tell
    for args in (own, none):
        r = run(app, ["artifacts", "list", "--json", *args])
        assert r.exit_code == 2 and [row["version"] for row in json.loads(r.stdout)] == [good], r.output
        assert f"{PIPE}/{edited}" in r.stderr and "changed after the owner signed it" in r.stderr, r.output
    # re-signed with another key: listed as sealed by that key when no trusted key is at hand, refused against the owner's
    other = owner_signing_key(tmp_path / "intruder")
    resigned = put_version(store, PIPE, {"edges.parquet": b"r"}, manifest_factory(note="r"), signing_key=other)
    r = run(app, ["artifacts", "list", "--json", *none])
    assert {row["version"]: row["seal"]["signer"] for row in json.loads(r.stdout)}[resigned] == public_key_hex(other)
    r = run(app, ["artifacts", "list", "--json", *own])
    assert r.exit_code == 2 and resigned not in r.stdout and "not by a trusted key" in r.stderr, r.output


def test_the_artifacts_commands_refuse_a_file_the_manifest_does_not_list(tmp_path, graph, manifest, manifest_factory,
                                                                        monkeypatch):
    """Issue 57 (5): a file dropped into a published version's folder: ``verify`` (one version
    and ``--all``) fails, exit 2, one line naming the file; ``show`` refuses it; ``list`` leaves
    it out and says why. The other version is still listed and verifies."""
    import json

    from typer.testing import CliRunner

    from privgraph.cli import app
    from privgraph.storage.private_record import owner_signing_key

    monkeypatch.delenv("PRIVGRAPH_HOME", raising=False)
    key = owner_signing_key(tmp_path / "private")
    store = LocalStore(tmp_path / "store")
    good = put_version(store, PIPE, graph_to_objects(graph), manifest, signing_key=key)
    bad = put_version(store, PIPE, graph_to_objects(graph), manifest_factory(note="b"), signing_key=key)
    (tmp_path / "store" / PIPE / bad / "part-00000.secret.npy").write_bytes(b"not part of the release")
    says = f"{PIPE}/{bad} holds 'part-00000.secret.npy', which its manifest does not list"
    run = CliRunner().invoke
    s = ["--store", str(tmp_path / "store"), "--private-records", str(tmp_path / "private")]
    for args in (["verify", bad], ["verify", "--all"], ["show", bad], ["list"]):
        r = run(app, ["artifacts", *args, *s])
        text = " ".join(r.output.split())  # rich folds long lines on a narrow terminal
        assert r.exit_code == 2 and says in text and "Traceback" not in r.output, (args, r.output)
    r = run(app, ["artifacts", "verify", "--all", *s])
    assert f"ok {PIPE}/{good}" in r.stdout and "1 of 2 versions failed verification" in " ".join(r.output.split())
    r = run(app, ["artifacts", "list", "--json", *s])
    assert [row["version"] for row in json.loads(r.stdout)] == [good], r.output
