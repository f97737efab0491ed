"""Pydantic models of ``pipelines.yaml`` (pure models: reading and cross-checking the file is
:mod:`privgraph.config.loader`'s, one floor up, where the mechanisms, datasets and the declaration
of what is public are in reach).

Every fault is reported as a one-line :class:`~privgraph.errors.ConfigError` that starts with the
YAML path of the fault, e.g. ``pipelines.cora.features.epsilon: must be finite, got nan``.
"""

from __future__ import annotations

import ipaddress
import math
import re
from collections.abc import Mapping
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from privgraph.config.base import Float, Int, StrictModel, finite_positive
from privgraph.config.evaluate import EvaluateConfig
from privgraph.errors import ConfigError
from privgraph.guarantee.redaction import redact_uri
from privgraph.ingest.option_support import SCALE, check_options_on_path, run_path
from privgraph.ingest.scoring.config import ScoresConfig

__all__ = [
    "DatasetConfig",
    "MechanismConfig",
    "PartitionConfig",
    "DaskConfig",
    "EvaluateConfig",
    "ScheduleConfig",
    "PipelineConfig",
    "ComparisonConfig",
    "PipelinesConfig",
    "mechanism_entry",
]

KNOWN_DATASETS = ("cora", "citeseer", "pubmed", "facebook", "generic", "partitioned", "sbm", "images", "photos")
#: datasets whose nodes are images: their features come from the ``embed`` stage
IMAGE_DATASETS = ("images", "photos")
_NAME = re.compile(r"^[a-z0-9][a-z0-9_-]*$")


class DatasetConfig(StrictModel):
    """Which graph to ingest and how its edges are split into public and private."""

    name: str
    rho: Float | None = Field(
        default=None, description="fraction of edges made private (papers: 0.05, 0.1, 0.2)"
    )
    split_seed: Int = Field(default=0, ge=0, description="seed of the simulated public/private split")
    node_split_seed: Int = Field(
        default=0, ge=0,
        description="seed of a random node split (options train / val); like split_seed, never in a manifest",
    )
    root: str | None = Field(default=None, description="data root; default $PRIVGRAPH_DATA_ROOT")
    options: dict[str, Any] = Field(default_factory=dict, description="loader-specific options")

    @field_validator("name")
    @classmethod
    def _known(cls, v: str) -> str:
        if v not in KNOWN_DATASETS:
            raise ValueError(f"unknown dataset {v!r}; known: {', '.join(KNOWN_DATASETS)}")
        return v

    @field_validator("rho")
    @classmethod
    def _rho(cls, v: float | None) -> float | None:
        if v is not None and (isinstance(v, bool) or not (0.0 <= float(v) <= 1.0)):
            raise ValueError(f"rho must be in [0, 1], got {v}")
        return v

    def load_kwargs(self) -> dict[str, Any]:
        """The keywords of :func:`privgraph.ingest.datasets.load_dataset` for this dataset (after its name)."""
        return {"root": None if self.root is None else Path(self.root), "rho": self.rho, "split_seed": self.split_seed,
                "node_split_seed": self.node_split_seed, **self.options}


class MechanismConfig(BaseModel):
    """One mechanism application: its registry name, its budget, and its own parameters.

    Parameters other than ``mechanism`` and ``epsilon`` (e.g. ``bins``, ``alpha``, ``lower``)
    are passed to the mechanism's constructor, which validates them.
    """

    model_config = ConfigDict(extra="allow", frozen=True)

    mechanism: str
    epsilon: float | None = Field(default=None, description="required by every mechanism that spends a budget")

    @field_validator("epsilon", mode="before")
    @classmethod
    def _eps(cls, v: Any) -> float | None:
        return None if v is None else finite_positive(v)

    def params(self) -> dict[str, Any]:
        """The constructor keywords: epsilon (when set: NonPriv-Part takes none) plus the
        mechanism's own parameters."""
        eps = {} if self.epsilon is None else {"epsilon": self.epsilon}
        return {**eps, **(self.model_extra or {})}


class PartitionConfig(StrictModel):
    num_parts: Int = Field(default=4, ge=1)
    method: Literal["metis", "hash", "ldg"] = Field(
        default="metis",
        description="metis: METIS over the public edges (few cut edges; one process holds the public adjacency); "
                    "ldg: one streaming pass (memory O(n)); hash: by node id (no edge read)",
    )
    layout: Literal["memory", "files"] = Field(
        default="memory",
        description="files: each partition task reads its rows from files and writes its part of the release "
                    "(privgraph.privatize.partitioned; the client ships no rows; per-node edge mechanisms only)",
    )


