"""load_generic: edge lists (CSV/Parquet), features (.npy/Parquet), labels; errors name file and rows."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from privgraph.ingest.datasets import load_generic
from privgraph.errors import DatasetNotFoundError, GraphValidationError


def _csv(tmp_path: Path, text: str, name: str = "edges.csv") -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


def _parquet(tmp_path: Path, df: pd.DataFrame, name: str = "edges.parquet") -> Path:
    p = tmp_path / name
    df.to_parquet(p)
    return p


def _raises(match: str, path: Path | None = None):
    """pytest.raises(GraphValidationError) whose message must also name ``path``."""

    class _Ctx:
        def __enter__(self):
            self._cm = pytest.raises(GraphValidationError, match=match)
            self.info = self._cm.__enter__()
            return self.info

        def __exit__(self, *exc):
            out = self._cm.__exit__(*exc)
            if path is not None:
                assert str(path) in str(self.info.value), str(self.info.value)
            return out

    return _Ctx()


# -- happy paths ----------------------------------------------------------------------------------
def test_csv_edges_any_direction_all_public(tmp_path):
    p = _csv(tmp_path, "src,dst\n0,1\n2,1\n3,0\n")
    g = load_generic(p)
    assert g.num_nodes == 4
    assert sorted(map(tuple, g.edges_public.T.tolist())) == [(0, 1), (0, 3), (1, 2)]
    assert g.edges_private.shape[1] == 0
    assert g.meta["name"] == "generic" and g.meta["private_column"] is None
    assert g.meta["feature_bounds"] is None


@pytest.mark.parametrize("values", ["true,false,False,TRUE", "1,0,0,1"])
def test_csv_private_column(tmp_path, values):
    v = values.split(",")
    p = _csv(tmp_path, f"src,dst,private\n0,1,{v[0]}\n1,2,{v[1]}\n2,3,{v[2]}\n3,0,{v[3]}\n")
    g = load_generic(p)
    assert sorted(map(tuple, g.edges_private.T.tolist())) == [(0, 1), (0, 3)]
    assert g.edges_public.shape[1] == 2


def test_custom_private_column_name(tmp_path):
    p = _csv(tmp_path, "src,dst,hidden\n0,1,true\n1,2,false\n")
    assert load_generic(p, private_column="hidden").edges_private.shape[1] == 1
    assert load_generic(p).edges_private.shape[1] == 0  # no 'private' column: all public


def test_parquet_edges_features_labels(tmp_path):
    e = _parquet(
        tmp_path,
        pd.DataFrame({"src": [0, 1, 2], "dst": [1, 2, 4], "private": [False, True, False]}),
    )
    f = _parquet(tmp_path, pd.DataFrame({"a": np.arange(5.0), "b": np.arange(5) * 2}), "x.parquet")
    y = _parquet(tmp_path, pd.DataFrame({"label": [0, 1, 1, 0, 2]}), "y.parquet")
    g = load_generic(e, features=f, labels=y)
    assert g.num_nodes == 5 and g.num_features == 2 and g.num_classes == 3
    assert g.x.dtype == np.float32 and g.x[:, 1].tolist() == [0, 2, 4, 6, 8]
    assert g.edges_private.tolist() == [[1], [2]]


def test_npy_features_and_csv_labels(tmp_path):
    e = _csv(tmp_path, "src,dst\n0,1\n")
    np.save(tmp_path / "x.npy", np.ones((3, 4)))
    lab = _csv(tmp_path, "y\n2\n0\n1\n", "y.csv")
    g = load_generic(e, features=tmp_path / "x.npy", labels=lab)
    assert g.num_nodes == 3 and g.x.shape == (3, 4) and g.y.tolist() == [2, 0, 1]


def test_npy_labels_and_num_nodes(tmp_path):
    e = _csv(tmp_path, "src,dst\n0,1\n")
    np.save(tmp_path / "y.npy", np.array([0, 1, 0, 1, 1, 0]))
    g = load_generic(e, labels=tmp_path / "y.npy")
    assert g.num_nodes == 6
    assert load_generic(e, num_nodes=10).num_nodes == 10
    assert load_generic(str(e)).num_nodes == 2  # max id + 1


def test_empty_edge_list(tmp_path):
    g = load_generic(_csv(tmp_path, "src,dst\n"), num_nodes=3)
    assert g.num_nodes == 3 and g.num_edges == 0


def test_blank_lines_keep_line_numbers_exact(tmp_path):
    p = _csv(tmp_path, "src,dst\n0,1\n\n1,2\n\n2,2\n")
    with _raises(r"self-loops at .*lines \[6\] \(1-based line numbers\)", p):
        load_generic(p)


# -- errors ---------------------------------------------------------------------------------------
def test_missing_files(tmp_path):
    with pytest.raises(DatasetNotFoundError, match="edges file not found: .*nope.csv"):
        load_generic(tmp_path / "nope.csv")
    e = _csv(tmp_path, "src,dst\n0,1\n")
    with pytest.raises(DatasetNotFoundError, match="features file not found"):
        load_generic(e, features=tmp_path / "x.npy")
    with pytest.raises(DatasetNotFoundError, match="labels file not found"):
        load_generic(e, labels=tmp_path / "y.npy")


def test_unsupported_type(tmp_path):
    p = _csv(tmp_path, "src dst\n0 1\n", "edges.txt")
    with _raises("unsupported file type '.txt'", p):
        load_generic(p)


def test_missing_columns(tmp_path):
    p = _csv(tmp_path, "source,target\n0,1\n")
    with _raises(r"missing column\(s\) \['src', 'dst'\]; found columns \['source', 'target'\]", p):
        load_generic(p)


def test_non_integer_id_names_csv_line(tmp_path):
    rows = "".join(f"{i},{i + 1}\n" for i in range(15))
    p = _csv(tmp_path, "src,dst\n" + rows + "15,abc\n16,17\n")  # 'abc' is on line 17
    with _raises(r"column 'dst': non-integer values at .*lines \[17\] \(1-based line numbers\) \(the values: the owner's "
                 r"private record\)$", p) as info:
        load_generic(p)
    assert info.value.private_detail == {"file": str(p), "column": "dst", "lines": [17], "values": ["abc"]}


def test_float_id_in_csv(tmp_path):
    p = _csv(tmp_path, "src,dst\n0,1\n1,2.5\n")
    with _raises(r"non-integer values at .*lines \[3\]", p):
        load_generic(p)


def test_missing_value_in_csv(tmp_path):
    p = _csv(tmp_path, "src,dst\n0,1\n,2\n")
    with _raises(r"column 'src': missing values at .*lines \[3\]", p):
        load_generic(p)


def test_wrong_field_count(tmp_path):
    p = _csv(tmp_path, "src,dst\n0,1\n1,2,3\n")
    with _raises(r"line 3: expected 2 fields", p):
        load_generic(p)


def test_parquet_wrong_type_and_nulls(tmp_path):
    p = _parquet(tmp_path, pd.DataFrame({"src": [0.0, 1.0], "dst": [1, 2]}))
    with _raises(r"column 'src' has type float64, expected integers", p):
        load_generic(p)
    q = _parquet(tmp_path, pd.DataFrame({"src": [0, None, 1], "dst": [1, 2, 2]}), "n.parquet")
    with _raises(r"column 'src': missing values at .*rows \[1\] \(0-based row indices\)", q):
        load_generic(q)
    r = _parquet(tmp_path, pd.DataFrame({"src": ["0", "1"], "dst": [1, 2]}), "s.parquet")
    with _raises(r"column 'src' has type .*, expected integers", r):
        load_generic(r)


def test_bad_private_values(tmp_path):
    p = _csv(tmp_path, "src,dst,private\n0,1,true\n1,2,maybe\n")
    with _raises(r"column 'private': expected booleans .*lines \[3\]", p) as info:
        load_generic(p)
    assert "maybe" not in str(info.value) and info.value.private_detail["values"] == ["maybe"]
    q = _csv(tmp_path, "src,dst,private\n0,1,1\n1,2,2\n", "q.csv")
    with _raises(r"column 'private': expected booleans .*lines \[3\]", q):
        load_generic(q)
    r = _parquet(tmp_path, pd.DataFrame({"src": [0], "dst": [1], "private": [0.5]}), "r.parquet")
    with _raises(r"column 'private' has type float64, expected booleans", r):
        load_generic(r)


def test_ids_out_of_range_name_lines(tmp_path):
    p = _csv(tmp_path, "src,dst\n0,1\n1,7\n-1,0\n")
    with _raises(r"node ids out of range \[0, 3\) at .*lines \[3, 4\]", p):
        load_generic(p, num_nodes=3)
    with _raises(r"node ids out of range \[0, 8\) at .*lines \[4\]", p) as info:
        load_generic(p)
    assert "-1, 0" not in str(info.value) and info.value.private_detail["edges"] == [[-1, 0]]


def test_ids_out_of_range_for_feature_rows(tmp_path):
    p = _parquet(tmp_path, pd.DataFrame({"src": [0, 1, 2], "dst": [1, 2, 3]}))
    np.save(tmp_path / "x.npy", np.zeros((3, 2)))
    with _raises(r"node ids out of range \[0, 3\) at .*rows \[2\] \(0-based row indices\)", p):
        load_generic(p, features=tmp_path / "x.npy")


def test_self_loops_name_lines(tmp_path):
    p = _csv(tmp_path, "src,dst\n0,1\n2,2\n1,2\n3,3\n")
    with _raises(r"self-loops at .*lines \[3, 5\]", p) as info:
        load_generic(p)
    assert info.value.private_detail["edges"] == [[2, 2], [3, 3]]


def test_duplicates_and_reversed_duplicates_name_lines(tmp_path):
    p = _csv(tmp_path, "src,dst\n0,1\n1,2\n0,1\n")
    with _raises(r"duplicate edges .*lines \[4\].*repeats .*lines \[2\]", p):
        load_generic(p)
    q = _csv(tmp_path, "src,dst\n0,1\n1,2\n2,1\n", "q.csv")
    with _raises(r"duplicate edges \(the same undirected edge, in either direction\) at .*lines \[4\]", q):
        load_generic(q)


def test_features_errors(tmp_path):
    e = _csv(tmp_path, "src,dst\n0,1\n")
    x = np.zeros((3, 2))
    x[1, 1] = np.nan
    np.save(tmp_path / "nan.npy", x)
    with _raises(r"NaN.*rows \[1\] \(0-based row indices\); first: row 1, column 1", tmp_path / "nan.npy"):
        load_generic(e, features=tmp_path / "nan.npy")
    np.save(tmp_path / "inf.npy", np.array([[0.0], [np.inf]]))
    with _raises(r"rows \[1\]", tmp_path / "inf.npy"):
        load_generic(e, features=tmp_path / "inf.npy")
    np.save(tmp_path / "one_d.npy", np.zeros(3))
    with _raises(r"expected a 2-D array", tmp_path / "one_d.npy"):
        load_generic(e, features=tmp_path / "one_d.npy")
    np.save(tmp_path / "obj.npy", np.array([["a"], ["b"]]))
    with _raises(r"expected real numbers", tmp_path / "obj.npy"):
        load_generic(e, features=tmp_path / "obj.npy")
    f = _parquet(tmp_path, pd.DataFrame({"a": [1.0, 2.0], "name": ["u", "v"]}), "x.parquet")
    with _raises(r"non-numeric columns \['name'", f):
        load_generic(e, features=f)
    g = _parquet(tmp_path, pd.DataFrame({"a": [1.0, None]}), "g.parquet")
    with _raises(r"rows \[1\]", g):
        load_generic(e, features=g)
    c = _csv(tmp_path, "a\n1\n2\n", "x.csv")
    with _raises(r"expected .npy or .parquet", c):
        load_generic(e, features=c)


def test_labels_errors(tmp_path):
    e = _csv(tmp_path, "src,dst\n0,1\n")
    lab = _csv(tmp_path, "y,z\n0,1\n1,0\n", "two.csv")
    with _raises(r"cannot read labels from columns \[.y., .z.\]; expected one column .* or columns id,label", lab):
        load_generic(e, labels=lab)
    bad = _csv(tmp_path, "y\n0\ncat\n", "bad.csv")
    with _raises(r"non-integer values at .*lines \[3\]", bad):
        load_generic(e, labels=bad)
    np.save(tmp_path / "y.npy", np.array([0.0, 0.5]))
    with _raises(r"non-integer labels at rows \[1\]", tmp_path / "y.npy"):
        load_generic(e, labels=tmp_path / "y.npy")


def test_row_counts_disagree(tmp_path):
    e = _csv(tmp_path, "src,dst\n0,1\n")
    np.save(tmp_path / "x.npy", np.zeros((3, 2)))
    np.save(tmp_path / "y.npy", np.zeros(4, np.int64))
    with pytest.raises(GraphValidationError, match=r"features .*x.npy have 3 rows but labels .*y.npy have 4"):
        load_generic(e, features=tmp_path / "x.npy", labels=tmp_path / "y.npy")
    msg = f"features {tmp_path / 'x.npy'} have 3 rows but num_nodes is 5"
    with pytest.raises(GraphValidationError, match=re.escape(msg)):
        load_generic(e, features=tmp_path / "x.npy", num_nodes=5)


def test_bad_num_nodes(tmp_path):
    e = _csv(tmp_path, "src,dst\n0,1\n")
    with pytest.raises(GraphValidationError, match="num_nodes"):
        load_generic(e, num_nodes=-1)


def test_larger_file_takes_fast_path_with_exact_lines(tmp_path):
    rng = np.random.default_rng(0)
    n = 5000
    src = rng.integers(0, n, 20000)
    dst = (src + rng.integers(1, n, 20000)) % n
    keys = np.minimum(src, dst) * n + np.maximum(src, dst)
    _, first = np.unique(keys, return_index=True)
    first.sort()
    src, dst = src[first], dst[first]
    df = pd.DataFrame({"src": src, "dst": dst})
    p = tmp_path / "big.csv"
    df.to_csv(p, index=False)
    g = load_generic(p, num_nodes=n)
    assert g.num_edges == len(src)
    df.loc[1234, "dst"] = df.loc[1234, "src"]
    df.to_csv(p, index=False)
    with _raises(r"self-loops at .*lines \[1236\]", p):
        load_generic(p, num_nodes=n)


# -- inputs that used to crash or allocate terabytes (issue 27) ------------------------------------
def test_npy_files_that_are_not_npy_arrays(tmp_path):
    e = _csv(tmp_path, "src,dst\n0,1\n")
    (tmp_path / "empty.npy").write_bytes(b"")
    with _raises(r"cannot read as a .npy array: an empty file", tmp_path / "empty.npy"):
        load_generic(e, features=tmp_path / "empty.npy")
    with _raises(r"cannot read as a .npy array: an empty file", tmp_path / "empty.npy"):
        load_generic(e, labels=tmp_path / "empty.npy")
    np.savez(tmp_path / "x.npz", a=np.zeros((2, 2)))
    (tmp_path / "zip.npy").write_bytes((tmp_path / "x.npz").read_bytes())
    with _raises(r"a .npz archive \(zip\); write it with numpy.save", tmp_path / "zip.npy"):
        load_generic(e, features=tmp_path / "zip.npy")
    np.save(tmp_path / "cut.npy", np.zeros((50, 4)))
    (tmp_path / "cut.npy").write_bytes((tmp_path / "cut.npy").read_bytes()[:200])
    with _raises(r"cannot read as a numeric .npy array", tmp_path / "cut.npy"):
        load_generic(e, features=tmp_path / "cut.npy")


def test_ids_beyond_int64_are_refused_not_wrapped_negative(tmp_path):
    e = _csv(tmp_path, "src,dst\n0,1\n1,18446744073709551000\n")
    with _raises(r"column 'dst': integers beyond 2\^63 - 1 at .*lines \[3\]", e) as info:
        load_generic(e)
    assert "18446744073709551000" not in str(info.value)
    assert info.value.private_detail["values"] == [18446744073709551000]


def test_sparse_huge_ids_without_features_are_refused_before_allocating(tmp_path):
    e = _csv(tmp_path, "src,dst\n0,1\n1,1000000000000\n")
    with _raises(r"the largest node id, at .*lines \[3\].*, is beyond 2147483646: privgraph handles at most "
                 r"2147483647 nodes; node ids must number the nodes 0..n-1", e) as info:
        load_generic(e)
    assert "1000000000000" not in str(info.value) and info.value.private_detail["largest_id"] == 1000000000000
    # ids up to 3 million, all used: a real graph, accepted
    n = 3_000_000
    ids = np.arange(n)
    p = _parquet(tmp_path, pd.DataFrame({"src": ids[:-1], "dst": ids[1:]}), "path.parquet")
    assert load_generic(p).num_nodes == n


def test_class_ids_are_limited():
    from privgraph.graph import MAX_CLASSES, GraphData

    GraphData(num_nodes=2, y=np.array([0, MAX_CLASSES - 1]))
    with pytest.raises(GraphValidationError, match=rf"class ids of {MAX_CLASSES} or more in rows \[1\]; labels are") as info:
        GraphData(num_nodes=2, y=np.array([0, 100000]))
    assert "100000" not in str(info.value) and info.value.private_detail == {"rows": [1], "labels": [100000]}
