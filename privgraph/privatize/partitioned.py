"""Privatization whose partitions never pass through the client: files in, files out.

A graph is written as a *partitioned input* (:func:`write_partitioned_input`); the privatize stage
(:func:`privatize_through_files`, ``partitions.layout: files``) writes one per run in the owner's
staging area and removes it after, and a caller that keeps one may privatize it again and again.
:func:`privatize_partitioned` maps tasks over the partitions, serially or on a Dask executor
(:func:`privgraph.parts.executor.map_partitions`); each task reads its own partition's rows and edges
from the files, privatizes them and writes its part of the release into a staging directory.
What comes back to the caller is a few counts and checksums per partition, so the client's memory
is O(partitions), not O(n). :func:`load_partitioned_release` reads a release back as one
:class:`~privgraph.graph.GraphData`.

The per-node edge mechanisms (DPRR, Warner RR) combine directed reports by the OR rule, pair by
pair; that step is a partitioned shuffle here: a report about the pair ``{u, v}`` (``u < v``) goes
to the partition of ``u``, whose task combines the reports of its pairs and removes the pairs that
are public edges of that partition (public edges are stored by the partition of their smaller end).

Same seed, same bytes: partition ``i`` of stage ``s`` draws from
``partition_seeds(stage_seed(root, s), P)[i]`` as in :func:`privgraph.privatize.release.privatize_graph`,
so the loaded release equals ``privatize_graph``'s on the same partitioning and seed, with any
number of workers (public edges in ``(u, v)`` order). The guarantee is each mechanism's own,
recorded in the same ledger entries: the layout changes where the work runs, not what is released.

Layout (private files: directories 0700, files 0600, each written atomically)::

    <input>/layout.json        num_nodes, num_parts, partition method and sizes, fields, meta
    <input>/assignment.npy     int64 [n], the partition of each node (from public edges)
    <input>/candidates.npy     int64, V_pri sorted
    <input>/private_indptr.npy, private_indices.npy     the symmetric CSR of the private edges
    <input>/part-00000/nodes.npy   the partition's node ids, sorted
                       x.npy, y.npy, train_mask.npy, val_mask.npy, test_mask.npy   their rows
                       edges_public.npy   the public edges whose smaller end is in the partition
    <release>/part-00000/x.npy, y.npy, edges_private.npy   the partition's part of the release

Tasks read the global arrays (candidates, the CSR, the assignment) memory-mapped: a task touches
the pages of its own rows. The input and release directories must be on a file system every
worker sees (a LocalCluster's, or a shared mount on a cluster).
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import json
import os
import shutil
import socket
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

from privgraph.guarantee.ledger import PrivacyLedger
from privgraph.errors import ConfigError
from privgraph.graph import GraphData, in_sorted
from privgraph.guarantee import Scope
from privgraph.parts.executor import Executor, map_partitions
from privgraph.parts.partition import Partitioning
from privgraph.privatize.part_files import FORMAT, ROW_FIELDS, load_part_array, part_dir, read_layout, save_part_array
from privgraph.guarantee.private_files import mkdir_private, write_private_file
from privgraph.privatize.summary import SUMMARY_FIELDS, release_summary
from privgraph.privatize.node_rows import label_selection, privatize_feature_rows, privatize_label_rows
from privgraph.privatize.release import PrivatizationResult, ledger_entry
from privgraph.seeding import noise_generator, partition_seeds, stage_seed

__all__ = [
    "PartitionedRelease",
    "load_partitioned_release",
    "privatize_partitioned",
    "privatize_through_files",
    "sweep_staging",
    "staging_directory",
    "WriteParts",
    "write_partitioned_input",
]

#: what writes a release's parts into a store: ``write_parts(input_dir, release_dir)`` returns the
#: stored objects' ``{"sha256", "size"}`` by name (:func:`privgraph.publish.release_parts.parts_writer`)
WriteParts = Callable[[Path, Path], dict[str, dict[str, Any]]]


def write_partitioned_input(graph: GraphData, partitioning: Partitioning, directory: str | Path) -> Path:
    """Write ``graph`` as a partitioned input under ``directory`` (which must not exist).

    The input side of :func:`privatize_partitioned`, which may read it any number of times.
    Holds private data (features, private edges): the directory is the owner's (0700).
    O(n + m) time; the files total about the graph's size plus its private CSR.

    Raises:
        FileExistsError: ``directory`` exists (an input is never overwritten).
        ValueError: ``partitioning`` does not cover ``graph``'s nodes.
    """
    from privgraph.mechanisms.edges.edge_arrays import private_csr  # lazy: scipy via the registry (~0.7 s)

    root = Path(directory)
    if root.exists():
        raise FileExistsError(f"{root}: a partitioned input is never overwritten; choose a new directory")
    if partitioning.assignment.shape != (graph.num_nodes,):
        raise ValueError(f"the partitioning covers {partitioning.assignment.size} nodes, the graph {graph.num_nodes}")
    tmp = root.with_name(f".{root.name}.tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    mkdir_private(tmp)
    n = graph.num_nodes
    save_part_array(tmp / "assignment.npy", partitioning.assignment.astype(np.int64))
    save_part_array(tmp / "candidates.npy", graph.private_nodes())
    indptr, indices = private_csr(graph.edges_private, n)
    save_part_array(tmp / "private_indptr.npy", indptr)
    save_part_array(tmp / "private_indices.npy", indices)
    del indptr, indices
    pub = graph.edges_public
    pub_order = np.argsort(pub[0] * np.int64(n) + pub[1], kind="stable")
    pub = pub[:, pub_order]
    pub_part = partitioning.assignment[pub[0]]
    pub_by_part = np.argsort(pub_part, kind="stable")  # within a part: (u, v) order kept
    pub_bounds = np.searchsorted(pub_part[pub_by_part], np.arange(partitioning.num_parts + 1))
    fields = [f for f in ROW_FIELDS if getattr(graph, f) is not None]
    for i, nodes in enumerate(partitioning.parts):
        d = part_dir(tmp, i)
        save_part_array(d / "nodes.npy", nodes)
        for f in fields:
            save_part_array(d / f"{f}.npy", getattr(graph, f)[nodes])
        save_part_array(d / "edges_public.npy", pub[:, pub_by_part[pub_bounds[i] : pub_bounds[i + 1]]])
    layout = {
        "format": FORMAT, "num_nodes": n, "num_parts": partitioning.num_parts,
        "partition_method": partitioning.method, "partition_sizes": partitioning.sizes(),
        "fields": fields, "private_nodes": int(graph.private_nodes().size),
        "meta": json.loads(json.dumps(graph.meta, default=str)),
    }
    write_private_file(tmp / "layout.json", json.dumps(layout, indent=1).encode())
    tmp.rename(root)
    return root


def _features_file_part(i: int, seed: np.random.SeedSequence, *, mechanism: Any, source: str, out: str) -> dict[str, Any]:
    rows = load_part_array(part_dir(Path(source), i) / "x.npy")
    released = privatize_feature_rows(rows, seed, mechanism=mechanism)
    return {"rows": int(released.shape[0]),
            "x_sha256": save_part_array(part_dir(Path(out), i) / "x.npy", released, hashed=True)}


def _labels_file_part(i: int, seed: np.random.SeedSequence, *, mechanism: Any, source: str, out: str) -> dict[str, Any]:
    d = part_dir(Path(source), i)
    y = load_part_array(d / "y.npy")
    masks = {m: load_part_array(d / f"{m}.npy") for m in (mechanism.mask or ()) if (d / f"{m}.npy").is_file()}
    released = privatize_label_rows((y, label_selection(mechanism, y, masks)), seed, mechanism=mechanism,
                                    num_classes=mechanism.num_classes)
    return {"y_sha256": save_part_array(part_dir(Path(out), i) / "y.npy", released, hashed=True)}


def _reports_file_part(i: int, seed: np.random.SeedSequence, *, mechanism: Any, source: str, out: str) -> dict[str, Any]:
    """Phase 1 of the edges: partition ``i``'s reporters randomize their neighbour lists; each
    report about ``{u, v}`` is written to the inbox of ``u``'s partition (``u = min``)."""
    src = Path(source)
    candidates = load_part_array(src / "candidates.npy", mmap=True)
    nodes = load_part_array(part_dir(src, i) / "nodes.npy")
    reporters = nodes[in_sorted(nodes, candidates)]
    arcs = mechanism.privatize_nodes(
        reporters, load_part_array(src / "private_indptr.npy", mmap=True),
        load_part_array(src / "private_indices.npy", mmap=True),
        candidates, noise_generator(seed),
    )
    dest = load_part_array(src / "assignment.npy", mmap=True)[np.minimum(arcs[0], arcs[1])]
    order = np.argsort(dest, kind="stable")  # within an inbox the reports keep their order
    targets, starts = np.unique(dest[order], return_index=True)
    bounds = np.append(starts, order.size)
    for k, j in enumerate(targets.tolist()):
        save_part_array(Path(out) / "shuffle" / f"to-{j:05d}" / f"from-{i:05d}.npy",
                        arcs[:, order[bounds[k] : bounds[k + 1]]])
    return {"reports": int(arcs.shape[1])}


