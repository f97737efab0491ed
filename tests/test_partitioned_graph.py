"""The partitioned graph format (privgraph-partitioned-graph/1), its streaming writer and reader,
and ``privgraph ingest``: the same arrays as the generic loader, the loader's one-line messages
naming file and rows (also across batches and ranges), all or nothing, owner-only files."""

from __future__ import annotations

import json
import os
import re
import stat
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from privgraph.errors import ConfigError, DatasetNotFoundError, GraphValidationError
from privgraph.ingest import input_batches, partitioned_destination, partitioned_writer
from privgraph.ingest.datasets import load_generic, read_node_split
from privgraph.ingest.partitioned_graph import (FORMAT, load_partitioned_graph, open_partitioned_graph,
                                                range_file, read_edge_range, read_node_range)
from privgraph.ingest.partitioned_writer import write_partitioned_graph

REPO = Path(__file__).resolve().parents[1]


def _edges(n: int, m: int, seed: int = 0) -> np.ndarray:
    """``m`` distinct undirected edges on ``n`` nodes in random direction, no self-loop."""
    rng = np.random.default_rng(seed)
    u, v = rng.integers(0, n, 4 * m), rng.integers(0, n, 4 * m)
    keep = u != v
    u, v = u[keep], v[keep]
    _, first = np.unique(np.minimum(u, v) * n + np.maximum(u, v), return_index=True)
    pick = np.sort(first)[:m]
    return np.stack([u[pick], v[pick]])


def _files(tmp: Path, n: int = 103, m: int = 400, *, fmt: str = "csv", d: int = 5, labels: bool = True,
           split: bool = True, flag: bool = True) -> dict[str, Path]:
    """A generic graph's files: edges (``fmt``), features .npy, labels .npy (some -1), split .json."""
    rng = np.random.default_rng(1)
    e = _edges(n, m)
    df = pd.DataFrame({"src": e[0], "dst": e[1]})
    if flag:
        df["private"] = rng.random(e.shape[1]) < 0.2
    files = {"edges": tmp / f"edges.{fmt}"}
    df.to_csv(files["edges"], index=False) if fmt == "csv" else df.to_parquet(files["edges"])
    if d:
        files["features"] = tmp / "x.npy"
        np.save(files["features"], rng.normal(size=(n, d)))
    if labels:
        files["labels"] = tmp / "y.npy"
        y = rng.integers(0, 4, n)
        y[rng.random(n) < 0.1] = -1
        np.save(files["labels"], y)
        if split:
            lab = np.flatnonzero(y >= 0)
            files["split"] = tmp / "split.json"
            files["split"].write_text(json.dumps({"train": lab[::3].tolist(), "val": lab[1::3].tolist(),
                                                  "test": lab[2::3].tolist()}))
    return files


def _sorted(e: np.ndarray) -> np.ndarray:
    return e[:, np.lexsort((e[1], e[0]))]


def _assert_same_graph(a, b) -> None:
    assert a.num_nodes == b.num_nodes
    for name in ("x", "y", "train_mask", "val_mask", "test_mask"):
        va, vb = getattr(a, name), getattr(b, name)
        assert (va is None) == (vb is None), name
        if va is not None:
            assert va.dtype == vb.dtype and np.array_equal(va, vb), name
    for name in ("edges_public", "edges_private"):
        assert np.array_equal(_sorted(getattr(a, name)), _sorted(getattr(b, name))), name


def _generic(files: dict[str, Path], **kw):
    """What load_generic (and the split file) give for ``files``."""
    g = load_generic(files["edges"], features=files.get("features"), labels=files.get("labels"), **kw)
    if "split" in files:
        tr, va, te = read_node_split(files["split"], g.num_nodes, g.labelled())
        g = g.replace(train_mask=tr, val_mask=va, test_mask=te)
    return g


def _write(files: dict[str, Path], dest: Path, **kw):
    return write_partitioned_graph(files["edges"], features=files.get("features"), labels=files.get("labels"),
                                   split=files.get("split"), destination=dest, **kw)


