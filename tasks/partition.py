"""Partition: split the nodes into disjoint parts (public edges only)."""

from __future__ import annotations

from prefect import task
from prefect.cache_policies import NO_CACHE

from privgraph.config import PartitionConfig
from privgraph.graph import GraphData
from privgraph.partition import Partitioning, partition_graph


@task(name="partition", cache_policy=NO_CACHE, persist_result=False)
def partition(graph: GraphData, config: PartitionConfig) -> Partitioning:
    return partition_graph(graph, config.num_parts, config.method)
