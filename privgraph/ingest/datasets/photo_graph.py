"""The bundled ``photos`` dataset: a small image graph (:mod:`privgraph.ingest.datasets.image_graph`'s
format) of seeded augmented crops of scikit-image's bundled photos, the class being the source
photo, for tests and the quick start. :func:`write_photo_graph` writes it (byte-deterministic for
a seed, atomic, idempotent); :func:`load_photo_graph` writes it once under the cache directory
(:func:`photo_graph_dir`) and loads it.
"""

from __future__ import annotations

import io
import json
import math
import numbers
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import skimage.data
from PIL import Image

from privgraph.graph import GraphData
from privgraph.ingest.datasets.image_graph import EDGES_FILE, NODES_FILE, load_image_graph
from privgraph.seeding import as_generator, as_seed_sequence, stage_seed

__all__ = [
    "PHOTO_CLASSES",
    "PHOTO_GRAPH_MARKER",
    "PHOTO_GRAPH_VERSION",
    "PhotoClass",
    "load_photo_graph",
    "photo_graph_dir",
    "read_photo_graph_marker",
    "write_photo_graph",
]

PHOTO_GRAPH_VERSION = 1
PHOTO_GRAPH_MARKER = "photo_graph.json"
IMAGE_SIZE = 128
CROP_RANGE = (0.5, 0.9)  # crop side as a fraction of the photo's shorter side
AVERAGE_DEGREE = 6.0
WITHIN_CLASS = 0.8  # the fraction of edge draws that join two nodes of one class
SPLIT_FRACTIONS = (0.5, 0.25)  # train, val; the rest test


class PhotoClass(NamedTuple):
    """A class of the photo graph: one of ``skimage.data``'s bundled photos.

    ``face`` says the photo shows a person's face; ``face_box`` is its ``(row0, row1, col0, col1)``
    in the photo (found once with scikit-image's LBP frontal-face cascade), which every crop of
    the class contains whole.
    """

    name: str
    face: bool
    face_box: tuple[int, int, int, int] | None = None


#: The classes, label order: photos bundled in the scikit-image wheel (no download)
PHOTO_CLASSES: tuple[PhotoClass, ...] = (
    PhotoClass("astronaut", True, (62, 163, 177, 284)),  # Eileen Collins, RGB 512x512
    PhotoClass("camera", True, (124, 180, 207, 263)),  # the cameraman, grayscale 512x512
    PhotoClass("chelsea", False),  # a cat, RGB 300x451
    PhotoClass("coffee", False),  # a cup of coffee, RGB 400x600
    PhotoClass("rocket", False),  # a rocket launch, RGB 427x640
)


def _photo(name: str) -> np.ndarray:
    a = np.asarray(getattr(skimage.data, name)())
    if a.ndim == 2:
        a = np.repeat(a[:, :, None], 3, axis=2)
    return np.ascontiguousarray(a[:, :, :3], dtype=np.uint8)


def _params(num_nodes: Any, seed: Any, private_fraction: Any) -> dict[str, Any]:
    if isinstance(num_nodes, bool) or not isinstance(num_nodes, numbers.Integral) or int(num_nodes) < 10:
        raise ValueError(f"num_nodes: expected an int >= 10, got {num_nodes!r}")
    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral) or int(seed) < 0:
        raise ValueError(f"seed: expected an int >= 0, got {seed!r}")
    if (isinstance(private_fraction, bool) or not isinstance(private_fraction, numbers.Real)
            or not math.isfinite(float(private_fraction)) or not 0.0 <= float(private_fraction) <= 1.0):
        raise ValueError(f"private_fraction: expected a number in [0, 1], got {private_fraction!r}")
    return {"num_nodes": int(num_nodes), "seed": int(seed), "private_fraction": float(private_fraction)}


def _marker(params: dict[str, Any], num_edges: int) -> dict[str, Any]:
    return {
        "generator": "privgraph.datasets.image_graph.write_photo_graph",
        "version": PHOTO_GRAPH_VERSION,
        "params": params,
        "classes": [{"label": i, "name": c.name, "face": c.face, "source": f"skimage.data.{c.name}"}
                    for i, c in enumerate(PHOTO_CLASSES)],
        "image_size": [IMAGE_SIZE, IMAGE_SIZE],
        "num_edges": num_edges,
    }


def read_photo_graph_marker(directory: str | Path) -> dict[str, Any] | None:
    """The parsed ``photo_graph.json`` of ``directory``, or ``None`` when absent or malformed."""
    try:
        marker = json.loads((Path(directory) / PHOTO_GRAPH_MARKER).read_text())
    except (OSError, ValueError):
        return None
    return marker if isinstance(marker, dict) else None


def _is_complete(directory: Path, params: dict[str, Any]) -> bool:
    m = read_photo_graph_marker(directory)
    return (m is not None and m.get("version") == PHOTO_GRAPH_VERSION and m.get("params") == params
            and (directory / NODES_FILE).is_file() and (directory / EDGES_FILE).is_file())


