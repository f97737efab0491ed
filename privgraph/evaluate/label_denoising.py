r"""LPGNN's label denoising: the training targets of a node classifier.

LPGNN's denoising (`Sajadmanesh & Gatica-Perez, CCS 2021 <https://arxiv.org/abs/2006.05535>`_;
all off by default, and then the run is bit-identical to one without these arguments). Its
KProp operator is LPGNN's: :math:`\mathbf{P} = \mathbf{D}^{-1/2} \mathbf{A} \mathbf{D}^{-1/2}`
over the neighbours, the node itself excluded (:class:`~privgraph.evaluate.models.KProp` with
``aggr="gcn"``, ``self_loops=False``; the authors' code), whatever the model's ``aggr``:

- ``kprop_features = K_x > 0``: the features are replaced, once before training, by
  :math:`\mathbf{P}^{K_x} \mathbf{X}`.
- ``kprop_labels = K_y > 0``: the training targets are the denoised labels
  :math:`\tilde{y}_v = \arg\max_c (\mathbf{P}^{K_y} \mathbf{Y}')_{vc}`, with
  :math:`\mathbf{Y}'` the one-hot labels of the training and validation nodes and zero rows
  elsewhere (test labels are never read); ties and unreached rows keep :math:`y'_v`.
  Without ``drop`` the model is trained on them with plain cross-entropy.
- ``drop``: LPGNN's Drop (Label Denoising with Propagation). (1) The same :math:`K_y` steps
  are applied to the model's predicted class probabilities and the loss compares the
  propagated prediction with the propagated label,
  :math:`\mathcal{L} = -\frac{1}{|V_T|} \sum_{v \in V_T} \log \hat{p}(\tilde{y}_v \mid x)`,
  :math:`\hat{p}(\tilde{y} \mid x) = \mathbf{P}^{K_y} (\mathrm{softmax}(f(\mathbf{X})) \mathbf{T})`
  (rows renormalised to sum to one), so that the GNN is not pushed to reproduce the noise
  left in :math:`\tilde{y}`; :math:`\mathbf{T}` is the label RR's transition matrix at
  ``label_epsilon`` (forward correction, LPGNN's Drop; the identity without
  ``label_epsilon``). (2) Training STOPS at the first epoch whose model (evaluation mode)
  scores above :math:`\mathrm{Acc}^*` (:func:`drop_bound`) against the noisy labels
  :math:`y'` of the validation nodes (``graph.y``): a model that predicted every true label
  would score :math:`\mathrm{Acc}^*` there in expectation, so a higher score means it has
  absorbed noise of :math:`y'` (the validation labels enter :math:`\tilde{y}` through the
  propagation). That epoch is not eligible for selection (unless it is the first). With
  ``kprop_labels=0``, Drop is plain cross-entropy on :math:`y'` with this stopping rule.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import torch

from privgraph.evaluate.model_inputs import ModelInputs
from privgraph.evaluate.models import KProp
from privgraph.evaluate.models.kprop import LPGNN_KPROP
from privgraph.mechanisms.randomized_response import label_rr_keep_probability, label_rr_transition_matrix

__all__ = ["Targets", "drop_bound", "training_targets"]


def drop_bound(label_epsilon: float | None, num_classes: int) -> float:
    r"""LPGNN's :math:`\mathrm{Acc}^*`, the highest expected accuracy on RR-perturbed labels.

    Labels perturbed by :math:`c`-ary randomized response with budget :math:`\varepsilon_y`
    (:class:`~privgraph.mechanisms.features.label_rr.LabelRR`) equal the true label with
    probability

    .. math::
        \mathrm{Acc}^* = \Pr(y' = y) = \frac{e^{\varepsilon_y}}{e^{\varepsilon_y} + c - 1},

    so a classifier that predicts every TRUE label is expected to score :math:`\mathrm{Acc}^*`
    against the noisy labels :math:`y'` and any classifier that scores above it agrees with the
    noise (LPGNN talk, "Prevent absorbing noise in :math:`y'`"; the slide's :math:`e^c` is a typo
    for :math:`e^{\varepsilon}`). ``label_epsilon=None`` (labels not randomized) gives ``1.0``.
    """
    if label_epsilon is None:
        return 1.0
    return label_rr_keep_probability(label_epsilon, num_classes)


def _denoised_labels(
    y: torch.Tensor, known: torch.Tensor, num_classes: int, prop: KProp, edge_index: torch.Tensor
) -> torch.Tensor:
    r"""LPGNN's label denoising: :math:`\tilde{y}_v = \arg\max_c (\mathbf{P}^{K} \mathbf{Y}')_{vc}`.

    :math:`\mathbf{Y}'` holds the one-hot (noisy) labels of the ``known`` nodes (training and
    validation: the labels the server collected) and zeros elsewhere; test labels are never
    read. Ties, and rows that no known label reaches (all zero), keep the node's own label
    :math:`y'_v` (where the argmax would otherwise pick the lowest class index).
    """
    onehot = torch.zeros(y.numel(), num_classes, device=y.device)
    onehot[known, y[known]] = 1.0
    with torch.no_grad():
        votes = prop(onehot, edge_index)
    top = votes.max(dim=1, keepdim=True).values
    own_is_top = votes.gather(1, y.clamp_min(0).view(-1, 1)).squeeze(1) == top.squeeze(1)
    return torch.where(own_is_top, y, votes.argmax(dim=1))


@dataclasses.dataclass
class Targets:
    """The training targets (the labels, or LPGNN's denoised ones), the label propagation, Drop's
    accuracy bound and its forward correction (the label RR's channel), and whether Drop is on."""

    y_fit: torch.Tensor
    label_prop: Any
    bound: float | None
    forward: torch.Tensor | None
    drop: bool


def training_targets(
    y: torch.Tensor, idx: dict[str, torch.Tensor], num_classes: int, inp: ModelInputs, dev: torch.device, *,
    kprop_labels: int, drop: bool, propagate_val_labels: bool, label_epsilon: float | None, label_classes: int | None,
) -> Targets:
    """Targets from the train (and validation) labels only; the label RR's channel from its
    public parameters (:mod:`privgraph.mechanisms.randomized_response`)."""
    label_prop = KProp(kprop_labels, cached=True, **LPGNN_KPROP) if kprop_labels else None
    y_fit = y
    if label_prop is not None:
        known = torch.cat([idx["train_mask"], idx["val_mask"]]) if propagate_val_labels else idx["train_mask"]
        y_fit = _denoised_labels(y, known, num_classes, label_prop, inp.edge_index)
    c = label_classes if label_classes is not None else inp.graph.meta.get("num_classes")
    classes = int(c) if c is not None else num_classes
    bound = drop_bound(label_epsilon, classes) if drop else None
    forward = None
    if drop and label_prop is not None and label_epsilon is not None:
        forward = torch.as_tensor(label_rr_transition_matrix(label_epsilon, classes), dtype=torch.float32, device=dev)
    return Targets(y_fit, label_prop, bound, forward, drop)
