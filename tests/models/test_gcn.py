import pytest
import torch
from torch_geometric.nn import GCNConv

from privgraph.evaluate.models import GCN, GeneratorDropout, GraphConvolution

# 4 nodes, undirected edges 0-1, 1-2, 1-3, both directions
EDGE_INDEX = torch.tensor([[0, 1, 1, 2, 1, 3], [1, 0, 2, 1, 3, 1]])
X = torch.tensor([[1.0, 0.0], [0.0, 1.0], [2.0, 2.0], [4.0, 0.0]])
# mean over the closed neighbourhood: 0:{0,1}  1:{0,1,2,3}  2:{1,2}  3:{1,3}
MEAN = torch.tensor([[0.5, 0.5], [7 / 4, 3 / 4], [1.0, 1.5], [2.0, 0.5]])


pytestmark = pytest.mark.filterwarnings("ignore:Sparse CSR tensor support is in beta")


def gen(seed: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def identity_conv(**kwargs) -> GraphConvolution:
    conv = GraphConvolution(2, 2, generator=gen(), **kwargs)
    with torch.no_grad():
        conv.weight.copy_(torch.eye(2))
    return conv


@pytest.mark.parametrize("cached", [False, True])
def test_mean_aggregation_by_hand(cached):
    conv = identity_conv(cached=cached)
    assert torch.allclose(conv(X, EDGE_INDEX), MEAN)
    assert torch.allclose(conv(X, EDGE_INDEX), MEAN)  # second call: from the cache when cached
    assert torch.allclose(conv(X.to_sparse_csr(), EDGE_INDEX), MEAN)
    assert torch.allclose(conv(X.to_sparse_coo(), EDGE_INDEX), MEAN)
    with torch.no_grad():
        assert torch.allclose(conv(X.to_sparse_csr(), EDGE_INDEX), MEAN)
    with torch.no_grad():
        conv.bias.fill_(1.0)
    assert torch.allclose(conv(X, EDGE_INDEX), MEAN + 1.0)


def test_existing_self_loop_counted_once():
    conv = identity_conv()
    with_loop = torch.cat([EDGE_INDEX, torch.tensor([[0], [0]])], dim=1)
    assert torch.allclose(conv(X, with_loop), MEAN)


def test_isolated_node_keeps_its_own_features():
    conv = identity_conv()
    x = torch.cat([X, torch.tensor([[3.0, -1.0]])])
    out = conv(x, EDGE_INDEX)
    assert torch.allclose(out[:4], MEAN)
    assert torch.allclose(out[4], x[4])


@pytest.mark.parametrize("cached", [False, True])
def test_gcn_normalisation_matches_pyg_gcnconv(cached):
    ours = GraphConvolution(2, 3, normalize="gcn", cached=cached, generator=gen(1))
    with torch.no_grad():
        ours.bias.copy_(torch.tensor([0.1, -0.2, 0.3]))
    ref = GCNConv(2, 3)
    with torch.no_grad():
        ref.lin.weight.copy_(ours.weight)
        ref.bias.copy_(ours.bias)
    assert torch.allclose(ours(X, EDGE_INDEX), ref(X, EDGE_INDEX), atol=1e-6)


@pytest.mark.parametrize("normalize", ["mean", "gcn"])
def test_cached_sparse_path_has_the_same_gradients(normalize):
    g = torch.Generator().manual_seed(3)
    n, f = 30, 12
    x = (torch.rand(n, f, generator=g) < 0.2).float()
    ei = torch.randint(0, n, (2, 80), generator=g)
    ei = torch.cat([ei, ei.flip(0)], dim=1)
    target = torch.randn(n, 4, generator=g)
    grads = []
    xs = x.to_sparse_csr()
    for cached, inp in [(False, x), (True, x), (True, xs), (False, xs)]:
        conv = GraphConvolution(f, 4, normalize=normalize, cached=cached, generator=gen(5))
        for _ in range(2):  # the second pass runs from the caches
            conv.zero_grad()
            ((conv(inp, ei) - target) ** 2).sum().backward()
        grads.append((conv.weight.grad.clone(), conv.bias.grad.clone()))
    for gw, gb in grads[1:]:
        assert torch.allclose(gw, grads[0][0], atol=1e-5)
        assert torch.allclose(gb, grads[0][1], atol=1e-5)


def test_cache_follows_a_new_edge_index():
    conv = identity_conv(cached=True)
    assert torch.allclose(conv(X, EDGE_INDEX), MEAN)
    no_edges = torch.empty(2, 0, dtype=torch.long)
    assert torch.allclose(conv(X, no_edges), X)


def test_repr():
    assert repr(GCN(1433, 64, 7)) == "GCN(1433, 64, 7, num_layers=2, aggr='mean')"
    assert repr(GCN(8, 4, 3, num_layers=3, aggr="gcn")) == "GCN(8, 4, 3, num_layers=3, aggr='gcn')"
    assert repr(GraphConvolution(8, 4)) == "GraphConvolution(8, 4, normalize='mean')"
    assert repr(GeneratorDropout(0.25)) == "GeneratorDropout(p=0.25)"


@pytest.mark.parametrize(
    "kwargs",
    [{"aggr": "max"}, {"aggr": "sum"}, {"dropout": 1.0}, {"dropout": -0.1}, {"num_layers": 0}],
)
def test_invalid_arguments(kwargs):
    with pytest.raises(ValueError, match="GCN|GeneratorDropout"):
        GCN(8, 4, 3, **kwargs)


def test_layers_and_shapes():
    model = GCN(2, 5, 3, num_layers=3, generator=gen())
    assert [(c.in_channels, c.out_channels) for c in model.convs] == [(2, 5), (5, 5), (5, 3)]
    assert model.eval()(X, EDGE_INDEX).shape == (4, 3)
    single = GCN(2, 5, 3, num_layers=1, generator=gen())
    assert [(c.in_channels, c.out_channels) for c in single.convs] == [(2, 3)]


def test_initialisation_uses_only_the_generator():
    state = torch.random.get_rng_state()
    a = GCN(16, 8, 3, generator=gen(7))
    b = GCN(16, 8, 3, generator=gen(7))
    c = GCN(16, 8, 3, generator=gen(8))
    d = GCN(16, 8, 3)
    d.reset_parameters(gen(7))
    e = GCN(16, 8, 3, aggr="gcn", generator=gen(7))
    assert torch.equal(torch.random.get_rng_state(), state)
    for pa, pb, pd, pe in zip(a.parameters(), b.parameters(), d.parameters(), e.parameters()):
        assert torch.equal(pa, pb) and torch.equal(pa, pd) and torch.equal(pa, pe)
    assert not torch.equal(a.convs[0].weight, c.convs[0].weight)
    for conv in a.convs:
        assert torch.count_nonzero(conv.bias) == 0
        bound = (6 / (conv.in_channels + conv.out_channels)) ** 0.5  # Glorot uniform
        assert conv.weight.abs().max() <= bound


def test_reset_parameters_needs_a_generator():
    conv = GraphConvolution(2, 2, generator=gen())
    with pytest.raises(TypeError, match="torch.Generator"):
        conv.reset_parameters(0)


def test_dropout_eval_and_missing_generator():
    drop = GeneratorDropout(0.5)
    x = torch.ones(10, 3)
    assert drop.eval()(x) is x
    drop.train()
    with pytest.raises(RuntimeError, match="Generator"):
        drop(x)
    assert GeneratorDropout(0.0).train()(x) is x
    model = GCN(2, 4, 2, generator=gen()).train()
    with pytest.raises(RuntimeError, match="Generator"):
        model(X, EDGE_INDEX)


def test_dropout_masks_come_from_the_generator():
    state = torch.random.get_rng_state()
    drop = GeneratorDropout(0.3).train()
    x = torch.ones(200, 500)
    a, b, c = drop(x, gen(1)), drop(x, gen(1)), drop(x, gen(2))
    assert torch.equal(torch.random.get_rng_state(), state)
    assert torch.equal(a, b) and not torch.equal(a, c)
    values = torch.unique(a)
    assert values.numel() == 2 and values[0] == 0 and values[1].item() == pytest.approx(1 / 0.7)
    kept = (a != 0).float().mean().item()
    # 100,000 Bernoulli(0.7) draws: sd 0.00145, the tolerance is 5 sd
    assert abs(kept - 0.7) < 0.0073
    drop.generator = gen(1)
    assert torch.equal(drop(x), a)


@pytest.mark.parametrize("layout", ["csr", "coo"])
def test_sparse_dropout_keeps_zeros_and_layout(layout):
    x = torch.zeros(50, 40)
    x[::3, ::2] = 2.0
    sp = x.to_sparse_csr() if layout == "csr" else x.to_sparse_coo()
    out = GeneratorDropout(0.5).train()(sp, gen(4))
    assert out.layout == sp.layout
    dense = out.to_dense()
    assert torch.all(dense[x == 0] == 0)
    assert set(torch.unique(dense[x != 0]).tolist()) == {0.0, 4.0}
