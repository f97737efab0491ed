"""Reading ``pipelines.yaml``: parse, validate the models (:mod:`privgraph.config.pipeline`), then check
what the models alone cannot, before any data is read: every mechanism built once with its
parameters, what each edge mechanism's class declares against its use, each dataset's options
against its loader, graph comparisons, and the pipeline's declaration of what is public
(:func:`privgraph.config.disclosure.declare_public` refuses a stage that treats as public what
another privatizes).

Every fault is one :class:`~privgraph.errors.ConfigError` line that starts with its YAML path.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from privgraph.config.pipeline import MechanismConfig, PipelinesConfig, mechanism_entry
from privgraph.ingest.datasets import check_dataset_options, check_graph_set_options
from privgraph.config.disclosure import declare_public
from privgraph.errors import ConfigError
from privgraph.mechanisms import MECHANISMS, build_at_epsilon, build_mechanism, edge_mechanisms, feature_mechanisms

__all__ = ["load_config", "parse_config"]


def _path(loc: tuple[Any, ...]) -> str:
    return ".".join(str(p) for p in loc if not (isinstance(p, str) and p.startswith("function-")))


def _check_mechanisms(cfg: PipelinesConfig) -> None:
    """Build every mechanism once so that unknown names and bad parameters fail at load time."""
    for pname, p in cfg.pipelines.items():
        for scope in ("features", "edges", "labels"):
            m: MechanismConfig | None = getattr(p, scope)
            if m is None:
                continue
            where = f"pipelines.{pname}.{scope}"
            if m.mechanism not in MECHANISMS:
                known = ", ".join(sorted(k for k, c in MECHANISMS.items() if c.scope.value == scope))
                raise ConfigError(f"{where}.mechanism: unknown mechanism {m.mechanism!r}; known for {scope}: {known}")
            cls = MECHANISMS[m.mechanism]
            if cls.scope.value != scope:
                raise ConfigError(
                    f"{where}.mechanism: {m.mechanism!r} protects {cls.scope.value}, not {scope}"
                )
            try:
                build_mechanism(m.mechanism, m.params())
            except (TypeError, ValueError) as exc:
                raise ConfigError(f"{where}: {exc}") from None
    for cname, c in cfg.comparisons.items():
        for label, entry in c.mechanisms.items():
            where = f"comparisons.{cname}.mechanisms.{label}"
            if "epsilon" in (entry or {}):
                raise ConfigError(f"{where}.epsilon: set the budgets in epsilons, not per mechanism")
            try:
                mname, params, use_scores = mechanism_entry(label, entry)
            except ValueError as exc:
                raise ConfigError(f"comparisons.{cname}.{exc}") from None
            if mname not in MECHANISMS:
                known = ", ".join(sorted(k for k, cl in MECHANISMS.items() if cl.scope.value == c.scope))
                raise ConfigError(f"{where}: unknown mechanism {mname!r}; known for {c.scope}: {known}")
            if MECHANISMS[mname].scope.value != c.scope:
                raise ConfigError(f"{where}: {mname!r} protects {MECHANISMS[mname].scope.value}, not {c.scope}")
            if use_scores and c.scores is None and cfg.pipelines[c.pipeline].scores is None:
                raise ConfigError(f"{where}.use_scores: neither the comparison nor pipeline {c.pipeline!r} sets scores")
            if use_scores and mname not in feature_mechanisms(takes_scores=True):
                raise ConfigError(f"{where}.use_scores: only {', '.join(feature_mechanisms(takes_scores=True))} "
                                  "takes the scores' theta")
            try:
                build_at_epsilon(mname, params, c.epsilons[0])
            except (TypeError, ValueError) as exc:
                raise ConfigError(f"{where}: {exc}") from None


def _check_graph_comparisons(cfg: PipelinesConfig) -> None:
    """Every graph comparison's mechanisms built once (edge mechanisms that release edges per graph)
    and its dataset options checked, before anything is read."""
    for cname, c in cfg.graph_comparisons.items():
        for label, entry in c.mechanisms.items():
            where = f"graph_comparisons.{cname}.mechanisms.{label}"
            if "epsilon" in (entry or {}):
                raise ConfigError(f"{where}.epsilon: set the budgets in epsilons, not per mechanism")
            try:
                mname, params, use_scores = mechanism_entry(label, entry or {})
            except ValueError as exc:
                raise ConfigError(f"graph_comparisons.{cname}.{exc}") from None
            per_graph = edge_mechanisms(releases_aggregates=False, all_edges_private=False)
            if mname not in per_graph or use_scores:
                raise ConfigError(f"{where}: {mname!r} is not a per-graph edge mechanism; known: {', '.join(per_graph)}")
            if MECHANISMS[mname].takes_n_max and "n_max" not in params:  # set per graph set: any public bound here
                params = {**params, "n_max": 2 ** 20}
            try:
                build_at_epsilon(mname, params, c.epsilons[0])
            except (TypeError, ValueError) as exc:
                raise ConfigError(f"{where}: {exc}") from None
        try:
            check_graph_set_options(c.dataset.name, c.dataset.options)
        except ValueError as exc:
            raise ConfigError(f"graph_comparisons.{cname}.dataset.{exc}") from None


def _check_edge_declarations(cfg: PipelinesConfig) -> None:
    """What each edge mechanism's class declares against its use: a version of noisy aggregates
    (``releases_aggregates``) has no edges to attack; ``partitions.layout: files`` runs the
    mechanisms whose reports combine pair by pair (``runs_partitioned``)."""
    aggregates = edge_mechanisms(releases_aggregates=True)
    for pname, p in cfg.pipelines.items():
        edges = None if p.edges is None else p.edges.mechanism
        if edges in aggregates and p.evaluate.attacks:
            raise ConfigError(
                f"pipelines.{pname}.evaluate.attacks: a {edges} version releases aggregates, not edges, and the attacks "
                "query a model trained over a version's edges; attacks on a model over aggregates are not built: "
                "remove them"
            )
        if p.partitions.layout == "files" and edges is not None and edges not in edge_mechanisms(runs_partitioned=True):
            raise ConfigError(
                f"pipelines.{pname}.partitions.layout: files runs the per-node edge mechanisms "
                f"({', '.join(edge_mechanisms(runs_partitioned=True))}), whose reports combine pair by pair; "
                f"{edges} is global: use layout memory"
            )
    for cname, c in cfg.comparisons.items():
        gap = [label for label, e in c.mechanisms.items() if mechanism_entry(label, e or {})[0] in aggregates]
        if gap and (c.evaluate.attacks if c.evaluate is not None else False):
            raise ConfigError(f"comparisons.{cname}.evaluate.attacks: mechanisms {gap} release aggregates, not edges; "
                              "attacks on a model over aggregates are not built: remove the attacks")


def _check_datasets(cfg: PipelinesConfig) -> None:
    """Each dataset's options against its loader's keywords: nothing is read yet."""
    for pname, p in cfg.pipelines.items():
        try:
            check_dataset_options(p.dataset.name, p.dataset.options)
        except ValueError as exc:
            raise ConfigError(f"pipelines.{pname}.dataset.{exc}") from None


def parse_config(data: Any, *, source: str = "pipelines.yaml") -> PipelinesConfig:
    """Validate an already-parsed YAML document."""
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: expected a mapping with a 'pipelines' key, got {type(data).__name__}")
    try:
        cfg = PipelinesConfig.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        msg = err["msg"].removeprefix("Value error, ")
        if err["type"] == "extra_forbidden":
            msg = f"unknown key {err['loc'][-1]!r}"
        elif err["type"] == "missing":
            msg = "required key is missing"
        more = f" (and {len(exc.errors()) - 1} more problems)" if len(exc.errors()) > 1 else ""
        raise ConfigError(f"{_path(err['loc']) or source}: {msg}{more}") from None
    _check_mechanisms(cfg)
    _check_edge_declarations(cfg)
    _check_datasets(cfg)
    _check_graph_comparisons(cfg)
    for name, p in cfg.pipelines.items():
        declare_public(name, p)  # refuses a stage treating as public what another privatizes
    return cfg


class _UniqueKeyLoader(yaml.SafeLoader):
    """YAML's safe loader, except that a key given twice in one mapping is an error naming both
    lines (PyYAML keeps the last silently: a pipeline defined twice ran its second definition).
    Keys brought in by a merge (``<<``) may still be overridden, as YAML says."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        first: dict[Any, int] = {}
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue
            key = self.construct_object(key_node, deep=True)
            try:
                seen = key in first
            except TypeError:  # an unhashable key: the base constructor says so
                continue
            if seen:
                raise yaml.constructor.ConstructorError(
                    None, None, f"duplicate key {key!r}, first at line {first[key] + 1}", key_node.start_mark)
            first[key] = key_node.start_mark.line
        return super().construct_mapping(node, deep=deep)


def load_config(path: str | Path) -> PipelinesConfig:
    """Read and validate ``pipelines.yaml`` (a key given twice in one mapping is refused)."""
    p = Path(path)
    if not p.is_file():
        raise ConfigError(f"{p}: configuration file not found")
    try:
        data = yaml.load(p.read_text(), Loader=_UniqueKeyLoader)  # noqa: S506 - a SafeLoader
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" line {mark.line + 1}" if mark is not None else ""
        raise ConfigError(f"{p}{where}: not valid YAML ({getattr(exc, 'problem', exc)})") from None
    return parse_config(data, source=str(p))