def _message(fn, *args, **kw) -> str:
    with pytest.raises(GraphValidationError) as info:
        fn(*args, **kw)
    return str(info.value)


# -- the same graph as the generic loader ---------------------------------------------------------
@pytest.mark.parametrize("fmt", ["csv", "parquet"])
def test_the_same_arrays_as_load_generic_over_ranges(tmp_path, fmt, monkeypatch):
    monkeypatch.setattr(input_batches, "BATCH_ROWS", 64)  # several batches per file
    monkeypatch.setattr(input_batches, "CSV_BLOCK_BYTES", 1024)
    files = _files(tmp_path, fmt=fmt)
    graph = _write(files, tmp_path / "g", range_size=10)  # 103 nodes: 10 ranges of 10 and one of 3
    assert (graph.num_nodes, graph.num_ranges, graph.range_size) == (103, 11, 10)
    _assert_same_graph(load_partitioned_graph(tmp_path / "g"), _generic(files))
    opened = open_partitioned_graph(tmp_path / "g")
    assert opened == graph.__class__(**{**graph.__dict__, "path": str(tmp_path / "g")})
    meta = json.loads((tmp_path / "g" / "graph.json").read_text())
    assert meta["format"] == FORMAT and meta["num_features"] == 5 and meta["has_split"] is True
    assert meta["source"] == {"edges": files["edges"].name, "features": "x.npy", "labels": "y.npy", "split": "split.json"}
    assert meta["num_classes"] == int(np.load(files["labels"]).max()) + 1
    last = read_node_range(opened, 10)
    assert last["id"].tolist() == [100, 101, 102] and last["x"].shape == (3, 5) and last["x"].dtype == np.float32
    for i in range(opened.num_ranges):
        e, private = read_edge_range(opened, i)
        assert ((e[0] >= 10 * i) & (e[0] < 10 * i + 10) & (e[0] < e[1])).all() and private.dtype == bool
        assert np.array_equal(e, _sorted(e))
    assert set(read_node_range(opened, 3, columns=["y"])) == {"y"}


def test_the_fast_csv_read_names_the_same_lines_as_the_exact_one(tmp_path, monkeypatch):
    """A blank line sends the read to the csv module; both name the file's lines the same way."""
    monkeypatch.setattr(input_batches, "CSV_BLOCK_BYTES", 64)
    fast = tmp_path / "fast.csv"
    fast.write_text("src,dst\n" + "".join(f"{i},{i + 1}\n" for i in range(30)) + "7,6\n")
    exact = tmp_path / "exact.csv"
    exact.write_text("src,dst\n" + "".join(f"{i},{i + 1}\n" for i in range(30)) + "\n7,6\n")
    used = []
    real = input_batches._csv_exact
    monkeypatch.setattr(input_batches, "_csv_exact", lambda *a: used.append(a) or real(*a))
    for path, exact_read, line in ((fast, False, 32), (exact, True, 33)):
        used.clear()
        msg = _message(write_partitioned_graph, path, destination=tmp_path / path.stem)
        assert msg == _message(load_generic, path) and f"lines [{line}]" in msg and "the first repeats" in msg
        assert bool(used) is exact_read
        assert not (tmp_path / path.stem).exists()


def test_no_features_no_labels_no_flag(tmp_path):
    files = _files(tmp_path, n=40, m=60, d=0, labels=False, flag=False)
    graph = _write(files, tmp_path / "g", range_size=7)
    assert (graph.num_features, graph.has_labels, graph.num_classes, graph.private_column) == (0, False, None, None)
    assert set(read_node_range(graph, 0)) == {"id"}
    assert not read_edge_range(graph, 0)[1].any()
    _assert_same_graph(load_partitioned_graph(graph.path), _generic(files))
    with pytest.raises(ValueError, match="no node column"):
        read_node_range(graph, 0, columns=["x"])
    with pytest.raises(IndexError):
        read_node_range(graph, graph.num_ranges)


