"""Dataset loaders, the public/private edge split and synthetic generators.

``load_dataset(name, ...)`` dispatches to a loader by name and optionally marks a random
fraction ``rho`` of the edges private. Real data is read from :func:`data_root`
(``$PRIVGRAPH_DATA_ROOT``, else ``./data``).
"""

from __future__ import annotations

import os
from collections.abc import Callable
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


def _generic(root: Path, **options: Any) -> GraphData:
    if "edges" not in options:
        raise ValueError("dataset 'generic' needs the option edges=<path to a .csv or .parquet file>")
    return load_generic(**options)


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
    :func:`load_generic`), ``sbm`` (options of :func:`sbm_graph`).

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
