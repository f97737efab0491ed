"""The propagation operators' CSR construction: the same matrix as torch's coalesce route, on both
of its routes (the CPU counting sort, the GPU key sort, run here on CPU tensors)."""

from __future__ import annotations

import pytest
import torch

from privgraph.evaluate.models.gcn import GCN
from privgraph.evaluate.models.sparse import _csr_counting_sort, _csr_key_sort, propagation_pair


def _reference(rows: torch.Tensor, cols: torch.Tensor, value: torch.Tensor, shape: tuple[int, int]) -> torch.Tensor:
    return torch.sparse_coo_tensor(torch.stack([rows, cols]), value, shape, check_invariants=True).coalesce().to_sparse_csr()


@pytest.mark.parametrize("build", [_csr_counting_sort, _csr_key_sort], ids=["counting_sort", "key_sort"])
@pytest.mark.parametrize(("n_rows", "n_cols", "m"), [(40, 40, 2_000), (300, 70, 5_000), (9, 9, 0), (5, 5, 1), (1, 1, 7)])
def test_the_csr_equals_the_coalesced_matrix(build, n_rows: int, n_cols: int, m: int) -> None:
    g = torch.Generator().manual_seed(m + n_rows)
    rows = torch.randint(0, n_rows, (m,), generator=g)
    cols = torch.randint(0, n_cols, (m,), generator=g)
    value = torch.rand(m, generator=g, dtype=torch.float64)
    got = build(rows, cols, value, (n_rows, n_cols))
    ref = _reference(rows, cols, value, (n_rows, n_cols))
    assert got.crow_indices().dtype == got.col_indices().dtype == torch.int32
    assert torch.equal(got.crow_indices().long(), ref.crow_indices())
    assert torch.equal(got.col_indices().long(), ref.col_indices())  # sorted, distinct per row
    torch.testing.assert_close(got.values(), ref.values(), rtol=0, atol=1e-12)  # duplicates summed
    # torch's own invariant check accepts it
    torch.sparse_csr_tensor(got.crow_indices(), got.col_indices(), got.values(), got.shape, check_invariants=True)
    if m:
        assert bool((torch.bincount(rows * n_cols + cols) > 1).any()) == (got.values().numel() < m)


def test_propagation_pair_is_the_operator_and_its_transpose() -> None:
    g = torch.Generator().manual_seed(3)
    ei = torch.randint(0, 50, (2, 400), generator=g)
    w = torch.rand(400, generator=g)
    op, op_t = propagation_pair(ei, w, 50)
    dense = torch.zeros(50, 50).index_put_((ei[1], ei[0]), w, accumulate=True)  # row = target
    torch.testing.assert_close(op.to_dense(), dense)
    torch.testing.assert_close(op_t.to_dense(), dense.t())


def test_a_cached_gcn_equals_its_message_passing_forward() -> None:
    """The cached (CSR product) forward and the uncached (per-edge messages) one agree."""
    g = torch.Generator().manual_seed(5)
    und = torch.randint(0, 60, (2, 300), generator=g)
    ei = torch.cat([und, und.flip(0)], dim=1)
    x = torch.randn(60, 8, generator=g)
    for aggr in ("mean", "gcn"):
        cached = GCN(8, 16, 3, aggr=aggr, cached=True, generator=torch.Generator().manual_seed(1)).eval()
        plain = GCN(8, 16, 3, aggr=aggr, cached=False, generator=torch.Generator().manual_seed(1)).eval()
        torch.testing.assert_close(cached(x, ei), plain(x, ei), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("bad", [(0, 9), (-1, 0), (9, 0)])
def test_an_index_out_of_range_is_refused_before_the_kernel_runs(bad: tuple[int, int]) -> None:
    ei = torch.tensor([[0, 1, bad[0]], [1, 0, bad[1]]])
    with pytest.raises(ValueError, match="outside"):
        propagation_pair(ei, torch.ones(3), 9)


def test_the_transpose_is_built_only_for_a_backward() -> None:
    """Under ``no_grad`` (a query) only P is built; a cached layer that then trains builds P^T and
    its gradients equal those of a layer that always had it."""
    g = torch.Generator().manual_seed(7)
    ei = torch.randint(0, 30, (2, 200), generator=g)
    w = torch.rand(200, generator=g)
    with torch.no_grad():
        op, op_t = propagation_pair(ei, w, 30)
    assert op_t is None and propagation_pair(ei, w, 30, transpose=False)[1] is None
    torch.testing.assert_close(op.to_dense(), propagation_pair(ei, w, 30)[0].to_dense())

    x = torch.randn(30, 4, generator=g)
    lazy = GCN(4, 8, 3, cached=True, generator=torch.Generator().manual_seed(2))
    eager = GCN(4, 8, 3, cached=True, generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        lazy.eval()(x, ei)  # caches P alone
    assert all(conv._cache[2] is None for conv in lazy.convs)
    grads = []
    for net in (lazy.eval(), eager.eval()):
        net(x, ei).square().sum().backward()
        grads.append([p.grad.clone() for p in net.parameters()])
    assert all(conv._cache[2] is not None for conv in lazy.convs)  # rebuilt with P^T for the backward
    for a, b in zip(*grads, strict=True):
        torch.testing.assert_close(a, b)


def test_a_trained_classifier_keeps_no_training_operator() -> None:
    """After training, the float32 operators are dropped (a query builds its own, float64, P alone),
    and the query answers as before."""
    import numpy as np

    from privgraph.graph import GraphData
    from privgraph.evaluate.training import fit_node_classifier

    rng = np.random.default_rng(0)
    n = 40
    und = rng.integers(0, n, (2, 120))
    masks = {k: np.zeros(n, bool) for k in ("train_mask", "val_mask", "test_mask")}
    for i, k in enumerate(masks):
        masks[k][i::3] = True
    graph = GraphData.from_edges(n, und, drop_self_loops=True, deduplicate=True,
                                 x=rng.normal(size=(n, 5)).astype(np.float32), y=rng.integers(0, 3, n), **masks)
    model = fit_node_classifier(graph, seed=0, epochs=5, device="cpu")
    assert all(getattr(m, a) is None for m in model.net.modules() for a in ("_cache", "_x_cache") if hasattr(m, a))
    post = model.query()
    np.testing.assert_allclose(post.argmax(1).numpy(), model.posteriors.argmax(1))
    assert all(conv._cache[2] is None for conv in model._net64().convs)  # the query net holds P alone
