import math

import numpy as np
import pytest
import torch

from privgraph.evaluate.models import GraphConvolution, KProp
from privgraph.evaluate.models.kprop import kprop_operator

# 4 nodes, undirected edges 0-1, 1-2, 1-3, both directions
EDGE_INDEX = torch.tensor([[0, 1, 1, 2, 1, 3], [1, 0, 2, 1, 3, 1]])
X = torch.tensor([[1.0, 0.0], [0.0, 1.0], [2.0, 2.0], [4.0, 0.0]])
R2, R3, R8 = math.sqrt(2.0), math.sqrt(3.0), math.sqrt(8.0)

# mean over the OPEN neighbourhood: 0:{1}  1:{0,2,3}  2:{1}  3:{1}
MEAN_1 = torch.tensor([[0.0, 1.0], [7 / 3, 2 / 3], [0.0, 1.0], [0.0, 1.0]])
# a second step: 0, 2, 3 take node 1's value, node 1 the mean of three copies of (0, 1)
MEAN_2 = torch.tensor([[7 / 3, 2 / 3], [0.0, 1.0], [7 / 3, 2 / 3], [7 / 3, 2 / 3]])
# mean over the closed neighbourhood (self_loops=True), as the GCN's mean layer
MEAN_LOOPS_1 = torch.tensor([[0.5, 0.5], [7 / 4, 3 / 4], [1.0, 1.5], [2.0, 0.5]])
# 1/sqrt(d_u d_v) with d = (1, 3, 1, 1)
GCN_1 = torch.tensor([[0.0, 1 / R3], [7 / R3, 2 / R3], [0.0, 1 / R3], [0.0, 1 / R3]])
# with self-loops: d = (2, 4, 2, 2)
GCN_LOOPS_1 = torch.tensor(
    [[1 / 2, 1 / (2 * R2)], [7 / R8, 1 / 4 + 2 / R8], [1.0, 1 + 1 / R8], [2.0, 1 / R8]]
)

pytestmark = pytest.mark.filterwarnings("ignore:Sparse CSR tensor support is in beta")


@pytest.mark.parametrize(
    ("steps", "aggr", "self_loops", "expected"),
    [
        (1, "mean", False, MEAN_1),
        (2, "mean", False, MEAN_2),
        (1, "mean", True, MEAN_LOOPS_1),
        (1, "gcn", False, GCN_1),
        (1, "gcn", True, GCN_LOOPS_1),
    ],
)
def test_by_hand(steps, aggr, self_loops, expected):
    prop = KProp(steps, aggr=aggr, self_loops=self_loops)
    assert torch.allclose(prop(X, EDGE_INDEX), expected, atol=1e-6)
    assert torch.allclose(prop(X.to_sparse_csr(), EDGE_INDEX), expected, atol=1e-6)
    assert torch.allclose(prop(X.to_sparse_coo(), EDGE_INDEX), expected, atol=1e-6)


def test_two_steps_are_one_step_twice():
    for aggr in ("mean", "gcn"):
        for loops in (False, True):
            one = KProp(1, aggr=aggr, self_loops=loops)
            two = KProp(2, aggr=aggr, self_loops=loops)
            assert torch.allclose(two(X, EDGE_INDEX), one(one(X, EDGE_INDEX), EDGE_INDEX))


def test_zero_steps_is_the_identity():
    assert KProp(0)(X, EDGE_INDEX) is X


@pytest.mark.parametrize("aggr", ["mean", "gcn"])
def test_one_layer_with_self_loops_is_the_gcn_propagation(aggr):
    conv = GraphConvolution(2, 2, normalize=aggr, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        conv.weight.copy_(torch.eye(2))
    assert torch.allclose(KProp(1, aggr=aggr, self_loops=True)(X, EDGE_INDEX), conv(X, EDGE_INDEX))


def test_self_loops_and_isolated_nodes():
    with_loop = torch.cat([EDGE_INDEX, torch.tensor([[0], [0]])], dim=1)
    # an existing self-loop is dropped without self_loops, counted once with them
    assert torch.allclose(KProp(1)(X, with_loop), MEAN_1)
    assert torch.allclose(KProp(1, self_loops=True)(X, with_loop), MEAN_LOOPS_1)
    # a node without neighbours keeps its own value (an empty mean would erase it)
    x = torch.cat([X, torch.tensor([[3.0, -1.0]])])
    for aggr in ("mean", "gcn"):
        for loops in (False, True):
            out = KProp(3, aggr=aggr, self_loops=loops)(x, EDGE_INDEX)
            assert torch.equal(out[4], x[4])


def test_matches_dense_powers_on_a_random_graph():
    rng = np.random.default_rng(0)
    n = 30
    upper = np.triu(rng.random((n, n)) < 0.15, k=1)
    A = (upper | upper.T).astype(np.float64)
    A[0, :] = A[:, 0] = 0.0  # node 0 isolated
    ei = torch.from_numpy(np.stack(np.nonzero(A)))
    x = rng.normal(size=(n, 5))
    deg = A.sum(1)
    A_fix = A + np.diag(deg == 0)  # isolated: a self-loop
    d = A_fix.sum(1)
    P_mean = A_fix / d[:, None]
    P_gcn = A_fix / np.sqrt(np.outer(d, d))
    for aggr, P in (("mean", P_mean), ("gcn", P_gcn)):
        out = KProp(4, aggr=aggr)(torch.from_numpy(x), ei).numpy()
        np.testing.assert_allclose(out, np.linalg.matrix_power(P, 4) @ x, rtol=1e-10, atol=1e-12)


def test_mean_keeps_probability_rows():
    g = torch.Generator().manual_seed(1)
    ei = torch.randint(0, 20, (2, 50), generator=g)
    ei = torch.cat([ei, ei.flip(0)], dim=1)
    p = torch.rand(20, 4, generator=g).softmax(dim=1)
    out = KProp(5)(p, ei)
    assert torch.allclose(out.sum(dim=1), torch.ones(20))


def test_gradients_flow_through_the_cached_operator():
    g = torch.Generator().manual_seed(2)
    x = torch.randn(4, 3, dtype=torch.float64, generator=g, requires_grad=True)
    prop = KProp(2, aggr="gcn", cached=True)
    assert torch.autograd.gradcheck(lambda t: prop(t, EDGE_INDEX), (x,))
    assert prop._cache is not None and prop._cache[0] is EDGE_INDEX
    op, _ = kprop_operator(EDGE_INDEX, 4, aggr="gcn", dtype=torch.float64)
    assert op.layout == torch.sparse_csr  # never a dense n x n matrix


def test_cache_follows_a_new_edge_index():
    prop = KProp(1, cached=True)
    assert torch.allclose(prop(X, EDGE_INDEX), MEAN_1)
    assert torch.allclose(prop(X, torch.empty(2, 0, dtype=torch.long)), X)
    prop.reset_parameters()
    assert prop._cache is None


def test_refuses_bad_arguments():
    for bad in (-1, 1.5, True, None):
        with pytest.raises(ValueError, match="steps"):
            KProp(bad)
    with pytest.raises(ValueError, match="KProp: aggregation"):
        KProp(1, aggr="max")
    with pytest.raises(ValueError, match="self_loops"):
        KProp(1, self_loops="yes")
    with pytest.raises(ValueError, match="floating point"):
        KProp(1)(torch.ones(4, 2, dtype=torch.long), EDGE_INDEX)


def test_repr():
    assert repr(KProp(4)) == "KProp(4, aggr='mean', self_loops=False)"
    assert repr(KProp(2, aggr="gcn", self_loops=True)) == "KProp(2, aggr='gcn', self_loops=True)"
