"""The ``privatize`` flow: ingest -> partition -> (scores) -> privatize -> validate -> store.

Data objects are staged first; the manifest (ledger, parameters, input fingerprint, code version,
validation and, when ``evaluate`` is on, the metrics of the ``evaluate`` flow run on the staged
objects) is written last. A failed checkpoint stages nothing; a failure after staging leaves no
visible version.
"""

from __future__ import annotations

from typing import Any

from prefect import flow

from flows.evaluate import evaluate_flow
from flows.reporting import publish_ledger
from privgraph.accounting import BudgetPolicy, LedgerEntry
from privgraph.config import load_config
from privgraph.seeding import as_seed_sequence, stage_seed
from privgraph.storage.manifest import build_manifest
from privgraph.storage.private_record import write_private_record
from privgraph.validation import enforce
from tasks.ingest import ingest
from tasks.partition import partition
from tasks.privatize import privatize
from tasks.scores import score
from tasks.store import publish, stage
from tasks.validate import validate


@flow(name="privatize")
def privatize_flow(
    pipeline: str = "cora",
    config_path: str = "pipelines.yaml",
    store: str | None = None,
    evaluate: bool = True,
) -> dict[str, Any]:
    """Privatize the pipeline's graph and publish a version; returns version, ledger, metrics."""
    cfg = load_config(config_path).get(pipeline)
    store_uri = store or cfg.storage
    root = as_seed_sequence(cfg.seed)  # None: fresh OS entropy; never written anywhere

    graph = ingest(cfg.dataset)
    parts = partition(graph, cfg.partitions)
    scores = None if cfg.scores is None else score(graph, cfg.scores, stage_seed(root, "scores"))
    result = privatize(graph, parts, cfg, stage_seed(root, "privatize"), None if scores is None else scores.theta)
    if scores is not None and scores.guarantee is not None:
        # private labels randomized to train the SHAP surrogate: charged to the labels scope
        result.ledger.record(LedgerEntry(
            stage="scores.labels", mechanism="label_rr", guarantee=scores.guarantee,
            partitions=tuple(range(len(parts.parts))), params={"epsilon": scores.guarantee.epsilon},
        ))
    policy = BudgetPolicy(cfg.budget)
    report = validate(result.graph, result.ledger, policy, result.stats.get("feature_range"))
    publish_ledger(pipeline, None, result.ledger.to_dict(), report.to_dict())
    enforce(report)  # exit code 3, nothing written

    pending = stage(store_uri, pipeline, result.graph)
    try:
        metrics = None
        if evaluate:
            metrics = evaluate_flow(
                pipeline=pipeline, version=pending.version, config_path=config_path,
                store=store_uri, staged=True, seed_entropy=None if cfg.seed is None else cfg.seed,
            )["metrics"]
        manifest = build_manifest(
            pipeline=pipeline, config=cfg, graph_in=graph, result=result,
            validation=report.to_dict(), metrics=metrics,
            scores=None if scores is None else scores.provenance,
        )
        version = publish(pending, manifest)
    except BaseException:
        pending.abort()
        raise
    publish_ledger(pipeline, version, result.ledger.to_dict(), report.to_dict())
    record = write_private_record(cfg.private_records, pipeline, version, result.private_record)
    return {
        "pipeline": pipeline,
        "version": version,
        "store": str(store_uri),
        "ledger": result.ledger.to_dict(),
        "validation": {"success": report.success},
        "metrics": metrics,
        "private_record": None if record is None else str(record),
    }
