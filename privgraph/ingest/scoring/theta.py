r"""The unifying score :math:`\theta` (HeteroRR, papers 000/002: Eq. 7 and Algorithm 1, lines 4-5)
and :func:`compute_scores`, the one entry point that turns a graph and a :class:`ScoresConfig`
into the ``theta`` that :class:`~privgraph.mechanisms.features.feature_rr.FeatureRR` takes.

.. math::
    \theta_i = \gamma\,\alpha_i + (1 - \gamma)\left[\beta_{\min} + (\beta_{\max} - \beta_i)\right],
    \qquad \theta_i \leftarrow \theta_i \Big/ \textstyle\sum_j \theta_j,

with :math:`\gamma \in [0, 1]`, :math:`\alpha` (Eq. 6) and :math:`\beta` (Eq. 5) each summing
to 1. FeatureRR then spends :math:`\varepsilon_i = \varepsilon_f \theta_i` on feature :math:`i`
(Alg. 1 line 6): ``FeatureRR(epsilon=eps_f, theta=result.theta, ...)``; FeatureRR re-normalises
theta itself, and :math:`\theta_i = 0` gives feature :math:`i` the uniform (0-LDP) kernel.

Privacy status: theta is published (FeatureRR's parameters go into the manifest), so it must be
a function of public data, or of data randomized by a mechanism charged to the ledger.
:func:`compute_scores` reads only the public node subset (features; labels when declared
public), or randomizes private labels with LabelRR and returns the Guarantee to charge.
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib.metadata
import math
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Literal

import numpy as np

import privgraph
from privgraph.errors import GraphValidationError
from privgraph.graph import GraphData
from privgraph.guarantee import Guarantee
from privgraph.guarantee.ledger import LedgerEntry
from privgraph.ingest.scoring import importance as _imp, sensitivity as _sens
from privgraph.guarantee.params import check_real_vector
from privgraph.ingest.scoring.cache import ScoreCache, fingerprint
from privgraph.ingest.scoring.config import ScoresConfig, as_scores_config, finite_real
from privgraph.mechanisms.features.label_rr import LabelRR
from privgraph.ingest.scoring.public_subset import PublicRows, PublicSubset, public_rows, randomize_private_labels
from privgraph.seeding import as_generator, as_seed_sequence, noise_generator, stage_seed

__all__ = [
    "SCORING_VERSION",
    "ScoreResult",
    "theta_from_scores",
    "compute_scores",
]

#: bump when a change alters computed scores (it is part of the cache key)
SCORING_VERSION = "1"

_EQ7 = "theta_i = gamma alpha_i + (1 - gamma) (beta_min + beta_max - beta_i), then theta / sum(theta)"


def _check_score(v: Any, name: str) -> np.ndarray:
    arr = check_real_vector(v, name, nonnegative=True)
    total = math.fsum(arr.tolist())
    if total == 0:
        raise ValueError(f"{name} is all zero: Eq. 5/6 normalise by the L1 norm, so a score vector sums to 1")
    if abs(total - 1.0) > 1e-6:
        raise ValueError(f"{name} must be normalised to sum 1 (Eq. 5/6), got sum {total!r}")
    return arr


def theta_from_scores(alpha: Any, beta: Any, gamma: float) -> np.ndarray:
    r"""Eq. 7, then Alg. 1 line 5: float64 ``[d]``, non-negative, summing to 1.

    ``alpha`` may be ``None`` when ``gamma == 0`` and ``beta`` when ``gamma == 1`` (their term
    has weight 0). Some :math:`\theta_i` may be 0 (e.g. ``gamma = 0`` and the most sensitive
    feature while another has :math:`\beta = 0`): FeatureRR then randomizes that feature
    uniformly. With both inputs normalised the sum is always > 0 (the bracket is at least
    :math:`\beta_{\min}`, and equals :math:`\beta_{\max} > 0` where :math:`\beta_i = \beta_{\min}`).

    Raises:
        ValueError: gamma outside [0, 1] or not finite; a score not 1-D, negative, non-finite,
            all zero or not summing to 1; alpha and beta of different lengths.
    """
    g = finite_real(gamma, "gamma")
    if not 0.0 <= g <= 1.0:
        raise ValueError(f"gamma must be in [0, 1], got {g}")
    a = None if (alpha is None and g == 0.0) else _check_score(alpha, "alpha")
    b = None if (beta is None and g == 1.0) else _check_score(beta, "beta")
    if a is not None and b is not None and a.shape != b.shape:
        raise ValueError(f"alpha has {a.shape[0]} entries but beta has {b.shape[0]}")
    d = (a if a is not None else b).shape[0]  # type: ignore[union-attr]
    theta = np.zeros(d)
    if a is not None and g > 0:
        theta += g * a
    if b is not None and g < 1:
        theta += (1.0 - g) * (b.min() + (b.max() - b))
    total = math.fsum(theta.tolist())
    if not total > 0:  # pragma: no cover - impossible for normalised inputs (see docstring)
        raise ValueError("theta is all zero; FeatureRR needs a positive total")
    return theta / total


# -- the entry point --------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True, repr=False)
class ScoreResult:
    """Scores for FeatureRR and their public record.

    Attributes:
        theta: float64 ``[d]``, sums to 1: ``FeatureRR(epsilon=eps_f, theta=theta)``.
        alpha: float64 ``[d]`` (Eq. 6), or ``None`` when ``gamma == 0``.
        beta: float64 ``[d]`` (Eq. 5), or ``None`` when ``gamma == 1``.
        provenance: public record for the manifest (no seed, no node ids, no rows).
        guarantee: the label charge to record in the ledger (scope LABELS), or ``None`` when no
            private label was used.
        cache_hit: whether the result came from the cache.
        cache_key: the input fingerprint (a SHA-256; ``None`` when caching was off). Keep it in
            the run's private record, not in a manifest: in the charged path it hashes the
            randomized labels, a function of the secret seed.
    """

    theta: np.ndarray
    alpha: np.ndarray | None
    beta: np.ndarray | None
    provenance: dict[str, Any]
    guarantee: Guarantee | None
    cache_hit: bool = False
    cache_key: str | None = None

    def __repr__(self) -> str:
        return f"ScoreResult(d={self.theta.shape[0]}, charged={self.guarantee is not None}, cache_hit={self.cache_hit})"

    def ledger_entry(self, partitions: tuple[int, ...]) -> LedgerEntry:
        """The ledger entry of the label charge (stage ``scores.labels``, LabelRR over the private
        labels randomized to train the SHAP surrogate, charged to the labels scope).

        Raises:
            ValueError: no private label was used (``guarantee`` is None): nothing to charge.
        """
        if self.guarantee is None:
            raise ValueError("the scores used no private label: there is no charge to record")
        return LedgerEntry(stage="scores.labels", mechanism=LabelRR.name, guarantee=self.guarantee,
                           partitions=partitions, params={"epsilon": self.guarantee.epsilon})


def _code_version() -> dict[str, str]:
    def ver(pkg: str) -> str:
        try:
            return importlib.metadata.version(pkg)
        except importlib.metadata.PackageNotFoundError:  # pragma: no cover
            return "absent"

    pv = getattr(privgraph, "__version__", None) or ver("privgraph")
    return {"privgraph": pv, "scoring": SCORING_VERSION, "shap": ver("shap"), "scikit-learn": ver("scikit-learn")}


def _resolve_cache(cache: Any) -> ScoreCache | None:
    if cache is False:
        return None
    if cache is None:
        return ScoreCache()
    if isinstance(cache, ScoreCache):
        return cache
    if isinstance(cache, (str, os.PathLike)):
        return ScoreCache(cache)
    raise TypeError(f"cache must be None (default directory), False (off), a path or a ScoreCache, got {cache!r}")


def _cache_key(cfg: ScoresConfig, x_rows: np.ndarray, y_used: Any, y_eval: Any, shap_rows: list[Any],
               model_sha: str | None, embed_id: str | None, masked_id: str | None) -> str:
    """The cache key of a computation: a fingerprint of everything the scores depend on (the code,
    the settings, the public rows and labels used, the SHAP rows, the model file, the embeddings)."""
    return fingerprint({
        "code": _code_version(), "config": cfg.model_dump(mode="json"), "x_rows": np.ascontiguousarray(x_rows),
        "y_used": y_used, "y_eval": y_eval, "shap_rows": shap_rows, "model_sha256": model_sha,
        "embed_id": embed_id, "masked_id": masked_id,
    })


def _cached(store: ScoreCache, key: str) -> ScoreResult | None:
    """The result stored under ``key``, or None (absent, or not a result this code reads)."""
    payload = store.get(key)
    return None if payload is None else _from_payload(payload, key)


def _from_payload(payload: Mapping[str, Any], key: str) -> ScoreResult | None:
    try:
        theta = np.asarray(payload["theta"], dtype=np.float64)
        alpha = None if payload["alpha"] is None else np.asarray(payload["alpha"], dtype=np.float64)
        beta = None if payload["beta"] is None else np.asarray(payload["beta"], dtype=np.float64)
        g = payload["guarantee"]
        guarantee = None if g is None else Guarantee.from_dict(g)
        provenance = dict(payload["provenance"])
    except (KeyError, TypeError, ValueError):
        return None
    if theta.ndim != 1 or not np.all(np.isfinite(theta)) or np.any(theta < 0):
        return None
    return ScoreResult(theta, alpha, beta, provenance, guarantee, cache_hit=True, cache_key=key)


def _check_graph(graph: Any) -> None:
    """A GraphData or PublicRows view, with features."""
    if not isinstance(graph, (GraphData, PublicRows)):
        raise TypeError(f"graph must be a GraphData or PublicRows, got {type(graph).__name__}")
    whole = graph if isinstance(graph, GraphData) else graph.graph
    if whole.x is None:
        raise ValueError("compute_scores: graph.x is None (an unattributed graph has no features to score)")


def _check_embedding(cfg: ScoresConfig, embed: Any, embed_id: Any, masked_rows: Any) -> bool:
    """``embed``, ``embed_id`` and (for ``sensitivity.faces``) ``masked_rows``; returns ``faces``."""
    if embed is not None and not callable(embed):
        raise TypeError(f"embed must be a callable [n, ...] -> [n, d], got {embed!r}")
    if embed_id is not None and not isinstance(embed_id, str):
        raise TypeError(f"embed_id must be a string, got {embed_id!r}")
    faces = cfg.sensitivity is not None and cfg.sensitivity.faces is not None and cfg.gamma < 1.0
    if faces and masked_rows is None:
        raise ValueError("compute_scores: sensitivity.faces needs the face-masked embeddings of the public "
                         "images (masked_rows): an image dataset with an embed stage")
    return faces


def _public_view(graph: GraphData | PublicRows, cfg: ScoresConfig, private_labels: np.ndarray | None) -> PublicRows:
    """The declared-public rows: ``graph`` itself when it is a view, else THE selection of them."""
    if isinstance(graph, GraphData):
        return public_rows(graph, cfg.public_nodes, use_labels=cfg.reads_labels, private_labels=private_labels)
    if private_labels is not None:
        raise ValueError("compute_scores: a PublicRows view carries its private labels; pass private_labels "
                         "with a whole graph only")
    return graph


def _check_sensitive_columns(cfg: ScoresConfig, rows: GraphData, faces: bool) -> None:
    """The sensitive columns of beta (Eq. 5) exist in the public rows' input columns."""
    if cfg.gamma < 1.0 and not faces:
        bad = [c for c in cfg.sensitivity.sensitive_columns if c >= rows.x.shape[1]]  # type: ignore[union-attr]
        if bad:
            raise ValueError(f"sensitivity.sensitive_columns: {bad[:5]} out of range for {rows.x.shape[1]} input columns")