_DASK_ADDRESS = re.compile(r"^(?:(?:tcp|tls)://)?(?:\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9_.-]+):(\d{1,5})$")


def cleartext_remote(address: str | None) -> bool:
    """Whether a Dask scheduler ``address`` is a cleartext link to another machine: ``tcp://`` (or
    no scheme) and a host that is not loopback (``localhost``, ``127.0.0.0/8``, ``::1``; a name is
    not resolved). The link carries the tasks' seeds and the owner's staging paths: a remote
    cluster needs ``tls://`` (docs/production.md, "Running on a Dask cluster")."""
    if address is None or address.strip().startswith("tls://"):
        return False
    host = address.strip().removeprefix("tcp://").rsplit(":", 1)[0].strip("[]").lower()
    if host == "localhost" or host.endswith(".localhost"):
        return False
    try:
        return not ipaddress.ip_address(host).is_loopback
    except ValueError:  # a host name: another machine, as far as this check knows
        return True


class DaskConfig(StrictModel):
    address: str | None = Field(default=None, description="an existing scheduler (tcp://host:port or tls://host:port); else a LocalCluster")
    n_workers: Int = Field(default=2, ge=1)
    threads_per_worker: Int = Field(default=1, ge=1)

    @field_validator("address")
    @classmethod
    def _address(cls, v: str | None) -> str | None:
        """A scheduler address Dask can dial: ``[tcp://|tls://]host:port``, the port 1-65535."""
        match = None if v is None else _DASK_ADDRESS.match(v.strip())
        if v is not None and (match is None or not 1 <= int(match.group(1)) <= 65535):
            raise ValueError(f"expected tcp://host:port or tls://host:port (a port 1-65535), got {v!r}")
        return v


class ScheduleConfig(StrictModel):
    """When to run the pipeline as a scheduled production run (``privgraph serve``)."""

    cron: str = Field(description="five-field cron expression, e.g. '0 3 * * *'")
    timezone: str = "UTC"

    @field_validator("cron")
    @classmethod
    def _cron(cls, v: str) -> str:
        from cronsim import CronSim, CronSimError  # strict five-field cron parser (pinned in the lock)

        if len(v.split()) != 5:
            raise ValueError(f"cron must have five fields (minute hour day month weekday), got {v!r}")
        try:
            CronSim(v, datetime.now(timezone.utc))
        except CronSimError as exc:
            raise ValueError(f"cron {v!r} is not valid: {exc}") from None
        return v


class EmbedConfig(StrictModel):
    """The ``embed`` stage: ResNet-50 embeddings of the node images as the node features."""

    model: Literal["resnet50"] = "resnet50"
    weights: str = Field(
        description="a torchvision ResNet-50 state dict (.pth, relative to the data root or absolute), "
        "'torch_home' ($TORCH_HOME/hub/checkpoints/resnet50-0676ba61.pth) or 'random' (seeded random "
        "initialisation, for tests: recorded in the manifest)"
    )
    layer: Literal["avgpool", "layer4", "layer3"] = "avgpool"
    batch_size: Int = Field(default=32, ge=1)
    num_workers: Int = Field(default=0, ge=0, description="DataLoader worker processes decoding images")
    device: Literal["auto", "cpu", "cuda"] = "auto"
    amp: bool | None = Field(default=None, description="float16 autocast on CUDA (default: on there)")
    init: Int = Field(default=0, ge=0, description="the random initialisation's generator (weights: random only; public)")
    cache: bool = Field(default=True, description="reuse embeddings from the owner's private cache ($PRIVGRAPH_CACHE_DIR/embeddings)")


