r"""Paper 001's learned attention weights (Algorithm 1, Lemma 2, Theorem 2): an attention model
:math:`a(\check{x}_u, \check{x}_v; \Theta_{att})` whose sigmoid weighs each edge of GAP's one-hop
aggregation, trained on the PRIVATE edges with differentially private gradient descent.

The model is trained full-batch (every node, every edge, every step) for ``steps`` steps. Step
:math:`t`, with :math:`\Theta_t` already released by the previous steps:

1. the weights :math:`\alpha_{u \to v} = \mathrm{sigmoid}(a([\check{x}_u, \check{x}_v]; \Theta_t))`
   of both directions of every edge (each in :math:`(0, 1)`), and the aggregate
   :math:`X^{(1)}_v = \sum_{u \to v} \alpha_{u \to v} \check{x}_u`;
2. Gaussian mechanism 1: :math:`\tilde{X}^{(1)}_v = X^{(1)}_v + \mathcal{N}(0, \sigma_t^2 I)` on
   the rows of :math:`V_{pri}` (one undirected edge moves two rows by at most a unit row each:
   L2 sensitivity :math:`\sqrt{2}`, as in the release, :mod:`privgraph.mechanisms.edges.gap`);
3. a linear head on the row-normalised :math:`\tilde{X}^{(1)}` predicts the released labels of
   the training nodes (Algorithm 1's attached linear layer and softmax); the head's gradient and
   :math:`G_v = \partial \mathcal{L} / \partial \tilde{X}^{(1)}_v` are functions of
   :math:`\tilde{X}^{(1)}` (post-processing);
4. Gaussian mechanism 2: one edge :math:`\{u, v\}` contributes
   :math:`c_{uv} = (G_v \cdot \check{x}_u) \nabla_\Theta \alpha_{u \to v} +
   (G_u \cdot \check{x}_v) \nabla_\Theta \alpha_{v \to u}` to
   :math:`\nabla_\Theta \mathcal{L}` (the noise of step 2 is an additive constant); each
   :math:`c_{uv}` is clipped to L2 norm ``clip`` and the sum takes
   :math:`\mathcal{N}(0, \sigma_g^2 I)`: given :math:`\tilde{X}^{(1)}`, one edge moves the sum by
   at most ``clip``. The per-edge gradients come from Opacus's ``GradSampleModule`` (one sample
   per directed edge, summed per undirected edge before clipping).

Both mechanisms round to the public grid :math:`2^{-g}` and take discrete Gaussian noise, with
:math:`\sigma = z_t \Delta` (``noise_multiplier``): ``steps`` steps are ``2 steps`` adaptive Gaussian
mechanisms at multiplier :math:`z_t`, then the release's aggregation one more (its multiplier is
calibrated to the rest of the budget by :func:`privgraph.mechanisms.edges.gap.noise_multiplier`).

Two slips in paper 001 are corrected here. Lemma 2 clips per node (a node's loss over its
incoming edges): on an undirected graph one edge is an incoming edge of BOTH its ends, so two
clipped per-node gradients move and the sensitivity is ``2 clip``, not ``clip``; clipping the
edge's own contribution keeps it ``clip``. And, as for Lemma 1, an undirected edge moves two rows
of the aggregate (``sqrt 2``). No subsampling amplification is claimed (full-batch steps).
"""

from __future__ import annotations

import math
import warnings
from typing import Any

import numpy as np
import torch

from privgraph.mechanisms.base import check_generator
from privgraph.mechanisms.gaussian_noise import gaussian_on_grid, grid_sensitivity

__all__ = ["AttentionModel", "attention_parameter_count", "attention_weights", "clipped_edge_gradient_sum", "train_attention"]

#: directed edges per Opacus pass (bounds the per-sample gradient memory: chunk x parameters)
_CHUNK = 32768


class AttentionModel(torch.nn.Module):
    r"""Paper 001's attention model: a two-layer MLP over the concatenated unit rows of an edge's
    source and destination, ``2d -> d -> 1`` ("halves the size of the inputs before returning a
    scalar"); :math:`\alpha = \mathrm{sigmoid}` of its output."""

    def __init__(self, dim: int) -> None:
        super().__init__()
        self.hidden = torch.nn.Linear(2 * dim, dim)
        self.out = torch.nn.Linear(dim, 1)

    def forward(self, pairs: torch.Tensor) -> torch.Tensor:
        return self.out(torch.relu(self.hidden(pairs))).squeeze(-1)


