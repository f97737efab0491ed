"""Utility comparisons: accuracy of a GNN trained on graphs privatized by each mechanism.

:func:`run_comparison` privatizes ONE scope of a graph (features or edges) with every listed
mechanism at every budget, several seeded times, trains the same model on each private graph and on
the clean graph (the upper bound), and :func:`summarize` turns the accuracies into a table:
mean +- sample standard deviation per (mechanism, epsilon), and per epsilon a two-tailed paired
t-test (``scipy.stats.ttest_rel``) of the target mechanism (e.g. FeatureRR) against the best other
mechanism. Every cell also trains the feature-only floor (the same model over no edges: once per
run for an edges comparison, whose features are untouched) and reports the GNN against it (paired
t-test) and the model chosen per run by validation accuracy.

Pairing: run ``i`` of every (mechanism, epsilon) uses the same training seed as run ``i`` of the
clean graph, so runs differ in the privatization noise and the data only. Only the compared scope
is privatized; the other parts of the graph stay as in the clean graph.

The accuracies are computed on the raw graph's labels and the degree curves are the exact private
degrees: a comparison is a PRIVATE evaluation for the data owner, covered by no guarantee. It is
stored as a private report (:func:`~privgraph.storage.private_record.write_private_report`), never
as a shareable version. The result, its summary, table, plots and stored objects are
:mod:`privgraph.evaluate.comparison_report`'s (imported here too).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from privgraph.evaluate.attacks.suite import AttackProbe
from privgraph.evaluate.comparison_report import (
    CLEAN,
    ComparisonResult,
)
from privgraph.config.pipeline import mechanism_entry
from privgraph.evaluate.correct_and_smooth import release_correct_and_smooth
from privgraph.evaluate.label_propagation import release_propagation
from privgraph.evaluate.public_reference import per_run_reference, public_only_reference
from privgraph.evaluate.release_encoder import encoder_on
from privgraph.graph import GraphData, in_sorted
from privgraph.mechanisms import build_at_epsilon, takes_epsilon
from privgraph.guarantee import Scope
from privgraph.parts.executor import Executor
from privgraph.parts.partition import Partitioning
from privgraph.privatize.release import privatize_graph
from privgraph.evaluate.progress import ProgressCallback, ProgressTracker
from privgraph.seeding import partition_seeds, stage_seed
from privgraph.evaluate.training import choose_device, DENOISING_OPTIONS, fit_node_classifier, output_classes
from privgraph.evaluate.selection import select_by_validation
from privgraph.evaluate.candidates import CANDIDATES, in_tie_order, version_kwargs

__all__ = [
    "ComparisonResult",
    "run_comparison",
    "mechanism_entry",
    "degree_curve",
]


def _check_inputs(
    scope: str, mechanisms: Mapping[str, Mapping[str, Any]], epsilons: Sequence[float], runs: int, target: str,
    theta: np.ndarray | None = None,
) -> Scope:
    try:
        sc = Scope(scope)
    except ValueError:
        raise ValueError(f"scope must be 'features' or 'edges', got {scope!r}") from None
    if sc not in (Scope.FEATURES, Scope.EDGES):
        raise ValueError(f"scope must be 'features' or 'edges', got {scope!r}")
    if not mechanisms:
        raise ValueError("mechanisms: list at least one mechanism to compare")
    if target not in mechanisms:
        raise ValueError(f"target {target!r} is not among the compared mechanisms {sorted(mechanisms)}")
    if CLEAN in mechanisms:
        raise ValueError(f"{CLEAN!r} is reserved for the clean graph")
    if not epsilons or any(not (isinstance(e, (int, float)) and math.isfinite(e) and e > 0) for e in epsilons):
        raise ValueError(f"epsilons must be a non-empty list of finite numbers > 0, got {list(epsilons)}")
    if isinstance(runs, bool) or not isinstance(runs, int) or runs < 1:
        raise ValueError(f"runs must be an int >= 1, got {runs!r}")
    for label, params in mechanisms.items():
        name, p, use_scores = mechanism_entry(label, params)
        if use_scores and theta is None:
            raise ValueError(f"mechanisms.{label}: use_scores needs scores (theta); none were computed")
        m = build_at_epsilon(name, {**p, "theta": theta} if use_scores else p, float(epsilons[0]))  # validates early
        if m.scope is not sc:
            raise ValueError(f"mechanisms.{label}: {name!r} protects {m.scope.value}, not {sc.value}")
    return sc


def _train(g: GraphData, seed: Any, probe: AttackProbe | None, refs: dict[str, dict[str, float]] | None = None,
           *, cell: bool = True, **kw: Any) -> dict[str, Any]:
    """One training; with attacks (``probe``), the model is attacked too (``attack_auc``). A
    ``cell`` also gets its reference models (``refs``: each one's ``{"test_acc", "val_acc"}`` on
    the same seed, trained here when None): the feature-only floor and, where the version has
    public edges beside its release, the same model over the public edges alone
    (``public_edges_acc``); and the accuracy of the one of them and the GNN with the highest
    validation accuracy (``selected_acc``, ``selected``; as in evaluate_utility); with the
    public-only reference among the references, its accuracy (``public_only_acc``)."""
    model = fit_node_classifier(g, seed=seed, **version_kwargs(g, kw))
    gnn = model.result
    rec: dict[str, Any] = {"test_acc": float(gnn["test_acc"])}
    if cell:
        refs = _references(g, seed, kw) if refs is None else refs
        post = _post_processed(g, refs, model, kw)
        for key, r in in_tie_order({**refs, **post}):  # every candidate but the GNN: {name}_acc
            rec[f"{key}_acc"] = float(r["test_acc"])
        name, chosen = select_by_validation(in_tie_order({**refs, **post, "gnn": gnn}))
        rec["selected_acc"], rec["selected"] = float(chosen["test_acc"]), name
    if probe is not None:
        rec["attack_auc"] = probe.aucs(model)
    return rec


def _clean_baseline(
    graph: GraphData, train_seeds: Sequence[np.random.SeedSequence], probe: AttackProbe | None,
    clean_kwargs: dict[str, Any], checkpoint: Any | None, progress: ProgressCallback | None,
) -> list[dict[str, Any]]:
    """The clean graph's runs (read back from ``checkpoint`` when there, put there as they finish)."""
    records = []
    baseline = ProgressTracker("clean baseline", len(train_seeds), progress)
    for i, ts in enumerate(train_seeds):
        done = None if checkpoint is None else checkpoint.get(f"{CLEAN}/{i}")
        if done is not None:
            records.append(done["record"])
            baseline.advance(detail=f"clean graph run {i}: from the checkpoint", timed=False)
            continue
        records.append({"mechanism": CLEAN, "epsilon": None, "run": i, **_train(graph, ts, probe, cell=False, **clean_kwargs)})
        if checkpoint is not None:
            checkpoint.put(f"{CLEAN}/{i}", {"record": records[-1]})
        baseline.advance(detail=f"clean graph run {i}")
    return records


