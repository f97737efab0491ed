"""graph_to_objects / objects_to_graph: format, determinism, round trips."""

from __future__ import annotations

import io
import json
import zipfile

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from privgraph.errors import ArtifactError
from privgraph.graph import GraphData
from privgraph.storage import graph_to_objects, objects_to_graph


def test_edges_parquet_schema_and_order(graph):
    table = pq.read_table(io.BytesIO(graph_to_objects(graph)["edges.parquet"]))
    assert table.schema.field("src").type == pa.int64()
    assert table.schema.field("dst").type == pa.int64()
    assert table.schema.field("kind").type == pa.string()
    rows = list(zip(table["src"].to_pylist(), table["dst"].to_pylist(), table["kind"].to_pylist()))
    assert rows == [
        (0, 1, "public"), (1, 2, "public"), (2, 3, "public"),
        (0, 5, "private"), (3, 5, "private"), (4, 5, "private"),  # sorted: no order leak
    ]


def test_bytes_are_deterministic(graph):
    a = graph_to_objects(graph)
    b = graph_to_objects(graph.replace(edges_private=graph.edges_private[:, ::-1]))
    assert a == b


def test_npz_has_fixed_timestamps(graph):
    with zipfile.ZipFile(io.BytesIO(graph_to_objects(graph)["splits.npz"])) as zf:
        assert [i.date_time for i in zf.infolist()] == [(1980, 1, 1, 0, 0, 0)] * 3
        assert sorted(zf.namelist()) == ["test_mask.npy", "train_mask.npy", "val_mask.npy"]


def test_round_trip(graph):
    back = objects_to_graph(graph_to_objects(graph), num_nodes=6)
    assert back.x.dtype == np.float32 and back.y.dtype == np.int64
    np.testing.assert_array_equal(back.x, graph.x)
    np.testing.assert_array_equal(back.train_mask, graph.train_mask)
    assert {tuple(c) for c in back.edges_private.T} == {tuple(c) for c in graph.edges_private.T}
    assert {tuple(c) for c in back.edges_public.T} == {tuple(c) for c in graph.edges_public.T}


def test_minimal_graph_only_edges():
    g = GraphData(num_nodes=3)
    objects = graph_to_objects(g)
    assert sorted(objects) == ["edges.parquet", "graph.json"]
    assert json.loads(objects["graph.json"]) == {
        "format": "privgraph.graph/1", "num_nodes": 3, "objects": ["edges.parquet"],
    }
    back = objects_to_graph(objects)
    assert back.num_nodes == 3 and back.num_edges == 0 and back.x is None and back.y is None


def test_num_nodes_from_graph_json_or_argument(graph):
    objects = graph_to_objects(graph)
    assert objects_to_graph(objects).num_nodes == 6
    assert objects_to_graph(objects, num_nodes=6).num_nodes == 6
    with pytest.raises(ArtifactError, match="graph.json says 6"):
        objects_to_graph(objects, num_nodes=7)
    del objects["graph.json"]
    assert objects_to_graph(objects, num_nodes=6).num_nodes == 6
    with pytest.raises(ArtifactError, match="number of nodes is unknown"):
        objects_to_graph(objects)
    with pytest.raises(ArtifactError, match="graph.json"):
        objects_to_graph({**objects, "graph.json": b"[]"})


def test_multilabel_and_partial_splits():
    y = np.array([[1, 0], [0, 1], [1, 1]])
    g = GraphData(num_nodes=3, y=y, train_mask=np.array([True, False, True]),
                  edges_private=np.array([[0], [2]]))
    back = objects_to_graph(graph_to_objects(g), num_nodes=3)
    np.testing.assert_array_equal(back.y, y)
    assert back.val_mask is None and back.test_mask is None
    assert back.edges_public.shape == (2, 0)


def test_missing_edges_and_unknown_kind(graph):
    objects = graph_to_objects(graph)
    del objects["edges.parquet"]
    with pytest.raises(ArtifactError, match="edges.parquet"):
        objects_to_graph(objects, num_nodes=6)
    table = pa.table({"src": pa.array([0], pa.int64()), "dst": pa.array([1], pa.int64()),
                      "kind": pa.array(["raw"])})
    buf = io.BytesIO()
    pq.write_table(table, buf)
    with pytest.raises(ArtifactError, match="1 unknown edge kind"):  # the kind itself is not repeated
        objects_to_graph({"edges.parquet": buf.getvalue()}, num_nodes=2)
    with pytest.raises(ArtifactError, match="parquet"):
        objects_to_graph({"edges.parquet": b"not parquet"}, num_nodes=2)


def test_rejects_non_graph():
    with pytest.raises(TypeError):
        graph_to_objects({"x": 1})
