"""MUSAE Facebook Page-Page (Rozemberczki, Allen and Sarkar 2021) from its raw CSV/JSON files."""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import numpy as np

from privgraph.ingest.datasets.table import Table, short_list
from privgraph.ingest.datasets.split import random_node_split
from privgraph.errors import DatasetNotFoundError, GraphValidationError, data_refusal
from privgraph.graph import GraphData

__all__ = ["load_musae_facebook", "FACEBOOK_FILES"]

FACEBOOK_FILES = ("facebook_edges.csv", "facebook_features.json", "facebook_target.csv")
_BINARY = "dataset definition (binary bag-of-words)"


def read_labels(path: Path) -> tuple[int, np.ndarray, list[str]]:
    tab = Table.read(path, typed={"id": "int"})
    tab.require("id", "page_type")
    ids = tab.int_column("id")
    n = len(ids)
    out = np.flatnonzero((ids < 0) | (ids >= n))
    if out.size:
        raise GraphValidationError(
            f"node ids out of range [0, {n}) (the file has {n} rows) at {tab.where(out)}"
        )
    seen = np.zeros(n, dtype=np.int64)
    np.add.at(seen, ids, 1)
    if (seen != 1).any():
        order = np.argsort(ids, kind="stable")
        s = ids[order]
        dup = np.sort(order[np.flatnonzero(s[1:] == s[:-1]) + 1])
        raise GraphValidationError(f"duplicate node ids at {tab.where(dup)}")
    types = tab.df["page_type"]
    bad = np.flatnonzero(types.isna().to_numpy() | (types.astype(str).str.strip() == "").to_numpy())
    if bad.size:
        raise GraphValidationError(f"column 'page_type': missing values at {tab.where(bad)}")
    text = types.astype(str).to_numpy()
    names, codes = np.unique(text, return_inverse=True)
    y = np.empty(n, dtype=np.int64)
    y[ids] = codes
    return n, y, [str(s) for s in names]


def read_features(path: Path, n: int) -> np.ndarray:
    try:
        with path.open("rb") as f:
            d = json.load(f)
    except json.JSONDecodeError as exc:
        raise GraphValidationError(
            f"{path}: invalid JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}"
        ) from exc
    if not isinstance(d, dict):
        raise GraphValidationError(
            f"{path}: expected an object {{\"node_id\": [feature_id, ...]}}, got {type(d).__name__}"
        )
    keys = list(d.keys())
    try:
        nodes = np.array([int(k) for k in keys], dtype=np.int64)
    except ValueError:
        bad = [j for j, k in enumerate(keys) if not k.strip().lstrip("+-").isdigit()]
        raise data_refusal(f"{path}: non-integer node ids (keys) at entries {short_list(bad)} (0-based, in file order)",
                           file=str(path), entries=bad, keys=[keys[j] for j in bad]) from None
    out = np.flatnonzero((nodes < 0) | (nodes >= n))
    if out.size:
        raise data_refusal(f"{path}: node ids (keys) out of range [0, {n}) at entries {short_list(out.tolist())} (0-based, "
                           "in file order)", file=str(path), entries=out, ids=nodes[out])
    if len(np.unique(nodes)) != len(nodes):  # json keeps the last of repeated keys
        raise GraphValidationError(f"{path}: repeated node ids")
    if len(nodes) != n:
        present = np.zeros(n, dtype=bool)
        present[nodes] = True
        raise GraphValidationError(
            f"{path}: no feature list for nodes {short_list(np.flatnonzero(~present).tolist())}"
        )
    values = list(d.values())
    bad_nodes = [
        keys[i]
        for i, v in enumerate(values)
        if not isinstance(v, list)
        or not all(isinstance(f, int) and not isinstance(f, bool) and f >= 0 for f in v)
    ]
    if bad_nodes:
        raise GraphValidationError(
            f"{path}: expected a list of non-negative integer feature ids for nodes {short_list(bad_nodes)}"
        )
    lens = np.fromiter((len(v) for v in values), dtype=np.int64, count=len(values))
    fids = np.fromiter(itertools.chain.from_iterable(values), dtype=np.int64, count=int(lens.sum()))
    rows = np.repeat(nodes, lens)
    vocab, cols = np.unique(fids, return_inverse=True)
    x = np.zeros((n, len(vocab)), dtype=np.float32)
    x[rows, cols] = 1.0
    return x