def _with_declared_public_edges(release: GraphData, graph: GraphData) -> GraphData:
    """A release of every edge (privHRG) with the declared public edges beside it: they are public
    all the same, so its cells get the same public-edges reference as every other edge cell."""
    n = np.int64(graph.num_nodes)
    sample = release.edges_private
    public = np.sort(graph.edges_public.min(0) * n + graph.edges_public.max(0))
    keep = ~in_sorted(sample.min(0) * n + sample.max(0), public)
    return release.replace(edges_public=graph.edges_public, edges_private=sample[:, keep])


def run_comparison(
    graph: GraphData,
    *,
    scope: str,
    mechanisms: Mapping[str, Mapping[str, Any]],
    epsilons: Sequence[float],
    runs: int,
    target: str,
    partitioning: Partitioning,
    root_seed: np.random.SeedSequence,
    executor: Executor | None = None,
    train_kwargs: Mapping[str, Any] | None = None,
    progress: ProgressCallback | None = None,
    theta: np.ndarray | None = None,
    attacks: Sequence[Any] = (),
    checkpoint: Any | None = None,
) -> ComparisonResult:
    """Privatize ``scope`` with each mechanism at each epsilon ``runs`` times and train on each.

    Args:
        graph (GraphData): the clean graph (with its split).
        scope (str): ``"features"`` or ``"edges"``: the one scope that is privatized.
        mechanisms (Mapping): label -> parameters other than ``epsilon`` (see
            :func:`mechanism_entry`: ``mechanism`` names the registered mechanism when the label
            is not its name; ``use_scores`` passes ``theta``).
        epsilons (Sequence[float]): the budgets, each > 0.
        runs (int): seeded runs per (mechanism, epsilon) and of the clean graph.
        target (str): the mechanism tested against the best other one.
        partitioning (Partitioning): node partitions the mechanisms run over.
        root_seed (SeedSequence): privatization run ``i`` of mechanism ``m`` at ``eps`` is seeded
            from ``stage_seed(root, f"{m}/{eps}")``'s child ``i``; training run ``i`` from child
            ``i`` of ``stage_seed(root, "train")``, shared by every mechanism (paired runs).
        executor (Executor, optional): where the per-partition work runs (default: serially).
        train_kwargs (Mapping, optional): passed to :func:`~privgraph.evaluate.training.fit_node_classifier`.
        progress (ProgressCallback, optional): receives the ProgressEvents (k/N, ETA, never an
            accuracy) of ``clean baseline`` (the ``runs`` trainings on the clean graph), ``comparison
            cells`` (one per mechanism x epsilon x run) and, inside each computed cell, ``comparison
            cell`` (its privatization, then its training: a cell can take minutes, e.g. EdgeRR's
            MCMC).
        theta (np.ndarray, optional): HeteroRR's feature scores, for entries with ``use_scores``.
        attacks (Sequence): ``evaluate.attacks`` entries; each trained model (clean and every
            cell) is attacked on the same candidate pairs (:class:`~privgraph.evaluate.attacks.suite.AttackProbe`)
            and its ROC-AUC recorded as ``attack_auc[name]``.
        checkpoint (CellCheckpoint, optional): each finished run (clean or cell) is put there as
            it finishes, and a run already there is read back instead of recomputed
            (:class:`~privgraph.storage.private_record.CellCheckpoint`: a cut-off comparison
            resumes); the caller keys it by everything the runs depend on.
    """
    sc = _check_inputs(scope, mechanisms, epsilons, runs, target, theta)
    probe = AttackProbe(graph, attacks, stage_seed(root_seed, "attack-pairs")) if attacks else None
    kwargs = dict(train_kwargs or {})
    train_seeds = partition_seeds(stage_seed(root_seed, "train"), runs)
    true_degree = _degrees(graph) if sc is Scope.EDGES else None
    # the denoising options (LPGNN's KProp, Drop) apply to private graphs only, as in evaluate_utility
    clean_kwargs = {k: v for k, v in kwargs.items() if k not in DENOISING_OPTIONS}
    records = _clean_baseline(graph, train_seeds, probe, clean_kwargs, checkpoint, progress)
    cells = _Cells(graph=graph, base=_features_base(graph, sc), scope=sc, partitioning=partitioning,
                   executor=executor, probe=probe, kwargs=kwargs, checkpoint=checkpoint, progress=progress,
                   true_degree=true_degree, records=records,
                   tracker=ProgressTracker("comparison cells", len(mechanisms) * len(epsilons) * runs, progress))
    for name, entry in mechanisms.items():
        registry, params, use_scores = mechanism_entry(name, entry)
        if use_scores:
            params = {**params, "theta": theta}
        cells.run_mechanism(name, registry, params, epsilons, root_seed, train_seeds)
    return ComparisonResult(
        scope=sc.value, target=target, epsilons=tuple(float(e) for e in epsilons),
        mechanisms=tuple(mechanisms), runs=runs, records=tuple(records), degree_curves=cells.curves,
    )


