"""Validate: the great-expectations checkpoint over the ledger and the released graph."""

from __future__ import annotations

from typing import Any

from prefect import task
from prefect.cache_policies import NO_CACHE

from privgraph.guarantee.budget import BudgetPolicy
from privgraph.guarantee.ledger import PrivacyLedger
from privgraph.graph import GraphData
from privgraph.validate import ValidationReport, run_checkpoint, run_checkpoint_from_summaries


@task(name="validate", cache_policy=NO_CACHE, persist_result=False)
def validate(
    graph: GraphData, ledger: PrivacyLedger, policy: BudgetPolicy, feature_range: list[float] | None = None,
    summaries: list[dict[str, Any]] | None = None,
) -> ValidationReport:
    """The checkpoint over the partitions' ``summaries`` when the partitions' tasks computed them
    (``partitions.layout: files``), else over ``graph``."""
    rng = None if feature_range is None else (float(feature_range[0]), float(feature_range[1]))
    if summaries is not None:
        return run_checkpoint_from_summaries(summaries, ledger, policy, feature_range=rng)
    return run_checkpoint(graph, ledger, policy, feature_range=rng)