def _crops(rng: np.random.Generator, labels: np.ndarray) -> list[bytes]:
    """PNG bytes of each node's crop: a random square of 50-90% of the photo's shorter side
    (containing the face box of a face class), flipped with probability 1/2, resized."""
    n = len(labels)
    frac = rng.uniform(*CROP_RANGE, size=n)
    pos = rng.random((n, 2))
    flip = rng.random(n) < 0.5
    photos = {c: _photo(PHOTO_CLASSES[c].name) for c in np.unique(labels).tolist()}
    out = []
    for i in range(n):
        cls = PHOTO_CLASSES[int(labels[i])]
        a = photos[int(labels[i])]
        h, w = a.shape[:2]
        side = int(frac[i] * min(h, w))
        lo, hi = [0, 0], [h - side, w - side]
        if cls.face_box is not None:
            r0, r1, c0, c1 = cls.face_box
            lo = [max(0, r1 - side), max(0, c1 - side)]
            hi = [min(r0, h - side), min(c0, w - side)]
        top, left = (lo[k] + int(pos[i, k] * (hi[k] - lo[k] + 1)) for k in range(2))
        im = Image.fromarray(a[top:top + side, left:left + side])
        if flip[i]:
            im = im.transpose(Image.Transpose.FLIP_LEFT_RIGHT)
        im = im.resize((IMAGE_SIZE, IMAGE_SIZE), Image.Resampling.LANCZOS)
        buf = io.BytesIO()
        im.save(buf, format="PNG")
        out.append(buf.getvalue())
    return out