def _importance_inputs(
    cfg: ScoresConfig, subset: PublicSubset
) -> tuple[np.ndarray | None, np.ndarray | None, str | None]:
    """``(background rows, explained rows, model file SHA-256)``: the SHAP samples (drawn with the
    PUBLIC ``scores.shap`` child of ``selection_seed``) or the model file's digest."""
    imp = cfg.importance
    if cfg.reads_labels:
        selection = np.random.SeedSequence(cfg.public_nodes.selection_seed)  # public-row choices only
        bg, ex = _imp.sample_shap_rows(
            subset.size, imp.background_size, imp.explain_size, as_generator(stage_seed(selection, "scores.shap"))
        )
        return bg, ex, None
    if cfg.gamma > 0.0:
        model_file = Path(imp.model_path).expanduser()  # type: ignore[arg-type]
        if not model_file.is_file():
            raise FileNotFoundError(f"importance.model_path: no such file {str(model_file)!r}")
        return None, None, hashlib.sha256(model_file.read_bytes()).hexdigest()
    return None, None, None


def _store(store: ScoreCache, key: str, result: ScoreResult) -> None:
    """Write ``result`` (its scores, provenance and label charge) under ``key``."""
    alpha, beta, guarantee = result.alpha, result.beta, result.guarantee
    store.put(key, {
        "schema": 1, "theta": result.theta.tolist(), "alpha": None if alpha is None else alpha.tolist(),
        "beta": None if beta is None else beta.tolist(), "provenance": result.provenance,
        "guarantee": None if guarantee is None else guarantee.to_dict(),
    })


