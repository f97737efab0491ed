import math

import pytest
import torch
import torch.nn.functional as F
from pydantic import ValidationError
from torch_geometric.nn import GATConv

from privgraph.config.pipeline import EvaluateConfig
from privgraph.evaluate.models import GAT

# 4 nodes, undirected edges 0-1, 1-2, 1-3, both directions
EDGE_INDEX = torch.tensor([[0, 1, 1, 2, 1, 3], [1, 0, 2, 1, 3, 1]])
X = torch.tensor([[1.0, 0.0], [0.0, 1.0], [2.0, 2.0], [4.0, 0.0]])
# mean over the CLOSED neighbourhood: 0:{0,1}  1:{0,1,2,3}  2:{1,2}  3:{1,3}
CLOSED_MEAN = torch.tensor([[0.5, 0.5], [7 / 4, 3 / 4], [1.0, 1.5], [2.0, 0.5]])
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


def pyg_copy(layer: GATConv) -> GATConv:
    ref = GATConv(layer.in_channels, layer.out_channels, heads=layer.heads, concat=layer.concat)
    ref.load_state_dict(layer.state_dict())
    return ref.eval()


def pyg_forward(model: GAT, x: torch.Tensor, edge_index: torch.Tensor) -> torch.Tensor:
    refs = [pyg_copy(c).to(x.dtype) for c in model.convs]
    for i, ref in enumerate(refs):
        x = ref(x, edge_index)
        if i < len(refs) - 1:
            x = F.elu(x)
    return x


def test_uniform_attention_is_the_closed_neighbourhood_mean():
    model = GAT(2, 8, 2, num_layers=1, dropout=0.0, generator=gen())
    conv = model.convs[0]
    assert (conv.heads, conv.concat) == (1, False)
    with torch.no_grad():
        conv.lin.weight.copy_(torch.eye(2))
        conv.att_src.zero_()
        conv.att_dst.zero_()
        conv.bias.copy_(torch.tensor([0.5, -0.5]))
    assert torch.allclose(model(X, EDGE_INDEX), CLOSED_MEAN + torch.tensor([0.5, -0.5]))


@pytest.mark.parametrize("num_layers", [1, 2, 3])
def test_shapes_and_width_per_head(num_layers):
    model = GAT(12, 32, 5, num_layers=num_layers, heads=4, generator=gen())
    assert len(model.convs) == num_layers
    for conv in model.convs[:-1]:
        # hidden_channels is the width of a hidden layer's output: heads x (hidden // heads)
        assert (conv.heads, conv.out_channels, conv.concat) == (4, 8, True)
        assert conv.lin.weight.shape[0] == 32 and conv.bias.shape == (32,)
    last = model.convs[-1]
    assert (last.heads, last.out_channels, last.concat) == (1, 5, False)
    assert last.in_channels == (12 if num_layers == 1 else 32)
    x, ei = random_graph()
    assert model(x, ei, generator=gen(1)).shape == (30, 5)
    assert GAT(12, 64, 5, generator=gen()).convs[0].out_channels == 8  # the paper's Cora model


@pytest.mark.parametrize("cached", [False, True])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_matches_pyg_gatconv_for_every_input_layout(cached, dtype):
    x, ei = random_graph()
    model = GAT(12, 16, 4, num_layers=3, heads=4, cached=cached, generator=gen(1)).to(dtype).eval()
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
        model = GAT(12, 16, 4, dropout=0.0, cached=cached, generator=gen(5))
        for _ in range(2):  # the second pass runs from the caches
            model.zero_grad()
            ((model(inp, ei) - target) ** 2).sum().backward()
        grads.append([p.grad.clone() for p in model.parameters()])
    for gs in grads[1:]:
        for a, b in zip(gs, grads[0], strict=True):
            assert torch.allclose(a, b, atol=1e-5)


def test_parameters_and_dropout_come_from_the_generator_only():
    x, ei = random_graph()
    torch_state = torch.random.get_rng_state()
    a = GAT(12, 16, 3, attention_dropout=0.3, generator=gen(7))
    b = GAT(12, 16, 3, attention_dropout=0.3, generator=gen(7))
    c = GAT(12, 16, 3, attention_dropout=0.3, generator=gen(8))
    b.reset_parameters(gen(7))
    outs = [m.train()(x.to_sparse_csr(), ei, generator=gen(9)) for m in (a, b, c)]
    outs[0].sum().backward()
    assert torch.equal(torch.random.get_rng_state(), torch_state)
    for (name, pa), pb, pc in zip(a.named_parameters(), b.parameters(), c.parameters(),
                                  strict=True):
        assert torch.equal(pa, pb)
        assert name.endswith("bias") or not torch.equal(pa, pc)  # biases start at zero
    assert torch.equal(outs[0], outs[1])
    assert not torch.equal(outs[0], outs[2])
    # another dropout stream, other masks (input AND attention dropout)
    assert not torch.equal(a(x, ei, generator=gen(9)), a(x, ei, generator=gen(10)))
    assert torch.equal(a(x, ei, generator=gen(9)), a(x, ei, generator=gen(9)))
    no_input_dropout = GAT(12, 16, 3, dropout=0.0, attention_dropout=0.3, generator=gen(7))
    assert not torch.equal(no_input_dropout(x, ei, generator=gen(1)),
                           no_input_dropout(x, ei, generator=gen(2)))
    # evaluation mode: no dropout at all
    a.eval()
    assert torch.equal(a(x, ei), a(x, ei))


