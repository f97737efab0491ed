"""privatize_graph_set: an edge mechanism per graph, per-graph seeds, one parallel ledger entry."""

from __future__ import annotations

import pickle
from typing import Any

import numpy as np
import pytest

from privgraph.ingest.datasets.graph_families import synthetic_graph_set
from privgraph.evaluate.graph_classification import graph_seeds, privatize_graph_set, privatize_one_graph
from privgraph.mechanisms import build_mechanism
from privgraph.guarantee import GuaranteeKind


@pytest.fixture(scope="module")
def customized():
    """Paper 004's customized setting: 70% private users, graphs large enough for DPRR's Eq. 8
    at eps 1 with each graph's own |V_pri|."""
    return synthetic_graph_set(24, seed=3, min_nodes=60, max_nodes=120, private_fraction=0.7, split_seed=1)


class PickledReverseExecutor:
    """Runs the items in reverse order, each through a pickle round trip (as a remote worker would)."""

    name = "pickled-reverse"

    def map(self, fn, payloads, seeds, shared):  # type: ignore[no-untyped-def]
        out: dict[int, Any] = {}
        for i in reversed(range(len(payloads))):
            f, p, s, kw = pickle.loads(pickle.dumps((fn, payloads[i], seeds[i], shared)))
            out[i] = pickle.loads(pickle.dumps(f(p, s, **kw)))
        return [out[i] for i in range(len(payloads))]

    def describe(self) -> dict[str, Any]:
        return {"executor": self.name, "workers": 1, "threads": 1, "dashboard": None}


def _keys(e: np.ndarray) -> set[tuple[int, int]]:
    return set(map(tuple, e.T.tolist()))


def test_dprr_eps1_changes_private_edges_never_public_ones(customized):
    seeds = graph_seeds(5, len(customized))
    out, ledger = privatize_graph_set(customized, build_mechanism("dprr", {"epsilon": 1.0}), seeds)
    assert np.array_equal(out.labels, customized.labels) and out.meta["privatized"] == "dprr"
    changed = 0
    for raw, priv in zip(customized, out):
        assert np.array_equal(raw.edges_public, priv.edges_public)
        assert not (_keys(priv.edges_private) & _keys(raw.edges_public))
        changed += _keys(raw.edges_private) != _keys(priv.edges_private)
        # DPRR's output stays among V_pri
        assert set(np.unique(priv.edges_private)) <= set(raw.private_nodes().tolist())
    assert changed == len(customized)
    # one entry, the mechanism's guarantee: parallel composition over disjoint graphs
    (entry,) = ledger.entries
    assert entry.mechanism == "dprr" and entry.partitions is None
    assert entry.guarantee.kind is GuaranteeKind.EDGE_LDP and entry.epsilon == 1.0
    assert ledger.spent("edges") == 2.0  # 2 eps relationship DP, not 24 x 2 eps
    assert entry.params["num_graphs"] == 24 and "parallel" in entry.note
    assert not any("seed" in k for k in entry.params)


@pytest.mark.parametrize(
    "name, params, spent",
    [("warner_rr", {"epsilon": 1.0}, 2.0), ("local_lap", {"epsilon": 1.0}, 1.1), ("nonpriv_part", {}, 0.0)],
)
def test_other_mechanisms(customized, name, params, spent):
    out, ledger = privatize_graph_set(customized, build_mechanism(name, params), graph_seeds(0, len(customized)))
    for raw, priv in zip(customized, out):
        assert np.array_equal(raw.edges_public, priv.edges_public)
        if name == "nonpriv_part":
            assert priv.edges_private.shape[1] == 0
    assert ledger.spent("edges") == pytest.approx(spent) and len(ledger) == 1


def test_seeds_follow_graphs_not_order_or_workers(customized):
    mech = build_mechanism("dprr", {"epsilon": 1.0})
    seeds = graph_seeds(9, len(customized))
    serial, _ = privatize_graph_set(customized, mech, seeds)
    remote, _ = privatize_graph_set(customized, mech, seeds, executor=PickledReverseExecutor())
    perm = np.random.default_rng(0).permutation(len(customized))
    shuffled_set = customized.replace_graphs([customized[i] for i in perm])
    shuffled, _ = privatize_graph_set(shuffled_set, mech, [seeds[i] for i in perm])
    for j, i in enumerate(perm):
        assert np.array_equal(shuffled[j].edges_private, serial[i].edges_private)
    for a, b in zip(serial, remote):
        assert np.array_equal(a.edges_private, b.edges_private)
    one = privatize_one_graph(customized[3], seeds[3], mechanism=mech)
    assert np.array_equal(one.edges_private, serial[3].edges_private)
    again, _ = privatize_graph_set(customized, mech, graph_seeds(9, len(customized)))
    other, _ = privatize_graph_set(customized, mech, graph_seeds(10, len(customized)))
    assert all(np.array_equal(a.edges_private, b.edges_private) for a, b in zip(serial, again))
    assert any(not np.array_equal(a.edges_private, b.edges_private) for a, b in zip(serial, other))


def test_plain_dprr_refuses_small_graphs_by_index_a_dataset_wide_n_max_serves_them():
    small = synthetic_graph_set(30, seed=0, max_nodes=40, private_fraction=0.4, split_seed=0)
    seeds = graph_seeds(1, len(small))
    with pytest.raises(ValueError, match=r"^graph \d+ \(\d+ nodes with private edges\): DPRR: epsilon=1.0 is too small"):
        privatize_graph_set(small, build_mechanism("dprr", {"epsilon": 1.0}), seeds)
    n_max = max(g.num_nodes for g in small)  # paper 004: "the maximum number of nodes in all graphs"
    mech = build_mechanism("dprr", {"epsilon": 1.0, "n_max": n_max})
    assert mech.n_max == n_max
    eps1, eps2 = mech.allocate(2)  # a graph's own |V_pri| no longer decides the split
    assert eps1 == pytest.approx(max(np.sqrt(8 / (mech.n_max - 1)), 0.1)) and eps1 + eps2 <= 1.0
    out, ledger = privatize_graph_set(small, mech, seeds)
    assert ledger.spent("edges") == 2.0 and ledger.entries[0].params["n_max"] == mech.n_max
    assert all(np.array_equal(a.edges_public, b.edges_public) for a, b in zip(small, out))
    assert pickle.loads(pickle.dumps(mech)).allocate(5) == (eps1, eps2)


def test_argument_errors(customized):
    mech = build_mechanism("dprr", {"epsilon": 1.0})
    with pytest.raises(ValueError, match="3 seeds for 24 graphs"):
        privatize_graph_set(customized, mech, graph_seeds(0, 3))
    with pytest.raises(TypeError, match=r"seeds\[0\] must be a numpy SeedSequence"):
        privatize_graph_set(customized, mech, list(range(24)))
    with pytest.raises(ValueError, match="does not protect edges"):
        privatize_graph_set(customized, build_mechanism("label_rr", {"epsilon": 1.0}), graph_seeds(0, 24))
