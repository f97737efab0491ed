"""The shareable summary of an evaluation's trainings, without training anything (no torch).

:func:`utility_summary` turns the per-run results of the candidates (the GNN over the version,
the feature-only floor, the public edges alone, label propagation and Correct and Smooth over the
release, the public-only reference) into the metrics a version publishes: per run the candidate of
highest validation accuracy (:func:`select_by_validation`), and the value of the release over the
public data alone (:func:`paired_test`). Shared by the in-memory evaluation
(:func:`~privgraph.evaluate.utility.evaluate_utility`) and the evaluation at scale
(:func:`~privgraph.evaluate.scale_metrics.version_metrics_at_scale`), whose flow process holds
results, not models.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from privgraph.evaluate.candidates import CANDIDATES, PAIRED_TESTS, Candidate

__all__ = ["OWNER_ONLY", "paired_test", "select_by_validation", "utility_summary"]

#: The key of :func:`~privgraph.evaluate.utility.evaluate_utility`'s result that holds what was
#: computed from the raw graph.
OWNER_ONLY = "owner_only"


def utility_summary(runs: int, results: Mapping[str, Sequence[dict[str, Any]]],
                    clean: Sequence[dict[str, Any]] = ()) -> dict[str, Any]:
    """:func:`~privgraph.evaluate.utility.evaluate_utility`'s result from the candidates' results:
    ``results`` maps a candidate's name (:data:`~privgraph.evaluate.candidates.CANDIDATES`) to its
    result in each run (``gnn`` and ``feature_only`` always; a candidate without a result in every
    run, or without a validation accuracy where it needs one, is none); ``clean``: the clean graph's
    runs (empty: the shareable part only).

    >>> r = {"gnn": [{"val_acc": 0.7, "test_acc_own_labels": 0.8, "test_acc": 0.8, "device": "cpu"}],
    ...      "feature_only": [{"val_acc": 0.7, "test_acc_own_labels": 0.6, "test_acc": 0.6}]}
    >>> utility_summary(1, r)["selected"]["models"]  # a tie: the simpler model
    ['feature_only']
    """
    present = [(c, list(results[c.name])) for c in CANDIDATES if _is_candidate(c, results.get(c.name), runs)]
    chosen, models = [], []
    for i in range(runs):
        name, res = select_by_validation([(c.name, r[i]) for c, r in present if not np.isnan(r[i]["val_acc"])])
        chosen.append(res)
        models.append(name)
    runs_of = {"selected": chosen, **{c.name: r for c, r in present}}
    shareable: dict[str, Any] = {"runs": runs}
    shareable.update({c.key: {**_summary([x["test_acc_own_labels"] for x in r]), **c.details(r)} for c, r in present})
    shareable["selected"] = {**_summary([r["test_acc_own_labels"] for r in chosen]), "models": models}
    for t in PAIRED_TESTS:
        if t.a in runs_of and t.b in runs_of:
            shareable[t.key] = paired_test([r["test_acc_own_labels"] for r in runs_of[t.a]],
                                           [r["test_acc_own_labels"] for r in runs_of[t.b]])
    shareable["device"] = results["gnn"][0]["device"]
    if not clean:
        return shareable
    owner: dict[str, Any] = {
        "note": "computed from the raw graph: the data owner's private evaluation, covered by no guarantee",
        "clean": _summary([r["test_acc"] for r in clean]),
        **{f"{c.key}_on_raw_labels": _summary([x["test_acc"] for x in r]) for c, r in present},
        "selected_on_raw_labels": _summary([r["test_acc"] for r in chosen]),
    }
    for t in PAIRED_TESTS:
        if t.a in runs_of and t.b in runs_of:
            owner[f"{t.key}_on_raw_labels"] = paired_test([r["test_acc"] for r in runs_of[t.a]],
                                                          [r["test_acc"] for r in runs_of[t.b]])
    return {**shareable, OWNER_ONLY: owner}


def _is_candidate(c: Candidate, runs_results: Sequence[dict[str, Any]] | None, runs: int) -> bool:
    """Whether ``c`` has a result in each of ``runs`` runs (and, where it needs one, a validation accuracy)."""
    if not runs_results or len(runs_results) != runs:
        return False
    return not (c.needs_validation and np.isnan(runs_results[0]["val_acc"]))


def _summary(accs: list[float]) -> dict[str, Any]:
    a = np.asarray(accs, dtype=np.float64)
    return {
        "test_acc_mean": float(a.mean()),
        "test_acc_std": float(a.std(ddof=1)) if len(a) > 1 else 0.0,
        "test_acc": [float(v) for v in a],
    }


def select_by_validation(candidates: Sequence[tuple[str, dict[str, Any]]]) -> tuple[str, dict[str, Any]]:
    """The ``(name, result)`` of highest ``val_acc`` (accuracy on the version's own validation
    labels); ties go to the earlier candidate (list them in tie order:
    :func:`~privgraph.evaluate.candidates.in_tie_order`)."""
    return max(candidates, key=lambda c: c[1]["val_acc"])


def paired_test(a: list[float], b: list[float]) -> dict[str, Any]:
    """Paired t-test of ``a`` against ``b`` (runs paired by seed; ``scipy.stats.ttest_rel``):
    ``mean_difference`` (a - b), ``statistic`` and two-sided ``pvalue`` (None with fewer than two
    runs or identical pairs)."""
    d = np.asarray(a, dtype=np.float64) - np.asarray(b, dtype=np.float64)
    out: dict[str, Any] = {"test": "paired t-test (scipy.stats.ttest_rel)", "runs": int(d.size),
                           "mean_difference": float(d.mean()) if d.size else 0.0, "statistic": None, "pvalue": None}
    if d.size >= 2 and np.any(d != d[0]):
        from scipy.stats import ttest_rel  # lazy: scipy.stats, only where runs are compared

        r = ttest_rel(a, b)
        out["statistic"], out["pvalue"] = float(r.statistic), float(r.pvalue)
    return out