def test_tables_read_whole_id_label_labels_and_parquet_features(tmp_path):
    files = _files(tmp_path, n=50, m=80, labels=False, d=0)
    rng = np.random.default_rng(2)
    files["features"] = tmp_path / "x.parquet"
    pd.DataFrame(rng.normal(size=(50, 3)), columns=["a", "b", "c"]).to_parquet(files["features"])
    files["labels"] = tmp_path / "labels.csv"
    files["labels"].write_text("id,label\n" + "".join(f"{i},{i % 3}\n" for i in range(0, 50, 2)))
    graph = _write(files, tmp_path / "g", range_size=16)
    assert graph.num_classes == 3
    _assert_same_graph(load_partitioned_graph(graph.path), _generic(files))
    files["features"] = tmp_path / "fortran.npy"  # columns contiguous: read through a memory map
    np.save(files["features"], np.asfortranarray(np.random.default_rng(3).normal(size=(50, 4))))
    _assert_same_graph(load_partitioned_graph(_write(files, tmp_path / "f", range_size=16).path), _generic(files))


# -- errors: the generic loader's one-line messages -----------------------------------------------
@pytest.mark.parametrize("fmt", ["csv", "parquet"])
def test_a_duplicate_in_the_other_direction_in_another_batch_is_refused(tmp_path, fmt, monkeypatch):
    monkeypatch.setattr(input_batches, "BATCH_ROWS", 4)
    monkeypatch.setattr(input_batches, "CSV_BLOCK_BYTES", 64)
    e = [[i + 1, i] for i in range(29)] + [[3, 25]]  # (25, 3) early, (3, 25) in the last batch, other ranges
    e.insert(2, [25, 3])
    df = pd.DataFrame(e, columns=["src", "dst"])
    path = tmp_path / f"edges.{fmt}"
    df.to_csv(path, index=False) if fmt == "csv" else df.to_parquet(path)
    msg = _message(write_partitioned_graph, path, destination=tmp_path / "g", range_size=10)
    assert msg == _message(load_generic, path) and "duplicate edges" in msg and str(path) in msg
    assert "\n" not in msg and not (tmp_path / "g").exists() and not (tmp_path / ".g.tmp").exists()


@pytest.mark.parametrize("text, what", [
    ("src,dst\n0,1\n2,x\n", "non-integer values"),
    ("src,dst\n0,1\n2,\n", "missing values"),
    ("src,dst\n0,1\n2,3,4\n", "expected 2 fields"),
    ("src,dst,private\n0,1,true\n2,3,maybe\n", "expected booleans"),
    ("src,dst\n0,1\n2,2\n", "self-loops"),
    ("src,dst\n1,1\n", "self-loops"),
    ("src,dst\n0,1\n-2,3\n", "out of range"),
    ("src,dst\n", "empty graph"),
])
def test_bad_csv_rows_get_the_loaders_message(tmp_path, text, what):
    path = tmp_path / "edges.csv"
    path.write_text(text)
    msg = _message(write_partitioned_graph, path, destination=tmp_path / "g")
    assert msg == _message(load_generic, path) and what in msg and str(path) in msg and "\n" not in msg