def _combine_file_part(j: int, seed: np.random.SeedSequence, *, mechanism: Any, source: str, out: str,
                       num_nodes: int) -> dict[str, Any]:
    """Phase 2 of the edges: the OR rule over the reports about partition ``j``'s pairs, minus
    its public edges. ``seed`` is unused: combining is deterministic post-processing."""
    from privgraph.mechanisms.edges.edge_arrays import merge_with_public  # lazy: scipy via the registry

    inbox = Path(out) / "shuffle" / f"to-{j:05d}"
    files = sorted(inbox.glob("from-*.npy")) if inbox.is_dir() else []
    arcs = np.concatenate([load_part_array(f) for f in files], axis=1) if files else np.zeros((2, 0), np.int64)
    released = merge_with_public(mechanism.combine_reports(arcs, num_nodes),
                                 load_part_array(part_dir(Path(source), j) / "edges_public.npy"))
    return {"edges": int(released.shape[1]),
            "edges_sha256": save_part_array(part_dir(Path(out), j) / "edges_private.npy", released, hashed=True)}


def _summary_file_part(i: int, seed: np.random.SeedSequence, *, source: str, out: str, num_nodes: int) -> dict[str, Any]:
    """What the validation checkpoint reads of partition ``i`` of the release
    (:func:`~privgraph.privatize.summary.release_summary`): its public and released edges, its
    released feature rows (rows not privatized have no range to check), the labels the version
    holds. ``seed`` is unused."""
    src, rel = part_dir(Path(source), i), part_dir(Path(out), i)
    edges = [load_part_array(src / "edges_public.npy")]
    if (rel / "edges_private.npy").is_file():
        edges.append(load_part_array(rel / "edges_private.npy"))
    x = load_part_array(rel / "x.npy", mmap=True) if (rel / "x.npy").is_file() else None
    y_dir = rel if (rel / "y.npy").is_file() else src
    y = load_part_array(y_dir / "y.npy") if (y_dir / "y.npy").is_file() else None
    return release_summary(np.concatenate(edges, axis=1), x, num_nodes, y)