def _features_base(graph: GraphData, sc: Scope) -> GraphData:
    """The graph the mechanisms privatize: a features comparison keeps the private edges as they
    are (a private report, never a version), so privatize_graph gets them as public edges (it
    refuses private edges without an edge mechanism)."""
    if sc is Scope.FEATURES and graph.edges_private.shape[1]:
        return graph.replace(edges_public=graph.edges("all"), edges_private=np.zeros((2, 0), np.int64))
    return graph


@dataclasses.dataclass
class _Cells:
    """The cells of one comparison: what they share, and the records and degree curves they add."""

    graph: GraphData
    base: GraphData
    scope: Scope
    partitioning: Partitioning
    executor: Executor | None
    probe: AttackProbe | None
    kwargs: dict[str, Any]
    checkpoint: Any | None
    progress: ProgressCallback | None
    true_degree: np.ndarray | None
    records: list[dict[str, Any]]
    tracker: ProgressTracker
    curves: dict[str, dict[str, list[float]]] = dataclasses.field(default_factory=dict)
    #: run -> reference model -> accuracies (an edges comparison trains them once per run)
    edge_refs: dict[int, dict[str, dict[str, float]]] = dataclasses.field(default_factory=dict)

    def reuse(self, name: str, eps: float, eps0: float, runs: int) -> None:
        """A mechanism that spends no budget: the runs at the first epsilon serve ``eps`` too."""
        first = [r for r in self.records if r["mechanism"] == name and r["epsilon"] == eps0]
        self.records += [{**r, "epsilon": eps} for r in first]
        if f"{name}/{eps0:g}" in self.curves:
            self.curves[f"{name}/{eps:g}"] = self.curves[f"{name}/{eps0:g}"]
        self.tracker.advance(runs, detail=f"{name} eps={eps:g}: no budget, runs of eps={eps0:g} reused", timed=False)

    def run_mechanism(self, name: str, registry: Any, params: dict[str, Any], epsilons: Sequence[float],
                      root_seed: np.random.SeedSequence, train_seeds: list[np.random.SeedSequence]) -> None:
        """Every run of mechanism ``name`` (``registry`` built with ``params``) at each of ``epsilons``:
        run ``i`` at ``eps`` privatized with child ``i`` of ``stage_seed(root_seed, f"{name}/{eps!r}")``
        and trained with ``train_seeds[i]``; a mechanism that spends no budget runs at the first
        epsilon only, its runs reused for the others (:meth:`reuse`)."""
        runs, eps0 = len(train_seeds), float(epsilons[0])
        constant = not takes_epsilon(registry)  # spends no budget: one set of runs serves every eps
        for eps in epsilons:
            eps = float(eps)
            if constant and eps != eps0:
                self.reuse(name, eps, eps0, runs)
                continue
            mech = build_at_epsilon(registry, params, eps)
            priv_seeds = partition_seeds(stage_seed(root_seed, f"{name}/{eps!r}"), runs)
            for i, (ps, ts) in enumerate(zip(priv_seeds, train_seeds, strict=True)):
                self.run(name, eps, mech, i, ps, ts)

    def run(self, name: str, eps: float, mech: Any, i: int, ps: np.random.SeedSequence,
            ts: np.random.SeedSequence) -> None:
        """Run ``i`` of mechanism ``name`` at ``eps``: privatized with ``ps``, trained with ``ts``
        (read back from the checkpoint when there, put there when done)."""
        cell = f"{name}/{eps!r}/{i}"
        done = None if self.checkpoint is None else self.checkpoint.get(cell)
        if done is not None:  # finished by an earlier, cut-off run of the same comparison
            self.records.append(done["record"])
            if "curve" in done:
                self.curves[f"{name}/{eps:g}"] = done["curve"]
            self.tracker.advance(detail=f"{name} eps={eps:g} run {i}: from the checkpoint", timed=False)
            return
        sc, graph = self.scope, self.graph
        mech_kw = {"features": mech if sc is Scope.FEATURES else None, "edges": mech if sc is Scope.EDGES else None}
        steps = ProgressTracker("comparison cell", 2, self.progress)
        result = privatize_graph(self.base, partitioning=self.partitioning, root_seed=ps, executor=self.executor,
                                 encoder=encoder_on(self.kwargs.get("device", "auto")), **mech_kw)
        steps.advance(detail=f"{name} eps={eps:g} run {i}: privatized")
        if self.true_degree is not None and i == 0:
            self.curves[f"{name}/{eps:g}"] = degree_curve(self.true_degree, _degrees(result.graph))
        # an edge mechanism leaves the features, labels and public edges as they are: the
        # reference models of run i are the same for every such cell (trained once). One
        # that privatizes the public edges too (privHRG) leaves them out of its release;
        # they are declared public all the same, so its cells get the same references
        refs = None
        view = _with_declared_public_edges(result.graph, graph) if (
            sc is Scope.EDGES and mech.all_edges_private) else result.graph
        if sc is Scope.EDGES and np.array_equal(view.edges_public, graph.edges_public):
            refs = _references(view, ts, {**self.kwargs, "eval_y": graph.y}, self.edge_refs.setdefault(i, {}),
                               public_features=True)
        self.records.append({"mechanism": name, "epsilon": eps, "run": i,
                             **_train(result.graph, ts, self.probe, refs, eval_y=graph.y, **self.kwargs)})
        steps.advance(detail=f"{name} eps={eps:g} run {i}: trained")
        if self.checkpoint is not None:
            done = {"record": self.records[-1]}
            if self.true_degree is not None and i == 0:
                done["curve"] = self.curves[f"{name}/{eps:g}"]
            self.checkpoint.put(cell, done)
        self.tracker.advance(detail=f"{name} eps={eps:g} run {i}")


