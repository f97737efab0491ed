"""A utility comparison's result and its reports: the summary, the table, the plots, the stored
objects and the private report's record.

:class:`ComparisonResult` holds the per-run accuracies of :func:`privgraph.evaluate.comparison.run_comparison`;
:func:`summarize` turns them into mean +- sample standard deviation per (mechanism, epsilon) and,
per epsilon, a two-tailed paired t-test (``scipy.stats.ttest_rel``) of the target mechanism
against the best other mechanism; :func:`comparison_markdown`, :func:`utility_plot_png` and
:func:`degree_plot_png` render them; :func:`comparison_objects` and :func:`comparison_info` are
what a comparison stores as a private report.
"""

from __future__ import annotations

import dataclasses
import io
import json
import textwrap
from collections.abc import Mapping
from typing import Any

import numpy as np

from privgraph.config.pipeline import mechanism_entry
from privgraph.evaluate.candidates import CANDIDATES
from privgraph.evaluate.selection import paired_test
from privgraph.storage.manifest import code_version

__all__ = [
    "CLEAN",
    "ComparisonResult",
    "comparison_info",
    "comparison_markdown",
    "comparison_objects",
    "degree_plot_png",
    "summarize",
    "utility_plot_png",
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


def degree_plot_png(title: str, result: ComparisonResult, epsilon: float) -> bytes:
    """Degree preservation (PNG): mean released degree against original degree, log-log, one line
    per edge mechanism at ``epsilon``, with the identity line (paper 004, Fig. 7)."""
    import matplotlib  # lazy: matplotlib, only for the plot

    matplotlib.use("Agg", force=False)
    from matplotlib.figure import Figure  # lazy: matplotlib, after choosing its backend

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
                for c in CANDIDATES:  # every candidate but the GNN and the floor (above) where in every run
                    post = result.accuracies(name, eps, f"{c.name}_acc") if c.name not in ("gnn", "feature_only") else None
                    if post is not None and post.size == acc.size:
                        cell[c.name] = dict(zip(("mean", "std"), _mean_std(post)))
                if "public_only" in cell:
                    cell["value_of_release"] = paired_test(
                        sel.tolist(), result.accuracies(name, eps, "public_only_acc").tolist())
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
    import matplotlib  # lazy: matplotlib, only for the plot

    matplotlib.use("Agg", force=False)
    from matplotlib.figure import Figure  # lazy: matplotlib, after choosing its backend

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
