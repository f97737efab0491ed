"""The graph-utility report against NetworkX on small graphs, and its extremes (issue 11)."""

from __future__ import annotations

import networkx as nx
import numpy as np
import pytest

from privgraph.evaluate.graph_utility import adjacency, graph_utility_report, structure_stats


def _edges(g: nx.Graph) -> np.ndarray:
    return np.array(list(g.edges())).T


@pytest.fixture(scope="module")
def g() -> nx.Graph:
    return nx.powerlaw_cluster_graph(400, 3, 0.4, seed=1)  # triangles, hubs, one component


def test_statistics_match_networkx(g):
    s = structure_stats(adjacency(_edges(g), g.number_of_nodes()), np.random.default_rng(0), sources=400)
    assert s["triangles"] == sum(nx.triangles(g).values()) / 3
    assert s["global_clustering"] == pytest.approx(nx.transitivity(g), abs=1e-12)
    assert s["average_clustering"] == pytest.approx(nx.average_clustering(g), abs=1e-12)
    assert s["assortativity"] == pytest.approx(nx.degree_assortativity_coefficient(g), abs=1e-9)
    parts = [set(np.flatnonzero(s["communities"] == c).tolist()) for c in np.unique(s["communities"])]
    assert s["modularity"] == pytest.approx(nx.community.modularity(g, parts), abs=1e-9)
    assert s["modularity"] > 0.2  # label propagation found communities
    ev = nx.eigenvector_centrality_numpy(g)
    top_nx = sorted(ev, key=ev.get, reverse=True)[:20]
    assert set(np.argsort(-s["eigenvector"])[:20].tolist()) == set(top_nx)
    lengths = [d for src, dist in nx.all_pairs_shortest_path_length(g) for dst, d in dist.items() if d > 0]
    assert s["effective_diameter"] == pytest.approx(np.percentile(lengths, 90))  # every node a source: exact


def test_a_graph_against_itself_and_against_noise(g):
    n = g.number_of_nodes()
    same = graph_utility_report(_edges(g), _edges(g), n, np.random.default_rng(0))
    assert same["degree_ks"] == 0 and same["degree_kl"] == 0 and same["community_nmi"] == pytest.approx(1.0)
    assert same["triangles"]["relative_error"] == 0 and same["eigenvector_top100_overlap"] == 1.0
    noise = nx.gnm_random_graph(n, g.number_of_edges(), seed=2)  # same size, no structure
    far = graph_utility_report(_edges(g), _edges(noise), n, np.random.default_rng(0))
    assert far["degree_ks"] > 0.2 and far["triangles"]["relative_error"] > 0.8 and far["community_nmi"] < 0.5
    assert far["edges"] == {"original": g.number_of_edges(), "released": noise.number_of_edges()}
    lo, hi = far["effective_diameter"]["ci95_original"]
    assert lo <= far["effective_diameter"]["original"] <= hi


def test_the_degree_histograms_and_the_plot(g):
    from privgraph.evaluate.graph_utility import structure_plot_png

    e = _edges(g)
    r = graph_utility_report(e, e[:, ::2], g.number_of_nodes(), np.random.default_rng(0))
    h = r["degree_histogram"]
    deg = dict(g.degree())
    assert h["degree"] == sorted(set(deg.values()) | set(np.bincount(e[:, ::2].ravel(), minlength=400).tolist()))
    assert dict(zip(h["degree"], h["original"])) == {d: c for d, c in
                                                      zip(*np.unique(list(deg.values()), return_counts=True)) if c} | \
        {d: 0 for d in h["degree"] if d not in set(deg.values())}
    assert sum(h["released"]) == sum(h["original"]) == 400
    png = structure_plot_png("test", r)
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 10_000
