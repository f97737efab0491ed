"""The ``privatize`` flow: ingest -> (embed) -> partition -> (scores) -> privatize -> validate -> store.

Data objects are staged first; the manifest (ledger, parameters, the PUBLIC input fingerprint,
what is declared public, code version, validation and, when ``evaluate`` is on, the shareable
metrics of the ``evaluate`` flow run on the staged objects) is written last. What is computed
from raw data and covered by no guarantee (the clean graph's accuracy, the MCMC trace, the keyed
identity of the input) goes to the owner's private record, written before the manifest. A failed
checkpoint stages nothing (with ``partitions.layout: files`` the partitions' tasks have written
their objects into a parts area of the store by then, which is removed); a failure after staging
leaves no visible version and no record.

A ``partitioned`` dataset in the files layout takes the path of :mod:`flows.privatize_at_scale`:
the graph is read by the executor's tasks only, never here, and evaluated there at scale.

In the Prefect UI the run is ``<pipeline>``, renamed ``<pipeline>/<version>`` once the
version is staged (Prefect's own closing log line keeps the first name: it never says "staging"
after publishing), tagged ``privgraph``, ``pipeline:<name>``, ``mechanism:<name>``,
``scope:<scope>``; it carries one ledger (``<pipeline>-ledger``: the published one, or the refused
one when validation refuses it) and, once the version is published, its metrics
(``<pipeline>-metrics``), exactly as the manifest holds them.
"""

from __future__ import annotations

import contextlib
import datetime as dt
from pathlib import Path
from typing import Any

from prefect import flow, get_run_logger

from flows.privatize_at_scale import privatize_at_scale
from flows.reporting import label_flow_run, pipeline_tags, publish_ledger, publish_metrics
from flows.termination import redeliver_termination_lost_in_callbacks
from privgraph.config.disclosure import disclosure_of
from privgraph.guarantee.ledger import BudgetPolicy, LedgerEntry
from privgraph.config.loader import load_config
from privgraph.evaluate.metrics import check_evaluable, evaluation_entropy, evaluation_problem
from privgraph.seeding import as_seed_sequence, stage_seed
from privgraph.publish.publication import build_manifest
from privgraph.errors import ValidationFailedError
from privgraph.validate.preflight import check_before_reading, planned_ledger, resolve_store
from privgraph.publish.storage import open_store
from privgraph.publish.storage.parts import open_parts_area
from privgraph.publish.storage.private_record import input_identity, write_private_record
from privgraph.validate import enforce
from tasks.embed import ingest_with_features
from tasks.partition import partition
from tasks.privatize import privatize
from tasks.scores import scores
from tasks.store import publish, stage
from tasks.validate import validate


@flow(name="privatize", flow_run_name="{pipeline}")
def privatize_flow(
    pipeline: str = "cora",
    config_path: str = "pipelines.yaml",
    store: str | None = None,
    evaluate: bool = True,
) -> dict[str, Any]:
    """Privatize the pipeline's graph and publish a version; returns version, ledger, metrics."""
    redeliver_termination_lost_in_callbacks()  # a served run's SIGTERM must not vanish in a GC callback
    cfgs = load_config(config_path)
    cfg = cfgs.get(pipeline)
    disclosure = disclosure_of(cfgs, pipeline)  # the one declaration of what is public
    store_uri = resolve_store(cfg, store)
    label_flow_run(tags=pipeline_tags(pipeline, cfg))
    try:  # budget caps, store, private records, input files: before any data is read
        check_before_reading(cfg, store_uri, evaluate=evaluate)
    except ValidationFailedError:  # the caps refuse the configured mechanisms: their ledger, in the UI
        publish_ledger(pipeline, None, planned_ledger(cfg).to_dict(), None)
        raise
    root = as_seed_sequence(cfg.seed)  # None: fresh OS entropy; never written anywhere
    if cfg.runs_at_scale:  # a partitioned graph that only the executor's tasks read
        return privatize_at_scale(pipeline, cfg, store_uri, disclosure, root, evaluate)

    graph, embed_record = ingest_with_features(cfg, pipeline)  # image graphs: ResNet-50 embeddings become the features
    if evaluate:  # labels and a split, or a one-line refusal before anything is privatized
        check_evaluable(graph, cfg.dataset.name)
        not_evaluated = None
    else:
        not_evaluated = evaluation_problem(graph, cfg.dataset.name) or "--no-evaluate"
    parts = partition(graph, cfg.partitions)
    theta_scores = None
    if cfg.scores is not None:
        # the scores receive the declared-public rows only: a graph of those rows, nothing else
        theta_scores = scores(disclosure.public_rows(graph), cfg.scores, stage_seed(root, "scores"), cfg.embed, cfg.dataset.root)
    result, report, pending = _privatize_validate_stage(pipeline, cfg, store_uri, graph, parts, root, theta_scores)
    label_flow_run(name=f"{pipeline}/{pending.version}")
    get_run_logger().info("staged %s/%s in %s (invisible until its manifest is written)", pipeline, pending.version, store_uri)
    provenance = {"scores": None if theta_scores is None else theta_scores.provenance, "embed": embed_record}
    version, metrics, record_path = _evaluate_and_publish(
        pipeline, cfg, config_path, store_uri, disclosure, graph, result, report.to_dict(), pending, provenance, evaluate)
    get_run_logger().info("published %s/%s", pipeline, version)
    publish_ledger(pipeline, version, result.ledger.to_dict(), report.to_dict())
    if metrics is not None:
        publish_metrics(pipeline, version, metrics)  # the manifest's metrics, on this (parent) run
    return {
        "pipeline": pipeline,
        "version": version,
        "store": str(store_uri),
        "ledger": result.ledger.to_dict(),
        "validation": {"success": report.success},
        "metrics": metrics,
        "not_evaluated": not_evaluated,  # why this version has no metrics (None: it has them)
        "private_record": None if record_path is None else str(record_path),
    }


