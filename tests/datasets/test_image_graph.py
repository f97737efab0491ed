"""Image graphs: the directory format, its loader's errors (file and line), the bundled photo graph
(seeded, byte-deterministic, idempotent, atomic) and the ``images`` / ``photos`` datasets."""

from __future__ import annotations

import csv
import hashlib
import json
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from privgraph.ingest.datasets import check_dataset_options, load_dataset
from privgraph.ingest.datasets.image_graph import load_image_graph
from privgraph.ingest.datasets.photo_graph import (
    PHOTO_CLASSES,
    PHOTO_GRAPH_MARKER,
    PHOTO_GRAPH_VERSION,
    photo_graph_dir,
    read_photo_graph_marker,
    write_photo_graph,
)
from privgraph.errors import DatasetNotFoundError, GraphValidationError

N = 48  # small graphs: CI runs on 2 cores


def _snapshot(directory: Path) -> dict[str, tuple[int, int, str]]:
    """Every file under ``directory``: (size, mtime_ns, sha256), by relative path."""
    out = {}
    for p in sorted(directory.rglob("*")):
        if p.is_file():
            st = p.stat()
            digest = hashlib.sha256(p.read_bytes()).hexdigest()
            out[str(p.relative_to(directory))] = (st.st_size, st.st_mtime_ns, digest)
    return out


def _rows(path: Path) -> list[dict[str, str]]:
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


