"""The ``evaluate`` section of a pipeline: the trainings that measure what a version is worth
(:mod:`privgraph.evaluate.utility`) and the privacy attacks run on it
(:mod:`privgraph.evaluate.attacks`)."""

from __future__ import annotations

import ast
import dataclasses
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BeforeValidator, Field, model_validator

from privgraph.config.base import Float, Int, StrictModel
from privgraph.errors import ConfigError

__all__ = ["GNN_MODELS", "AttackConfig", "EvaluateConfig", "GNNModel"]


@dataclasses.dataclass(frozen=True)
class GNNModel:
    """What ``evaluate.model`` may name, as the configuration checks it without torch: the
    aggregations the model admits (``aggrs``; the first where ``evaluate.aggr`` is left out and
    ``"mean"`` is not among them), how it aggregates (for a refusal), the multiple ``hidden`` must
    be of, and a one-line description."""

    what: str
    aggrs: tuple[str, ...]
    aggregates: str
    hidden_multiple: int = 1


#: where the model modules are: read as text (their decorators' literal arguments), never imported
MODELS_DIR = Path(__file__).resolve().parent.parent / "evaluate" / "models"


def declared_models(directory: Path = MODELS_DIR) -> dict[str, GNNModel]:
    """The GNNs ``evaluate.model`` may name, by name: each class of a module in ``directory``
    decorated with ``@register_model("<name>", what=..., aggrs=..., aggregates=...[,
    hidden_multiple=...])`` declares one (the arguments literal; a model registered by its name
    alone, such as GAP's over released aggregates, is not configurable). The configuration reads
    the declarations from the sources so that it loads without torch, and a model is one module;
    :func:`~privgraph.evaluate.models.basic.register_model` keeps the same declaration at run
    time, and the tests hold the two equal."""
    out: dict[str, GNNModel] = {}
    for path in sorted(directory.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
            for dec in getattr(node, "decorator_list", ()):
                if (isinstance(dec, ast.Call) and getattr(dec.func, "id", None) == "register_model"
                        and dec.keywords):
                    kw = {k.arg: ast.literal_eval(k.value) for k in dec.keywords if k.arg}
                    out[ast.literal_eval(dec.args[0])] = GNNModel(**{**kw, "aggrs": tuple(kw["aggrs"])})
    return dict(sorted(out.items(), key=lambda item: (item[0] != "gcn", item[0])))  # the default first


#: the GNNs ``evaluate.model`` names (:func:`declared_models`): each is the model registered under
#: that name in :data:`privgraph.evaluate.models.basic.MODELS`, declared in its own module
GNN_MODELS: dict[str, GNNModel] = declared_models()
_AGGRS = tuple(dict.fromkeys(a for m in GNN_MODELS.values() for a in m.aggrs))


class LinkTellerAttack(StrictModel):
    """LinkTeller (influence analysis) on the private edges (:mod:`privgraph.evaluate.attacks.linkteller`)."""

    name: Literal["linkteller"]
    max_pairs: Int = Field(default=500, ge=10, description="private edges attacked (and as many non-edges of V_pri)")
    delta: Float = Field(default=1e-4, gt=0, le=0.1, description="relative feature perturbation of a query")


class LinkStealingAttack(StrictModel):
    """Link stealing from posteriors (:mod:`privgraph.evaluate.attacks.link_stealing`)."""

    name: Literal["link_stealing"]
    max_pairs: Int = Field(default=500, ge=10, description="private edges attacked (and as many non-edges of V_pri)")
    metric: Literal["correlation", "cosine", "euclidean", "chebyshev", "braycurtis", "canberra", "cityblock",
                    "sqeuclidean"] = "correlation"
    supervised: bool = Field(default=True, strict=True,
                             description="also the supervised attack, trained on the public edges the adversary knows")


class MembershipAttack(StrictModel):
    """Node membership inference, training vs test nodes (:mod:`privgraph.evaluate.attacks.membership`)."""

    name: Literal["membership"]
    signal: Literal["confidence", "entropy", "true_label"] = "confidence"
    shadow: bool = Field(default=True, strict=True,
                         description="also the shadow-model attack (a second model trained by the adversary on "
                                     "labelled nodes outside the target's training and test sets)")


class AttributeAttack(StrictModel):
    """Private feature rows reconstructed from the release (:mod:`privgraph.evaluate.attacks.attribute`)."""

    name: Literal["attribute"]
    ridge: Float | None = Field(default=None, gt=0, description="ridge penalty of the adversary's regression (null: chosen by cross-validation)")
    max_train_rows: Int = Field(default=5000, ge=10, description="public rows the adversary learns from")


#: one entry of ``evaluate.attacks``: a name, or a mapping with ``name`` and the attack's parameters
AttackConfig = Annotated[
    LinkTellerAttack | LinkStealingAttack | MembershipAttack | AttributeAttack, Field(discriminator="name")
]


def _attack_entries(v: Any) -> Any:
    """``[linkteller, {name: membership, signal: entropy}]``: a bare name stands for its defaults;
    an attack named twice is an error."""
    if not isinstance(v, list):
        return v
    out = [{"name": e} if isinstance(e, str) else e for e in v]
    names = [e.get("name") for e in out if isinstance(e, Mapping)]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise ValueError(f"attack {dup[0]!r} is listed twice")
    return out


#: ``evaluate`` options of the in-memory evaluation that the evaluation at scale does not implement,
#: each with the value that leaves it off (:meth:`EvaluateConfig.check_at_scale`)
OFF_AT_SCALE: dict[str, Any] = {"model": "gcn", "kprop_labels": 0, "drop": False, "kprop_search": None,
                                "ensemble": 1, "feature_dim": None, "attacks": []}


class EvaluateConfig(StrictModel):
    runs: Int = Field(default=5, ge=1)
    epochs: Int = Field(default=200, ge=1)
    hidden: Int = Field(default=64, ge=1)
    lr: Float = Field(default=0.01, gt=0)
    weight_decay: Float = Field(default=5e-4, ge=0)
    dropout: Float = Field(default=0.5, ge=0, lt=1)
    aggr: Literal[_AGGRS] = Field(  # type: ignore[valid-type]
        default="mean", description="; ".join(f"{' | '.join(m.aggrs)} ({name})" for name, m in GNN_MODELS.items())
        + " (left out: mean, or the model's own)")
    device: Literal["auto", "cpu", "cuda"] = "auto"
    patience: Int | None = Field(default=25, ge=1)
    model: Literal[tuple(GNN_MODELS)] = Field(  # type: ignore[valid-type]
        default="gcn", description="GNN: " + ", ".join(m.what for m in GNN_MODELS.values()),
    )
    kprop_features: int = Field(
        default=0, ge=0, strict=True,
        description="LPGNN KProp steps on the private features before training (0: off)",
    )
    kprop_labels: int = Field(
        default=0, ge=0, strict=True,
        description="LPGNN KProp steps on the private (noisy) labels: train on the denoised labels",
    )
    drop: bool = Field(
        default=False, strict=True,
        description="LPGNN Drop: propagate predictions too; stop above the label RR accuracy bound",
    )
    kprop_search: list[Annotated[int, Field(ge=0, strict=True)]] | None = Field(
        default=None, min_length=1,
        description="LPGNN's search: every (K_x, K_y) of this grid trained, the best by validation accuracy on the version's labels (e.g. [0, 2, 4, 8, 16])",
    )
    kprop_search_labels: bool = Field(
        default=True, strict=True,
        description="kprop_search's grid covers K_y too (LPGNN's); false: K_x only (labels that were not randomized)",
    )
    ensemble: Int = Field(
        default=1, ge=1,
        description="each model of a run (`run`, `evaluate`) is the mean prediction of this many trainings with derived seeds: post-processing",
    )
    feature_dim: Int | None = Field(
        default=None, ge=1,
        description="train on the first k principal axes of DENSE (e.g. privatized) features: post-processing, d/k times cheaper first layer",
    )
    clusters_per_batch: Int = Field(
        default=4, ge=1,
        description="the evaluation at scale (a partitioned dataset in the files layout): Cluster-GCN's clusters (the version's parts) per training step",
    )
    inference: Literal["layerwise", "batch"] = Field(
        default="layerwise",
        description="the evaluation at scale: score every node exactly, one layer at a time over the parts (layerwise: [n, hidden] held), or per batch of parts (batch: bounded by the batch, edges between batches unseen)",
    )
    sample_parts: Int | None = Field(
        default=None, ge=1,
        description="the evaluation at scale: train and score on the induced subgraph of this many of the version's parts, evenly spaced by index (an explicit sample: every figure is the sample's; unset: every part)",
    )
    graph_report: bool = Field(
        default=True, strict=True,
        description="structure of the released edges vs the raw ones (degrees, triangles, clustering, communities, ...): private evaluation",
    )
    attacks: Annotated[list[AttackConfig], BeforeValidator(_attack_entries)] = Field(
        default_factory=list,
        description="privacy attacks on a model trained on the version and on the raw graph (private evaluation)",
    )

    def check_at_scale(self) -> None:
        """Refuse the options that the evaluation at scale (:mod:`privgraph.evaluate.scale_metrics`:
        Cluster-GCN over a partitioned version's parts, KProp on the features out of core) does not
        implement, in one line naming the first: another model, LPGNN's label KProp, Drop or
        search, ensembles, a PCA input, attacks.

        Raises:
            ConfigError: such an option is set (exit code 2).
        """
        for name, off in OFF_AT_SCALE.items():
            if getattr(self, name) != off:
                raise ConfigError(
                    f"evaluate.{name}: the evaluation at scale (a partitioned dataset in the files layout) trains "
                    f"Cluster-GCN over the version's parts and does not implement {name} (leave it at {off!r}); "
                    f"run with --no-evaluate, or evaluate the graph in memory (dataset generic)")

    def train_kwargs(self) -> dict[str, Any]:
        """The keyword arguments of :func:`privgraph.evaluate.training.fit_node_classifier` this section sets."""
        return self.model_dump(include={"epochs", "hidden", "lr", "weight_decay", "dropout", "aggr", "device",
                                        "patience", "model", "kprop_features", "kprop_labels", "drop",
                                        "feature_dim"}
                               | ({"kprop_search", "kprop_search_labels"} if self.kprop_search else set()))

    @model_validator(mode="after")
    def _search_or_fixed_kprop(self) -> EvaluateConfig:
        if self.kprop_search and (self.kprop_features or self.kprop_labels):
            raise ValueError("kprop_search chooses kprop_features and kprop_labels per run: leave them out")
        if not self.kprop_search and "kprop_search_labels" in self.model_fields_set:
            raise ValueError("kprop_search_labels applies to kprop_search: set kprop_search too")
        return self

    @model_validator(mode="after")
    def _aggr_fits_model(self) -> EvaluateConfig:
        """The model admits the aggregation (:data:`GNN_MODELS`; left out: ``"mean"``, or the
        model's own where it does not admit the mean) and ``hidden`` is a multiple of what it splits
        over (GAT's 8 heads)."""
        spec = GNN_MODELS[self.model]
        if self.aggr not in spec.aggrs:
            if "aggr" in self.model_fields_set:
                admitted = " or ".join(map(repr, spec.aggrs))
                raise ValueError(f"model {self.model!r} {spec.aggregates}: set aggr to {admitted} or leave it out "
                                 f"(got {self.aggr!r})")
            object.__setattr__(self, "aggr", spec.aggrs[0])
        if self.hidden % spec.hidden_multiple:
            raise ValueError(f"model {self.model!r} splits hidden over {spec.hidden_multiple} parts (attention heads): "
                             f"set hidden to a multiple of {spec.hidden_multiple} (got {self.hidden})")
        return self