def test_bad_types_and_values_name_the_file(tmp_path):
    files = _files(tmp_path, n=30, m=40, labels=False, split=False)
    bad = tmp_path / "float.parquet"
    pd.DataFrame({"src": [0.0, 1.0], "dst": [1.0, 2.0]}).to_parquet(bad)
    assert "has type double, expected integers" in _message(write_partitioned_graph, bad, destination=tmp_path / "a")
    nulls = tmp_path / "nulls.parquet"
    pq.write_table(pa.table({"src": pa.array([0, None, 2], pa.int64()), "dst": pa.array([1, 2, 3], pa.int64())}), nulls)
    msg = _message(write_partitioned_graph, nulls, destination=tmp_path / "a")
    assert msg == _message(load_generic, nulls) and "rows [1] (0-based row indices)" in msg
    x = np.load(files["features"])
    x[25, 2] = np.nan
    np.save(files["features"], x)
    msg = _message(_write, files, tmp_path / "b", range_size=10)  # found in range 2, named by its file row
    assert msg == _message(load_generic, files["edges"], features=files["features"]) and "rows [25]" in msg
    np.save(tmp_path / "y.npy", np.where(np.arange(30) == 17, 1.5, 1.0))
    msg = _message(write_partitioned_graph, files["edges"], labels=tmp_path / "y.npy", destination=tmp_path / "c",
                   range_size=10)
    assert msg == _message(load_generic, files["edges"], labels=tmp_path / "y.npy") and "rows [17]" in msg
    assert not any(p.name.startswith((".a", ".b", ".c", "a", "b", "c")) for p in tmp_path.iterdir())
    with pytest.raises(DatasetNotFoundError, match="split file not found"):
        write_partitioned_graph(files["edges"], split=tmp_path / "none.json", destination=tmp_path / "d")


def test_ids_that_do_not_number_the_nodes_are_refused_as_the_loader_does(tmp_path):
    path = tmp_path / "edges.csv"
    path.write_text("src,dst\n0,1\n2,5000000\n3,4\n")
    msg = _message(write_partitioned_graph, path, destination=tmp_path / "g")
    assert msg == _message(load_generic, path) and "the largest node id" in msg and "5000000" not in msg
    msg = _message(write_partitioned_graph, path, num_nodes=10, destination=tmp_path / "g")
    assert msg == _message(load_generic, path, num_nodes=10) and "out of range [0, 10)" in msg


# -- all or nothing, never overwrite, owner only ---------------------------------------------------
@pytest.mark.parametrize("exc", [RuntimeError("disk on fire"), KeyboardInterrupt()])
def test_an_interrupted_write_leaves_no_destination(tmp_path, monkeypatch, exc):
    files = _files(tmp_path)
    real, calls = partitioned_writer._edge_table, []

    def failing(spill, i, *a):
        calls.append(i)
        if i == 4:
            raise exc
        return real(spill, i, *a)

    monkeypatch.setattr(partitioned_writer, "_edge_table", failing)
    with pytest.raises(type(exc)):
        _write(files, tmp_path / "g", range_size=10)
    assert calls == [0, 1, 2, 3, 4]
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(p.name for p in files.values())


def test_an_existing_destination_is_never_overwritten(tmp_path):
    files = _files(tmp_path, n=30, m=40)
    (tmp_path / "g").mkdir()
    (tmp_path / "g" / "mine.txt").write_text("keep")
    with pytest.raises(ConfigError, match="never overwrites"):
        _write(files, tmp_path / "g")
    assert [p.name for p in (tmp_path / "g").iterdir()] == ["mine.txt"]
    (tmp_path / ".h.tmp").mkdir()
    with pytest.raises(ConfigError, match="another ingest"):
        _write(files, tmp_path / "h")
    assert (tmp_path / ".h.tmp").exists() and not (tmp_path / "h").exists()
    with pytest.raises(ConfigError, match="^--range-size: expected an integer in 1..2147483647"):
        _write(files, tmp_path / "i", range_size=0)


def test_files_are_private_to_the_owner(tmp_path):
    graph = _write(_files(tmp_path, n=30, m=40), tmp_path / "g", range_size=8)
    root = Path(graph.path)
    modes = {p.relative_to(root).as_posix(): stat.S_IMODE(p.stat().st_mode) for p in [root, *root.rglob("*")]}
    assert modes.pop(".") == 0o700 and modes.pop("nodes") == 0o700 and modes.pop("edges") == 0o700
    assert set(modes.values()) == {0o600} and len(modes) == 1 + 2 * graph.num_ranges


