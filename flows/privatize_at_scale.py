"""The privatize flow's path for a graph that is never in the flow process: a ``partitioned``
dataset (``privgraph ingest``) with ``partitions.layout: files`` (``PipelineConfig.runs_at_scale``).

ingest (``graph.json`` only) -> partition, privatize and write the version's objects (the
executor's tasks: :func:`tasks.privatize.privatize_partitioned`) -> validate (the checkpoint over
the partitions' summaries) -> stage (the parts committed unread) -> evaluate (the staged version's
parts, on the executor's workers: :func:`tasks.evaluate.evaluate_at_scale`) -> the owner's private
record -> publish. The manifest's public fingerprint is streamed by a task; the record's keyed
identity here, side by side, one range at a time (the owner's key never leaves this process).
What the flow process holds: metadata, checksums, per-partition summaries, one range while it
computes the identity, and the evaluation's per-run scores.
"""

from __future__ import annotations

import contextlib
import datetime as dt
from pathlib import Path
from typing import Any

from prefect import get_run_logger

from flows.reporting import label_flow_run, publish_ledger, publish_metrics
from privgraph.config.pipeline import PipelineConfig
from privgraph.errors import GraphValidationError
from privgraph.evaluate.metrics import evaluation_entropy
from privgraph.guarantee.ledger import BudgetPolicy
from privgraph.publish.publication import build_manifest
from privgraph.publish.storage import open_store
from privgraph.publish.storage.parts import open_parts_area
from privgraph.publish.storage.private_record import write_private_record
from privgraph.seeding import stage_seed
from privgraph.validate import enforce
from tasks.ingest import ingest_partitioned
from tasks.privatize import privatize_partitioned
from tasks.store import publish, stage
from tasks.validate import validate


def _release_and_stage(pipeline: str, cfg: PipelineConfig, store_uri: str, disclosure: Any, root: Any,
                       evaluate: bool) -> tuple:
    """privatize -> validate -> stage: ``(release, fingerprint, identity, report, pending)``; a
    refusal publishes the refused ledger to the UI and leaves nothing in the store."""
    graph = ingest_partitioned(cfg.dataset)
    if evaluate and not (graph.has_labels and graph.has_split):  # before anything is privatized
        raise GraphValidationError(
            f"dataset {cfg.dataset.name!r} has no {'labels' if not graph.has_labels else 'train/val/test split'}: "
            "evaluation needs labels and a split; write them with privgraph ingest or run with --no-evaluate")
    created = dt.datetime.now(dt.timezone.utc)  # fixed once: a retried stage resumes the same version id
    area = open_parts_area(open_store(store_uri), pipeline, created)
    try:
        release, fingerprint, identity = privatize_partitioned(graph, cfg, stage_seed(root, "privatize"), disclosure,
                                                               pipeline, area)
        report = validate(None, release.ledger, BudgetPolicy(cfg.budget, cfg.budget_delta),
                          release.stats.get("feature_range"), release.summaries)
        try:
            enforce(report)  # exit code 3, nothing written
        except BaseException:
            publish_ledger(pipeline, None, release.ledger.to_dict(), report.to_dict())
            raise
        pending = stage(store_uri, pipeline, None, created, area, release.parts, num_nodes=release.num_nodes)
    except BaseException:
        area.abort()
        raise
    return release, fingerprint, identity, report, pending


def privatize_at_scale(pipeline: str, cfg: PipelineConfig, store_uri: str, disclosure: Any, root: Any,
                       evaluate: bool) -> dict[str, Any]:
    """The flow's steps on this path (see the module); returns what ``privatize_flow`` returns."""
    release, fingerprint, identity, report, pending = _release_and_stage(pipeline, cfg, store_uri, disclosure, root,
                                                                         evaluate)
    label_flow_run(name=f"{pipeline}/{pending.version}")
    get_run_logger().info("staged %s/%s in %s (invisible until its manifest is written)", pipeline, pending.version, store_uri)
    record_path: Path | None = None
    metrics = None
    try:
        if evaluate:  # the staged parts, on the workers; the seed never leaves this process
            from tasks.evaluate import evaluate_at_scale  # torch: only where a model trains

            metrics = evaluate_at_scale(store_uri, pending, cfg, disclosure, evaluation_entropy(cfg.seed), pipeline)
        manifest = build_manifest(pipeline=pipeline, config=cfg, disclosure=disclosure, graph_in=None, result=release,
                                  validation=report.to_dict(), input_fingerprint=fingerprint, metrics=metrics)
        record_path = write_private_record(cfg.private_records, pipeline, pending.version, {
            "input_identity": identity,
            "private_evaluation": None,  # at scale nothing is trained on the raw graph
            "release": {k: v for k, v in release.release.items() if v} or None,
        })
        version = publish(pending, manifest, str(cfg.private_records))
    except BaseException:
        pending.abort()
        if record_path is not None:
            with contextlib.suppress(OSError):
                record_path.unlink()
        raise
    get_run_logger().info("published %s/%s", pipeline, version)
    publish_ledger(pipeline, version, release.ledger.to_dict(), report.to_dict())
    if metrics is not None:
        publish_metrics(pipeline, version, metrics)  # the manifest's metrics, on this run
    return {
        "pipeline": pipeline, "version": version, "store": str(store_uri), "ledger": release.ledger.to_dict(),
        "validation": {"success": report.success}, "metrics": metrics,
        "not_evaluated": None if evaluate else "--no-evaluate",
        "private_record": str(record_path),
    }
