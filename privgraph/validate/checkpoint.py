"""The privacy-budget and output validation checkpoint (great-expectations).

Two expectation suites run in one ephemeral great-expectations context before anything is
published:

* ``budget``: one row per ledger scope with the spent epsilon and delta (composed by
  :class:`~privgraph.guarantee.ledger.PrivacyLedger`) and the caps of the pipeline's
  :class:`~privgraph.guarantee.budget.BudgetPolicy`; every scope that spends must have a cap, and
  spent <= cap; a scope spends delta > 0 only under its delta cap (``budget_delta``).
* ``output``: the released edges are canonical (``0 <= src < dst < n``) and the released features
  are finite and lie in the mechanisms' output range ([0, 1] for the feature mechanisms), checked
  over one summary per partition of the release (:mod:`privgraph.privatize.summary`: computed
  where the part is, so a partitioned release is never read back for it).

The result is a JSON-safe :class:`ValidationReport` for the manifest; ``ValidationFailedError``
(exit code 3) is raised by :func:`enforce` when it failed.
"""

from __future__ import annotations

import dataclasses
import logging
import os
from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd

from privgraph.guarantee.budget import BudgetPolicy
from privgraph.guarantee.ledger import PrivacyLedger
from privgraph.errors import ValidationFailedError
from privgraph.graph import GraphData
from privgraph.privatize.summary import SUMMARY_FIELDS, release_summary

__all__ = ["ValidationReport", "budget_failures", "run_checkpoint", "run_checkpoint_from_summaries", "enforce"]


@dataclasses.dataclass(frozen=True)
class ValidationReport:
    success: bool
    results: list[dict[str, Any]]
    budget: list[dict[str, Any]]

    def to_dict(self) -> dict[str, Any]:
        return {"success": self.success, "results": self.results, "budget": self.budget}

    def failures(self) -> list[str]:
        """One readable line per problem: budget rows first, then other failed expectations."""
        out = []
        for b in self.budget:
            where = f"scope {b['scope']} ({b['kind']})"
            if b["spent"] is None:
                out.append(f"{where}: its ledger entries cannot be composed into one epsilon")
            elif b["cap"] is None:
                out.append(f"{where}: spends epsilon {b['spent']:g} but pipelines.yaml sets no budget cap for it")
            elif b["spent"] > b["cap"]:
                out.append(f"{where}: spent epsilon {b['spent']:g} exceeds the cap {b['cap']:g}")
            if b["spent"] is not None and b["cap"] is not None and b["delta_spent"] > b["delta_cap"]:
                cap = f"the delta cap {b['delta_cap']:g}" if b["delta_cap"] else "no delta cap (budget_delta): pure DP only"
                out.append(f"{where}: spent delta {b['delta_spent']:g} exceeds {cap}")
        out += [
            f"{r['suite']}.{r['expectation']}: {r['detail']}"
            for r in self.results
            if not r["success"] and r["suite"] != "budget"
        ]
        return out


def _budget_rows(ledger: PrivacyLedger, policy: BudgetPolicy) -> list[dict[str, Any]]:
    rows = []
    delta_caps = policy.delta_caps
    for row in ledger.summary():
        cap = policy.caps.get(row["scope"])
        delta_cap = delta_caps.get(row["scope"])
        rows.append(
            {
                "scope": row["scope"],
                "kind": row["kind"],
                # None: the scope's entries cannot be composed into one number (fails below)
                "spent": float("nan") if row["epsilon"] is None else float(row["epsilon"]),
                "cap": float("nan") if cap is None else float(cap),
                "delta_spent": float("nan") if row["delta"] is None else float(row["delta"]),
                # a capped scope without a delta cap admits pure DP only
                "delta_cap": float("nan") if delta_cap is None else float(delta_cap),
            }
        )
    return rows


def budget_failures(ledger: PrivacyLedger, policy: BudgetPolicy) -> list[str]:
    """What the checkpoint's ``budget`` suite would refuse in ``ledger`` under ``policy`` (a scope
    that spends without a cap, over its cap, or delta over its delta cap), in its words; no
    great-expectations context, so that a run can check its configuration before reading data.

    >>> from privgraph.guarantee import Guarantee, Scope
    >>> from privgraph.guarantee.ledger import LedgerEntry
    >>> g = Guarantee("feature_ldp", 2.0, Scope.FEATURES)
    >>> ledger = PrivacyLedger([LedgerEntry("features", "piecewise", g)])
    >>> budget_failures(ledger, BudgetPolicy({"features": 4.0}))
    []
    >>> len(budget_failures(ledger, BudgetPolicy({"features": 1.0})))
    1
    """
    rows = _budget_rows(ledger, policy)
    for r in rows:
        for k in ("cap", "spent", "delta_cap", "delta_spent"):
            if r[k] != r[k]:
                r[k] = None
    return ValidationReport(success=False, results=[], budget=rows).failures()


def _context() -> Any:
    os.environ.setdefault("GX_ANALYTICS_ENABLED", "false")
    import great_expectations as gx  # lazy: great_expectations (~2 s), only where the checkpoint runs

    logging.getLogger("great_expectations").setLevel(logging.ERROR)
    ctx = gx.get_context(mode="ephemeral")
    try:
        from great_expectations.data_context.types.base import ProgressBarsConfig  # lazy: as gx above

        ctx.variables.progress_bars = ProgressBarsConfig(globally=False)
    except Exception:  # progress bars are cosmetic; older/newer layouts may differ
        pass
    return ctx


