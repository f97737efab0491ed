"""TUDataset graph-classification sets (REDDIT-BINARY, REDDIT-MULTI-5K, ...) from local files.

Reads (and writes) the raw layout that PyTorch Geometric's ``TUDataset`` downloads, from
``root/name/raw/`` or ``root/name/``; nothing is downloaded:

- ``{name}_A.txt``: one edge per line, ``u, v``, 1-based node ids over ALL graphs;
- ``{name}_graph_indicator.txt``: line ``i`` is the 1-based graph id of node ``i``;
- ``{name}_graph_labels.txt``: one integer label per graph;
- optional ``{name}_node_labels.txt`` (integers, one or more comma-separated columns) and
  ``{name}_node_attributes.txt`` (comma-separated floats).

Edges are undirected: each is stored once with ``u < v``; self-loops and repeated rows (also
``v, u`` after ``u, v``, as TU files list both directions) are dropped. Graph labels are mapped to
``0 .. C-1`` in sorted order (as PyG does); the original values are in ``meta["label_values"]``.
Node features: the node attributes if present, else the one-hot node labels (one block per
column, as PyG), else ``None``; GIN-0 then uses a constant feature 1 per node (Xu et al. 2019 and
paper 004, Sec. V-A: "we used a constant value as the initial feature vector").

Every problem raises a :class:`~privgraph.errors.PrivgraphError` in one line naming the file and
the 1-based line: :class:`~privgraph.errors.DatasetNotFoundError` for a missing directory or file,
:class:`~privgraph.errors.GraphValidationError` for a bad row.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import numpy as np

from privgraph.ingest.datasets.graph_set import GraphSet, split_private_users
from privgraph.errors import DatasetNotFoundError, GraphValidationError, data_refusal
from privgraph.graph import GraphData

__all__ = ["load_tu", "write_tu", "tu_files"]

_SUFFIXES = ("A", "graph_indicator", "graph_labels", "node_labels", "node_attributes")


def tu_files(directory: Path, name: str) -> dict[str, Path]:
    """The paths of the TU files of ``name`` in ``directory`` (whether they exist or not)."""
    return {s: Path(directory) / f"{name}_{s}.txt" for s in _SUFFIXES}


def _find_dir(root: Path, name: str) -> Path:
    tried = [root / name / "raw", root / name]
    for d in tried:
        if (d / f"{name}_A.txt").is_file():
            return d
    raise DatasetNotFoundError(
        f"TU dataset {name!r}: no {name}_A.txt in {tried[0]} or {tried[1]} (nothing is downloaded)"
    )


def _read_table(
    path: Path, *, kind: str, ncols: int | None, what: str, allow_empty: bool = False
) -> tuple[np.ndarray, np.ndarray]:
    """Rows of comma-separated numbers: ``(values [rows, cols], 1-based line of each row)``.

    ``kind`` is ``"int"`` or ``"float"``; ``ncols`` a fixed column count (``None``: the first
    row's). Blank lines are skipped. A malformed row raises one line naming ``path`` and its line.
    """
    if not path.is_file():
        raise DatasetNotFoundError(f"{path}: file not found ({what})")
    raw = path.read_bytes()
    dtype = np.int64 if kind == "int" else np.float64
    import pandas as pd  # here, not at import: a config check never reads a table

    # fast path: pandas' C parser, accepted when every line is one row of the expected width
    try:
        df = pd.read_csv(io.BytesIO(raw), header=None, sep=",", skipinitialspace=True, dtype=dtype,
                         skip_blank_lines=False, engine="c")
        values = df.to_numpy(dtype=dtype)
        n_lines = raw.count(b"\n") + (0 if raw.endswith(b"\n") or not raw else 1)
        ok = values.shape[0] == n_lines and (ncols is None or values.shape[1] == ncols)
        if ok and kind == "float":
            ok = bool(np.isfinite(values).all())
        if ok and values.shape[0]:
            return values, np.arange(1, values.shape[0] + 1, dtype=np.int64)
    except (ValueError, pd.errors.ParserError, pd.errors.EmptyDataError, OverflowError):
        pass
    # slow path: line by line, for blank lines and for the line number of a bad row
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise GraphValidationError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from exc
    rows: list[list[Any]] = []
    lines: list[int] = []
    width = ncols
    for lineno, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        fields = [f.strip() for f in line.split(",")]
        if width is None:
            width = len(fields)
        if len(fields) != width:
            raise data_refusal(f"{path}: line {lineno}: expected {width} comma-separated values ({what}), "
                               f"found {len(fields)}", file=str(path), line=lineno, text=line.strip()[:200])
        try:
            vals = [int(f) if kind == "int" else float(f) for f in fields]
        except ValueError:
            raise data_refusal(f"{path}: line {lineno}: expected {'integers' if kind == 'int' else 'numbers'} ({what})",
                               file=str(path), line=lineno, text=line.strip()[:200]) from None
        if kind == "float" and not all(np.isfinite(vals)):
            raise data_refusal(f"{path}: line {lineno}: NaN or infinite value ({what})", file=str(path), line=lineno,
                               text=line.strip()[:200])
        if kind == "int" and any(abs(v) >= 2**63 for v in vals):
            raise data_refusal(f"{path}: line {lineno}: integer out of range ({what})", file=str(path), line=lineno,
                               text=line.strip()[:200])
        rows.append(vals)
        lines.append(lineno)
    if not rows:
        if allow_empty:
            return np.zeros((0, ncols or 0), dtype=dtype), np.zeros(0, dtype=np.int64)
        raise GraphValidationError(f"{path}: empty file; expected {what}")
    return np.asarray(rows, dtype=dtype), np.asarray(lines, dtype=np.int64)


def _one_hot_columns(labels: np.ndarray) -> np.ndarray:
    """PyG's encoding of TU node labels: per column, ``value - min`` one-hot; columns concatenated."""
    blocks = []
    for c in range(labels.shape[1]):
        col = labels[:, c] - labels[:, c].min()
        block = np.zeros((labels.shape[0], int(col.max()) + 1), dtype=np.float32)
        block[np.arange(labels.shape[0]), col] = 1.0
        blocks.append(block)
    return np.concatenate(blocks, axis=1)


def _check_indicator(ind: np.ndarray, lines: np.ndarray, ind_path: Path, lab_path: Path, num_graphs: int) -> np.ndarray:
    """The graph indicator's ids in ``1 .. G``, non-decreasing, every graph with a node; returns
    the node count of each graph."""
    bad = np.flatnonzero((ind < 1) | (ind > num_graphs))
    if bad.size:
        i = int(bad[0])
        raise data_refusal(f"{ind_path}: line {lines[i]}: a graph id out of range 1..{num_graphs} "
                           f"({lab_path.name} has {num_graphs} labels)", file=str(ind_path), line=lines[i], id=ind[i])
    dec = np.flatnonzero(np.diff(ind) < 0)
    if dec.size:
        i = int(dec[0]) + 1
        raise data_refusal(f"{ind_path}: line {lines[i]}: a graph id below the line before's; nodes must be listed "
                           "graph by graph (ids non-decreasing)", file=str(ind_path), line=lines[i], ids=ind[i - 1:i + 1])
    counts = np.bincount(ind - 1, minlength=num_graphs)
    empty = np.flatnonzero(counts == 0)
    if empty.size:
        raise GraphValidationError(
            f"{ind_path}: graph {int(empty[0]) + 1} has no nodes (no line holds its id)"
        )
    return counts


def _node_features(files: dict[str, Path], num_nodes_total: int, ind_name: str) -> tuple[np.ndarray | None, str | None]:
    """The node attributes (float) or the node labels (one-hot), float32 ``[N, d]``, and which;
    ``(None, None)`` without either file."""
    x_all: np.ndarray | None = None
    features = None
    if files["node_attributes"].is_file():
        x_all, _ = _read_table(files["node_attributes"], kind="float", ncols=None, what="node attributes")
        features = "node_attributes"
    elif files["node_labels"].is_file():
        nl, _ = _read_table(files["node_labels"], kind="int", ncols=None, what="node labels")
        x_all = nl
        features = "node_labels (one-hot)"
    if x_all is not None:
        src = files["node_attributes"] if features == "node_attributes" else files["node_labels"]
        if x_all.shape[0] != num_nodes_total:
            raise GraphValidationError(
                f"{src}: {x_all.shape[0]} rows but {ind_name} lists {num_nodes_total} nodes"
            )
        if features != "node_attributes":
            x_all = _one_hot_columns(x_all)
        x_all = np.ascontiguousarray(x_all, dtype=np.float32)
        if not np.isfinite(x_all).all():
            row = int(np.flatnonzero(~np.isfinite(x_all).all(1))[0])
            raise GraphValidationError(f"{src}: line {row + 1}: value beyond float32 range")

    return x_all, features


def _check_edge_rows(edges: np.ndarray, a_lines: np.ndarray, a_path: Path, ind_path: Path, g_of: np.ndarray) -> None:
    """Every edge ``[2, m]`` (0-based global ids) joins two nodes of one graph (``g_of``: each
    node's graph); else one line naming ``a_path`` and the edge's line."""
    num_nodes_total = g_of.shape[0]
    out = np.flatnonzero(((edges < 0) | (edges >= num_nodes_total)).any(0))
    if out.size:
        i = int(out[0])
        raise data_refusal(f"{a_path}: line {a_lines[i]}: node id out of range 1..{num_nodes_total} "
                           f"({ind_path.name} lists {num_nodes_total} nodes)", file=str(a_path), line=a_lines[i],
                           edge=edges[:, i] + 1)
    cross = np.flatnonzero(g_of[edges[0]] != g_of[edges[1]])
    if cross.size:
        i = int(cross[0])
        u, v = int(edges[0, i]), int(edges[1, i])
        raise data_refusal(f"{a_path}: line {a_lines[i]}: an edge joins two graphs", file=str(a_path),
                           line=a_lines[i], edge=[u + 1, v + 1], graphs=[g_of[u] + 1, g_of[v] + 1])


def _split_by_graph(
    edges: np.ndarray, g_of: np.ndarray, counts: np.ndarray, x_all: np.ndarray | None, name: str
) -> list[GraphData]:
    """One GraphData per graph: local ids, self-loops and repeated (either direction) edges dropped."""
    num_graphs = counts.shape[0]
    start = np.zeros(num_graphs + 1, dtype=np.int64)
    np.cumsum(counts, out=start[1:])
    order = np.argsort(g_of[edges[0]], kind="stable")
    edges = edges[:, order]
    e_start = np.searchsorted(g_of[edges[0]], np.arange(num_graphs + 1))
    graphs = []
    for gi in range(num_graphs):
        local = edges[:, e_start[gi] : e_start[gi + 1]] - start[gi]
        x = None if x_all is None else x_all[start[gi] : start[gi + 1]]
        graphs.append(GraphData.from_edges(int(counts[gi]), local, drop_self_loops=True, deduplicate=True, x=x,
                                           meta={"name": name, "graph_index": gi}))
    return graphs


def load_tu(
    root: str | Path,
    name: str,
    *,
    private_fraction: float = 1.0,
    split_seed: int | np.random.SeedSequence = 0,
) -> GraphSet:
    """Load a TUDataset from ``root/name/raw/`` (or ``root/name/``) as a :class:`GraphSet`.

    Args:
        root: the directory holding the dataset's folder.
        name: the dataset name, e.g. ``"REDDIT-BINARY"`` (the files' prefix).
        private_fraction: the fraction ``1 - alpha`` of each graph's nodes that are private users
            (paper 004, Sec. V-B); an edge is private iff both endpoints are private users
            (:func:`~privgraph.ingest.datasets.graph_set.split_private_users`). ``1.0`` (default): every
            edge private, the paper's common setting.
        split_seed: seeds the public choice of private users (child ``i`` for graph ``i``); never
            recorded.

    Raises:
        DatasetNotFoundError: the directory or a required file is missing.
        GraphValidationError: a malformed row, a node id out of range, an edge joining two graphs,
            graph ids not in ``1 .. G`` or not sorted, a graph without nodes, row counts that
            disagree; one line naming the file and the 1-based line.
    """
    if not isinstance(name, str) or not name or "/" in name or "\\" in name:
        raise DatasetNotFoundError(f"TU dataset name must be a plain name, got {name!r}")
    d = _find_dir(Path(root).expanduser(), name)
    files = tu_files(d, name)
    a_path, ind_path, lab_path = files["A"], files["graph_indicator"], files["graph_labels"]

    ind, ind_lines = _read_table(ind_path, kind="int", ncols=1, what="one graph id per node")
    ind = ind[:, 0]
    graph_labels, _ = _read_table(lab_path, kind="int", ncols=1, what="one label per graph")
    graph_labels = graph_labels[:, 0]
    num_graphs = graph_labels.shape[0]
    num_nodes_total = ind.shape[0]

    counts = _check_indicator(ind, ind_lines, ind_path, lab_path, num_graphs)

    edges, a_lines = _read_table(a_path, kind="int", ncols=2, what="one edge 'u, v' per line, 1-based node ids",
                                  allow_empty=True)
    edges = edges.T - 1  # [2, m], 0-based global ids
    g_of = ind - 1
    _check_edge_rows(edges, a_lines, a_path, ind_path, g_of)
    x_all, features = _node_features(files, num_nodes_total, ind_path.name)
    graphs = _split_by_graph(edges, g_of, counts, x_all, name)

    values, y = np.unique(graph_labels, return_inverse=True)
    if values.size < 2:
        raise data_refusal(f"{lab_path}: all {num_graphs} graphs have one label; at least 2 classes needed",
                           file=str(lab_path), label=values[0])
    meta = {
        "name": name,
        "source": f"TUDataset raw files in {d}",
        "label_values": values.tolist(),
        "features": features or "none: GIN-0 uses a constant feature 1 per node",
        "edges": "undirected, stored once (u < v); self-loops and repeated rows dropped",
    }
    try:
        graph_set = GraphSet(tuple(graphs), y.astype(np.int64), name, meta)
    except GraphValidationError as exc:
        raise GraphValidationError(f"{lab_path}: {exc}", private_detail=exc.private_detail) from exc
    return split_private_users(graph_set, private_fraction, seed=split_seed)


def _write_lines(path: Path, rows: np.ndarray, fmt: str) -> None:
    buf = io.StringIO()
    if rows.size:
        np.savetxt(buf, rows, fmt=fmt, delimiter=", ")
    path.write_text(buf.getvalue())


def write_tu(graph_set: GraphSet, root: str | Path, name: str, *, overwrite: bool = False) -> Path:
    """Write ``graph_set`` in the TU raw layout under ``root/name/raw/``; returns that directory.

    Each undirected edge (public or private: the TU format has no such marking, and
    :func:`load_tu` re-derives it from ``private_fraction``) is written in both directions, as TU
    files do. Labels are written as they are (``0 .. C-1``); node features ``x``, if any, as
    ``{name}_node_attributes.txt`` (float32 values round-trip exactly).

    Raises:
        FileExistsError: a file of the layout exists and ``overwrite`` is false.
    """
    if not isinstance(graph_set, GraphSet):
        raise TypeError(f"write_tu: expected a GraphSet, got {type(graph_set).__name__}")
    d = Path(root).expanduser() / name / "raw"
    files = tu_files(d, name)
    if not overwrite:
        existing = [str(p) for p in files.values() if p.exists()]
        if existing:
            raise FileExistsError(f"write_tu: {existing[0]} exists (pass overwrite=True to replace)")
    d.mkdir(parents=True, exist_ok=True)
    offsets = np.cumsum([0] + [g.num_nodes for g in graph_set.graphs])
    arcs = []
    for off, g in zip(offsets[:-1], graph_set.graphs, strict=True):
        e = g.edges("all")
        e = e[:, np.lexsort((e[1], e[0]))] + off + 1
        arcs.append(np.stack([e, e[::-1]], axis=2).reshape(2, -1))  # u,v then v,u
    a = np.concatenate(arcs, axis=1).T
    _write_lines(files["A"], a, "%d")
    ind = np.repeat(np.arange(1, len(graph_set) + 1), [g.num_nodes for g in graph_set.graphs])
    _write_lines(files["graph_indicator"], ind[:, None], "%d")
    _write_lines(files["graph_labels"], np.asarray(graph_set.labels)[:, None], "%d")
    for p in (files["node_labels"], files["node_attributes"]):
        if overwrite and p.exists():
            p.unlink()
    if graph_set.graphs[0].x is not None:
        x = np.concatenate([g.x for g in graph_set.graphs], axis=0)
        _write_lines(files["node_attributes"], x.astype(np.float64), "%.9g")
    return d
