"""Dataset loaders, the public/private edge split and synthetic generators.

``load_dataset(name, ...)`` dispatches to a loader by name and optionally marks a random
fraction ``rho`` of the edges private. Real data is read from :func:`data_root`
(``$PRIVGRAPH_DATA_ROOT``, else ``./data``).
"""

from __future__ import annotations

import functools
import inspect
import os
import typing
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError, create_model

from privgraph.ingest.datasets.generic import load_generic
from privgraph.ingest.datasets.image_graph import load_image_graph
from privgraph.ingest.datasets.musae import load_musae_facebook
from privgraph.ingest.datasets.photo_graph import load_photo_graph
from privgraph.ingest.datasets.planetoid import load_planetoid
from privgraph.ingest.datasets.split import (
    node_parts, random_node_split, read_node_split, split_public_private, uncut_edges)
from privgraph.ingest.datasets.synthetic import sbm_graph
from privgraph.ingest.datasets.tu import load_tu
from privgraph.ingest.partitioned_graph import load_partitioned_graph
from privgraph.errors import ConfigError
from privgraph.graph import GraphData
from privgraph.guarantee.redaction import redact_uri

__all__ = [
    "DATASETS",
    "PATH_OPTIONS",
    "SPLIT_FILE_OPTION",
    "partitioned_path",
    "check_dataset_options",
    "options_model",
    "data_root",
    "check_graph_set_options",
    "drop_cut_edges",
    "load_graph_set",
    "load_dataset",
    "load_generic",
    "load_musae_facebook",
    "load_planetoid",
    "random_node_split",
    "read_node_split",
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
PATH_OPTIONS = ("edges", "features", "labels", "cache_dir", "path", "split")


def _under(root: Path, value: Any) -> Any:
    return value if value is None else Path(root) / Path(value).expanduser()


def partitioned_path(root: Path, value: Any) -> str:
    """A ``partitioned`` dataset's ``path`` option: a URI (``s3://bucket/prefix``, read through
    ``pyarrow.fs``) as it is, else a path under the data root."""
    return str(value) if "://" in str(value) else str(_under(root, value))


def _generic(root: Path, **options: Any) -> GraphData:
    if "edges" not in options:
        raise ValueError("dataset 'generic' needs the option edges=<path to a .csv or .parquet file>")
    files = {k: _under(root, options.pop(k, None)) for k in ("edges", "features", "labels")}
    return load_generic(files.pop("edges"), **files, **options)


def _partitioned(root: Path, **options: Any) -> GraphData:
    if options.get("path") is None:
        raise ValueError("dataset 'partitioned' needs the option path=<partitioned graph directory (privgraph ingest)>")
    return load_partitioned_graph(partitioned_path(root, options.pop("path")), **options)


def _sbm(root: Path, **options: Any) -> GraphData:
    if "num_nodes" not in options:
        raise ValueError("dataset 'sbm' needs the option num_nodes=<int>")
    # the synthetic graph is a dataset definition: the same options give the same graph
    options.setdefault("seed", 0)
    return sbm_graph(**options)


def _images(root: Path, **options: Any) -> GraphData:
    if options.get("path") is None:
        raise ValueError("dataset 'images' needs the option path=<image graph directory>")
    return load_image_graph(_under(root, options.pop("path")), **options)


def _photos(root: Path, **options: Any) -> GraphData:
    # written once under $PRIVGRAPH_CACHE_DIR/datasets (not the data root): the same options
    # give the same graph
    return load_photo_graph(**options)


#: name -> loader(root, **options)
DATASETS: dict[str, Callable[..., GraphData]] = {
    "cora": _planetoid("cora"),
    "citeseer": _planetoid("citeseer"),
    "pubmed": _planetoid("pubmed"),
    "facebook": lambda root, **options: load_musae_facebook(root, **options),
    "generic": _generic,
    "partitioned": _partitioned,
    "sbm": _sbm,
    "images": _images,
    "photos": _photos,
}


#: the node-split options every dataset takes (a seeded random train / val / rest-test split,
#: seeded by ``node_split_seed``, which is configuration like ``split_seed``, never an option)
SPLIT_OPTIONS = ("train", "val")
#: every dataset's option naming a split file (:func:`~privgraph.ingest.datasets.split.read_node_split`)
SPLIT_FILE_OPTION = "split"
#: Every dataset's option that removes the edges between nodes of different split parts (train,
#: val, test; nodes in none form a part of their own): the inductive protocol of paper 001's
#: experiments ("edges between nodes in the two sets were removed").
CUT_EDGES_OPTION = "drop_cut_edges"

#: name -> the loader function whose keyword arguments are that dataset's options
_OPTION_SOURCES: dict[str, tuple[Callable[..., Any], tuple[str, ...]]] = {
    "cora": (load_planetoid, ("name", "root")),
    "citeseer": (load_planetoid, ("name", "root")),
    "pubmed": (load_planetoid, ("name", "root")),
    "facebook": (load_musae_facebook, ("root",)),
    "generic": (load_generic, ()),
    "partitioned": (load_partitioned_graph, ()),
    "sbm": (sbm_graph, ()),
    "images": (load_image_graph, ()),
    "photos": (load_photo_graph, ()),
}


@functools.cache
def options_model(name: str) -> type[BaseModel]:
    """The pydantic model of dataset ``name``'s options: its loader's keyword arguments with their
    annotated types and defaults, plus the split options every dataset takes (strict types, no
    unknown keys)."""
    fn, positional = _OPTION_SOURCES[name]
    hints = typing.get_type_hints(fn)
    fields: dict[str, Any] = {}
    for k, p in inspect.signature(fn).parameters.items():
        if k in positional or k == "node_split_seed":
            continue
        fields[k] = (hints.get(k, Any), ... if p.default is inspect.Parameter.empty else p.default)
    fields.update({k: (float | None, None) for k in SPLIT_OPTIONS})
    fields[CUT_EDGES_OPTION] = (bool, False)
    fields[SPLIT_FILE_OPTION] = (str | None, None)
    return create_model(f"{name}_options", __config__=ConfigDict(extra="forbid", strict=True,
                                                                 arbitrary_types_allowed=True), **fields)


def check_dataset_options(name: str, options: Mapping[str, Any]) -> None:
    """Refuse unknown and missing options of dataset ``name`` before anything is read.

    The options of a dataset are its loader's keyword arguments (``generic``: ``edges`` required,
    ``features``, ``labels``, ``num_nodes``, ``private_column``; ``sbm``: ``num_nodes`` required
    and :func:`sbm_graph`'s others; Planetoid: ``cache_dir``, ``download``; ``facebook``:
    ``train``, ``val``).

    Every dataset also takes :data:`SPLIT_OPTIONS` (``train``, ``val``: fractions of a seeded
    random node split that replaces the loader's own; LPGNN uses 0.5 / 0.25); its seed is
    ``node_split_seed`` of :func:`load_dataset` (``dataset.node_split_seed``), never an option.
    Or ``split``: a split file (``.json`` / ``.csv``, :func:`read_node_split`), not with them.

    Raises:
        ValueError: ``"options.<key>: ..."`` for the first unknown or missing option.
    """
    key = name.lower()
    if key not in _OPTION_SOURCES:
        raise ValueError(f"unknown dataset {name!r}; known datasets: {sorted(DATASETS)}")
    if "node_split_seed" in options:
        raise ValueError("options.node_split_seed: a split seed is configuration, not a dataset option: "
                         "set dataset.node_split_seed (kept out of every manifest, like split_seed)")
    for opt in PATH_OPTIONS:  # a URI (it may hold credentials) is named redacted, and only where it is read
        v = options.get(opt)
        if isinstance(v, str) and "://" in v and (key, opt) != ("partitioned", "path"):
            raise ValueError(f"options.{opt}: {redact_uri(v)} is a URI; dataset {name!r} reads local files "
                             "(only a partitioned graph's path may be a URI)")
    _split_fractions(options)
    fn, positional = _OPTION_SOURCES[key]
    params = {k: p for k, p in inspect.signature(fn).parameters.items()
              if k not in positional and k != "node_split_seed"}
    params.update({k: inspect.Parameter(k, inspect.Parameter.KEYWORD_ONLY, default=None)
                   for k in (*SPLIT_OPTIONS, CUT_EDGES_OPTION, SPLIT_FILE_OPTION)})
    if SPLIT_FILE_OPTION in options:
        both = [k for k in SPLIT_OPTIONS if k in options]
        if both:
            raise ValueError(f"options.{both[0]}: set either a split file (split) or random fractions (train, val), not both")
        v = options[SPLIT_FILE_OPTION]
        if not isinstance(v, (str, os.PathLike)) or os.path.splitext(str(v))[1].lower() not in (".json", ".csv"):
            raise ValueError(f"options.split: expected the path of a .json or .csv split file, got {v!r}")
    if not isinstance(options.get(CUT_EDGES_OPTION, False), bool):
        raise ValueError(f"options.{CUT_EDGES_OPTION}: expected true or false, got {options[CUT_EDGES_OPTION]!r}")
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
    try:  # every option's type, from the loader's annotations (strict: no "5" for 5, no true for 1)
        options_model(key).model_validate(dict(options))
    except ValidationError as exc:
        err = exc.errors()[0]
        got = err.get("input")
        raise ValueError(f"options.{err['loc'][0]}: {err['msg']}, got {got!r}") from None


def _split_fractions(options: Mapping[str, Any]) -> tuple[float, float] | None:
    """``(train, val)`` of a configured random node split (a missing one: LPGNN's 0.5 / 0.25),
    or ``None`` when neither is set. ValueError ``options.<key>: ...`` on a bad fraction."""
    if not any(k in options for k in SPLIT_OPTIONS):
        return None
    out = []
    for k, default in zip(SPLIT_OPTIONS, (0.5, 0.25)):
        v = options.get(k, default)
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0.0 < float(v) < 1.0:
            raise ValueError(f"options.{k}: a node fraction in (0, 1), got {v!r}")
        out.append(float(v))
    if out[0] + out[1] >= 1.0:
        raise ValueError(f"options.val: train + val must leave test nodes (< 1), got {out[0]:g} + {out[1]:g}")
    return out[0], out[1]


def drop_cut_edges(graph: GraphData) -> GraphData:
    """``graph`` without the edges (public or private) whose endpoints lie in different parts of
    its node split (``train_mask``, ``val_mask``, ``test_mask``; nodes in none are one more part):
    paper 001's inductive protocol. How many were dropped is not recorded (the private ones are
    private)."""
    if graph.train_mask is None:
        raise ValueError(f"options.{CUT_EDGES_OPTION}: the graph has no node split to cut along; give it one "
                         f"(options {' and '.join(SPLIT_OPTIONS)}, or {SPLIT_FILE_OPTION}: a split file)")
    part = node_parts(graph.num_nodes, (graph.train_mask, graph.val_mask, graph.test_mask))
    return graph.replace(edges_public=graph.edges_public[:, uncut_edges(part, graph.edges_public)],
                         edges_private=graph.edges_private[:, uncut_edges(part, graph.edges_private)])


def load_dataset(
    name: str,
    *,
    root: Path | None = None,
    rho: float | None = None,
    split_seed: int = 0,
    node_split_seed: int = 0,
    **options: Any,
) -> GraphData:
    """Load a dataset by name and optionally make a random fraction ``rho`` of its edges private.

    Names: ``cora``, ``citeseer``, ``pubmed`` (Planetoid), ``facebook`` (MUSAE), ``generic``
    (options ``edges``, ``features``, ``labels``, ``num_nodes``, ``private_column``: see
    :func:`load_generic`; relative file paths are read under the data root), ``partitioned``
    (option ``path``: a partitioned graph written by ``privgraph ingest``, read whole by
    :func:`~privgraph.ingest.partitioned_graph.load_partitioned_graph`), ``sbm`` (options of
    :func:`sbm_graph`).

    With ``drop_cut_edges: true`` (every dataset) the edges between split parts are removed
    (:func:`drop_cut_edges`), after the split and before ``rho``.

    With ``train`` / ``val`` among the options (every dataset), the loader's node split is replaced
    by :func:`random_node_split` with those fractions of the labelled nodes (the other one LPGNN's
    0.5 / 0.25), seeded by ``node_split_seed``; ``meta["split"]`` says so (without the seed). With
    ``split`` (a ``.json`` / ``.csv`` file under the data root, every dataset) it is replaced by
    the file's split (:func:`read_node_split`).

    With ``rho`` set, :func:`split_public_private` marks exactly ``round(rho * m)`` edges private
    (seeded by ``split_seed``). With ``rho=None`` the loader's marking stands: all edges public,
    unless a ``generic`` edge list carries a private column.

    Raises:
        ValueError: unknown name; ConfigError (a ValueError): ``rho`` given for an edge list that
            already marks its private edges (pass ``rho=None`` to keep the file's marking).
    """
    key = name.lower()
    if key not in DATASETS:
        raise ValueError(f"unknown dataset {name!r}; known datasets: {sorted(DATASETS)}")
    fractions = _split_fractions(options)
    drop_cut = bool(options.get(CUT_EDGES_OPTION, False))
    root = data_root() if root is None else Path(root)
    split_file = _under(root, options.get(SPLIT_FILE_OPTION))
    options = {k: v for k, v in options.items() if k not in (*SPLIT_OPTIONS, CUT_EDGES_OPTION, SPLIT_FILE_OPTION)}
    if key == "facebook":  # its loader draws this split itself (the same function and seed)
        options["node_split_seed"] = node_split_seed
        if fractions is not None:
            options["train"], options["val"] = fractions
    graph = DATASETS[key](root, **options)
    graph = _replaced_split(graph, split_file, None if key == "facebook" else fractions, node_split_seed)
    if drop_cut:
        graph = drop_cut_edges(graph)
    if rho is not None:
        if graph.edges_private.shape[1]:
            # no count here: how many edges the data marks private is the data's, and this line
            # is published (CLI output, logs); ConfigError: one line, exit 2, not a traceback
            raise ConfigError(
                f"dataset {name!r}: rho = {rho!r} would replace the private edges that its edge list "
                f"marks itself (a private column): give rho or the column, not both"
            )
        graph = split_public_private(graph, rho, seed=split_seed)
    return graph


def _replaced_split(graph: GraphData, split_file: Path | None, fractions: tuple[float, float] | None,
                    node_split_seed: int) -> GraphData:
    """``graph`` with the split of ``split_file``, else a seeded random node split of the
    labelled nodes by ``fractions`` (train, val), else as loaded; ``meta["split"]`` says which."""
    if split_file is not None:
        masks = read_node_split(split_file, graph.num_nodes, graph.labelled())
        meta = {**graph.meta, "split": f"split file {split_file.name}"}
        return graph.replace(train_mask=masks[0], val_mask=masks[1], test_mask=masks[2], meta=meta)
    if fractions is not None:
        train, val = fractions
        masks = random_node_split(graph.num_nodes, train=train, val=val, seed=node_split_seed,
                                  labelled=graph.labelled())
        meta = {**graph.meta, "split": f"random node split {train:g}/{val:g}/{1 - train - val:g} (seeded)"}
        return graph.replace(train_mask=masks[0], val_mask=masks[1], test_mask=masks[2], meta=meta)
    return graph


#: The multi-graph datasets (graph classification) and the options each takes.
GRAPH_SET_OPTIONS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "tu": (("name",), ()),  # (required, optional)
    "graph_families": ((), ("num_graphs", "families", "min_nodes", "max_nodes", "m_range", "seed")),
}


