"""Planetoid citation graphs (Cora, CiteSeer, PubMed) from their raw ``ind.<name>.*`` files.

The raw files are read in place and nothing is written next to them (the data directory may be
read-only). When they are absent and the network is reachable, PyG's ``Planetoid`` downloads them
into a writable cache directory; otherwise :class:`~privgraph.errors.DatasetNotFoundError` says
where it looked and what it expected.
"""

from __future__ import annotations

import os
import socket
import warnings
from pathlib import Path
from typing import Any

import numpy as np

from privgraph.errors import DatasetNotFoundError, GraphValidationError
from privgraph.graph import GraphData

__all__ = ["load_planetoid", "PLANETOID_NAMES", "RAW_SUFFIXES", "default_cache_dir"]

#: lower-case name -> PyG's directory name
PLANETOID_NAMES = {"cora": "Cora", "citeseer": "CiteSeer", "pubmed": "PubMed"}
RAW_SUFFIXES = ("x", "tx", "allx", "y", "ty", "ally", "graph", "test.index")

_BINARY = "dataset definition (binary bag-of-words)"
_SOURCE = "Planetoid (Yang et al. 2016), raw files ind.{name}.* (kimiyoung/planetoid)"
_DOWNLOAD_HOST = ("github.com", 443)


def default_cache_dir() -> Path:
    """``$PRIVGRAPH_CACHE_DIR/planetoid`` if set, else ``~/.cache/privgraph/planetoid``."""
    base = os.environ.get("PRIVGRAPH_CACHE_DIR")
    root = Path(base).expanduser() if base else Path.home() / ".cache" / "privgraph"
    return root / "planetoid"


def _network_reachable(timeout: float = 3.0) -> bool:
    """Whether the Planetoid download host accepts a TCP connection (tests monkeypatch this)."""
    try:
        with socket.create_connection(_DOWNLOAD_HOST, timeout=timeout):
            return True
    except OSError:
        return False


def _raw_files(raw_dir: Path, name: str) -> list[Path]:
    return [raw_dir / f"ind.{name}.{s}" for s in RAW_SUFFIXES]


def _missing(raw_dir: Path, name: str) -> list[str]:
    return [p.name for p in _raw_files(raw_dir, name) if not p.is_file()]


def _download(pyg_name: str, cache_dir: Path) -> Path:
    """Download with PyG's ``Planetoid`` into ``cache_dir``; return the raw directory."""
    from torch_geometric.datasets import Planetoid  # lazy: PyG (torch), only to download a dataset

    cache_dir.mkdir(parents=True, exist_ok=True)
    Planetoid(root=str(cache_dir), name=pyg_name)
    return cache_dir / pyg_name / "raw"


def _read_raw(raw_dir: Path, name: str) -> Any:
    from torch_geometric.io import read_planetoid_data  # lazy: PyG (torch), only to read the raw files

    try:
        with warnings.catch_warnings():  # read_file installs a global warnings filter
            return read_planetoid_data(str(raw_dir), name)
    except Exception as exc:  # pickle/format errors of a damaged file
        raise GraphValidationError(f"{raw_dir}: cannot read Planetoid files ind.{name}.*: {exc}") from exc


def _source_dir(key: str, pyg_name: str, raw_dir: Path, cache: Path, download: bool) -> Path:
    """Where the raw files are: ``raw_dir``, else the cache's copy, else a fresh download into the
    cache (when allowed and the network is reachable); DatasetNotFoundError naming both places."""
    missing = _missing(raw_dir, key)
    if not missing:
        return raw_dir
    cached_raw = cache / pyg_name / "raw"
    if not _missing(cached_raw, key):
        return cached_raw
    if download and _network_reachable():
        try:
            source_dir = _download(pyg_name, cache)
        except Exception as exc:
            raise DatasetNotFoundError(
                f"Planetoid {pyg_name}: raw files absent from {raw_dir} and the download into "
                f"{cache} failed: {exc}"
            ) from exc
        still = _missing(source_dir, key)
        if still:
            raise DatasetNotFoundError(
                f"Planetoid {pyg_name}: download into {cache} did not produce {still}"
            )
        return source_dir
    why = "downloads are disabled" if not download else "the network is unreachable"
    raise DatasetNotFoundError(
        f"Planetoid {pyg_name} not found: looked in {raw_dir} (missing {missing}; expected "
        f"ind.{key}.{{{','.join(RAW_SUFFIXES)}}}) and in the cache {cached_raw}, and "
        f"{why}. Set PRIVGRAPH_DATA_ROOT to a directory containing "
        f"planetoid/{pyg_name}/raw/ (or pass root=...)."
    )


def load_planetoid(
    name: str,
    root: Path | str,
    *,
    cache_dir: Path | str | None = None,
    download: bool = True,
) -> GraphData:
    """Load a Planetoid citation graph with its standard public split.

    Reads ``<root>/planetoid/<Name>/raw/ind.<name>.{x,tx,allx,y,ty,ally,graph,test.index}``.
    Planetoid's graph dict carries duplicate edges (and self-loops in some datasets): they are
    dropped, and each undirected edge is kept once. All edges are public.

    STATS (Cora): 2,708 nodes, 5,278 undirected edges, 1,433 binary features, 7 classes;
    split 140 train / 500 val / 1,000 test.

    Args:
        name (str): ``"cora"``, ``"citeseer"`` or ``"pubmed"`` (any case).
        root (Path): the data root (see :func:`privgraph.ingest.datasets.data_root`).
        cache_dir (Path, optional): writable directory for downloads
            (default: :func:`default_cache_dir`).
        download (bool): download when the raw files are absent and the network is reachable.

    Raises:
        ValueError: unknown name.
        DatasetNotFoundError: files absent and no download possible.
    """
    key = name.lower()
    if key not in PLANETOID_NAMES:
        raise ValueError(f"unknown Planetoid dataset {name!r}; known: {sorted(PLANETOID_NAMES)}")
    pyg_name = PLANETOID_NAMES[key]
    raw_dir = Path(root).expanduser() / "planetoid" / pyg_name / "raw"
    cache = Path(cache_dir).expanduser() if cache_dir is not None else default_cache_dir()
    source_dir = _source_dir(key, pyg_name, raw_dir, cache, download)
    data = _read_raw(source_dir, key)
    x = data.x.numpy().astype(np.float32, copy=False)
    y = data.y.numpy().astype(np.int64, copy=False)
    n = int(y.shape[0])
    binary = key in ("cora", "citeseer")
    if binary and not np.isin(x, (0.0, 1.0)).all():
        raise GraphValidationError(
            f"{source_dir}: ind.{key}.* features are expected to be binary (0/1) but are not"
        )
    meta: dict[str, Any] = {
        "name": key,
        "source": _SOURCE.format(name=key),
        "path": str(source_dir),
        "split": "Planetoid standard public split",
        "feature_bounds": [0.0, 1.0] if binary else None,
        "feature_bounds_source": _BINARY
        if binary
        else "none: PubMed features are TF-IDF weights; configure public bounds",
    }
    return GraphData.from_edges(
        n,
        data.edge_index.numpy(),
        drop_self_loops=True,
        deduplicate=True,
        x=x,
        y=y,
        train_mask=data.train_mask.numpy().astype(bool),
        val_mask=data.val_mask.numpy().astype(bool),
        test_mask=data.test_mask.numpy().astype(bool),
        meta=meta,
    )
