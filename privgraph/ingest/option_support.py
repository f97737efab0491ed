"""Which dataset option each path of the privatize flow honours: THE table both paths read.

A pipeline runs on one of three paths (:func:`run_path`):

* ``memory``: the flow loads the graph whole (:func:`~privgraph.ingest.datasets.load_dataset`) and
  privatizes its partitions in memory;
* ``files``: the same load, then the partitions' tasks read their rows from files and write their
  part of the release (``partitions.layout: files``);
* ``scale``: a ``partitioned`` dataset in the files layout (``PipelineConfig.runs_at_scale``): no
  process holds the graph; the executor's tasks read its ranges as ``privgraph ingest`` wrote
  them, private flags and split included.

Every option in :data:`OPTION_SUPPORT` is honoured on the paths it names and REFUSED on the
others when the configuration loads (:func:`refused_options`; one line, exit code 2, before any
data is read): never ignored. On the path at scale the ingest applies them, by the same functions
as the in-memory loader (``privgraph ingest --rho/--split-seed/--train/--val/--node-split-seed/
--split/--drop-cut-edges``), so a graph that fits gives the same graph both ways.
``tests/test_option_support.py`` walks every cell: honoured (the stored version shows it) or
refused.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from typing import Any

from privgraph.errors import ConfigError

__all__ = ["MEMORY", "FILES", "SCALE", "PATHS", "OptionSupport", "OPTION_SUPPORT", "check_options_on_path",
           "refused_options", "run_path"]

MEMORY, FILES, SCALE = "memory", "files", "scale"
#: the privatize flow's paths, in the order of :func:`run_path`
PATHS = (MEMORY, FILES, SCALE)
_IN_MEMORY = frozenset({MEMORY, FILES})
_EVERYWHERE = frozenset(PATHS)


@dataclasses.dataclass(frozen=True)
class OptionSupport:
    """One dataset option: ``key`` its YAML path under ``dataset`` (``rho``, ``options.train``),
    ``paths`` those that honour it, ``elsewhere`` how to get its effect where it is refused."""

    key: str
    paths: frozenset[str]
    elsewhere: str = ""


#: every option whose effect depends on the path (loader-specific options exist on one loader's
#: paths only and are checked against it: :func:`~privgraph.ingest.datasets.check_dataset_options`)
OPTION_SUPPORT: tuple[OptionSupport, ...] = (
    OptionSupport("rho", _IN_MEMORY, "mark the private edges when writing the graph: privgraph ingest --rho R "
                                     "--split-seed S (the same rule and seed as in memory)"),
    OptionSupport("split_seed", _IN_MEMORY, "privgraph ingest --split-seed S seeds its --rho"),
    OptionSupport("node_split_seed", _IN_MEMORY, "privgraph ingest --node-split-seed S seeds its --train/--val"),
    OptionSupport("options.train", _IN_MEMORY, "write the split with privgraph ingest --train F --val F"),
    OptionSupport("options.val", _IN_MEMORY, "write the split with privgraph ingest --train F --val F"),
    OptionSupport("options.split", _IN_MEMORY, "write the split with privgraph ingest --split FILE"),
    OptionSupport("options.drop_cut_edges", _IN_MEMORY, "privgraph ingest --drop-cut-edges drops them when "
                                                        "writing the graph"),
    OptionSupport("root", _EVERYWHERE),
    OptionSupport("options.path", _EVERYWHERE),
)


def run_path(dataset: str, layout: str, *, whole_graph_stages: bool) -> str:
    """The path a pipeline runs on: ``scale`` for a ``partitioned`` dataset in the files layout
    unless a stage needs the whole graph in the flow process (``whole_graph_stages``: scores,
    embeddings), else ``files`` or ``memory`` by ``partitions.layout``.

    >>> run_path("partitioned", "files", whole_graph_stages=False), run_path("cora", "files", whole_graph_stages=False)
    ('scale', 'files')
    """
    if dataset == "partitioned" and layout == "files" and not whole_graph_stages:
        return SCALE
    return FILES if layout == "files" else MEMORY


def _set_keys(fields_set: Iterable[str], options: Mapping[str, Any]) -> set[str]:
    return {*fields_set, *(f"options.{k}" for k in options)}


def refused_options(path: str, fields_set: Iterable[str], options: Mapping[str, Any]) -> list[OptionSupport]:
    """The table's options that a dataset section sets (``fields_set``: the keys given under
    ``dataset``, defaults excluded; ``options``: its ``options``) and that ``path`` does not
    honour, in table order."""
    if path not in PATHS:
        raise ValueError(f"path must be one of {PATHS}, got {path!r}")
    given = _set_keys(fields_set, options)
    return [o for o in OPTION_SUPPORT if o.key in given and path not in o.paths]


def check_options_on_path(path: str, fields_set: Iterable[str], options: Mapping[str, Any]) -> None:
    """Refuse the first option that ``path`` does not honour (:func:`refused_options`).

    Raises:
        ConfigError: ``dataset.<key>: ...`` naming the option, why and what to do instead (exit code 2).

    >>> check_options_on_path("memory", {"rho"}, {})
    >>> check_options_on_path("scale", {"rho"}, {})
    Traceback (most recent call last):
    ...
    privgraph.errors.ConfigError: dataset.rho: not applied on the path at scale ...
    """
    refused = refused_options(path, fields_set, options)
    if refused:
        o = refused[0]
        raise ConfigError(
            f"dataset.{o.key}: not applied on the path at scale (dataset partitioned, partitions.layout files: no "
            f"process holds the graph, its ranges are read as privgraph ingest wrote them); {o.elsewhere}, or use "
            "partitions.layout memory")
