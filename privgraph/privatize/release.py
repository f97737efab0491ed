"""Privatize a graph's features and edges partition by partition, and record the ledger.

This is the library side of the ``privatize`` stage: pure, no Prefect. Each mechanism runs once
per node partition through :func:`privgraph.parts.executor.map_partitions`, with partition ``i`` of
stage ``s`` seeded by ``partition_seeds(stage_seed(root, s), P)[i]``; so a seeded run gives the
same private graph with any number of workers and any scheduler.

:func:`privatize_graph` on a graph with one private edge:

>>> from privgraph.mechanisms import build_mechanism
>>> from privgraph.parts.partition import partition_graph
>>> g = GraphData(num_nodes=4, edges_public=[[0, 1], [1, 2]], edges_private=[[2], [3]])
>>> r = privatize_graph(g, features=None, edges=build_mechanism("warner_rr", {"epsilon": 1.0}),
...                     partitioning=partition_graph(g, 2, "hash"), root_seed=np.random.SeedSequence(0))
>>> [(e.stage, e.mechanism, e.epsilon, e.guarantee.ledger_epsilon) for e in r.ledger.entries]
[('privatize.edges', 'warner_rr', 1.0, 2.0)]
>>> r.graph.edges_public.tolist()  # released as they are
[[0, 1], [1, 2]]
>>> privatize_graph(g, features=None, edges=None, partitioning=partition_graph(g, 2, "hash"),
...                 root_seed=np.random.SeedSequence(0))
Traceback (most recent call last):
...
privgraph.errors.ConfigError: the input marks some edges private but the pipeline sets no edge mechanism: ...
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

import numpy as np

from privgraph.guarantee.ledger import LedgerEntry, PrivacyLedger
from privgraph.errors import ConfigError
from privgraph.graph import GraphData
from privgraph.guarantee import Scope
from privgraph.privatize.node_rows import label_selection, privatize_feature_rows, privatize_label_rows
from privgraph.parts.executor import Executor, map_partitions
from privgraph.parts.partition import Partitioning
from privgraph.seeding import partition_seeds, stage_seed

if TYPE_CHECKING:
    from privgraph.mechanisms.edges.shapes import ReleaseEncoder

__all__ = ["PrivatizationResult", "label_selection", "ledger_entry", "privatize_graph"]


@dataclasses.dataclass(frozen=True)
class PrivatizationResult:
    """The private graph and its ledger, with three kinds of side information:

    * ``stats``: PUBLIC facts of the run (the partition sizes, computed from public edges; the
      feature range the mechanism's parameters fix; |V_pri|, declared public; the step counts an
      MCMC was given and the public convergence check that chose them). Published in the manifest.
    * ``release``: per scope, summaries of that scope's mechanism output that the stored version
      does not hold (DPRR's count of directed reports, the noisy dendrogram's summary, GAP's
      DP-trained attention losses, the released edge count). Covered by the scope's guarantee,
      but not recomputable from the stored objects, so they go to the private record with
      ``private_record``: every manifest field that moves with private data is a function of the
      stored objects (the manifest's ``graph`` section holds their counts).
    * ``private_record``: run diagnostics computed from private data that NO guarantee covers
      (e.g. an MCMC log-likelihood trace). Goes to the run's private record, never to the store.

    ``parts``: where the partitions' tasks wrote the version's objects into the store's parts
    area themselves (:func:`privgraph.privatize.partitioned.privatize_through_files`), their checksums by
    name, for the stage step to commit; ``None`` when the client stores the graph. ``summaries``:
    per partition, what the validation checkpoint reads of the release
    (:func:`privgraph.privatize.summary.release_summary`, computed by the partitions' tasks);
    ``None`` when the release is in this process (the checkpoint summarizes it whole).
    """

    graph: GraphData
    ledger: PrivacyLedger
    stats: dict[str, Any]
    private_record: dict[str, Any] = dataclasses.field(default_factory=dict)
    release: dict[str, dict[str, Any]] = dataclasses.field(default_factory=dict)
    parts: dict[str, dict[str, Any]] | None = None
    summaries: list[dict[str, Any]] | None = None


def _privatize_features(
    graph: GraphData, mechanism: Any, parts: list[np.ndarray], root: np.random.SeedSequence,
    executor: Executor | None,
) -> np.ndarray:
    if graph.x is None:
        raise ValueError("the pipeline privatizes features but the graph has none (x is None)")
    seeds = partition_seeds(stage_seed(root, "features"), len(parts))
    out_parts = map_partitions(
        privatize_feature_rows, [graph.x[p] for p in parts], seeds, executor=executor, mechanism=mechanism
    )
    x_out = np.empty_like(graph.x)
    for p, rows in zip(parts, out_parts, strict=True):
        x_out[p] = rows
    return x_out


def ledger_entry(stage: str, mechanism: Any, partitions: tuple[int, ...], n_max: int | None = None) -> LedgerEntry:
    """The ledger entry of ``mechanism`` run over ``partitions`` at ``stage``; an edge mechanism's
    (given ``n_max = |V_pri|``) parameters are those it resolves for ``n_max`` (``params_for``)
    where that applies."""
    params = (mechanism.params_for(n_max) if n_max is not None and (n_max > 1 or mechanism.guarantee.delta)
              else mechanism.params())
    return LedgerEntry(stage=stage, mechanism=mechanism.name, guarantee=mechanism.guarantee,
                       partitions=partitions, params=params)


def _privatize_labels(
    graph: GraphData, mechanism: Any, parts: list[np.ndarray], root: np.random.SeedSequence,
    executor: Executor | None,
) -> np.ndarray:
    if graph.y is None or graph.y.ndim != 1:
        raise ValueError("the pipeline privatizes labels but the graph has no single-label y")
    if mechanism.num_classes is None:
        raise ValueError(
            f"{mechanism.name}: set num_classes in the pipeline's labels section (the number of "
            f"classes must be public; it is never read from the private labels)"
        )
    masks = {name: getattr(graph, name) for name in (mechanism.mask or ())}
    for name, m in masks.items():
        if m is None:
            raise ValueError(f"{mechanism.name}: mask {name!r} is not set on this graph")
    selected = label_selection(mechanism, graph.y, masks)
    seeds = partition_seeds(stage_seed(root, "labels"), len(parts))
    out_parts = map_partitions(
        privatize_label_rows, [(graph.y[p], selected[p]) for p in parts], seeds, executor=executor,
        mechanism=mechanism, num_classes=mechanism.num_classes,
    )
    y_out = graph.y.copy()
    for p, rows in zip(parts, out_parts, strict=True):
        y_out[p] = rows
    return y_out


def _refuse_unprotected_edges(graph: GraphData) -> None:
    """Refuse a graph with private edges when the pipeline sets no edge mechanism.

    Raises:
        ConfigError: the private edges would be released as they are.
    """
    if graph.edges_private.shape[1]:
        from privgraph.mechanisms import edge_mechanisms  # lazy: the registry, for the message

        raise ConfigError(
            "the input marks some edges private but the pipeline sets no edge mechanism: they would "
            f"be stored as they are; add an 'edges' mechanism ({', '.join(edge_mechanisms(epsilon_range=None))} drops them)"
        )


def privatize_graph(
    graph: GraphData,
    *,
    features: Any | None,
    edges: Any | None,
    partitioning: Partitioning,
    labels: Any | None = None,
    root_seed: np.random.SeedSequence,
    executor: Executor | None = None,
    stage: str = "privatize",
    encoder: ReleaseEncoder | None = None,
) -> PrivatizationResult:
    """Apply the feature, edge and label mechanisms per partition and return the private graph.

    The returned graph keeps the public edges as they are and replaces ``edges_private`` by the
    privatized release of the private edges; ``x`` is replaced by the privatized features.
    Labels, splits and the public edges are released unchanged (they are public in this setting;
    the manifest says so). An aggregation-perturbation mechanism (GAP: ``releases_aggregates``)
    releases ``aggregates`` instead of private edges; ``encoder`` trains its encoder over the
    released features and labels (:func:`~privgraph.evaluate.release_encoder.encoder_on`: the
    evaluate stage's model, supplied by the caller; the other shapes read none).

    Raises:
        ConfigError: the graph has private edges but no edge mechanism is given (they would be
            released as they are).
        GraphValidationError: the edge mechanism refuses the graph (``check_input``: node-level
            GAP's public degree bound), before anything is privatized.
    """
    if edges is not None:
        if edges.scope is not Scope.EDGES:
            raise ValueError(f"{edges!r} does not protect edges")
        edges.check_input(graph.edges_private, graph.num_nodes)  # before anything is privatized
    parts = partitioning.parts
    part_ids = tuple(range(len(parts)))
    ledger = PrivacyLedger()
    changes: dict[str, Any] = {}
    private_record: dict[str, Any] = {}
    stats: dict[str, Any] = {"partitions": partitioning.sizes(), "partition_method": partitioning.method}

    if features is not None:
        if features.scope is not Scope.FEATURES:
            raise ValueError(f"{features!r} does not protect features")
        changes["x"] = _privatize_features(graph, features, parts, root_seed, executor)
        output_range = features.output_range()
        stats["feature_range"] = None if output_range is None else list(output_range)
        ledger.record(ledger_entry(f"{stage}.features", features, part_ids))
    if edges is None:
        _refuse_unprotected_edges(graph)
    release: dict[str, dict[str, Any]] = {}
    if labels is not None:
        if labels.scope is not Scope.LABELS:
            raise ValueError(f"{labels!r} does not protect labels")
        # before the edges, which may read the released labels (GAP's encoder); recorded last
        changes["y"] = _privatize_labels(graph, labels, parts, root_seed, executor)
    if edges is not None:  # the mechanism's shape releases the scope
        edge_changes, stats["edges"], release["edges"], private_record = edges.release_scope(
            graph, changes, parts, root_seed, executor, encoder)
        changes.update(edge_changes)
        ledger.record(ledger_entry(f"{stage}.edges", edges, part_ids, n_max=int(graph.private_nodes().size)))
    if labels is not None:
        ledger.record(ledger_entry(f"{stage}.labels", labels, part_ids))
    meta = dict(graph.meta)
    meta["privatized"] = True
    changes["meta"] = meta
    return PrivatizationResult(
        graph=graph.replace(**changes), ledger=ledger, stats=stats, private_record=private_record, release=release
    )