@dataclasses.dataclass(frozen=True)
class PartitionedRelease:
    """A release written partition by partition under ``directory`` (read it back with
    :func:`load_partitioned_release`), with its ledger and the same ``stats`` and ``release``
    summaries as :class:`~privgraph.privatize.release.PrivatizationResult`. ``parts``: per partition,
    the counts and sha256 checksums of its files (functions of the release, covered by it)."""

    directory: Path
    ledger: PrivacyLedger
    stats: dict[str, Any]
    release: dict[str, dict[str, Any]]
    parts: list[dict[str, Any]]

    @property
    def summaries(self) -> list[dict[str, Any]]:
        """Per partition, the validation checkpoint's summary of its part of the release."""
        return [{k: part[k] for k in SUMMARY_FIELDS} for part in self.parts]


def _check_mechanisms(layout: dict[str, Any], features: Any, edges: Any, labels: Any) -> None:
    """Everything checkable from the layout and the mechanisms, before any data is read."""
    if features is not None:
        if features.scope is not Scope.FEATURES:
            raise ValueError(f"{features!r} does not protect features")
        if "x" not in layout["fields"]:
            raise ValueError("the pipeline privatizes features but the graph has none (x is None)")
    if labels is not None:
        if labels.scope is not Scope.LABELS:
            raise ValueError(f"{labels!r} does not protect labels")
        if "y" not in layout["fields"]:
            raise ValueError("the pipeline privatizes labels but the graph has no labels")
        if labels.num_classes is None:
            raise ValueError(f"{labels.name}: set num_classes in the pipeline's labels section")
        missing = [m for m in (labels.mask or ()) if m not in layout["fields"]]
        if missing:
            raise ValueError(f"{labels.name}: mask {missing[0]!r} is not set on this graph")
    if edges is None:
        if layout["private_nodes"]:
            raise ConfigError("the input marks some edges private but the pipeline sets no edge mechanism: "
                              "they would be stored as they are")
        return
    if edges.scope is not Scope.EDGES:
        raise ValueError(f"{edges!r} does not protect edges")
    if not edges.runs_partitioned:  # the mechanism's declaration (its shape: local reports)
        from privgraph.mechanisms import edge_mechanisms  # lazy: scipy via the registry

        raise ConfigError(
            f"{edges.name}: the partitioned layout runs per-node edge mechanisms "
            f"({', '.join(edge_mechanisms(runs_partitioned=True))}), whose reports combine pair by pair; "
            f"{edges.name} is global: use privatize_graph"
        )


