"""Splits: which edges are private (``split_public_private``) and the train/val/test nodes, drawn
at random (``random_node_split``) or read from the user's split file (``read_node_split``).

The random ones draw only from a ``numpy.random.Generator`` built by
:func:`privgraph.seeding.as_generator`; the same seed gives the same split. Seeds are never
written into ``meta`` (a seed plus the raw data replays the split). A node split is public
(it is part of the input fingerprint); unlabelled nodes (``y == -1``) are in no part.
"""

from __future__ import annotations

import json
import math
import numbers
from pathlib import Path
from typing import Any

import numpy as np

from privgraph.errors import DatasetNotFoundError, GraphValidationError, data_refusal
from privgraph.graph import GraphData
from privgraph.ingest.datasets.table import Table
from privgraph.seeding import as_generator

__all__ = ["split_public_private", "private_edge_positions", "random_node_split", "read_node_split", "SPLIT_PARTS",
           "node_parts", "uncut_edges", "check_fraction"]

#: the parts of a node split, in mask order (``train_mask``, ``val_mask``, ``test_mask``)
SPLIT_PARTS = ("train", "val", "test")

PRIVATE_EDGE_SELECTION = (
    "uniform without replacement: exactly round(rho * m) of all m undirected edges "
    "(edges in sorted (u, v) order, seeded numpy Generator)"
)


