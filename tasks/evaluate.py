"""Evaluate: train the GNN on the private graph and on the clean graph, same split and seeds; or,
at scale, on a staged partitioned version's parts on the executor's workers."""

from __future__ import annotations

from typing import Any

import numpy as np
from prefect import get_run_logger, task
from prefect.cache_policies import NO_CACHE

from privgraph.config.pipeline import EvaluateConfig, PipelineConfig
from privgraph.evaluate.metrics import version_metrics
from privgraph.graph import GraphData
from privgraph.evaluate.graph_utility import graph_utility_report
from privgraph.config.disclosure import Disclosure
from privgraph.evaluate.scale_metrics import METHOD_NAME, version_metrics_at_scale
from privgraph.storage.staging import PendingVersion
from tasks.observe import logged_executor, prefect_progress


@task(name="evaluate", cache_policy=NO_CACHE, persist_result=False)
def evaluate(
    private: GraphData,
    clean: GraphData,
    config: PipelineConfig,
    manifest: dict[str, Any] | None,
    seed_entropy: int | None,
) -> dict[str, Any]:
    """:func:`privgraph.evaluate.metrics.version_metrics` with the raw graph (its owner's figures too).
    Progress (``training k/N, ETA``: clean and private model per run) goes to the task's log and
    the process's listeners."""
    return version_metrics(private, config, manifest, seed_entropy, clean=clean, progress=prefect_progress())


@task(name="attacks", cache_policy=NO_CACHE, persist_result=False)
def attacks(
    private: GraphData,
    clean: GraphData,
    config: EvaluateConfig,
    seed: np.random.SeedSequence,
    label_epsilon: float | None = None,
    label_classes: int | None = None,
    feature_mechanism: Any | None = None,
    public_feature_rows: np.ndarray | None = None,
) -> dict[str, Any]:
    """The configured attacks on a model of the version and one of the raw graph (private
    evaluation); progress (queries, attacks) as for training."""
    from privgraph.evaluate.attacks import run_attacks  # lazy: torch; the flow at scale imports this module

    return run_attacks(
        private, clean, config.attacks, seed_sequence=seed, progress=prefect_progress(),
        feature_mechanism=feature_mechanism, public_feature_rows=public_feature_rows,
        label_epsilon=label_epsilon, label_classes=label_classes, **config.train_kwargs(),
    )


@task(name="graph-report", cache_policy=NO_CACHE, persist_result=False)
def graph_report(private: GraphData, clean: GraphData, seed: np.random.SeedSequence) -> dict[str, Any]:
    """The released edges' structure against the raw graph's (private evaluation)."""
    return graph_utility_report(clean.edges("all"), private.edges("all"), clean.num_nodes, np.random.default_rng(seed))


@task(name="evaluate-at-scale", cache_policy=NO_CACHE, persist_result=False)
def evaluate_at_scale(store: str, version: PendingVersion | tuple[str, str], config: PipelineConfig,
                      disclosure: Disclosure, seed_entropy: int | None, name: str) -> dict[str, Any]:
    """:func:`privgraph.evaluate.scale_metrics.version_metrics_at_scale` of a partitioned version:
    a staged one (``PendingVersion``: its objects verified against the staging's checksums) or a
    published ``(pipeline, version)`` (against its manifest), trained on the pipeline's executor
    (one task per run, one for the public-only reference); the shareable metrics."""
    pipeline, vid, staged = ((version.pipeline, version.version, dict(version.objects))
                             if isinstance(version, PendingVersion) else (*version, None))
    with logged_executor(config.executor, config.dask, name) as ex:
        metrics = version_metrics_at_scale(store, pipeline, vid, config.evaluate, seed_entropy, disclosure, ex,
                                           staged=staged)
    get_run_logger().info("evaluated at scale: %s over %d parts, %d runs", METHOD_NAME,
                          metrics["evaluation"]["parts"], metrics["runs"])
    return metrics