def _homophilous_edges(rng: np.random.Generator, labels: np.ndarray) -> np.ndarray:
    """About ``AVERAGE_DEGREE * n / 2`` distinct edges ``[2, m]`` (``u < v``, sorted), each draw
    joining two nodes of one class with probability ``WITHIN_CLASS``, else of two classes."""
    n = len(labels)
    m = min(int(round(AVERAGE_DEGREE * n / 2)), n * (n - 1) // 2)
    by_class = np.argsort(labels, kind="stable")
    counts = np.bincount(labels)
    start = np.r_[0, np.cumsum(counts)[:-1]]
    keys: list[np.ndarray] = []
    seen: set[int] = set()
    have = 0
    for _ in range(10_000):
        if have >= m:
            break
        size = 2 * (m - have) + 16
        u = rng.integers(n, size=size)
        within = rng.random(size) < WITHIN_CLASS
        pick = rng.random(size)
        same = by_class[start[labels[u]] + (pick * counts[labels[u]]).astype(np.int64)]
        other = (pick * n).astype(np.int64)
        v = np.where(within, same, other)
        ok = (u != v) & ((labels[u] == labels[v]) == within)
        lo, hi = np.minimum(u, v)[ok], np.maximum(u, v)[ok]
        new = []
        for k in (lo * np.int64(n) + hi).tolist():
            if k not in seen and have + len(new) < m:
                seen.add(k)
                new.append(k)
        have += len(new)
        keys.append(np.asarray(new, dtype=np.int64))
    else:  # pragma: no cover - m <= n(n-1)/2 and both kinds of pairs exist for n >= 10
        raise RuntimeError("photo graph: could not draw enough distinct edges")
    k = np.sort(np.concatenate(keys))
    return np.stack([k // n, k % n])


def _write_into(directory: Path, params: dict[str, Any]) -> None:
    n, pf = params["num_nodes"], params["private_fraction"]
    root = as_seed_sequence(params["seed"])
    rng = {name: as_generator(stage_seed(root, f"photo_graph/{name}"))
           for name in ("labels", "crops", "edges", "private", "split")}
    k = len(PHOTO_CLASSES)
    labels = rng["labels"].permutation(np.arange(n, dtype=np.int64) % k)
    edges = _homophilous_edges(rng["edges"], labels)
    m = edges.shape[1]
    private = np.zeros(m, dtype=bool)
    private[rng["private"].choice(m, size=int(round(pf * m)), replace=False)] = True
    perm = rng["split"].permutation(n)
    n_train, n_val = int(round(SPLIT_FRACTIONS[0] * n)), int(round(SPLIT_FRACTIONS[1] * n))
    split = np.full(n, "test", dtype=object)
    split[perm[:n_train]] = "train"
    split[perm[n_train:n_train + n_val]] = "val"

    (directory / "images").mkdir()
    names = []
    for i, png in enumerate(_crops(rng["crops"], labels)):
        name = f"images/{i:06d}.png"  # the name says nothing of the class
        (directory / name).write_bytes(png)
        names.append(name)
    rows = ["id,image,label,split"] + [f"{i},{names[i]},{int(labels[i])},{split[i]}" for i in range(n)]
    (directory / NODES_FILE).write_text("\n".join(rows) + "\n")
    rows = ["src,dst,private"] + [f"{int(a)},{int(b)},{'true' if p else 'false'}"
                                  for a, b, p in zip(edges[0], edges[1], private)]
    (directory / EDGES_FILE).write_text("\n".join(rows) + "\n")
    # last: the marker says the directory is complete
    (directory / PHOTO_GRAPH_MARKER).write_text(json.dumps(_marker(params, m), indent=2, sort_keys=True) + "\n")


def write_photo_graph(
    directory: str | Path, *, num_nodes: int = 300, seed: int = 0, private_fraction: float = 0.3
) -> Path:
    """Write an image graph of augmented crops of scikit-image's bundled photos.

    Node ``i`` is a seeded crop of one of the :data:`PHOTO_CLASSES` photos (its class, balanced
    over the classes): a square of 50-90% of the photo's shorter side (containing the face of a
    face class), flipped left-right with probability 1/2, resized to 128x128 RGB, saved as PNG
    (the same bytes for the same seed). About ``3 * num_nodes`` edges (average degree 6), each
    drawn within a class with probability 0.8; exactly ``round(private_fraction * m)`` of them
    private; a 50/25/25 train/val/test split column. All draws are public (seeded PCG64).

    The graph is written into a temporary sibling directory and renamed into place;
    ``photo_graph.json`` (written last) records the parameters, the generator version and the
    classes. A directory that already holds a graph written with the same parameters and version
    is returned untouched; one holding another photo graph is replaced.

    Args:
        directory (str | Path): where the graph goes (created with its parents).
        num_nodes (int): number of nodes, at least 10 (default: ``300``).
        seed (int): the seed of every draw (default: ``0``).
        private_fraction (float): the fraction of edges marked private, in ``[0, 1]``
            (default: ``0.3``).

    Returns:
        Path: ``directory``.

    Raises:
        ValueError: a bad parameter, or ``directory`` exists, is not empty and holds no photo graph.
    """
    params = _params(num_nodes, seed, private_fraction)
    directory = Path(directory).expanduser()
    if _is_complete(directory, params):
        return directory
    if directory.exists() and not _replaceable(directory):
        raise ValueError(f"{directory}: exists and holds no photo graph; refusing to replace it")
    directory.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{directory.name}.tmp-", dir=directory.parent))
    try:
        _write_into(tmp, params)
        _install(tmp, directory, params)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return directory


def _replaceable(directory: Path) -> bool:
    """An empty directory, or one holding a photo graph (any parameters or version)."""
    return directory.is_dir() and (not any(directory.iterdir()) or read_photo_graph_marker(directory) is not None)


def _install(tmp: Path, directory: Path, params: dict[str, Any]) -> None:
    """Rename ``tmp`` to ``directory``; a concurrent writer's equal graph wins, an old one is replaced."""
    try:
        os.rename(tmp, directory)  # atomic; fails when directory exists and is not empty
        return
    except OSError:
        if _is_complete(directory, params):  # another writer got there first: keep theirs
            return
        if not _replaceable(directory):
            raise ValueError(f"{directory}: exists and holds no photo graph; refusing to replace it") from None
    old = Path(tempfile.mkdtemp(prefix=f".{directory.name}.old-", dir=directory.parent))
    os.rename(directory, old / "graph")
    try:
        os.rename(tmp, directory)
    finally:
        shutil.rmtree(old, ignore_errors=True)


def photo_graph_dir(*, num_nodes: int = 300, seed: int = 0, private_fraction: float = 0.3) -> Path:
    """Where the ``photos`` dataset is cached: ``$PRIVGRAPH_CACHE_DIR/datasets/photos-v<version>-
    n<num_nodes>-seed<seed>-p<private_fraction>`` (else under ``~/.cache/privgraph``).

    Raises:
        ValueError: a bad parameter.
    """
    p = _params(num_nodes, seed, private_fraction)
    base = os.environ.get("PRIVGRAPH_CACHE_DIR")
    root = Path(base).expanduser() if base else Path.home() / ".cache" / "privgraph"
    name = f"photos-v{PHOTO_GRAPH_VERSION}-n{p['num_nodes']}-seed{p['seed']}-p{p['private_fraction']!r}"
    return root / "datasets" / name


def load_photo_graph(*, num_nodes: int = 300, seed: int = 0, private_fraction: float = 0.3) -> GraphData:
    """The ``photos`` dataset: :func:`write_photo_graph` into :func:`photo_graph_dir` (once), then
    :func:`load_image_graph`.

    Returns:
        GraphData: as :func:`load_image_graph`, with ``meta["name"] = "photos"``,
        ``meta["classes"]`` (the class names, label order), ``meta["face_classes"]`` (the labels
        whose photo shows a face) and ``meta["num_classes"]``.

    Raises:
        ValueError: a bad parameter.
    """
    directory = write_photo_graph(photo_graph_dir(num_nodes=num_nodes, seed=seed, private_fraction=private_fraction),
                                  num_nodes=num_nodes, seed=seed, private_fraction=private_fraction)
    graph = load_image_graph(directory)
    meta = {
        **graph.meta,
        "name": "photos",
        "classes": tuple(c.name for c in PHOTO_CLASSES),
        "face_classes": tuple(i for i, c in enumerate(PHOTO_CLASSES) if c.face),
        "num_classes": len(PHOTO_CLASSES),
    }
    return graph.replace(meta=meta)