def _privatize_validate_stage(pipeline: str, cfg: Any, store_uri: str, graph: Any, parts: Any, root: Any,
                              theta_scores: Any) -> tuple[Any, Any, Any]:
    """privatize -> validate -> stage: ``(result, report, pending)``; a refusal (exit 3) publishes
    the refused ledger to the UI and leaves nothing in the store."""
    # the staging time is fixed here, once: a retried stage resumes the same version id. With
    # partitions.layout files the partitions' tasks write the version's objects into a parts area
    # of the store, which a refusal or failure before the commit removes
    created = dt.datetime.now(dt.timezone.utc)
    area = open_parts_area(open_store(store_uri), pipeline, created) if cfg.partitions.layout == "files" else None
    try:
        result = privatize(graph, parts, cfg, stage_seed(root, "privatize"), None if theta_scores is None else theta_scores.theta,
                           name=pipeline, parts_area=area)
        if theta_scores is not None and theta_scores.guarantee is not None:
            # private labels randomized to train the SHAP surrogate: charged to the labels scope
            result.ledger.record(LedgerEntry(
                stage="scores.labels", mechanism="label_rr", guarantee=theta_scores.guarantee,
                partitions=tuple(range(len(parts.parts))), params={"epsilon": theta_scores.guarantee.epsilon},
            ))
        policy = BudgetPolicy(cfg.budget, cfg.budget_delta)
        report = validate(result.graph, result.ledger, policy, result.stats.get("feature_range"), result.summaries)
        try:
            enforce(report)  # exit code 3, nothing written
        except BaseException:
            publish_ledger(pipeline, None, result.ledger.to_dict(), report.to_dict())  # the refused ledger, in the UI
            raise
        pending = stage(store_uri, pipeline, result.graph, created, area, result.parts)
    except BaseException:
        if area is not None:
            area.abort()
        raise
    return result, report, pending


def _evaluate_and_publish(pipeline: str, cfg: Any, config_path: str, store_uri: str, disclosure: Any, graph: Any,
                          result: Any, validation: dict[str, Any], pending: Any, provenance: dict[str, Any],
                          evaluate: bool) -> tuple[str, dict[str, Any] | None, Path | None]:
    """evaluate (the staged version) -> the owner's private record -> publish:
    ``(version, metrics, record path)``; a failure aborts the staged version and removes the record."""
    record_path: Path | None = None
    try:
        metrics = private_evaluation = None
        if evaluate:
            from flows.evaluate import evaluate_flow, feature_release_of  # torch: only where a model trains

            ev = evaluate_flow(
                pipeline=pipeline, version=pending.version, config_path=config_path,
                store=store_uri, staged=True, seed_entropy=evaluation_entropy(cfg.seed),  # never the seed
                feature_release=feature_release_of(result.ledger.to_dict()),
            )
            metrics, private_evaluation = ev["metrics"], ev["private_evaluation"]
        manifest = build_manifest(
            pipeline=pipeline, config=cfg, disclosure=disclosure, graph_in=graph, result=result,
            validation=validation, metrics=metrics, scores=provenance["scores"], embed=provenance["embed"],
        )
        record_path = write_private_record(cfg.private_records, pipeline, pending.version, {
            "input_identity": input_identity(graph, cfg.private_records),
            "private_evaluation": private_evaluation,
            # covered by the guarantees, but not in the stored objects: the owner's (see PrivatizationResult)
            "release": {k: v for k, v in result.release.items() if v} or None,
            **result.private_record,
        })
        version = publish(pending, manifest, str(cfg.private_records))
    except BaseException:
        pending.abort()
        if record_path is not None:
            with contextlib.suppress(OSError):
                record_path.unlink()
        raise
    return version, metrics, record_path