def attention_parameter_count(dim: int) -> int:
    """The number of parameters of :class:`AttentionModel` at encoder width ``dim`` (the
    coordinates the gradient mechanism's rounding can move)."""
    return 2 * dim * dim + dim + dim + 1


def _reset(module: torch.nn.Module, generator: torch.Generator) -> None:
    """Every Linear layer's default initialisation (uniform in +-1/sqrt(fan_in)), drawn from
    ``generator`` (not torch's global generator)."""
    with torch.no_grad():
        for layer in module.modules():
            if isinstance(layer, torch.nn.Linear):
                bound = 1.0 / math.sqrt(layer.in_features)
                for p in (layer.weight, layer.bias):
                    p.copy_((torch.rand(p.shape, generator=generator, dtype=p.dtype) * 2 - 1) * bound)


def _directed(edges: np.ndarray) -> tuple[torch.Tensor, torch.Tensor]:
    e = torch.as_tensor(np.asarray(edges, dtype=np.int64))
    return torch.cat([e[0], e[1]]), torch.cat([e[1], e[0]])  # edge i and i + m: the two directions


def attention_weights(model: AttentionModel, h_unit: torch.Tensor, edges: np.ndarray) -> np.ndarray:
    """The weights of both directions of every edge, ``[2m]`` float64: entry ``i`` is
    :math:`\\alpha_{u_i \\to v_i}`, entry ``m + i`` is :math:`\\alpha_{v_i \\to u_i}`."""
    src, dst = _directed(edges)
    with torch.no_grad():
        return torch.sigmoid(model(torch.cat([h_unit[src], h_unit[dst]], dim=1))).numpy().astype(np.float64)


def _aggregate(h_unit: torch.Tensor, alpha: torch.Tensor, src: torch.Tensor, dst: torch.Tensor) -> torch.Tensor:
    out = torch.zeros_like(h_unit)
    return out.index_add_(0, dst, alpha.unsqueeze(1) * h_unit[src])


