"""Partition: split the nodes into disjoint parts (public edges only)."""

from __future__ import annotations

from prefect import get_run_logger, task
from prefect.cache_policies import NO_CACHE

from privgraph.config.pipeline import PartitionConfig
from privgraph.graph import GraphData
from privgraph.parts.partition import Partitioning, partition_graph, parts_cap_note

_LIST_UP_TO = 16  # partition sizes listed one by one up to this many parts, summarized beyond


def describe_sizes(sizes: list[int]) -> str:
    """``677, 677, 676`` or, for many parts, ``min 10, median 12, max 15``."""
    if len(sizes) <= _LIST_UP_TO:
        return ", ".join(str(s) for s in sizes)
    ordered = sorted(sizes)
    return f"min {ordered[0]}, median {ordered[len(ordered) // 2]}, max {ordered[-1]}"


def warn_if_capped(num_parts: int, num_nodes: int) -> None:
    """One warning on the run's log when ``num_parts`` exceeds the node count (it is capped there:
    :func:`~privgraph.parts.partition.parts_cap_note`), before any part is written."""
    note = parts_cap_note(num_parts, num_nodes)
    if note is not None:
        get_run_logger().warning(note)


@task(name="partition", cache_policy=NO_CACHE, persist_result=False)
def partition(graph: GraphData, config: PartitionConfig) -> Partitioning:
    """Partitions from the public edges; their number and sizes (public: in the manifest's stats)
    are logged, and a ``num_parts`` above the node count is capped in one warning."""
    warn_if_capped(config.num_parts, graph.num_nodes)
    parts = partition_graph(graph, config.num_parts, config.method)
    sizes = parts.sizes()
    get_run_logger().info(
        "%d partitions (%s, from public edges only), nodes per partition: %s",
        len(sizes), parts.method, describe_sizes(sizes),
    )
    return parts
