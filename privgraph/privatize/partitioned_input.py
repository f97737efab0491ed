"""From a partitioned graph (``privgraph-partitioned-graph/1``) to the privatize stage's input
(``privgraph-partitioned-input/1``), every step that touches rows or edges run as a task.

:func:`partitioned_input_from_graph` writes the same files, byte for byte, as
:func:`~privgraph.privatize.partitioned.write_partitioned_input` on
``load_partitioned_graph(path)`` partitioned by
:func:`~privgraph.parts.partition.partition_graph`, without the graph ever being in the
calling process (the client): it passes the graph's metadata, paths and ints to the tasks
(:func:`~privgraph.parts.executor.map_partitions`: serially, or on a Dask executor whose
workers see the same file system) and gets back a few counts per task. The steps:

(a) one task: the partition from the public edges (:func:`partition_partitioned_graph`), written
    as ``assignment.npy``: METIS over every public edge, or LDG streaming the ranges;
(b) one task per node range: its rows and public edges split by part (read against the
    assignment, memory-mapped) into fragments on disk, its private edges into one fragment;
(c) one task: ``candidates.npy`` and the private CSR from the private edges' fragments;
(d) one task per part: its fragments concatenated into ``part-NNNNN/`` (nodes sorted, public
    edges in ``(u, v)`` order, as ``write_partitioned_input`` orders them);
(e) ``layout.json`` last, the fragments removed, the temporary sibling directory renamed.

All or nothing: a failure removes the temporary directory. Private data: directories 0700,
files 0600. Memory: task (a) holds the public edges and METIS's CSR (as ``partition_graph``
does; with LDG, the ``[n]`` assignment and one range's edges), (c) the private edges and their
CSR, (b) one range, (d) one part; the client O(parts).
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal

import numpy as np

from privgraph.graph import sorted_unique
from privgraph.guarantee.private_files import mkdir_private, write_private_file
from privgraph.ingest.partitioned_graph import (SPLIT_COLUMNS, PartitionedGraph, graph_meta, read_edge_range,
                                                read_node_range)
from privgraph.parts.executor import Executor, map_partitions
from privgraph.parts.partition import check_partition_arguments, ldg_parts, partition_assignment, upper_csr
from privgraph.privatize.part_files import FORMAT, ROW_FIELDS, load_part_array, part_dir, save_part_array
from privgraph.seeding import partition_seeds

__all__ = ["partition_partitioned_graph", "partitioned_input_from_graph"]

#: the fragments' directory inside the temporary input (removed before the rename)
_FRAGMENTS = ".fragments"
#: GraphData's row field -> the node range's column
_COLUMN = {"x": "x", "y": "y", **{mask: col for col, mask in SPLIT_COLUMNS.items()}}


def _fields(graph: PartitionedGraph) -> list[str]:
    """The row fields the graph has, in ``write_partitioned_input``'s order."""
    columns = graph.node_columns()
    return [f for f in ROW_FIELDS if _COLUMN[f] in columns]


def _seeds(k: int) -> list[np.random.SeedSequence]:
    """Seeds for ``k`` tasks that draw nothing (map_partitions wants one per task)."""
    return partition_seeds(np.random.SeedSequence(0), k)


# -- (a) the partition -----------------------------------------------------------------------------
def _public_edges(graph: PartitionedGraph) -> np.ndarray:
    """Every public edge ``[2, m_pub]`` in ``(u, v)`` order (the ranges one after the other)."""
    parts = []
    for i in range(graph.num_ranges):
        edges, private = read_edge_range(graph, i)
        parts.append(edges[:, ~private])
    return np.concatenate(parts, axis=1)


def _ldg_blocks(graph: PartitionedGraph, seen: list[int]) -> Iterator[tuple[int, int, np.ndarray, np.ndarray]]:
    """LDG's input, one range at a time from the last: each node's public edges to larger ids
    (a range's edges are those of its smaller end, sorted by it); their count added to ``seen[0]``."""
    for i in reversed(range(graph.num_ranges)):
        start, stop = graph.node_range(i)
        edges, private = read_edge_range(graph, i)
        public = edges[:, ~private]
        seen[0] += int(public.shape[1])
        indptr, larger = upper_csr(public - start, stop - start)  # the range's nodes renumbered from 0
        yield start, stop, indptr, larger + start


