"""Validate: the great-expectations checkpoint over the ledger and the released graph."""

from __future__ import annotations

from prefect import task
from prefect.cache_policies import NO_CACHE

from privgraph.guarantee.ledger import BudgetPolicy, PrivacyLedger
from privgraph.graph import GraphData
from privgraph.validate import ValidationReport, run_checkpoint


@task(name="validate", cache_policy=NO_CACHE, persist_result=False)
def validate(
    graph: GraphData, ledger: PrivacyLedger, policy: BudgetPolicy, feature_range: list[float] | None = None
) -> ValidationReport:
    return run_checkpoint(graph, ledger, policy, feature_range=None if feature_range is None else tuple(feature_range))
