"""Every stored object is the canonical encoding of what loads from it (privacy issue 42).

A leak planted INSIDE an object (parquet schema metadata sized by a private count, an extra
column, a zip comment, trailing bytes, another compression, an unlisted object, a re-indented
manifest) is invisible to a reader that only decodes the content. Each planted version here is
written through the store's own staging and publish path, so its checksums, content hash and
seal hold and only the canonical checks can catch it: :meth:`ArtifactStore.load_graph`,
:meth:`~ArtifactStore.iter_parts`, :meth:`~ArtifactStore.verify_version` and
``privgraph artifacts verify`` refuse it, with one line naming the object and never its data.
The positive side: every version privgraph writes loads and verifies.
"""

from __future__ import annotations

import io
import json
import zipfile
from collections.abc import Callable

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from privgraph.errors import ArtifactError, ArtifactIntegrityError, ArtifactTamperedError
from privgraph.graph import GraphData
from privgraph.storage import LocalStore, graph_to_objects, objects_to_graph
from privgraph.storage.graph_io import (
    EDGES,
    FEATURES,
    GRAPH_INFO,
    LABELS,
    SPLITS,
    GraphPart,
    _decode_edges,
    _npy_bytes,
    _own_created_by,
    check_objects,
    part_to_objects,
    partitioned_graph_info,
    read_graph_info,
)
from privgraph.storage.manifest import manifest_bytes
from privgraph.storage.staging import put_version, stage_version
from tests.storage.conftest import make_manifest

PIPE = "cora-feature-rr"
SECRET = "742"  # a "private count" a planted leak carries: never in a refusal's message


# -- building planted objects ----------------------------------------------------------------------
def _edges_table(objects: dict[str, bytes], name: str = EDGES) -> pa.Table:
    return pq.read_table(io.BytesIO(objects[name]))


def _parquet(table: pa.Table, **options) -> bytes:
    buf = io.BytesIO()
    pq.write_table(table, buf, **{"compression": "zstd", **options})
    return buf.getvalue()