def _partition_task(_: int, seed: np.random.SeedSequence, *, graph: PartitionedGraph, num_parts: int,
                    method: str, out: str) -> dict[str, Any]:
    """Task (a): the assignment, written as ``out/assignment.npy``; returns the method used, the
    number of parts and their sizes. ``seed`` is unused (METIS and LDG are deterministic). LDG
    streams the ranges (one in memory at a time); METIS holds every public edge."""
    p, seen = int(min(num_parts, max(graph.num_nodes, 1))), [0]
    if method == "ldg" and p > 1:
        assignment, used = ldg_parts(graph.num_nodes, p, _ldg_blocks(graph, seen)), method
    if method != "ldg" or p == 1 or not seen[0]:  # no public edge: hash, as partition_assignment decides
        assignment, used = partition_assignment(graph.num_nodes, num_parts, method, lambda: _public_edges(graph))
    save_part_array(Path(out) / "assignment.npy", assignment.astype(np.int64))
    count = int(assignment.max()) + 1 if assignment.size else 0
    return {"method": used, "num_parts": count, "sizes": np.bincount(assignment, minlength=count).tolist()}


def partition_partitioned_graph(graph: PartitionedGraph, num_parts: int, method: Literal["metis", "hash", "ldg"],
                                directory: str | os.PathLike[str], *, executor: Executor | None = None
                                ) -> dict[str, Any]:
    """Partition ``graph`` from its public edges in ONE task (on a worker under Dask) and write the
    assignment (int64 ``[n]``) as ``directory/assignment.npy`` (0600; ``directory`` is created
    0700). The assignment equals ``partition_graph(load_partitioned_graph(graph.path), num_parts,
    method).assignment``, with the same fallbacks (one part; no public edge: hash).

    Returns:
        ``{"method", "num_parts", "sizes"}``: the method used, the parts, their sizes.

    Raises:
        ValueError: ``num_parts`` is not an int >= 1, or ``method`` is not metis, hash or ldg.
    """
    check_partition_arguments(num_parts, method)
    return map_partitions(_partition_task, [0], _seeds(1), executor=executor, graph=graph,
                          num_parts=int(num_parts), method=method, out=str(directory))[0]


# -- (b) the node ranges' fragments ----------------------------------------------------------------
def _groups(part: np.ndarray) -> list[tuple[int, np.ndarray]]:
    """``(j, indices)`` for each part ``j`` present in ``part``, indices in their order."""
    order = np.argsort(part, kind="stable")
    values, starts = np.unique(part[order], return_index=True)
    bounds = np.append(starts, order.size)
    return [(int(j), order[bounds[k] : bounds[k + 1]]) for k, j in enumerate(values.tolist())]


def _range_task(i: int, seed: np.random.SeedSequence, *, graph: PartitionedGraph, out: str,
                fields: list[str]) -> dict[str, Any]:
    """Task (b): range ``i``'s rows and public edges (by the part of their smaller end) written
    as per-part fragments, its private edges as one fragment. ``seed`` is unused."""
    root = Path(out)
    frag = root / _FRAGMENTS
    start, _ = graph.node_range(i)
    assignment = load_part_array(root / "assignment.npy", mmap=True)
    rows = read_node_range(graph, i)
    part = np.asarray(assignment[start : start + rows["id"].size])
    for j, sel in _groups(part):
        d = frag / f"part-{j:05d}"
        save_part_array(d / f"nodes-{i:05d}.npy", rows["id"][sel])
        for f in fields:
            save_part_array(d / f"{f}-{i:05d}.npy", rows[_COLUMN[f]][sel])
    del rows
    edges, private = read_edge_range(graph, i)
    public = edges[:, ~private]
    for j, sel in _groups(part[public[0] - start]):
        save_part_array(frag / f"part-{j:05d}" / f"edges_public-{i:05d}.npy", public[:, sel])
    save_part_array(frag / f"private-{i:05d}.npy", edges[:, private])
    return {"nodes": int(part.size), "public_edges": int(public.shape[1]), "private_edges": int(private.sum())}


# -- (c) the global arrays -------------------------------------------------------------------------
def _global_task(_: int, seed: np.random.SeedSequence, *, num_nodes: int, num_ranges: int,
                 out: str) -> dict[str, Any]:
    """Task (c): ``candidates.npy`` (V_pri sorted) and the symmetric private CSR, from the private
    edges' fragments only. ``seed`` is unused."""
    from privgraph.mechanisms.edges.dprr import private_csr  # lazy: scipy via the registry (~0.7 s)

    root = Path(out)
    private = np.concatenate([load_part_array(root / _FRAGMENTS / f"private-{i:05d}.npy") for i in range(num_ranges)],
                             axis=1)
    candidates = sorted_unique(private.ravel())
    save_part_array(root / "candidates.npy", candidates)
    indptr, indices = private_csr(private, num_nodes)
    save_part_array(root / "private_indptr.npy", indptr)
    save_part_array(root / "private_indices.npy", indices)
    return {"private_nodes": int(candidates.size)}


