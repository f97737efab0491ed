r"""Attribute inference: reconstruct private nodes' raw features from what is released.

The adversary knows the public data (the public rows' raw features, the public edges), the
released features of the private rows, and the feature mechanism with its public parameters (the
manifest records them). It learns the inverse of the noise on rows whose truth it knows: it runs
the mechanism itself on the public rows (``simulate``, the Generator passed in) and fits a ridge
regression from [simulated release, mean of the public neighbours' features] to the raw row;
it then reconstructs each private row from [its released row, its public neighbours' mean].

Reported against the raw private rows (a PRIVATE evaluation): the normalised mean squared error
(MSE / the variance of the private rows: 1.0 = no better than the column means) of the attack, of
the released rows taken as they are, and of the best guess from public data alone (the same
ridge fit on the public neighbours' mean only; each penalty chosen by 3-fold cross-validation on
the public rows); ROC-AUC ranks the entries above their column's
public median (for 0/1 features: the ones) by the attack's estimate. Costs O(E d + min(rows, d)^2 max(rows, d)): one
eigendecomposition of the smaller Gram matrix per fold serves the whole penalty grid, and each fit
solves on the smaller side.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import scipy.sparse as sp

from privgraph.evaluate.attacks.scoring import AttackResult, roc_auc, score_attack
from privgraph.errors import GraphValidationError
from privgraph.graph import GraphData

__all__ = ["attribute_inference"]

_MAX_AUC_ENTRIES = 200_000


def _public_neighbour_mean(graph: GraphData, public_rows: np.ndarray) -> np.ndarray:
    """Per node, the mean raw feature row of its neighbours over the PUBLIC edges that are public
    rows, with one more column: 1 if it has none (their mean is then 0)."""
    n = graph.num_nodes
    e = graph.edges_public
    a = sp.coo_matrix((np.ones(2 * e.shape[1]), (np.r_[e[0], e[1]], np.r_[e[1], e[0]])), shape=(n, n)).tocsr()
    a = a @ sp.diags(public_rows.astype(np.float64))  # only public rows' features are known
    deg = np.asarray(a.sum(axis=1)).ravel()
    x = np.where(public_rows[:, None], graph.x, 0.0).astype(np.float64)
    mean = (sp.diags(1.0 / np.maximum(deg, 1.0)) @ a) @ x
    return np.hstack([mean, (deg == 0).astype(np.float64)[:, None]])


def _ridge(f: np.ndarray, y: np.ndarray, lam: float) -> np.ndarray:
    """Ridge weights with an unpenalized intercept (last row): on centred data F, y,
    ``w = (F^T F + lam I)^-1 F^T y = F^T (F F^T + lam I)^-1 y``, solved on the smaller side."""
    mu_f, mu_y = f.mean(axis=0), y.mean(axis=0)
    fc, yc = f - mu_f, y - mu_y
    if fc.shape[0] < fc.shape[1]:
        w = fc.T @ np.linalg.solve(fc @ fc.T + lam * np.eye(fc.shape[0]), yc)
    else:
        w = np.linalg.solve(fc.T @ fc + lam * np.eye(fc.shape[1]), fc.T @ yc)
    return np.vstack([w, mu_y - mu_f @ w])


def _predict(f: np.ndarray, w: np.ndarray) -> np.ndarray:
    return np.hstack([f, np.ones((f.shape[0], 1))]) @ w


def _fold_errors(f: np.ndarray, y: np.ndarray, f_out: np.ndarray, y_out: np.ndarray,
                 grid: tuple[float, ...]) -> np.ndarray:
    """Held-out squared error of :func:`_ridge` at every penalty of ``grid``, from ONE symmetric
    eigendecomposition.

    The unpenalized intercept is the centring (w on centred data F, b = mean(y) - mean(f) w). With
    F F^T = U diag(e) U^T (rows <= columns; else F^T F = V diag(e) V^T), the held-out prediction is
    ``F_out F^T U diag(1 / (e + lam)) U^T y`` (``F_out V diag(1 / (e + lam)) V^T F^T y``): one
    factorisation of the smaller Gram matrix serves the whole grid, instead of one d x d solve
    per penalty.
    """
    mu_f, mu_y = f.mean(axis=0), y.mean(axis=0)
    fc, yc, out = f - mu_f, y - mu_y, f_out - mu_f
    if fc.shape[0] <= fc.shape[1]:
        e, u = np.linalg.eigh(fc @ fc.T)
        left, right = (out @ fc.T) @ u, u.T @ yc
    else:
        e, v = np.linalg.eigh(fc.T @ fc)
        left, right = out @ v, v.T @ (fc.T @ yc)
    e = np.maximum(e, 0.0)  # rounding: a Gram matrix has no negative eigenvalue
    resid0 = y_out - mu_y
    return np.array([float((((left / (e + lam)) @ right - resid0) ** 2).sum()) for lam in grid])


RIDGE_GRID = (0.1, 1.0, 10.0, 100.0, 1000.0, 10000.0)


def _fit_ridge(f: np.ndarray, y: np.ndarray, rng: np.random.Generator, grid: tuple[float, ...]) -> tuple[np.ndarray, float]:
    """Ridge weights with the penalty chosen from ``grid`` by 3-fold cross-validation on the
    adversary's own rows (few rows and many features overfit a fixed penalty)."""
    if len(grid) == 1:
        return _ridge(f, y, grid[0]), grid[0]
    folds = rng.permutation(f.shape[0]) % 3
    err = np.zeros(len(grid))
    for k in range(3):
        err += _fold_errors(f[folds != k], y[folds != k], f[folds == k], y[folds == k], grid)
    lam = grid[int(np.argmin(err))]
    return _ridge(f, y, lam), lam


