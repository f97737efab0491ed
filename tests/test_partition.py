"""Partitions: disjoint, covering, deterministic, and computed from public edges only."""

from __future__ import annotations

import numpy as np
import pytest

from privgraph.graph import GraphData
from privgraph.partition import partition_graph


def _ring(n: int, private_every: int = 0) -> GraphData:
    u = np.arange(n)
    v = (u + 1) % n
    priv = np.zeros(n, bool)
    if private_every:
        priv[::private_every] = True
    return GraphData.from_edges(n, np.stack([u, v]), priv)


@pytest.mark.parametrize("method", ["metis", "hash"])
def test_parts_are_disjoint_and_cover(method):
    g = _ring(200)
    p = partition_graph(g, 4, method)
    assert p.num_parts == 4
    allnodes = np.concatenate(p.parts)
    assert np.array_equal(np.sort(allnodes), np.arange(200))
    assert sum(p.sizes()) == 200 and min(p.sizes()) > 0
    assert np.array_equal(partition_graph(g, 4, method).assignment, p.assignment)


def test_metis_cuts_few_edges_on_a_ring():
    g = _ring(400)
    p = partition_graph(g, 4, "metis")
    e = g.edges_public
    cut = int((p.assignment[e[0]] != p.assignment[e[1]]).sum())
    assert cut <= 8  # a ring split into 4 arcs cuts 4 edges; hash would cut ~300


def test_partition_ignores_private_edges():
    a = _ring(100)
    b = a.replace(edges_private=np.array([[0, 10], [50, 60]]).T.copy())
    assert np.array_equal(partition_graph(a, 3).assignment, partition_graph(b, 3).assignment)


def test_edge_cases():
    g = _ring(5)
    assert partition_graph(g, 1).num_parts == 1
    assert partition_graph(g, 50).num_parts <= 5
    empty = GraphData(num_nodes=10)
    assert partition_graph(empty, 3).num_parts == 3
    with pytest.raises(ValueError, match="num_parts"):
        partition_graph(g, 0)
    with pytest.raises(ValueError, match="method"):
        partition_graph(g, 2, "random")