class PipelineConfig(StrictModel):
    """One pipeline: dataset, mechanisms per scope, budget caps, seed, storage, evaluation."""

    description: str = ""
    dataset: DatasetConfig
    features: MechanismConfig | None = None
    edges: MechanismConfig | None = None
    labels: MechanismConfig | None = None
    budget: dict[Literal["features", "edges", "labels"], Float] = Field(default_factory=dict)
    budget_delta: dict[Literal["features", "edges", "labels"], Float] = Field(
        default_factory=dict,
        description="the delta a capped scope may spend (an (eps, delta) mechanism's); without one a scope admits pure DP only",
    )
    partitions: PartitionConfig = PartitionConfig()
    executor: Literal["serial", "dask"] = "dask"
    dask: DaskConfig = DaskConfig()
    seed: Int | None = Field(
        default=None, ge=0, description="noise seed; stays private, never written to an artifact"
    )
    storage: str = "./artifacts"
    private_records: str = Field(
        default="./private-records",
        description="local directory for run diagnostics that no guarantee covers (e.g. EdgeRR's MCMC trace); never the artifact store",
    )
    evaluate: EvaluateConfig = EvaluateConfig()
    schedule: ScheduleConfig | None = None
    scores: ScoresConfig | None = Field(
        default=None, description="HeteroRR scores (SHAP importance, masking sensitivity) -> FeatureRR's theta"
    )
    embed: EmbedConfig | None = Field(
        default=None, description="image datasets: ResNet-50 embeddings of the node images become the features")

    @property
    def runs_at_scale(self) -> bool:
        """Whether the privatize flow takes the path on which no process holds the graph
        (``flows/privatize_at_scale.py``): a ``partitioned`` dataset in the files layout, without
        scores or embeddings (which read rows in the flow process); its evaluation is the one at
        scale (:mod:`privgraph.evaluate.scale_metrics`)."""
        return self.run_path == SCALE

    @property
    def run_path(self) -> str:
        """The path this pipeline runs on (:func:`privgraph.ingest.option_support.run_path`):
        ``memory``, ``files`` or ``scale``."""
        return run_path(self.dataset.name, self.partitions.layout,
                        whole_graph_stages=self.scores is not None or self.embed is not None)

    @model_validator(mode="after")
    def _dataset_options_on_its_path(self) -> PipelineConfig:
        """Every dataset option is honoured on this pipeline's path or refused here, before any
        data is read (THE table: :data:`privgraph.ingest.option_support.OPTION_SUPPORT`)."""
        check_options_on_path(self.run_path, self.dataset.model_fields_set, self.dataset.options)
        return self

    @model_validator(mode="after")
    def _images_are_embedded(self) -> PipelineConfig:
        images = self.dataset.name in IMAGE_DATASETS
        if images and self.embed is None:
            raise ValueError(f"embed: dataset {self.dataset.name!r} has images, not features: add an 'embed' "
                             "section (weights: a ResNet-50 state dict, torch_home, or random for tests)")
        if not images and self.embed is not None:
            raise ValueError(f"embed: dataset {self.dataset.name!r} has no images; embed applies to "
                             f"{', '.join(IMAGE_DATASETS)}")
        return self

    @field_validator("storage")
    @classmethod
    def _store_uri_without_credentials(cls, v: str) -> str:
        """The store takes credentials and endpoint from boto3's environment: a URI holding them is
        refused here, at load, naming it redacted (docs/production.md, S3)."""
        if redact_uri(v) != v:
            raise ValueError(f"{redact_uri(v)}: a store URI holding credentials (user:secret@) or a query string, "
                             "which the store never reads; remove them (boto3 takes credentials and endpoint from "
                             "its environment: AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_ENDPOINT_URL, AWS_PROFILE)")
        return v

    @field_validator("budget")
    @classmethod
    def _caps(cls, v: dict[str, Any]) -> dict[str, float]:
        for scope, cap in v.items():
            finite_positive(cap, f"budget cap for {scope}")
        return {k: float(c) for k, c in v.items()}

    @model_validator(mode="after")
    def _delta_caps(self) -> PipelineConfig:
        for scope, d in self.budget_delta.items():
            if scope not in self.budget:
                raise ValueError(f"budget_delta.{scope}: the scope has no epsilon cap in 'budget'")
            if not (0.0 < d < 1.0):
                raise ValueError(f"budget_delta.{scope} must be in (0, 1), got {d}")
        return self

    @model_validator(mode="after")
    def _sample_only_at_scale(self) -> PipelineConfig:
        k = self.evaluate.sample_parts
        if k is not None and not self.runs_at_scale:
            raise ValueError("evaluate.sample_parts: an evaluation sample is a choice of a partitioned version's parts, "
                             "for the evaluation at scale (dataset partitioned, partitions.layout files); a graph "
                             "evaluated in memory is evaluated whole: remove it")
        if k is not None and k > self.partitions.num_parts:
            raise ValueError(f"evaluate.sample_parts: {k} parts of the {self.partitions.num_parts} of "
                             "partitions.num_parts: at most that many")
        return self

    @model_validator(mode="after")
    def _something_to_do(self) -> PipelineConfig:
        if self.features is None and self.edges is None and self.labels is None:
            raise ValueError("a pipeline needs at least one of 'features', 'edges' or 'labels'")
        return self

    @model_validator(mode="after")
    def _scores_set_theta(self) -> PipelineConfig:
        if self.scores is None:
            return self
        from privgraph.mechanisms import feature_mechanisms  # lazy: the registry, with scores only

        takers = feature_mechanisms(takes_scores=True)
        if self.features is None or self.features.mechanism not in takers:
            raise ValueError(f"scores: set only with features.mechanism {' or '.join(takers)} "
                             "(theta sets its per-feature budgets)")
        if "theta" in (self.features.model_extra or {}):
            raise ValueError("scores: features.theta is computed from the scores; do not set both")
        return self


