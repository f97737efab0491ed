"""Graph-classification comparisons (paper 004, Sec. V, Tables 3-4): every graph's private edges
privatized by each edge mechanism at each epsilon, GIN-0 cross-validated on each release, against
NonPriv-Full (every edge as it is) and NonPriv-Part (the public edges only).

Every cell uses the SAME folds, initial parameters and batch order (one cross-validation seed), so
cells differ only in the released edges and the folds pair them: the target is compared with the
best other mechanism by a paired t-test over the folds (``scipy.stats.ttest_rel``). The accuracies
are scored on the raw labels of raw graphs' releases: a private evaluation for the data owner.
"""

from __future__ import annotations

import dataclasses
import io
import json
import textwrap
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from privgraph.config.pipeline import mechanism_entry
from privgraph.ingest.datasets.graph_set import GraphSet
from privgraph.evaluate.graph_classification import cross_validate, graph_seeds, privatize_graph_set
from privgraph.mechanisms import build_at_epsilon, edge_mechanisms
from privgraph.parts.executor import Executor
from privgraph.evaluate.progress import ProgressCallback, ProgressTracker
from privgraph.seeding import as_generator, stage_seed
from privgraph.evaluate.selection import paired_test

__all__ = [
    "FULL",
    "GraphComparisonResult",
    "graph_comparison_markdown",
    "graph_comparison_objects",
    "graph_mechanism",
    "run_graph_comparison",
    "summarize_graph_comparison",
]

#: The label of the non-private baseline: every edge, public and private, as it is.
FULL = "nonpriv_full"


@dataclasses.dataclass(frozen=True)
class GraphComparisonResult:
    """Per (mechanism, epsilon) the cross-validation of GIN-0 on the release (``None`` epsilon:
    NonPriv-Full); ``cells[label][repr(eps)]`` holds :func:`cross_validate`'s fold lists and means."""

    dataset: str
    target: str
    mechanisms: tuple[str, ...]
    epsilons: tuple[float, ...]
    folds: int
    cells: dict[str, dict[str, dict[str, Any]]]
    full: dict[str, Any]
    ledgers: dict[str, dict[str, Any]]

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def graph_mechanism(label: str, entry: Mapping[str, Any] | None, epsilon: float, graph_set: GraphSet) -> Any:
    """The mechanism of comparison entry ``label`` at ``epsilon``. One that takes a dataset-wide
    ``n_max`` (``takes_n_max``: DPRR) gets paper 004's (Sec. V-A: the largest node count of all
    graphs, public) unless the entry sets one."""
    name, params, _ = mechanism_entry(label, entry or {})
    if name in edge_mechanisms(takes_n_max=True) and "n_max" not in params:
        params = {**params, "n_max": max(2, max(g.num_nodes for g in graph_set.graphs))}
    return build_at_epsilon(name, params, epsilon)


def _cv_summary(cv: Mapping[str, Any]) -> dict[str, Any]:
    keep = ("fold_acc", "fold_auc", "acc_mean", "acc_std", "auc_mean", "auc_std", "epoch", "seconds")
    return {k: cv[k] for k in keep}


def run_graph_comparison(
    graph_set: GraphSet,
    *,
    mechanisms: Mapping[str, Mapping[str, Any] | None],
    epsilons: Sequence[float],
    target: str,
    root_seed: np.random.SeedSequence,
    folds: int = 10,
    epochs: int = 100,
    executor: Executor | None = None,
    device: str | None = None,
    progress: ProgressCallback | None = None,
    checkpoint: Any | None = None,
) -> GraphComparisonResult:
    """Privatize ``graph_set`` with each mechanism at each epsilon (per graph, through
    :func:`privatize_graph_set` on ``executor``: Dask spreads the graphs over its workers) and
    cross-validate GIN-0 on each release; NonPriv-Full once. A mechanism without a budget
    (``nonpriv_part``) runs once and serves every epsilon. With a ``checkpoint``
    (:class:`~privgraph.storage.private_record.CellCheckpoint`), each finished cell is put there
    and a cell already there is read back instead of recomputed (a cut-off run resumes)."""
    if target not in mechanisms:
        raise ValueError(f"target {target!r} is not among mechanisms {sorted(mechanisms)}")
    cv_seed = stage_seed(root_seed, "cross-validation")

    def cv(gs: GraphSet) -> dict[str, Any]:
        return cross_validate(gs, folds=folds, epochs=epochs, rng=as_generator(cv_seed), device=device)

    tracker = ProgressTracker("graph comparison cells", 1 + len(mechanisms) * len(epsilons), progress)
    full = None if checkpoint is None else checkpoint.get(FULL)
    if full is None:
        full = _cv_summary(cv(graph_set))
        if checkpoint is not None:
            checkpoint.put(FULL, full)
        tracker.advance(detail="NonPriv-Full (every edge as it is)")
    else:
        tracker.advance(detail="NonPriv-Full: from the checkpoint", timed=False)
    cells: dict[str, dict[str, dict[str, Any]]] = {}
    ledgers: dict[str, dict[str, Any]] = {}
    for label, entry in mechanisms.items():
        cells[label] = {}
        first: dict[str, Any] | None = None
        for eps in epsilons:
            mech = graph_mechanism(label, entry, float(eps), graph_set)
            if mech.guarantee.epsilon == 0.0 and first is not None:
                cells[label][repr(float(eps))] = first  # no budget: the same release at every epsilon
                tracker.advance(detail=f"{label}: no budget, reused", timed=False)
                continue
            cell = f"{label}/{float(eps)!r}"
            done = None if checkpoint is None else checkpoint.get(cell)
            if done is not None:  # finished by an earlier, cut-off run of the same comparison
                cells[label][repr(float(eps))] = first = done["cv"]
                ledgers[cell] = done["ledger"]
                tracker.advance(detail=f"{label} eps={float(eps):g}: from the checkpoint", timed=False)
                continue
            seeds = graph_seeds(stage_seed(root_seed, cell), len(graph_set))
            released, ledger = privatize_graph_set(graph_set, mech, seeds, executor=executor)
            cells[label][repr(float(eps))] = first = _cv_summary(cv(released))
            ledgers[cell] = ledger.to_dict()
            if checkpoint is not None:
                checkpoint.put(cell, {"cv": first, "ledger": ledgers[cell]})
            tracker.advance(detail=f"{label} eps={float(eps):g}")
    return GraphComparisonResult(
        dataset=graph_set.name, target=target, mechanisms=tuple(mechanisms), epsilons=tuple(float(e) for e in epsilons),
        folds=int(folds), cells=cells, full=full, ledgers=ledgers,
    )


