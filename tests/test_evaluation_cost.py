"""The evaluation's cost (issue 43): what makes it cheaper must not change what it computes."""

import numpy as np
import pytest
import torch

import privgraph.evaluate.model_inputs as model_inputs
from privgraph.evaluate.models import GCN, GIN, GraphSAGE, KProp
from privgraph.evaluate.models.kprop import LPGNN_KPROP
from privgraph.evaluate.models.sparse import FactoredInput, PropagatedInput
from privgraph.evaluate.model_inputs import InputCache
from privgraph.evaluate.training import fit_ensemble, fit_node_classifier
from privgraph.evaluate.utility import evaluate_utility
from tests.test_training import QUICK, two_communities

pytestmark = pytest.mark.filterwarnings("ignore:Sparse CSR tensor support is in beta")


@pytest.fixture(scope="module")
def graph():
    g = two_communities(signal=0.3, seed=3)
    public = g.edges_public[:, ::2]
    return g.replace(edges_public=public, edges_private=g.edges_public[:, 1::2])


def _bag_of_words(g):
    rng = np.random.default_rng(0)
    x = (rng.random(g.x.shape[0] * 40) < 0.03).reshape(g.x.shape[0], 40).astype(np.float32)
    x[:, 0] += g.y  # a word that says the class
    return g.replace(x=x)


@pytest.mark.parametrize("input_dropout", [False, True])
def test_input_dropout_off_leaves_the_first_layer_alone(input_dropout):
    x, ei = torch.randn(30, 6), torch.tensor([[0, 1, 2], [1, 2, 0]])
    net = GCN(6, 4, 3, num_layers=1, input_dropout=input_dropout, generator=torch.Generator().manual_seed(0))
    train = net.train()(x, ei, generator=torch.Generator().manual_seed(1))
    assert torch.equal(train, net.eval()(x, ei)) is (not input_dropout)
    with pytest.raises(ValueError, match="input_dropout must be a bool"):
        GCN(6, 4, 3, input_dropout=1)


def test_dense_input_trains_without_input_dropout_sparse_input_with_it(graph):
    dev = torch.device("cpu")
    args = dict(edges="all", model="gcn", aggr=None, kprop_features=0, feature_dim=None, seed=None, dev=dev)
    dense = model_inputs._prepare_inputs(graph, **args)
    sparse = model_inputs._prepare_inputs(_bag_of_words(graph), **args)
    assert dense.x.layout == torch.strided and dense.model_kwargs["input_dropout"] is False
    assert sparse.x.layout == torch.sparse_csr and sparse.model_kwargs["input_dropout"] is True


@pytest.mark.parametrize("model", ["gcn", "sage", "gin"])
@pytest.mark.parametrize("kprop", [0, 2])
def test_the_shared_first_layer_trains_exactly_as_two_products(graph, model, kprop, monkeypatch):
    """One first-layer product per epoch serves the scoring and the next step: bit-identical."""
    shared = fit_node_classifier(graph, seed=4, model=model, kprop_features=kprop, hidden=16, epochs=25)
    for cls in (GCN, GraphSAGE, GIN):
        monkeypatch.setattr(cls, "shares_first_layer", property(lambda self: False))
    apart = fit_node_classifier(graph, seed=4, model=model, kprop_features=kprop, hidden=16, epochs=25)
    assert shared.result == apart.result
    assert np.array_equal(shared.posteriors, apart.posteriors)
    assert all(torch.equal(a, b) for a, b in zip(shared.net.state_dict().values(), apart.net.state_dict().values()))


def test_the_input_cache_changes_no_result(graph):
    cache = InputCache()
    for kwargs in ({"kprop_features": 2}, {"edges": "none"}, {"feature_dim": 4}, {"kprop_features": 2}):
        fresh = fit_ensemble(graph, seed=2, members=2, **QUICK, **kwargs)
        cached = fit_ensemble(graph, seed=2, members=2, input_cache=cache, **QUICK, **kwargs)
        assert fresh[0] == cached[0] and np.array_equal(fresh[1], cached[1])
    other = _bag_of_words(graph)  # another graph object: the cache holds its inputs instead
    assert np.array_equal(fit_ensemble(other, seed=2, members=2, input_cache=cache, **QUICK)[1],
                          fit_ensemble(other, seed=2, members=2, **QUICK)[1])


def test_an_evaluation_prepares_each_input_once(graph, monkeypatch):
    calls = []
    real = model_inputs._prepare_inputs

    def counting(g, **kwargs):
        calls.append((id(g), kwargs["edges"]))
        return real(g, **kwargs)

    monkeypatch.setattr(model_inputs, "_prepare_inputs", counting)
    evaluate_utility(graph, graph, runs=2, seed_sequence=1, ensemble=2, **QUICK)
    # the clean graph's input, and the version's for the GNN, the floor and the public edges alone
    assert sorted(e for _, e in calls) == ["all", "all", "none", "public"]


def _product_error(form, x, g):
    """The largest relative error of ``form``'s first-layer product and of its weight gradient
    against the dense matrix ``x``'s."""
    w = torch.randn(8, x.shape[1], generator=g, requires_grad=True)
    h = form.linear(w)
    (gw,) = torch.autograd.grad((h * h).sum(), w)
    w2 = w.detach().clone().requires_grad_()
    h2 = x @ w2.t()
    (gw2,) = torch.autograd.grad((h2 * h2).sum(), w2)
    return max(float(torch.linalg.vector_norm(a - b) / torch.linalg.vector_norm(b)) for a, b in ((h.detach(), h2.detach()), (gw, gw2)))


