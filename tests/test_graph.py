"""GraphData validation: every bad input raises GraphValidationError naming the problem and rows."""

from __future__ import annotations

import numpy as np
import pytest

from privgraph.errors import GraphValidationError, PrivgraphError
from privgraph.graph import GraphData


def _e(*pairs):
    return np.array(pairs, dtype=np.int64).T.reshape(2, -1)


def test_valid_graph_and_views():
    g = GraphData(
        num_nodes=4,
        x=np.zeros((4, 2)),
        y=[0, 1, 1, 2],
        edges_public=_e((0, 1), (1, 2)),
        edges_private=_e((2, 3)),
        train_mask=np.array([True, False, False, False]),
    )
    assert g.x.dtype == np.float32 and g.y.dtype == np.int64
    assert g.num_edges == 3 and g.num_classes == 3 and g.num_features == 2
    assert g.degrees().tolist() == [1, 2, 2, 1]
    assert g.private_nodes().tolist() == [2, 3]
    assert g.edges("all").shape == (2, 3)
    assert g.summary()["num_edges_private"] == 1


def test_error_is_a_privgraph_value_error():
    assert issubclass(GraphValidationError, PrivgraphError)
    assert issubclass(GraphValidationError, ValueError)


@pytest.mark.parametrize("bad", [-1, 4, 10])
def test_ids_out_of_range_name_the_column(bad):
    with pytest.raises(GraphValidationError, match=r"edges_public: node ids out of range \[0, 4\) at columns \[1\]"):
        GraphData(num_nodes=4, edges_public=_e((0, 1), (min(bad, 1), max(bad, 1)) if bad < 0 else (0, bad)))


def test_ids_out_of_range_private():
    with pytest.raises(GraphValidationError, match=r"edges_private: node ids out of range.*columns \[0\]"):
        GraphData(num_nodes=3, edges_private=_e((1, 3)))


def test_self_loops_name_the_columns():
    with pytest.raises(GraphValidationError, match=r"self-loops at columns \[1, 2\] \(the values: the owner's private record\)$") as info:
        GraphData(num_nodes=4, edges_public=_e((0, 1), (1, 1), (2, 2)))
    assert info.value.private_detail == {"at": "columns [1, 2]", "edges": [[1, 1], [2, 2]]}  # the values: not in the message


def test_duplicate_edges_name_the_columns():
    with pytest.raises(GraphValidationError, match=r"edges_public: duplicate edges .*at columns \[2\]; the first repeats columns \[0\] \(the values") as info:
        GraphData(num_nodes=4, edges_public=_e((0, 1), (1, 2), (0, 1)))
    assert info.value.private_detail["edges"] == [[0, 1]]


def test_reversed_edge_is_rejected_not_flipped():
    with pytest.raises(GraphValidationError, match=r"u < v.*columns \[1\].*from_edges"):
        GraphData(num_nodes=4, edges_public=_e((0, 1), (2, 1)))


def test_both_direction_duplicate_via_from_edges():
    with pytest.raises(
        GraphValidationError, match=r"duplicate edges \(the same undirected edge, in either direction\) at rows \[2\]"
    ):
        GraphData.from_edges(4, _e((0, 1), (1, 2), (1, 0)))


def test_from_edges_canonicalises_and_can_deduplicate():
    g = GraphData.from_edges(4, _e((1, 0), (2, 1), (0, 1), (3, 3)), drop_self_loops=True, deduplicate=True)
    assert g.edges_public.tolist() == [[0, 1], [1, 2]]
    with pytest.raises(GraphValidationError, match="self-loops"):
        GraphData.from_edges(4, _e((1, 0), (3, 3)))


def test_from_edges_out_of_range_names_rows():
    with pytest.raises(GraphValidationError, match=r"out of range \[0, 3\) at rows \[1\]"):
        GraphData.from_edges(3, _e((0, 1), (1, 5)))


def test_from_edges_doubly_listed_edge_is_kept_private():
    g = GraphData.from_edges(3, _e((0, 1), (1, 0), (1, 2)), [False, True, False], deduplicate=True)
    assert g.edges_private.tolist() == [[0], [1]]
    assert g.edges_public.tolist() == [[1], [2]]