# -- (d) the parts ---------------------------------------------------------------------------------
def _empty(name: str, num_features: int) -> np.ndarray:
    """A part's array of ``name`` when no range holds a node of it (an empty part)."""
    if name == "x":
        return np.zeros((0, num_features), np.float32)
    if name == "edges_public":
        return np.zeros((2, 0), np.int64)
    return np.zeros(0, np.bool_ if name.endswith("_mask") else np.int64)


def _part_task(j: int, seed: np.random.SeedSequence, *, out: str, num_ranges: int, num_features: int,
               fields: list[str]) -> dict[str, Any]:
    """Task (d): part ``j``'s fragments, concatenated in range order, as ``part-NNNNN/``; its
    fragments removed. ``seed`` is unused."""
    root = Path(out)
    src = root / _FRAGMENTS / f"part-{j:05d}"
    nodes = 0
    for name in ["nodes", *fields, "edges_public"]:
        files = [src / f"{name}-{i:05d}.npy" for i in range(num_ranges)]
        arrays = [load_part_array(f) for f in files if f.is_file()]
        if not arrays:
            array = _empty(name, num_features)
        else:
            array = np.concatenate(arrays, axis=1 if name == "edges_public" else 0)
        save_part_array(part_dir(root, j) / f"{name}.npy", array)
        nodes = array.shape[0] if name == "nodes" else nodes
    shutil.rmtree(src, ignore_errors=True)
    return {"nodes": int(nodes)}


# -- the whole input -------------------------------------------------------------------------------
def _claim(root: Path) -> Path:
    """Create ``.<name>.tmp`` beside ``root`` (0700, exclusively) and return it."""
    if os.path.lexists(root):
        raise FileExistsError(f"{root}: a partitioned input is never overwritten; choose a new directory")
    tmp = root.with_name(f".{root.name}.tmp")
    mkdir_private(tmp.parent)
    try:
        tmp.mkdir(mode=0o700)
    except FileExistsError:
        raise FileExistsError(f"{tmp} exists (another run is writing it, or one was interrupted: remove it when "
                              "none runs)") from None
    tmp.chmod(0o700)
    return tmp


def _write_input(graph: PartitionedGraph, num_parts: int, method: str, tmp: Path,
                 executor: Executor | None) -> dict[str, Any]:
    """Steps (a) to (d) into ``tmp``; returns ``layout.json``'s content."""
    fields, out = _fields(graph), str(tmp)
    parts = partition_partitioned_graph(graph, num_parts, method, tmp, executor=executor)  # type: ignore[arg-type]
    ranges = list(range(graph.num_ranges))
    map_partitions(_range_task, ranges, _seeds(len(ranges)), executor=executor, graph=graph, out=out, fields=fields)
    (found,) = map_partitions(_global_task, [0], _seeds(1), executor=executor, num_nodes=graph.num_nodes,
                              num_ranges=graph.num_ranges, out=out)
    ids = list(range(parts["num_parts"]))
    map_partitions(_part_task, ids, _seeds(len(ids)), executor=executor, out=out, num_ranges=graph.num_ranges,
                   num_features=graph.num_features, fields=fields)
    return {
        "format": FORMAT, "num_nodes": graph.num_nodes, "num_parts": parts["num_parts"],
        "partition_method": parts["method"], "partition_sizes": parts["sizes"],
        "fields": fields, "private_nodes": found["private_nodes"], "meta": json.loads(json.dumps(graph_meta(graph), default=str)),
    }


def partitioned_input_from_graph(graph: PartitionedGraph, num_parts: int, method: Literal["metis", "hash", "ldg"],
                                 directory: str | os.PathLike[str], *, executor: Executor | None = None) -> Path:
    """Write the partitioned graph ``graph`` as the partitioned input ``directory`` (which must not
    exist), every step that reads rows or edges a task (see the module).

    The files equal, byte for byte, those of ``write_partitioned_input(g, partition_graph(g,
    num_parts, method), directory)`` with ``g = load_partitioned_graph(graph.path)``, ``layout.json``
    included (its ``meta`` is ``g.meta``, built from ``graph.json``). The tasks must see
    ``directory``'s parent (a shared file system under a cluster).

    Raises:
        FileExistsError: ``directory`` (or ``.<name>.tmp`` beside it) exists.
        ValueError: a bad ``num_parts`` or ``method``.
        GraphValidationError: a range that does not match ``graph.json`` (from the tasks' reads).
            Nothing is left at ``directory`` on any failure.
    """
    check_partition_arguments(num_parts, method)
    root = Path(directory)
    tmp = _claim(root)
    try:
        layout = _write_input(graph, num_parts, method, tmp, executor)
        shutil.rmtree(tmp / _FRAGMENTS)
        write_private_file(tmp / "layout.json", json.dumps(layout, indent=1).encode())
        if os.path.lexists(root):
            raise FileExistsError(f"{root}: a partitioned input is never overwritten; choose a new directory")
        os.rename(tmp, root)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return root