def privatize_partitioned(
    source: str | Path,
    out: str | Path,
    *,
    features: Any | None,
    edges: Any | None,
    labels: Any | None = None,
    root_seed: np.random.SeedSequence,
    executor: Executor | None = None,
    stage: str = "privatize",
) -> PartitionedRelease:
    """Privatize the partitioned input ``source`` into the staging directory ``out``, each
    partition read and written by its own task; same output as
    :func:`~privgraph.privatize.release.privatize_graph` on the same partitioning and seed.

    Mechanisms: any per-node feature and label mechanism; per-node edge mechanisms whose reports
    combine pair by pair (DPRR, Warner RR). Their guarantees are unchanged and recorded in the
    ledger as ``privatize_graph`` records them (parallel composition over disjoint partitions).

    Raises:
        FileExistsError: ``out`` exists (a release is never overwritten).
        ConfigError / ValueError: a mechanism this layout cannot run, or a field the graph lacks;
            raised before any row is read. On any failure ``out`` is removed: nothing half-written.
    """
    src, dst = Path(source), Path(out)
    layout = read_layout(src)
    _check_mechanisms(layout, features, edges, labels)
    if dst.exists():
        raise FileExistsError(f"{dst}: a release is never overwritten; choose a new directory")
    num_parts, n_max = int(layout["num_parts"]), int(layout["private_nodes"])
    ids = list(range(num_parts))
    part_ids = tuple(ids)
    ledger = PrivacyLedger()
    stats: dict[str, Any] = {"partitions": layout["partition_sizes"], "partition_method": layout["partition_method"]}
    release: dict[str, dict[str, Any]] = {}
    parts: list[dict[str, Any]] = [{"part": i} for i in ids]
    shared = {"source": str(src), "out": str(dst)}

    def run(fn: Any, name: str, **kw: Any) -> list[dict[str, Any]]:
        out_parts = map_partitions(fn, ids, partition_seeds(stage_seed(root_seed, name), num_parts),
                                   executor=executor, **shared, **kw)
        for summary, more in zip(parts, out_parts, strict=True):
            summary.update(more)
        return out_parts

    mkdir_private(dst)
    try:
        if features is not None:
            run(_features_file_part, "features", mechanism=features)
            output_range = features.output_range()
            stats["feature_range"] = None if output_range is None else list(output_range)
            ledger.record(ledger_entry(f"{stage}.features", features, part_ids))
        if edges is not None:
            reports = run(_reports_file_part, "edges", mechanism=edges)
            combined = run(_combine_file_part, "edges.combine", mechanism=edges, num_nodes=int(layout["num_nodes"]))
            shutil.rmtree(dst / "shuffle", ignore_errors=True)
            stats["edges"] = {"private_nodes": n_max}
            release["edges"] = {"reports": sum(r["reports"] for r in reports),
                                "released_private_edges": sum(c["edges"] for c in combined)}
            ledger.record(ledger_entry(f"{stage}.edges", edges, part_ids, n_max=n_max))
        if labels is not None:
            run(_labels_file_part, "labels", mechanism=labels)
            ledger.record(ledger_entry(f"{stage}.labels", labels, part_ids))
        run(_summary_file_part, "summary", num_nodes=int(layout["num_nodes"]))  # no randomness drawn
    except BaseException:
        shutil.rmtree(dst, ignore_errors=True)
        raise
    return PartitionedRelease(directory=dst, ledger=ledger, stats=stats, release=release, parts=parts)


