"""Paper 001's learned attention weights (gap, weights: learned): the accounting of the DP training
composed with the release, the per-edge clipping's sensitivity (and the per-node clipping slip it
corrects), the refusal of a training that spends the whole budget, randomness from the Generator
only, and the release inside privatize_graph."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from privgraph.mechanisms import build_mechanism
from privgraph.mechanisms.edges.gap import AggregationPerturbation, normalize_rows
from privgraph.mechanisms.edges.gap_attention import (
    AttentionModel,
    attention_parameter_count,
    clipped_edge_gradient_sum,
    train_attention,
)
from tests.mechanisms.test_gap import _exact_gaussian_delta


@pytest.mark.parametrize("eps, steps, z_t", [(2.0, 10, 16.0), (8.0, 10, 16.0), (4.0, 3, 8.0)])
def test_training_and_release_compose_to_the_budget(eps, steps, z_t):
    m = AggregationPerturbation(epsilon=eps, weights="learned", attention_steps=steps, attention_noise_multiplier=z_t)
    z = m.noise_multiplier
    assert m.accountant_epsilon <= eps
    # 2 T Gaussians at z_t and one at z are ONE Gaussian of multiplier (2T / z_t^2 + 1 / z^2)^-1/2:
    # its exact curve (Balle & Wang, independent of dp-accounting) holds delta at the stated eps
    mu = math.sqrt(2 * steps / z_t**2 + 1 / z**2)
    assert _exact_gaussian_delta(mu, eps) <= 1e-5
    # the training is not free: the release's noise is larger than GAP's one-hop PMA at eps
    assert z > AggregationPerturbation(epsilon=eps).noise_multiplier
    # and 3% less noise on the release breaks the accountant's epsilon
    from dp_accounting import ComposedDpEvent, GaussianDpEvent, SelfComposedDpEvent
    from dp_accounting.rdp import RdpAccountant

    acc = RdpAccountant()
    acc.compose(ComposedDpEvent([SelfComposedDpEvent(GaussianDpEvent(z_t), 2 * steps), GaussianDpEvent(0.97 * z)]))
    assert acc.get_epsilon(1e-5) > eps
    acct = m.params_for(5)["accountant"]
    assert f"GaussianDpEvent({z_t}), {2 * steps})" in acct["event"]
    assert any("attention_steps" in a for a in m.guarantee.assumptions)


def test_a_training_that_spends_the_budget_is_refused_at_construction():
    with pytest.raises(ValueError, match=r"attention's training \(10 steps at noise multiplier 16\) alone spends epsilon 1\.14"):
        AggregationPerturbation(epsilon=1.0, weights="learned")
    with pytest.raises(ValueError, match="one hop"):
        AggregationPerturbation(epsilon=4.0, weights="learned", hops=2)
    for bad in ({"attention_steps": 0}, {"attention_noise_multiplier": 0.0}, {"attention_clip": float("nan")},
                {"attention_learning_rate": True}):
        with pytest.raises(ValueError, match="attention_"):
            AggregationPerturbation(epsilon=4.0, weights="learned", **bad)


def test_params_rebuild_and_only_learned_weights_carry_attention_params():
    m = build_mechanism("gap", {"epsilon": 4.0, "weights": "learned", "attention_steps": 5})
    assert build_mechanism("gap", m.params()).params() == m.params()
    assert m.params()["attention_steps"] == 5
    assert "attention_steps" not in build_mechanism("gap", {"epsilon": 4.0}).params()


def _pairs(n: int, d: int, edges: np.ndarray, seed: int) -> torch.Tensor:
    h = torch.as_tensor(normalize_rows(np.random.default_rng(seed).normal(size=(n, d))))
    src = torch.as_tensor(np.concatenate([edges[0], edges[1]]))
    dst = torch.as_tensor(np.concatenate([edges[1], edges[0]]))
    return torch.cat([h[src], h[dst]], dim=1)


def test_removing_one_edge_moves_the_clipped_sum_by_at_most_clip():
    from opacus import GradSampleModule

    rng = np.random.default_rng(3)
    n, d, clip = 12, 4, 0.5
    edges = np.array([[0, 0, 0, 1, 2, 3, 4, 5, 6, 8], [1, 2, 3, 2, 3, 4, 5, 6, 7, 9]])
    m = edges.shape[1]
    model = AttentionModel(d).double()
    sampled = GradSampleModule(model, batch_first=True, loss_reduction="sum")
    pairs = _pairs(n, d, edges, 0)
    scale = torch.as_tensor(rng.normal(scale=50.0, size=2 * m))  # large: every term is clipped
    full = clipped_edge_gradient_sum(sampled, pairs, scale, clip)
    assert full.numel() == attention_parameter_count(d)
    worst = 0.0
    for k in range(m):
        keep = np.delete(np.arange(m), k)
        idx = np.concatenate([keep, m + keep])
        without = clipped_edge_gradient_sum(sampled, pairs[idx], scale[idx], clip)
        worst = max(worst, float((full - without).norm()))
    assert clip * 0.9 < worst <= clip * (1 + 1e-12)
    # paper 001's Lemma 2 clips per NODE: one undirected edge is an incoming edge of both its ends,
    # so two clipped node gradients move; the same data moves that sum by more than clip
    def per_node(idx: np.ndarray) -> torch.Tensor:
        for p in model.parameters():
            p.grad_sample = None
        (torch.sigmoid(sampled(pairs[idx])) * scale[idx]).sum().backward()
        per = torch.cat([p.grad_sample.reshape(len(idx), -1) for p in model.parameters()], dim=1)
        dst = np.concatenate([edges[1], edges[0]])[idx]
        nodes = torch.zeros(n, per.shape[1], dtype=torch.float64).index_add_(0, torch.as_tensor(dst), per)
        factor = (clip / nodes.norm(dim=1).clamp_min(1e-300)).clamp(max=1.0)
        return (nodes * factor.unsqueeze(1)).sum(0)

    base = per_node(np.arange(2 * m))
    moved = max(float((base - per_node(np.concatenate([np.delete(np.arange(m), k), m + np.delete(np.arange(m), k)]))).norm())
                for k in range(m))
    assert moved > clip * 1.05


def _cora_like(n: int = 60, seed: int = 0):
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 3, n)
    h = normalize_rows(np.eye(3)[y] * 2 + rng.normal(scale=0.5, size=(n, 3)))
    u, v = np.triu_indices(n, 1)
    same = y[u] == y[v]
    keep = rng.random(u.size) < np.where(same, 0.15, 0.03)
    edges = np.stack([u[keep], v[keep]])
    train = np.zeros(n, bool)
    train[: n // 2] = True
    return h, edges, y, train


def test_training_is_deterministic_in_the_generator_and_leaves_torch_global_state_alone():
    h, edges, y, train = _cora_like()
    state = torch.random.get_rng_state()
    kw = dict(steps=3, noise_multiplier=4.0, clip=1.0, learning_rate=0.05)
    a, ra = train_attention(h, edges, np.arange(60), y, train, rng=np.random.default_rng(7), **kw)
    b, rb = train_attention(h, edges, np.arange(60), y, train, rng=np.random.default_rng(7), **kw)
    c, _ = train_attention(h, edges, np.arange(60), y, train, rng=np.random.default_rng(8), **kw)
    assert torch.equal(torch.random.get_rng_state(), state)
    for p, q in zip(a.parameters(), b.parameters()):
        assert torch.equal(p, q)
    assert any(not torch.equal(p, q) for p, q in zip(a.parameters(), c.parameters()))
    assert ra == rb and len(ra["noisy_train_loss"]) == 3
    assert ra["sigma_gradient"] >= 4.0 * 1.0 and ra["sigma_aggregate"] >= 4.0 * math.sqrt(2)


def test_with_little_noise_the_attention_learns_to_weigh_same_class_edges_up():
    # a check that the training trains: same-class neighbours carry the label, so at low noise the
    # learned weights of same-class edges exceed those of cross-class edges
    h, edges, y, train = _cora_like(n=120, seed=1)
    model, rec = train_attention(h, edges, np.arange(120), y, train, steps=60, noise_multiplier=0.05, clip=5.0,
                                 learning_rate=0.05, rng=np.random.default_rng(0))
    from privgraph.mechanisms.edges.gap_attention import attention_weights

    w = attention_weights(model, torch.as_tensor(h), edges)[: edges.shape[1]]
    same = y[edges[0]] == y[edges[1]]
    assert w[same].mean() > w[~same].mean() + 0.05
    assert rec["noisy_train_loss"][-1] < rec["noisy_train_loss"][0]


def test_the_release_has_one_noisy_hop_and_weights_in_the_unit_interval():
    h, edges, y, train = _cora_like()
    m = AggregationPerturbation(epsilon=4.0, weights="learned", attention_steps=2, encoder_dim=3)
    with pytest.raises(ValueError, match="released labels"):
        m.aggregate(h, edges, np.arange(60), np.random.default_rng(0))
    out = m.aggregate(h, edges, np.arange(60), np.random.default_rng(0), labels=y, train_mask=train)
    assert out.shape == (2, 60, 3)
    np.testing.assert_allclose(out[0], h)
    assert np.allclose(np.linalg.norm(out[1], axis=1), 1.0)
    assert m.attention_record["steps"] == 2
