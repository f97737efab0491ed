"""MUSAE Facebook: small on-disk files in tmp_path, and the real dataset (marked ``dataset``)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from privgraph.ingest.datasets import load_dataset, load_musae_facebook
from privgraph.errors import DatasetNotFoundError, GraphValidationError

TARGET = (
    "id,facebook_id,page_name,page_type\n"
    "0,101,A,tvshow\n"
    "1,102,\"B, Inc.\",company\n"
    "2,103,C,government\n"
    "3,104,D,company\n"
    "4,105,E,politician\n"
    "5,106,F,tvshow\n"
)
FEATURES = {"0": [30, 7], "1": [7], "2": [], "3": [12, 30, 7], "4": [12], "5": [99]}


def _write(
    tmp_path: Path,
    edges: str = "id_1,id_2\n0,1\n1,2\n2,2\n3,4\n4,3\n5,0\n0,1\n",
    features: dict | str = FEATURES,
    target: str = TARGET,
) -> Path:
    d = tmp_path / "musae" / "facebook"
    d.mkdir(parents=True, exist_ok=True)
    (d / "facebook_edges.csv").write_text(edges)
    (d / "facebook_features.json").write_text(
        features if isinstance(features, str) else json.dumps(features)
    )
    (d / "facebook_target.csv").write_text(target)
    return tmp_path


def test_small_files(tmp_path):
    g = load_musae_facebook(_write(tmp_path))
    assert g.num_nodes == 6
    # self-loop (2,2) dropped; (4,3) and the second (0,1) are duplicates
    assert sorted(map(tuple, g.edges_public.T.tolist())) == [(0, 1), (0, 5), (1, 2), (3, 4)]
    assert g.meta["edge_rows"] == 7
    assert g.meta["self_loops_dropped"] == 1
    assert g.meta["duplicate_edges_dropped"] == 2
    assert g.meta["label_names"] == ["company", "government", "politician", "tvshow"]
    assert g.y.tolist() == [3, 0, 1, 0, 2, 3]
    # feature ids {7, 12, 30, 99} compacted to columns 0..3 in sorted order
    assert g.x.dtype == np.float32 and g.x.shape == (6, 4)
    assert g.x.tolist() == [
        [1, 0, 1, 0],
        [1, 0, 0, 0],
        [0, 0, 0, 0],
        [1, 1, 1, 0],
        [0, 1, 0, 0],
        [0, 0, 0, 1],
    ]
    assert g.meta["feature_bounds"] == [0.0, 1.0]
    assert g.meta["feature_bounds_source"] == "dataset definition (binary bag-of-words)"
    assert g.edges_private.shape[1] == 0
    assert not (g.train_mask & g.val_mask).any() and (g.train_mask | g.val_mask | g.test_mask).all()


def test_via_load_dataset(tmp_path):
    g = load_dataset("facebook", root=_write(tmp_path), rho=0.5, split_seed=3, node_split_seed=2)
    assert g.edges_private.shape[1] == 2 and g.edges_public.shape[1] == 2
    assert g.meta["private_edge_fraction"] == 0.5


def test_split_is_seeded(tmp_path):
    root = _write(tmp_path)
    a = load_musae_facebook(root, node_split_seed=1)
    b = load_musae_facebook(root, node_split_seed=1)
    assert np.array_equal(a.train_mask, b.train_mask) and np.array_equal(a.test_mask, b.test_mask)
    assert a.train_mask.sum() == 3 and a.val_mask.sum() == 2 and a.test_mask.sum() == 1  # round()


def test_target_rows_in_any_order(tmp_path):
    lines = TARGET.splitlines()
    root = _write(tmp_path, target="\n".join([lines[0]] + lines[1:][::-1]) + "\n")
    g = load_musae_facebook(root)
    assert g.y.tolist() == [3, 0, 1, 0, 2, 3]


def test_missing_files_name_directory_and_files(tmp_path):
    with pytest.raises(DatasetNotFoundError) as info:
        load_musae_facebook(tmp_path)
    msg = str(info.value)
    assert str(tmp_path / "musae" / "facebook") in msg
    assert "facebook_edges.csv" in msg and "PRIVGRAPH_DATA_ROOT" in msg
    root = _write(tmp_path)
    (root / "musae" / "facebook" / "facebook_features.json").unlink()
    with pytest.raises(DatasetNotFoundError, match=r"missing \['facebook_features.json'\]"):
        load_musae_facebook(root)


def test_non_integer_id_in_edges_names_line_17(tmp_path):
    rows = "".join(f"{i % 6},{(i + 1) % 6}\n" for i in range(15))
    root = _write(tmp_path, edges="id_1,id_2\n" + rows + "3,x4\n")  # line 17
    with pytest.raises(GraphValidationError, match=r"facebook_edges.csv: lines \[17\]") as info:
        load_musae_facebook(root)
    assert "x4" not in str(info.value) and info.value.private_detail["values"] == ["x4"]


def test_edge_id_out_of_range(tmp_path):
    root = _write(tmp_path, edges="id_1,id_2\n0,1\n1,6\n")
    with pytest.raises(GraphValidationError, match=r"out of range \[0, 6\).*facebook_edges.csv: lines \[3\]"):
        load_musae_facebook(root)


def test_edges_missing_column(tmp_path):
    root = _write(tmp_path, edges="a,b\n0,1\n")
    with pytest.raises(GraphValidationError, match=r"facebook_edges.csv: missing column\(s\) \['id_1', 'id_2'\]"):
        load_musae_facebook(root)


def test_target_errors(tmp_path):
    bad_type = TARGET.replace("4,105,E,politician", "4,105,E,")
    with pytest.raises(GraphValidationError, match=r"page_type.*missing values at .*facebook_target.csv: lines \[6\]"):
        load_musae_facebook(_write(tmp_path, target=bad_type))
    dup = TARGET.replace("5,106,F,tvshow", "4,106,F,tvshow")
    with pytest.raises(GraphValidationError, match=r"out of range|duplicate node ids"):
        load_musae_facebook(_write(tmp_path, target=dup))
    swap = TARGET.replace("5,106,F,tvshow", "3,106,F,tvshow").replace("3,104,D,company", "5,104,D,company")
    swap = swap.replace("0,101,A,tvshow", "3,101,A,tvshow")
    with pytest.raises(GraphValidationError, match=r"duplicate node ids at .*facebook_target.csv: lines \[7\]"):
        load_musae_facebook(_write(tmp_path, target=swap))


@pytest.mark.parametrize(
    ("features", "match"),
    [
        ("{not json", r"facebook_features.json: invalid JSON at line 1"),
        ("[1, 2]", r"expected an object"),
        ({**FEATURES, "x": [1]}, r"non-integer node ids \(keys\) at entries \[6\] \(0-based, in file order\)"),
        ({**FEATURES, "6": [1]}, r"out of range \[0, 6\) at entries \[6\]"),
        ({k: v for k, v in FEATURES.items() if k != "4"}, r"no feature list for nodes \[4\]"),
        ({**FEATURES, "2": [1.5]}, r"non-negative integer feature ids for nodes \[2\]"),
        ({**FEATURES, "2": [-1]}, r"non-negative integer feature ids for nodes \[2\]"),
        ({**FEATURES, "2": 3}, r"non-negative integer feature ids for nodes \[2\]"),
    ],
)
def test_feature_errors(tmp_path, features, match):
    with pytest.raises(GraphValidationError, match=match) as info:
        load_musae_facebook(_write(tmp_path, features=features))
    assert "facebook_features.json" in str(info.value)


# -- the real dataset -----------------------------------------------------------------------------
@pytest.mark.dataset
def test_real_facebook_counts(facebook):
    g = facebook
    assert g.num_nodes == 22_470
    assert g.num_classes == 4
    assert g.num_features == 4_714
    assert g.x.shape == (22_470, 4_714) and g.x.dtype == np.float32
    assert ((g.x == 0.0) | (g.x == 1.0)).all()
    assert int(g.x.sum()) == 314_583  # one entry per (node, feature id) in the JSON
    assert g.meta["edge_rows"] == 171_002
    assert g.meta["self_loops_dropped"] == 179
    assert g.meta["duplicate_edges_dropped"] == 0
    assert g.num_edges == 170_823 and g.edges_private.shape[1] == 0
    assert g.meta["label_names"] == ["company", "government", "politician", "tvshow"]
    assert np.bincount(g.y).tolist() == [6_495, 6_880, 5_768, 3_327]
    assert (g.train_mask.sum(), g.val_mask.sum(), g.test_mask.sum()) == (11_235, 5_618, 5_617)


@pytest.mark.dataset
def test_real_facebook_private_split(facebook):
    from privgraph.ingest.datasets import split_public_private

    g = split_public_private(facebook, 0.1, seed=0)
    assert g.edges_private.shape[1] == round(0.1 * 170_823)
    assert g.num_edges == 170_823