def clipped_edge_gradient_sum(
    sampled: Any, pairs: torch.Tensor, scale: torch.Tensor, clip: float
) -> torch.Tensor:
    r""":math:`\sum_{\{u,v\}} \mathrm{clip}(c_{uv})`, flattened over the attention model's
    parameters (float64): ``sampled`` is the model wrapped in Opacus's ``GradSampleModule``;
    ``pairs`` ``[2m, 2d]`` the inputs of both directions of every edge (entry ``i`` and ``m + i``
    one undirected edge); ``scale`` ``[2m]`` :math:`\partial \mathcal{L} / \partial \alpha_e`.
    Removing one edge removes one clipped term: L2 sensitivity ``clip``."""
    params = list(sampled._module.parameters())
    m = pairs.shape[0] // 2
    total = torch.zeros(sum(p.numel() for p in params), dtype=torch.float64)
    for a in range(0, m, _CHUNK // 2):
        b = min(m, a + _CHUNK // 2)
        idx = torch.cat([torch.arange(a, b), torch.arange(m + a, m + b)])
        for p in params:
            p.grad_sample = None
        with warnings.catch_warnings():  # Opacus's hooks fire on the outputs: the inputs are data
            warnings.filterwarnings("ignore", message="Full backward hook is firing")
            (torch.sigmoid(sampled(pairs[idx])) * scale[idx]).sum().backward()
        per = torch.cat([p.grad_sample.reshape(idx.numel(), -1) for p in params], dim=1)
        per = per[: b - a] + per[b - a:]  # both directions of one undirected edge
        factor = (clip / per.norm(dim=1).clamp_min(1e-300)).clamp(max=1.0)
        total += (per * factor.unsqueeze(1)).sum(dim=0)
    for p in params:
        p.grad_sample = None
        p.grad = None
    return total


def _seeded_layers(d: int, classes: int, rng: np.random.Generator) -> tuple[AttentionModel, torch.nn.Linear]:
    """The attention model and the classification head (float64), both initialised from ONE draw of
    ``rng``; torch's global random state is left as it was."""
    init = torch.Generator().manual_seed(int(rng.integers(2**62)))
    with torch.random.fork_rng(devices=[]):  # the layers' own default draws leave torch's global state as it was
        model = AttentionModel(d).double()
        head = torch.nn.Linear(d, classes).double()
    _reset(model, init)
    _reset(head, init)
    return model, head


def _set_gradients(params: list[torch.Tensor], flat: torch.Tensor) -> None:
    """Set each parameter's ``grad`` to its slice of ``flat`` (the parameters' order, flattened)."""
    offset = 0
    for p in params:
        p.grad = flat[offset: offset + p.numel()].reshape(p.shape).clone()
        offset += p.numel()


def train_attention(
    h_unit: np.ndarray,
    edges: np.ndarray,
    private_nodes: np.ndarray,
    labels: np.ndarray,
    train_mask: np.ndarray,
    *,
    steps: int,
    noise_multiplier: float,
    clip: float,
    learning_rate: float,
    rng: np.random.Generator,
    grid_exponent: int = 20,
) -> tuple[AttentionModel, dict[str, Any]]:
    """Train :class:`AttentionModel` for ``steps`` DP full-batch steps (module docstring) and
    return it with the training's public record (per-step noisy training loss, sigmas).

    ``h_unit`` ``[n, d]``: the unit-row encoder output (released data only); ``edges`` ``[2, m]``
    all edges; ``labels`` the RELEASED labels, read on ``train_mask`` only. Every random draw
    (the initial parameters, both noises) comes from ``rng``.
    """
    rng = check_generator(rng)
    h = torch.as_tensor(np.asarray(h_unit, dtype=np.float64))
    n, d = h.shape
    src, dst = _directed(edges)
    m = src.numel() // 2
    rows = torch.as_tensor(np.asarray(private_nodes, dtype=np.int64))
    train = torch.as_tensor(np.asarray(train_mask, dtype=bool))
    y = torch.as_tensor(np.asarray(labels, dtype=np.int64))
    if int(train.sum()) == 0:
        raise ValueError("gap: learned attention weights need training nodes with labels")
    model, head = _seeded_layers(d, int(y[train].max()) + 1, rng)
    from opacus import GradSampleModule  # lazy: opacus, only where the attention trains

    sampled = GradSampleModule(model, batch_first=True, loss_reduction="sum")
    params = list(model.parameters())
    n_params = sum(p.numel() for p in params)
    sigma_agg = noise_multiplier * grid_sensitivity(math.sqrt(2.0), 2 * d, grid_exponent)
    sigma_grad = noise_multiplier * grid_sensitivity(clip, n_params, grid_exponent)
    opt = torch.optim.Adam([*params, *head.parameters()], lr=learning_rate)
    pairs = torch.cat([h[src], h[dst]], dim=1)
    n_train = int(train.sum())
    losses = []
    for _ in range(steps):
        with torch.no_grad():
            alpha = torch.sigmoid(model(pairs))
            agg = _aggregate(h, alpha, src, dst).numpy()
        if rows.numel():  # mechanism 1: the noisy aggregate of V_pri's rows
            agg[rows.numpy()] = gaussian_on_grid(agg[rows.numpy()], sigma_agg, rng, grid_exponent=grid_exponent)
        noisy = torch.as_tensor(agg).requires_grad_(True)
        norms = noisy.norm(dim=1, keepdim=True).clamp_min(1e-12)
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(head(noisy / norms)[train], y[train], reduction="sum")
        loss.backward()  # head.grad and G = dL / dX~ (post-processing of the noisy aggregate)
        losses.append(loss.item() / n_train)
        scale = (noisy.grad[dst] * h[src]).sum(dim=1)  # dL / d alpha_e, per directed edge
        total = clipped_edge_gradient_sum(sampled, pairs, scale, clip)
        # mechanism 2: the noisy sum of the clipped per-edge gradients
        noisy_grad = torch.as_tensor(gaussian_on_grid(total.numpy(), sigma_grad, rng, grid_exponent=grid_exponent))
        _set_gradients(params, noisy_grad / n_train)
        opt.step()
    model.eval()
    return model, {"steps": steps, "sigma_aggregate": sigma_agg, "sigma_gradient": sigma_grad,
                   "noisy_train_loss": losses}
