"""Image graphs: a directory of node images, a node table and an edge list; and a bundled one.

The format (a directory)::

    nodes.csv   id, image[, label][, split]
    edges.csv   src, dst[, private]
    <images>    any files Pillow decodes, named by nodes.csv relative to the directory

* ``nodes.csv``: ``id`` an integer node id (the ids are exactly ``0 .. n-1``, each once, rows in
  any order); ``image`` a path relative to the directory (absolute paths and paths that leave
  the directory are refused); ``label`` (optional column) an integer class ``>= 0`` (``-1`` or empty: unlabelled); ``split``
  (optional column) ``train``, ``val``, ``test`` or empty (the node is in no split part).
* ``edges.csv``: ``src``, ``dst`` node ids, one undirected edge per row (either direction, each
  edge once); ``private`` (optional column) ``true``/``false`` or ``1``/``0`` (without the column
  every edge is public).

Every problem raises :class:`~privgraph.errors.GraphValidationError` (a missing directory or
table :class:`~privgraph.errors.DatasetNotFoundError`) as one line naming the file and its
1-based line (the header is line 1), e.g. ``.../nodes.csv line 7: image photos/x.png not
found``; every row is checked and further offending lines are listed (the first few). Every image
must exist and decode. The loader writes nothing.

:mod:`privgraph.ingest.datasets.photo_graph` writes a small graph in this format from
scikit-image's bundled photos (the ``photos`` dataset).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path, PurePosixPath, PureWindowsPath
from typing import TYPE_CHECKING, Any

import numpy as np
from PIL import Image

from privgraph.ingest.datasets.table import Table, short_list
from privgraph.errors import DatasetNotFoundError, GraphValidationError, data_refusal
from privgraph.graph import UNLABELLED, GraphData

if TYPE_CHECKING:  # pandas is imported where a table is read (privgraph.ingest.datasets.table)
    import pandas as pd

__all__ = ["EDGES_FILE", "IMAGE_GRAPH_SOURCE", "NODES_FILE", "SPLIT_VALUES", "load_image_graph"]

#: ``meta["source"]`` of every graph :func:`load_image_graph` returns
IMAGE_GRAPH_SOURCE = "image graph"
NODES_FILE = "nodes.csv"
EDGES_FILE = "edges.csv"
SPLIT_VALUES = ("train", "val", "test")


# -- reading ----------------------------------------------------------------------------------
def _at(path: Path, lines: np.ndarray, rows: np.ndarray, describe: Callable[[int], str],
        values: Callable[[np.ndarray], dict[str, Any]] | None = None) -> GraphValidationError:
    """One line: ``<path> line L: <what is wrong with the first row>`` (also lines [...]).
    ``describe`` names the column and the rule, never a cell's value (the user's data, maybe
    private): ``values(rows)``, if given, are the offending values for the owner's refusal record
    (:func:`~privgraph.errors.data_refusal`)."""
    rows = np.sort(np.asarray(rows, dtype=np.int64))
    first = int(rows[0])
    msg = f"{path} line {int(lines[first])}: {describe(first)}"
    if rows.size > 1:
        msg += f" (also at lines {short_list(lines[rows[1:]].tolist())}; 1-based, the header is line 1)"
    if values is None:
        return GraphValidationError(msg)
    return data_refusal(msg, file=str(path), lines=lines[rows], **values(rows))


def _text(s: pd.Series) -> np.ndarray:
    """A column as stripped strings, missing cells (NaN, None) as ``""``."""
    out = s.astype(object).where(~s.isna(), "")
    return np.asarray([str(v).strip() for v in out], dtype=object)


def _read_table(path: Path, typed: dict[str, str]) -> Table:
    if not path.is_file():
        raise DatasetNotFoundError(f"{path}: file not found (an image graph needs {NODES_FILE} and {EDGES_FILE})")
    return Table.read(path, typed=typed)


def _read_nodes(
    directory: Path,
) -> tuple[Path, np.ndarray, np.ndarray, np.ndarray, np.ndarray | None, np.ndarray | None]:
    """``(nodes.csv path, its line of each row, the row of each node id, image path text, labels
    and split values per row)``."""
    path = directory / NODES_FILE
    tab = _read_table(path, {"id": "int", "label": "int"})
    tab.require("id", "image")
    n = len(tab.df)
    if n == 0:
        raise GraphValidationError(f"{path}: no node rows; expected a header and one row per node")
    lines = tab.lines
    ids = tab.int_column("id")

    order = np.argsort(ids, kind="stable")
    ids_sorted = ids[order]
    repeat = np.flatnonzero(ids_sorted[1:] == ids_sorted[:-1]) + 1
    if repeat.size:
        first_of = {}
        for pos in range(len(order)):
            first_of.setdefault(int(ids_sorted[pos]), int(order[pos]))
        dup_rows = order[repeat]
        raise _at(path, lines, dup_rows,
                  lambda r: f"column 'id': the id of line {int(lines[first_of[int(ids[r])]])} again; "
                            "ids must be 0..n-1, each once", lambda rows: {"ids": ids[rows]})
    out = np.flatnonzero((ids < 0) | (ids >= n))
    if out.size:
        raise _at(path, lines, out,
                  lambda r: f"column 'id': an id outside 0..{n - 1}: the {n} rows must hold ids 0..{n - 1}, each once",
                  lambda rows: {"ids": ids[rows]})

    labels = None
    if "label" in tab.df.columns:
        labels = tab.int_column("label", missing=UNLABELLED)
        neg = np.flatnonzero(labels < UNLABELLED)
        if neg.size:
            raise _at(path, lines, neg,
                      lambda r: "column 'label': a label below -1: labels are classes 0, 1, ...; "
                                "-1 or an empty cell marks an unlabelled node", lambda rows: {"labels": labels[rows]})

    split = None
    if "split" in tab.df.columns:
        split = np.char.lower(_text(tab.df["split"]).astype(str))
        bad = np.flatnonzero(~np.isin(split, ("", *SPLIT_VALUES)))
        if bad.size:
            raw = _text(tab.df["split"])
            raise _at(path, lines, bad, lambda r: "column 'split': a value other than train, val, test or empty",
                      lambda rows: {"values": raw[rows]})

    if labels is not None and split is not None:
        placed = np.flatnonzero((labels == UNLABELLED) & (split != ""))
        if placed.size:
            raise _at(path, lines, placed,
                      lambda r: "column 'split': an unlabelled node in a split part: a node without a label can be in "
                                "no part", lambda rows: {"split": split[rows]})
    images = _text(tab.df["image"])
    empty = np.flatnonzero(images == "")
    if empty.size:
        raise _at(path, lines, empty, lambda r: "missing image path")
    absolute = np.flatnonzero([PurePosixPath(p).is_absolute() or PureWindowsPath(p).is_absolute() for p in images])
    if absolute.size:
        raise _at(path, lines, absolute,
                  lambda r: f"image path {images[r]} is absolute; give a path relative to {directory}")
    outside = np.flatnonzero([os.path.normpath(p).split(os.sep)[0] == os.pardir for p in images])
    if outside.size:
        raise _at(path, lines, outside,
                  lambda r: f"image path {images[r]} leaves the image graph directory {directory}")
    return path, lines, order, images, labels, split


def _check_images(path: Path, lines: np.ndarray, directory: Path, images: np.ndarray) -> list[Path]:
    """Absolute path of each row's image, after checking that all exist and decode."""
    paths = [directory / p for p in images]
    missing = np.flatnonzero([not p.is_file() for p in paths])
    if missing.size:
        raise _at(path, lines, missing,
                  lambda r: f"image {images[r]} " + ("is not a file" if paths[r].exists() else "not found"))
    problems: dict[int, str] = {}
    for r, p in enumerate(paths):
        try:
            with Image.open(p) as im:
                im.verify()  # checksums and structure (PNG CRCs) without decoding
            with Image.open(p) as im:
                im.load()  # decodes: a truncated file fails here
        except Exception as exc:  # Pillow's decoders raise OSError, SyntaxError, ValueError, ...
            problems[r] = " ".join(f"{type(exc).__name__}: {exc}".split())
    if problems:
        raise _at(path, lines, np.fromiter(problems, dtype=np.int64),
                  lambda r: f"image {images[r]} is unreadable ({problems[r]})")
    return paths


