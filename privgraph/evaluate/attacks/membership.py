r"""Node membership inference: was node :math:`v` a training node of the model?

Members are the training nodes, non-members the test nodes (never used in training or model
selection). The black-box threshold attacks of Shokri et al. / Salem et al. (ML-Leaks), as applied
to GNNs by Olatunji et al. (2021): a node scores its posterior's confidence
:math:`\max_c p_{vc}` or its negative entropy :math:`\sum_c p_{vc} \log p_{vc}`; a model that
overfits is more confident on the nodes it was trained on. With the nodes' labels known to the
adversary, the loss attack of Yeom et al. (CSF 2018) scores the posterior of the true label
:math:`p_{v, y_v}` (``true_label``). ROC-AUC over members vs non-members (0.5: the model
reveals nothing about who was in its training set).

The shadow-model attack (Shokri et al., S&P 2017; for GNNs, Olatunji et al., TPS 2021): the
adversary trains a model of the target's architecture on its own labelled nodes of the same graph
(:func:`shadow_split`: drawn from the nodes that are neither the target's training nor its test
nodes), knows which of them were the shadow's members, and fits a classifier (a small MLP) from a
posterior (sorted descending, as in ML-Leaks, with its entropy) to member / non-member; the
classifier then scores the target's posteriors.
"""

from __future__ import annotations

import numpy as np
import torch

from privgraph.evaluate.attacks.scoring import AttackResult, roc_auc, score_attack
from privgraph.errors import GraphValidationError

__all__ = ["membership_scores", "membership_inference", "shadow_split", "membership_shadow"]

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


def shadow_split(
    train_mask: np.ndarray, test_mask: np.ndarray, labelled: np.ndarray, rng: np.random.Generator,
    *, val_size: int | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The adversary's own split ``(train, val, test)`` of the labelled nodes that are neither the
    target's training nor its test nodes: as many shadow members as the target has, a validation
    set for the shadow's model selection (default: as large as the shadow's training set, capped
    by what is left), the rest shadow non-members.

    Raises:
        GraphValidationError: fewer than 20 nodes outside the target's split, or no room for
            both members and non-members.
    """
    tr, te, lab = (np.asarray(m, bool) for m in (train_mask, test_mask, labelled))
    pool = np.flatnonzero(lab & ~tr & ~te)
    n_tr = int(tr.sum())
    if pool.size < 20:
        raise GraphValidationError(
            f"membership inference (shadow): {pool.size} labelled nodes outside the target's training and test "
            f"sets; the shadow model needs at least 20")
    pool = rng.permutation(pool)
    k_tr = min(n_tr, pool.size // 3)
    k_val = min(k_tr if val_size is None else val_size, (pool.size - k_tr) // 2)
    masks = []
    for idx in (pool[:k_tr], pool[k_tr:k_tr + k_val], pool[k_tr + k_val:]):
        m = np.zeros(tr.size, bool)
        m[idx] = True
        masks.append(m)
    return masks[0], masks[1], masks[2]


def _posterior_features(posteriors: np.ndarray | torch.Tensor, labels: np.ndarray | None) -> np.ndarray:
    """``[n, C + 1]``: the posterior sorted descending (class-agnostic, so the shadow's classifier
    transfers to any target) and its entropy; with ``labels``, also the log-posterior of the true
    label (Yeom et al.'s loss): ``[n, C + 2]``."""
    p = posteriors.detach().cpu().numpy() if torch.is_tensor(posteriors) else np.asarray(posteriors, dtype=np.float64)
    p = p.astype(np.float64)
    h = -(p * np.log(np.clip(p, 1e-12, None))).sum(1, keepdims=True)
    cols = [-np.sort(-p, axis=1), h]
    if labels is not None:
        cols.append(np.log(np.clip(membership_scores(p, "true_label", labels), 1e-12, None))[:, None])
    return np.concatenate(cols, axis=1)


def membership_shadow(
    posteriors: np.ndarray | torch.Tensor, train_mask: np.ndarray, test_mask: np.ndarray,
    shadow_posteriors: np.ndarray | torch.Tensor, shadow_in: np.ndarray, shadow_out: np.ndarray,
    rng: np.random.Generator, *, labels: np.ndarray | None = None, shadow_labels: np.ndarray | None = None,
    hidden: int = 32,
) -> AttackResult:
    """Shadow-model attack: an MLP fit on the shadow model's members (``shadow_in``) vs
    non-members (``shadow_out``), scoring the target's training vs test nodes. With the nodes'
    ``labels`` (the target's) and ``shadow_labels`` (the adversary's own) the true label's
    posterior is a feature too (the adversary of the ``true_label`` signal)."""
    from sklearn.neural_network import MLPClassifier  # lazy: scikit-learn, only for the shadow-model attack
    from sklearn.preprocessing import StandardScaler  # lazy: scikit-learn, as above

    tr, te = np.asarray(train_mask, bool), np.asarray(test_mask, bool)
    si, so = np.asarray(shadow_in, bool), np.asarray(shadow_out, bool)
    if tr.sum() == 0 or te.sum() == 0:
        raise GraphValidationError("membership inference: needs training and test nodes (the graph has no split)")
    if si.sum() == 0 or so.sum() == 0:
        raise GraphValidationError("membership inference (shadow): the shadow split needs members and non-members")
    if np.any(si & (tr | te)) or np.any(so & (tr | te)):
        raise GraphValidationError("membership inference (shadow): the shadow nodes overlap the target's split")
    if (labels is None) != (shadow_labels is None):
        raise GraphValidationError("membership inference (shadow): labels are needed for both the target and the shadow")
    fs, ft = _posterior_features(shadow_posteriors, shadow_labels), _posterior_features(posteriors, labels)
    # balanced classes for the fit (members are few: Cora's shadow has 140 against ~1,100)
    k = int(min(si.sum(), so.sum()))
    ins = rng.choice(np.flatnonzero(si), size=k, replace=False)
    outs = rng.choice(np.flatnonzero(so), size=k, replace=False)
    s_lab = np.concatenate([np.ones(k, bool), np.zeros(k, bool)])
    f_fit = fs[np.concatenate([ins, outs])]
    scaler = StandardScaler().fit(f_fit)
    clf = MLPClassifier(hidden_layer_sizes=(hidden,), max_iter=500, random_state=int(rng.integers(2**31 - 1)))
    clf.fit(scaler.transform(f_fit), s_lab)
    idx = np.concatenate([np.flatnonzero(tr), np.flatnonzero(te)])
    member = np.concatenate([np.ones(int(tr.sum()), bool), np.zeros(int(te.sum()), bool)])
    s = clf.predict_proba(scaler.transform(ft[idx]))[:, 1]
    return score_attack("membership_shadow", s, member, rng,
                        params={"mode": "shadow", "labels": labels is not None, "hidden": hidden, "shadow_members": int(si.sum()),
                                "shadow_non_members": int(so.sum())})
