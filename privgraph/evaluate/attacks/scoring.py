"""How an attack is scored: ROC-AUC with a bootstrap confidence interval, and precision@k.

An attack outputs a score per candidate (a node pair, a node); the ground truth says which
candidates are positive (an edge, a training node). ROC-AUC is the Mann-Whitney statistic with
ties counted one half (0.5 is chance); its interval is a percentile bootstrap that resamples the
positives and the negatives separately (each replicate keeps both classes), with draws from the
Generator passed in only. Every score here is computed against raw data: a PRIVATE evaluation.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
from scipy.stats import rankdata

from privgraph.errors import GraphValidationError

__all__ = ["AttackResult", "roc_auc", "bootstrap_auc_ci", "precision_at_k", "score_attack"]


def _check(scores: np.ndarray, labels: np.ndarray, what: str) -> tuple[np.ndarray, np.ndarray]:
    s = np.asarray(scores, dtype=np.float64)
    y = np.asarray(labels)
    if s.ndim != 1 or y.shape != s.shape:
        raise GraphValidationError(f"{what}: scores and labels must be 1-D of one length, got {s.shape} and {y.shape}")
    if not np.all(np.isfinite(s)):
        raise GraphValidationError(f"{what}: {int(np.count_nonzero(~np.isfinite(s)))} scores are not finite")
    y = y.astype(bool)
    if y.all() or not y.any():
        raise GraphValidationError(f"{what}: needs positive and negative candidates, got {int(y.sum())} positive of {y.size}")
    return s, y


def roc_auc(scores: np.ndarray, labels: np.ndarray) -> float:
    """ROC-AUC = P(score of a random positive > score of a random negative) + 0.5 P(tie)."""
    s, y = _check(scores, labels, "roc_auc")
    r = rankdata(s)  # average ranks: ties count one half
    n_pos, n_neg = int(y.sum()), int((~y).sum())
    return float((r[y].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg))


def bootstrap_auc_ci(
    scores: np.ndarray, labels: np.ndarray, rng: np.random.Generator, *, replicates: int = 200, level: float = 0.95
) -> tuple[float, float]:
    """Percentile bootstrap interval of :func:`roc_auc` (positives and negatives resampled apart)."""
    s, y = _check(scores, labels, "bootstrap_auc_ci")
    if not isinstance(rng, np.random.Generator):
        raise TypeError(f"bootstrap_auc_ci: rng must be a numpy Generator, got {type(rng).__name__}")
    if isinstance(replicates, bool) or int(replicates) != replicates or replicates < 10:
        raise ValueError(f"bootstrap_auc_ci: replicates must be an int >= 10, got {replicates!r}")
    if not 0 < level < 1:
        raise ValueError(f"bootstrap_auc_ci: level must be in (0, 1), got {level!r}")
    pos, neg = np.flatnonzero(y), np.flatnonzero(~y)
    # One sort for every replicate: a resample is a multiplicity per candidate, and a positive's
    # count of lower (and tied) negatives is a cumulative sum over the negatives in score order.
    order = np.argsort(s[neg], kind="stable")
    neg_sorted = s[neg][order]
    below = np.searchsorted(neg_sorted, s[pos], side="left")  # negatives strictly lower
    upto = np.searchsorted(neg_sorted, s[pos], side="right")  # ... and tied
    rank_of = np.empty(neg.size, dtype=np.int64)
    rank_of[order] = np.arange(neg.size)
    aucs = np.empty(int(replicates))
    for b in range(int(replicates)):
        i_pos = rng.integers(0, pos.size, pos.size)  # = rng.choice(pos, pos.size), as positions
        i_neg = rng.integers(0, neg.size, neg.size)
        cum = np.concatenate([[0], np.cumsum(np.bincount(rank_of[i_neg], minlength=neg.size))])
        wins = cum[below[i_pos]] + 0.5 * (cum[upto[i_pos]] - cum[below[i_pos]])
        aucs[b] = wins.sum() / (pos.size * neg.size)
    lo, hi = np.quantile(aucs, [(1 - level) / 2, (1 + level) / 2])
    return float(lo), float(hi)


def precision_at_k(scores: np.ndarray, labels: np.ndarray, k: int | None = None) -> float:
    """The fraction of positives among the ``k`` highest scores (default ``k`` = the number of
    positives: LinkTeller's protocol, where the adversary predicts as many edges as the density
    says there are; then precision = recall = F1)."""
    s, y = _check(scores, labels, "precision_at_k")
    k = int(y.sum()) if k is None else int(k)
    if not 1 <= k <= s.size:
        raise ValueError(f"precision_at_k: k must be in [1, {s.size}], got {k}")
    top = np.argsort(-s, kind="stable")[:k]
    return float(y[top].mean())


@dataclasses.dataclass(frozen=True)
class AttackResult:
    """One attack's outcome on one model: what an adversary recovers (PRIVATE evaluation)."""

    attack: str
    auc: float
    auc_ci: tuple[float, float]
    metrics: dict[str, float]
    n_positive: int
    n_negative: int
    params: dict[str, Any]

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["auc_ci"] = list(self.auc_ci)
        return d


def score_attack(
    attack: str, scores: np.ndarray, labels: np.ndarray, rng: np.random.Generator, *,
    params: dict[str, Any] | None = None, replicates: int = 200, **metrics: float,
) -> AttackResult:
    """ROC-AUC, its bootstrap interval and precision@k of ``scores`` against ``labels``."""
    s, y = _check(scores, labels, attack)
    return AttackResult(
        attack=attack, auc=roc_auc(s, y), auc_ci=bootstrap_auc_ci(s, y, rng, replicates=replicates),
        metrics={"precision_at_k": precision_at_k(s, y), **{k: float(v) for k, v in metrics.items()}},
        n_positive=int(y.sum()), n_negative=int((~y).sum()), params=dict(params or {}),
    )