def check_graph_set_options(name: str, options: Mapping[str, Any]) -> None:
    """Refuse an unknown multi-graph dataset, unknown options and missing ones before anything
    is read (``ValueError`` ``"options.<key>: ..."``)."""
    if name not in GRAPH_SET_OPTIONS:
        raise ValueError(f"name: unknown graph-set dataset {name!r}; known: {', '.join(GRAPH_SET_OPTIONS)}")
    required, optional = GRAPH_SET_OPTIONS[name]
    for opt in options:
        if opt not in required + optional:
            raise ValueError(f"options.{opt}: unknown option of {name!r}; its options: {', '.join(required + optional)}")
    for opt in required:
        if opt not in options:
            raise ValueError(f"options.{opt}: required by {name!r} and not set")


def load_graph_set(
    name: str, *, root: Path | None = None, private_fraction: float = 1.0, split_seed: int = 0, **options: Any
) -> Any:
    """A :class:`~privgraph.ingest.datasets.graph_set.GraphSet`: ``tu`` reads ``options["name"]`` in PyG's
    TUDataset raw layout under ``root`` (default ``$PRIVGRAPH_DATA_ROOT/tu``)
    (:func:`~privgraph.ingest.datasets.tu.load_tu`); ``graph_families`` draws labelled synthetic families
    (:func:`~privgraph.ingest.datasets.graph_families.synthetic_graph_set`; ``seed`` public, default 0).
    Each graph's private users are a ``private_fraction`` of its nodes, seeded by ``split_seed``."""
    check_graph_set_options(name, options)
    if name == "tu":
        return load_tu(data_root() / "tu" if root is None else Path(root), options["name"],
                       private_fraction=private_fraction, split_seed=split_seed)
    from privgraph.ingest.datasets.graph_families import synthetic_graph_set  # lazy: networkx (~0.1 s)

    opts = dict(options)
    if "m_range" in opts:
        opts["m_range"] = tuple(opts["m_range"])
    return synthetic_graph_set(opts.pop("num_graphs", 200), seed=opts.pop("seed", 0), private_fraction=private_fraction,
                               split_seed=split_seed, **opts)