def test_initialisation_is_pygs_glorot():
    model = GAT(40, 64, 7, heads=8, generator=gen(2))
    for conv in model.convs:
        w = conv.lin.weight
        for p, bound in [
            (w, math.sqrt(6 / (w.shape[0] + w.shape[1]))),
            (conv.att_src, math.sqrt(6 / (conv.heads + conv.out_channels))),
            (conv.att_dst, math.sqrt(6 / (conv.heads + conv.out_channels))),
        ]:
            assert p.abs().max() <= bound
            assert p.abs().max() > 0.5 * bound
        assert torch.equal(conv.bias, torch.zeros_like(conv.bias))
        assert conv.dropout == 0.0  # GATConv's own attention dropout (global RNG) stays off


def test_without_edges_each_node_sees_only_itself():
    x, ei = random_graph()
    model = GAT(12, 16, 3, generator=gen(3)).eval()
    out = model(x, NO_EDGES)
    perm = torch.randperm(30, generator=gen(4))
    # node 0 keeps its features, every other row is shuffled: node 0's output is unchanged
    others = perm[perm != 0]
    x2 = x.clone()
    x2[1:] = x[others]
    assert torch.allclose(model(x2, NO_EDGES)[0], out[0], atol=1e-6)
    assert torch.allclose(model(x2, NO_EDGES)[1:], out[others], atol=1e-6)
    # a per-node MLP: the same as one node at a time, and existing self-loops change nothing
    single = torch.cat([model(x[i : i + 1], NO_EDGES) for i in range(30)])
    assert torch.allclose(out, single, atol=1e-6)
    loops = torch.arange(30).repeat(2, 1)
    assert torch.allclose(model(x, loops), out, atol=1e-6)
    assert torch.allclose(model(x.to_sparse_csr(), NO_EDGES), out, atol=1e-6)


def test_same_keywords_as_the_gcn():
    from privgraph.evaluate.models import GCN

    kwargs = {"num_layers": 3, "dropout": 0.25, "aggr": "mean", "cached": True, "generator": gen()}
    for cls in (GCN, GAT):
        model = cls(8, 8, 3, **kwargs)
        model.train()
        with pytest.raises(RuntimeError, match="generator"):
            model(torch.randn(4, 8, generator=gen()), EDGE_INDEX)
        out = model(torch.randn(4, 8, generator=gen()), EDGE_INDEX, generator=gen())
        assert out.shape == (4, 3)


def test_refuses_bad_arguments():
    with pytest.raises(ValueError, match="GAT: aggregation must be 'mean'"):
        GAT(4, 8, 2, aggr="gcn")
    with pytest.raises(ValueError, match="GAT: hidden_channels"):
        GAT(4, 0, 2)
    with pytest.raises(ValueError, match="must be a multiple of heads"):
        GAT(4, 12, 2, heads=8)
    GAT(4, 12, 2, heads=8, num_layers=1)  # no hidden layer: no constraint
    with pytest.raises(ValueError, match="GAT: heads"):
        GAT(4, 8, 2, heads=0)
    with pytest.raises(ValueError, match="GAT: num_layers"):
        GAT(4, 8, 2, num_layers=0)
    with pytest.raises(ValueError, match="p must be"):
        GAT(4, 8, 2, dropout=1.0)
    with pytest.raises(ValueError, match="p must be"):
        GAT(4, 8, 2, attention_dropout=1.0)
    with pytest.raises(TypeError, match="generator"):
        GAT(4, 8, 2).reset_parameters(generator=0)


def test_repr():
    assert repr(GAT(1433, 64, 7)) == "GAT(1433, 64, 7, num_layers=2, heads=8, aggr='mean')"


def test_config_refuses_what_gat_does_not_take():
    assert EvaluateConfig(model="gat").train_kwargs()["model"] == "gat"
    with pytest.raises(ValidationError, match="model 'gat' aggregates by attention-weighted mean"):
        EvaluateConfig(model="gat", aggr="gcn")
    with pytest.raises(ValidationError, match="set hidden to a multiple of 8"):
        EvaluateConfig(model="gat", hidden=100)
    EvaluateConfig(model="gcn", hidden=100)


def test_config_error_names_the_yaml_path():
    from privgraph.config.loader import parse_config
    from privgraph.errors import ConfigError

    base = {"pipelines": {"cora": {
        "dataset": {"name": "cora"}, "edges": {"mechanism": "dprr", "epsilon": 1.0},
        "evaluate": {"model": "gat", "aggr": "gcn"},
    }}}
    with pytest.raises(ConfigError, match=r"^pipelines\.cora\.evaluate: model 'gat'"):
        parse_config(base)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_on_cuda():
    x, ei = random_graph()
    model = GAT(12, 16, 4, attention_dropout=0.2, generator=gen(1)).eval()
    expected = pyg_forward(model, x, ei)
    state = {k: v.clone() for k, v in model.state_dict().items()}
    dev = torch.device("cuda")
    model = model.to(dev)
    cuda_state, cpu_state = torch.cuda.get_rng_state(), torch.random.get_rng_state()
    model.reset_parameters(torch.Generator(device=dev).manual_seed(0))
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
