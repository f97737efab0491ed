"""Dataset loaders, the public/private edge split and synthetic generators.

``load_dataset(name, ...)`` dispatches to a loader by name and optionally marks a random
fraction ``rho`` of the edges private. Real data is read from :func:`data_root`
(``$PRIVGRAPH_DATA_ROOT``, else ``./data``).
"""

from __future__ import annotations

import inspect
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from privgraph.datasets.generic import load_generic
from privgraph.datasets.musae import load_musae_facebook
from privgraph.datasets.planetoid import load_planetoid
from privgraph.datasets.split import random_node_split, split_public_private
from privgraph.datasets.synthetic import sbm_graph
from privgraph.graph import GraphData

__all__ = [
    "DATASETS",
    "PATH_OPTIONS",
    "check_dataset_options",
    "data_root",
    "load_dataset",
    "load_generic",
    "load_musae_facebook",
    "load_planetoid",
    "random_node_split",
    "sbm_graph",
    "split_public_private",
]


def data_root() -> Path:
    """The data root: ``$PRIVGRAPH_DATA_ROOT`` if set (and non-empty), else ``./data`` (cwd)."""
    env = os.environ.get("PRIVGRAPH_DATA_ROOT")
    if env:
        return Path(env).expanduser()
    return Path.cwd() / "data"


def _planetoid(name: str) -> Callable[..., GraphData]:
    def load(root: Path, **options: Any) -> GraphData:
        return load_planetoid(name, root, **options)

    return load


#: options that name files: relative paths are read under the dataset root
PATH_OPTIONS = ("edges", "features", "labels", "cache_dir")


def _under(root: Path, value: Any) -> Any:
    return value if value is None else Path(root) / Path(value).expanduser()


def _generic(root: Path, **options: Any) -> GraphData:
    if "edges" not in options:
        raise ValueError("dataset 'generic' needs the option edges=<path to a .csv or .parquet file>")
    files = {k: _under(root, options.pop(k, None)) for k in ("edges", "features", "labels")}
    return load_generic(files.pop("edges"), **files, **options)


def _sbm(root: Path, **options: Any) -> GraphData:
    if "num_nodes" not in options:
        raise ValueError("dataset 'sbm' needs the option num_nodes=<int>")
    # the synthetic graph is a dataset definition: the same options give the same graph
    options.setdefault("seed", 0)
    return sbm_graph(**options)


#: name -> loader(root, **options)
DATASETS: dict[str, Callable[..., GraphData]] = {
    "cora": _planetoid("cora"),
    "citeseer": _planetoid("citeseer"),
    "pubmed": _planetoid("pubmed"),
    "facebook": lambda root, **options: load_musae_facebook(root, **options),
    "generic": _generic,
    "sbm": _sbm,
}


#: name -> the loader function whose keyword arguments are that dataset's options
_OPTION_SOURCES: dict[str, tuple[Callable[..., Any], tuple[str, ...]]] = {
    "cora": (load_planetoid, ("name", "root")),
    "citeseer": (load_planetoid, ("name", "root")),
    "pubmed": (load_planetoid, ("name", "root")),
    "facebook": (load_musae_facebook, ("root",)),
    "generic": (load_generic, ()),
    "sbm": (sbm_graph, ()),
}


def check_dataset_options(name: str, options: Mapping[str, Any]) -> None:
    """Refuse unknown and missing options of dataset ``name`` before anything is read.

    The options of a dataset are its loader's keyword arguments (``generic``: ``edges`` required,
    ``features``, ``labels``, ``num_nodes``, ``private_column``; ``sbm``: ``num_nodes`` required
    and :func:`sbm_graph`'s others; Planetoid: ``cache_dir``, ``download``; ``facebook``:
    ``train``, ``val``, ``node_split_seed``).

    Raises:
        ValueError: ``"options.<key>: ..."`` for the first unknown or missing option.
    """
    key = name.lower()
    if key not in _OPTION_SOURCES:
        raise ValueError(f"unknown dataset {name!r}; known datasets: {sorted(DATASETS)}")
    fn, positional = _OPTION_SOURCES[key]
    params = {k: p for k, p in inspect.signature(fn).parameters.items() if k not in positional}
    for opt in options:
        if opt not in params:
            raise ValueError(
                f"options.{opt}: unknown option of dataset {name!r}; its options: {', '.join(params) or 'none'}"
            )
    for opt, p in params.items():
        if p.default is inspect.Parameter.empty and opt not in options:
            raise ValueError(f"options.{opt}: required by dataset {name!r} and not set")
    for opt in PATH_OPTIONS:
        v = options.get(opt)
        if opt in params and v is not None and not isinstance(v, (str, os.PathLike)):
            raise ValueError(f"options.{opt}: expected a file path, got {v!r}")
    if "num_nodes" in options and isinstance(options["num_nodes"], bool):
        raise ValueError(f"options.num_nodes: expected a number, got {str(options['num_nodes']).lower()}")


def load_dataset(
    name: str,
    *,
    root: Path | None = None,
    rho: float | None = None,
    split_seed: int = 0,
    **options: Any,
) -> GraphData:
    """Load a dataset by name and optionally make a random fraction ``rho`` of its edges private.

    Names: ``cora``, ``citeseer``, ``pubmed`` (Planetoid), ``facebook`` (MUSAE), ``generic``
    (options ``edges``, ``features``, ``labels``, ``num_nodes``, ``private_column``: see
    :func:`load_generic`; relative file paths are read under the data root), ``sbm`` (options of
    :func:`sbm_graph`).

    With ``rho`` set, :func:`split_public_private` marks exactly ``round(rho * m)`` edges private
    (seeded by ``split_seed``). With ``rho=None`` the loader's marking stands: all edges public,
    unless a ``generic`` edge list carries a private column.

    Raises:
        ValueError: unknown name, or ``rho`` given for an edge list that already marks edges
            private (pass ``rho=None`` to keep the file's marking).
    """
    key = name.lower()
    if key not in DATASETS:
        raise ValueError(f"unknown dataset {name!r}; known datasets: {sorted(DATASETS)}")
    graph = DATASETS[key](data_root() if root is None else Path(root), **options)
    if rho is not None:
        if graph.edges_private.shape[1]:
            raise ValueError(
                f"dataset {name!r} already marks {graph.edges_private.shape[1]} edges private; "
                f"rho={rho!r} would replace that marking: pass rho=None to keep it"
            )
        graph = split_public_private(graph, rho, seed=split_seed)
    return graph