def check_fraction(value: Any, name: str) -> float:
    """``value`` as a float in [0, 1]; ValueError naming ``name`` otherwise (NaN, bool, str, ...)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ValueError(f"{name} must be a real number in [0, 1], got {value!r}")
    v = float(value)
    if not math.isfinite(v) or v < 0.0 or v > 1.0:
        raise ValueError(f"{name} must be in [0, 1], got {value!r}")
    return v


def split_public_private(graph: GraphData, rho: float, *, seed: Any) -> GraphData:
    """Mark a uniformly random fraction ``rho`` of ALL edges private, the rest public.

    Exactly ``round(rho * m)`` of the graph's ``m`` undirected edges become private (papers use
    ``rho`` in {0.05, 0.1, 0.2}). Any previous public/private marking is replaced: the selection
    is made over all edges taken in sorted ``(u, v)`` order, so it depends only on the edge set
    and the seed, not on how the input was split before.

    Args:
        graph (GraphData): the input graph (not mutated).
        rho (float): the private fraction, in ``[0, 1]``.
        seed: ``None``, a non-negative int, a ``SeedSequence`` or a ``Generator``.

    Returns:
        GraphData: a copy with new ``edges_public`` / ``edges_private`` and
        ``meta["private_edge_fraction"] = rho``, ``meta["private_edge_selection"]``.

    Raises:
        ValueError: ``rho`` is not a number in ``[0, 1]``.

    >>> path = GraphData(num_nodes=5, edges_public=[[0, 1, 2, 3], [1, 2, 3, 4]])
    >>> marked = split_public_private(path, 0.5, seed=0)
    >>> marked.edges_public.shape[1], marked.edges_private.shape[1]
    (2, 2)
    >>> np.array_equal(marked.edges_private, split_public_private(path, 0.5, seed=0).edges_private)
    True
    """
    rho = check_fraction(rho, "rho")
    e = graph.edges("all")
    m = e.shape[1]
    if m:
        order = np.lexsort((e[1], e[0]))
        e = e[:, order]
    private = np.zeros(m, dtype=bool)
    private[private_edge_positions(m, rho, seed=seed)] = True
    meta = dict(graph.meta)
    meta["private_edge_fraction"] = rho
    meta["private_edge_selection"] = PRIVATE_EDGE_SELECTION
    return graph.replace(
        edges_public=np.ascontiguousarray(e[:, ~private]),
        edges_private=np.ascontiguousarray(e[:, private]),
        meta=meta,
    )


def private_edge_positions(m: int, rho: float, *, seed: Any) -> np.ndarray:
    """The positions, sorted, of the ``round(rho * m)`` edges made private among ``m`` edges taken in
    sorted ``(u, v)`` order (``u < v``): THE rule of :func:`split_public_private`, which
    ``privgraph ingest --rho`` applies to a graph that never is in memory whole (its ranges hold
    the edges in that order), so both give the same marking for the same seed.

    Memory: numpy's draw without replacement holds ``8 m`` bytes while it draws (for
    ``round(rho * m) > m / 50``), then ``8 round(rho * m)``.

    Raises:
        ValueError: ``rho`` is not a number in ``[0, 1]``, or ``m`` is negative.
    """
    rho = check_fraction(rho, "rho")
    if isinstance(m, bool) or not isinstance(m, numbers.Integral) or m < 0:
        raise ValueError(f"m must be a non-negative int, got {m!r}")
    k = int(round(rho * int(m)))
    if not k:
        return np.zeros(0, dtype=np.int64)
    return np.sort(as_generator(seed).choice(int(m), size=k, replace=False)).astype(np.int64, copy=False)


def node_parts(num_nodes: int, masks: tuple[np.ndarray | None, ...]) -> np.ndarray:
    """Each node's part of a node split, int8 ``[n]``: 0 train, 1 val, 2 test (``masks`` in that
    order; a None mask holds no node), 3 for a node in none (a part of its own).

    >>> node_parts(4, (np.array([True, False, False, False]), None, np.array([False, True, False, False]))).tolist()
    [0, 2, 3, 3]
    """
    part = np.full(num_nodes, 3, dtype=np.int8)
    for i, m in enumerate(masks):
        if m is not None:
            part[m] = i
    return part


def uncut_edges(part: np.ndarray, edges: np.ndarray) -> np.ndarray:
    """Boolean ``[m]``: the edges ``[2, m]`` whose two ends lie in the same part of
    :func:`node_parts` (what ``drop_cut_edges`` keeps: paper 001's inductive protocol).

    >>> uncut_edges(np.array([0, 0, 2]), np.array([[0, 1], [1, 2]])).tolist()
    [True, False]
    """
    return part[edges[0]] == part[edges[1]]


def random_node_split(
    num_nodes: int, *, train: float = 0.5, val: float = 0.25, seed: Any, labelled: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A seeded random train/val/test node split (disjoint boolean masks covering the labelled
    nodes: all nodes without ``labelled``).

    Of the ``n_l`` labelled nodes, ``round(train * n_l)`` go to train, ``round(val * n_l)`` to val
    and the rest to test; unlabelled nodes are in none. (The labelled nodes are taken in the order
    of one permutation of all ``n`` nodes, so a fully labelled graph gets the same split as before
    ``labelled`` existed.)

    Args:
        num_nodes (int): number of nodes ``n``.
        train (float): training fraction (default: ``0.5``).
        val (float): validation fraction (default: ``0.25``); ``train + val <= 1``.
        seed: ``None``, a non-negative int, a ``SeedSequence`` or a ``Generator``.

    Returns:
        tuple: ``(train_mask, val_mask, test_mask)``, boolean arrays of shape ``[n]``.
    """
    if isinstance(num_nodes, bool) or not isinstance(num_nodes, numbers.Integral) or num_nodes < 0:
        raise ValueError(f"num_nodes must be a non-negative int, got {num_nodes!r}")
    n = int(num_nodes)
    train = check_fraction(train, "train")
    val = check_fraction(val, "val")
    if train + val > 1.0 + 1e-12:
        raise ValueError(f"train + val must be <= 1, got train={train!r}, val={val!r}")
    perm = as_generator(seed).permutation(n)
    if labelled is not None:
        labelled = np.asarray(labelled, dtype=bool)
        if labelled.shape != (n,):
            raise ValueError(f"labelled must be a boolean mask [{n}], got shape {list(labelled.shape)}")
        perm = perm[labelled[perm]]
    n_l = perm.size
    n_train = int(round(train * n_l))
    n_val = min(int(round(val * n_l)), n_l - n_train)
    masks = []
    for idx in (perm[:n_train], perm[n_train : n_train + n_val], perm[n_train + n_val :]):
        mask = np.zeros(n, dtype=bool)
        mask[idx] = True
        masks.append(mask)
    return masks[0], masks[1], masks[2]


def read_node_split(
    path: Path, num_nodes: int, labelled: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(train_mask, val_mask, test_mask)`` from the user's split file (the ``split`` option).

    Formats (node ids are the dataset's node indices ``0 .. n-1``):
        - ``.json``: ``{"train": [...], "val": [...], "test": [...]}``, each a list of node ids or
          a list of ``n`` booleans (a mask);
        - ``.csv``: columns ``id,split`` (any order of rows; ids not listed are in no part) or one
          column ``split`` (row ``i`` is node ``i``); values ``train``, ``val``, ``test``, or an
          empty cell for a node in no part.

    Raises:
        GraphValidationError: one line naming the file (and the CSV line or JSON key) for an
            unreadable file, a missing or unknown part, an id out of range or listed twice, a
            node in two parts, a mask of the wrong length, an unlabelled node in a part, or an
            empty part.
    """
    path = Path(path)
    n = int(num_nodes)
    suffix = path.suffix.lower()
    if not path.is_file():
        raise DatasetNotFoundError(f"split file not found: {path}")
    if suffix == ".json":
        part = _json_parts(path, n, labelled)
    elif suffix == ".csv":
        part = _csv_parts(path, n, labelled)
    else:
        raise GraphValidationError(f"{path}: unsupported split file type {suffix or '(none)'!r}; expected .json or .csv")
    return part == 0, part == 1, part == 2


def _json_parts(path: Path, n: int, labelled: np.ndarray | None) -> np.ndarray:
    """A ``.json`` split file as each node's part (index into :data:`SPLIT_PARTS`, -1: none)."""
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise GraphValidationError(f"{path}: not valid JSON: {exc}") from None
    if not isinstance(doc, dict):
        raise GraphValidationError(f"{path}: expected an object with keys {list(SPLIT_PARTS)}, got {type(doc).__name__}")
    unknown = [k for k in doc if k not in SPLIT_PARTS]
    missing = [k for k in SPLIT_PARTS if k not in doc]
    if unknown or missing:
        raise GraphValidationError(
            f"{path}: " + (f"unknown key(s) {unknown}" if unknown else f"missing key(s) {missing}")
            + f"; expected exactly {list(SPLIT_PARTS)}"
        )
    part = np.full(n, -1, dtype=np.int8)  # index into SPLIT_PARTS, -1: in no part
    for i, name in enumerate(SPLIT_PARTS):
        where = f"{path}: key {name!r}"
        ids = _json_part_ids(doc[name], n, where)
        clash = np.flatnonzero(part[ids] >= 0)
        if clash.size:
            j = int(clash[0])
            raise data_refusal(f"{where}: entry {j} is a node also in {SPLIT_PARTS[part[ids[j]]]!r}; the parts must "
                               "be disjoint", file=str(path), key=name, entry=j, node=ids[j])
        part[ids] = i
    _check_parts(part, labelled, str(path), lambda rows: f"nodes {_node_list(rows)}")
    return part


def _json_part_ids(v: Any, n: int, where: str) -> np.ndarray:
    """One part of a ``.json`` split (a list of node ids, or ``n`` booleans) as node ids."""
    if not isinstance(v, list):
        raise GraphValidationError(f"{where}: expected a list of node ids or {n} booleans, got {type(v).__name__}")
    if v and all(isinstance(t, bool) for t in v):
        if len(v) != n:
            raise GraphValidationError(f"{where}: a boolean mask of {len(v)} entries; the graph has {n} nodes")
        return np.flatnonzero(np.asarray(v, dtype=bool))
    bad = [j for j, t in enumerate(v) if isinstance(t, bool) or not isinstance(t, int)]
    if bad:
        raise data_refusal(f"{where}: entry {bad[0]} is not an integer; expected node ids (integers) or {n} booleans",
                           at=where, entry=bad[0], value=repr(v[bad[0]])[:200])
    ids = np.asarray(v, dtype=np.int64)
    out = np.flatnonzero((ids < 0) | (ids >= n))
    if out.size:
        raise data_refusal(f"{where}: entry {int(out[0])}: a node id outside 0..{n - 1}", at=where,
                           entries=out, ids=ids[out])
    order = np.argsort(ids, kind="stable")
    twice = np.flatnonzero(ids[order][1:] == ids[order][:-1])
    if twice.size:
        j, k = sorted((int(order[twice[0]]), int(order[twice[0] + 1])))
        raise data_refusal(f"{where}: entry {k} lists the node of entry {j} again; each node once", at=where,
                           entries=[j, k], node=ids[j])
    return ids


def _csv_parts(path: Path, n: int, labelled: np.ndarray | None) -> np.ndarray:
    """A ``.csv`` split file (``id,split`` or one column ``split``) as each node's part."""
    tab = Table.read(path, typed={"id": "int"})
    cols = [str(c) for c in tab.df.columns]
    if sorted(cols) == ["id", "split"]:
        ids = tab.node_ids(n)
    elif cols == ["split"]:
        if len(tab.df) != n:
            raise GraphValidationError(
                f"{path}: {len(tab.df)} rows in the one-column split file; the graph has {n} nodes (row i is node i)"
            )
        ids = np.arange(n, dtype=np.int64)
    else:
        raise GraphValidationError(
            f"{path}: cannot read a split from columns {cols}; expected columns id,split or one column split"
        )
    text = tab.df["split"].astype(object).where(tab.df["split"].notna(), "").astype(str).str.strip().str.lower()
    known = text.isin(SPLIT_PARTS + ("",)).to_numpy()
    if not known.all():
        bad = np.flatnonzero(~known)
        raise tab.refuse("split", "values other than train, val, test or empty", bad)
    lookup = {name: i for i, name in enumerate(SPLIT_PARTS)}
    part = np.full(n, -1, dtype=np.int8)
    part[ids] = np.array([lookup.get(t, -1) for t in text], dtype=np.int8)
    row_of = np.full(n, -1, dtype=np.int64)
    row_of[ids] = np.arange(ids.size)
    _check_parts(part, labelled, str(path), lambda rows: tab.where(row_of[rows]))
    return part


def _node_list(rows: np.ndarray) -> str:
    shown = ", ".join(str(int(r)) for r in rows[:5])
    return f"[{shown}]" + (f" (and {rows.size - 5} more)" if rows.size > 5 else "")


def _check_parts(part: np.ndarray, labelled: np.ndarray | None, where: str, rows_at: Any) -> None:
    for i, name in enumerate(SPLIT_PARTS):
        if not (part == i).any():
            raise GraphValidationError(f"{where}: the {name!r} part has no node")
    if labelled is not None:
        bad = np.flatnonzero((part >= 0) & ~np.asarray(labelled, dtype=bool))
        if bad.size:
            raise GraphValidationError(
                f"{where}: unlabelled nodes in the split at {rows_at(bad)}; "
                "a node without a label can be in no part"
            )