# -- the reader refuses what is not the format ----------------------------------------------------
def test_the_reader_refuses_what_is_not_the_format(tmp_path):
    graph = _write(_files(tmp_path, n=30, m=40), tmp_path / "g", range_size=8)
    root = Path(graph.path)
    with pytest.raises(DatasetNotFoundError):
        open_partitioned_graph(tmp_path / "nowhere")
    (tmp_path / "empty").mkdir()
    assert "graph.json: no such file" in _message(open_partitioned_graph, tmp_path / "empty")
    meta = json.loads((root / "graph.json").read_text())
    for change, expect in (({"format": "privgraph-partitioned-graph/2"}, "format"),
                           ({"num_ranges": 3}, "'num_ranges' is 3"),
                           ({"num_nodes": "30"}, "'num_nodes'")):
        (root / "graph.json").write_text(json.dumps({**meta, **change}))
        msg = _message(open_partitioned_graph, root)
        assert expect in msg and str(root / "graph.json") in msg and "\n" not in msg
    (root / "graph.json").write_text(json.dumps(meta))
    e, p = read_edge_range(graph, 0)
    pq.write_table(pa.table({"src": e[0][::-1], "dst": e[1][::-1], "private": p[::-1]}), root / range_file("edges", 0))
    where = str(root / range_file("edges", 0))
    with pytest.raises(GraphValidationError) as info:  # the file, the row and the columns; the edges: the owner's
        read_edge_range(graph, 0)
    assert str(info.value) == (f"{where}: row 1 (0-based), columns 'src', 'dst': the edge repeats row 0 or is out of "
                               "(src, dst) order (the values: the owner's private record)")
    assert info.value.private_detail == {"file": where, "row": 1, "edge": e[:, -2].tolist(), "previous": e[:, -1].tolist()}
    pq.write_table(pa.table({"src": [0], "dst": [0], "private": [False]}), root / range_file("edges", 0))
    assert _message(read_edge_range, graph, 0).startswith(f"{where}: row 0 (0-based), column 'dst': an edge outside "
                                                          "range 0 (which holds the edges with src in 0..7, src < dst < 30)")
    pq.write_table(pa.table({"src": pa.array([0, None], pa.int64()), "dst": [1, 2], "private": [False, True]}),
                   root / range_file("edges", 0))
    assert _message(read_edge_range, graph, 0) == f"{where}: row 1 (0-based), column 'src': a null value; the column holds none"
    nodes = pq.read_table(root / range_file("nodes", 1))
    pq.write_table(nodes.slice(1), root / range_file("nodes", 1))
    assert "7 rows; range 1 holds nodes 8..15" in _message(read_node_range, graph, 1)
    (root / range_file("nodes", 2)).unlink()
    assert range_file("nodes", 2) in _message(read_node_range, graph, 2)


def _edit_rows(path: Path, **cells: tuple[int, object]) -> None:
    """Set ``column=(row, value)`` cells of a range file, as a user's ETL or a hand edit might."""
    table = pq.read_table(path)
    cols = table.to_pydict()
    for column, (row, value) in cells.items():
        cols[column][row] = value
    pq.write_table(pa.table(cols, schema=table.schema), path)


