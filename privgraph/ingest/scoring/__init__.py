r"""HeteroRR's feature scores (papers 000/002, Sec. III-A): importance :math:`\alpha` (Eq. 6, SHAP
of a surrogate trained on PUBLIC data), sensitivity :math:`\beta` (Eq. 5, masking the sensitive
input columns, on PUBLIC rows) and the unifying score :math:`\theta` (Eq. 7, normalised) that
sets FeatureRR's per-feature budgets :math:`\varepsilon_i = \varepsilon_f \theta_i`.

Typical use::

    from privgraph.ingest.scoring import ScoresConfig, compute_scores
    cfg = ScoresConfig(gamma=0.5, sensitivity={"sensitive_columns": [3, 17]})
    scores = compute_scores(graph, cfg, seed=stage_seed(root, "scores"))
    mech = FeatureRR(epsilon=eps_f, bins=k, theta=scores.theta)
    if scores.guarantee is not None:   # private labels were used, randomized and charged
        ledger.record(..., guarantee=scores.guarantee)
    manifest["scores"] = scores.provenance

``shap`` and scikit-learn are imported lazily (only when importance is computed).
"""

from privgraph.ingest.scoring.cache import ScoreCache, default_cache_dir, fingerprint
from privgraph.ingest.scoring.importance import (
    MODEL_FILE_FORMAT,
    ImportanceResult,
    LinearSurrogate,
    fit_surrogate,
    linear_shap_values,
    load_linear_surrogate,
    model_file_importance,
    sample_shap_rows,
    save_linear_surrogate,
    shap_importance,
)
from privgraph.ingest.scoring.public_subset import (
    RULES,
    PrivateLabelsError,
    PublicSubset,
    public_node_subset,
    randomize_private_labels,
)
from privgraph.ingest.scoring.sensitivity import MASK_VALUES, mask_inputs, masking_sensitivity
from privgraph.ingest.scoring.config import (
    ImportanceConfig,
    PublicNodesConfig,
    ScoresConfig,
    SensitivityConfig,
    as_scores_config,
)
from privgraph.ingest.scoring.theta import SCORING_VERSION, ScoreResult, compute_scores, theta_from_scores

__all__ = [
    "MASK_VALUES",
    "MODEL_FILE_FORMAT",
    "RULES",
    "SCORING_VERSION",
    "ImportanceConfig",
    "ImportanceResult",
    "LinearSurrogate",
    "PrivateLabelsError",
    "PublicNodesConfig",
    "PublicSubset",
    "ScoreCache",
    "ScoreResult",
    "ScoresConfig",
    "SensitivityConfig",
    "as_scores_config",
    "compute_scores",
    "default_cache_dir",
    "fingerprint",
    "fit_surrogate",
    "linear_shap_values",
    "load_linear_surrogate",
    "mask_inputs",
    "masking_sensitivity",
    "model_file_importance",
    "public_node_subset",
    "randomize_private_labels",
    "sample_shap_rows",
    "save_linear_surrogate",
    "shap_importance",
    "theta_from_scores",
]
