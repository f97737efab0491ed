"""Privatization whose partitions never pass through the client: files in, files out.

A graph is written as a *partitioned input* (:func:`write_partitioned_input`); the privatize stage
(:func:`privatize_through_files`, ``partitions.layout: files``) writes one per run in the owner's
staging area and removes it after, and a caller that keeps one may privatize it again and again.
:func:`privatize_partitioned` maps tasks over the partitions, serially or on a Dask executor
(:func:`privgraph.privatize.parallel.map_partitions`); each task reads its own partition's rows and edges
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

import dataclasses
import datetime as dt
import hashlib
import io
import json
import os
import shutil
import socket
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from privgraph.guarantee.ledger import PrivacyLedger
from privgraph.errors import ConfigError
from privgraph.graph import GraphData, in_sorted
from privgraph.guarantee import Scope
from privgraph.privatize.parallel import Executor, map_partitions
from privgraph.privatize.partition import Partitioning
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
    "commit_release_parts",
    "store_partitioned_release",
    "write_release_parts",
    "write_partitioned_input",
]

FORMAT = "privgraph-partitioned-input/1"
_ROW_FIELDS = ("x", "y", "train_mask", "val_mask", "test_mask")


def _part_dir(root: Path, i: int) -> Path:
    return root / f"part-{i:05d}"


def _save(path: Path, array: np.ndarray, *, hashed: bool = False) -> str | None:
    """Write ``array`` as ``.npy`` at ``path`` (private, atomic, no fsync: a staging file); with
    ``hashed`` (the release's parts) return the file's sha256. The array's bytes are written and
    hashed in place, not copied."""
    array = np.ascontiguousarray(array)
    header = io.BytesIO()
    np.lib.format.write_array_header_1_0(header, np.lib.format.header_data_from_array_1_0(array))
    body = memoryview(array.reshape(-1)).cast("B")
    write_private_file(path, [header.getvalue(), body], durable=False)
    if not hashed:
        return None
    digest = hashlib.sha256(header.getvalue())
    digest.update(body)
    return digest.hexdigest()


def _load(path: Path, mmap: bool = False) -> np.ndarray:
    return np.load(path, mmap_mode="r" if mmap else None, allow_pickle=False)


def write_partitioned_input(graph: GraphData, partitioning: Partitioning, directory: str | Path) -> Path:
    """Write ``graph`` as a partitioned input under ``directory`` (which must not exist).

    The input side of :func:`privatize_partitioned`, which may read it any number of times.
    Holds private data (features, private edges): the directory is the owner's (0700).
    O(n + m) time; the files total about the graph's size plus its private CSR.

    Raises:
        FileExistsError: ``directory`` exists (an input is never overwritten).
        ValueError: ``partitioning`` does not cover ``graph``'s nodes.
    """
    from privgraph.privatize.mechanisms.edges.edge_arrays import private_csr  # lazy: scipy via the registry (~0.7 s)

    root = Path(directory)
    if root.exists():
        raise FileExistsError(f"{root}: a partitioned input is never overwritten; choose a new directory")
    if partitioning.assignment.shape != (graph.num_nodes,):
        raise ValueError(f"the partitioning covers {partitioning.assignment.size} nodes, the graph {graph.num_nodes}")
    tmp = root.with_name(f".{root.name}.tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    mkdir_private(tmp)
    n = graph.num_nodes
    _save(tmp / "assignment.npy", partitioning.assignment.astype(np.int64))
    _save(tmp / "candidates.npy", graph.private_nodes())
    indptr, indices = private_csr(graph.edges_private, n)
    _save(tmp / "private_indptr.npy", indptr)
    _save(tmp / "private_indices.npy", indices)
    del indptr, indices
    pub = graph.edges_public
    pub_order = np.argsort(pub[0] * np.int64(n) + pub[1], kind="stable")
    pub = pub[:, pub_order]
    pub_part = partitioning.assignment[pub[0]]
    pub_by_part = np.argsort(pub_part, kind="stable")  # within a part: (u, v) order kept
    pub_bounds = np.searchsorted(pub_part[pub_by_part], np.arange(partitioning.num_parts + 1))
    fields = [f for f in _ROW_FIELDS if getattr(graph, f) is not None]
    for i, nodes in enumerate(partitioning.parts):
        d = _part_dir(tmp, i)
        _save(d / "nodes.npy", nodes)
        for f in fields:
            _save(d / f"{f}.npy", getattr(graph, f)[nodes])
        _save(d / "edges_public.npy", pub[:, pub_by_part[pub_bounds[i] : pub_bounds[i + 1]]])
    layout = {
        "format": FORMAT, "num_nodes": n, "num_parts": partitioning.num_parts,
        "partition_method": partitioning.method, "partition_sizes": partitioning.sizes(),
        "fields": fields, "private_nodes": int(graph.private_nodes().size),
        "meta": json.loads(json.dumps(graph.meta, default=str)),
    }
    write_private_file(tmp / "layout.json", json.dumps(layout, indent=1).encode())
    tmp.rename(root)
    return root


def _layout(source: Path) -> dict[str, Any]:
    path = source / "layout.json"
    if not path.is_file():
        raise FileNotFoundError(f"{path}: not a partitioned input (write one with write_partitioned_input)")
    layout = json.loads(path.read_text())
    if layout.get("format") != FORMAT:
        raise ValueError(f"{path}: format {layout.get('format')!r}, expected {FORMAT!r}")
    return layout


def _features_file_part(i: int, seed: np.random.SeedSequence, *, mechanism: Any, source: str, out: str) -> dict[str, Any]:
    rows = _load(_part_dir(Path(source), i) / "x.npy")
    released = privatize_feature_rows(rows, seed, mechanism=mechanism)
    return {"rows": int(released.shape[0]), "x_sha256": _save(_part_dir(Path(out), i) / "x.npy", released, hashed=True)}


def _labels_file_part(i: int, seed: np.random.SeedSequence, *, mechanism: Any, source: str, out: str) -> dict[str, Any]:
    d = _part_dir(Path(source), i)
    y = _load(d / "y.npy")
    masks = {m: _load(d / f"{m}.npy") for m in (mechanism.mask or ()) if (d / f"{m}.npy").is_file()}
    released = privatize_label_rows((y, label_selection(mechanism, y, masks)), seed, mechanism=mechanism,
                                    num_classes=mechanism.num_classes)
    return {"y_sha256": _save(_part_dir(Path(out), i) / "y.npy", released, hashed=True)}


def _reports_file_part(i: int, seed: np.random.SeedSequence, *, mechanism: Any, source: str, out: str) -> dict[str, Any]:
    """Phase 1 of the edges: partition ``i``'s reporters randomize their neighbour lists; each
    report about ``{u, v}`` is written to the inbox of ``u``'s partition (``u = min``)."""
    src = Path(source)
    candidates = _load(src / "candidates.npy", mmap=True)
    nodes = _load(_part_dir(src, i) / "nodes.npy")
    reporters = nodes[in_sorted(nodes, candidates)]
    arcs = mechanism.privatize_nodes(
        reporters, _load(src / "private_indptr.npy", mmap=True), _load(src / "private_indices.npy", mmap=True),
        candidates, noise_generator(seed),
    )
    dest = _load(src / "assignment.npy", mmap=True)[np.minimum(arcs[0], arcs[1])]
    order = np.argsort(dest, kind="stable")  # within an inbox the reports keep their order
    targets, starts = np.unique(dest[order], return_index=True)
    bounds = np.append(starts, order.size)
    for k, j in enumerate(targets.tolist()):
        _save(Path(out) / "shuffle" / f"to-{j:05d}" / f"from-{i:05d}.npy", arcs[:, order[bounds[k] : bounds[k + 1]]])
    return {"reports": int(arcs.shape[1])}


def _combine_file_part(j: int, seed: np.random.SeedSequence, *, mechanism: Any, source: str, out: str,
                       num_nodes: int) -> dict[str, Any]:
    """Phase 2 of the edges: the OR rule over the reports about partition ``j``'s pairs, minus
    its public edges. ``seed`` is unused: combining is deterministic post-processing."""
    from privgraph.privatize.mechanisms.edges.edge_arrays import merge_with_public  # lazy: scipy via the registry

    inbox = Path(out) / "shuffle" / f"to-{j:05d}"
    files = sorted(inbox.glob("from-*.npy")) if inbox.is_dir() else []
    arcs = np.concatenate([_load(f) for f in files], axis=1) if files else np.zeros((2, 0), np.int64)
    released = merge_with_public(mechanism.combine_reports(arcs, num_nodes),
                                 _load(_part_dir(Path(source), j) / "edges_public.npy"))
    return {"edges": int(released.shape[1]),
            "edges_sha256": _save(_part_dir(Path(out), j) / "edges_private.npy", released, hashed=True)}


def _summary_file_part(i: int, seed: np.random.SeedSequence, *, source: str, out: str, num_nodes: int) -> dict[str, Any]:
    """What the validation checkpoint reads of partition ``i`` of the release
    (:func:`~privgraph.privatize.summary.release_summary`): its public and released edges, its
    released feature rows (rows not privatized have no range to check), the labels the version
    holds. ``seed`` is unused."""
    src, rel = _part_dir(Path(source), i), _part_dir(Path(out), i)
    edges = [_load(src / "edges_public.npy")]
    if (rel / "edges_private.npy").is_file():
        edges.append(_load(rel / "edges_private.npy"))
    x = _load(rel / "x.npy", mmap=True) if (rel / "x.npy").is_file() else None
    y_dir = rel if (rel / "y.npy").is_file() else src
    y = _load(y_dir / "y.npy") if (y_dir / "y.npy").is_file() else None
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
        from privgraph.privatize.mechanisms import edge_mechanisms  # lazy: scipy via the registry

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
    layout = _layout(src)
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
            output_range = getattr(features, "output_range", None)
            stats["feature_range"] = None if output_range is None else list(output_range())
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
    layout = _layout(src)
    n, num_parts = int(layout["num_nodes"]), int(layout["num_parts"])
    nodes = [_load(_part_dir(src, i) / "nodes.npy") for i in range(num_parts)]

    def rows(field: str) -> np.ndarray | None:
        base = rel if (_part_dir(rel, 0) / f"{field}.npy").is_file() else src
        if field not in layout["fields"] and base is src:
            return None
        parts = [_load(_part_dir(base, i) / f"{field}.npy") for i in range(num_parts)]
        full = np.empty((n, *parts[0].shape[1:]), dtype=parts[0].dtype)
        for p, r in zip(nodes, parts, strict=True):
            full[p] = r
        return full

    def edges(base: Path, name: str) -> np.ndarray:
        e = np.concatenate([_load(_part_dir(base, i) / f"{name}.npy") for i in range(num_parts)], axis=1)
        return np.ascontiguousarray(e[:, np.argsort(e[0] * np.int64(n) + e[1], kind="stable")])

    private = edges(rel, "edges_private") if (_part_dir(rel, 0) / "edges_private.npy").is_file() \
        else np.zeros((2, 0), np.int64)
    meta = dict(layout["meta"])
    meta["privatized"] = True
    return GraphData(
        num_nodes=n, x=rows("x"), y=rows("y"), edges_public=edges(src, "edges_public"), edges_private=private,
        train_mask=rows("train_mask"), val_mask=rows("val_mask"), test_mask=rows("test_mask"), meta=meta,
    )


def _store_file_part(i: int, seed: np.random.SeedSequence, *, source: str, out: str, area: Any) -> dict[str, Any]:
    """Partition ``i`` of the release, written by its task into the store's parts area as the
    version's objects (:func:`~privgraph.publish.storage.graph_io.part_to_objects`): the released rows
    and edges from ``out``, the rest (public edges, splits, unprivatized fields) from ``source``.
    Returns the objects' ``{"sha256", "size"}`` by name. ``seed`` is unused (no randomness)."""
    from privgraph.publish.storage.graph_io import GraphPart, part_to_objects  # lazy: pyarrow, the store's format

    src, rel = _part_dir(Path(source), i), _part_dir(Path(out), i)
    fields = {f: _load(rel / f"{f}.npy" if (rel / f"{f}.npy").is_file() else src / f"{f}.npy")
              for f in _ROW_FIELDS if (src / f"{f}.npy").is_file()}
    private = _load(rel / "edges_private.npy") if (rel / "edges_private.npy").is_file() else np.zeros((2, 0), np.int64)
    part = GraphPart(index=i, nodes=_load(src / "nodes.npy"), fields=fields,
                     edges_public=_load(src / "edges_public.npy"), edges_private=private)
    return {name: area.put(name, blob) for name, blob in part_to_objects(part).items()}


def write_release_parts(source: str | Path, release: str | Path, area: Any, *,
                        executor: Executor | None = None) -> dict[str, dict[str, Any]]:
    """Each partition's task writes its part of the release under ``release`` into ``area`` (a
    :class:`~privgraph.publish.storage.parts.PartsArea`, local or S3) as a partitioned version's objects;
    returns their ``{"sha256", "size"}`` by name (a few bytes per partition: what the client
    holds). On any failure the area is removed."""
    num_parts = int(_layout(Path(source))["num_parts"])
    try:
        written = map_partitions(_store_file_part, list(range(num_parts)),
                                 partition_seeds(np.random.SeedSequence(0), num_parts), executor=executor,
                                 source=str(source), out=str(release), area=area)
    except BaseException:
        area.abort()
        raise
    return {name: meta for objects in written for name, meta in objects.items()}


def commit_release_parts(area: Any, parts: dict[str, dict[str, Any]], num_nodes: int) -> Any:
    """The staged version (:class:`~privgraph.publish.storage.staging.PendingVersion`) of the parts the
    tasks wrote: ``graph.json`` written by the client, the parts copied into the version without
    being read (:meth:`~privgraph.publish.storage.parts.PartsArea.commit`; a failed commit keeps the
    area, for a retry)."""
    from privgraph.publish.storage.graph_io import GRAPH_INFO, NODES, partitioned_graph_info  # lazy: pyarrow, as above

    num_parts = sum(name.endswith("." + NODES) for name in parts)
    return area.commit(parts, {GRAPH_INFO: partitioned_graph_info(num_nodes, num_parts, sorted(parts))})


def store_partitioned_release(source: str | Path, release: PartitionedRelease, area: Any, *,
                              executor: Executor | None = None) -> Any:
    """Write ``release`` into the store as a PARTITIONED version and return it staged (a
    :class:`~privgraph.publish.storage.staging.PendingVersion`: publish its manifest, or abort it):
    :func:`write_release_parts`, then :func:`commit_release_parts`. The version loads
    (:meth:`~privgraph.publish.storage.base.ArtifactStore.load_graph`) to the same graph as
    :func:`load_partitioned_release`; :meth:`~privgraph.publish.storage.base.ArtifactStore.iter_parts`
    streams it partition by partition. On any failure the area is removed."""
    parts = write_release_parts(source, release.directory, area, executor=executor)
    try:
        return commit_release_parts(area, parts, int(_layout(Path(source))["num_nodes"]))
    except BaseException:
        area.abort()
        raise


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
    parts_area: Any | None = None,
) -> PrivatizationResult:
    """:func:`~privgraph.privatize.release.privatize_graph`'s result, computed in the partitioned layout:
    the graph written as a partitioned input in a fresh directory under ``staging`` (the owner's:
    it holds private rows), privatized by tasks that read and write their own partition's files,
    read back, and the directory removed. The same bytes, ledger and stats as ``privatize_graph``
    on the same partitioning and seed (public edges and meta kept as they are).

    With ``parts_area`` (a :class:`~privgraph.publish.storage.parts.PartsArea` of the version's store)
    the tasks also write their part of the release there, as a partitioned version's objects
    (:func:`write_release_parts`), and ``parts`` of the result holds their checksums, for the
    stage step to commit (:func:`commit_release_parts`) once the release is validated.

    Used by the privatize stage when a pipeline sets ``partitions.layout: files``; the mechanisms
    are checked before anything is written.
    """
    fields = [f for f in _ROW_FIELDS if getattr(graph, f) is not None]
    _check_mechanisms({"fields": fields, "private_nodes": int(graph.private_nodes().size)}, features, edges, labels)
    mkdir_private(Path(staging))
    sweep_staging(staging)  # a killed run's raw input (kill -9 skips the cleanup below)
    with tempfile.TemporaryDirectory(dir=staging, prefix=f"{_staging_owner()}{os.getpid()}-") as tmp:
        source = write_partitioned_input(graph, partitioning, Path(tmp) / "input")
        res = privatize_partitioned(source, Path(tmp) / "release", features=features, edges=edges, labels=labels,
                                    root_seed=root_seed, executor=executor, stage=stage)
        parts = None if parts_area is None else write_release_parts(source, res.directory, parts_area, executor=executor)
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
