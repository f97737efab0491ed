"""A user's own graph, table-driven: every labels shape, unlabelled nodes, every split file shape
and split fractions on every loader, and each failure mode with its one-line message and exit 2.

The shapes are docs/your-own-graph.md's; each case writes its files into tmp_path and loads
them through :func:`privgraph.ingest.datasets.load_dataset`, as an ingest does.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from PIL import Image

from privgraph.config.disclosure import Disclosure, disclosure_of
from privgraph.ingest.datasets import check_dataset_options, load_dataset
from privgraph.errors import DatasetNotFoundError, GraphValidationError, exit_code_for
from privgraph.graph import UNLABELLED, GraphData
from privgraph.mechanisms.features.label_rr import LabelRR
from privgraph.seeding import noise_generator

N = 12
EDGES = "src,dst\n" + "".join(f"{i},{(i + 1) % N}\n" for i in range(N)) + "0,6\n3,9\n"
Y = [0, 1, 2, 0, 1, 2, 0, 1, 2, 0, 1, 2]


def _files(d: Path, **files: str | bytes | Callable[[Path], None]) -> None:
    d.mkdir(parents=True, exist_ok=True)
    (d / "edges.csv").write_text(EDGES)
    np.save(d / "x.npy", np.random.default_rng(0).random((N, 3)))
    for name, body in files.items():
        name = name.replace("__", ".")
        if callable(body):
            body(d / name)
        elif isinstance(body, bytes):
            (d / name).write_bytes(body)
        else:
            (d / name).write_text(body)


def _load(d: Path, **options) -> GraphData:
    opts = {"edges": "edges.csv", "features": "x.npy", **options}
    check_dataset_options("generic", opts)
    return load_dataset("generic", root=d, **opts)


def _parquet(df: pd.DataFrame) -> Callable[[Path], None]:
    return lambda p: df.to_parquet(p)


def _npy(a: np.ndarray) -> Callable[[Path], None]:
    return lambda p: np.save(p, a)


UNL = [0, -1, 2, 0, -1, 2, 0, 1, 2, 0, 1, -1]  # nodes 1, 4 and 11 unlabelled

LABEL_SHAPES = [
    ("one column", {"labels__csv": "label\n" + "".join(f"{v}\n" for v in Y)}, Y),
    ("one column, -1 and empty cells", {"labels__csv": "label\n0\n\n2\n0\n-1\n2\n0\n1\n2\n0\n1\n-1\n"}, UNL),
    ("id,label in any order, ids missing",
     {"labels__csv": "id,label\n" + "".join(f"{i},{Y[i]}\n" for i in (10, 2, 0, 3, 5, 6, 7, 8, 9))}, UNL),
    ("label,id (columns swapped)", {"labels__csv": "label,id\n" + "".join(f"{Y[i]},{i}\n" for i in range(N))}, Y),
    ("id,label with empty label cells",
     {"labels__csv": "id,label\n" + "".join(f"{i},{'' if UNL[i] < 0 else UNL[i]}\n" for i in range(N))}, UNL),
    ("parquet id,label", {"labels__parquet": _parquet(pd.DataFrame({"id": [11, 0, 2], "label": [2, 1, 0]}))},
     [1, -1, 0] + [-1] * 8 + [2]),
    ("parquet one nullable column",
     {"labels__parquet": _parquet(pd.DataFrame({"y": pd.array([None if v < 0 else v for v in UNL], dtype="Int64")}))}, UNL),
    ("npy with -1", {"labels__npy": _npy(np.array(UNL))}, UNL),
]


@pytest.mark.parametrize("files,expected", [c[1:] for c in LABEL_SHAPES], ids=[c[0] for c in LABEL_SHAPES])
def test_labels_shapes(tmp_path: Path, files, expected) -> None:
    _files(tmp_path, **files)
    name = next(iter(files)).replace("__", ".")
    g = _load(tmp_path, labels=name)
    assert g.y.tolist() == expected
    assert g.labelled().tolist() == [v != UNLABELLED for v in expected]
    assert g.train_mask is None  # a generic graph has no split until one is given


# -- splits ---------------------------------------------------------------------------------------
TRAIN, VAL, TEST = [0, 3, 6, 9], [2, 5], [7, 8, 10]


def _masks(n: int, *parts: list[int]) -> list[list[bool]]:
    return [[i in p for i in range(n)] for p in parts]


SPLIT_FILES = [
    ("json id lists", "split.json", json.dumps({"train": TRAIN, "val": VAL, "test": TEST})),
    ("json boolean masks", "split.json", json.dumps(dict(zip(("train", "val", "test"), _masks(N, TRAIN, VAL, TEST))))),
    ("csv id,split", "split.csv",
     "id,split\n" + "".join(f"{i},{s}\n" for s, ids in (("test", TEST), ("train", TRAIN), ("val", VAL)) for i in ids)),
    ("csv one split column", "split.csv",
     "split\n" + "".join(("train" if i in TRAIN else "val" if i in VAL else "test" if i in TEST else "") + "\n"
                         for i in range(N))),
]


@pytest.mark.parametrize("name,body", [c[1:] for c in SPLIT_FILES], ids=[c[0] for c in SPLIT_FILES])
def test_split_file_shapes_on_a_generic_graph_with_unlabelled_nodes(tmp_path: Path, name: str, body: str) -> None:
    _files(tmp_path, **{"labels.csv": "label\n" + "".join(("" if v < 0 else str(v)) + "\n" for v in UNL)},
           **{name.replace(".", "__"): body})
    g = _load(tmp_path, labels="labels.csv", split=name)
    assert [np.flatnonzero(m).tolist() for m in (g.train_mask, g.val_mask, g.test_mask)] == [TRAIN, VAL, TEST]
    assert g.meta["split"] == f"split file {name}"


def _image_dir(d: Path) -> None:
    (d / "img").mkdir(parents=True)
    for i in range(N):
        Image.fromarray(np.full((8, 8, 3), 20 * i, np.uint8)).save(d / "img" / f"{i}.png")
    (d / "nodes.csv").write_text("id,image,label\n" + "".join(f"{i},img/{i}.png,{Y[i]}\n" for i in range(N)))
    (d / "edges.csv").write_text(EDGES)


#: (dataset, options besides the split, node count, needs the real data root)
LOADERS = [
    ("generic", {"edges": "edges.csv", "features": "x.npy", "labels": "y.npy"}, N, False),
    ("sbm", {"num_nodes": 60}, 60, False),
    ("images", {"path": "graph"}, N, False),
    ("cora", {}, 2708, True),
    ("facebook", {}, 22470, True),
]


def _loader_root(tmp_path: Path, dataset: str, real: bool, request: pytest.FixtureRequest) -> Path:
    if real:  # the shared data_root fixture (skips, with its reason, without the real data)
        return request.getfixturevalue("data_root")
    _files(tmp_path)
    np.save(tmp_path / "y.npy", np.array(Y))
    if dataset == "images":
        _image_dir(tmp_path / "graph")
    return tmp_path


@pytest.mark.parametrize("dataset,options,n,real", LOADERS, ids=[c[0] for c in LOADERS])
@pytest.mark.parametrize("form", ["json", "csv", "fractions"])
def test_every_loader_takes_the_same_split_options(tmp_path: Path, request, dataset, options, n, real, form) -> None:
    root = _loader_root(tmp_path, dataset, real, request)
    train, val, test = list(range(0, n, 4)), list(range(1, n, 4)), list(range(2, n, 4))
    opts = dict(options)
    if form == "fractions":
        opts.update(train=0.5, val=0.25)
    else:
        split_dir = tmp_path / "splits"
        split_dir.mkdir(exist_ok=True)
        if form == "json":
            (split_dir / "s.json").write_text(json.dumps({"train": train, "val": val, "test": test}))
        else:
            (split_dir / "s.csv").write_text(
                "id,split\n" + "".join(f"{i},{s}\n" for s, ids in (("train", train), ("val", val), ("test", test)) for i in ids))
        opts["split"] = str(split_dir / f"s.{form}")  # an absolute path stays as given under any root
    check_dataset_options(dataset, opts)
    g = load_dataset(dataset, root=root, **opts)
    masks = np.stack([g.train_mask, g.val_mask, g.test_mask])
    assert masks.sum(0).max() == 1  # disjoint
    if form == "fractions":
        assert masks.sum(1).tolist() == [round(0.5 * n), round(0.25 * n), n - round(0.5 * n) - round(0.25 * n)]
        # the same seed draws the same split; another seed another one
        again = load_dataset(dataset, root=root, **opts)
        assert np.array_equal(again.train_mask, g.train_mask)
        other = load_dataset(dataset, root=root, node_split_seed=1, **opts)
        assert not np.array_equal(other.train_mask, g.train_mask)
    else:
        assert [np.flatnonzero(m).tolist() for m in masks] == [train, val, test]


def test_random_fractions_split_the_labelled_nodes_only(tmp_path: Path) -> None:
    _files(tmp_path, **{"y.npy": _npy(np.array(UNL))})
    g = _load(tmp_path, labels="y.npy", train=0.5, val=0.25)
    masks = np.stack([g.train_mask, g.val_mask, g.test_mask])
    assert masks.any(0).tolist() == (np.array(UNL) >= 0).tolist()  # every labelled node, no other
    assert masks.sum(1).tolist() == [4, 2, 3]  # of the 9 labelled nodes


def test_label_rr_never_touches_unlabelled_nodes(tmp_path: Path) -> None:
    _files(tmp_path, **{"y.npy": _npy(np.array(UNL))})
    g = _load(tmp_path, labels="y.npy")
    big = GraphData.from_edges(600, np.zeros((2, 0), np.int64), y=np.tile(np.array(UNL), 50))
    out = LabelRR(epsilon=0.1, num_classes=3).privatize(big, noise_generator(0))
    unl = big.y == UNLABELLED
    assert (out.y[unl] == UNLABELLED).all()
    assert ((out.y[~unl] >= 0) & (out.y[~unl] < 3)).all() and (out.y[~unl] != big.y[~unl]).mean() > 0.3
    assert g.labelled().sum() == 9


def test_which_nodes_are_labelled_is_in_the_public_fingerprint(tmp_path: Path) -> None:
    """The presence of a label is public (as the split is): it moves the fingerprint; a private
    label's value does not."""
    from privgraph.config.loader import parse_config

    cfg = parse_config({"pipelines": {"p": {
        "dataset": {"name": "generic", "options": {"edges": "e.csv"}},
        "labels": {"mechanism": "label_rr", "epsilon": 1.0, "num_classes": 3},
        "budget": {"labels": 1.0}}}})
    disc = disclosure_of(cfg, "p")
    base = GraphData.from_edges(N, np.zeros((2, 0), np.int64), y=np.array(UNL))
    value = base.replace(y=np.where(np.arange(N) == 0, 1, base.y))  # node 0: label 0 -> 1 (private)
    presence = base.replace(y=np.where(np.arange(N) == 0, -1, base.y))  # node 0: now unlabelled
    assert isinstance(disc, Disclosure)
    assert disc.fingerprint(value) == disc.fingerprint(base)
    assert disc.fingerprint(presence) != disc.fingerprint(base)


