"""A partitioned release committed to the store: each partition's task writes its part of the
version into a parts area (:mod:`privgraph.storage.parts`), the client commits it.

The privatize stage knows no store: :func:`~privgraph.privatize.partitioned.privatize_through_files`
and :func:`~privgraph.privatize.partitioned_release.privatize_partitioned_graph` take a
``write_parts(input_dir, release_dir)`` and call it while their staging directory exists;
:func:`parts_writer` is that callable for a parts area (:func:`write_release_parts` bound to it),
and removes the area if anything in its block fails, so nothing half-written stays in the store.
:func:`commit_release_parts` then turns the parts into a staged version once the release is
validated; :func:`store_partitioned_release` does both for a release already on disk.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from privgraph.parts.executor import Executor, map_partitions
from privgraph.privatize.part_files import ROW_FIELDS, load_part_array, part_dir, read_layout
from privgraph.privatize.partitioned import PartitionedRelease, WriteParts
from privgraph.storage.graph_io import GRAPH_INFO, NODES, GraphPart, part_to_objects, partitioned_graph_info
from privgraph.storage.parts import PartsArea
from privgraph.storage.staging import PendingVersion
from privgraph.seeding import partition_seeds

__all__ = ["commit_release_parts", "parts_writer", "store_partitioned_release", "write_release_parts"]


def _store_file_part(i: int, seed: np.random.SeedSequence, *, source: str, out: str,
                     area: PartsArea) -> dict[str, Any]:
    """Partition ``i`` of the release, written by its task into the store's parts area as the
    version's objects (:func:`~privgraph.storage.graph_io.part_to_objects`): the released rows
    and edges from ``out``, the rest (public edges, splits, unprivatized fields) from ``source``.
    Returns the objects' ``{"sha256", "size"}`` by name. ``seed`` is unused (no randomness)."""
    src, rel = part_dir(Path(source), i), part_dir(Path(out), i)
    fields = {f: load_part_array(rel / f"{f}.npy" if (rel / f"{f}.npy").is_file() else src / f"{f}.npy")
              for f in ROW_FIELDS if (src / f"{f}.npy").is_file()}
    private = (load_part_array(rel / "edges_private.npy") if (rel / "edges_private.npy").is_file()
               else np.zeros((2, 0), np.int64))
    part = GraphPart(index=i, nodes=load_part_array(src / "nodes.npy"), fields=fields,
                     edges_public=load_part_array(src / "edges_public.npy"), edges_private=private)
    return {name: area.put(name, blob) for name, blob in part_to_objects(part).items()}


def write_release_parts(source: str | Path, release: str | Path, area: PartsArea, *,
                        executor: Executor | None = None) -> dict[str, dict[str, Any]]:
    """Each partition's task writes its part of the release under ``release`` (of the partitioned
    input ``source``) into ``area`` (local or S3) as a partitioned version's objects; returns
    their ``{"sha256", "size"}`` by name (a few bytes per partition: what the client holds). On
    any failure the area is removed."""
    num_parts = int(read_layout(Path(source))["num_parts"])
    try:
        written = map_partitions(_store_file_part, list(range(num_parts)),
                                 partition_seeds(np.random.SeedSequence(0), num_parts), executor=executor,
                                 source=str(source), out=str(release), area=area)
    except BaseException:
        area.abort()
        raise
    return {name: meta for objects in written for name, meta in objects.items()}


@contextlib.contextmanager
def parts_writer(area: PartsArea | None, *, executor: Executor | None = None) -> Iterator[WriteParts | None]:
    """The ``write_parts`` of the privatize stage for ``area`` (:func:`write_release_parts` on
    ``executor``; None for no area: nothing is written to a store). If the block fails, the area
    is removed: nothing half-written stays in the store, whether the failure came before, during
    or after the parts were written.

    >>> with parts_writer(None) as write_parts:
    ...     print(write_parts)
    None
    """
    if area is None:
        yield None
        return
    try:
        yield functools.partial(write_release_parts, area=area, executor=executor)
    except BaseException:
        area.abort()
        raise


def commit_release_parts(area: PartsArea, parts: dict[str, dict[str, Any]], num_nodes: int) -> PendingVersion:
    """The staged version of the parts the tasks wrote: ``graph.json`` written by the client, the
    parts copied into the version without being read (:meth:`~privgraph.storage.parts.PartsArea.commit`;
    a failed commit keeps the area, for a retry)."""
    num_parts = sum(name.endswith("." + NODES) for name in parts)
    return area.commit(parts, {GRAPH_INFO: partitioned_graph_info(num_nodes, num_parts, sorted(parts))})


def store_partitioned_release(source: str | Path, release: PartitionedRelease, area: PartsArea, *,
                              executor: Executor | None = None) -> PendingVersion:
    """Write ``release`` (of the partitioned input ``source``) into the store as a PARTITIONED
    version and return it staged (publish its manifest, or abort it): :func:`write_release_parts`,
    then :func:`commit_release_parts`. The version loads
    (:meth:`~privgraph.storage.base.ArtifactStore.load_graph`) to the same graph as
    :func:`~privgraph.privatize.partitioned.load_partitioned_release`;
    :meth:`~privgraph.storage.base.ArtifactStore.iter_parts` streams it partition by
    partition. On any failure the area is removed."""
    parts = write_release_parts(source, release.directory, area, executor=executor)
    try:
        return commit_release_parts(area, parts, int(read_layout(Path(source))["num_nodes"]))
    except BaseException:
        area.abort()
        raise