def compute_scores(
    graph: GraphData | PublicRows,
    config: ScoresConfig | Mapping[str, Any],
    *,
    seed: Any,
    cache: ScoreCache | str | os.PathLike[str] | Literal[False] | None = None,
    embed: Callable[[np.ndarray], Any] | None = None,
    embed_id: str | None = None,
    private_labels: np.ndarray | None = None,
    masked_rows: Callable[[np.ndarray], Any] | None = None,
    masked_id: str | None = None,
) -> ScoreResult:
    r"""alpha (Eq. 6), beta (Eq. 5) and theta (Eq. 7, normalised) for FeatureRR, from public data.

    Steps: the public rows (:func:`~privgraph.ingest.scoring.public_subset.public_rows`'s view; it
    refuses private labels unless ``charge_epsilon`` is set); the surrogate's labels (private ones
    randomized by LabelRR when charged); alpha (a surrogate on the subset, or a model file); beta
    (masking the sensitive columns or the faces, on the subset's rows); theta by Eq. 7. The
    ``random`` draw and the SHAP samples use the PUBLIC ``public_nodes.selection_seed``; the secret
    ``seed`` drives only LabelRR (reasoning: docs/configuration.md, "Scores: randomness").

    Args:
        graph: the declared-public rows (:meth:`privgraph.config.disclosure.Disclosure.public_rows`: what a
            pipeline passes), or a whole input graph, first restricted to them.
        config: a :class:`~privgraph.ingest.scoring.config.ScoresConfig` or a mapping of its fields.
        seed: the run's secret seed (int, SeedSequence, or None: OS entropy); never recorded.
        cache: ``None``: the default directory (``$PRIVGRAPH_CACHE_DIR/scores`` or
            ``~/.cache/privgraph/scores``); a path or a :class:`ScoreCache`; ``False``: off.
        embed, embed_id: ``g`` of Eq. 5 ``[n, ...] -> [n, d]`` on the public rows (default:
            identity) and a stable name for it (the cache is off without one).
        private_labels: with a whole graph only: boolean ``[n]``, the labels the declaration makes
            private (:meth:`privgraph.config.disclosure.Disclosure.private_label_rows`); never read raw.
        masked_rows, masked_id: ``sensitivity.faces`` only: the view's graph -> ``zhat``, its
            images embedded with their faces masked (:func:`privgraph.ingest.embed.stage.face_masked_embeddings`),
            and a stable name for it (model, weights, face settings; the cache is off without one).

    Returns:
        :class:`ScoreResult`. When ``guarantee`` is not None the caller MUST record it in the
        ledger (scope LABELS), also when the result came from the cache.
    """
    _check_graph(graph)
    cfg = as_scores_config(config)
    faces = _check_embedding(cfg, embed, embed_id, masked_rows)
    unnamed = (embed is not None and embed_id is None) or (faces and masked_id is None)
    store = None if unnamed else _resolve_cache(cache)
    view = _public_view(graph, cfg, private_labels)
    subset, rows = view.subset, view.graph  # from here on, only the public rows are in reach
    _check_sensitive_columns(cfg, rows, faces)
    y_used, y_eval, guarantee = _surrogate_labels(rows, subset, cfg, as_seed_sequence(seed))
    bg, ex, model_sha = _importance_inputs(cfg, subset)
    key = None if store is None else _cache_key(cfg, rows.x, y_used, y_eval, [bg, ex], model_sha, embed_id,
                                                masked_id if faces else None)
    hit = None if store is None or key is None else _cached(store, key)
    if hit is not None:
        return hit

    embedded = _Embedded(rows.x, embed)
    alpha, imp_prov = _alpha(cfg, embedded, y_used, y_eval, bg, ex, charged=guarantee is not None)
    beta, sens_prov = _beta(cfg, rows, embedded, embed, embed_id, masked_rows if faces else None, masked_id)
    if alpha is not None and beta is not None and alpha.shape != beta.shape:
        raise ValueError(f"alpha has {alpha.shape[0]} entries but beta has {beta.shape[0]} (embedding dimensions differ)")
    theta = theta_from_scores(alpha, beta, cfg.gamma)
    provenance = _provenance(cfg, subset, imp_prov, sens_prov, theta, guarantee)
    result = ScoreResult(theta, alpha, beta, provenance, guarantee, cache_hit=False, cache_key=key)
    if store is not None and key is not None:
        _store(store, key, result)
    return result


