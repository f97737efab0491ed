r"""Link stealing from a GNN's posteriors (He et al., USENIX Security 2021).

The adversary sees the class posteriors the model outputs for the nodes. Adjacent nodes get
similar posteriors, since a GNN averages over neighbourhoods.

* Unsupervised (the paper's Attack-0): a pair :math:`(u, v)` scores :math:`-d(\mathbf{p}_u,
  \mathbf{p}_v)` for a distance :math:`d` among :data:`DISTANCES` (correlation, cosine,
  Euclidean, Chebyshev, Bray-Curtis, Canberra, Manhattan, squared Euclidean, as
  ``scipy.spatial.distance`` defines them); no training.
* Supervised (a shadow dataset): a classifier (a small MLP, seeded from the Generator passed in)
  is fit on pairs whose answer the adversary knows (a shadow graph's edges and non-edges, or the
  target graph's PUBLIC edges: the paper's partial-graph knowledge), each pair described by the
  eight distances and the entropies of both posteriors (sorted, and their difference); it then
  scores the target pairs.
"""

from __future__ import annotations

import numpy as np
import torch

from privgraph.evaluate.attacks.pairs import PairSample
from privgraph.evaluate.attacks.scoring import AttackResult, roc_auc, score_attack
from privgraph.errors import GraphValidationError

__all__ = ["DISTANCES", "pair_distances", "pair_features", "link_stealing_unsupervised", "link_stealing_supervised"]

DISTANCES = ("correlation", "cosine", "euclidean", "chebyshev", "braycurtis", "canberra", "cityblock", "sqeuclidean")
_EPS = 1e-12


def _posteriors(p: np.ndarray | torch.Tensor) -> np.ndarray:
    a = p.detach().cpu().numpy() if torch.is_tensor(p) else np.asarray(p)
    a = a.astype(np.float64)
    if a.ndim != 2 or a.shape[1] < 2 or not np.all(np.isfinite(a)):
        raise GraphValidationError(f"link stealing: posteriors must be a finite [n, C >= 2] array, got shape {list(a.shape)}")
    return a


def pair_distances(posteriors: np.ndarray | torch.Tensor, pairs: np.ndarray, metric: str) -> np.ndarray:
    """``d(p_u, p_v)`` for each column ``(u, v)`` of ``pairs`` (vectorised, O(m C))."""
    p = _posteriors(posteriors)
    a, b = p[pairs[0]], p[pairs[1]]
    if metric == "correlation":
        a, b = a - a.mean(1, keepdims=True), b - b.mean(1, keepdims=True)
        metric = "cosine"
    if metric == "cosine":
        return 1.0 - (a * b).sum(1) / np.maximum(np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1), _EPS)
    diff = np.abs(a - b)
    if metric == "euclidean":
        return np.sqrt((diff**2).sum(1))
    if metric == "sqeuclidean":
        return (diff**2).sum(1)
    if metric == "chebyshev":
        return diff.max(1)
    if metric == "cityblock":
        return diff.sum(1)
    if metric == "braycurtis":
        return diff.sum(1) / np.maximum(np.abs(a + b).sum(1), _EPS)
    if metric == "canberra":
        den = np.abs(a) + np.abs(b)
        return np.where(den > 0, diff / np.maximum(den, _EPS), 0.0).sum(1)
    raise ValueError(f"link stealing: unknown distance {metric!r} (one of {', '.join(DISTANCES)})")


def pair_features(posteriors: np.ndarray | torch.Tensor, pairs: np.ndarray) -> np.ndarray:
    """``[m, 11]``: the eight distances, both posteriors' entropies (sorted), their difference."""
    p = _posteriors(posteriors)
    h = -(p * np.log(np.clip(p, _EPS, None))).sum(1)
    hu, hv = h[pairs[0]], h[pairs[1]]
    cols = [pair_distances(p, pairs, m) for m in DISTANCES]
    cols += [np.minimum(hu, hv), np.maximum(hu, hv), np.abs(hu - hv)]
    return np.stack(cols, axis=1)


def link_stealing_unsupervised(
    posteriors: np.ndarray | torch.Tensor, sample: PairSample, rng: np.random.Generator, *, metric: str = "correlation"
) -> AttackResult:
    """Attack-0: score ``-d(p_u, p_v)``; AUC of every distance is reported beside the chosen one."""
    d = pair_distances(posteriors, sample.pairs, metric)
    others = {f"auc_{m}": roc_auc(-pair_distances(posteriors, sample.pairs, m), sample.labels) for m in DISTANCES}
    return score_attack("link_stealing", -d, sample.labels, rng, params={"mode": "unsupervised", "metric": metric}, **others)


def link_stealing_supervised(
    posteriors: np.ndarray | torch.Tensor, sample: PairSample, shadow_posteriors: np.ndarray | torch.Tensor,
    shadow: PairSample, rng: np.random.Generator, *, hidden: int = 32,
) -> AttackResult:
    """Fit an MLP on the shadow pairs' features (:func:`pair_features`), score the target pairs."""
    from sklearn.neural_network import MLPClassifier  # lazy: scikit-learn, only for the shadow-model attack
    from sklearn.preprocessing import StandardScaler  # lazy: scikit-learn, as above

    if shadow.labels.all() or not shadow.labels.any():
        raise GraphValidationError("link stealing (supervised): the shadow pairs need edges and non-edges")
    fs, ft = pair_features(shadow_posteriors, shadow.pairs), pair_features(posteriors, sample.pairs)
    scaler = StandardScaler().fit(fs)
    clf = MLPClassifier(hidden_layer_sizes=(hidden,), max_iter=500, random_state=int(rng.integers(2**31 - 1)))
    clf.fit(scaler.transform(fs), shadow.labels)
    s = clf.predict_proba(scaler.transform(ft))[:, 1]
    return score_attack("link_stealing_supervised", s, sample.labels, rng,
                        params={"mode": "supervised", "hidden": hidden, "shadow_pairs": int(shadow.labels.size)})

