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
as a shareable version.
"""

from __future__ import annotations

import dataclasses
import io
import math
import textwrap
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from privgraph.attacks.suite import AttackProbe
from privgraph.config import mechanism_entry
from privgraph.graph import GraphData, in_sorted
from privgraph.mechanisms import build_at_epsilon, takes_epsilon
from privgraph.guarantee import Scope
from privgraph.parallel import Executor
from privgraph.partition import Partitioning
from privgraph.privatize import privatize_graph
from privgraph.progress import ProgressCallback, ProgressTracker
from privgraph.seeding import partition_seeds, stage_seed
from privgraph.training import choose_device, DENOISING_OPTIONS, fit_node_classifier, output_classes
from privgraph.utility import feature_only_kwargs, paired_test, public_edges_kwargs, select_by_validation, version_kwargs

__all__ = [
    "ComparisonResult",
    "run_comparison",
    "summarize",
    "comparison_markdown",
    "mechanism_entry",
    "utility_plot_png",
    "degree_curve",
    "degree_plot_png",
]

CLEAN = "clean"


@dataclasses.dataclass(frozen=True)
class ComparisonResult:
    """Per-run accuracies: ``records`` rows ``{mechanism, epsilon, run, test_acc}`` (the clean
    graph's rows have ``mechanism = "clean"`` and ``epsilon = None``)."""

    scope: str
    target: str
    epsilons: tuple[float, ...]
    mechanisms: tuple[str, ...]
    runs: int
    records: tuple[dict[str, Any], ...]
    #: scope "edges" only: per "mechanism/epsilon", run 0's mean released private degree per
    #: original private degree (``{"degree": [...], "noisy_mean": [...], "nodes": [...]}``)
    degree_curves: dict[str, dict[str, list[float]]] = dataclasses.field(default_factory=dict)

    def accuracies(self, mechanism: str, epsilon: float | None, key: str = "test_acc") -> np.ndarray:
        """Per-run ``key`` of a cell, in run order: ``test_acc`` (the GNN), ``feature_only_acc``
        (the floor: the same model over no edges), ``public_edges_acc`` (over the public edges
        alone, where a candidate), ``public_only_acc`` (the public data alone),
        ``release_propagation_acc``, ``correct_and_smooth_acc`` (post-processing of the release)
        or ``selected_acc`` (the candidate of the highest validation accuracy)."""
        return np.array(
            [r[key] for r in sorted(self.records, key=lambda r: r["run"])
             if r["mechanism"] == mechanism and r["epsilon"] == epsilon and key in r]
        )

    @property
    def attacks(self) -> list[str]:
        """The attacks scored in every cell (``evaluate.attacks``), in their configured order."""
        return list(self.records[0].get("attack_auc", {})) if self.records else []

    def attack_aucs(self, attack: str, mechanism: str, epsilon: float | None) -> np.ndarray:
        return np.array([r["attack_auc"][attack] for r in self.records
                         if r["mechanism"] == mechanism and r["epsilon"] == epsilon])

    def to_dict(self) -> dict[str, Any]:
        return {
            "scope": self.scope,
            "target": self.target,
            "epsilons": list(self.epsilons),
            "mechanisms": list(self.mechanisms),
            "runs": self.runs,
            "records": [dict(r) for r in self.records],
            "summary": summarize(self),
            "degree_curves": {k: dict(v) for k, v in self.degree_curves.items()},
        }


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
        rec["feature_only_acc"] = refs["feature_only"]["test_acc"]
        if "public_only" in refs:
            rec["public_only_acc"] = refs["public_only"]["test_acc"]
        if "public_edges" in refs:
            rec["public_edges_acc"] = refs["public_edges"]["test_acc"]
        post = _post_processed(g, refs, model, kw)
        for key, r in post.items():
            rec[f"{key}_acc"] = float(r["test_acc"])
        candidates = [(k, v) for k, v in refs.items() if k != "bases"]
        if "release_propagation" in post:
            candidates.append(("release_propagation", post["release_propagation"]))
        candidates.append(("gnn", gnn))
        if "correct_and_smooth" in post:
            candidates.append(("correct_and_smooth", post["correct_and_smooth"]))
        name, chosen = select_by_validation(candidates)
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
        train_kwargs (Mapping, optional): passed to :func:`~privgraph.training.fit_node_classifier`.
        progress (ProgressCallback, optional): receives the ProgressEvents (k/N, ETA, never an
            accuracy) of ``clean baseline`` (the ``runs`` trainings on the clean graph), ``comparison
            cells`` (one per mechanism x epsilon x run) and, inside each computed cell, ``comparison
            cell`` (its privatization, then its training: a cell can take minutes, e.g. EdgeRR's
            MCMC).
        theta (np.ndarray, optional): HeteroRR's feature scores, for entries with ``use_scores``.
        attacks (Sequence): ``evaluate.attacks`` entries; each trained model (clean and every
            cell) is attacked on the same candidate pairs (:class:`~privgraph.attacks.suite.AttackProbe`)
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
    records: list[dict[str, Any]] = []
    edge_refs: dict[int, dict[str, dict[str, float]]] = {}  # run -> reference model -> accuracies
    curves: dict[str, dict[str, list[float]]] = {}
    true_degree = _degrees(graph) if sc is Scope.EDGES else None
    # the denoising options (LPGNN's KProp, Drop) apply to private graphs only, as in evaluate_utility
    clean_kwargs = {k: v for k, v in kwargs.items() if k not in DENOISING_OPTIONS}
    records += _clean_baseline(graph, train_seeds, probe, clean_kwargs, checkpoint, progress)
    cells = ProgressTracker("comparison cells", len(mechanisms) * len(epsilons) * runs, progress)
    # a features comparison keeps the private edges as they are (a private report, never a version):
    # privatize_graph gets them as public edges (it refuses private edges without an edge mechanism)
    base = graph
    if sc is Scope.FEATURES and graph.edges_private.shape[1]:
        base = graph.replace(edges_public=graph.edges("all"), edges_private=np.zeros((2, 0), np.int64))
    for name, entry in mechanisms.items():
        registry, params, use_scores = mechanism_entry(name, entry)
        if use_scores:
            params = {**params, "theta": theta}
        constant = not takes_epsilon(registry)  # spends no budget: one set of runs serves every eps
        for eps in epsilons:
            eps = float(eps)
            if constant and eps != float(epsilons[0]):
                first = [r for r in records if r["mechanism"] == name and r["epsilon"] == float(epsilons[0])]
                records += [{**r, "epsilon": eps} for r in first]
                if f"{name}/{float(epsilons[0]):g}" in curves:
                    curves[f"{name}/{eps:g}"] = curves[f"{name}/{float(epsilons[0]):g}"]
                cells.advance(runs, detail=f"{name} eps={eps:g}: no budget, runs of eps={float(epsilons[0]):g} reused",
                              timed=False)
                continue
            mech = build_at_epsilon(registry, params, eps)
            priv_seeds = partition_seeds(stage_seed(root_seed, f"{name}/{eps!r}"), runs)
            for i, (ps, ts) in enumerate(zip(priv_seeds, train_seeds, strict=True)):
                cell = f"{name}/{eps!r}/{i}"
                done = None if checkpoint is None else checkpoint.get(cell)
                if done is not None:  # finished by an earlier, cut-off run of the same comparison
                    records.append(done["record"])
                    if "curve" in done:
                        curves[f"{name}/{eps:g}"] = done["curve"]
                    cells.advance(detail=f"{name} eps={eps:g} run {i}: from the checkpoint", timed=False)
                    continue
                mech_kw = {"features": mech if sc is Scope.FEATURES else None,
                           "edges": mech if sc is Scope.EDGES else None}
                steps = ProgressTracker("comparison cell", 2, progress)
                result = privatize_graph(base, partitioning=partitioning, root_seed=ps, executor=executor, **mech_kw)
                steps.advance(detail=f"{name} eps={eps:g} run {i}: privatized")
                if true_degree is not None and i == 0:
                    curves[f"{name}/{eps:g}"] = degree_curve(true_degree, _degrees(result.graph))
                # an edge mechanism leaves the features, labels and public edges as they are: the
                # reference models of run i are the same for every such cell (trained once). One
                # that privatizes the public edges too (privHRG) leaves them out of its release;
                # they are declared public all the same, so its cells get the same references
                refs = None
                view = _with_declared_public_edges(result.graph, graph) if (
                    sc is Scope.EDGES and getattr(mech, "all_edges_private", False)) else result.graph
                if sc is Scope.EDGES and np.array_equal(view.edges_public, graph.edges_public):
                    refs = _references(view, ts, {**kwargs, "eval_y": graph.y}, edge_refs.setdefault(i, {}), public_features=True)
                records.append({"mechanism": name, "epsilon": eps, "run": i,
                                **_train(result.graph, ts, probe, refs, eval_y=graph.y, **kwargs)})
                steps.advance(detail=f"{name} eps={eps:g} run {i}: trained")
                if checkpoint is not None:
                    done = {"record": records[-1]}
                    if true_degree is not None and i == 0:
                        done["curve"] = curves[f"{name}/{eps:g}"]
                    checkpoint.put(cell, done)
                cells.advance(detail=f"{name} eps={eps:g} run {i}")
    return ComparisonResult(
        scope=sc.value, target=target, epsilons=tuple(float(e) for e in epsilons),
        mechanisms=tuple(mechanisms), runs=runs, records=tuple(records), degree_curves=curves,
    )


def _post_processed(g: GraphData, refs: Mapping[str, Any], model: Any, kw: Mapping[str, Any]) -> dict[str, Any]:
    """The post-processing candidates of a cell, as in evaluate_utility: ``release_propagation``
    (label propagation over the public and released edges) and ``correct_and_smooth`` (the
    references' and the GNN's predictions corrected and smoothed over them), each with
    ``test_acc`` (on ``kw["eval_y"]``) and ``val_acc``; absent where not defined."""
    from privgraph.correct_and_smooth import release_correct_and_smooth
    from privgraph.label_propagation import release_propagation

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
    public-only reference, :func:`privgraph.public_reference.public_only_reference`: label
    propagation of the training labels, which a comparison does not privatize, over the version's
    public edges; for a features comparison every edge), ``feature_only`` (the same model over no
    edges) and, where it is a candidate, ``public_edges`` (over the version's public edges alone);
    in the order :func:`select_by_validation` breaks ties by; under ``bases`` the trained models'
    class probabilities (Correct and Smooth's base predictions). ``cache`` holds models already
    trained on the same features, labels, public edges and seed. ``public_features`` (an edges
    comparison, which leaves the features as they are): the floor is public-only too, and
    ``public_only`` is whichever of it and label propagation validates better
    (:func:`~privgraph.public_reference.per_run_reference`)."""
    from privgraph.public_reference import per_run_reference, public_only_reference

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
    for name, kw in (("feature_only", feature_only_kwargs(dict(kwargs))),
                     ("public_edges", public_edges_kwargs(version, dict(kwargs)))):
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


def degree_plot_png(title: str, result: ComparisonResult, epsilon: float) -> bytes:
    """Degree preservation (PNG): mean released degree against original degree, log-log, one line
    per edge mechanism at ``epsilon``, with the identity line (paper 004, Fig. 7)."""
    import matplotlib

    matplotlib.use("Agg", force=False)
    from matplotlib.figure import Figure

    fig = Figure(figsize=(6, 5), dpi=110)
    ax = fig.add_subplot(1, 1, 1)
    top = 1.0
    for name in result.mechanisms:
        c = result.degree_curves.get(f"{name}/{epsilon:g}")
        if not c:
            continue
        d, m = np.array(c["degree"]), np.array(c["noisy_mean"])
        keep = d > 0
        ax.plot(d[keep], np.maximum(m[keep], 0.5), marker=".", linewidth=1, label=name)
        top = max(top, float(d.max()), float(m.max()))
    ax.plot([1, top], [1, top], color="black", linestyle="--", linewidth=1, label="identity")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("original degree")
    ax.set_ylabel("mean released degree")
    ax.set_title(textwrap.fill(f"{title} (eps = {epsilon:g})", 60), fontsize=9)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="best")
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    return buf.getvalue()


def _mean_std(a: np.ndarray) -> tuple[float, float]:
    return float(a.mean()), float(a.std(ddof=1)) if a.size > 1 else 0.0


def summarize(result: ComparisonResult) -> dict[str, Any]:
    """Mean +- std per (mechanism, epsilon), with the feature-only floor, the public-edges model
    (where a candidate), the model chosen by validation accuracy and the paired t-tests of the GNN
    and of the chosen model against the floor (``vs_feature_only``, ``selected_vs_feature_only``); per
    epsilon the paired two-tailed t-test of the target against the best other mechanism (highest
    mean; runs are paired by their training seed; ``None`` fields when not computable)."""
    cells: dict[str, dict[str, dict[str, Any]]] = {}
    for name in result.mechanisms:
        cells[name] = {}
        for eps in result.epsilons:
            acc = result.accuracies(name, eps)
            mean, std = _mean_std(acc)
            cell: dict[str, Any] = {"mean": mean, "std": std}
            floor = result.accuracies(name, eps, "feature_only_acc")
            if floor.size == acc.size and floor.size:
                fm, fs = _mean_std(floor)
                sm, ss = _mean_std(result.accuracies(name, eps, "selected_acc"))
                cell["feature_only"] = {"mean": fm, "std": fs}
                cell["selected"] = {"mean": sm, "std": ss}
                cell["vs_feature_only"] = paired_test(acc.tolist(), floor.tolist())
                sel = result.accuracies(name, eps, "selected_acc")
                cell["selected_vs_feature_only"] = paired_test(sel.tolist(), floor.tolist())
                cell["selected"]["models"] = [r["selected"] for r in sorted(result.records, key=lambda r: r["run"])
                                              if r["mechanism"] == name and r["epsilon"] == eps and "selected" in r]
                pub = result.accuracies(name, eps, "public_edges_acc")
                if pub.size == acc.size:
                    pm, ps = _mean_std(pub)
                    cell["public_edges"] = {"mean": pm, "std": ps}
                for key in ("release_propagation", "correct_and_smooth"):
                    post = result.accuracies(name, eps, f"{key}_acc")
                    if post.size == acc.size:
                        cell[key] = dict(zip(("mean", "std"), _mean_std(post)))
                alone = result.accuracies(name, eps, "public_only_acc")
                if alone.size == acc.size:
                    am, as_ = _mean_std(alone)
                    cell["public_only"] = {"mean": am, "std": as_}
                    cell["value_of_release"] = paired_test(sel.tolist(), alone.tolist())
            cells[name][repr(eps)] = cell
    clean_mean, clean_std = _mean_std(result.accuracies(CLEAN, None))
    tests: dict[str, dict[str, Any]] = {}
    others = [m for m in result.mechanisms if m != result.target]
    for eps in result.epsilons:
        key = repr(eps)
        if not others:
            tests[key] = {"best_baseline": None, "t": None, "p": None}
            continue
        best = max(others, key=lambda m: cells[m][key]["mean"])
        a, b = result.accuracies(result.target, eps), result.accuracies(best, eps)
        t = p = None
        if a.size == b.size and a.size > 1:
            pt = paired_test(a.tolist(), b.tolist())
            t, p = pt["statistic"], pt["pvalue"]
        tests[key] = {"best_baseline": best, "t": t, "p": p}
    out: dict[str, Any] = {"cells": cells, "clean": {"mean": clean_mean, "std": clean_std}, "t_tests": tests,
                           "test": "paired t-test (scipy.stats.ttest_rel), run i against run i"}
    if result.attacks:  # ROC-AUC of each attack per cell (0.5: chance)
        out["attacks"] = {}
        for attack in result.attacks:
            acells = {name: {repr(e): dict(zip(("mean", "std"), _mean_std(result.attack_aucs(attack, name, e))))
                             for e in result.epsilons} for name in result.mechanisms}
            cm, cs = _mean_std(result.attack_aucs(attack, CLEAN, None))
            out["attacks"][attack] = {"cells": acells, "clean": {"mean": cm, "std": cs}}
    return out


def comparison_markdown(title: str, result: ComparisonResult) -> str:
    """The comparison table as markdown: mechanisms x epsilons, the best mean per column in bold,
    the clean graph's accuracy, and the t-test row."""
    s = summarize(result)
    eps_keys = [repr(e) for e in result.epsilons]
    head = "| mechanism | " + " | ".join(f"eps = {e:g}" for e in result.epsilons) + " |"
    lines = [f"# {title}", "", f"Test accuracy, mean +- std over {result.runs} runs; "
             f"only the {result.scope} are privatized.", "", head,
             "|---|" + "---|" * len(eps_keys)]
    best = {k: max(result.mechanisms, key=lambda m: s["cells"][m][k]["mean"]) for k in eps_keys}
    for name in result.mechanisms:
        row = []
        for k in eps_keys:
            c = s["cells"][name][k]
            txt = f"{c['mean']:.3f} +- {c['std']:.3f}"
            row.append(f"**{txt}**" if best[k] == name else txt)
        label = f"{name} (target)" if name == result.target else name
        lines.append(f"| {label} | " + " | ".join(row) + " |")
    c = s["clean"]
    lines.append("| clean graph | " + " | ".join([f"{c['mean']:.3f} +- {c['std']:.3f}"] * len(eps_keys)) + " |")
    tt = []
    for k in eps_keys:
        t = s["t_tests"][k]
        tt.append("n/a" if t["p"] is None else f"vs {t['best_baseline']}: t = {t['t']:.2f}, p = {t['p']:.3g}")
    lines.append(f"| paired t-test, {result.target} vs best other | " + " | ".join(tt) + " |")
    if all("feature_only" in s["cells"][m][k] for m in result.mechanisms for k in eps_keys):
        lines += ["", "## The feature-only floor: the same model over no edges, and the GNN against it", "",
                  "Floor, and the model chosen per run by validation accuracy (the floor, the public edges "
                  "alone where the version has them, label propagation over the release, the GNN, or Correct "
                  "and Smooth of these), mean +- std; GNN - floor and chosen - floor "
                  "with the p of a paired t-test (scipy.stats.ttest_rel); where the public data alone is a "
                  "model (label propagation of the training labels over the public edges), its accuracy and "
                  "the value of the release: chosen - public alone.", "",
                  head, "|---|" + "---|" * len(eps_keys)]
        for name in result.mechanisms:
            row = []
            for k in eps_keys:
                c = s["cells"][name][k]
                f, sel, d, ds = c["feature_only"], c["selected"], c["vs_feature_only"], c["selected_vs_feature_only"]
                p = "" if d["pvalue"] is None else f", p = {d['pvalue']:.3g}"
                ps = "" if ds["pvalue"] is None else f", p = {ds['pvalue']:.3g}"
                text = (f"floor {f['mean']:.3f} +- {f['std']:.3f}; GNN - floor {d['mean_difference']:+.3f}{p}; "
                        f"chosen {sel['mean']:.3f}, chosen - floor {ds['mean_difference']:+.3f}{ps}")
                if "public_only" in c:
                    v = c["value_of_release"]
                    pv = "" if v["pvalue"] is None else f", p = {v['pvalue']:.3g}"
                    text += f"; public alone {c['public_only']['mean']:.3f}, value {v['mean_difference']:+.3f}{pv}"
                row.append(text)
            lines.append(f"| {name} | " + " | ".join(row) + " |")
    for attack, a in s.get("attacks", {}).items():
        lines += ["", f"## {attack}: ROC-AUC against the raw graph (mean +- std over {result.runs} runs; "
                  "0.5 = chance, lower = more private)", "", head, "|---|" + "---|" * len(eps_keys)]
        for name in result.mechanisms:
            cells = [a["cells"][name][k] for k in eps_keys]
            label = f"{name} (target)" if name == result.target else name
            lines.append(f"| {label} | " + " | ".join(f"{c['mean']:.3f} +- {c['std']:.3f}" for c in cells) + " |")
        c = a["clean"]
        lines.append("| clean graph | " + " | ".join([f"{c['mean']:.3f} +- {c['std']:.3f}"] * len(eps_keys)) + " |")
    return "\n".join(lines) + "\n"


def utility_plot_png(title: str, result: ComparisonResult) -> bytes:
    """Privacy-utility plot (PNG bytes): accuracy against epsilon (log scale) with +-1 std bars,
    one line per mechanism, the clean graph as a dashed line; with attacks, one more panel per
    attack (its ROC-AUC against epsilon, chance dotted)."""
    import matplotlib

    matplotlib.use("Agg", force=False)
    from matplotlib.figure import Figure

    s = summarize(result)
    panels = [("test accuracy", s["cells"], s["clean"])]
    panels += [(f"{a} ROC-AUC", v["cells"], v["clean"]) for a, v in s.get("attacks", {}).items()]
    fig = Figure(figsize=(7 * len(panels), 4.5), dpi=110)
    xs = np.array(result.epsilons)
    for k, (ylabel, cells, clean) in enumerate(panels):
        ax = fig.add_subplot(1, len(panels), k + 1)
        colors = {}
        for name in result.mechanisms:
            means = np.array([cells[name][repr(e)]["mean"] for e in result.epsilons])
            stds = np.array([cells[name][repr(e)]["std"] for e in result.epsilons])
            bars = ax.errorbar(xs, means, yerr=stds, marker="o", capsize=3,
                               linewidth=2.5 if name == result.target else 1.2, label=name)
            colors[name] = bars[0].get_color()
        ax.axhline(clean["mean"], color="black", linestyle="--", linewidth=1, label="clean graph")
        if k == 0 and all("feature_only" in cells[m][repr(e)] for m in result.mechanisms for e in result.epsilons):
            floors = {m: [cells[m][repr(e)]["feature_only"]["mean"] for e in result.epsilons] for m in result.mechanisms}
            if result.scope == "edges":  # the features are untouched: one floor for every mechanism
                ax.plot(xs, next(iter(floors.values())), color="grey", linestyle=":", linewidth=1.5,
                        label="feature-only floor (no edges)")
            else:
                for m in result.mechanisms:
                    ax.plot(xs, floors[m], color=colors[m], linestyle=":", linewidth=1)
                ax.plot([], [], color="grey", linestyle=":", label="feature-only floor (dotted, per mechanism)")
        if k:
            ax.axhline(0.5, color="grey", linestyle=":", linewidth=1, label="chance")
        ax.set_xscale("log", base=2)
        ax.set_xticks(xs, [f"{e:g}" for e in xs])
        ax.set_xlabel(f"epsilon ({result.scope})")
        ax.set_ylabel(ylabel)
        ax.set_title(textwrap.fill(title if k == 0 else f"{ylabel} (lower = more private)", 70), fontsize=9)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8, loc="best")
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    return buf.getvalue()


def comparison_objects(title: str, result: ComparisonResult) -> dict[str, bytes]:
    """The stored objects of a comparison: ``results.json`` (per-run accuracies and the summary),
    ``table.md`` and ``utility.png``."""
    import json

    objects = {
        "results.json": (json.dumps(result.to_dict(), sort_keys=True, indent=2) + "\n").encode(),
        "table.md": comparison_markdown(title, result).encode(),
        "utility.png": utility_plot_png(title, result),
    }
    if result.degree_curves:
        eps = result.epsilons[len(result.epsilons) // 2]
        objects["degrees.png"] = degree_plot_png(title, result, eps)
    return objects


def comparison_info(
    name: str, *, config: Any, pipeline_config: Any, result: ComparisonResult,
    scores: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The record of a comparison's private report: its settings (no seed, no split seed, no data
    paths), the summary, and why it is private: the accuracies are scored on the raw graph and the
    degree curves are the exact private degree histogram, so the report is an evaluation for the
    data owner, covered by no guarantee (stored with
    :func:`~privgraph.storage.private_record.write_private_report`, never as a shareable version)."""
    from privgraph.storage.manifest import code_version

    dataset = pipeline_config.dataset
    return {
        "kind": "comparison",
        "pipeline": config.pipeline,
        "description": config.description,
        "dataset": {"name": dataset.name, "rho": dataset.rho},
        "code_version": code_version(),
        "mechanisms": [
            {"label": m, "mechanism": mechanism_entry(m, config.mechanisms[m])[0], "scope": result.scope,
             "params": mechanism_entry(m, config.mechanisms[m])[1],
             "theta": "HeteroRR scores (see scores)" if mechanism_entry(m, config.mechanisms[m])[2] else None,
             "epsilons": list(result.epsilons)}
            for m in result.mechanisms
        ],
        "evaluation": {
            "runs": result.runs,
            "target": result.target,
            "settings": config.evaluate_settings(pipeline_config).model_dump(mode="json"),
            "note": "accuracies are scored on the raw graph and the degree curves are the exact private "
                    "degrees: a private evaluation for the data owner, not a release",
        },
        "summary": summarize(result),
        "scores": None if scores is None else dict(scores),
    }
