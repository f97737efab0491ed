"""synthetic_graph_set: seeded, balanced, same sizes and density across classes."""

from __future__ import annotations

import numpy as np
import pytest

from privgraph.ingest.datasets.graph_families import FAMILIES, synthetic_graph_set


def test_seeded_and_seed_matters():
    a = synthetic_graph_set(30, seed=5)
    b = synthetic_graph_set(30, seed=5)
    c = synthetic_graph_set(30, seed=6)
    assert np.array_equal(a.labels, b.labels)
    assert all(np.array_equal(x.edges_private, y.edges_private) for x, y in zip(a, b))
    assert any(x.num_nodes != y.num_nodes or not np.array_equal(x.edges_private, y.edges_private) for x, y in zip(a, c))


def test_balanced_sizes_in_range_unattributed_all_private():
    gs = synthetic_graph_set(90, seed=1, families=("ba", "er", "ws"), min_nodes=25, max_nodes=60)
    assert np.bincount(gs.labels).tolist() == [30, 30, 30]
    assert gs.meta["families"] == ["ba", "er", "ws"]
    for g, y in zip(gs, gs.labels):
        assert 25 <= g.num_nodes <= 60 and g.x is None
        assert g.meta["family"] == ("ba", "er", "ws")[y]
        assert g.edges_public.shape[1] == 0  # default private_fraction 1.0
        if y == 0:  # BA: every new node attaches m edges
            m = g.meta["m"]
            assert g.num_edges == m * (g.num_nodes - m)


def test_density_matched_so_size_and_density_do_not_separate_classes():
    gs = synthetic_graph_set(400, seed=3)
    n = np.array([g.num_nodes for g in gs])
    dens = np.array([g.num_edges / g.num_nodes for g in gs])
    ba, er = gs.labels == 0, gs.labels == 1
    assert abs(n[ba].mean() - n[er].mean()) < 8
    assert abs(dens[ba].mean() - dens[er].mean()) / dens[ba].mean() < 0.1
    # the degree distribution's shape does separate them: BA has hubs
    dmax = np.array([g.degrees().max() for g in gs])
    assert dmax[ba].mean() > 2 * dmax[er].mean()


def test_private_fraction_passed_through():
    gs = synthetic_graph_set(10, seed=0, private_fraction=0.5, split_seed=4)
    assert gs.meta["private_user_fraction"] == 0.5
    assert sum(g.edges_public.shape[1] for g in gs) > 0


@pytest.mark.parametrize(
    "kw, match",
    [
        ({"families": ("ba",)}, "at least two distinct"),
        ({"families": ("ba", "ba")}, "at least two distinct"),
        ({"families": ("ba", "tree")}, "unknown graph family 'tree'"),
        ({"min_nodes": 50, "max_nodes": 40}, "ordered"),
        ({"m_range": (1, 12)}, "2 \\* m must stay below min_nodes"),
    ],
)
def test_bad_arguments(kw, match):
    with pytest.raises(ValueError, match=match):
        synthetic_graph_set(10, seed=0, **kw)


def test_families_documented():
    assert set(FAMILIES) == {"ba", "er", "ws"}