def load_partitioned_release(source: str | Path, release: str | Path) -> GraphData:
    """The release under ``release`` (of the partitioned input ``source``) as one graph: the
    privatized fields from the release, the public ones (public edges in ``(u, v)`` order, the
    splits, unprivatized labels) from the input; ``meta["privatized"]`` is set."""
    src, rel = Path(source), Path(release)
    layout = read_layout(src)
    n, num_parts = int(layout["num_nodes"]), int(layout["num_parts"])
    nodes = [load_part_array(part_dir(src, i) / "nodes.npy") for i in range(num_parts)]

    def rows(field: str) -> np.ndarray | None:
        base = rel if (part_dir(rel, 0) / f"{field}.npy").is_file() else src
        if field not in layout["fields"] and base is src:
            return None
        parts = [load_part_array(part_dir(base, i) / f"{field}.npy") for i in range(num_parts)]
        full = np.empty((n, *parts[0].shape[1:]), dtype=parts[0].dtype)
        for p, r in zip(nodes, parts, strict=True):
            full[p] = r
        return full

    def edges(base: Path, name: str) -> np.ndarray:
        e = np.concatenate([load_part_array(part_dir(base, i) / f"{name}.npy") for i in range(num_parts)], axis=1)
        return np.ascontiguousarray(e[:, np.argsort(e[0] * np.int64(n) + e[1], kind="stable")])

    private = edges(rel, "edges_private") if (part_dir(rel, 0) / "edges_private.npy").is_file() \
        else np.zeros((2, 0), np.int64)
    meta = dict(layout["meta"])
    meta["privatized"] = True
    return GraphData(
        num_nodes=n, x=rows("x"), y=rows("y"), edges_public=edges(src, "edges_public"), edges_private=private,
        train_mask=rows("train_mask"), val_mask=rows("val_mask"), test_mask=rows("test_mask"), meta=meta,
    )


def _staging_owner() -> str:
    """``.partitioned-<host>-``: the start of this host's staging directories (a name, not a secret)."""
    return f".partitioned-{socket.gethostname().replace('-', '_').replace(os.sep, '_')}-"