def test_a_factored_input_multiplies_as_the_matrix_it_stands_for():
    g = torch.Generator().manual_seed(0)
    raw = torch.full((50, 30), 0.5)
    raw[torch.arange(50), torch.randint(0, 30, (50,), generator=g)] = torch.rand(50, generator=g) * 4 - 1.5
    center = raw.mean(dim=0)
    dense = raw - center
    sparse_form = model_inputs._factored_input(dense, raw, center)
    low = torch.randn(200, 3, generator=g) @ torch.randn(3, 60, generator=g)
    low_form = model_inputs._factored_input(low - low.mean(0), None, low.mean(0))
    assert isinstance(sparse_form, FactoredInput) and sparse_form.left.layout == torch.sparse_csr
    assert isinstance(low_form, FactoredInput) and low_form.right.shape[0] <= 16
    for form, x in ((sparse_form, dense), (low_form, low - low.mean(0))):
        assert torch.allclose(form.dense(), x, atol=1e-5) and form.shape == x.shape
        assert _product_error(form, x, g) <= 1e-3


def test_only_a_cheaper_form_within_the_tolerance_replaces_the_input():
    g = torch.Generator().manual_seed(1)
    noise = torch.randn(200, 60, generator=g)  # full rank: no factors within 1e-4
    assert model_inputs._factored_input(noise, None, noise.mean(0)) is noise
    smooth = torch.randn(200, 5, generator=g) @ torch.randn(5, 60, generator=g) + 1e-6 * noise
    form = model_inputs._factored_input(smooth, None, smooth.mean(0))
    err = torch.linalg.vector_norm(form.dense() - smooth) / torch.linalg.vector_norm(smooth)
    assert isinstance(form, FactoredInput) and float(err) <= model_inputs.FACTOR_TOLERANCE
    assert form.right.shape[0] == 5  # the smallest rank within the tolerance
    dense_values = torch.rand(200, 60, generator=g)  # no common value: the matrix itself
    assert model_inputs._factored_input(dense_values, dense_values, dense_values.mean(0)) is dense_values


def test_training_over_the_factored_input_is_training_over_the_matrix(graph, monkeypatch):
    release = _one_coordinate_release(graph)
    inp = model_inputs._prepare_inputs(release, edges="none", model="gcn", aggr=None, kprop_features=0, feature_dim=None,
                                   seed=None, dev=torch.device("cpu"))
    assert isinstance(inp.x, FactoredInput)
    factored = fit_node_classifier(release, seed=3, edges="none", **QUICK)
    monkeypatch.setattr(model_inputs, "_factored_input", lambda x, raw, center: x)
    dense = fit_node_classifier(release, seed=3, edges="none", **QUICK)
    assert factored.result["best_epoch"] == dense.result["best_epoch"]
    assert np.allclose(factored.posteriors, dense.posteriors, atol=1e-4)


def _one_coordinate_release(graph, seed=5):
    """A Piecewise-like release of 40 features: every entry 0.5 but one sampled coordinate per node."""
    rng = np.random.default_rng(seed)
    x = np.full((graph.x.shape[0], 40), 0.5, np.float32)
    rows = np.arange(x.shape[0])
    x[rows, rng.integers(0, x.shape[1], rows.size)] = np.where(graph.y == 1, 2.0, -1.0) + rng.normal(0, 1, rows.size)
    return graph.replace(x=x)


def test_a_propagated_input_multiplies_as_the_propagated_matrix(graph, monkeypatch):
    monkeypatch.setattr(model_inputs, "PROPAGATION_COST_SHARE", 1.0)
    data = _one_coordinate_release(graph).to_pyg("all")
    form = model_inputs._propagated_input(data.x, data.edge_index, 3)
    assert isinstance(form, PropagatedInput) and form.base.left.layout == torch.sparse_csr
    propagated = KProp(3, **LPGNN_KPROP)(data.x, data.edge_index)
    x = propagated - propagated.mean(dim=0)
    assert torch.allclose(form.center, propagated.mean(dim=0), atol=1e-6)
    assert torch.allclose(form.dense(), x, atol=1e-5) and form.shape == x.shape
    assert _product_error(form, x, torch.Generator().manual_seed(0)) <= 1e-5


def test_the_propagated_input_only_where_it_is_cheaper_and_exact(graph, monkeypatch):
    data = _one_coordinate_release(graph).to_pyg("all")
    monkeypatch.setattr(model_inputs, "PROPAGATION_COST_SHARE", 1e-9)  # dearer than the dense input
    assert model_inputs._propagated_input(data.x, data.edge_index, 3) is None
    monkeypatch.setattr(model_inputs, "PROPAGATION_COST_SHARE", 1.0)
    assert model_inputs._propagated_input(torch.rand(data.x.shape), data.edge_index, 3) is None  # no common value
    assert model_inputs._propagated_input(data.x - 0.5, data.edge_index, 3) is None  # sparse input keeps its own path


def test_training_over_the_propagated_input_is_training_over_the_matrix(graph, monkeypatch):
    monkeypatch.setattr(model_inputs, "PROPAGATION_COST_SHARE", 1.0)
    release = _one_coordinate_release(graph)
    propagated = fit_node_classifier(release, seed=3, kprop_features=2, **QUICK)
    # a query (float64, dense KProp, the training centre) answers what was trained
    assert np.allclose(propagated.query().numpy(), propagated.posteriors, atol=1e-4)
    monkeypatch.setattr(model_inputs, "_propagated_input", lambda x, edge_index, steps: None)
    dense = fit_node_classifier(release, seed=3, kprop_features=2, **QUICK)
    assert propagated.result["best_epoch"] == dense.result["best_epoch"]
    assert np.allclose(propagated.posteriors, dense.posteriors, atol=1e-4)
    assert torch.allclose(propagated.center, dense.center, atol=1e-6)
