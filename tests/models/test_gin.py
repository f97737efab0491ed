import math

import pytest
import torch
from pydantic import ValidationError
from torch.nn import Linear, ReLU, Sequential
from torch_geometric.nn import GINConv

from privgraph.config.pipeline import EvaluateConfig
from privgraph.evaluate.models import GIN

# 4 nodes, undirected edges 0-1, 1-2, 1-3, both directions
EDGE_INDEX = torch.tensor([[0, 1, 1, 2, 1, 3], [1, 0, 2, 1, 3, 1]])
X = torch.tensor([[1.0, 0.0], [0.0, 1.0], [2.0, 2.0], [4.0, 0.0]])
# sum over the CLOSED neighbourhood: 0:{0,1}  1:{0,1,2,3}  2:{1,2}  3:{1,3}
CLOSED_SUM = torch.tensor([[1.0, 1.0], [7.0, 3.0], [2.0, 3.0], [4.0, 1.0]])
NO_EDGES = torch.zeros(2, 0, dtype=torch.long)

pytestmark = pytest.mark.filterwarnings("ignore:Sparse CSR tensor support is in beta")


def gen(seed: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def random_graph(n: int = 30, f: int = 12, m: int = 60, seed: int = 3):
    """Sparse-ish features, a random undirected multigraph with a few self-loops."""
    g = gen(seed)
    x = torch.randn(n, f, generator=g) * (torch.rand(n, f, generator=g) < 0.3)
    ei = torch.randint(0, n, (2, m), generator=g)
    ei = torch.cat([ei, ei.flip(0), torch.tensor([[0, 5], [0, 5]])], dim=1)
    return x, ei


def pyg_copy(layer: GINConv) -> GINConv:
    lin1, lin2 = layer.nn[0], layer.nn[2]
    mlp = Sequential(Linear(lin1.in_features, lin1.out_features), ReLU(),
                     Linear(lin2.in_features, lin2.out_features))
    ref = GINConv(mlp, eps=0.0, train_eps=False)
    ref.load_state_dict(layer.state_dict())
    return ref


def pyg_forward(model: GIN, x: torch.Tensor, edge_index: torch.Tensor) -> torch.Tensor:
    refs = [pyg_copy(c).to(x.dtype) for c in model.convs]
    for i, ref in enumerate(refs):
        x = ref(x, edge_index)
        if i < len(refs) - 1:
            x = x.relu()
    return x


def test_one_layer_by_hand_sums_the_closed_neighbourhood():
    model = GIN(2, 2, 2, num_layers=1, dropout=0.0, generator=gen())
    conv = model.convs[0]
    with torch.no_grad():
        conv.nn[0].weight.copy_(torch.eye(2))
        conv.nn[0].bias.copy_(torch.tensor([0.5, 0.0]))  # after the sum: added once, not per node
        conv.nn[2].weight.copy_(2 * torch.eye(2))
        conv.nn[2].bias.copy_(torch.tensor([0.0, -1.0]))
    expected = 2 * (CLOSED_SUM + torch.tensor([0.5, 0.0])) + torch.tensor([0.0, -1.0])
    assert torch.allclose(model(X, EDGE_INDEX), expected)
    assert torch.allclose(model(X.to_sparse_csr(), EDGE_INDEX), expected)


@pytest.mark.parametrize("num_layers", [1, 2, 3])
def test_shapes(num_layers):
    model = GIN(12, 16, 5, num_layers=num_layers, generator=gen())
    assert len(model.convs) == num_layers
    widths = [(c.nn[0].in_features, c.nn[0].out_features, c.nn[2].out_features)
              for c in model.convs]
    ins = [12] + [16] * (num_layers - 1)
    assert widths == [(i, 16, 16) for i in ins[:-1]] + [(ins[-1], 16, 5)]
    for conv in model.convs:
        assert conv.eps.item() == 0.0 and "eps" not in dict(conv.named_parameters())  # GIN-0
    x, ei = random_graph()
    assert model(x, ei, generator=gen(1)).shape == (30, 5)


@pytest.mark.parametrize("cached", [False, True])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_matches_pyg_ginconv_for_every_input_layout(cached, dtype):
    x, ei = random_graph()
    model = GIN(12, 16, 4, num_layers=3, cached=cached, generator=gen(1)).to(dtype).eval()
    x = x.to(dtype)
    expected = pyg_forward(model, x, ei)
    atol = 1e-5 if dtype == torch.float32 else 1e-12
    for inp in (x, x.to_sparse_csr(), x.to_sparse_coo(), x):  # the last: from the caches
        assert torch.allclose(model(inp, ei), expected, atol=atol)
    with torch.no_grad():
        assert torch.allclose(model(x.to_sparse_csr(), ei), expected, atol=atol)


def test_sparse_cached_path_has_the_same_gradients():
    x, ei = random_graph()
    target = torch.randn(30, 4, generator=gen(4))
    grads = []
    xs = x.to_sparse_csr()
    for cached, inp in [(False, x), (True, x), (True, xs), (False, xs)]:
        model = GIN(12, 8, 4, dropout=0.0, cached=cached, generator=gen(5))
        for _ in range(2):  # the second pass runs from the caches
            model.zero_grad()
            ((model(inp, ei) - target) ** 2).sum().backward()
        grads.append([p.grad.clone() for p in model.parameters()])
    for gs in grads[1:]:
        for a, b in zip(gs, grads[0], strict=True):
            assert torch.allclose(a, b, atol=1e-4)


def test_parameters_and_dropout_come_from_the_generator_only():
    x, ei = random_graph()
    torch_state = torch.random.get_rng_state()
    a = GIN(12, 8, 3, generator=gen(7))
    b = GIN(12, 8, 3, generator=gen(7))
    c = GIN(12, 8, 3, generator=gen(8))
    b.reset_parameters(gen(7))
    outs = [m.train()(x.to_sparse_csr(), ei, generator=gen(9)) for m in (a, b, c)]
    outs[0].sum().backward()
    assert torch.equal(torch.random.get_rng_state(), torch_state)
    for pa, pb, pc in zip(a.parameters(), b.parameters(), c.parameters(), strict=True):
        assert torch.equal(pa, pb)
        assert not torch.equal(pa, pc)
    assert torch.equal(outs[0], outs[1])
    assert not torch.equal(outs[0], outs[2])
    assert not torch.equal(a(x, ei, generator=gen(9)), a(x, ei, generator=gen(10)))
    assert torch.equal(a(x, ei, generator=gen(9)), a(x, ei, generator=gen(9)))
    a.eval()
    assert torch.equal(a(x, ei), a(x, ei))


def test_initialisation_is_pygs_default_linear():
    model = GIN(40, 16, 7, generator=gen(2))
    for conv in model.convs:
        for lin in (conv.nn[0], conv.nn[2]):
            bound = 1 / math.sqrt(lin.in_features)
            for p in (lin.weight, lin.bias):
                assert p.abs().max() <= bound
                assert p.abs().max() > 0.5 * bound


def test_without_edges_each_node_sees_only_itself():
    x, ei = random_graph()
    model = GIN(12, 16, 3, generator=gen(3)).eval()
    out = model(x, NO_EDGES)
    perm = torch.randperm(30, generator=gen(4))
    others = perm[perm != 0]
    x2 = x.clone()
    x2[1:] = x[others]
    assert torch.allclose(model(x2, NO_EDGES)[0], out[0], atol=1e-6)
    assert torch.allclose(model(x2, NO_EDGES)[1:], out[others], atol=1e-6)
    # a per-node MLP: the same as one node at a time
    single = torch.cat([model(x[i : i + 1], NO_EDGES) for i in range(30)])
    assert torch.allclose(out, single, atol=1e-6)
    assert torch.allclose(model(x.to_sparse_csr(), NO_EDGES), out, atol=1e-6)


def test_aggr_is_always_the_sum():
    x, ei = random_graph()
    summed = GIN(12, 8, 3, aggr="sum", generator=gen(1)).eval()
    default = GIN(12, 8, 3, generator=gen(1)).eval()
    assert summed.aggr == default.aggr == "sum"
    assert torch.equal(summed(x, ei), default(x, ei))
    assert GIN(4, 4, 2, aggr=None).aggr == "sum"  # None: the model's own (NodeGNN)
    for bad in ("gcn", "max", "mean", 1):
        with pytest.raises(ValueError, match="GIN: GIN-0 aggregates by sum"):
            GIN(4, 4, 2, aggr=bad)


def test_same_keywords_as_the_gcn():
    from privgraph.evaluate.models import GCN

    kwargs = {"num_layers": 3, "dropout": 0.25, "cached": True, "generator": gen()}
    for cls, aggr in ((GCN, "mean"), (GIN, "sum")):
        model = cls(8, 4, 3, aggr=aggr, **kwargs)
        model.train()
        with pytest.raises(RuntimeError, match="generator"):
            model(torch.randn(4, 8, generator=gen()), EDGE_INDEX)
        out = model(torch.randn(4, 8, generator=gen()), EDGE_INDEX, generator=gen())
        assert out.shape == (4, 3)


def test_refuses_bad_arguments():
    with pytest.raises(ValueError, match="GIN: hidden_channels"):
        GIN(4, 0, 2)
    with pytest.raises(ValueError, match="GIN: num_layers"):
        GIN(4, 4, 2, num_layers=1.5)
    with pytest.raises(ValueError, match="GIN: in_channels"):
        GIN(0, 4, 2)
    with pytest.raises(ValueError, match="p must be"):
        GIN(4, 4, 2, dropout=1.0)
    with pytest.raises(TypeError, match="generator"):
        GIN(4, 4, 2).reset_parameters(generator=0)


def test_repr():
    assert repr(GIN(1433, 64, 7)) == "GIN(1433, 64, 7, num_layers=2, aggr='sum')"


def test_config_refuses_what_gin_does_not_take():
    assert EvaluateConfig(model="gin").train_kwargs()["aggr"] == "sum"  # aggr left out: GIN's sum
    assert EvaluateConfig(model="gin", aggr="sum").aggr == "sum"
    for bad in ("gcn", "mean"):
        with pytest.raises(ValidationError, match="model 'gin' sums"):
            EvaluateConfig(model="gin", aggr=bad)
    with pytest.raises(ValidationError, match="model 'gcn' aggregates by mean or symmetric normalisation: set aggr to 'mean' or 'gcn'"):
        EvaluateConfig(model="gcn", aggr="sum")
    with pytest.raises(ValidationError, match="model 'sage' aggregates by mean"):
        EvaluateConfig(model="sage", aggr="gcn")
    EvaluateConfig(model="gcn", aggr="gcn")


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_on_cuda():
    x, ei = random_graph()
    model = GIN(12, 16, 4, generator=gen(1)).eval()
    expected = pyg_forward(model, x, ei)
    state = {k: v.clone() for k, v in model.state_dict().items()}
    dev = torch.device("cuda")
    model = model.to(dev)
    cuda_state, cpu_state = torch.cuda.get_rng_state(), torch.random.get_rng_state()
    model.reset_parameters(torch.Generator(device=dev).manual_seed(0))
    assert model.convs[0].eps.item() == 0.0
    out = model.train()(x.to(dev), ei.to(dev), generator=torch.Generator(device=dev).manual_seed(1))
    out.sum().backward()
    assert torch.equal(torch.cuda.get_rng_state(), cuda_state)
    assert torch.equal(torch.random.get_rng_state(), cpu_state)
    model.load_state_dict(state)
    model.eval()
    for inp in (x, x.to_sparse_csr()):
        assert torch.allclose(model(inp.to(dev), ei.to(dev)).cpu(), expected, atol=1e-5)
    out64 = model.double()(x.to(dev, torch.float64).to_sparse_csr(), ei.to(dev))
    assert out64.dtype == torch.float64
    assert torch.allclose(out64.cpu().float(), expected, atol=1e-5)
