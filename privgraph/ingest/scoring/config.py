"""The ``scores`` section of a pipeline: pydantic models of HeteroRR's scoring settings (which
nodes are public, where importance comes from, which inputs are sensitive, gamma of Eq. 7).

Pure models, so that :mod:`privgraph.config.pipeline` reads them without the scoring code
(:mod:`privgraph.ingest.scoring.theta` computes the scores).
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from privgraph.mechanisms.base import MAX_EXACT_EPSILON as MAX_COORDINATE_EPSILON

__all__ = [
    "PublicNodesConfig",
    "ImportanceConfig",
    "FacesConfig",
    "SensitivityConfig",
    "ScoresConfig",
    "as_scores_config",
    "finite_real",
]


# -- configuration ----------------------------------------------------------------------------------


def finite_real(v: Any, name: str) -> float:
    """``v`` as a float when it is a finite real number (not a boolean); else ``ValueError`` naming ``name``."""
    if isinstance(v, bool) or not isinstance(v, numbers.Real):
        raise ValueError(f"{name} must be a number, got {v!r}")
    f = float(v)
    if not math.isfinite(f):
        raise ValueError(f"{name} must be finite, got {f}")
    return f


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class PublicNodesConfig(_Strict):
    """Which nodes scoring may read (see :func:`privgraph.ingest.scoring.public_subset.public_node_subset`)."""

    rule: Literal["train_mask", "random", "all"] = Field(
        default="train_mask",
        description="train_mask: the split's training nodes are public; random: a random fraction "
        "of nodes is declared public; all: every node (private labels: needs charge_epsilon)",
    )
    fraction: float | None = Field(default=None, description="rule random: fraction of all nodes, in (0, 1]")
    size: int | None = Field(default=None, strict=True, ge=1, description="rule random: number of nodes instead of fraction")
    charge_epsilon: float | None = Field(
        default=None,
        description="train the surrogate on private labels randomized by LabelRR at this epsilon, "
        "charged to the labels scope (None: private labels are refused)",
    )
    num_classes: int | None = Field(
        default=None, strict=True, ge=2, description="public number of classes for LabelRR (default graph.meta['num_classes'])"
    )
    all_features_public: bool = Field(
        default=False, strict=True, description="rule all: declares every node's features public"
    )
    selection_seed: int = Field(
        default=0,
        strict=True,
        ge=0,
        description="seed of the rule-random draw and of the SHAP background/explained samples "
        "(like dataset.split_seed: NOT the noise seed, which a published theta must not depend on; "
        "not written to the provenance)",
    )

    @field_validator("fraction", mode="before")
    @classmethod
    def _fraction(cls, v: Any) -> Any:
        if v is None:
            return v
        f = finite_real(v, "fraction")
        if not 0.0 < f <= 1.0:
            raise ValueError(f"fraction must be in (0, 1], got {f}")
        return f

    @field_validator("charge_epsilon", mode="before")
    @classmethod
    def _charge(cls, v: Any) -> Any:
        if v is None:
            return v
        f = finite_real(v, "charge_epsilon")
        if not 0.0 < f <= MAX_COORDINATE_EPSILON:
            raise ValueError(f"charge_epsilon must be in (0, {MAX_COORDINATE_EPSILON:g}], got {f}")
        return f

    @model_validator(mode="after")
    def _rule_args(self) -> PublicNodesConfig:
        if self.rule == "random":
            if (self.fraction is None) == (self.size is None):
                raise ValueError("rule 'random' needs exactly one of fraction or size")
        elif self.fraction is not None or self.size is not None:
            raise ValueError(f"fraction and size apply to rule 'random' only, got rule {self.rule!r}")
        return self


class ImportanceConfig(_Strict):
    """How alpha (Eq. 6) is computed."""

    source: Literal["public_subset", "model_file"] = Field(
        default="public_subset",
        description="public_subset: logistic regression trained on the public nodes; model_file: "
        "a linear surrogate .npz trained elsewhere on public data",
    )
    model_path: str | None = Field(default=None, description="source model_file: path of the .npz")
    background_size: int = Field(default=100, strict=True, ge=1, description="SHAP background rows (public subset)")
    explain_size: int = Field(default=200, strict=True, ge=1, description="SHAP explained rows (public subset)")
    C: float = Field(default=1.0, description="inverse L2 strength of the logistic regression (> 0)")
    max_iter: int = Field(default=1000, strict=True, ge=1, description="lbfgs iterations")

    @field_validator("C", mode="before")
    @classmethod
    def _c(cls, v: Any) -> float:
        f = finite_real(v, "C")
        if f <= 0:
            raise ValueError(f"C must be > 0, got {f}")
        return f

    @model_validator(mode="after")
    def _path(self) -> ImportanceConfig:
        if self.source == "model_file" and not self.model_path:
            raise ValueError("importance.source 'model_file' needs model_path")
        if self.source == "public_subset" and self.model_path is not None:
            raise ValueError("model_path applies to importance.source 'model_file' only")
        return self


class FacesConfig(_Strict):
    """Eq. 5 on images: the sensitive input is the face regions RetinaFace finds (public images only)."""

    threshold: float = Field(default=0.9, gt=0.0, lt=1.0, description="RetinaFace's score threshold")
    margin: float = Field(default=0.1, ge=0.0, le=1.0, description="each box enlarged by this share of its size")
    mask: Literal["zero", "mean"] = Field(default="zero", description="masked pixels: black, or the image's mean colour")


class SensitivityConfig(_Strict):
    """How beta (Eq. 5) is computed: which inputs are sensitive (input columns, or the faces in the
    node images) and what masking puts there."""

    sensitive_columns: tuple[int, ...] | None = Field(
        default=None, min_length=1, description="indices of the sensitive input columns")
    faces: FacesConfig | None = Field(
        default=None, description="image graphs: the faces RetinaFace finds in the PUBLIC images are the sensitive input")
    mask_value: Literal["zero", "mean"] | float = Field(
        default="zero",
        description="zero: masked inputs become 0; mean: their mean over the public subset's rows; "
        "or a public constant",
    )

    @model_validator(mode="after")
    def _one_source(self) -> SensitivityConfig:
        if (self.sensitive_columns is None) == (self.faces is None):
            raise ValueError("sensitivity: set exactly one of sensitive_columns (feature columns) and faces "
                             "(the faces in the node images)")
        return self

    @field_validator("sensitive_columns", mode="before")
    @classmethod
    def _cols(cls, v: Any) -> Any:
        if v is None:
            return v
        if isinstance(v, (str, bytes)) or not hasattr(v, "__iter__"):
            raise ValueError(f"sensitive_columns must be a list of column indices, got {v!r}")
        out = []
        for c in v:
            if isinstance(c, bool) or not isinstance(c, numbers.Integral) or int(c) < 0:
                raise ValueError(f"sensitive_columns must hold column indices >= 0, got {c!r}")
            out.append(int(c))
        if len(set(out)) != len(out):
            raise ValueError("sensitive_columns: duplicate column indices")
        return tuple(out)

    @field_validator("mask_value", mode="before")
    @classmethod
    def _mask(cls, v: Any) -> Any:
        if isinstance(v, str):
            return v
        return finite_real(v, "mask_value")


class ScoresConfig(_Strict):
    """The HeteroRR score configuration (``scores:`` in a pipeline, for FeatureRR's theta)."""

    gamma: float = Field(default=0.5, description="Eq. 7 weight of importance vs sensitivity, in [0, 1]")
    public_nodes: PublicNodesConfig = PublicNodesConfig()
    importance: ImportanceConfig = ImportanceConfig()
    sensitivity: SensitivityConfig | None = Field(default=None, description="required unless gamma == 1")

    @field_validator("gamma", mode="before")
    @classmethod
    def _gamma(cls, v: Any) -> float:
        f = finite_real(v, "gamma")
        if not 0.0 <= f <= 1.0:
            raise ValueError(f"gamma must be in [0, 1], got {f}")
        return f

    @property
    def reads_labels(self) -> bool:
        """Whether the scores read the public nodes' labels (the importance surrogate is trained on
        the public subset): then unlabelled nodes are no public node, and private ones are refused
        or charged."""
        return self.gamma > 0 and self.importance.source == "public_subset"

    @model_validator(mode="after")
    def _needs_sensitivity(self) -> ScoresConfig:
        if self.sensitivity is None and self.gamma < 1.0:
            raise ValueError(
                f"gamma={self.gamma} weighs sensitivity by {1.0 - self.gamma:g}: set "
                "sensitivity.sensitive_columns or sensitivity.faces (or gamma: 1 for importance only)"
            )
        return self


def as_scores_config(config: Any) -> ScoresConfig:
    """A :class:`ScoresConfig` from itself or a mapping (validated)."""
    if isinstance(config, ScoresConfig):
        return config
    if isinstance(config, Mapping):
        return ScoresConfig.model_validate(dict(config))
    raise TypeError(f"config must be a ScoresConfig or a mapping, got {type(config).__name__}")


# -- Eq. 7 ------------------------------------------------------------------------------------------