def read_edges(path: Path, n: int, target: Path) -> np.ndarray:
    """``facebook_edges.csv``'s ``id_1,id_2`` rows as ``[2, rows]``, refusing ids outside the
    ``n`` nodes of ``target`` (its file named, with the lines)."""
    tab = Table.read(path, typed={"id_1": "int", "id_2": "int"})
    tab.require("id_1", "id_2")
    e = np.stack([tab.int_column("id_1"), tab.int_column("id_2")])
    out = np.flatnonzero(((e < 0) | (e >= n)).any(0))
    if out.size:
        raise GraphValidationError(
            f"node ids out of range [0, {n}) ({target.name} has {n} nodes) at {tab.where(out)}"
        )
    return e


def load_musae_facebook(
    root: Path | str,
    *,
    train: float = 0.5,
    val: float = 0.25,
    node_split_seed: Any = 0,
) -> GraphData:
    """Load MUSAE Facebook Page-Page: verified Facebook pages linked by mutual likes.

    Reads ``<root>/musae/facebook/facebook_{edges.csv,features.json,target.csv}``. Labels are the
    page types mapped to ints in sorted-name order (``meta["label_names"]``: company, government,
    politician, tvshow). Features are a dense float32 binary matrix with the feature ids compacted
    to ``0 .. d-1`` in sorted order. Self-loops and duplicate rows of the edge list are dropped
    (counts in ``meta``). There is no standard split: a seeded random node split
    (``train`` / ``val`` / rest) is drawn. All edges are public.

    STATS: 22,470 nodes, 170,823 undirected edges (171,002 rows, 179 of them self-loops),
    4,714 binary features, 4 classes.

    Raises:
        DatasetNotFoundError: files absent.
        GraphValidationError: malformed rows (naming file and line) or inconsistent files.
    """
    folder = Path(root).expanduser() / "musae" / "facebook"
    missing = [f for f in FACEBOOK_FILES if not (folder / f).is_file()]
    if missing:
        raise DatasetNotFoundError(
            f"MUSAE Facebook not found: looked in {folder}, missing {missing} (expected "
            f"{list(FACEBOOK_FILES)}). Set PRIVGRAPH_DATA_ROOT to a directory containing "
            f"musae/facebook/ (or pass root=...)."
        )
    edges_path, feat_path, target_path = (folder / f for f in FACEBOOK_FILES)

    n, y, label_names = read_labels(target_path)

    e = read_edges(edges_path, n, target_path)
    num_rows = int(e.shape[1])
    num_loops = int((e[0] == e[1]).sum())

    x = read_features(feat_path, n)
    train_mask, val_mask, test_mask = random_node_split(n, train=train, val=val, seed=node_split_seed)
    meta: dict[str, Any] = {
        "name": "facebook",
        "source": "MUSAE Facebook Page-Page (Rozemberczki et al. 2021), benedekrozemberczki/MUSAE",
        "path": str(folder),
        "label_names": label_names,
        "feature_bounds": [0.0, 1.0],
        "feature_bounds_source": _BINARY,
        "edge_rows": num_rows,
        "self_loops_dropped": num_loops,
        "split": f"random node split {train:g}/{val:g}/{1 - train - val:g} (seeded)",
    }
    g = GraphData.from_edges(
        n,
        e,
        drop_self_loops=True,
        deduplicate=True,
        x=x,
        y=y,
        train_mask=train_mask,
        val_mask=val_mask,
        test_mask=test_mask,
        meta=meta,
    )
    g.meta["duplicate_edges_dropped"] = num_rows - num_loops - g.num_edges
    return g