class ComparisonConfig(StrictModel):
    """A utility comparison (``privgraph compare NAME``): one scope privatized by each mechanism
    at each epsilon, ``runs`` seeded times, the same model trained on each (privgraph.evaluate.comparison)."""

    description: str = ""
    pipeline: str = Field(description="the pipeline whose dataset, partitions, executor, storage and evaluate settings are used")
    scope: Literal["features", "edges"]
    target: str = Field(description="the mechanism t-tested against the best other one")
    mechanisms: dict[str, dict[str, Any]] = Field(
        description="label -> parameters other than epsilon; 'mechanism' names the registered one when the label differs; 'use_scores: true' gives a mechanism that takes scores the scores' theta"
    )
    epsilons: list[Float] = Field(min_length=1)
    runs: Int = Field(default=3, ge=2)
    scores: ScoresConfig | None = Field(default=None, description="theta for entries with use_scores (default: the pipeline's scores)")
    seed: Int | None = Field(default=None, ge=0)
    evaluate: EvaluateConfig | None = None

    @field_validator("epsilons")
    @classmethod
    def _eps(cls, v: list[float]) -> list[float]:
        for e in v:
            if not (math.isfinite(e) and e > 0):
                raise ValueError(f"every epsilon must be finite and > 0, got {e}")
        return v

    @model_validator(mode="after")
    def _evaluated_whole(self) -> ComparisonConfig:
        if self.evaluate is not None and self.evaluate.sample_parts is not None:
            raise ValueError("evaluate.sample_parts: a comparison evaluates each release in memory, whole: remove it")
        return self

    @model_validator(mode="after")
    def _target_listed(self) -> ComparisonConfig:
        if self.target not in self.mechanisms:
            raise ValueError(f"target {self.target!r} is not among mechanisms {sorted(self.mechanisms)}")
        if self.evaluate is not None and any(a.name == "attribute" for a in self.evaluate.attacks):
            raise ValueError("evaluate.attacks: 'attribute' attacks a release, not a model; a comparison does "
                             "not run it (list it in a pipeline's evaluate)")
        if self.evaluate is not None and self.evaluate.ensemble > 1:
            raise ValueError("evaluate.ensemble: a comparison trains one model per cell (its GNN is the one "
                             "attacked); ensembles are for run and evaluate")
        return self

    def evaluate_settings(self, pipeline: PipelineConfig) -> EvaluateConfig:
        """The evaluation of every cell: the comparison's own ``evaluate``, else its pipeline's with
        the model attacks only (``attribute`` attacks a release: a pipeline's evaluation runs it) and
        one model per cell (``ensemble`` 1)."""
        if self.evaluate is not None:
            return self.evaluate
        ev = pipeline.evaluate
        return ev.model_copy(update={"attacks": [a for a in ev.attacks if a.name != "attribute"], "ensemble": 1})


class GraphSetConfig(StrictModel):
    """A multi-graph dataset for graph classification (paper 004's experiment)."""

    name: Literal["tu", "graph_families"] = Field(
        description="tu: a TUDataset in PyG's raw layout under $PRIVGRAPH_DATA_ROOT/tu (or root); graph_families: offline synthetic families")
    options: dict[str, Any] = Field(
        default_factory=dict,
        description="tu: {name: REDDIT-BINARY}; graph_families: {num_graphs, families, min_nodes, max_nodes, m_range, seed}")
    root: str | None = None
    private_fraction: Float = Field(default=1.0, gt=0, le=1, description="fraction of each graph's users that are private (1 - alpha)")
    split_seed: Int = Field(default=0, ge=0, description="seeds the (public) choice of private users; never written to a report")


