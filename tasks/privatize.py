"""Privatize: run the configured mechanisms per partition on the pipeline's executor (a graph in
this process, or a partitioned graph that only the executor's tasks read)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
from prefect import get_run_logger, task
from prefect.cache_policies import NO_CACHE

from privgraph.config.disclosure import Disclosure
from privgraph.config.pipeline import PipelineConfig
from privgraph.evaluate.release_encoder import encoder_on
from privgraph.graph import GraphData
from privgraph.ingest.partitioned_graph import PartitionedGraph
from privgraph.privatize.partitioned_release import PartitionedGraphRelease, privatize_partitioned_graph
from privgraph.mechanisms import build_mechanism
from privgraph.parts.partition import Partitioning
from privgraph.privatize.partitioned import privatize_through_files
from privgraph.privatize.release import PrivatizationResult, privatize_graph
from privgraph.publish.input_digests import input_digests
from privgraph.publish.release_parts import parts_writer
from privgraph.storage.parts import PartsArea
from privgraph.storage.private_record import owner_key, private_refusals
from tasks.observe import logged_executor
from tasks.partition import describe_sizes, warn_if_capped


def _mechanisms(config: PipelineConfig, theta: np.ndarray | None) -> tuple[Any, Any, Any]:
    """The configured feature, edge and label mechanisms (None where a scope is not privatized);
    ``theta`` sets FeatureRR's per-feature budget shares."""
    fparams = None if config.features is None else config.features.params()
    if theta is not None and fparams is not None:
        fparams["theta"] = theta
    features = None if config.features is None else build_mechanism(config.features.mechanism, fparams)
    edges = None if config.edges is None else build_mechanism(config.edges.mechanism, config.edges.params())
    labels = None if config.labels is None else build_mechanism(config.labels.mechanism, config.labels.params())
    return features, edges, labels


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
    version's objects themselves (removed if this task fails)."""
    features, edges, labels = _mechanisms(config, theta)
    # a refusal's private detail goes to the owner's record here, before Prefect records (and may
    # persist) the failed task's exception: what leaves this task holds the shareable message only
    with private_refusals(config.private_records, name or "pipeline"), \
            logged_executor(config.executor, config.dask, name) as ex:
        if config.partitions.layout == "files":  # the owner's staging area: the input holds private rows
            with parts_writer(parts_area, executor=ex) as write_parts:
                return privatize_through_files(
                    graph, partitioning=partitioning, staging=Path(config.private_records) / "staging",
                    features=features, edges=edges, labels=labels, root_seed=root_seed, executor=ex,
                    write_parts=write_parts,
                )
        return privatize_graph(
            graph, features=features, edges=edges, labels=labels, partitioning=partitioning,
            root_seed=root_seed, executor=ex, encoder=encoder_on(config.evaluate.device),
        )


@task(name="privatize", cache_policy=NO_CACHE, persist_result=False)
def privatize_partitioned(
    graph: PartitionedGraph,
    config: PipelineConfig,
    root_seed: np.random.SeedSequence,
    disclosure: Disclosure,
    name: str,
    parts_area: PartsArea,
) -> tuple[PartitionedGraphRelease, str, str]:
    """A partitioned graph, never read in this process: its partition, release and version objects
    written by the executor's tasks (:func:`privgraph.privatize.partitioned_release.privatize_partitioned_graph`),
    then the public fingerprint of its input (a task) and the owner's keyed identity of it (here,
    where the owner's key stays), streamed side by side. Returns ``(release, fingerprint,
    identity)``; the identity is private-record material, never logged. A ``num_parts`` above the
    node count (``graph.json``'s) is capped in one warning before anything is written; the parts
    area is removed if the privatize step fails."""
    features, edges, labels = _mechanisms(config, None)
    warn_if_capped(config.partitions.num_parts, graph.num_nodes)
    with private_refusals(config.private_records, name), logged_executor(config.executor, config.dask, name) as ex:
        with parts_writer(parts_area, executor=ex) as write_parts:
            release = privatize_partitioned_graph(
                graph, num_parts=config.partitions.num_parts, method=config.partitions.method,
                staging=Path(config.private_records) / "staging", features=features, edges=edges, labels=labels,
                root_seed=root_seed, write_parts=write_parts, executor=ex,
            )
        get_run_logger().info("%d partitions (%s, from public edges only), nodes per partition: %s",
                              len(release.stats["partitions"]), release.stats["partition_method"],
                              describe_sizes(release.stats["partitions"]))
        fingerprint, identity = input_digests(graph, disclosure, owner_key(config.private_records), executor=ex)
    return release, fingerprint, "hmac-sha256:" + identity
