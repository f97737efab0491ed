"""GIN-0 for graph classification and its stratified cross-validation (paper 004, Sec. V-A)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from privgraph.ingest.datasets.graph_families import synthetic_graph_set
from privgraph.ingest.datasets.graph_set import GraphSet
from privgraph.graph import GraphData
from privgraph.evaluate.graph_classification import GIN0GraphClassifier, _collate, _tensors, cross_validate


@pytest.fixture(scope="module")
def small() -> GraphSet:
    return synthetic_graph_set(60, seed=4, max_nodes=60)


def _params(net: torch.nn.Module) -> list[torch.Tensor]:
    return [p.detach().clone() for p in net.parameters()]


def test_model_layout_and_seeded_init_without_global_rng():
    torch_state, np_state = torch.get_rng_state(), np.random.get_state()
    a = GIN0GraphClassifier(1, 16, 3, generator=torch.Generator().manual_seed(1))
    b = GIN0GraphClassifier(1, 16, 3, generator=torch.Generator().manual_seed(1))
    c = GIN0GraphClassifier(1, 16, 3, generator=torch.Generator().manual_seed(2))
    assert torch.equal(torch.get_rng_state(), torch_state)
    assert np.array_equal(np.random.get_state()[1], np_state[1])
    assert all(torch.equal(x, y) for x, y in zip(_params(a), _params(b)))
    assert not all(torch.equal(x, y) for x, y in zip(_params(a), _params(c)))
    # 5 layers including the input one: 4 GIN layers, 5 prediction heads
    assert len(a.lin1) == 4 and len(a.pred) == 5 and a.pred[0].in_features == 1
    assert a.readout == "mean" and a.dropout.p == 0.5
    with pytest.raises(ValueError, match="num_layers"):
        GIN0GraphClassifier(1, num_layers=1)
    with pytest.raises(ValueError, match="readout"):
        GIN0GraphClassifier(1, readout="max")


def test_mean_readout_is_invariant_to_copies_sum_is_not(small):
    g = small[0]
    twice = GraphData.from_edges(2 * g.num_nodes, np.concatenate([g.edges(), g.edges() + g.num_nodes], axis=1))
    gs = GraphSet((g, twice), np.array([0, 1]))
    x, ei, b, n = _collate(_tensors(gs, "all"), torch.device("cpu"))
    for readout, same in (("mean", True), ("sum", False)):
        net = GIN0GraphClassifier(1, 8, 2, readout=readout, generator=torch.Generator().manual_seed(0)).eval()
        with torch.no_grad():
            out = net(x, ei, b, n)
        assert out.shape == (2, 2)
        assert torch.allclose(out[0], out[1], atol=1e-5) is same


def test_dropout_needs_a_generator_in_training(small):
    x, ei, b, n = _collate(_tensors(small, "all")[:4], torch.device("cpu"))
    net = GIN0GraphClassifier(1, 8, 2, generator=torch.Generator().manual_seed(0))
    with pytest.raises(RuntimeError, match="torch.Generator"):
        net(x, ei, b, n)
    out = net(x, ei, b, n, generator=torch.Generator().manual_seed(0))
    assert out.shape == (4, 2)


def test_synthetic_families_are_learnable():
    gs = synthetic_graph_set(200, seed=0)
    r = cross_validate(gs, folds=10, epochs=10, rng=np.random.default_rng(0), device="cpu")
    assert r["acc_mean"] > 0.75, r
    assert len(r["fold_acc"]) == len(r["fold_auc"]) == 10
    assert all(0.0 <= a <= 1.0 for a in r["fold_auc"]) and 0.0 <= r["auc_mean"] <= 1.0
    assert r["auc_mean"] > 0.8
    assert r["epoch"] == 10 and r["selection"] == "final" and r["device"] == "cpu"
    assert r["protocol"]["num_layers"] == 5 and r["protocol"]["hidden_channels"] == 64
    assert r["protocol"]["readout"] == "mean" and r["protocol"]["batch_size"] == 64
    assert r["protocol"]["input_features"] == "constant 1 per node"


def test_same_seed_same_result_and_no_global_rng(small, one_torch_thread):
    # one_torch_thread: what this test checks is the seeding, not thread scheduling
    torch_state = torch.get_rng_state()
    kw = dict(folds=3, epochs=3, device="cpu", hidden_channels=16)
    a = cross_validate(small, rng=np.random.default_rng(7), **kw)
    b = cross_validate(small, rng=np.random.default_rng(7), **kw)
    assert torch.equal(torch.get_rng_state(), torch_state)
    a.pop("seconds"), b.pop("seconds")
    assert a == b
    c = cross_validate(small, rng=np.random.default_rng(8), **kw)
    assert (a["fold_acc"], a["fold_auc"]) != (c["fold_acc"], c["fold_auc"])


def test_multiclass_auc_and_best_mean_epoch_selection():
    gs = synthetic_graph_set(45, seed=1, families=("ba", "er", "ws"), max_nodes=50)
    r = cross_validate(gs, folds=3, epochs=4, rng=np.random.default_rng(0), device="cpu",
                       hidden_channels=16, selection="best_mean_epoch")
    assert 1 <= r["epoch"] <= 4 and r["selection"] == "best_mean_epoch"
    assert all(0.0 <= a <= 1.0 for a in r["fold_auc"] + r["fold_acc"])
    assert r["acc_std"] >= 0.0


def test_public_edges_only_and_attributed_input(small):
    attributed = small.replace_graphs([g.replace(x=np.ones((g.num_nodes, 2), np.float32)) for g in small])
    r = cross_validate(attributed, folds=2, epochs=1, rng=np.random.default_rng(0), device="cpu",
                       hidden_channels=8, edges="public")
    assert r["edges"] == "public" and r["protocol"]["input_features"] == "node features"


@pytest.mark.parametrize(
    "kw, err, match",
    [
        ({"folds": 40}, ValueError, "needs at least 40 per class"),
        ({"edges": "private"}, ValueError, "edges must be 'all' or 'public'"),
        ({"selection": "best"}, ValueError, "selection"),
        ({"rng": 0}, TypeError, "numpy.random.Generator"),
        ({"epochs": 0}, ValueError, "epochs"),
    ],
)
def test_bad_arguments(small, kw, err, match):
    args = {"folds": 3, "epochs": 1, "rng": np.random.default_rng(0), "device": "cpu", **kw}
    with pytest.raises(err, match=match):
        cross_validate(small, **args)
