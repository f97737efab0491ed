"""Offline labelled graph families for graph-classification tests and demos.

REDDIT-BINARY and REDDIT-MULTI-5K are not available offline; paper 004 itself times DPRR on
Barabasi-Albert graphs generated with NetworkX (Sec. V-C). :func:`synthetic_graph_set` draws
graphs of several random-graph families, one class per family, with the SAME size distribution and
the same expected edge count per size, so that the shape of the degree distribution (heavy-tailed
BA hubs against Poisson-like ER degrees, a narrow lattice-like WS one), not the size or density,
tells the classes apart. Every draw comes from one ``numpy.random.Generator``; NetworkX
generators get integer seeds drawn from it (they build a local ``random.Random``, never the
global state).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import networkx as nx
import numpy as np

from privgraph.ingest.datasets.graph_set import GraphSet, split_private_users
from privgraph.graph import GraphData
from privgraph.guarantee.params import check_int
from privgraph.seeding import as_generator

__all__ = ["FAMILIES", "synthetic_graph_set"]

#: the families and what each draws, given n nodes and the BA attachment count m
FAMILIES: dict[str, str] = {
    "ba": "Barabasi-Albert: n nodes, each new node attaches m edges (|E| = m (n - m))",
    "er": "Erdos-Renyi G(n, p) with p = m (n - m) / C(n, 2): the BA graph's expected edge count",
    "ws": "Watts-Strogatz: ring lattice of k = 2m nearest neighbours, rewiring probability 0.1",
}


def _draw(family: str, n: int, m: int, seed: int) -> nx.Graph:
    if family == "ba":
        return nx.barabasi_albert_graph(n, m, seed=seed)
    if family == "er":
        p = m * (n - m) / math.comb(n, 2)
        return nx.fast_gnp_random_graph(n, p, seed=seed)
    if family == "ws":
        return nx.watts_strogatz_graph(n, 2 * m, 0.1, seed=seed)
    raise ValueError(f"unknown graph family {family!r}; known: {', '.join(FAMILIES)}")


def synthetic_graph_set(
    num_graphs: int,
    *,
    seed: Any,
    families: Sequence[str] = ("ba", "er"),
    min_nodes: int = 20,
    max_nodes: int = 120,
    m_range: tuple[int, int] = (1, 3),
    private_fraction: float = 1.0,
    split_seed: Any = 0,
    name: str = "synthetic",
) -> GraphSet:
    """A balanced :class:`GraphSet` of ``num_graphs`` graphs; class ``k`` is ``families[k]``.

    Per graph: the class (balanced: ``i mod K``, then shuffled), ``n`` uniform in
    ``[min_nodes, max_nodes]`` (REDDIT-BINARY's smaller threads) and the BA attachment count ``m``
    uniform in ``m_range`` (average degree about ``2m``; REDDIT's is 2.3) are drawn from the
    generator of ``seed``, then the graph from the family's NetworkX generator (:data:`FAMILIES`).
    Graphs are unattributed (``x = None``). The private edges follow
    :func:`~privgraph.ingest.datasets.graph_set.split_private_users` with ``private_fraction`` and
    ``split_seed`` (default: every edge private, the common setting).

    Raises:
        ValueError: an unknown family, fewer than two families, bad sizes or ``m_range``.
    """
    num_graphs = check_int(num_graphs, "num_graphs", minimum=2)
    fam = tuple(families)
    if len(fam) < 2 or len(set(fam)) != len(fam):
        raise ValueError(f"families: at least two distinct families needed, got {fam!r}")
    for f in fam:
        if f not in FAMILIES:
            raise ValueError(f"unknown graph family {f!r}; known: {', '.join(FAMILIES)}")
    lo, hi = check_int(min_nodes, "min_nodes", minimum=2), check_int(max_nodes, "max_nodes", minimum=2)
    m_lo, m_hi = (check_int(v, "m_range", minimum=1) for v in m_range)
    if lo > hi or m_lo > m_hi:
        raise ValueError(f"ranges must be ordered: nodes [{lo}, {hi}], m_range [{m_lo}, {m_hi}]")
    if 2 * m_hi >= lo:
        raise ValueError(f"m_range: 2 * m must stay below min_nodes ({lo}) for every family, got m up to {m_hi}")
    rng = as_generator(seed)
    labels = rng.permutation(np.arange(num_graphs) % len(fam)).astype(np.int64)
    sizes = rng.integers(lo, hi + 1, size=num_graphs)
    ms = rng.integers(m_lo, m_hi + 1, size=num_graphs)
    nx_seeds = rng.integers(0, 2**31 - 1, size=num_graphs)
    graphs = []
    for i in range(num_graphs):
        g = _draw(fam[labels[i]], int(sizes[i]), int(ms[i]), int(nx_seeds[i]))
        e = np.asarray(list(g.edges()), dtype=np.int64).reshape(-1, 2).T
        graphs.append(GraphData.from_edges(int(sizes[i]), e, meta={"family": fam[labels[i]], "m": int(ms[i])}))
    meta = {
        "name": name,
        "source": "synthetic graph families (networkx), one class per family",
        "families": list(fam),
        "family_definitions": {f: FAMILIES[f] for f in fam},
        "num_nodes_range": [lo, hi],
        "m_range": [m_lo, m_hi],
    }
    return split_private_users(GraphSet(tuple(graphs), labels, name, meta), private_fraction, seed=split_seed)