def _read_edges(directory: Path, n: int) -> tuple[np.ndarray, np.ndarray | None]:
    path = directory / EDGES_FILE
    tab = _read_table(path, {"src": "int", "dst": "int", "private": "bool"})
    tab.require("src", "dst")
    lines = tab.lines
    if len(tab.df) == 0:
        return np.zeros((2, 0), np.int64), None
    e = np.stack([tab.int_column("src"), tab.int_column("dst")])
    private = tab.bool_column("private") if "private" in tab.df.columns else None

    def edges(rows: np.ndarray) -> dict[str, Any]:
        return {"edges": e[:, rows].T}

    out = np.flatnonzero(((e < 0) | (e >= n)).any(0))
    if out.size:
        def _range(r: int) -> str:
            column = "src" if not 0 <= e[0, r] < n else "dst"
            return f"column {column!r}: a node id out of range: ids are 0..{n - 1}"

        raise _at(path, lines, out, _range, edges)
    loops = np.flatnonzero(e[0] == e[1])
    if loops.size:
        raise _at(path, lines, loops, lambda r: "a self-loop (src = dst)", edges)
    keys = np.minimum(e[0], e[1]) * np.int64(n) + np.maximum(e[0], e[1])
    order = np.argsort(keys, kind="stable")
    ks = keys[order]
    starts = np.r_[True, ks[1:] != ks[:-1]]
    if not starts.all():
        group_first = order[np.flatnonzero(starts)][np.cumsum(starts) - 1]  # first row of each row's edge
        dup = order[~starts]
        first_row = dict(zip(order.tolist(), group_first.tolist()))
        raise _at(path, lines, dup,
                  lambda r: f"a duplicate edge: the same undirected edge as line {int(lines[first_row[r]])}", edges)
    return e, private


