r"""Importance scores :math:`\alpha` (HeteroRR, papers 000/002, Sec. III-A, Eq. 6).

.. math::
    \alpha_i = \frac{|\mathrm{SHAP}(z_i)|}{\lVert \mathrm{SHAP}(z) \rVert_1}

computed, as the paper recommends ("a pretrained model that is trained on a publicly available
dataset to avoid any extra privacy risks"), from a linear surrogate classifier that sees PUBLIC
data only:

- ``source="public_subset"``: a multinomial logistic regression (scikit-learn, lbfgs,
  deterministic) trained on the features and labels of a PUBLIC node subset chosen by
  :func:`~privgraph.ingest.scoring.public_subset.public_node_subset`; SHAP values by
  ``shap.LinearExplainer`` (exact for a linear model, interventional / independent masker);
  :math:`|\mathrm{SHAP}(z_i)|` is the mean of :math:`|\phi_{s,i,c}|` over explained samples
  :math:`s` and classes :math:`c`.
- ``source="model_file"``: a linear surrogate trained elsewhere on public data, stored as an
  ``.npz`` file (format :data:`MODEL_FILE_FORMAT`, see :func:`save_linear_surrogate`) together
  with its PUBLIC background (and optionally explained) rows; no graph data is read for alpha.

alpha is published (through theta), so it must be a function of public data only: the public
node subset, its privacy status and the charged labels are :mod:`privgraph.ingest.scoring.public_subset`'s
(its names stay importable from here).
"""

from __future__ import annotations

import dataclasses
import hashlib
import math
import numbers
import os
import warnings
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from privgraph.guarantee.params import check_int
from privgraph.seeding import as_generator

__all__ = [
    "MODEL_FILE_FORMAT",
    "ImportanceResult",
    "LinearSurrogate",
    "fit_surrogate",
    "sample_shap_rows",
    "linear_shap_values",
    "shap_importance",
    "save_linear_surrogate",
    "load_linear_surrogate",
    "model_file_importance",
]

#: the one documented model-file format (an ``.npz`` read with ``allow_pickle=False``)
MODEL_FILE_FORMAT = "privgraph-linear-npz-v1"


# -- the surrogate and SHAP -------------------------------------------------------------------------


class ImportanceResult(NamedTuple):
    """``alpha`` float64 ``[d]`` (non-negative, sums to 1) and its public ``provenance``."""

    alpha: np.ndarray
    provenance: dict[str, Any]


def _check_x(x: Any, name: str) -> np.ndarray:
    arr = np.asarray(x)
    if arr.dtype == np.bool_ or not np.issubdtype(arr.dtype, np.number) or np.iscomplexobj(arr):
        raise TypeError(f"{name} must hold real numbers, got dtype {arr.dtype}")
    if arr.ndim != 2 or arr.shape[0] == 0 or arr.shape[1] == 0:
        raise ValueError(f"{name} must be a non-empty 2-D array [n, d], got shape {list(arr.shape)}")
    arr = arr.astype(np.float64)
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} must be finite (NaN or inf found)")
    return arr


def _check_y(y: Any, n: int, name: str) -> np.ndarray:
    arr = np.asarray(y)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be 1-D single labels [n], got shape {list(arr.shape)}")
    if arr.dtype == np.bool_ or not np.issubdtype(arr.dtype, np.integer):
        raise TypeError(f"{name} must hold integer labels, got dtype {arr.dtype}")
    if arr.shape[0] != n:
        raise ValueError(f"{name} has {arr.shape[0]} labels but the features have {n} rows")
    return arr.astype(np.int64)


def fit_surrogate(x: np.ndarray, y: np.ndarray, *, C: float = 1.0, max_iter: int = 1000) -> Any:
    """A multinomial logistic regression (lbfgs: deterministic for given data) on ``(x, y)``."""
    from sklearn.exceptions import ConvergenceWarning  # lazy: scikit-learn, only where a surrogate is fit
    from sklearn.linear_model import LogisticRegression  # lazy: scikit-learn, as above

    model = LogisticRegression(C=C, max_iter=max_iter, solver="lbfgs")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)  # reported as provenance["converged"]
        model.fit(x, y)
    return model


def sample_shap_rows(
    n: int, background_size: int, explain_size: int, rng: Any
) -> tuple[np.ndarray, np.ndarray]:
    """Row positions (into the ``n`` public rows) of the SHAP background and explained samples.

    Each is all rows, in order, when its size is >= ``n`` (no draw), else a sorted uniform draw
    without replacement; the background is drawn first.
    """
    n = check_int(n, "n", minimum=1)
    background_size = check_int(background_size, "background_size", minimum=1)
    explain_size = check_int(explain_size, "explain_size", minimum=1)
    gen = as_generator(rng)

    def draw(k: int) -> np.ndarray:
        if k >= n:
            return np.arange(n, dtype=np.int64)
        return np.sort(gen.choice(n, size=k, replace=False)).astype(np.int64)

    bg = draw(background_size)
    ex = draw(explain_size)
    return bg, ex