def attribute_inference(
    raw: GraphData,
    released_x: np.ndarray,
    public_rows: np.ndarray,
    simulate: Callable[[np.ndarray, np.random.Generator], np.ndarray],
    rng: np.random.Generator,
    *,
    ridge: float | None = None,
    max_train_rows: int = 5000,
) -> AttackResult:
    """Reconstruct the private rows (``~public_rows``) of ``raw.x`` from ``released_x``;
    ``ridge``: a fixed penalty, or ``None`` to choose it from :data:`RIDGE_GRID` by 3-fold
    cross-validation on the public rows (each regression its own).

    Raises:
        GraphValidationError: no private rows, no public rows to learn from, or shapes that differ.
    """
    pub = np.asarray(public_rows, dtype=bool)
    x = np.asarray(raw.x, dtype=np.float64)
    rel = np.asarray(released_x, dtype=np.float64)
    if x.ndim != 2 or rel.shape != x.shape or pub.shape != (x.shape[0],):
        raise GraphValidationError(
            f"attribute inference: raw features {list(x.shape)}, released {list(rel.shape)} and public rows "
            f"{list(pub.shape)} must agree"
        )
    if pub.all():
        raise GraphValidationError("attribute inference: every feature row is public: nothing to infer")
    if pub.sum() < 10:
        raise GraphValidationError(f"attribute inference: {int(pub.sum())} public rows, at least 10 are needed to learn from")
    nbr = _public_neighbour_mean(raw, pub)
    train = np.flatnonzero(pub)
    if train.size > max_train_rows:
        train = np.sort(rng.choice(train, max_train_rows, replace=False))
    sim = np.asarray(simulate(x[train], rng), dtype=np.float64)
    target = np.flatnonzero(~pub)
    truth = x[target]
    grid = RIDGE_GRID if ridge is None else (float(ridge),)
    w_attack, lam_attack = _fit_ridge(np.hstack([sim, nbr[train]]), x[train], rng, grid)
    w_public, lam_public = _fit_ridge(nbr[train], x[train], rng, grid)
    guess = _predict(np.hstack([rel[target], nbr[target]]), w_attack)
    public_guess = _predict(nbr[target], w_public)
    var = float(((truth - truth.mean(axis=0)) ** 2).mean()) or 1.0

    def nmse(est: np.ndarray) -> float:
        return float(((est - truth) ** 2).mean()) / var

    median = np.median(x[pub], axis=0)
    labels = (truth > median).ravel()
    scores = (guess - median).ravel()
    public_scores = (public_guess - median).ravel()
    if labels.size > _MAX_AUC_ENTRIES:
        keep = rng.choice(labels.size, _MAX_AUC_ENTRIES, replace=False)
        labels, scores, public_scores = labels[keep], scores[keep], public_scores[keep]
    return score_attack(
        "attribute", scores, labels, rng,
        params={"ridge_attack": lam_attack, "ridge_public_only": lam_public, "train_rows": int(train.size),
                "private_rows": int(target.size)},
        nmse_attack=nmse(guess), nmse_released=nmse(rel[target]), nmse_public_only=nmse(public_guess),
        auc_public_only=roc_auc(public_scores, labels),
    )
