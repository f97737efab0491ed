"""Compare: privatize one scope with each mechanism at each epsilon and train on each result."""

from __future__ import annotations

import numpy as np
from prefect import get_run_logger, task
from prefect.cache_policies import NO_CACHE

from privgraph.comparison import ComparisonResult, run_comparison
from privgraph.config import ComparisonConfig, PipelineConfig
from privgraph.graph import GraphData
from privgraph.parallel import open_executor
from privgraph.partition import Partitioning


@task(name="compare", cache_policy=NO_CACHE, persist_result=False)
def compare(
    graph: GraphData,
    partitioning: Partitioning,
    config: ComparisonConfig,
    pipeline: PipelineConfig,
    root_seed: np.random.SeedSequence,
    theta: np.ndarray | None = None,
) -> ComparisonResult:
    ev = config.evaluate or pipeline.evaluate
    train_kwargs = ev.model_dump(exclude={"runs"})
    d = pipeline.dask
    with open_executor(pipeline.executor, address=d.address, n_workers=d.n_workers,
                       threads_per_worker=d.threads_per_worker) as ex:
        return run_comparison(
            graph, scope=config.scope, mechanisms=config.mechanisms, epsilons=config.epsilons,
            runs=config.runs, target=config.target, partitioning=partitioning, root_seed=root_seed,
            executor=ex, train_kwargs=train_kwargs, progress=get_run_logger().info, theta=theta,
        )