def test_the_reader_checks_each_ranges_rows_as_the_loader_does(tmp_path):
    """What GraphData and the generic loader refuse, the reader refuses in the range it reads, for
    every caller (the path at scale reads nothing else): a NaN or infinite feature, a label outside
    graph.json's ``num_classes``, a node in two split parts, an unlabelled node in one. One line
    naming the file, the row and the column; the values only in the owner's record (issue 57)."""
    graph = _write(_files(tmp_path, n=30, m=40), tmp_path / "g", range_size=8)
    root, clean = Path(graph.path), (Path(graph.path) / range_file("nodes", 1)).read_bytes()
    where, note = str(root / range_file("nodes", 1)), "(the values: the owner's private record)"
    rows = read_node_range(graph, 1)
    labelled, unlabelled = int(np.flatnonzero(rows["train"])[0]), int(np.flatnonzero(rows["y"] == -1)[0])
    assert graph.num_classes == 4

    for value in (np.nan, np.inf, -np.inf):
        _edit_rows(root / range_file("nodes", 1), x=(5, [0.25, 271828.125, value, 0.5, value]))
        with pytest.raises(GraphValidationError) as info:
            read_node_range(graph, 1)
        assert str(info.value) == f"{where}: row 5 (0-based), column 'x' (feature 2): a NaN or infinite value; features are finite {note}"
        assert info.value.private_detail["row"] == 5 and info.value.private_detail["features"][1] == 271828.125
        assert _message(load_partitioned_graph, root) == str(info.value)  # the reader's message, not GraphData's
        assert set(read_node_range(graph, 1, ["y"])) == {"y"}  # the rows read are checked: x is not
    (root / range_file("nodes", 1)).write_bytes(clean)

    for label in (4, 777, -2):  # num_classes is 4: labels are -1..3
        _edit_rows(root / range_file("nodes", 1), y=(labelled, label))
        with pytest.raises(GraphValidationError) as info:
            read_node_range(graph, 1, ["y"])
        assert str(info.value) == (f"{where}: row {labelled} (0-based), column 'y': a label outside -1..num_classes - 1 "
                                   f"(num_classes: graph.json's declared class count; -1 marks an unlabelled node) {note}")
        # the label is in the owner's record, not in the message (its path, a temporary directory, may hold digits)
        assert info.value.private_detail["label"] == label and str(label) not in str(info.value).replace(where, "")
    (root / range_file("nodes", 1)).write_bytes(clean)

    _edit_rows(root / range_file("nodes", 1), test=(labelled, True))  # also in train
    assert _message(read_node_range, graph, 1) == (f"{where}: row {labelled} (0-based), columns 'train', 'val', "
                                                   "'test': a node in more than one split part; the parts are disjoint")
    _edit_rows(root / range_file("nodes", 1), test=(labelled, False), val=(unlabelled, True))
    assert _message(read_node_range, graph, 1) == (f"{where}: row {unlabelled} (0-based), columns 'y', 'train', 'val', "
                                                   "'test': an unlabelled node (y = -1) in a split part; a node "
                                                   "without a label can be in no part")
    (root / range_file("nodes", 1)).write_bytes(clean)

    # graph.json's num_classes: the declared class count, cross-checked against every label
    meta = json.loads((root / "graph.json").read_text())
    (root / "graph.json").write_text(json.dumps({**meta, "num_classes": 2}))
    labels = np.load(tmp_path / "y.npy")
    i, r = divmod(int(np.flatnonzero(labels >= 2)[0]), 8)  # the first label of 2 or more: its range, its row
    assert _message(load_partitioned_graph, root).startswith(
        f"{root / range_file('nodes', i)}: row {r} (0-based), column 'y': a label outside -1..num_classes - 1")
    for bad in (1001, -1, 2.5, None, True):
        (root / "graph.json").write_text(json.dumps({**meta, "num_classes": bad}))
        msg = _message(open_partitioned_graph, root)
        assert msg.startswith(f"{root / 'graph.json'}: 'num_classes' is not an integer in 0..1000")
        assert "1001" not in msg.replace(str(root), "")  # the value is not quoted (the path may hold any digits)
    (root / "graph.json").write_text(json.dumps({**meta, "num_classes": 9}))  # more classes than labels: declared
    assert np.array_equal(load_partitioned_graph(root).y, labels)
    (root / "graph.json").write_text(json.dumps({**meta, "has_labels": False, "num_classes": 4}))
    assert "'num_classes' is set but 'has_labels' is false" in _message(open_partitioned_graph, root)