def _as_coef(coef: Any, intercept: Any) -> tuple[np.ndarray, np.ndarray]:
    c = np.asarray(coef, dtype=np.float64)
    if c.ndim == 1:
        c = c[None, :]
    if c.ndim != 2 or c.size == 0:
        raise ValueError(f"coef must be [d] or [outputs, d], got shape {list(np.shape(coef))}")
    b = np.zeros(c.shape[0]) if intercept is None else np.asarray(intercept, dtype=np.float64).reshape(-1)
    if b.shape[0] != c.shape[0]:
        raise ValueError(f"intercept has {b.shape[0]} entries but coef has {c.shape[0]} outputs")
    if not (np.all(np.isfinite(c)) and np.all(np.isfinite(b))):
        raise ValueError("coef and intercept must be finite")
    return c, b


def linear_shap_values(
    coef: Any, intercept: Any, background: np.ndarray, x: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Exact SHAP values of a linear model's margins via ``shap.LinearExplainer``.

    Independent (interventional) masker over ``background``, which shap does NOT subsample
    (``max_samples = len(background)``): ``phi[s, i, c] = coef[c, i] (x[s, i] - mean_bg[i])``.

    Returns:
        ``phi`` float64 ``[n, d, outputs]`` and ``base`` float64 ``[outputs]`` with
        ``phi.sum(1) + base == x @ coef.T + intercept`` (additivity).
    """
    shap = _shap()
    c, b = _as_coef(coef, intercept)
    bg = _check_x(background, "background")
    xx = _check_x(x, "x")
    if bg.shape[1] != c.shape[1] or xx.shape[1] != c.shape[1]:
        raise ValueError(
            f"coef has {c.shape[1]} features, background {bg.shape[1]}, x {xx.shape[1]}: they must agree"
        )
    masker = shap.maskers.Independent(bg, max_samples=bg.shape[0])
    model = (c[0], b[0]) if c.shape[0] == 1 else (c, b)
    explainer = shap.LinearExplainer(model, masker)
    phi = np.asarray(explainer.shap_values(xx), dtype=np.float64)
    if phi.ndim == 2:
        phi = phi[:, :, None]
    base = np.atleast_1d(np.asarray(explainer.expected_value, dtype=np.float64)).reshape(-1)
    return phi, base


def _normalise_importance(phi: np.ndarray) -> np.ndarray:
    raw = np.abs(phi).mean(axis=(0, 2))
    total = math.fsum(raw.tolist())
    if not total > 0:
        raise ValueError(
            "alpha: every SHAP value is 0 (the surrogate is constant on the explained rows, or "
            "the explained rows equal the background mean); Eq. 6 is undefined"
        )
    return raw / total


def _shap() -> Any:
    """``import shap`` (lazily: ~2 s), without its import-time plotting deprecation warnings."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PendingDeprecationWarning)
        warnings.simplefilter("ignore", DeprecationWarning)
        import shap  # lazy: shap (~2 s), only where importances are computed
    return shap


def _shap_version() -> str:
    return str(_shap().__version__)


def shap_importance(
    x_public: Any,
    y_public: Any,
    *,
    seed: Any = None,
    background_size: int = 100,
    explain_size: int = 200,
    background_rows: np.ndarray | None = None,
    explain_rows: np.ndarray | None = None,
    C: float = 1.0,
    max_iter: int = 1000,
) -> ImportanceResult:
    r"""alpha (Eq. 6) from a logistic-regression surrogate trained on PUBLIC rows.

    ``x_public`` ``[m, d]`` and ``y_public`` ``[m]`` must be public (or labels randomized and
    charged): this function trusts its caller. The background and explained rows are drawn
    from the same public rows with ``seed`` (:func:`sample_shap_rows`) unless given as row
    positions. ``alpha_i = mean_{s, c} |phi_{s,i,c}| / sum_j mean_{s, c} |phi_{s,j,c}|``.

    Provenance: surrogate type and parameters, whether lbfgs converged, its accuracy on the
    rows it was trained on, the explainer and the sample sizes. No seed, no row ids.
    """
    x = _check_x(x_public, "x_public")
    y = _check_y(y_public, x.shape[0], "y_public")
    if np.unique(y).size < 2:
        raise ValueError("y_public holds a single class: the surrogate cannot learn any importance")
    if isinstance(C, bool) or not isinstance(C, numbers.Real) or not (math.isfinite(C) and C > 0):
        raise ValueError(f"C must be a finite number > 0, got {C!r}")
    max_iter = check_int(max_iter, "max_iter", minimum=1)
    if background_rows is None or explain_rows is None:
        bg, ex = sample_shap_rows(x.shape[0], background_size, explain_size, seed)
        bg = bg if background_rows is None else background_rows
        ex = ex if explain_rows is None else explain_rows
    else:
        bg, ex = background_rows, explain_rows
    bg = np.asarray(bg, dtype=np.int64)
    ex = np.asarray(ex, dtype=np.int64)
    for name, r in (("background_rows", bg), ("explain_rows", ex)):
        if r.ndim != 1 or r.size == 0 or r.min() < 0 or r.max() >= x.shape[0]:
            raise ValueError(f"{name} must be non-empty row positions in [0, {x.shape[0]})")

    model = fit_surrogate(x, y, C=float(C), max_iter=max_iter)
    phi, _ = linear_shap_values(model.coef_, model.intercept_, x[bg], x[ex])
    alpha = _normalise_importance(phi)
    n_iter = int(np.max(np.atleast_1d(model.n_iter_)))
    provenance = {
        "source": "public_subset",
        "surrogate": {
            "type": "sklearn.linear_model.LogisticRegression",
            "params": {"C": float(C), "max_iter": max_iter, "solver": "lbfgs", "loss": "multinomial (binomial for 2 classes)"},
            "num_classes": int(model.classes_.shape[0]),
            "converged": n_iter < max_iter,
            "accuracy": float(model.score(x, y)),
            "accuracy_on": "the labels it was trained on (public subset)",
            "train_size": int(x.shape[0]),
        },
        "explainer": {
            "type": "shap.LinearExplainer",
            "masker": "Independent (interventional)",
            "shap_version": _shap_version(),
            "background_size": int(bg.size),
            "explain_size": int(ex.size),
            "aggregate": "mean |SHAP| over explained rows and classes, normalised to sum 1",
        },
    }
    return ImportanceResult(alpha, provenance)


# -- a surrogate from a model file ------------------------------------------------------------------


@dataclasses.dataclass(frozen=True, repr=False)
class LinearSurrogate:
    """A linear surrogate trained elsewhere on public data (format :data:`MODEL_FILE_FORMAT`).

    Attributes:
        coef: float64 ``[outputs, d]`` (one output: the margin of ``classes[1]`` vs ``classes[0]``).
        intercept: float64 ``[outputs]``.
        background: float64 ``[m, d]`` PUBLIC rows (the SHAP baseline).
        explain: float64 ``[k, d]`` PUBLIC rows to explain (default: the background).
        classes: int64 labels of the outputs (``[outputs]``, or ``[2]`` for one output).
        sha256: the file's SHA-256 (public: identifies the model).
    """

    coef: np.ndarray
    intercept: np.ndarray
    background: np.ndarray
    explain: np.ndarray
    classes: np.ndarray
    sha256: str

    def decision_function(self, x: Any) -> np.ndarray:
        return _check_x(x, "x") @ self.coef.T + self.intercept

    def predict(self, x: Any) -> np.ndarray:
        m = self.decision_function(x)
        if self.coef.shape[0] == 1:
            return self.classes[(m[:, 0] > 0).astype(np.int64)]
        return self.classes[np.argmax(m, axis=1)]

    def __repr__(self) -> str:
        return f"LinearSurrogate(outputs={self.coef.shape[0]}, d={self.coef.shape[1]}, sha256={self.sha256[:12]}...)"


def save_linear_surrogate(
    path: str | os.PathLike[str],
    *,
    coef: Any,
    background: Any,
    intercept: Any = None,
    explain: Any = None,
    classes: Any = None,
) -> Path:
    """Write a linear surrogate as ``.npz`` (format :data:`MODEL_FILE_FORMAT`).

    Keys: ``format`` (the format string), ``coef`` ``[outputs, d]`` (or ``[d]``), ``intercept``
    ``[outputs]`` (default 0), ``background`` ``[m, d]`` (PUBLIC rows, required: the SHAP
    baseline), optional ``explain`` ``[k, d]`` (PUBLIC rows to explain; default the background),
    optional ``classes`` (the labels of the outputs; default ``0..outputs-1``, or ``[0, 1]`` for
    one output). A scikit-learn linear classifier saves as
    ``coef=m.coef_, intercept=m.intercept_, classes=m.classes_``. Plain arrays only: the file is
    read with ``allow_pickle=False``.
    """
    c, b = _as_coef(coef, intercept)
    arrays: dict[str, np.ndarray] = {
        "format": np.array(MODEL_FILE_FORMAT),
        "coef": c,
        "intercept": b,
        "background": _check_x(background, "background"),
    }
    if explain is not None:
        arrays["explain"] = _check_x(explain, "explain")
    if classes is not None:
        arrays["classes"] = np.asarray(classes, dtype=np.int64)
    p = Path(path)
    with open(p, "wb") as fh:
        np.savez(fh, **arrays)
    load_linear_surrogate(p)  # validates what was written
    return p


def load_linear_surrogate(path: str | os.PathLike[str]) -> LinearSurrogate:
    """Read and validate a model file written by :func:`save_linear_surrogate`."""
    p = Path(path)
    if not p.is_file():
        raise FileNotFoundError(f"model_path: no such file {str(p)!r}")
    raw = p.read_bytes()
    sha = hashlib.sha256(raw).hexdigest()
    try:
        with np.load(p, allow_pickle=False) as f:
            data = {k: f[k] for k in f.files}
    except Exception as exc:  # not an npz, or object arrays
        raise ValueError(f"model_path {p.name!r}: not a {MODEL_FILE_FORMAT} .npz file: {exc}") from exc
    fmt = str(data.get("format", ""))
    if fmt != MODEL_FILE_FORMAT:
        raise ValueError(f"model_path {p.name!r}: format must be {MODEL_FILE_FORMAT!r}, got {fmt!r}")
    for key in ("coef", "background"):
        if key not in data:
            raise ValueError(f"model_path {p.name!r}: missing array {key!r}")
    c, b = _as_coef(data["coef"], data.get("intercept"))
    bg = _check_x(data["background"], "background")
    ex = _check_x(data["explain"], "explain") if "explain" in data else bg
    if bg.shape[1] != c.shape[1] or ex.shape[1] != c.shape[1]:
        raise ValueError(f"model_path {p.name!r}: coef has {c.shape[1]} features, background {bg.shape[1]}, explain {ex.shape[1]}")
    n_cls = 2 if c.shape[0] == 1 else c.shape[0]
    classes = np.asarray(data["classes"], dtype=np.int64) if "classes" in data else np.arange(n_cls, dtype=np.int64)
    if classes.shape != (n_cls,):
        raise ValueError(f"model_path {p.name!r}: classes must have {n_cls} entries, got {list(classes.shape)}")
    return LinearSurrogate(coef=c, intercept=b, background=bg, explain=ex, classes=classes, sha256=sha)


def model_file_importance(
    path: str | os.PathLike[str],
    *,
    x_eval: Any = None,
    y_eval: Any = None,
) -> ImportanceResult:
    """alpha (Eq. 6) from a linear surrogate file: SHAP of its own public explained rows against
    its own public background; reads no graph data.

    ``x_eval``/``y_eval`` (optional, PUBLIC rows and labels, e.g. the public subset) only give
    the surrogate's accuracy for the provenance.
    """
    s = load_linear_surrogate(path)
    phi, _ = linear_shap_values(s.coef, s.intercept, s.background, s.explain)
    alpha = _normalise_importance(phi)
    accuracy = None
    if x_eval is not None and y_eval is not None:
        xe = _check_x(x_eval, "x_eval")
        if xe.shape[1] != s.coef.shape[1]:
            raise ValueError(f"x_eval has {xe.shape[1]} features, the model file {s.coef.shape[1]}")
        ye = _check_y(y_eval, xe.shape[0], "y_eval")
        accuracy = float(np.mean(s.predict(xe) == ye))
    provenance = {
        "source": "model_file",
        "model_file": {"format": MODEL_FILE_FORMAT, "name": Path(path).name, "sha256": s.sha256},
        "surrogate": {
            "type": "linear (coef, intercept) from a model file trained on public data",
            "num_outputs": int(s.coef.shape[0]),
            "accuracy": accuracy,
            "accuracy_on": None if accuracy is None else "public subset labels",
            "eval_size": None if accuracy is None else int(np.asarray(x_eval).shape[0]),
        },
        "explainer": {
            "type": "shap.LinearExplainer",
            "masker": "Independent (interventional)",
            "shap_version": _shap_version(),
            "background_size": int(s.background.shape[0]),
            "explain_size": int(s.explain.shape[0]),
            "aggregate": "mean |SHAP| over explained rows and classes, normalised to sum 1",
        },
    }
    return ImportanceResult(alpha, provenance)