def _provenance(
    cfg: ScoresConfig, subset: PublicSubset, imp_prov: dict[str, Any], sens_prov: dict[str, Any],
    theta: np.ndarray, guarantee: Guarantee | None,
) -> dict[str, Any]:
    """The public record of how theta was made (the manifest's ``scores``): no seed, no node id."""
    return {
        "paper": "HeteroRR (papers 000/002) Sec. III-A: Eq. 5 (beta), Eq. 6 (alpha), Eq. 7 and Alg. 1 line 5 (theta)",
        "code_version": _code_version(),
        "gamma": cfg.gamma,
        "public_nodes": dict(subset.description),
        "importance": imp_prov,
        "sensitivity": sens_prov,
        "theta": {
            "equation": _EQ7,
            "num_features": int(theta.shape[0]),
            "zero_entries": int(np.count_nonzero(theta == 0)),
            "use": "FeatureRR(theta=...): eps_i = eps_f * theta_i",
        },
        "labels_charge": None if guarantee is None else guarantee.to_dict(),
    }


def _surrogate_labels(
    rows: GraphData, subset: PublicSubset, cfg: ScoresConfig, root: np.random.SeedSequence,
) -> tuple[np.ndarray | None, np.ndarray | None, Guarantee | None]:
    """The labels the importance surrogate sees: ``(y_used, y_eval, guarantee)``. Trained on the
    subset, ``y_used`` holds its public labels and, when charged, its private ones randomized by
    LabelRR (child ``scores.labels`` of the secret ``root``: the returned guarantee goes to the
    ledger); from a model file, ``y_eval`` holds the public labels its accuracy is scored on."""
    pn = cfg.public_nodes
    if not (cfg.gamma > 0.0 and (cfg.reads_labels or not subset.private_labels.any())):
        return None, None, None
    if rows.y is None or rows.y.ndim != 1:
        if cfg.reads_labels:
            raise ValueError("compute_scores: importance from the public subset needs single labels graph.y [n]")
        return None, None, None
    y_sub = rows.y
    if not cfg.reads_labels:
        return None, y_sub, None  # public labels: only the model file's accuracy
    if (y_sub < 0).any():
        raise GraphValidationError(
            f"compute_scores: {int((y_sub < 0).sum())} of the public nodes are unlabelled (-1) and the "
            "importance surrogate trains on their labels: use public_nodes rule 'train_mask' or 'random'"
        )
    if not subset.private_labels.any():
        return y_sub, None, None
    c = pn.num_classes if pn.num_classes is not None else rows.meta.get("num_classes")
    if c is None:
        raise ValueError(
            "compute_scores: charging private labels needs the PUBLIC number of classes: set "
            "public_nodes.num_classes or graph.meta['num_classes'] (never counted from the labels)"
        )
    y_used, guarantee = randomize_private_labels(
        y_sub, subset.private_labels, epsilon=pn.charge_epsilon,  # type: ignore[arg-type]  (set: else refused)
        num_classes=int(c), rng=noise_generator(stage_seed(root, "scores.labels")),
    )
    return y_used, None, guarantee