# -- failure modes: one line naming the file (and line), exit code 2 -----------------------------
FAILURES = [
    ("labels with three columns", {"labels__csv": "id,label,x\n0,1,2\n"}, {"labels": "labels.csv"},
     GraphValidationError, "labels.csv: cannot read labels from columns ['id', 'label', 'x']; expected one column"),
    ("label below -1", {"labels__csv": "label\n0\n-2\n"}, {"labels": "labels.csv", "num_nodes": N},
     GraphValidationError, "column 'label': labels below -1 at {d}/labels.csv: lines [3]"),
    ("label not an integer", {"labels__csv": "id,label\n0,cat\n"}, {"labels": "labels.csv"},
     GraphValidationError, "column 'label': non-integer values at {d}/labels.csv: lines [2]"),
    ("label id out of range", {"labels__csv": "id,label\n0,1\n12,0\n"}, {"labels": "labels.csv"},
     GraphValidationError, "column 'id': node ids outside 0..11 at {d}/labels.csv: lines [3]"),
    ("label id twice", {"labels__csv": "id,label\n4,1\n0,1\n4,0\n"}, {"labels": "labels.csv"},
     GraphValidationError, "column 'id': node ids listed twice at {d}/labels.csv: lines [4]"),
    ("split file missing", {}, {"split": "nope.json"}, DatasetNotFoundError, "split file not found: {d}/nope.json"),
    ("split json not an object", {"s__json": "[1, 2]"}, {"split": "s.json"}, GraphValidationError,
     "{d}/s.json: expected an object with keys ['train', 'val', 'test'], got list"),
    ("split json missing a part", {"s__json": '{"train": [0], "val": [1]}'}, {"split": "s.json"},
     GraphValidationError, "{d}/s.json: missing key(s) ['test']"),
    ("split json unknown part", {"s__json": '{"train": [0], "val": [1], "test": [2], "dev": [3]}'}, {"split": "s.json"},
     GraphValidationError, "{d}/s.json: unknown key(s) ['dev']"),
    ("split id out of range", {"s__json": '{"train": [0, 12], "val": [1], "test": [2]}'}, {"split": "s.json"},
     GraphValidationError, "{d}/s.json: key 'train': entry 1: a node id outside 0..11"),
    ("split id twice", {"s__json": '{"train": [0, 0], "val": [1], "test": [2]}'}, {"split": "s.json"},
     GraphValidationError, "{d}/s.json: key 'train': entry 1 lists the node of entry 0 again"),
    ("split node in two parts", {"s__json": '{"train": [0, 1], "val": [1], "test": [2]}'}, {"split": "s.json"},
     GraphValidationError, "{d}/s.json: key 'val': entry 0 is a node also in 'train'; the parts must be disjoint"),
    ("split mask of the wrong length", {"s__json": '{"train": [true], "val": [1], "test": [2]}'}, {"split": "s.json"},
     GraphValidationError, "{d}/s.json: key 'train': a boolean mask of 1 entries; the graph has 12 nodes"),
    ("split part empty", {"s__json": '{"train": [0], "val": [], "test": [2]}'}, {"split": "s.json"},
     GraphValidationError, "{d}/s.json: the 'val' part has no node"),
    ("split not JSON", {"s__json": "{train: 1"}, {"split": "s.json"}, GraphValidationError, "{d}/s.json: not valid JSON"),
    ("split csv unknown value", {"s__csv": "id,split\n0,train\n1,dev\n"}, {"split": "s.csv"}, GraphValidationError,
     "column 'split': values other than train, val, test or empty at {d}/s.csv: lines [3] (1-based line numbers) "
     "(the values: the owner's private record)"),
    ("split csv wrong columns", {"s__csv": "node,part\n0,train\n"}, {"split": "s.csv"}, GraphValidationError,
     "{d}/s.csv: cannot read a split from columns ['node', 'part']; expected columns id,split or one column split"),
    ("split csv one column, wrong length", {"s__csv": "split\ntrain\nval\n"}, {"split": "s.csv"}, GraphValidationError,
     "{d}/s.csv: 2 rows in the one-column split file; the graph has 12 nodes"),
    ("unlabelled node in the split", {"labels__npy": _npy(np.array(UNL)),
                                      "s__csv": "id,split\n0,train\n1,val\n2,test\n4,test\n"},
     {"labels": "labels.npy", "split": "s.csv"}, GraphValidationError,
     "{d}/s.csv: unlabelled nodes in the split at {d}/s.csv: lines [3, 5]"),
    # refused with the configuration, before anything is read
    ("split and fractions", {}, {"split": "s.json", "train": 0.5}, ValueError,
     "options.train: set either a split file (split) or random fractions (train, val), not both"),
    ("split of another type", {}, {"split": "s.txt"}, ValueError,
     "options.split: expected the path of a .json or .csv split file, got 's.txt'"),
    ("split seed as an option", {}, {"node_split_seed": 3}, ValueError,
     "options.node_split_seed: a split seed is configuration, not a dataset option"),
    ("fraction out of range", {}, {"train": 1.5}, ValueError, "options.train: a node fraction in (0, 1), got 1.5"),
    ("an option of the wrong type (pydantic, per dataset)", {}, {"num_nodes": "many"}, ValueError,
     "options.num_nodes: Input should be a valid integer, got 'many'"),
    ("a column name of the wrong type", {}, {"private_column": 3}, ValueError,
     "options.private_column: Input should be a valid string, got 3"),
    ("an unknown option", {}, {"splits": "s.json"}, ValueError, "options.splits: unknown option of dataset 'generic'"),
]


