"""The one publish/abort sequence of the privatize flow's two paths (the graph in the flow
process: :mod:`flows.privatize`; a partitioned graph only the executor's tasks read:
:mod:`flows.privatize_at_scale`).

1. :func:`staging_area`: the store's parts area the partitions' tasks write into (layout ``files``),
   removed when anything before the commit fails;
2. :func:`checkpoint_and_stage`: the validation checkpoint over the release's ledger and summaries
   (a refusal publishes the refused ledger to the UI and ends with exit code 3), then the version
   staged (invisible until its manifest is written) and the flow run renamed
   ``<pipeline>/<version>``;
3. :func:`evaluate_and_publish`: the evaluation of the staged version, the manifest, the owner's
   private record, then the manifest written last: a failure anywhere aborts the staged version
   and removes the record, so nothing is visible;
4. :func:`announce`: the published ledger and metrics as the run's artifacts, and what the flow
   returns.
"""

from __future__ import annotations

import contextlib
import datetime as dt
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from prefect import get_run_logger

from flows.reporting import label_flow_run, publish_ledger, publish_metrics
from privgraph.config.pipeline import PipelineConfig
from privgraph.guarantee.redaction import redact_uri
from privgraph.guarantee.budget import BudgetPolicy
from privgraph.storage import open_store
from privgraph.storage.parts import PartsArea, open_parts_area
from privgraph.storage.private_record import write_private_record
from privgraph.storage.staging import PendingVersion
from privgraph.validate import enforce
from tasks.store import publish, stage
from tasks.validate import validate

__all__ = ["announce", "checkpoint_and_stage", "evaluate_and_publish", "staging_area"]


@contextlib.contextmanager
def staging_area(store_uri: str, pipeline: str, created: dt.datetime, files: bool) -> Iterator[PartsArea | None]:
    """The parts area of the version staged at ``created`` (``files``: the partitions' tasks write
    the version's objects themselves; else None), removed if the block fails."""
    area = open_parts_area(open_store(store_uri), pipeline, created) if files else None
    try:
        yield area
    except BaseException:
        if area is not None:
            area.abort()
        raise


def checkpoint_and_stage(pipeline: str, cfg: PipelineConfig, store_uri: str, release: Any, created: dt.datetime,
                         area: PartsArea | None, *, graph: Any = None) -> tuple[Any, PendingVersion]:
    """validate -> stage: ``(report, pending)``. ``release``: what the privatize stage returned (its
    ledger, summaries, stats and, in the files layout, the parts it wrote); ``graph``: the
    privatized graph when it is in this process (None at scale: the parts are committed unread).

    Raises:
        ValidationFailedError: the checkpoint refused the release (exit code 3); its ledger is in
            the UI, nothing is staged.
    """
    report = validate(graph, release.ledger, BudgetPolicy(cfg.budget, cfg.budget_delta),
                      release.stats.get("feature_range"), release.summaries)
    try:
        enforce(report)  # exit code 3, nothing written
    except BaseException:
        publish_ledger(pipeline, None, release.ledger.to_dict(), report.to_dict())  # the refused ledger, in the UI
        raise
    pending = stage(store_uri, pipeline, graph, created, area, release.parts,
                    num_nodes=None if graph is not None else release.num_nodes)
    label_flow_run(name=f"{pipeline}/{pending.version}")
    get_run_logger().info("staged %s/%s in %s (invisible until its manifest is written)", pipeline, pending.version,
                          redact_uri(store_uri))
    return report, pending


def evaluate_and_publish(pipeline: str, cfg: PipelineConfig, pending: PendingVersion,
                         evaluation: Callable[[], tuple[dict[str, Any] | None, dict[str, Any] | None]] | None,
                         manifest: Callable[[dict[str, Any] | None], dict[str, Any]],
                         record: Callable[[dict[str, Any] | None], dict[str, Any]]) -> tuple[str, dict[str, Any] | None, Path]:
    """evaluate (``evaluation()``: the shareable metrics and the owner's private evaluation; None:
    not evaluated) -> ``manifest(metrics)`` -> the owner's private record (``record(private
    evaluation)``) -> the manifest written last: ``(version, metrics, record path)``. A failure
    aborts the staged version and removes the record."""
    record_path: Path | None = None
    try:
        metrics, private_evaluation = evaluation() if evaluation is not None else (None, None)
        doc = manifest(metrics)
        record_path = write_private_record(cfg.private_records, pipeline, pending.version, record(private_evaluation))
        version = publish(pending, doc, str(cfg.private_records))
    except BaseException:
        pending.abort()
        if record_path is not None:
            with contextlib.suppress(OSError):
                record_path.unlink()
        raise
    get_run_logger().info("published %s/%s", pipeline, version)
    return version, metrics, record_path


def announce(pipeline: str, version: str, store_uri: str, ledger: dict[str, Any], report: Any,
             metrics: dict[str, Any] | None, not_evaluated: str | None, record_path: Path | None) -> dict[str, Any]:
    """The published ledger (and metrics) as the run's artifacts, exactly as the manifest holds
    them; returns what the privatize flow returns."""
    publish_ledger(pipeline, version, ledger, report.to_dict())
    if metrics is not None:
        publish_metrics(pipeline, version, metrics)  # the manifest's metrics, on this (parent) run
    return {
        "pipeline": pipeline,
        "version": version,
        "store": redact_uri(store_uri),
        "ledger": ledger,
        "validation": {"success": report.success},
        "metrics": metrics,
        "not_evaluated": not_evaluated,  # why this version has no metrics (None: it has them)
        "private_record": None if record_path is None else str(record_path),
    }
