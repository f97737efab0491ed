"""Every node model through the one training loop (``training.fit_node_classifier``): it learns a
planted partition, its feature-only floor is a floor, a seed fixes the training, and its float64
query copy predicts what the trained model does; on CUDA when there is one."""

import numpy as np
import pytest
import torch

from privgraph.ingest.datasets.synthetic import sbm_graph
from privgraph.evaluate.models import GAT, GCN, GIN, GraphSAGE

pytestmark = pytest.mark.filterwarnings("ignore:Sparse CSR tensor support is in beta")

MODELS = {"gcn": GCN, "sage": GraphSAGE, "gat": GAT, "gin": GIN}
#: test accuracy each reaches on the sparse, weak features (chance 1/3): SAGE's separate root
#: weight leans on a node's own features more than the others do
SPARSE_FLOOR = {"gcn": 0.7, "sage": 0.65, "gat": 0.7, "gin": 0.7}


def planted_graph(sparse: bool = False):
    """A planted partition: 300 nodes, 3 classes (chance 1/3), 90% of the edges within a class;
    dense label-correlated features, or sparse binary ones (stored as CSR by the training)."""
    g = sbm_graph(300, num_classes=3, avg_degree=8.0, homophily=0.9, num_features=16,
                  feature_signal=0.5, seed=0)
    if not sparse:
        return g
    rng = np.random.default_rng(0)
    return g.replace(x=(rng.random(g.x.shape) < 0.05 + 0.1 * (g.x > 0.6)).astype(np.float32))


def fit(model: str, **overrides):
    return {"seed": 0, "model": model, "hidden": 16, "epochs": 30, "patience": None, "device": "cpu", **overrides}


@pytest.fixture(scope="module", params=sorted(MODELS))
def trained(request):
    from privgraph.evaluate.training import fit_node_classifier

    return request.param, {s: fit_node_classifier(planted_graph(s), **fit(request.param)) for s in (False, True)}


def test_trains_on_a_planted_partition(trained):
    model, tc = trained
    assert tc[False].result["test_acc"] > 0.9
    assert tc[True].result["test_acc"] > SPARSE_FLOOR[model]  # weak sparse features: the graph carries it
    assert type(tc[False].net) is MODELS[model]


@pytest.mark.parametrize("model", sorted(MODELS))
def test_feature_only_floor(model):
    from privgraph.evaluate.training import fit_node_classifier

    res = fit_node_classifier(planted_graph(), edges="none", **fit(model)).result
    assert 0.6 < res["test_acc"] < 0.95


@pytest.mark.parametrize("model", sorted(MODELS))
def test_same_seed_same_training(model):
    from privgraph.evaluate.training import train_node_classifier

    graph = planted_graph(sparse=True)
    assert train_node_classifier(graph, **fit(model, epochs=5)) == train_node_classifier(graph, **fit(model, epochs=5))


@pytest.mark.parametrize("sparse", [False, True])
def test_query_posteriors_in_float64(trained, sparse):
    tc = trained[1][sparse]
    xp = tc.prepare()
    assert xp.layout == (torch.sparse_csr if sparse else torch.strided)
    q = tc.query()
    assert q.dtype == torch.float64 and q.shape == (300, 3)
    assert torch.allclose(q.sum(dim=1), torch.ones(300, dtype=torch.float64))
    # the float64 copy predicts what the trained float32 model does
    with torch.no_grad():
        p32 = tc.net(xp.to(torch.float32), tc.edge_index).softmax(dim=1)
    assert torch.allclose(q.float(), p32, atol=1e-4)
    assert all(p.dtype == torch.float32 for p in tc.net.parameters())  # the copy is separate


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
@pytest.mark.parametrize("model", sorted(MODELS))
def test_trains_on_cuda(model):
    from privgraph.evaluate.training import fit_node_classifier

    tc = fit_node_classifier(planted_graph(sparse=True), **fit(model, device="cuda"))
    assert tc.result["device"].startswith("cuda") and tc.result["test_acc"] > 0.7
    q = tc.query()
    assert q.is_cuda
    assert torch.allclose(q.sum(dim=1), torch.ones(300, dtype=torch.float64, device="cuda"))