@pytest.mark.parametrize("files,options,error,says", [c[1:] for c in FAILURES], ids=[c[0] for c in FAILURES])
def test_each_failure_is_one_line_naming_the_file(tmp_path: Path, files, options, error, says) -> None:
    _files(tmp_path, **files)
    with pytest.raises(error) as info:
        _load(tmp_path, **options)
    msg = str(info.value)
    assert "\n" not in msg
    assert says.format(d=tmp_path) in msg, msg
    if getattr(info.value, "private_detail", None):  # a cell's value: the owner's record, not the message
        assert msg.endswith("(the values: the owner's private record)"), msg
    if issubclass(error, (GraphValidationError, DatasetNotFoundError)):
        assert exit_code_for(info.value) == 2


def test_scores_from_every_node_refuse_unlabelled_nodes_in_one_line(tmp_path: Path) -> None:
    """The SHAP surrogate trains on the public nodes' labels: rule 'all' over unlabelled nodes is
    one line (exit 2), rule 'random' draws among the labelled nodes only."""
    from privgraph.ingest.scoring.config import ScoresConfig
    from privgraph.ingest.scoring.theta import compute_scores

    big = GraphData.from_edges(60, np.zeros((2, 0), np.int64), x=np.random.default_rng(0).random((60, 4)),
                               y=np.tile(np.array(UNL), 5))
    cfg = ScoresConfig.model_validate({"gamma": 1.0, "public_nodes": {"rule": "all", "all_features_public": True, "charge_epsilon": 1.0, "num_classes": 3}})
    with pytest.raises(GraphValidationError, match=r"15 of the public nodes are unlabelled") as info:
        compute_scores(big, cfg, seed=0)
    assert exit_code_for(info.value) == 2 and "\n" not in str(info.value)
    cfg = ScoresConfig.model_validate({"gamma": 1.0, "public_nodes": {"rule": "random", "size": 40}})
    out = compute_scores(big, cfg, seed=0)
    assert out.theta.shape == (4,)
