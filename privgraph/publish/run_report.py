"""Markdown renderings of a ledger, a validation result and utility metrics.

Used for Prefect artifacts (the Prefect UI shows them) and by ``privgraph artifacts show``.
Only public quantities appear here: budgets, parameters, accuracies; never rows or seeds.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from privgraph.evaluate.candidates import CANDIDATES
from privgraph.evaluate.candidates import PAIRED_TESTS as PAIRED_TEST_SPECS

__all__ = ["PAIRED_TESTS", "POST_PROCESSING", "RAW_ROWS", "UTILITY_ROWS", "ledger_markdown", "metrics_markdown", "paired_test_line",
           "private_evaluation_markdown", "scale_note"]


def _fmt(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.4g}"
    return str(v)


def ledger_markdown(
    pipeline: str, version: str | None, ledger: dict[str, Any], validation: dict[str, Any] | None = None
) -> str:
    """The ledger (``PrivacyLedger.to_dict()``) as the markdown table the Prefect UI and
    ``privgraph artifacts show`` print, with the validation's budget rows when given.

    >>> from privgraph.guarantee import Guarantee, Scope
    >>> from privgraph.guarantee.ledger import LedgerEntry, PrivacyLedger
    >>> g = Guarantee("edge_ldp", 1.0, Scope.EDGES, unit_epsilon=2.0)
    >>> table = ledger_markdown("demo", None, PrivacyLedger([LedgerEntry("privatize.edges", "warner_rr", g)]).to_dict())
    >>> print(table.splitlines()[0])
    ## Privacy ledger: demo (staged, not published)
    >>> print(table.splitlines()[4])
    | privatize.edges | warner_rr | edges | edge_ldp | 1 | edge_dp 2 | all |
    """
    lines = [f"## Privacy ledger: {pipeline} {version or '(staged, not published)'}", ""]
    lines += [
        "| stage | mechanism | scope | kind | epsilon | in scope unit | partitions |",
        "|---|---|---|---|---|---|---|",
    ]
    for e in ledger.get("entries", []):
        g = e["guarantee"]
        parts = e.get("partitions")
        parts_s = "all" if parts is None else f"{len(parts)} disjoint"
        unit = g.get("unit_epsilon", g["epsilon"])
        unit_s = f"{g.get('unit_kind', g['kind'])} {_fmt(unit)}"
        lines.append(
            f"| {e['stage']} | {e['mechanism']} | {g['scope']} | {g['kind']} | {_fmt(g['epsilon'])} | {unit_s} | {parts_s} |"
        )
    if validation is not None:
        lines += ["", "### Budget (composed)", "", "| scope | kind | spent | cap |", "|---|---|---|---|"]
        for b in validation.get("budget", []):
            lines.append(f"| {b['scope']} | {b['kind']} | {_fmt(b['spent'])} | {_fmt(b['cap'])} |")
        ok = "passed" if validation.get("success") else "FAILED"
        lines += ["", f"Validation checkpoint: **{ok}**"]
        for r in validation.get("results", []):
            if not r["success"]:
                lines.append(f"- {r['suite']}.{r['expectation']}: {r['detail']}")
    return "\n".join(lines) + "\n"


def metrics_markdown(pipeline: str, version: str, metrics: dict[str, Any]) -> str:
    """The shareable utility: the model trained on the stored version, scored on its own labels."""
    lines = [f"## Utility: {pipeline} {version}", ""]
    lines += [
        f"GNN trained on the stored version ({metrics.get('runs', '?')} runs{ensemble_note(metrics)}, device "
        f"{metrics.get('device', '?')}), test accuracy on the version's own labels:",
        "",
        "| graph | mean | std |",
        "|---|---|---|",
    ]
    for key, label in UTILITY_ROWS:
        m = metrics.get(key)
        if m:
            lines.append(f"| {label} | {m['test_acc_mean']:.4f} | {m['test_acc_std']:.4f} |")
    if metrics.get("selected", {}).get("models"):
        lines += ["", "selected per run: " + ", ".join(metrics["selected"]["models"])]
    for key, label in PAIRED_TESTS:
        if metrics.get(key):
            lines += ["", paired_test_line(metrics[key], label)]
    lines += ["", POST_PROCESSING] + (["", scale_note(metrics)] if scale_note(metrics) else [])
    return "\n".join(lines) + "\n"


def scale_note(metrics: dict[str, Any]) -> str | None:
    """How the evaluation at scale trained (``evaluated at scale over 8 parts, ...``), or None."""
    e = metrics.get("evaluation")
    if not e:
        return None
    sample = e.get("sample")
    over = (f"over an evaluation sample of {len(sample['parts'])} of the {e['parts']} parts ({sample['nodes']} nodes; "
            "every figure is the sample's)" if sample else f"over {e['parts']} parts")
    return (f"evaluated at scale {over}, {e['clusters_per_batch']} per step, "
            f"{e['inference']} inference: {e['method']}")


def ensemble_note(metrics: dict[str, Any]) -> str:
    """``", each model the mean of 5 trainings"`` for an evaluation with an ensemble, else ``""``."""
    n = metrics.get("ensemble")
    return f", each model the mean of {n} trainings" if n and n > 1 else ""


#: what every model of the utility table is, privacy-wise (shown under the table)
POST_PROCESSING = (
    "Every model above reads only the stored version and the data declared public: post-processing "
    "of the release, so the ledger's guarantee is unchanged and no budget is spent."
)


class _Rows:
    """``(key, label)`` rows read from the registries each time they are iterated (a candidate
    registered later is shown too)."""

    def __init__(self, rows: Callable[[], Iterator[tuple[str, str]]]) -> None:
        self._rows = rows

    def __iter__(self) -> Iterator[tuple[str, str]]:
        return self._rows()


def _utility_rows() -> Iterator[tuple[str, str]]:
    yield from ((c.key, c.label) for c in CANDIDATES)
    yield "selected", "private, the model chosen by validation accuracy"


def _raw_rows() -> Iterator[tuple[str, str]]:
    yield "clean", "trained on the raw graph"
    yield from ((f"{c.key}_on_raw_labels", c.raw_label) for c in CANDIDATES)
    yield "selected_on_raw_labels", "the model chosen by validation, raw test labels"


#: the utility rows of an evaluation's metrics (key, label), in the order shown: the candidates
#: (:data:`~privgraph.evaluate.candidates.CANDIDATES`, tie order), then the chosen model
UTILITY_ROWS = _Rows(_utility_rows)
#: the private evaluation's rows (key, label), in the order shown
RAW_ROWS = _Rows(_raw_rows)
#: the paired tests of an evaluation's metrics (key, what is compared), in the order shown
PAIRED_TESTS = _Rows(lambda: ((t.key, t.label) for t in PAIRED_TEST_SPECS))


def paired_test_line(t: dict[str, Any], label: str = "GNN - floor") -> str:
    """``GNN - floor: +0.0123 (paired t-test (scipy.stats.ttest_rel), 5 runs, p = 0.012)``."""
    p = "p not defined" if t.get("pvalue") is None else f"p = {t['pvalue']:.3g}"
    return f"{label}: {t['mean_difference']:+.4f} ({t['test']}, {t['runs']} runs, {p})"


def private_evaluation_markdown(pipeline: str, version: str, owner_only: dict[str, Any]) -> str:
    """The data owner's evaluation on raw data: the clean graph's accuracy and the private model
    scored on the raw test labels. NOT shareable."""
    lines = [f"## Private evaluation: {pipeline} {version}", "", str(owner_only.get("note", "")), ""]
    lines += ["| model | test accuracy (mean) | std |", "|---|---|---|"]
    for key, label in RAW_ROWS:
        m = owner_only.get(key)
        if m:
            lines.append(f"| {label} | {m['test_acc_mean']:.4f} | {m['test_acc_std']:.4f} |")
    for key, label in PAIRED_TESTS:
        if owner_only.get(f"{key}_on_raw_labels"):
            lines += ["", "On the raw test labels: " + paired_test_line(owner_only[f"{key}_on_raw_labels"], label)]
    rows = graph_utility_rows(owner_only.get("graph_utility"))
    if rows:
        lines += ["", "### Structure of the released edges (original vs released)", "",
                  "| statistic | original | released | relative error |", "|---|---|---|---|"]
        lines += [f"| {' | '.join(r)} |" for r in rows]
    rows = attack_rows(owner_only.get("attacks"))
    if rows:
        lines += ["", "### Attacks (ROC-AUC, 95% bootstrap interval; 0.5 = chance)", "",
                  "| attack | on the raw graph's model | without the private edges | on the version's model "
                  "| precision@k (version) |", "|---|---|---|---|---|"]
        lines += [f"| {' | '.join(r)} |" for r in rows]
    return "\n".join(lines) + "\n"


def attack_rows(attacks: dict[str, Any] | None) -> list[tuple[str, str, str, str, str]]:
    """``(attack, AUC [lo, hi] of the clean, without-private-edges and private models, private
    precision@k)`` per attack of :func:`privgraph.evaluate.attacks.run_attacks`' result (private
    evaluation); skipped ones say why."""
    if not attacks:
        return []

    def cell(r: dict[str, Any] | None) -> str:
        if not r:
            return "-"
        if "skipped" in r:
            return f"skipped: {r['skipped']}"
        lo, hi = r["auc_ci"]
        return f"{r['auc']:.3f} [{lo:.3f}, {hi:.3f}]"

    rows = []
    for name in attacks.get("private", {}):
        c, w, p = (attacks.get(r, {}).get(name) for r in ("clean", "without_private_edges", "private"))
        prec = "-" if "skipped" in p else f"{p['metrics']['precision_at_k']:.3f}"
        label = name + (f" ({p['params'].get('metric') or p['params'].get('signal')})" if p.get("params", {}).keys() & {"metric", "signal"} else "")
        rows.append((label, cell(c), cell(w), cell(p), prec))
    return rows


def graph_utility_rows(report: dict[str, Any] | None) -> list[tuple[str, str, str, str]]:
    """``(statistic, original, released, relative error or distance)`` rows of a
    :func:`privgraph.evaluate.graph_utility.graph_utility_report` (private evaluation)."""
    if not report:
        return []
    rows = [("edges", str(report["edges"]["original"]), str(report["edges"]["released"]), "")]
    for key in ("triangles", "global_clustering", "average_clustering", "modularity", "assortativity", "effective_diameter"):
        r = report[key]
        rows.append((key.replace("_", " "), f"{r['original']:.4g}", f"{r['released']:.4g}", f"{r['relative_error']:.3f}"))
    rows.append(("degree distribution", "", "", f"KS {report['degree_ks']:.3f}, KL {report['degree_kl']:.3f}"))
    rows.append(("communities (label propagation)", "", "", f"NMI {report['community_nmi']:.3f}"))
    top = next(k for k in report if k.startswith("eigenvector_top"))
    rows.append((top.replace("_", " "), "", "", f"{report[top]:.3f}"))
    return rows