class GraphComparisonConfig(StrictModel):
    """A graph-classification comparison (``privgraph compare NAME``): every graph's private edges
    privatized by each mechanism at each epsilon, GIN-0 cross-validated on each release against
    NonPriv-Full (privgraph.evaluate.graph_comparison)."""

    description: str = ""
    dataset: GraphSetConfig
    target: str
    mechanisms: dict[str, dict[str, Any] | None]
    epsilons: list[Float] = Field(min_length=1)
    folds: Int = Field(default=10, ge=2)
    epochs: Int = Field(default=100, ge=1)
    device: Literal["auto", "cpu", "cuda"] = "auto"
    executor: Literal["serial", "dask"] = "dask"
    dask: DaskConfig = DaskConfig()
    seed: Int | None = Field(default=None, ge=0)
    private_records: str = "./private-records"

    @model_validator(mode="after")
    def _target_listed(self) -> GraphComparisonConfig:
        if self.target not in self.mechanisms:
            raise ValueError(f"target {self.target!r} is not among mechanisms {sorted(self.mechanisms)}")
        for e in self.epsilons:
            if not (math.isfinite(e) and e > 0):
                raise ValueError(f"every epsilon must be finite and > 0, got {e}")
        return self


class PipelinesConfig(StrictModel):
    pipelines: dict[str, PipelineConfig]
    comparisons: dict[str, ComparisonConfig] = Field(default_factory=dict)
    graph_comparisons: dict[str, GraphComparisonConfig] = Field(
        default_factory=dict, description="graph-classification comparisons (paper 004): `privgraph compare NAME`")

    @field_validator("pipelines")
    @classmethod
    def _names(cls, v: dict[str, PipelineConfig]) -> dict[str, PipelineConfig]:
        if not v:
            raise ValueError("no pipelines defined")
        for name in v:
            if not _NAME.match(name):
                raise ValueError(
                    f"pipeline name {name!r} must be lowercase letters, digits, '-' or '_'"
                )
        return v

    @model_validator(mode="after")
    def _comparison_pipelines(self) -> PipelinesConfig:
        for name, c in self.comparisons.items():
            if not _NAME.match(name):
                raise ValueError(f"comparison name {name!r} must be lowercase letters, digits, '-' or '_'")
            if name in self.pipelines:
                raise ValueError(f"comparison {name!r} has the name of a pipeline; their artifacts would mix")
            if c.pipeline not in self.pipelines:
                raise ValueError(
                    f"comparisons.{name}.pipeline: no such pipeline {c.pipeline!r}; defined: "
                    f"{', '.join(sorted(self.pipelines))}"
                )
        for name in self.graph_comparisons:
            if not _NAME.match(name):
                raise ValueError(f"graph comparison name {name!r} must be lowercase letters, digits, '-' or '_'")
            if name in self.pipelines or name in self.comparisons:
                raise ValueError(f"graph comparison {name!r} has the name of a pipeline or comparison; their reports would mix")
        return self

    def graph_comparison(self, name: str) -> GraphComparisonConfig | None:
        """The graph-classification comparison ``name``, or ``None`` when ``name`` is not one."""
        return self.graph_comparisons.get(name)

    def comparison(self, name: str) -> ComparisonConfig:
        if name not in self.comparisons:
            defined = sorted(self.comparisons) + sorted(self.graph_comparisons)
            raise ConfigError(
                f"comparisons.{name}: no such comparison; defined: {', '.join(defined) or 'none'}"
            )
        return self.comparisons[name]

    def get(self, name: str) -> PipelineConfig:
        if name not in self.pipelines:
            raise ConfigError(
                f"pipelines.{name}: no such pipeline; defined: {', '.join(sorted(self.pipelines))}"
            )
        return self.pipelines[name]


def mechanism_entry(label: str, params: Mapping[str, Any]) -> tuple[str, dict[str, Any], bool]:
    """``(registry name, constructor params, use_scores)`` of a comparison entry.

    An entry is ``label: {params}``; ``mechanism:`` names the registered mechanism when the label
    is not its registry name (e.g. ``heterorr: {mechanism: feature_rr, use_scores: true}`` next to
    ``homogeneous_rr: {mechanism: feature_rr}``); ``use_scores: true`` passes the scores' theta.
    """
    p = dict(params or {})
    name = p.pop("mechanism", label)
    use_scores = p.pop("use_scores", False)
    if not isinstance(name, str):
        raise ValueError(f"mechanisms.{label}.mechanism must be a registry name, got {name!r}")
    if not isinstance(use_scores, bool):
        raise ValueError(f"mechanisms.{label}.use_scores must be true or false, got {use_scores!r}")
    if "epsilon" in p:
        raise ValueError(f"mechanisms.{label}: do not set epsilon; it takes each value of epsilons")
    return name, p, use_scores