@pytest.fixture(scope="module")
def photos(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_photo_graph(tmp_path_factory.mktemp("photos") / "graph", num_nodes=N, seed=3, private_fraction=0.25)


# -- the photo graph --------------------------------------------------------------------------
def test_round_trip_matches_the_csv_files(photos):
    g = load_image_graph(photos)
    nodes, edges = _rows(photos / "nodes.csv"), _rows(photos / "edges.csv")
    m = round(3 * N)  # average degree 6
    assert g.num_nodes == N == len(nodes) and g.num_edges == m == len(edges)
    assert g.x is None and g.meta["feature_bounds"] is None
    # labels and splits, node by node
    by_id = {int(r["id"]): r for r in nodes}
    assert g.y.tolist() == [int(by_id[i]["label"]) for i in range(N)]
    assert sorted(set(g.y.tolist())) == list(range(len(PHOTO_CLASSES)))
    assert np.bincount(g.y).tolist() == [10, 10, 10, 9, 9]  # balanced over the 5 photos
    for s in ("train", "val", "test"):
        assert getattr(g, f"{s}_mask").tolist() == [by_id[i]["split"] == s for i in range(N)]
    assert (g.train_mask.sum(), g.val_mask.sum(), g.test_mask.sum()) == (24, 12, 12)
    # public and private edges
    private = {tuple(sorted((int(r["src"]), int(r["dst"])))) for r in edges if r["private"] == "true"}
    public = {tuple(sorted((int(r["src"]), int(r["dst"])))) for r in edges if r["private"] == "false"}
    assert set(map(tuple, g.edges_private.T.tolist())) == private and len(private) == round(0.25 * m)
    assert set(map(tuple, g.edges_public.T.tolist())) == public
    # homophilous: most edges join two crops of one photo
    e = g.edges("all")
    assert (g.y[e[0]] == g.y[e[1]]).mean() > 0.7
    # meta: absolute image paths in node order, under the directory
    assert g.meta["name"] == "images" and g.meta["source"] == "image graph"
    assert g.meta["image_dir"] == str(photos.absolute())
    assert isinstance(g.meta["image_paths"], tuple) and len(g.meta["image_paths"]) == N
    assert list(g.meta["image_paths"]) == [str(photos.absolute() / by_id[i]["image"]) for i in range(N)]
    for p in g.meta["image_paths"][:5]:
        with Image.open(p) as im:
            assert im.format == "PNG" and im.size == (128, 128) and im.mode == "RGB"
    # image names say nothing of the class
    assert not any(c.name in p for c in PHOTO_CLASSES for p in g.meta["image_paths"])


def test_a_face_class_and_faceless_classes(photos):
    from skimage.color import rgb2gray
    from skimage.data import lbp_frontal_face_cascade_filename
    from skimage.feature import Cascade

    marker = read_photo_graph_marker(photos)
    classes = {c["name"]: c for c in marker["classes"]}
    assert classes["astronaut"]["face"] is True and classes["coffee"]["face"] is False
    g = load_image_graph(photos)
    faces = lambda label: [  # noqa: E731
        len(Cascade(lbp_frontal_face_cascade_filename()).detect_multi_scale(
            img=rgb2gray(np.asarray(Image.open(g.meta["image_paths"][i]))), scale_factor=1.2, step_ratio=1,
            min_size=(20, 20), max_size=(128, 128)))
        for i in np.flatnonzero(g.y == label)[:4]
    ]
    # every astronaut crop keeps her face whole; crops of a photo without a face show none
    assert all(k >= 1 for k in faces(classes["astronaut"]["label"]))
    for name in ("coffee", "rocket"):
        assert not classes[name]["face"] and faces(classes[name]["label"]) == [0, 0, 0, 0]


def test_same_seed_same_bytes_another_seed_differs(tmp_path, photos):
    a = write_photo_graph(tmp_path / "a", num_nodes=N, seed=3, private_fraction=0.25)
    content = lambda d: {k: v[2] for k, v in _snapshot(d).items()}  # noqa: E731
    assert content(a) == content(photos)  # byte-identical, a second write
    b = write_photo_graph(tmp_path / "b", num_nodes=N, seed=4, private_fraction=0.25)
    ca, cb = content(a), content(b)
    assert ca.keys() == cb.keys()
    assert ca["nodes.csv"] != cb["nodes.csv"] and ca["edges.csv"] != cb["edges.csv"]
    assert sum(ca[k] != cb[k] for k in ca if k.startswith("images/")) > N // 2
    marker = json.loads((a / PHOTO_GRAPH_MARKER).read_text())
    assert marker["version"] == PHOTO_GRAPH_VERSION
    assert marker["params"] == {"num_nodes": N, "seed": 3, "private_fraction": 0.25}
    # the private fraction draws only which edges are private
    c = write_photo_graph(tmp_path / "c", num_nodes=N, seed=3, private_fraction=0.5)
    cc = content(c)
    assert all(cc[k] == ca[k] for k in ca if k.startswith("images/")) and cc["nodes.csv"] == ca["nodes.csv"]
    assert cc["edges.csv"] != ca["edges.csv"]
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temporary directory left


def test_idempotent_and_replaces_only_its_own(tmp_path):
    d = write_photo_graph(tmp_path / "g", num_nodes=20, seed=0)
    before, ino = _snapshot(d), d.stat().st_ino
    assert write_photo_graph(d, num_nodes=20, seed=0) == d
    assert _snapshot(d) == before and d.stat().st_ino == ino  # untouched: same files, same mtimes
    # other parameters: the old photo graph is replaced
    write_photo_graph(d, num_nodes=20, seed=1)
    assert read_photo_graph_marker(d)["params"]["seed"] == 1 and _snapshot(d) != before
    # a directory that is not a photo graph is never replaced
    foreign = tmp_path / "mine"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("keep")
    with pytest.raises(ValueError, match="holds no photo graph; refusing to replace it"):
        write_photo_graph(foreign, num_nodes=20)
    assert (foreign / "notes.txt").read_text() == "keep"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["g", "mine"]


@pytest.mark.parametrize(
    ("kwargs", "says"),
    [
        ({"num_nodes": 5}, "num_nodes: expected an int >= 10"),
        ({"num_nodes": True}, "num_nodes: expected an int >= 10"),
        ({"seed": -1}, "seed: expected an int >= 0"),
        ({"private_fraction": 1.5}, r"private_fraction: expected a number in \[0, 1\]"),
        ({"private_fraction": float("nan")}, r"private_fraction: expected a number in \[0, 1\]"),
    ],
)
def test_bad_photo_graph_parameters(tmp_path, kwargs, says):
    with pytest.raises(ValueError, match=says):
        write_photo_graph(tmp_path / "g", **kwargs)
    assert not list(tmp_path.iterdir())


# -- the format's errors ---------------------------------------------------------------------
def _png(path: Path, value: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.new("RGB", (8, 8), (value, 0, 0)).save(path, format="PNG")


def _valid(d: Path) -> Path:
    """4 nodes (rows out of id order), 3 edges (one private)."""
    for i in range(4):
        _png(d / "img" / f"{i}.png", 40 * i)
    (d / "nodes.csv").write_text(
        "id,image,label,split\n"
        "0,img/0.png,0,train\n"
        "2,img/2.png,2,val\n"
        "1,img/1.png,1,\n"
        "3,img/3.png,0,test\n"
    )
    (d / "edges.csv").write_text("src,dst,private\n0,1,false\n2,1,true\n3,0,0\n")
    return d


def test_a_hand_written_image_graph(tmp_path):
    d = _valid(tmp_path)
    g = load_image_graph(d)
    assert g.num_nodes == 4 and g.y.tolist() == [0, 1, 2, 0]  # by id, not by row
    assert g.train_mask.tolist() == [True, False, False, False]
    assert g.val_mask.tolist() == [False, False, True, False]
    assert g.test_mask.tolist() == [False, False, False, True]  # node 1: no split
    assert g.edges_public.T.tolist() == [[0, 1], [0, 3]] and g.edges_private.T.tolist() == [[1, 2]]
    assert g.meta["image_paths"] == tuple(str(d.absolute() / "img" / f"{i}.png") for i in range(4))
    # without the optional columns: no labels, no split, every edge public
    (d / "nodes.csv").write_text("id,image\n1,img/1.png\n0,img/0.png\n")
    (d / "edges.csv").write_text("src,dst\n1,0\n")
    g = load_image_graph(d)
    assert g.y is None and g.train_mask is None and g.edges_public.T.tolist() == [[0, 1]]
    assert g.edges_private.shape == (2, 0)


def _edit(name: str, old: str, new: str):
    def change(d: Path) -> None:
        text = (d / name).read_text()
        assert old in text, (name, old)
        (d / name).write_text(text.replace(old, new, 1))

    return change


def _garbage(d: Path) -> None:
    (d / "img" / "1.png").write_bytes(b"this is not an image\n" * 10)


def _truncated(d: Path) -> None:
    Image.new("RGB", (64, 64)).save(d / "img" / "1.png", format="PNG")
    data = (d / "img" / "1.png").read_bytes()
    (d / "img" / "1.png").write_bytes(data[: len(data) // 2])


def _absolute(d: Path) -> None:
    _edit("nodes.csv", "img/1.png", str(d.absolute() / "img" / "1.png"))(d)


CASES = [
    # (id, change, error class, message fragment)
    ("no nodes.csv", lambda d: (d / "nodes.csv").unlink(), DatasetNotFoundError, "nodes.csv: file not found"),
    ("no edges.csv", lambda d: (d / "edges.csv").unlink(), DatasetNotFoundError, "edges.csv: file not found"),
    ("missing image", lambda d: (d / "img" / "1.png").unlink(), GraphValidationError,
     "nodes.csv line 4: image img/1.png not found"),
    ("unreadable image", _garbage, GraphValidationError, "nodes.csv line 4: image img/1.png is unreadable"),
    ("truncated image", _truncated, GraphValidationError, "nodes.csv line 4: image img/1.png is unreadable"),
    ("duplicate id", _edit("nodes.csv", "3,img/3.png", "2,img/3.png"), GraphValidationError,
     "nodes.csv line 5: column 'id': the id of line 3 again"),
    ("ids not 0..n-1", _edit("nodes.csv", "3,img/3.png", "7,img/3.png"), GraphValidationError,
     "nodes.csv line 5: column 'id': an id outside 0..3"),
    ("absolute image path", _absolute, GraphValidationError, "nodes.csv line 4: image path /"),
    ("image path outside", _edit("nodes.csv", "img/1.png", "../img/1.png"), GraphValidationError,
     "nodes.csv line 4: image path ../img/1.png leaves the image graph directory"),
    ("empty image path", _edit("nodes.csv", "img/1.png", ""), GraphValidationError,
     "nodes.csv line 4: missing image path"),
    ("edge id out of range", _edit("edges.csv", "2,1,true", "2,9,true"), GraphValidationError,
     "edges.csv line 3: column 'dst': a node id out of range: ids are 0..3"),
    ("self-loop", _edit("edges.csv", "2,1,true", "2,2,true"), GraphValidationError,
     "edges.csv line 3: a self-loop (src = dst)"),
    ("duplicate edge", _edit("edges.csv", "3,0,0", "3,0,0\n0,1,true"), GraphValidationError,
     "edges.csv line 5: a duplicate edge: the same undirected edge as line 2"),
    ("reversed duplicate edge", _edit("edges.csv", "3,0,0", "3,0,0\n1,0,false"), GraphValidationError,
     "edges.csv line 5: a duplicate edge: the same undirected edge as line 2"),
    ("bad private flag", _edit("edges.csv", "2,1,true", "2,1,maybe"), GraphValidationError,
     "column 'private': expected booleans (true/false or 1/0) at {dir}/edges.csv: lines [3]"),
    ("bad split value", _edit("nodes.csv", "2,val", "2,training"), GraphValidationError,
     "nodes.csv line 3: column 'split': a value other than train, val, test or empty"),
    ("label below -1", _edit("nodes.csv", "3,img/3.png,0", "3,img/3.png,-2"), GraphValidationError,
     "nodes.csv line 5: column 'label': a label below -1: labels are classes"),
    ("non-integer id", _edit("nodes.csv", "3,img/3.png", "x,img/3.png"), GraphValidationError,
     "column 'id': non-integer values at {dir}/nodes.csv: lines [5]"),
    ("no image column", _edit("nodes.csv", "id,image,", "id,picture,"), GraphValidationError,
     "missing column(s) ['image']"),
    ("no node rows", lambda d: (d / "nodes.csv").write_text("id,image\n"), GraphValidationError,
     "nodes.csv: no node rows"),
]


@pytest.mark.parametrize(("change", "error", "says"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_every_failure_names_file_and_line_and_writes_nothing(tmp_path, change, error, says):
    d = _valid(tmp_path / "graph")
    load_image_graph(d)  # valid before the change
    change(d)
    before = _snapshot(d)
    with pytest.raises(error) as exc:
        load_image_graph(d)
    msg = str(exc.value)
    assert says.format(dir=d.absolute()) in msg, msg
    assert "\n" not in msg
    assert str(d.absolute()) in msg  # names the file: the full path
    if exc.value.private_detail:  # a cell's value (an id, a label, an edge's ends): the owner's record, not the message
        assert msg.endswith("(the values: the owner's private record)"), msg
    assert _snapshot(d) == before and sorted(p.name for p in tmp_path.iterdir()) == ["graph"]


def test_every_offending_row_is_checked_and_the_first_few_listed(tmp_path):
    d = _valid(tmp_path)
    for i in (1, 2, 3):
        (d / "img" / f"{i}.png").unlink()
    with pytest.raises(GraphValidationError) as exc:
        load_image_graph(d)
    assert "nodes.csv line 3: image img/2.png not found (also at lines [4, 5];" in str(exc.value)


def test_missing_directory(tmp_path):
    with pytest.raises(DatasetNotFoundError, match="image graph directory not found"):
        load_image_graph(tmp_path / "absent")
    assert not list(tmp_path.iterdir())


# -- the datasets ----------------------------------------------------------------------------
def test_images_and_photos_datasets(tmp_path, monkeypatch):
    monkeypatch.setenv("PRIVGRAPH_CACHE_DIR", str(tmp_path / "cache"))
    _valid(tmp_path / "data" / "mine")
    g = load_dataset("images", root=tmp_path / "data", path="mine")  # relative to the data root
    assert g.num_nodes == 4 and g.meta["image_dir"] == str((tmp_path / "data" / "mine").absolute())
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PRIVGRAPH_DATA_ROOT", "data")
    assert load_dataset("images", path="mine").num_edges == 3

    p = load_dataset("photos", num_nodes=60, seed=1)
    where = photo_graph_dir(num_nodes=60, seed=1)
    assert where.parent == tmp_path / "cache" / "datasets" and where.name.startswith("photos-")
    assert read_photo_graph_marker(where)["params"] == {"num_nodes": 60, "seed": 1, "private_fraction": 0.3}
    assert p.num_nodes == 60 and p.meta["name"] == "photos" and p.meta["num_classes"] == 5
    assert p.meta["classes"][0] == "astronaut" and p.meta["face_classes"][0] == 0
    assert p.edges_private.shape[1] == round(0.3 * 180)
    assert all(s.startswith(str(where.absolute())) for s in p.meta["image_paths"])
    before = _snapshot(where)
    again = load_dataset("photos", num_nodes=60, seed=1)  # from the cache: nothing rewritten
    assert _snapshot(where) == before and np.array_equal(again.edges_private, p.edges_private)
    # the node-split options every dataset takes
    s = load_dataset("photos", num_nodes=60, seed=1, train=0.6, val=0.2, drop_cut_edges=True)
    assert (s.train_mask.sum(), s.val_mask.sum(), s.test_mask.sum()) == (36, 12, 12)
    part = np.select([s.train_mask, s.val_mask, s.test_mask], [0, 1, 2])
    e = s.edges("all")
    assert (part[e[0]] == part[e[1]]).all() and 0 < s.num_edges < p.num_edges
    with pytest.raises(ValueError, match="marks itself"):
        load_dataset("photos", num_nodes=60, seed=1, rho=0.1)


def test_dataset_options_are_checked_before_anything_is_read():
    check_dataset_options("images", {"path": "x", "train": 0.5, "drop_cut_edges": True})
    check_dataset_options("photos", {"num_nodes": 60, "seed": 1, "private_fraction": 0.2, "val": 0.2})
    check_dataset_options("photos", {})
    for name, options, says in [
        ("images", {"path": "x", "bogus": 1}, "options.bogus: unknown option of dataset 'images'; its options: path"),
        ("images", {}, "options.path: required by dataset 'images'"),
        ("photos", {"num_nodes": 60, "path": "x"}, "options.path: unknown option of dataset 'photos'"),
        ("photos", {"num_nodes": True}, "options.num_nodes: expected a number"),
        ("photos", {"train": 1.5}, "options.train: a node fraction in (0, 1)"),
        ("images", {"path": 5}, "options.path: expected a file path, got 5"),
    ]:
        with pytest.raises(ValueError) as exc:
            check_dataset_options(name, options)
        assert says in str(exc.value), str(exc.value)

