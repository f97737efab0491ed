"""A partitioned graph privatized by tasks, the calling process holding metadata only: the
privatize stage of a graph larger than one machine.

:func:`privatize_partitioned_graph` chains, in a staging directory of the owner's:
:func:`~privgraph.privatize.partitioned_input.partitioned_input_from_graph` (the partition over the
public edges and the privatize stage's partitioned input, on tasks),
:func:`~privgraph.privatize.partitioned.privatize_partitioned` (each partition's mechanisms in its
own task) and the caller's ``write_parts`` (with
:func:`~privgraph.publish.release_parts.parts_writer`, each task writes its part of the version
into the store's parts area). What comes back is the ledger, the public run
facts, per-partition checksums and checkpoint summaries, and the released graph's counts: the same
ledger, stats, stored objects and counts as
:func:`~privgraph.privatize.partitioned.privatize_through_files` on
``load_partitioned_graph(path)`` with the same partitioning and seed (tested), without the graph
ever being in this process.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any, Literal

import numpy as np

from privgraph.guarantee.ledger import PrivacyLedger
from privgraph.ingest.partitioned_graph import PartitionedGraph
from privgraph.privatize.partitioned_input import partitioned_input_from_graph
from privgraph.parts.executor import Executor
from privgraph.privatize.partitioned import WriteParts, privatize_partitioned, staging_directory

__all__ = ["PartitionedGraphRelease", "privatize_partitioned_graph"]


@dataclasses.dataclass(frozen=True)
class PartitionedGraphRelease:
    """What the privatize stage of a partitioned graph hands on: the ``ledger``; ``stats`` and
    ``release`` as :class:`~privgraph.privatize.release.PrivatizationResult` holds them; ``parts``,
    the version's objects that ``write_parts`` stored (``{"sha256", "size"}`` by name, for
    :func:`~privgraph.publish.release_parts.commit_release_parts`; None without a writer);
    ``summaries``, the validation checkpoint's per partition; ``graph_summary``, the released
    graph's counts as :meth:`~privgraph.graph.GraphData.summary` gives them (functions of the
    release's parts)."""

    ledger: PrivacyLedger
    stats: dict[str, Any]
    release: dict[str, dict[str, Any]]
    parts: dict[str, dict[str, Any]] | None
    summaries: list[dict[str, Any]]
    graph_summary: dict[str, Any]

    @property
    def num_nodes(self) -> int:
        return int(self.graph_summary["num_nodes"])


def _graph_summary(graph: PartitionedGraph, parts: list[dict[str, Any]], summaries: list[dict[str, Any]]) -> dict[str, Any]:
    """The released graph's :meth:`~privgraph.graph.GraphData.summary` from the partitions' counts:
    released private edges (the combine tasks'), public edges (every edge of the release less
    those), the class count from the largest label the version holds."""
    private = sum(int(p.get("edges", 0)) for p in parts)
    labels = [s["y_max"] for s in summaries if s.get("y_max") is not None]
    return {
        "num_nodes": graph.num_nodes,
        "num_features": graph.num_features,
        "num_classes": (max(labels) + 1) if labels else 0,
        "num_edges_public": sum(int(s["release_edges"]) for s in summaries) - private,
        "num_edges_private": private,
    }


def privatize_partitioned_graph(
    graph: PartitionedGraph,
    *,
    num_parts: int,
    method: Literal["metis", "hash", "ldg"],
    staging: str | os.PathLike[str],
    features: Any | None,
    edges: Any | None,
    labels: Any | None = None,
    root_seed: np.random.SeedSequence,
    write_parts: WriteParts | None = None,
    executor: Executor | None = None,
    stage: str = "privatize",
) -> PartitionedGraphRelease:
    """Privatize ``graph`` partition by partition and hand the input and release directories to
    ``write_parts`` while they exist (see the module; None: nothing is written to a store). The guarantees are the mechanisms' own, recorded as
    :func:`~privgraph.privatize.release.privatize_graph` records them (disjoint partitions from the
    public edges). ``staging`` is the owner's directory for the raw partitioned input (removed at
    the end; a killed run's is swept by the next, as for ``privatize_through_files``); the tasks
    must see it and where ``write_parts`` writes.

    Raises:
        ConfigError / ValueError: a mechanism the partitioned layout cannot run, or a field the
            graph lacks (before any row is privatized). What ``write_parts`` wrote is the
            caller's to remove on a failure (:func:`~privgraph.publish.release_parts.parts_writer`
            does).
    """
    with staging_directory(staging) as tmp:
        source = partitioned_input_from_graph(graph, num_parts, method, tmp / "input", executor=executor)
        res = privatize_partitioned(source, tmp / "release", features=features, edges=edges, labels=labels,
                                    root_seed=root_seed, executor=executor, stage=stage)
        parts = None if write_parts is None else write_parts(source, res.directory)
    return PartitionedGraphRelease(ledger=res.ledger, stats=res.stats, release=res.release, parts=parts,
                                   summaries=res.summaries, graph_summary=_graph_summary(graph, res.parts, res.summaries))
