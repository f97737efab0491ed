"""Compare: privatize one scope with each mechanism at each epsilon and train on each result."""

from __future__ import annotations

import numpy as np
from prefect import task
from prefect.cache_policies import NO_CACHE

from privgraph.evaluate.comparison import ComparisonResult, run_comparison
from privgraph.config.pipeline import ComparisonConfig, GraphComparisonConfig, PipelineConfig
from privgraph.ingest.datasets.graph_set import GraphSet
from privgraph.evaluate.graph_comparison import GraphComparisonResult, run_graph_comparison
from privgraph.graph import GraphData
from privgraph.parts.partition import Partitioning
from privgraph.storage.private_record import CellCheckpoint, private_refusals
from tasks.observe import logged_executor, prefect_progress


@task(name="compare", cache_policy=NO_CACHE, persist_result=False)
def compare(
    graph: GraphData,
    partitioning: Partitioning,
    config: ComparisonConfig,
    pipeline: PipelineConfig,
    root_seed: np.random.SeedSequence,
    theta: np.ndarray | None = None,
    name: str | None = None,
    checkpoint: CellCheckpoint | None = None,
) -> ComparisonResult:
    """Progress (clean baseline, then mechanism x epsilon x run cells, k/N with an ETA) goes to the
    task's log and the process's listeners; ``name``: the comparison's, for the Dask dashboard's
    link artifact; ``checkpoint``: finished runs kept and resumed (see run_comparison)."""
    ev = config.evaluate_settings(pipeline)
    train_kwargs = ev.train_kwargs()
    with private_refusals(pipeline.private_records, config.pipeline), \
            logged_executor(pipeline.executor, pipeline.dask, name) as ex:  # a refusal's detail: the owner's record
        return run_comparison(
            graph, scope=config.scope, mechanisms=config.mechanisms, epsilons=config.epsilons,
            runs=config.runs, target=config.target, partitioning=partitioning, root_seed=root_seed,
            executor=ex, train_kwargs=train_kwargs, progress=prefect_progress(), theta=theta, attacks=ev.attacks,
            checkpoint=checkpoint,
        )


@task(name="graph-compare", cache_policy=NO_CACHE, persist_result=False)
def graph_compare(
    graph_set: GraphSet, config: GraphComparisonConfig, root_seed: np.random.SeedSequence, name: str | None = None,
    checkpoint: CellCheckpoint | None = None,
) -> GraphComparisonResult:
    """Each mechanism x epsilon: the graphs privatized per graph on the configured executor (Dask:
    spread over its workers), then GIN-0 cross-validated; progress to the task's log."""
    with logged_executor(config.executor, config.dask, name) as ex:
        return run_graph_comparison(
            graph_set, mechanisms=config.mechanisms, epsilons=config.epsilons, target=config.target,
            root_seed=root_seed, folds=config.folds, epochs=config.epochs, executor=ex,
            device=config.device, progress=prefect_progress(), checkpoint=checkpoint,
        )