def test_edge_both_public_and_private():
    with pytest.raises(GraphValidationError, match=r"both public and private: edges_private columns \[1\]"):
        GraphData(num_nodes=4, edges_public=_e((0, 1), (1, 2)), edges_private=_e((2, 3), (1, 2)))


def test_non_integer_ids():
    with pytest.raises(GraphValidationError, match=r"non-integer node ids at columns \[1\]"):
        GraphData(num_nodes=4, edges_public=np.array([[0.0, 1.5], [1.0, 2.0]]))


def test_bad_edge_shape():
    with pytest.raises(GraphValidationError, match=r"expected shape \[2, m\]"):
        GraphData(num_nodes=4, edges_public=np.zeros((3, 2), np.int64))


@pytest.mark.parametrize("value", [np.nan, np.inf, -np.inf])
def test_nan_inf_features_name_row_and_column(value):
    x = np.zeros((4, 3))
    x[2, 1] = value
    with pytest.raises(GraphValidationError, match=r"x: NaN or inf in rows \[2\] \(first: row 2, column 1\)"):
        GraphData(num_nodes=4, x=x)


def test_feature_row_count_disagrees():
    with pytest.raises(GraphValidationError, match="x has 3 rows but num_nodes is 4"):
        GraphData(num_nodes=4, x=np.zeros((3, 2)))


def test_label_row_count_disagrees():
    with pytest.raises(GraphValidationError, match="y has 5 rows but num_nodes is 4"):
        GraphData(num_nodes=4, y=np.zeros(5, np.int64))


def test_non_integer_labels():
    with pytest.raises(GraphValidationError, match=r"non-integer labels in rows \[1\]"):
        GraphData(num_nodes=3, y=np.array([0.0, 0.5, 1.0]))


def test_non_numeric_features():
    with pytest.raises(GraphValidationError, match="expected real numbers"):
        GraphData(num_nodes=2, x=np.array([["a"], ["b"]]))


@pytest.mark.parametrize("mask", [np.array([0, 1, 0, 1]), np.array([0.0, 1.0, 0.0, 1.0])])
def test_non_bool_masks(mask):
    with pytest.raises(GraphValidationError, match="train_mask: expected a boolean mask"):
        GraphData(num_nodes=4, train_mask=mask)


def test_mask_wrong_length():
    with pytest.raises(GraphValidationError, match=r"val_mask: expected shape \[4\], got \[3\]"):
        GraphData(num_nodes=4, val_mask=np.zeros(3, bool))


@pytest.mark.parametrize("n", [-1, 2.0, True, "3"])
def test_bad_num_nodes(n):
    with pytest.raises(GraphValidationError, match="num_nodes"):
        GraphData(num_nodes=n)


def test_many_offending_rows_are_truncated():
    e = _e(*[(i, i) for i in range(8)])
    with pytest.raises(GraphValidationError, match=r"\[0, 1, 2, 3, 4\] \(and 3 more\)"):
        GraphData(num_nodes=8, edges_public=e)


def test_replace_revalidates_and_does_not_mutate():
    g = GraphData(num_nodes=3, edges_public=_e((0, 1)), meta={"a": 1})
    h = g.replace(edges_private=_e((1, 2)), meta={"b": 2})
    assert g.num_edges == 1 and g.meta == {"a": 1}
    assert h.num_edges == 2
    with pytest.raises(GraphValidationError, match="both public and private"):
        g.replace(edges_private=_e((0, 1)))


def test_fingerprint_depends_on_content():
    a = GraphData(num_nodes=3, edges_public=_e((0, 1)))
    b = GraphData(num_nodes=3, edges_public=_e((0, 1)))
    c = GraphData(num_nodes=3, edges_private=_e((0, 1)))
    assert a.keyed_digest(b"test-key-0123456789") == b.keyed_digest(b"test-key-0123456789") != c.keyed_digest(b"test-key-0123456789")
