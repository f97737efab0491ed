r"""Node membership inference: was node :math:`v` a training node of the model?

Members are the training nodes, non-members the test nodes (never used in training or model
selection). The black-box threshold attacks of Shokri et al. / Salem et al. (ML-Leaks), as applied
to GNNs by Olatunji et al. (2021): a node scores its posterior's confidence
:math:`\max_c p_{vc}` or its negative entropy :math:`\sum_c p_{vc} \log p_{vc}`; a model that
overfits is more confident on the nodes it was trained on. With the nodes' labels known to the
adversary, the loss attack of Yeom et al. (CSF 2018) scores the posterior of the true label
:math:`p_{v, y_v}` (``true_label``). ROC-AUC over members vs non-members (0.5: the model
reveals nothing about who was in its training set).
"""

from __future__ import annotations

import numpy as np
import torch

from privgraph.attacks.scoring import AttackResult, roc_auc, score_attack
from privgraph.errors import GraphValidationError

__all__ = ["membership_scores", "membership_inference"]

SIGNALS = ("confidence", "entropy", "true_label")


def membership_scores(
    posteriors: np.ndarray | torch.Tensor, signal: str = "confidence", labels: np.ndarray | None = None
) -> np.ndarray:
    """Per-node membership score from the posteriors ``[n, C]`` (and ``labels`` for ``true_label``)."""
    p = posteriors.detach().cpu().numpy() if torch.is_tensor(posteriors) else np.asarray(posteriors, dtype=np.float64)
    if signal == "true_label":
        if labels is None:
            raise GraphValidationError("membership inference: the true_label signal needs the nodes' labels")
        y = np.asarray(labels)
        if y.shape != (p.shape[0],) or y.min() < 0 or y.max() >= p.shape[1]:
            raise GraphValidationError(f"membership inference: labels must be [{p.shape[0]}] classes in [0, {p.shape[1]})")
        return p[np.arange(p.shape[0]), y]
    if signal == "confidence":
        return p.max(1)
    if signal == "entropy":
        return (p * np.log(np.clip(p, 1e-12, None))).sum(1)
    raise ValueError(f"membership inference: unknown signal {signal!r} (one of {', '.join(SIGNALS)})")


def membership_inference(
    posteriors: np.ndarray | torch.Tensor, train_mask: np.ndarray, test_mask: np.ndarray,
    rng: np.random.Generator, *, signal: str = "confidence", labels: np.ndarray | None = None,
) -> AttackResult:
    """Threshold attack: training nodes (members) vs test nodes (non-members); the AUC of every
    other signal that can be computed is reported beside the chosen one."""
    tr, te = np.asarray(train_mask, bool), np.asarray(test_mask, bool)
    if tr.sum() == 0 or te.sum() == 0:
        raise GraphValidationError("membership inference: needs training and test nodes (the graph has no split)")
    if np.any(tr & te):
        raise GraphValidationError("membership inference: training and test nodes overlap")
    s = membership_scores(posteriors, signal, labels)
    idx = np.concatenate([np.flatnonzero(tr), np.flatnonzero(te)])
    member = np.concatenate([np.ones(int(tr.sum()), bool), np.zeros(int(te.sum()), bool)])
    others = [o for o in SIGNALS if o != signal and (o != "true_label" or labels is not None)]
    return score_attack("membership", s[idx], member, rng, params={"signal": signal},
                        **{f"auc_{o}": roc_auc(membership_scores(posteriors, o, labels)[idx], member) for o in others})