def summarize_graph_comparison(result: GraphComparisonResult) -> dict[str, Any]:
    """Per epsilon, the paired t-test (over folds) of the target's accuracy against the best other
    mechanism's; with the cells' means and stds."""
    tests: dict[str, Any] = {}
    for k in (repr(e) for e in result.epsilons):
        others = [m for m in result.mechanisms if m != result.target]
        if not others:
            continue
        best = max(others, key=lambda m: result.cells[m][k]["acc_mean"])
        tests[k] = {"best_other": best, **paired_test(result.cells[result.target][k]["fold_acc"],
                                                      result.cells[best][k]["fold_acc"])}
    cells = {m: {k: {x: c[x] for x in ("acc_mean", "acc_std", "auc_mean", "auc_std")} for k, c in per.items()}
             for m, per in result.cells.items()}
    full = {x: result.full[x] for x in ("acc_mean", "acc_std", "auc_mean", "auc_std")}
    return {"cells": cells, FULL: full, "t_tests": tests, "folds": result.folds}


def graph_comparison_markdown(title: str, result: GraphComparisonResult) -> str:
    """Accuracy and ROC AUC tables (mean +- std over the folds) with NonPriv-Full, and the t-tests."""
    s = summarize_graph_comparison(result)
    keys = [repr(e) for e in result.epsilons]
    head = "| mechanism | " + " | ".join(f"eps = {e:g}" for e in result.epsilons) + " |"
    lines = [f"# {title}", "", f"GIN-0, {result.folds}-fold cross-validation on {result.dataset}; the same folds, "
             "initial parameters and batches in every cell; private evaluation (raw labels).", ""]
    for metric, name in (("acc", "Accuracy"), ("auc", "ROC AUC")):
        lines += [f"## {name}, mean +- std over the folds", "", head, "|---|" + "---|" * len(keys)]
        for m in result.mechanisms:
            label = f"{m} (target)" if m == result.target else m
            lines.append(f"| {label} | " + " | ".join(
                f"{s['cells'][m][k][metric + '_mean']:.3f} +- {s['cells'][m][k][metric + '_std']:.3f}" for k in keys) + " |")
        f = s[FULL]
        lines.append("| NonPriv-Full | " + " | ".join([f"{f[metric + '_mean']:.3f} +- {f[metric + '_std']:.3f}"] * len(keys)) + " |")
        lines.append("")
    if s["t_tests"]:
        row = []
        for k in keys:
            t = s["t_tests"][k]
            p = "p n/a" if t["pvalue"] is None else f"p = {t['pvalue']:.3g}"
            row.append(f"vs {t['best_other']}: {t['mean_difference']:+.3f}, {p}")
        lines += ["## Paired t-test over the folds (scipy.stats.ttest_rel), target - best other", "", head,
                  "|---|" + "---|" * len(keys), f"| {result.target} | " + " | ".join(row) + " |"]
    return "\n".join(lines) + "\n"


def _plot_png(title: str, result: GraphComparisonResult) -> bytes:
    import matplotlib  # lazy: matplotlib, only for the plot

    matplotlib.use("Agg", force=False)
    from matplotlib.figure import Figure  # lazy: matplotlib, after choosing its backend

    s = summarize_graph_comparison(result)
    fig = Figure(figsize=(12, 4.5), dpi=110)
    xs = np.array(result.epsilons)
    for i, (metric, label) in enumerate((("acc", "accuracy"), ("auc", "ROC AUC"))):
        ax = fig.add_subplot(1, 2, i + 1)
        for m in result.mechanisms:
            means = [s["cells"][m][repr(e)][metric + "_mean"] for e in result.epsilons]
            stds = [s["cells"][m][repr(e)][metric + "_std"] for e in result.epsilons]
            ax.errorbar(xs, means, yerr=stds, marker="o", capsize=3, linewidth=2.5 if m == result.target else 1.2, label=m)
        ax.axhline(s[FULL][metric + "_mean"], color="black", linestyle="--", linewidth=1, label="NonPriv-Full")
        ax.set_xscale("log")
        ax.set_xticks(xs, [f"{e:g}" for e in xs])
        ax.set_xlabel("epsilon (per user, edge LDP)")
        ax.set_ylabel(label)
        ax.set_title(textwrap.fill(title, 70), fontsize=9)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    return buf.getvalue()


def graph_comparison_objects(title: str, result: GraphComparisonResult) -> dict[str, bytes]:
    """``results.json``, ``table.md`` and ``utility.png`` of a graph comparison's private report."""
    return {
        "results.json": (json.dumps({**result.to_dict(), "summary": summarize_graph_comparison(result)},
                                    sort_keys=True, indent=2) + "\n").encode(),
        "table.md": graph_comparison_markdown(title, result).encode(),
        "utility.png": _plot_png(title, result),
    }