def _post_processed(g: GraphData, refs: Mapping[str, Any], model: Any, kw: Mapping[str, Any]) -> dict[str, Any]:
    """The post-processing candidates of a cell, as in evaluate_utility: ``release_propagation``
    (label propagation over the public and released edges) and ``correct_and_smooth`` (the
    references' and the GNN's predictions corrected and smoothed over them), each with
    ``test_acc`` (on ``kw["eval_y"]``) and ``val_acc``; absent where not defined."""
    classes = output_classes(g, kw.get("label_classes"))
    raw_y = kw.get("eval_y")
    device = choose_device(kw.get("device", "auto"))  # the training's: a GPU propagates a large release in seconds
    out = {}
    lp = release_propagation(g, classes, raw_y=raw_y, device=device)
    if lp is not None:
        out["release_propagation"] = lp
    bases = {**refs.get("bases", {}), "gnn": model.posteriors}
    cs = release_correct_and_smooth(g, bases, classes, raw_y=raw_y, device=device)
    if cs is not None:
        out["correct_and_smooth"] = cs
    return out


def _references(
    version: GraphData, seed: Any, kwargs: Mapping[str, Any], cache: dict[str, dict[str, float]] | None = None,
    *, public_features: bool = False,
) -> dict[str, dict[str, float]]:
    """The reference models' test and validation accuracy on ``version``: ``public_only`` (the
    public-only reference, :func:`privgraph.evaluate.public_reference.public_only_reference`: label
    propagation of the training labels, which a comparison does not privatize, over the version's
    public edges; for a features comparison every edge), ``feature_only`` (the same model over no
    edges) and, where it is a candidate, ``public_edges`` (over the version's public edges alone):
    every trained candidate but the GNN (:data:`~privgraph.evaluate.candidates.CANDIDATES`), in the order :func:`select_by_validation` breaks ties by; under ``bases`` the trained models'
    class probabilities (Correct and Smooth's base predictions). ``cache`` holds models already
    trained on the same features, labels, public edges and seed. ``public_features`` (an edges
    comparison, which leaves the features as they are): the floor is public-only too, and
    ``public_only`` is whichever of it and label propagation validates better
    (:func:`~privgraph.evaluate.public_reference.per_run_reference`)."""
    cache = {} if cache is None else cache
    out = {}
    if "public_only" not in cache:
        classes = output_classes(version, kwargs.get("label_classes"))
        r = public_only_reference(version, np.ones(version.num_nodes, bool), classes, raw_y=kwargs.get("eval_y"))
        if r is not None:
            cache["public_only"] = {"test_acc": float(r["test_acc"]), "val_acc": float(r["val_acc"])}
    if "public_only" in cache:
        out["public_only"] = cache["public_only"]
    bases = cache.setdefault("bases", {})
    for name, kw in ((c.name, c.training(version, dict(kwargs))) for c in CANDIDATES if c.name != "gnn"):
        if kw is not None:
            if name not in cache:
                trained = fit_node_classifier(version, seed=seed, **kw)
                r = trained.result
                cache[name] = {"test_acc": float(r["test_acc"]), "val_acc": float(r["val_acc"])}
                bases[name] = trained.posteriors
            out[name] = cache[name]
    if "public_only" in out:
        out["public_only"] = per_run_reference(out["public_only"], [out["feature_only"]], public_features=public_features,
                                               all_train_public=True)[0]
    out["bases"] = bases
    return out


def _degrees(graph: GraphData) -> np.ndarray:
    """Private degrees: over the private edges (original) or their release (privatized graph)."""
    return np.bincount(graph.edges_private.ravel(), minlength=graph.num_nodes)


def degree_curve(true_degree: np.ndarray, noisy_degree: np.ndarray) -> dict[str, list[float]]:
    """Mean released degree per original degree (nodes grouped by their original degree):
    the data of a degree-preservation plot (paper 004, Fig. 7). ``O(n)``."""
    true_degree = np.asarray(true_degree, dtype=np.int64)
    noisy_degree = np.asarray(noisy_degree, dtype=np.float64)
    counts = np.bincount(true_degree)
    sums = np.bincount(true_degree, weights=noisy_degree)
    present = np.flatnonzero(counts)
    return {
        "degree": present.astype(float).tolist(),
        "noisy_mean": (sums[present] / counts[present]).tolist(),
        "nodes": counts[present].astype(float).tolist(),
    }


