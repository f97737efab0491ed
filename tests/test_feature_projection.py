"""Training on the principal axes of dense features (``feature_dim``): the basis, the model's
input, determinism, and the attack API's in-place queries through the projection."""

import numpy as np
import pytest
import torch

from privgraph.evaluate.attacks import linkteller_scores
from privgraph.config.pipeline import ConfigError
from privgraph.config.loader import load_config
from privgraph.graph import GraphData
from privgraph.evaluate.model_inputs import principal_basis
from privgraph.evaluate.training import fit_node_classifier

pytestmark = pytest.mark.filterwarnings("ignore:Sparse CSR tensor support is in beta")

FAST = {"hidden": 16, "epochs": 40, "patience": None}


def wide_graph(n: int = 240, d: int = 300, seed: int = 0) -> GraphData:
    """Two planted communities; dense features: label signal spread over 300 noisy columns."""
    rng = np.random.default_rng(seed)
    y = np.repeat([0, 1], n // 2)
    same = y[:, None] == y[None, :]
    edges = np.stack(np.nonzero(np.triu(rng.random((n, n)) < np.where(same, 0.06, 0.004), k=1)))
    direction = rng.normal(size=d)
    x = (rng.normal(size=(n, d)) + 0.25 * np.outer(2 * y - 1, direction)).astype(np.float32)
    order = rng.permutation(n)
    masks = {k: np.zeros(n, bool) for k in ("train_mask", "val_mask", "test_mask")}
    masks["train_mask"][order[:60]] = True
    masks["val_mask"][order[60:120]] = True
    masks["test_mask"][order[120:]] = True
    return GraphData.from_edges(n, edges, x=x, y=y, **masks)


def test_principal_basis_recovers_the_top_subspace():
    rng = np.random.default_rng(1)
    u, _ = np.linalg.qr(rng.normal(size=(500, 8)))
    v, _ = np.linalg.qr(rng.normal(size=(120, 8)))
    x = u @ np.diag([50, 40, 30, 20, 10, 8, 6, 5.0]) @ v.T + 0.01 * rng.normal(size=(500, 120))
    xt = torch.from_numpy(x)
    state = torch.random.get_rng_state()
    b = principal_basis(xt, 5, torch.Generator().manual_seed(0))
    assert torch.equal(state, torch.random.get_rng_state())  # global RNG never read
    assert b.shape == (120, 5)
    assert torch.allclose(b.T @ b, torch.eye(5, dtype=b.dtype), atol=1e-10)
    exact = torch.linalg.svd(xt, full_matrices=False).Vh[:5].T
    # same subspace: the singular values of exact^T b (cosines of the principal angles) are 1
    cosines = torch.linalg.svdvals(exact.T @ b)
    assert cosines.min() > 1 - 1e-8
    again = principal_basis(xt, 5, torch.Generator().manual_seed(0))
    assert torch.equal(b, again)
    # asked for more axes than the matrix has: capped at its rank bound
    assert principal_basis(xt[:, :6], 20, torch.Generator().manual_seed(0)).shape == (6, 6)


def test_feature_dim_projects_dense_input_and_learns():
    g = wide_graph()
    full = fit_node_classifier(g, seed=3, **FAST)
    proj = fit_node_classifier(g, seed=3, feature_dim=16, **FAST)
    assert full.net.convs[0].weight.shape[0] == 300 or full.net.convs[0].weight.shape[1] == 300
    assert 16 in proj.net.convs[0].weight.shape and 300 not in proj.net.convs[0].weight.shape
    assert proj.projection is not None and proj.projection.shape == (300, 16)
    assert proj.result["test_acc"] > 0.85, proj.result  # the signal lies in the top axes
    again = fit_node_classifier(g, seed=3, feature_dim=16, **FAST)
    assert again.result == proj.result
    # the black-box API applies the same transform: the training features answer as in training
    post = proj.query()
    assert torch.allclose(post.sum(dim=1), torch.ones(g.num_nodes, dtype=post.dtype))
    assert (post.argmax(1).cpu().numpy()[g.test_mask] == g.y[g.test_mask]).mean() == pytest.approx(proj.result["test_acc"])


def test_feature_dim_leaves_narrow_and_sparse_features_alone():
    g = wide_graph(d=12)
    assert fit_node_classifier(g, seed=1, feature_dim=64, **FAST).result == fit_node_classifier(g, seed=1, **FAST).result
    rng = np.random.default_rng(2)
    sparse = g.replace(x=(rng.random((g.num_nodes, 200)) < 0.02).astype(np.float32))
    a = fit_node_classifier(sparse, seed=1, feature_dim=8, **FAST)
    assert a.projection is None
    assert a.result == fit_node_classifier(sparse, seed=1, **FAST).result


def test_linkteller_in_place_queries_through_the_projection_are_exact():
    g = wide_graph()
    model = fit_node_classifier(g, seed=0, feature_dim=16, **FAST)
    pairs = np.stack([np.arange(0, 20), np.arange(20, 40)])
    fast = linkteller_scores(model, pairs, reuse_input=True)
    slow = linkteller_scores(model, pairs, reuse_input=False)
    np.testing.assert_allclose(fast, slow, rtol=1e-6, atol=1e-12)
    assert fast.max() > 0


@pytest.mark.parametrize("bad", [0, -3, 2.5, True])
def test_feature_dim_refused(bad):
    with pytest.raises(ValueError, match="feature_dim"):
        fit_node_classifier(wide_graph(d=10), seed=0, feature_dim=bad, **FAST)


def test_feature_dim_in_config(tmp_path):
    path = tmp_path / "p.yaml"
    path.write_text(
        "pipelines:\n  demo:\n    dataset: {name: sbm, options: {num_nodes: 200}}\n"
        "    features: {mechanism: feature_rr, epsilon: 1.0}\n    budget: {features: 1.0}\n"
        "    executor: serial\n    evaluate: {feature_dim: 0}\n"
    )
    with pytest.raises(ConfigError, match=r"evaluate\.feature_dim"):
        load_config(path)
    path.write_text(path.read_text().replace("feature_dim: 0", "feature_dim: 128"))
    assert load_config(path).pipelines["demo"].evaluate.train_kwargs()["feature_dim"] == 128