def _run_suite(ctx: Any, name: str, df: Any, expectations: list[Any]) -> list[dict[str, Any]]:
    import great_expectations as gx  # lazy: great_expectations, only where the checkpoint runs

    ds = ctx.data_sources.add_pandas(f"privgraph-{name}")
    batch_def = ds.add_dataframe_asset(name=name).add_batch_definition_whole_dataframe("all")
    suite = ctx.suites.add(gx.ExpectationSuite(name=name, expectations=expectations))
    vd = ctx.validation_definitions.add(gx.ValidationDefinition(name=name, data=batch_def, suite=suite))
    result = vd.run(batch_parameters={"dataframe": df})
    out = []
    for r in result.results:
        res = r.result or {}
        detail = ""
        if not r.success:
            bad = res.get("partial_unexpected_list") or []
            detail = f"{res.get('unexpected_count', '?')} unexpected, e.g. {bad[:3]}"
        out.append(
            {
                "suite": name,
                "expectation": r.expectation_config.type,
                "kwargs": {k: v for k, v in r.expectation_config.kwargs.items() if k != "batch_id"},
                "success": bool(r.success),
                "detail": detail,
            }
        )
    return out


def run_checkpoint(
    graph: GraphData,
    ledger: PrivacyLedger,
    policy: BudgetPolicy,
    *,
    feature_range: tuple[float, float] | None = None,
) -> ValidationReport:
    """Validate the budget spent and the released graph held in memory: the checkpoint over one
    summary of the whole release (:func:`run_checkpoint_from_summaries`); nothing is raised here
    (see :func:`enforce`). ``feature_range`` is the feature mechanism's output range when it has
    one (FeatureRR's grid lies in [1/k, 1]); unbiased estimators (Laplace, Piecewise, ...) have none."""
    summary = release_summary(graph.edges("all"), graph.x, graph.num_nodes)
    return run_checkpoint_from_summaries([summary], ledger, policy, feature_range=feature_range)


def run_checkpoint_from_summaries(
    summaries: Sequence[Mapping[str, Any]],
    ledger: PrivacyLedger,
    policy: BudgetPolicy,
    *,
    feature_range: tuple[float, float] | None = None,
) -> ValidationReport:
    """The checkpoint over per-partition summaries of the release
    (:func:`privgraph.privatize.summary.release_summary`, computed where each part is): the
    ``budget`` suite over the ledger, ``output-edges`` (no edge out of ``[0, n)``, none with
    ``dst <= src``) and, with ``feature_range``, ``output-features`` (every released entry finite
    and inside the range) over one row per partition. The verdict equals the whole release's; a
    failure's detail counts the failing partitions and shows their counts or extremes. Nothing is
    raised here (see :func:`enforce`)."""
    import great_expectations as gx  # lazy: great_expectations, only where the checkpoint runs

    ctx = _context()
    budget = _budget_rows(ledger, policy)
    budget_df = pd.DataFrame(budget, columns=["scope", "kind", "spent", "cap", "delta_spent", "delta_cap"])
    results = _run_suite(ctx, "budget", budget_df, [
        gx.expectations.ExpectColumnValuesToNotBeNull(column="cap"),
        gx.expectations.ExpectColumnValuesToNotBeNull(column="spent"),
        gx.expectations.ExpectColumnValuesToBeBetween(column="spent", min_value=0),
        gx.expectations.ExpectColumnPairValuesAToBeGreaterThanB(column_A="cap", column_B="spent", or_equal=True),
        gx.expectations.ExpectColumnPairValuesAToBeGreaterThanB(
            column_A="delta_cap", column_B="delta_spent", or_equal=True),
    ])
    parts = pd.DataFrame([{"part": i, **{k: s.get(k) for k in SUMMARY_FIELDS}} for i, s in enumerate(summaries)],
                         columns=["part", *SUMMARY_FIELDS])
    results += _run_suite(ctx, "output-edges", parts, [
        gx.expectations.ExpectColumnValuesToBeBetween(column="edges_out_of_range", min_value=0, max_value=0),
        gx.expectations.ExpectColumnValuesToBeBetween(column="edges_not_increasing", min_value=0, max_value=0),
    ])
    rows = parts[parts["x_min"].notna() | (parts["x_nonfinite"] > 0)]
    if feature_range is not None and len(rows):
        lo, hi = feature_range
        results += _run_suite(ctx, "output-features", rows.astype({"x_min": float, "x_max": float}), [
            gx.expectations.ExpectColumnValuesToBeBetween(column="x_nonfinite", min_value=0, max_value=0),
            gx.expectations.ExpectColumnValuesToBeBetween(column="x_min", min_value=lo, max_value=hi),
            gx.expectations.ExpectColumnValuesToBeBetween(column="x_max", min_value=lo, max_value=hi),
        ])
    for r in budget:  # JSON-safe: NaN is written as null
        for k in ("cap", "spent", "delta_cap", "delta_spent"):
            if r[k] != r[k]:
                r[k] = None
    return ValidationReport(success=all(r["success"] for r in results), results=results, budget=budget)


def enforce(report: ValidationReport) -> None:
    """Raise ValidationFailedError (exit code 3) naming every failed expectation."""
    if not report.success:
        raise ValidationFailedError("validation checkpoint failed: " + "; ".join(report.failures()))