def test_a_graph_in_an_s3_bucket_reads_the_same(tmp_path, moto_endpoint, monkeypatch):
    import boto3

    for k, v in (("AWS_ACCESS_KEY_ID", "testing"), ("AWS_SECRET_ACCESS_KEY", "testing"), ("AWS_DEFAULT_REGION", "us-east-1")):
        monkeypatch.setenv(k, v)
    graph = _write(_files(tmp_path, n=40, m=70), tmp_path / "g", range_size=16)
    s3 = boto3.client("s3", endpoint_url=moto_endpoint)
    s3.create_bucket(Bucket="privgraph-partitioned")
    for p in Path(graph.path).rglob("*"):
        if p.is_file():
            s3.upload_file(str(p), "privgraph-partitioned", "graphs/g/" + p.relative_to(graph.path).as_posix())
    query = f"?endpoint_override={moto_endpoint.removeprefix('http://')}&scheme=http"
    remote = open_partitioned_graph(f"s3://privgraph-partitioned/graphs/g{query}")
    assert remote.metadata() == graph.metadata()
    _assert_same_graph(load_partitioned_graph(remote.path), load_partitioned_graph(graph.path))
    s3.delete_object(Bucket="privgraph-partitioned", Key="graphs/g/" + range_file("edges", 1))
    msg = _message(read_edge_range, remote, 1)
    assert msg.startswith(f"s3://privgraph-partitioned/graphs/g/{range_file('edges', 1)}: no such file")
    with pytest.raises(DatasetNotFoundError, match=r"not found: s3://privgraph-partitioned/nothing$"):
        open_partitioned_graph(f"s3://privgraph-partitioned/nothing{query}")


def test_the_ingest_writes_into_an_s3_bucket_all_or_nothing(tmp_path, moto_endpoint, monkeypatch):
    """``privgraph ingest`` into ``s3://`` (moto's server): the same graph as a local ingest; a
    prefix that holds objects is refused; a failure after ranges were uploaded deletes them; a
    bucket that cannot be listed is refused before any input is read; the CLI prints the URI
    without its query string or credentials."""
    import uuid

    import boto3

    aws = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": "us-east-1"}
    for k, v in aws.items():
        monkeypatch.setenv(k, v)
    bucket = f"privgraph-ingest-{uuid.uuid4().hex[:8]}"
    s3 = boto3.client("s3", endpoint_url=moto_endpoint)
    s3.create_bucket(Bucket=bucket)
    keys = lambda prefix: sorted(o["Key"] for o in s3.list_objects_v2(Bucket=bucket, Prefix=prefix).get("Contents", []))  # noqa: E731
    query = f"?endpoint_override={moto_endpoint.removeprefix('http://')}&scheme=http"
    files = _files(tmp_path, n=60, m=90)
    uri = f"s3://{bucket}/graphs/g{query}"
    graph = _write(files, uri, range_size=25)
    assert graph.path == uri
    assert open_partitioned_graph(uri).metadata() == _write(files, tmp_path / "local", range_size=25).metadata()
    _assert_same_graph(load_partitioned_graph(uri), _generic(files))
    written = keys("graphs/g/")  # and the directory marker pyarrow leaves when it deletes the probe object
    assert written == sorted(["graphs/g/", "graphs/g/graph.json"] + [f"graphs/g/{range_file(k, i)}"
                                                                     for k in ("nodes", "edges") for i in range(3)])
    with pytest.raises(ConfigError, match=rf"^s3://{bucket}/graphs/g exists \(it holds objects"):
        _write(files, uri, range_size=25)
    assert keys("graphs/g/") == written

    # a duplicate edge in range 1: found after range 0 was uploaded, and range 0 is deleted again
    df = pd.read_csv(files["edges"])
    df = pd.concat([df, pd.DataFrame({"src": [30, 40], "dst": [40, 30], "private": [False, True]})])
    df.to_csv(tmp_path / "dup.csv", index=False)
    uploads: list[str] = []
    real_put = partitioned_destination.RemoteDestination.put
    monkeypatch.setattr(partitioned_destination.RemoteDestination, "put", lambda self, local, name: (uploads.append(name),
                                                                                       real_put(self, local, name)))
    with pytest.raises(GraphValidationError, match="dup.csv"):
        _write({**files, "edges": tmp_path / "dup.csv"}, f"s3://{bucket}/graphs/bad{query}", range_size=25)
    assert uploads == [range_file("nodes", 0), range_file("edges", 0)] and keys("graphs/bad/") == []

    read: list[str] = []
    monkeypatch.setattr(partitioned_writer, "_open_nodes", lambda ins: read.append("nodes"))
    with pytest.raises(ConfigError, match=r"^s3://no-such-bucket-[0-9a-f]+/g: cannot open the destination: bucket '[^']+' does not exist$"):
        _write(files, f"s3://no-such-bucket-{uuid.uuid4().hex[:8]}/g{query}")
    assert read == []
    monkeypatch.undo()

    r = subprocess.run([sys.executable, "-m", "privgraph.cli", "ingest", str(files["edges"]),
                        f"s3://testing:testing@{bucket}/graphs/cli{query}", "--range-size", "25",
                        "--private-records", str(tmp_path / "private")],
                       cwd=REPO, capture_output=True, text=True, timeout=120, env={**os.environ, **aws, "COLUMNS": "200"})
    assert r.returncode == 0, r.stderr
    assert f" into s3://{bucket}/graphs/cli (" in r.stdout and "testing" not in r.stdout + r.stderr, r.stdout
    assert "graphs/cli/graph.json" in keys("graphs/cli/")