def _zip(entries: dict[str, bytes], *, comment: bytes = b"", level: int | None = None,
         compression: int = zipfile.ZIP_DEFLATED) -> bytes:
    """An npz as _npz_bytes writes it, but for the given comment, compression or level."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=compression, compresslevel=level) as zf:
        for name, blob in entries.items():
            info = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))
            info.compress_type = compression
            info.external_attr = 0o644 << 16
            zf.writestr(info, blob, compresslevel=level)
        zf.comment = comment
    return buf.getvalue()


def _masks(g: GraphData) -> dict[str, bytes]:
    return {f"{m}.npy": _npy_bytes(getattr(g, m)) for m in ("test_mask", "train_mask", "val_mask")}


def _npy(a: np.ndarray, fortran: bool = False) -> bytes:
    buf = io.BytesIO()
    np.save(buf, np.asfortranarray(a) if fortran else a, allow_pickle=False)
    return buf.getvalue()


def _graph_json(**changes) -> Callable[[dict[str, bytes], GraphData], bytes]:
    def build(objects, g):
        info = {**json.loads(objects[GRAPH_INFO]), **changes}
        return (json.dumps(info, sort_keys=True) + "\n").encode()
    return build


#: planted deviation -> (object it changes, how it builds the new bytes from the canonical
#: objects and the graph, what the refusal says)
PLANTS: dict[str, tuple[str, Callable[[dict[str, bytes], GraphData], bytes], str]] = {
    "parquet schema metadata": (EDGES, lambda o, g: _parquet(_edges_table(o).replace_schema_metadata({"n": SECRET})),
                                "not the bytes privgraph writes"),
    "parquet extra column": (EDGES, lambda o, g: _parquet(_edges_table(o).append_column(
        "w", pa.array(np.full(6, int(SECRET)), pa.int64()))), "not exactly src int64, dst int64, kind string"),
    "parquet unsorted rows": (EDGES, lambda o, g: _parquet(_edges_table(o).take([0, 1, 2, 4, 3, 5])),
                              "not strictly increasing"),
    "parquet private rows first": (EDGES, lambda o, g: _parquet(_edges_table(o).take([3, 4, 5, 0, 1, 2])),
                                   "a public row after a private one"),
    "parquet snappy": (EDGES, lambda o, g: _parquet(_edges_table(o), compression="snappy"), "not the bytes privgraph writes"),
    "parquet zstd level": (EDGES, lambda o, g: _parquet(_edges_table(o), compression_level=19),
                           "not the bytes privgraph writes"),
    "parquet row groups": (EDGES, lambda o, g: _parquet(_edges_table(o), row_group_size=int(SECRET[1])),
                           "not the bytes privgraph writes"),
    "parquet dictionary kind": (EDGES, lambda o, g: _parquet(_edges_table(o).set_column(
        2, "kind", _edges_table(o).column("kind").dictionary_encode())), "not exactly src int64"),
    "npy trailing bytes": (FEATURES, lambda o, g: o[FEATURES] + SECRET.encode(), "not the bytes privgraph writes"),
    "npy fortran order": (FEATURES, lambda o, g: _npy(g.x, fortran=True), "memory order"),
    "npy float64 features": (FEATURES, lambda o, g: _npy(g.x.astype(np.float64)), "float64 with 2 dimensions, expected float32"),
    "npy big-endian features": (FEATURES, lambda o, g: _npy(g.x.astype(">f4")), "expected float32"),
    "npy int32 labels": (LABELS, lambda o, g: _npy(g.y.astype(np.int32)), "expected int64"),
    "npy 3-d labels": (LABELS, lambda o, g: _npy(g.y.reshape(6, 1, 1)), "expected int64 with 1 or 2"),
    "npy header spacing": (LABELS, lambda o, g: o[LABELS].replace(b", }", b",} ", 1), "not the bytes privgraph writes"),
    "npz extra entry": (SPLITS, lambda o, g: _zip({**_masks(g), "extra.npy": _npy(np.arange(int(SECRET)))}), "its entries"),
    "npz repeated entry": (SPLITS, lambda o, g: _npz_with_repeat(g), "its entries"),
    "npz int mask": (SPLITS, lambda o, g: _zip({**_masks(g), "val_mask.npy": _npy(g.val_mask.astype(np.int8))}),
                     "val_mask is int8"),
    "npz zip comment": (SPLITS, lambda o, g: _zip(_masks(g), comment=SECRET.encode()), "not the bytes privgraph writes"),
    "npz compression level": (SPLITS, lambda o, g: _zip(_masks(g), level=0), "not the bytes privgraph writes"),
    "npz stored entries": (SPLITS, lambda o, g: _zip(_masks(g), compression=zipfile.ZIP_STORED), "not the bytes"),
    "npz trailing bytes": (SPLITS, lambda o, g: o[SPLITS] + SECRET.encode(), "not the bytes privgraph writes"),
    "graph.json extra key": (GRAPH_INFO, _graph_json(note=int(SECRET)), "not a 'privgraph.graph/1'"),
    "graph.json null parts": (GRAPH_INFO, _graph_json(parts=None), "not a 'privgraph.graph/1'"),
    "graph.json indented": (GRAPH_INFO, lambda o, g: (json.dumps(json.loads(o[GRAPH_INFO]), sort_keys=True, indent=int(SECRET[0]))
                                                      + "\n").encode(), "not the bytes privgraph writes"),
    "graph.json unsorted objects": (GRAPH_INFO, lambda o, g: _graph_json(objects=sorted(json.loads(o[GRAPH_INFO])["objects"],
                                                                                         reverse=True))(o, g),
                                    "not the bytes privgraph writes"),
    "graph.json lists an object twice": (GRAPH_INFO, lambda o, g: _graph_json(objects=sorted(
        [*json.loads(o[GRAPH_INFO])["objects"], EDGES]))(o, g), "not the bytes privgraph writes"),
    "graph.json as float num_nodes": (GRAPH_INFO, _graph_json(num_nodes=6.0), "not a 'privgraph.graph/1'"),
    "an object graph.json does not list": ("notes.npy", lambda o, g: _npy(np.arange(int(SECRET))), "not listed in graph.json"),
}


def _npz_with_repeat(g: GraphData) -> bytes:
    buf = io.BytesIO()
    with pytest.warns(UserWarning, match="Duplicate name"), zipfile.ZipFile(buf, "w") as zf:
        for name, blob in [*_masks(g).items(), ("val_mask.npy", _npy(np.ones(6, bool)))]:
            zf.writestr(zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0)), blob)
    return buf.getvalue()


def _planted(graph: GraphData, plant: str) -> tuple[str, dict[str, bytes], str]:
    name, build, says = PLANTS[plant]
    objects = graph_to_objects(graph)
    blob = build(objects, graph)
    assert blob != objects.get(name)  # the plant changes the bytes...
    objects[name] = blob
    return name, objects, says


@pytest.fixture
def key(tmp_path, monkeypatch):
    from privgraph.storage.private_record import owner_signing_key

    monkeypatch.delenv("PRIVGRAPH_HOME", raising=False)
    return owner_signing_key(tmp_path / "private")


def _cli_verify(tmp_path, *args: str):
    from privgraph.cli import app

    return CliRunner().invoke(app, ["artifacts", "verify", *args, "--store", str(tmp_path / "store"),
                                    "--private-records", str(tmp_path / "private")])


def _refused_everywhere(store, tmp_path, version: str, name: str, says: str) -> None:
    """load_graph, verify_version and `privgraph artifacts verify` refuse the version, naming it
    and the object, without the planted value."""
    with pytest.raises(ArtifactIntegrityError, match=says) as exc:
        store.load_graph(PIPE, version)
    assert f"{PIPE}/{version}" in str(exc.value) and SECRET not in str(exc.value).replace(version, "")
    with pytest.raises(ArtifactIntegrityError, match=says) as exc:
        store.verify_version(PIPE, version, sealed=True)
    message = str(exc.value)
    assert f"{PIPE}/{version}" in message  # and the object, but for one graph.json does not list (its name is not repeated)
    assert name in message or "not listed in graph.json" in message or name == "manifest.json" and "manifest of" in message
    assert SECRET not in message.replace(version, "") and "\n" not in message
    r = _cli_verify(tmp_path, version)
    failed = [line for line in r.output.splitlines() if line.startswith("FAILED ")]
    assert r.exit_code == 2 and len(failed) == 1 and f"{PIPE}/{version}" in failed[0], r.output
    assert "1 of 1 versions failed verification" in " ".join(r.output.split()), r.output


# -- the planted leaks ------------------------------------------------------------------------------
@pytest.mark.parametrize("plant", sorted(PLANTS))
def test_a_planted_object_is_refused_by_every_reader(plant, graph, tmp_path, key):
    name, objects, says = _planted(graph, plant)
    store = LocalStore(tmp_path / "store")
    version = put_version(store, PIPE, objects, make_manifest(PIPE), signing_key=key)
    assert store.read_objects(PIPE, version) == objects  # ...and every checksum holds
    _refused_everywhere(store, tmp_path, version, name, says)
    with pytest.raises(ArtifactError, match=says):  # the library functions themselves
        check_objects(objects)
    with pytest.raises(ArtifactError, match=says):
        objects_to_graph(objects)


def test_a_planted_object_is_refused_on_every_backend(backend, graph, manifest):
    _, objects, says = _planted(graph, "parquet schema metadata")
    version = put_version(backend.store, PIPE, objects, manifest)
    for read in (lambda: backend.store.load_graph(PIPE, version), lambda: backend.store.verify_version(PIPE, version)):
        with pytest.raises(ArtifactIntegrityError, match=f"{PIPE}/{version}: {EDGES}: {says}"):
            read()


def test_a_staged_planted_object_is_refused(graph, tmp_path):
    _, objects, says = _planted(graph, "npz zip comment")
    store = LocalStore(tmp_path / "store")
    pending = stage_version(store, PIPE, objects)
    with pytest.raises(ArtifactError, match=f"staged {PIPE}/{pending.version}: {SPLITS}: {says}"):
        store.load_graph(PIPE, pending.version, staged=True)
    assert store.load_graph(PIPE, stage_version(store, PIPE, graph_to_objects(graph)).version, staged=True)[0].num_nodes == 6


def test_a_missing_listed_object_or_an_unknown_name_is_refused(graph):
    objects = graph_to_objects(graph)
    with pytest.raises(ArtifactError, match="lacks 'features.npy'"):
        check_objects({n: b for n, b in objects.items() if n != FEATURES})
    with pytest.raises(ArtifactError, match="lacks 'graph.json'"):
        check_objects({n: b for n, b in objects.items() if n != GRAPH_INFO})
    listed = _graph_json(objects=sorted([*json.loads(objects[GRAPH_INFO])["objects"], "notes.npy"]))(objects, graph)
    with pytest.raises(ArtifactError, match="1 object.* never holds, listed in graph.json"):
        check_objects({**objects, GRAPH_INFO: listed, "notes.npy": b""})
    with pytest.raises(ArtifactError, match="never holds"):  # without graph.json: a whole version's names only
        objects_to_graph({EDGES: objects[EDGES], "part-00000.nodes.npy": b""}, num_nodes=6)


# -- manifest.json --------------------------------------------------------------------------------
def test_a_re_encoded_manifest_is_refused(graph, tmp_path, key):
    """Re-indented (or with its keys in another order, or a NaN) the same sealed content is
    refused: whitespace and key order could carry what the parsed manifest never shows."""
    store = LocalStore(tmp_path / "store")
    version = put_version(store, PIPE, graph_to_objects(graph), make_manifest(PIPE), signing_key=key)
    path = tmp_path / "store" / PIPE / version / "manifest.json"
    stored = json.loads(path.read_bytes())
    assert path.read_bytes() == manifest_bytes(stored)
    for raw in (json.dumps(stored, sort_keys=True, indent=int(SECRET[0])) + "\n",
                json.dumps(dict(reversed(stored.items())), indent=2) + "\n",  # keys not sorted
                json.dumps(stored, sort_keys=True, indent=2),  # no newline
                json.dumps(stored, sort_keys=True, indent=2, ensure_ascii=False).replace('"test"', '"t\\u0065st"') + "\n",
                json.dumps(stored, sort_keys=True, indent=2).replace("{", '{\n  "pipeline": "x",', 1) + "\n"):  # a repeated key
        assert raw.encode() != manifest_bytes(stored)
        path.write_bytes(raw.encode())
        _refused_everywhere(store, tmp_path, version, "manifest.json", "not the bytes privgraph writes")
        broken: list[str] = []
        assert store.list_versions(broken=broken) == [] and version in broken[0]
    path.write_bytes(manifest_bytes(stored))
    assert store.verify_version(PIPE, version, sealed=True)["objects"] == 5
    assert _cli_verify(tmp_path, "--all").exit_code == 0
    # the refusal is not a tamper claim: the content (and its seal) is intact
    path.write_bytes((json.dumps(stored, indent=1) + "\n").encode())
    with pytest.raises(ArtifactIntegrityError) as exc:
        store.read_manifest(PIPE, version)
    assert not isinstance(exc.value, ArtifactTamperedError)


def test_an_older_manifest_format_stays_readable_without_the_check(graph, tmp_path):
    """A privgraph.manifest/1 manifest (written before the rule) is read as it is."""
    store = LocalStore(tmp_path / "store")
    version = put_version(store, PIPE, graph_to_objects(graph), make_manifest(PIPE))
    path = tmp_path / "store" / PIPE / version / "manifest.json"
    old = {**json.loads(path.read_bytes()), "format": "privgraph.manifest/1"}
    path.write_bytes(json.dumps(old, indent=1).encode())
    assert store.read_manifest(PIPE, version)["format"] == "privgraph.manifest/1"
    assert store.load_graph(PIPE, version)[0].num_edges == 6
    assert store.verify_version(PIPE, version)["objects"] == 5


def test_the_writer_encodes_manifests_with_manifest_bytes(graph, tmp_path, key):
    store = LocalStore(tmp_path / "store")
    version = put_version(store, PIPE, graph_to_objects(graph), make_manifest(PIPE, note="é\u2028"), signing_key=key)
    raw = (tmp_path / "store" / PIPE / version / "manifest.json").read_bytes()
    assert raw == manifest_bytes(json.loads(raw)) and raw.endswith(b"}\n") and b"\\u00e9" in raw


# -- partitioned versions -----------------------------------------------------------------------
def _parts_objects(fields: bool = True) -> dict[str, bytes]:
    def part(i, nodes, public, private):
        n = np.array(nodes, np.int64)
        f = {"x": np.arange(2 * n.size, dtype=np.float32).reshape(-1, 2), "y": n % 2,
             "train_mask": n % 2 == 0} if fields else {}
        return GraphPart(index=i, nodes=n, fields=f, edges_public=np.array(public, np.int64).reshape(2, -1),
                         edges_private=np.array(private, np.int64).reshape(2, -1))

    parts = [part(0, [0, 2], [[0], [1]], [[2], [3]]), part(1, [1, 3], [[1], [3]], [[], []])]
    objects = {n: b for p in parts for n, b in part_to_objects(p).items()}
    objects[GRAPH_INFO] = partitioned_graph_info(4, 2, sorted(objects))
    return objects


PART_PLANTS: dict[str, tuple[str, Callable[[dict[str, bytes]], bytes], str]] = {
    "part edges metadata": ("part-00001.edges.parquet", lambda o: _parquet(
        _edges_table(o, "part-00001.edges.parquet").replace_schema_metadata({"n": SECRET})), "not the bytes privgraph writes"),
    "part nodes unsorted": ("part-00001.nodes.npy", lambda o: _npy(np.array([3, 1], np.int64)), "not strictly increasing"),
    "part features float64": ("part-00001.features.npy", lambda o: _npy(np.zeros((2, 2))), "expected float32"),
    "part npz comment": ("part-00001.splits.npz", lambda o: _zip(
        {"train_mask.npy": _npy(np.array([False, False]))}, comment=SECRET.encode()), "not the bytes privgraph writes"),
    "an object of a third part": ("part-00002.nodes.npy", lambda o: _npy(np.arange(3, dtype=np.int64)), "not listed in graph.json"),
    "a part without its labels": ("graph.json", lambda o: partitioned_graph_info(
        4, 2, sorted(n for n in o if n not in (GRAPH_INFO, "part-00001.labels.npy"))), "the parts hold different objects"),
}


@pytest.mark.parametrize("plant", sorted(PART_PLANTS))
def test_a_planted_part_is_refused_by_every_reader(plant, tmp_path, key):
    name, build, says = PART_PLANTS[plant]
    objects = _parts_objects()
    objects[name] = build(objects)
    store = LocalStore(tmp_path / "store")
    version = put_version(store, PIPE, objects, make_manifest(PIPE, num_nodes=4), signing_key=key)
    _refused_everywhere(store, tmp_path, version, name, says)
    parts = store.iter_parts(PIPE, version)
    if name.startswith("part-00001."):
        assert next(parts).index == 0  # part 0 is intact: refused when part 1 is reached
    with pytest.raises(ArtifactIntegrityError, match=says):
        next(parts)


def test_a_partitioned_graph_json_must_list_itself():
    objects = _parts_objects()
    info = {**json.loads(objects[GRAPH_INFO])}
    info["objects"] = [n for n in info["objects"] if n != GRAPH_INFO]
    with pytest.raises(ArtifactError, match="not the bytes privgraph writes"):
        read_graph_info((json.dumps(info, sort_keys=True) + "\n").encode())


# -- what privgraph writes loads and verifies ------------------------------------------------------
def _graphs() -> dict[str, GraphData]:
    rng = np.random.default_rng(1)
    n = 7
    full = GraphData(num_nodes=n, x=rng.random((n, 3)), y=rng.integers(0, 3, n),
                     edges_public=np.array([[0, 1], [1, 2]]), edges_private=np.array([[4, 0], [6, 5]]),
                     train_mask=np.arange(n) < 3, val_mask=np.arange(n) == 4, test_mask=np.arange(n) > 4,
                     aggregates=rng.random((3, n, 2)))
    return {
        "full": full,
        "no fields, no edges": GraphData(num_nodes=5),
        "no nodes": GraphData(num_nodes=0),
        "public edges only": GraphData(num_nodes=4, edges_public=np.array([[0, 2], [3, 3]])),
        "private edges only": GraphData(num_nodes=4, edges_private=np.array([[0], [1]]), y=np.array([0, -1, 1, 1])),
        "multilabel, one split": GraphData(num_nodes=3, y=np.array([[1, 0], [0, 1], [1, 1]]),
                                           test_mask=np.array([True, False, False])),
        "features only": full.replace(y=None, train_mask=None, val_mask=None, test_mask=None, aggregates=None),
    }


@pytest.mark.parametrize("which", sorted(_graphs()))
def test_every_version_privgraph_writes_loads_and_verifies(which, tmp_path, key):
    g = _graphs()[which]
    objects = graph_to_objects(g)
    check_objects(objects)
    assert graph_to_objects(objects_to_graph(objects)) == objects  # the round trip is the identity
    store = LocalStore(tmp_path / "store")
    version = put_version(store, PIPE, objects, make_manifest(PIPE, num_nodes=g.num_nodes), signing_key=key)
    loaded, _ = store.load_graph(PIPE, version)
    assert graph_to_objects(loaded) == objects
    assert store.verify_version(PIPE, version, sealed=True)["objects"] == len(objects)
    assert _cli_verify(tmp_path, version).exit_code == 0


@pytest.mark.parametrize("fields", [True, False])
def test_a_partitioned_version_privgraph_writes_loads_and_verifies(fields, tmp_path, key):
    objects = _parts_objects(fields)
    check_objects(objects)
    store = LocalStore(tmp_path / "store")
    version = put_version(store, PIPE, objects, make_manifest(PIPE, num_nodes=4), signing_key=key)
    g, _ = store.load_graph(PIPE, version)
    assert g.edges_public.tolist() == [[0, 1], [1, 3]] and g.edges_private.tolist() == [[2], [3]]
    assert (g.y.tolist() == [0, 1, 0, 1]) if fields else g.x is None
    assert [p.index for p in store.iter_parts(PIPE, version)] == [0, 1]
    assert store.verify_version(PIPE, version, sealed=True)["objects"] == len(objects)
    assert _cli_verify(tmp_path, "--all").exit_code == 0


def test_the_writer_stores_part_fields_in_the_documented_dtypes():
    """A part whose released rows came back float64 / int32 is written float32 / int64 (as
    GraphData holds them), so the version it makes loads."""
    n = np.array([0, 1], np.int64)
    part = GraphPart(index=0, nodes=n, fields={"x": np.ones((2, 2)), "y": np.array([0, 1], np.int32)},
                     edges_public=np.zeros((2, 0), np.int64), edges_private=np.zeros((2, 0), np.int64))
    objects = part_to_objects(part)
    objects[GRAPH_INFO] = partitioned_graph_info(2, 1, sorted(objects))
    check_objects(objects)
    assert objects_to_graph(objects).x.dtype == np.float32


# -- edges.parquet from another Parquet writer version ----------------------------------------------
def test_this_pyarrow_writes_the_created_by_the_reader_expects():
    assert _own_created_by() == f"parquet-cpp-arrow version {pa.__version__}"
    assert pq.ParquetFile(io.BytesIO(graph_to_objects(GraphData(num_nodes=1))[EDGES])).metadata.created_by == _own_created_by()


def _foreign(blob: bytes) -> bytes:
    """``blob`` as if another pyarrow version wrote it: its created_by changed in place (same
    length, so the footer stays valid)."""
    own = _own_created_by().encode()
    other = own[: own.rindex(b" ") + 1] + bytes(b"0123456789"[(c - 48 + 1) % 10] if 48 <= c <= 57 else c
                                                for c in own[own.rindex(b" ") + 1:])
    assert blob.count(own) == 1 and other != own
    out = blob.replace(own, other)
    assert pq.ParquetFile(io.BytesIO(out)).metadata.created_by == other.decode()
    return out


def test_a_canonical_file_of_another_writer_version_is_checked_field_by_field(graph, tmp_path):
    objects = graph_to_objects(graph)
    table = _edges_table(objects)
    pub, pri = graph.edges_public, graph.edges_private
    want = (pub[:, np.lexsort(pub[::-1])].tolist(), pri[:, np.lexsort(pri[::-1])].tolist())
    accepted = {
        "our bytes": _foreign(objects[EDGES]),
        "no statistics": _foreign(_parquet(table, write_statistics=False)),
        "no dictionary": _foreign(_parquet(table, use_dictionary=False)),
        "even row groups": _foreign(_parquet(table, row_group_size=2)),
        "another page size": _foreign(_parquet(table, data_page_size=64)),
    }
    for what, blob in accepted.items():
        assert tuple(e.tolist() for e in _decode_edges(blob, EDGES)) == want, what
    store = LocalStore(tmp_path / "store")
    version = put_version(store, PIPE, {**objects, EDGES: accepted["no statistics"]}, make_manifest(PIPE))
    assert store.load_graph(PIPE, version)[0].edges_private.tolist() == want[1]
    assert store.verify_version(PIPE, version)["objects"] == len(objects)
    buf = io.BytesIO()
    with pq.ParquetWriter(buf, table.schema, compression="zstd") as w:
        w.write_table(table.slice(0, 1))
        w.write_table(table.slice(1))
    refused = {
        "key-value metadata": _parquet(table.replace_schema_metadata({"n": SECRET})),
        "column metadata": _parquet(table.cast(pa.schema([pa.field("src", pa.int64(), metadata={"n": SECRET}),
                                                         ("dst", pa.int64()), ("kind", pa.string())]))),
        "zstd-compressed": _parquet(table, compression="snappy"),
        "uneven": buf.getvalue(),
        "not strictly increasing": _parquet(table.take([0, 0, 1, 2, 3, 4, 5])),
        "not exactly src int64": _parquet(table.append_column("w", pa.array(np.zeros(6, np.int64)))),
        "unknown edge kind": _parquet(table.set_column(2, "kind", pa.array(["public"] * 3 + ["raw"] * 3))),
    }
    for says, blob in refused.items():
        with pytest.raises(ArtifactError, match=says) as exc:
            _decode_edges(_foreign(blob), EDGES)
        assert SECRET not in str(exc.value)
        with pytest.raises(ArtifactError):  # and with this pyarrow's created_by: the bytes differ
            _decode_edges(blob, EDGES)
