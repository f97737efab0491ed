"""The candidates of an evaluation, by registry: the models whose accuracy a version reports and
among which each run chooses by validation accuracy.

A candidate is one class (:class:`Candidate`) registered with :func:`register_candidate`: its
``name`` (what ``selected.models`` says), the ``key`` of its summary in the metrics, its rows in
the reports, what it reads (its docstring) and how it is computed, by one of three hooks:

- :meth:`Candidate.training`: the arguments of :func:`~privgraph.evaluate.training.fit_ensemble`
  over the version, trained in every run (None: no candidate for this version);
  :meth:`Candidate.scale_source` is what the evaluation at scale trains it over;
- :meth:`Candidate.per_run`: post-processing in every run, of the runs' trained models;
- :meth:`Candidate.after_runs`: once after the runs, one result per run.

The registry's order is the order of ties (the simpler model first) and of every report:
:func:`~privgraph.evaluate.selection.utility_summary`, the in-memory evaluation
(:func:`~privgraph.evaluate.utility.evaluate_utility`), the evaluation at scale
(:mod:`privgraph.evaluate.scale_metrics`), a comparison (:mod:`privgraph.evaluate.comparison`) and the
reports (:mod:`privgraph.publish.run_report`) iterate it. Every candidate reads the version and the
declared public data only: post-processing of the release. Nothing here imports torch (the flow
process at scale summarises results without it); the hooks import what they compute with.

>>> [c.name for c in CANDIDATES]
['public_only', 'feature_only', 'public_edges', 'release_propagation', 'gnn', 'correct_and_smooth']
>>> feature_only_kwargs({"epochs": 30, "kprop_features": 2})
{'epochs': 30, 'edges': 'none'}
>>> [name for name, _ in in_tie_order({"gnn": {"val_acc": 0.8}, "feature_only": {"val_acc": 0.8}, "bases": {}})]
['feature_only', 'gnn']
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

import numpy as np

if TYPE_CHECKING:
    from privgraph.evaluate.minibatch_source import ClusterSource
    from privgraph.graph import GraphData

__all__ = ["CANDIDATES", "PAIRED_TESTS", "Candidate", "EvaluationContext", "PairedTest", "feature_only_kwargs",
           "in_tie_order", "public_edges_kwargs", "register_candidate", "version_kwargs"]


@dataclasses.dataclass(frozen=True)
class EvaluationContext:
    """What the candidates of one evaluation read beside the trainings: the ``version``, its output
    ``classes``, the number of ``runs``, the owner's labels ``raw_y`` (None: the shareable part only), the ``device``,
    ``public_train`` (the training nodes whose label is public; None: no public-only candidates)
    and whether the features are public (``public_features``)."""

    version: GraphData
    classes: int
    runs: int
    raw_y: np.ndarray | None = None
    device: Any = None
    public_train: np.ndarray | None = None
    public_features: bool = False


class Candidate:
    """One candidate of the evaluation (the module docstring). A subclass sets ``name``, ``label``
    (its row in the shareable report), ``raw_label`` (in the owner's private report) and, for a
    trained one, ``detail`` (its progress label), and implements one hook; ``key`` is its summary's
    key in the metrics (default: ``name``)."""

    name: ClassVar[str]
    key: ClassVar[str]
    label: ClassVar[str]
    raw_label: ClassVar[str]
    detail: ClassVar[str] = ""
    #: a candidate without a validation accuracy in its first run is no candidate (not reported)
    needs_validation: ClassVar[bool] = False

    def training(self, version: GraphData, train_kwargs: dict[str, Any]) -> dict[str, Any] | None:
        """:func:`~privgraph.evaluate.training.fit_ensemble`'s arguments of this candidate over
        ``version`` (``train_kwargs``: the evaluation's), or None: not trained."""
        return None

    def scale_source(self, source: ClusterSource, features: Callable[[], ClusterSource]) -> ClusterSource | None:
        """What the evaluation at scale trains this candidate over (``source``: the version's
        parts; ``features()``: the same with the configured KProp on the features, propagated
        on the first call), or None: no candidate at scale."""
        return None

    def per_run(self, ctx: EvaluationContext, bases: Mapping[str, np.ndarray]) -> dict[str, Any] | None:
        """This run's result from its trained models' class probabilities ``bases`` (by name, in
        tie order), or None."""
        return None

    def after_runs(self, ctx: EvaluationContext, results: Mapping[str, Sequence[dict[str, Any]]]) -> list[dict[str, Any]] | None:
        """One result per run, once the runs' ``results`` (by name) are in, or None."""
        return None

    def details(self, runs: Sequence[dict[str, Any]]) -> dict[str, Any]:
        """What its summary reports beside the accuracies (its per-run choices, its method)."""
        return {}


#: the candidates, in tie order (the simpler model first): :func:`register_candidate`
CANDIDATES: list[Candidate] = []

_C = TypeVar("_C", bound=type[Candidate])


def register_candidate(cls: _C | None = None, *, before: str | None = None) -> Any:
    """A class decorator: an instance of ``cls`` joins :data:`CANDIDATES`, last or ``before`` the
    candidate of that name (its place in the order of ties and reports)."""
    def add(c: _C) -> _C:
        if not hasattr(c, "key"):
            c.key = c.name
        if any(x.name == c.name for x in CANDIDATES):
            raise ValueError(f"register_candidate: {c.name!r} is already a candidate")
        at = len(CANDIDATES) if before is None else [x.name for x in CANDIDATES].index(before)
        CANDIDATES.insert(at, c())
        return c
    return add if cls is None else add(cls)


def in_tie_order(results: Mapping[str, dict[str, Any]]) -> list[tuple[str, dict[str, Any]]]:
    """``(name, result)`` of each candidate in ``results`` (other keys ignored), in tie order: the
    argument of :func:`~privgraph.evaluate.selection.select_by_validation`."""
    return [(c.name, results[c.name]) for c in CANDIDATES if c.name in results]


@dataclasses.dataclass(frozen=True)
class PairedTest:
    """A paired test the summary reports: ``key`` compares the per-run accuracies of ``a`` against
    ``b`` (a candidate's name, or ``selected``), shown as ``label``."""

    key: str
    a: str
    b: str
    label: str


#: the paired tests of an evaluation's metrics, in the order shown (where both sides are reported)
PAIRED_TESTS = (
    PairedTest("value_of_release", "selected", "public_only", "value of the release (chosen model - public data alone)"),
    PairedTest("gnn_vs_feature_only", "gnn", "feature_only", "GNN - floor"),
)


def version_kwargs(version: GraphData, train_kwargs: dict[str, Any]) -> dict[str, Any]:
    """The training arguments of a version's GNN: ``train_kwargs`` as they are, except for a GAP
    version (``version.aggregates``), whose GNN is GAP's classification module (model ``"gap"``)
    over the aggregates with the floor's other settings (no edges, KProp, ``aggr`` or
    ``feature_dim``)."""
    if version.aggregates is None:
        return dict(train_kwargs)
    out = {k: v for k, v in feature_only_kwargs(train_kwargs).items() if k not in ("aggr", "feature_dim")}
    return {**out, "model": "gap"}


def public_edges_kwargs(version: GraphData, train_kwargs: dict[str, Any]) -> dict[str, Any] | None:
    """The training arguments of the public-edges candidate (the same model over the version's
    public edges only: what its released private edges add), or None where it is no candidate:
    the version has no public edges, or nothing released from the private ones (edges or GAP's
    aggregates), or the training does not read all edges anyway."""
    released_private = version.edges_private.shape[1] or version.aggregates is not None
    if train_kwargs.get("edges", "all") == "all" and version.edges_public.shape[1] and released_private:
        return {**train_kwargs, "edges": "public"}
    return None


def feature_only_kwargs(train_kwargs: dict[str, Any]) -> dict[str, Any]:
    """The training arguments of the feature-only floor: the same model, epochs and seeds over
    no edges (``edges="none"``), without KProp (which propagates over edges); Drop's stopping
    rule, which reads no edge, is kept."""
    out = {k: v for k, v in train_kwargs.items()
           if k not in ("kprop_features", "kprop_labels", "kprop_search", "kprop_search_labels", "edges")}
    return {**out, "edges": "none"}


@register_candidate
class PublicOnly(Candidate):
    """The public-only reference: label propagation of the public training labels over the public
    edges, or the floor where it reads public data alone
    (:mod:`privgraph.evaluate.public_reference`); reads no release."""

    name = "public_only"
    label = ("public data alone: label propagation of the public labels over the public edges "
             "(with public features: or the floor, by validation)")
    raw_label = "public data alone (label propagation), raw test labels"
    needs_validation = True

    def after_runs(self, ctx: EvaluationContext, results: Mapping[str, Sequence[dict[str, Any]]]) -> list[dict[str, Any]] | None:
        if ctx.public_train is None:
            return None
        from privgraph.evaluate.public_reference import per_run_reference, public_only_reference

        v = ctx.version
        return per_run_reference(public_only_reference(v, ctx.public_train, ctx.classes, raw_y=ctx.raw_y),
                                 list(results["feature_only"]), public_features=ctx.public_features,
                                 all_train_public=bool(ctx.public_train[v.train_mask].all()))

    def details(self, runs: Sequence[dict[str, Any]]) -> dict[str, Any]:
        methods = sorted({r["method"] for r in runs})
        return {"method": methods[0] if len(methods) == 1 else "; or ".join(methods)}


@register_candidate
class FeatureOnly(Candidate):
    """The feature-only floor: the GNN over the version's features and labels, no edge."""

    name = "feature_only"
    label = "private, no edges (feature-only floor)"
    raw_label = "the version without edges (floor), raw test labels"
    detail = "private graph without edges (feature-only floor)"

    def training(self, version: GraphData, train_kwargs: dict[str, Any]) -> dict[str, Any] | None:
        return feature_only_kwargs(train_kwargs)

    def scale_source(self, source: ClusterSource, features: Callable[[], ClusterSource]) -> ClusterSource | None:
        from privgraph.evaluate.minibatch_source import EdgelessSource

        return EdgelessSource(source)


@register_candidate
class PublicEdges(Candidate):
    """The GNN over the version's public edges alone (where it has released private ones)."""

    name = "public_edges"
    label = "private, public edges only"
    raw_label = "the version's public edges only, raw test labels"
    detail = "private graph, public edges only"

    def training(self, version: GraphData, train_kwargs: dict[str, Any]) -> dict[str, Any] | None:
        return public_edges_kwargs(version, train_kwargs)


@register_candidate
class ReleasePropagation(Candidate):
    """Label propagation of the version's training labels over its public and released edges
    (:func:`~privgraph.evaluate.label_propagation.release_propagation`), the same in every run."""

    name = "release_propagation"
    label = "label propagation over the public and released edges"
    raw_label = "label propagation over the release, raw test labels"

    def after_runs(self, ctx: EvaluationContext, results: Mapping[str, Sequence[dict[str, Any]]]) -> list[dict[str, Any]] | None:
        if ctx.public_train is None:
            return None
        from privgraph.evaluate.label_propagation import release_propagation

        r = release_propagation(ctx.version, ctx.classes, raw_y=ctx.raw_y, device=ctx.device)
        return None if r is None else [r] * ctx.runs

    def details(self, runs: Sequence[dict[str, Any]]) -> dict[str, Any]:
        return {"release_weight": runs[0]["release_weight"]}


@register_candidate
class GNN(Candidate):
    """The configured GNN over the version (a GAP version: GAP's module over its aggregates)."""

    name = "gnn"
    key = "private"
    label = "private (GNN)"
    raw_label = "trained on the version, raw test labels"
    detail = "private graph"

    def training(self, version: GraphData, train_kwargs: dict[str, Any]) -> dict[str, Any] | None:
        return version_kwargs(version, train_kwargs)

    def scale_source(self, source: ClusterSource, features: Callable[[], ClusterSource]) -> ClusterSource | None:
        return features()

    def details(self, runs: Sequence[dict[str, Any]]) -> dict[str, Any]:
        # LPGNN's search: the [K_x, K_y] chosen per run on the version's own labels
        return {"kprop": [r["kprop"] for r in runs]} if "kprop" in runs[0] else {}


@register_candidate
class CorrectAndSmooth(Candidate):
    """Correct and Smooth of the run's trained models over the public and released edges
    (:func:`~privgraph.evaluate.correct_and_smooth.release_correct_and_smooth`)."""

    name = "correct_and_smooth"
    label = "Correct and Smooth of the models above over the public and released edges (or class counts)"
    raw_label = "Correct and Smooth over the release, raw test labels"

    def per_run(self, ctx: EvaluationContext, bases: Mapping[str, np.ndarray]) -> dict[str, Any] | None:
        from privgraph.evaluate.correct_and_smooth import release_correct_and_smooth

        return release_correct_and_smooth(ctx.version, bases, ctx.classes, raw_y=ctx.raw_y, device=ctx.device)

    def details(self, runs: Sequence[dict[str, Any]]) -> dict[str, Any]:
        return {k: [r[k] for r in runs] for k in ("base", "alpha", "release_weight")}
