"""Privatize: run the configured mechanisms per partition on the pipeline's executor."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from prefect import task
from prefect.cache_policies import NO_CACHE

from privgraph.config.pipeline import PipelineConfig
from privgraph.graph import GraphData
from privgraph.privatize.mechanisms import build_mechanism
from privgraph.privatize.partition import Partitioning
from privgraph.privatize.partitioned import privatize_through_files
from privgraph.privatize.release import PrivatizationResult, privatize_graph
from privgraph.publish.storage.parts import PartsArea
from privgraph.publish.storage.private_record import private_refusals
from tasks.observe import logged_executor


@task(name="privatize", cache_policy=NO_CACHE, persist_result=False)
def privatize(
    graph: GraphData,
    partitioning: Partitioning,
    config: PipelineConfig,
    root_seed: np.random.SeedSequence,
    theta: np.ndarray | None = None,
    name: str | None = None,
    parts_area: PartsArea | None = None,
) -> PrivatizationResult:
    """The seed sequence is an argument: a retried run of this task re-draws the same noise.
    ``theta`` (from the scores stage) sets FeatureRR's per-feature budget shares. ``name``: the
    pipeline's, for the Dask dashboard's link artifact and the owner's record of a refusal.
    ``parts_area`` (layout ``files``): the store's area where the partitions' tasks write the
    version's objects themselves."""
    fparams = None if config.features is None else config.features.params()
    if theta is not None and fparams is not None:
        fparams["theta"] = theta
    features = None if config.features is None else build_mechanism(config.features.mechanism, fparams)
    edges = None if config.edges is None else build_mechanism(config.edges.mechanism, config.edges.params())
    labels = None if config.labels is None else build_mechanism(config.labels.mechanism, config.labels.params())
    # a refusal's private detail goes to the owner's record here, before Prefect records (and may
    # persist) the failed task's exception: what leaves this task holds the shareable message only
    with private_refusals(config.private_records, name or "pipeline"), \
            logged_executor(config.executor, config.dask, name) as ex:
        if config.partitions.layout == "files":  # the owner's staging area: the input holds private rows
            return privatize_through_files(
                graph, partitioning=partitioning, staging=Path(config.private_records) / "staging",
                features=features, edges=edges, labels=labels, root_seed=root_seed, executor=ex,
                parts_area=parts_area,
            )
        return privatize_graph(
            graph, features=features, edges=edges, labels=labels, partitioning=partitioning,
            root_seed=root_seed, executor=ex, device=config.evaluate.device,
        )
