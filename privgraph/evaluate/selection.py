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

from collections.abc import Sequence
from typing import Any

import numpy as np

__all__ = ["OWNER_ONLY", "paired_test", "select_by_validation", "utility_summary"]

#: The key of :func:`~privgraph.evaluate.utility.evaluate_utility`'s result that holds what was
#: computed from the raw graph.
OWNER_ONLY = "owner_only"


def utility_summary(
    runs: int, clean_res: list[dict[str, Any]], private_res: list[dict[str, Any]], floor_res: list[dict[str, Any]],
    public_res: list[dict[str, Any]], references: list[dict[str, Any]] | None = None,
    propagation: dict[str, Any] | None = None, smoothed: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """:func:`~privgraph.evaluate.utility.evaluate_utility`'s result from the trainings' results
    (no clean runs: the shareable part only); ``references``: the public-only reference of each run
    (:func:`~privgraph.evaluate.public_reference.per_run_reference`) or None, ``propagation``: label
    propagation over the release (the same in every run) or None; ``smoothed``: Correct and Smooth
    per run (empty: none)."""
    # per run, the model of highest validation accuracy on the version's own labels (ties: the
    # simpler one: the public data alone, the floor, the public edges alone, label propagation
    # over the release, the GNN, then Correct and Smooth of the trained models)
    def every_run(r: dict[str, Any] | None) -> list[dict[str, Any]]:
        return [r] * runs if r is not None and not np.isnan(r["val_acc"]) else []

    smoothed = smoothed if smoothed and len(smoothed) == runs else []
    references = references if references and not np.isnan(references[0]["val_acc"]) else None
    candidates = [("public_only", references or []), ("feature_only", floor_res), ("public_edges", public_res),
                  ("release_propagation", every_run(propagation)), ("gnn", private_res),
                  ("correct_and_smooth", smoothed)]
    chosen, models = [], []
    for i in range(runs):
        name, res = select_by_validation([(n, r[i]) for n, r in candidates if r])
        chosen.append(res)
        models.append(name)
    extra = {"public_edges": _summary([r["test_acc_own_labels"] for r in public_res])} if public_res else {}
    if references:
        methods = sorted({r["method"] for r in references})
        extra["public_only"] = {**_summary([r["test_acc_own_labels"] for r in references]),
                                "method": methods[0] if len(methods) == 1 else "; or ".join(methods)}
        extra["value_of_release"] = paired_test([r["test_acc_own_labels"] for r in chosen],
                                                [r["test_acc_own_labels"] for r in references])
    if propagation is not None:
        extra["release_propagation"] = {**_summary([propagation["test_acc_own_labels"]] * runs),
                                        "release_weight": propagation["release_weight"]}
    if smoothed:
        extra["correct_and_smooth"] = {**_summary([r["test_acc_own_labels"] for r in smoothed]),
                                       "base": [r["base"] for r in smoothed], "alpha": [r["alpha"] for r in smoothed],
                                       "release_weight": [r["release_weight"] for r in smoothed]}
    shareable = {
        "runs": runs,
        "private": {**_summary([r["test_acc_own_labels"] for r in private_res]),
                    # LPGNN's search: the [K_x, K_y] chosen per run on the version's own labels
                    **({"kprop": [r["kprop"] for r in private_res]} if "kprop" in private_res[0] else {})},
        "feature_only": _summary([r["test_acc_own_labels"] for r in floor_res]),
        **extra,
        "selected": {**_summary([r["test_acc_own_labels"] for r in chosen]), "models": models},
        "gnn_vs_feature_only": paired_test([r["test_acc_own_labels"] for r in private_res],
                                           [r["test_acc_own_labels"] for r in floor_res]),
        "device": private_res[0]["device"],
    }
    if not clean_res:
        return shareable
    extra_raw = {"public_edges_on_raw_labels": _summary([r["test_acc"] for r in public_res])} if public_res else {}
    if propagation is not None:
        extra_raw["release_propagation_on_raw_labels"] = _summary([propagation["test_acc"]] * runs)
    if smoothed:
        extra_raw["correct_and_smooth_on_raw_labels"] = _summary([r["test_acc"] for r in smoothed])
    if references:
        extra_raw["public_only_on_raw_labels"] = _summary([r["test_acc"] for r in references])
        extra_raw["value_of_release_on_raw_labels"] = paired_test([r["test_acc"] for r in chosen],
                                                                  [r["test_acc"] for r in references])
    return {
        **shareable,
        OWNER_ONLY: {
            "note": "computed from the raw graph: the data owner's private evaluation, covered by no guarantee",
            "clean": _summary([r["test_acc"] for r in clean_res]),
            "private_on_raw_labels": _summary([r["test_acc"] for r in private_res]),
            "feature_only_on_raw_labels": _summary([r["test_acc"] for r in floor_res]),
            **extra_raw,
            "selected_on_raw_labels": _summary([r["test_acc"] for r in chosen]),
            "gnn_vs_feature_only_on_raw_labels": paired_test([r["test_acc"] for r in private_res],
                                                             [r["test_acc"] for r in floor_res]),
        },
    }


def _summary(accs: list[float]) -> dict[str, Any]:
    a = np.asarray(accs, dtype=np.float64)
    return {
        "test_acc_mean": float(a.mean()),
        "test_acc_std": float(a.std(ddof=1)) if len(a) > 1 else 0.0,
        "test_acc": [float(v) for v in a],
    }


def select_by_validation(candidates: Sequence[tuple[str, dict[str, Any]]]) -> tuple[str, dict[str, Any]]:
    """The ``(name, result)`` of highest ``val_acc`` (accuracy on the version's own validation
    labels); ties go to the earlier candidate (list the simpler models first: the floor, the
    public edges alone, then the GNN)."""
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