class _Embedded:
    """The public rows through ``g`` of Eq. 5 (the caller's ``embed``, default identity), computed
    once when first needed (by alpha or beta)."""

    def __init__(self, x: np.ndarray, embed: Callable[[np.ndarray], Any] | None) -> None:
        self.x, self.embed, self._z = x, embed, None

    def __call__(self) -> np.ndarray:
        if self._z is None:
            self._z = self.x if self.embed is None else _sens._embed(self.embed, np.asarray(self.x), "the public subset")
        return self._z


def _alpha(
    cfg: ScoresConfig, embedded: _Embedded, y_used: np.ndarray | None, y_eval: np.ndarray | None,
    bg: np.ndarray | None, ex: np.ndarray | None, *, charged: bool,
) -> tuple[np.ndarray | None, dict[str, Any]]:
    """Eq. 6: SHAP importance of a surrogate trained on the public rows, or of a model file."""
    imp = cfg.importance
    if cfg.reads_labels:
        alpha, prov = _imp.shap_importance(embedded(), y_used, background_rows=bg, explain_rows=ex, C=imp.C,
                                           max_iter=imp.max_iter)
        if charged:
            prov["surrogate"]["accuracy_on"] = (
                "the labels it was trained on: public ones and LabelRR-randomized private ones "
                "(never the true private labels)"
            )
        return alpha, prov
    if cfg.gamma > 0.0:
        x_eval = None if y_eval is None else embedded()
        return _imp.model_file_importance(Path(imp.model_path).expanduser(), x_eval=x_eval, y_eval=y_eval)  # type: ignore[arg-type]
    return None, {"source": None, "note": "not computed: gamma = 0"}