# -- the command ----------------------------------------------------------------------------------
def test_the_ingest_command_prints_public_metadata_only_and_fails_in_one_line(tmp_path):
    files = _files(tmp_path, n=60, m=90)
    cmd = [sys.executable, "-m", "privgraph.cli", "ingest", str(files["edges"]), str(tmp_path / "g"),
           "--features", str(files["features"]), "--labels", str(files["labels"]), "--split", str(files["split"]),
           "--range-size", "25", "--private-records", str(tmp_path / "private")]
    env = {**os.environ, "COLUMNS": "200"}
    r = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=120, env=env)
    assert r.returncode == 0, r.stderr
    assert re.fullmatch(rf"ingested 60 nodes in 3 range\(s\) of up to 25 into {re.escape(str(tmp_path / 'g'))} "
                        r"\(\d+\.\d s\)\n", r.stdout), r.stdout
    assert r.stderr.splitlines() == ["edges read and routed to their ranges", "3 ranges of up to 25 nodes written"]
    _assert_same_graph(load_partitioned_graph(tmp_path / "g"), _generic(files))
    r = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=120, env=env)
    assert r.returncode == 2 and r.stdout == "" and "Traceback" not in r.stderr
    assert r.stderr.startswith("error: ") and "never overwrites" in r.stderr and len(r.stderr.splitlines()) == 1


# -- real data -------------------------------------------------------------------------------------
@pytest.mark.dataset
def test_cora_through_the_generic_files(tmp_path, cora_root):
    from privgraph.ingest.datasets import load_dataset

    cora = load_dataset("cora", root=cora_root, rho=0.2)
    files = {"edges": tmp_path / "edges.parquet", "features": tmp_path / "x.npy", "labels": tmp_path / "y.npy",
             "split": tmp_path / "split.csv"}
    e = np.concatenate([cora.edges_public[::-1], cora.edges_private], axis=1)  # public ones as (v, u)
    flags = np.r_[np.zeros(cora.edges_public.shape[1], bool), np.ones(cora.edges_private.shape[1], bool)]
    pd.DataFrame({"src": e[0], "dst": e[1], "secret": flags}).to_parquet(files["edges"])
    np.save(files["features"], cora.x)
    np.save(files["labels"], cora.y)
    part = np.select([cora.train_mask, cora.val_mask, cora.test_mask], ["train", "val", "test"], "")
    pd.DataFrame({"split": part}).to_csv(files["split"], index=False)
    graph = _write(files, tmp_path / "cora", range_size=1000, private_column="secret")
    assert (graph.num_nodes, graph.num_ranges, graph.num_features) == (2708, 3, 1433)
    loaded = load_partitioned_graph(graph.path)
    _assert_same_graph(loaded, _generic(files, private_column="secret"))
    _assert_same_graph(loaded, cora)