def sweep_staging(staging: str | os.PathLike[str], min_age: dt.timedelta | None = None, *,
                  dry_run: bool = False) -> list[Path]:
    """Remove the staging directories of :func:`privatize_through_files` (``<host>-<pid>-*``) that
    a killed run left behind in ``staging`` (they hold raw private rows): those of this host whose
    process is gone, and, with ``min_age``, any older than that (another host's, or an unnamed
    one); a live run's directory is younger than any sensible ``min_age`` (``artifacts gc``: a
    day). Returns the directories removed (or, with ``dry_run``, that would be)."""
    root = Path(staging)
    if not root.is_dir():
        return []
    mine = _staging_owner()
    cutoff = None if min_age is None else time.time() - min_age.total_seconds()
    removed = []
    for d in sorted(root.glob(".partitioned-*")):
        stale = cutoff is not None and d.stat().st_mtime < cutoff
        if not stale and d.name.startswith(mine):
            pid = d.name[len(mine):].split("-", 1)[0]
            stale = pid.isdigit() and not _process_alive(int(pid))
        if stale and d.is_dir():
            if not dry_run:
                shutil.rmtree(d, ignore_errors=True)
            removed.append(d)
    return removed


def _process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process: alive
        pass
    return True


@contextlib.contextmanager
def staging_directory(staging: str | os.PathLike[str]) -> Iterator[Path]:
    """A fresh directory of this process under ``staging`` (the owner's, 0700: what it holds are
    raw private rows), removed when the block ends; the directories killed runs left there are
    swept first (:func:`sweep_staging`: kill -9 skips the removal)."""
    mkdir_private(Path(staging))
    sweep_staging(staging)
    with tempfile.TemporaryDirectory(dir=staging, prefix=f"{_staging_owner()}{os.getpid()}-") as tmp:
        yield Path(tmp)


def privatize_through_files(
    graph: GraphData,
    *,
    partitioning: Partitioning,
    staging: str | Path,
    features: Any | None,
    edges: Any | None,
    labels: Any | None = None,
    root_seed: np.random.SeedSequence,
    executor: Executor | None = None,
    stage: str = "privatize",
    write_parts: WriteParts | None = None,
) -> PrivatizationResult:
    """:func:`~privgraph.privatize.release.privatize_graph`'s result, computed in the partitioned layout:
    the graph written as a partitioned input in a fresh directory under ``staging`` (the owner's:
    it holds private rows), privatized by tasks that read and write their own partition's files,
    read back, and the directory removed. The same bytes, ledger and stats as ``privatize_graph``
    on the same partitioning and seed (public edges and meta kept as they are).

    With ``write_parts`` (:func:`privgraph.publish.release_parts.parts_writer`: a store's parts
    area), called with the input and release directories while they exist, the tasks also write
    their part of the release into the store as a partitioned version's objects, and ``parts`` of
    the result holds their checksums, for the stage step to commit once the release is validated;
    None: nothing is written to a store (``parts`` is None).

    Used by the privatize stage when a pipeline sets ``partitions.layout: files``; the mechanisms
    are checked before anything is written.
    """
    fields = [f for f in ROW_FIELDS if getattr(graph, f) is not None]
    _check_mechanisms({"fields": fields, "private_nodes": int(graph.private_nodes().size)}, features, edges, labels)
    with staging_directory(staging) as tmp:
        source = write_partitioned_input(graph, partitioning, tmp / "input")
        res = privatize_partitioned(source, tmp / "release", features=features, edges=edges, labels=labels,
                                    root_seed=root_seed, executor=executor, stage=stage)
        parts = None if write_parts is None else write_parts(source, res.directory)
        loaded = load_partitioned_release(source, res.directory)
    changes: dict[str, Any] = {"meta": {**graph.meta, "privatized": True}}
    if features is not None:
        changes["x"] = loaded.x
    if labels is not None:
        changes["y"] = loaded.y
    if edges is not None:
        changes["edges_private"] = loaded.edges_private
    return PrivatizationResult(graph=graph.replace(**changes), ledger=res.ledger, stats=res.stats, release=res.release,
                               parts=parts, summaries=res.summaries)