def _beta(
    cfg: ScoresConfig, rows: GraphData, embedded: _Embedded, embed: Callable[[np.ndarray], Any] | None,
    embed_id: str | None, masked_rows: Callable[[GraphData], Any] | None, masked_id: str | None,
) -> tuple[np.ndarray | None, dict[str, Any]]:
    """Eq. 5: how much the embedding moves when the sensitive input (the faces, or the sensitive
    columns) is masked, on the public rows only; ``masked_rows`` set: the faces."""
    if cfg.gamma >= 1.0:
        return None, {"note": "not computed: gamma = 1"}
    common = {"num_rows": int(rows.num_nodes), "aggregate": "mean over rows of |z - zhat|, normalised to sum 1"}
    if masked_rows is not None:
        beta = _sens.embedding_sensitivity(embedded(), masked_rows(rows), what="masking the faces")
        return beta, {
            "sensitive_input": "faces found by RetinaFace in the public subset's images",
            "faces": cfg.sensitivity.faces.model_dump(mode="json"),  # type: ignore[union-attr]
            "embedding": masked_id or "caller's masked embeddings",
            "rows": "the public node subset's images only (faces in private images are never looked at)",
            **common,
        }
    sc = cfg.sensitivity
    beta = _sens.masking_sensitivity(rows.x, list(sc.sensitive_columns), embed=embed, mask_value=sc.mask_value)  # type: ignore[union-attr]
    return beta, {
        "sensitive_columns": list(sc.sensitive_columns),  # type: ignore[union-attr]
        "mask_value": sc.mask_value,  # type: ignore[union-attr]
        "embedding": "identity (the features are the embedding)" if embed is None else (embed_id or "caller's embed"),
        "rows": "the public node subset's features only (beta from private rows would leak them)",
        **common,
    }
