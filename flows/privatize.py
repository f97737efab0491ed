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

import datetime as dt
from typing import Any

from prefect import flow

from flows.privatize_at_scale import privatize_at_scale
from flows.publication import announce, checkpoint_and_stage, evaluate_and_publish, staging_area
from flows.reporting import label_flow_run, pipeline_tags, publish_ledger
from flows.termination import import_what_a_subflow_imports, redeliver_termination_lost_in_callbacks
from privgraph.config.disclosure import disclosure_of
from privgraph.config.loader import load_config
from privgraph.evaluate.metrics import check_evaluable, evaluation_entropy, evaluation_problem
from privgraph.errors import ValidationFailedError
from privgraph.publish.publication import build_manifest
from privgraph.storage.private_record import input_identity
from privgraph.seeding import as_seed_sequence, stage_seed
from privgraph.validate.preflight import check_before_reading, planned_ledger, resolve_store, take_checked
from tasks.embed import ingest_with_features
from tasks.partition import partition
from tasks.privatize import privatize
from tasks.scores import scores


@flow(name="privatize", flow_run_name="{pipeline}")
def privatize_flow(
    pipeline: str = "cora",
    config_path: str = "pipelines.yaml",
    store: str | None = None,
    evaluate: bool = True,
) -> dict[str, Any]:
    """Privatize the pipeline's graph and publish a version; returns version, ledger, metrics."""
    redeliver_termination_lost_in_callbacks()  # a served run's SIGTERM must not vanish in a GC callback
    if evaluate:  # the evaluate subflow's first import, before the run rather than in the middle of it
        import_what_a_subflow_imports()
    checked = take_checked(config_path, pipeline, store, evaluate)  # the CLI's load and preflight, done once
    cfgs = checked.config if checked is not None else load_config(config_path)
    cfg = cfgs.get(pipeline)
    disclosure = disclosure_of(cfgs, pipeline)  # the one declaration of what is public
    store_uri = checked.store if checked is not None else resolve_store(cfg, store)
    label_flow_run(tags=pipeline_tags(pipeline, cfg))
    if checked is None:
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
        check_evaluable(graph, cfg.dataset.name, cfg.dataset.options)
        not_evaluated = None
    else:
        not_evaluated = evaluation_problem(graph, cfg.dataset.name, cfg.dataset.options) or "--no-evaluate"
    parts = partition(graph, cfg.partitions)
    theta_scores = None
    if cfg.scores is not None:
        # the scores receive the declared-public rows only: a graph of those rows, nothing else
        theta_scores = scores(disclosure.public_rows(graph), cfg.scores, stage_seed(root, "scores"), cfg.embed, cfg.dataset.root)
    # the staging time is fixed here, once: a retried stage resumes the same version id
    created = dt.datetime.now(dt.timezone.utc)
    with staging_area(store_uri, pipeline, created, cfg.partitions.layout == "files") as area:
        result = privatize(graph, parts, cfg, stage_seed(root, "privatize"), None if theta_scores is None else theta_scores.theta,
                           name=pipeline, parts_area=area)
        if theta_scores is not None and theta_scores.guarantee is not None:
            # private labels randomized to train the SHAP surrogate: charged to the labels scope
            result.ledger.record(theta_scores.ledger_entry(tuple(range(len(parts.parts)))))
        report, pending = checkpoint_and_stage(pipeline, cfg, store_uri, result, created, area, graph=result.graph)

    def evaluation() -> tuple[Any, Any]:
        from flows.evaluate import evaluate_flow, feature_release_of  # torch: only where a model trains

        ev = evaluate_flow(
            pipeline=pipeline, version=pending.version, config_path=config_path,
            store=store_uri, staged=True, seed_entropy=evaluation_entropy(cfg.seed),  # never the seed
            feature_release=feature_release_of(result.ledger.to_dict()),
        )
        return ev["metrics"], ev["private_evaluation"]

    def manifest(metrics: Any) -> dict[str, Any]:
        return build_manifest(
            pipeline=pipeline, config=cfg, disclosure=disclosure, graph_in=graph, result=result,
            validation=report.to_dict(), metrics=metrics, scores=None if theta_scores is None else theta_scores.provenance,
            embed=embed_record,
        )

    def record(private_evaluation: Any) -> dict[str, Any]:
        return {
            "input_identity": input_identity(graph, cfg.private_records),
            "private_evaluation": private_evaluation,
            # covered by the guarantees, but not in the stored objects: the owner's (see PrivatizationResult)
            "release": {k: v for k, v in result.release.items() if v} or None,
            **result.private_record,
        }

    version, metrics, record_path = evaluate_and_publish(pipeline, cfg, pending, evaluation if evaluate else None,
                                                         manifest, record)
    return announce(pipeline, version, store_uri, result.ledger.to_dict(), report, metrics, not_evaluated, record_path)