def load_image_graph(path: str | Path) -> GraphData:
    """Load an image graph directory (``nodes.csv``, ``edges.csv``, the images).

    The features are not read: ``x`` is ``None`` (an embedding stage computes them from the
    images). Split options (``train``, ``val``, ``drop_cut_edges``) are applied by
    :func:`privgraph.ingest.datasets.load_dataset`, as for every dataset.

    Args:
        path (str | Path): the image graph directory.

    Returns:
        GraphData: ``y`` from the ``label`` column (else ``None``); ``train_mask``/``val_mask``/
        ``test_mask`` from the ``split`` column (``None`` without the column or when every cell
        is empty); public and private edges from the ``private`` column; ``meta`` with
        ``name`` (``"images"``), ``source`` (``"image graph"``), ``image_dir`` (the absolute
        directory) and ``image_paths`` (a tuple of absolute paths, in node order).

    Raises:
        DatasetNotFoundError: the directory, ``nodes.csv`` or ``edges.csv`` does not exist.
        GraphValidationError: a bad row of either table (named by file and line: ids not
            ``0..n-1`` or repeated, negative labels, unknown split values, absolute or missing
            image paths, missing or unreadable images, ids out of range, self-loops, duplicate
            edges in either direction, bad private flags, non-integers, missing columns).
    """
    if not isinstance(path, (str, os.PathLike)):
        raise ValueError(f"image graph path: expected a directory path, got {path!r}")
    directory = Path(os.path.abspath(Path(path).expanduser()))
    if not directory.is_dir():
        raise DatasetNotFoundError(f"image graph directory not found: {directory}")
    nodes_path, lines, order, images, labels, split = _read_nodes(directory)
    n = len(order)
    e, private = _read_edges(directory, n)  # the tables first: cheaper than decoding images
    paths = _check_images(nodes_path, lines, directory, images)

    y = None if labels is None else labels[order]
    masks: dict[str, np.ndarray | None] = {"train_mask": None, "val_mask": None, "test_mask": None}
    if split is not None and (split != "").any():
        node_split = split[order]
        masks = {f"{s}_mask": node_split == s for s in SPLIT_VALUES}
    meta: dict[str, Any] = {
        "name": "images",
        "source": IMAGE_GRAPH_SOURCE,
        "image_dir": str(directory),
        "image_paths": tuple(os.path.normpath(str(paths[r])) for r in order),
        "feature_bounds": None,
        "feature_bounds_source": "none: features are computed from the images later",
    }
    return GraphData.from_edges(n, e, private, x=None, y=y, meta=meta, **masks)
