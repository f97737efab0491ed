"""The privatize flow's path for a graph that is never in the flow process: a ``partitioned``
dataset (``privgraph ingest``) with ``partitions.layout: files`` and no evaluation.

ingest (``graph.json`` only) -> partition, privatize and write the version's objects (the
executor's tasks: :func:`tasks.privatize.privatize_partitioned`) -> validate (the checkpoint over
the partitions' summaries) -> stage (the parts committed unread) -> the owner's private record
-> publish. The manifest's public fingerprint and the record's keyed identity are streamed by a
task each. What the flow process holds: metadata, checksums and per-partition summaries.
"""

from __future__ import annotations

import contextlib
import datetime as dt
from pathlib import Path
from typing import Any

from prefect import get_run_logger

from flows.reporting import label_flow_run, publish_ledger
from privgraph.config.pipeline import PipelineConfig
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


def runs_at_scale(cfg: PipelineConfig, evaluate: bool) -> bool:
    """Whether the flow takes this path: a partitioned dataset in the files layout, not evaluated,
    without scores or embeddings (which read rows in the flow process); any other pipeline,
    a partitioned one included, takes the in-memory path."""
    return (cfg.dataset.name == "partitioned" and cfg.partitions.layout == "files" and not evaluate
            and cfg.scores is None and cfg.embed is None)


def _release_and_stage(pipeline: str, cfg: PipelineConfig, store_uri: str, disclosure: Any, root: Any) -> tuple:
    """privatize -> validate -> stage: ``(release, fingerprint, identity, report, pending)``; a
    refusal publishes the refused ledger to the UI and leaves nothing in the store."""
    graph = ingest_partitioned(cfg.dataset)
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


def privatize_at_scale(pipeline: str, cfg: PipelineConfig, store_uri: str, disclosure: Any, root: Any) -> dict[str, Any]:
    """The flow's steps on this path (see the module); returns what ``privatize_flow`` returns."""
    release, fingerprint, identity, report, pending = _release_and_stage(pipeline, cfg, store_uri, disclosure, root)
    label_flow_run(name=f"{pipeline}/{pending.version}")
    get_run_logger().info("staged %s/%s in %s (invisible until its manifest is written)", pipeline, pending.version, store_uri)
    record_path: Path | None = None
    try:
        manifest = build_manifest(pipeline=pipeline, config=cfg, disclosure=disclosure, graph_in=None, result=release,
                                  validation=report.to_dict(), input_fingerprint=fingerprint)
        record_path = write_private_record(cfg.private_records, pipeline, pending.version, {
            "input_identity": identity,
            "private_evaluation": None,
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
    return {
        "pipeline": pipeline, "version": version, "store": str(store_uri), "ledger": release.ledger.to_dict(),
        "validation": {"success": report.success}, "metrics": None, "not_evaluated": "--no-evaluate",
        "private_record": str(record_path),
    }
