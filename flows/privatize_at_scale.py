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

import datetime as dt
from typing import Any

from flows.publication import announce, checkpoint_and_stage, evaluate_and_publish, staging_area
from privgraph.config.pipeline import PipelineConfig
from privgraph.errors import GraphValidationError
from privgraph.evaluate.metrics import evaluation_entropy
from privgraph.publish.publication import build_manifest
from privgraph.seeding import stage_seed
from tasks.ingest import ingest_partitioned
from tasks.privatize import privatize_partitioned


def privatize_at_scale(pipeline: str, cfg: PipelineConfig, store_uri: str, disclosure: Any, root: Any,
                       evaluate: bool) -> dict[str, Any]:
    """The flow's steps on this path (see the module); returns what ``privatize_flow`` returns."""
    graph = ingest_partitioned(cfg.dataset)
    if evaluate and not (graph.has_labels and graph.has_split):  # before anything is privatized
        raise GraphValidationError(
            f"dataset {cfg.dataset.name!r} has no {'labels' if not graph.has_labels else 'train/val/test split'}: "
            "evaluation needs labels and a split; write them with privgraph ingest or run with --no-evaluate")
    created = dt.datetime.now(dt.timezone.utc)  # fixed once: a retried stage resumes the same version id
    with staging_area(store_uri, pipeline, created, files=True) as area:
        release, fingerprint, identity = privatize_partitioned(graph, cfg, stage_seed(root, "privatize"), disclosure,
                                                               pipeline, area)
        report, pending = checkpoint_and_stage(pipeline, cfg, store_uri, release, created, area)

    def evaluation() -> tuple[Any, Any]:  # the staged parts, on the workers; the seed never leaves this process
        from tasks.evaluate import evaluate_at_scale  # torch: only where a model trains

        return evaluate_at_scale(store_uri, pending, cfg, disclosure, evaluation_entropy(cfg.seed), pipeline), None

    def manifest(metrics: Any) -> dict[str, Any]:
        return build_manifest(pipeline=pipeline, config=cfg, disclosure=disclosure, graph_in=None, result=release,
                              validation=report.to_dict(), input_fingerprint=fingerprint, metrics=metrics)

    def record(private_evaluation: Any) -> dict[str, Any]:
        return {
            "input_identity": identity,
            "private_evaluation": private_evaluation,  # at scale nothing is trained on the raw graph
            "release": {k: v for k, v in release.release.items() if v} or None,
        }

    version, metrics, record_path = evaluate_and_publish(pipeline, cfg, pending, evaluation if evaluate else None,
                                                         manifest, record)
    return announce(pipeline, version, store_uri, release.ledger.to_dict(), report, metrics,
                    None if evaluate else "--no-evaluate", record_path)
