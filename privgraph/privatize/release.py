"""Privatize a graph's features and edges partition by partition, and record the ledger.

This is the library side of the ``privatize`` stage: pure, no Prefect. Each mechanism runs once
per node partition through :func:`privgraph.privatize.parallel.map_partitions`, with partition ``i`` of
stage ``s`` seeded by ``partition_seeds(stage_seed(root, s), P)[i]``; so a seeded run gives the
same private graph with any number of workers and any scheduler.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from privgraph.guarantee.ledger import LedgerEntry, PrivacyLedger
from privgraph.errors import ConfigError
from privgraph.graph import UNLABELLED, GraphData, in_sorted, sorted_unique
from privgraph.guarantee import Scope
from privgraph.privatize.parallel import Executor, map_partitions
from privgraph.privatize.partition import Partitioning
from privgraph.seeding import noise_generator, partition_seeds, stage_seed

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


def _features_part(x_rows: np.ndarray, seed: np.random.SeedSequence, *, mechanism: Any) -> np.ndarray:
    released = mechanism.privatize_rows(x_rows, noise_generator(seed))
    # mechanisms whose release is an encoding (multibit, three_output, pm_sub) also give the
    # server-side unbiased estimate in feature units; it is post-processing, so free
    estimate = getattr(mechanism, "estimate", None)
    return released if estimate is None else estimate(released)


def _edges_part(
    nodes: np.ndarray,
    seed: np.random.SeedSequence,
    *,
    mechanism: Any,
    method: str,
    indptr: np.ndarray,
    indices: np.ndarray,
    candidates: np.ndarray,
) -> np.ndarray:
    return getattr(mechanism, method)(nodes, indptr, indices, candidates, noise_generator(seed))


def _privatize_features(
    graph: GraphData, mechanism: Any, parts: list[np.ndarray], root: np.random.SeedSequence,
    executor: Executor | None,
) -> np.ndarray:
    if graph.x is None:
        raise ValueError("the pipeline privatizes features but the graph has none (x is None)")
    seeds = partition_seeds(stage_seed(root, "features"), len(parts))
    out_parts = map_partitions(
        _features_part, [graph.x[p] for p in parts], seeds, executor=executor, mechanism=mechanism
    )
    x_out = np.empty_like(graph.x)
    for p, rows in zip(parts, out_parts, strict=True):
        x_out[p] = rows
    return x_out


def _labels_part(
    payload: tuple[np.ndarray, np.ndarray], seed: np.random.SeedSequence, *, mechanism: Any, num_classes: int
) -> np.ndarray:
    y_rows, selected = payload
    out = y_rows.copy()
    out[selected] = mechanism.privatize_labels(y_rows[selected], num_classes, noise_generator(seed))
    return out


def label_selection(mechanism: Any, y: np.ndarray, masks: dict[str, np.ndarray]) -> np.ndarray:
    """The rows a label mechanism randomizes: those of its ``mask`` splits (all rows without one),
    labelled ones only (an unlabelled node's ``-1`` stays ``-1``). Works on any rows of ``y``
    with the same rows of the masks."""
    selected = np.ones(y.shape[0], bool)
    if mechanism.mask is not None:
        selected[:] = False
        for name in mechanism.mask:
            selected |= masks[name]
    return selected & (y != UNLABELLED)


def ledger_entry(stage: str, mechanism: Any, partitions: tuple[int, ...], n_max: int | None = None) -> LedgerEntry:
    """The ledger entry of ``mechanism`` run over ``partitions`` at ``stage``; an edge mechanism's
    parameters are those it resolves for ``n_max = |V_pri|`` (``params_for``) where that applies."""
    params = (mechanism.params_for(n_max) if n_max is not None and hasattr(mechanism, "params_for")
              and (n_max > 1 or mechanism.guarantee.delta) else mechanism.params())
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
        _labels_part, [(graph.y[p], selected[p]) for p in parts], seeds, executor=executor,
        mechanism=mechanism, num_classes=mechanism.num_classes,
    )
    y_out = graph.y.copy()
    for p, rows in zip(parts, out_parts, strict=True):
        y_out[p] = rows
    return y_out


def _per_node_reports(
    graph: GraphData, mechanism: Any, method: str, parts: list[np.ndarray], seed: np.random.SeedSequence,
    executor: Executor | None,
) -> tuple[list[np.ndarray], list[np.ndarray], np.ndarray]:
    """Run ``mechanism.<method>(nodes, indptr, indices, candidates, rng)`` per partition on the
    partition's nodes of ``V_pri`` (each node reports on its own private neighbour list)."""
    from privgraph.privatize.mechanisms.edges.dprr import private_csr  # lazy: scipy via the registry (~0.7 s)

    candidates = graph.private_nodes()
    indptr, indices = private_csr(graph.edges_private, graph.num_nodes)
    seeds = partition_seeds(seed, len(parts))
    payloads = [p[in_sorted(p, candidates)] for p in parts]
    out = map_partitions(
        _edges_part, payloads, seeds, executor=executor, mechanism=mechanism, method=method,
        indptr=indptr, indices=indices, candidates=candidates,
    )
    return payloads, out, candidates


def _privatize_edges_local(
    graph: GraphData, mechanism: Any, parts: list[np.ndarray], root: np.random.SeedSequence,
    executor: Executor | None,
) -> tuple[np.ndarray, dict[str, Any]]:
    """Per-node edge-LDP mechanisms (DPRR, Warner RR): each node of ``V_pri`` randomizes its own
    private neighbour list, partition by partition; the server combines the directed reports."""
    _, reports, candidates = _per_node_reports(graph, mechanism, "privatize_nodes", parts, stage_seed(root, "edges"), executor)
    arcs = np.concatenate(reports, axis=1) if reports else np.zeros((2, 0), np.int64)
    noisy = mechanism.combine_reports(arcs, graph.num_nodes)
    return noisy, {"private_nodes": int(candidates.size), "_release": {"reports": int(arcs.shape[1])}}


def _privatize_edges_degrees(
    graph: GraphData, mechanism: Any, parts: list[np.ndarray], root: np.random.SeedSequence,
    executor: Executor | None,
) -> tuple[np.ndarray, dict[str, Any]]:
    """LocalLap: each node of ``V_pri`` sends its noisy degree (per partition); the server's
    top-T selection over the noisy pair values is global."""
    nodes, degs, candidates = _per_node_reports(
        graph, mechanism, "noisy_degrees", parts, stage_seed(root, "edges.degrees"), executor
    )
    d_star = np.zeros(candidates.size, dtype=np.int64)
    for p, d in zip(nodes, degs, strict=True):
        d_star[np.searchsorted(candidates, p)] = d
    rng = noise_generator(stage_seed(root, "edges"))
    noisy = mechanism.privatize_edges(graph, rng, noisy_degrees=d_star)
    return noisy, {"private_nodes": int(candidates.size)}


def _hrg_sample_part(
    internal: np.ndarray, seed: np.random.SeedSequence, *, mechanism: Any, release: Any
) -> np.ndarray:
    return mechanism.sample(release, internal, noise_generator(seed))


def _privatize_edges_hrg(
    graph: GraphData, mechanism: Any, parts: list[np.ndarray], root: np.random.SeedSequence,
    executor: Executor | None,
) -> tuple[np.ndarray, dict[str, Any]]:
    """Dendrogram mechanisms (EdgeRR, privHRG): one global fit (MCMC + noisy probabilities), then
    the private edges sampled per chunk of internal nodes (dendrogram subtrees) through the map."""
    fitted = mechanism.fit(graph, noise_generator(stage_seed(root, "edges.fit")))
    release = fitted.release  # the noisy dendrogram: the DP output; sampling is post-processing
    chunks = mechanism.split(release, max(1, len(parts)))
    seeds = partition_seeds(stage_seed(root, "edges.sample"), len(chunks))
    sampled = map_partitions(_hrg_sample_part, chunks, seeds, executor=executor, mechanism=mechanism, release=release)
    noisy = np.concatenate(sampled, axis=1) if sampled else np.zeros((2, 0), np.int64)
    keys = sorted_unique(noisy[0] * np.int64(graph.num_nodes) + noisy[1])
    noisy = np.stack([keys // graph.num_nodes, keys % graph.num_nodes]).astype(np.int64)
    diag = mechanism.diagnostics(fitted)
    public = {  # fixed in advance, or chosen by the check on public data: public
        "steps": diag["info"]["steps"], "phases": diag["info"]["phases"],
        "sample_chunks": len(chunks),
        "convergence_check": diag["info"].get("convergence_check"),
        "note": "the MCMC log-likelihood trace and its convergence statistics are computed from the "
                "private edges and are not covered by the guarantee: kept in the run's private record",
    }
    return noisy, {
        "private_nodes": int(graph.private_nodes().size), "hrg": public, "_private": diag,
        "_release": {"dendrogram": diag["release"]},  # a function of the noisy dendrogram: covered
    }


def _privatize_edges(
    graph: GraphData, mechanism: Any, parts: list[np.ndarray], root: np.random.SeedSequence,
    executor: Executor | None,
) -> tuple[np.ndarray, dict[str, Any]]:
    from privgraph.privatize.mechanisms.edges.dprr import merge_with_public  # lazy: scipy via the registry

    if hasattr(mechanism, "privatize_nodes") and hasattr(mechanism, "combine_reports"):
        noisy, stats = _privatize_edges_local(graph, mechanism, parts, root, executor)
    elif hasattr(mechanism, "noisy_degrees"):
        noisy, stats = _privatize_edges_degrees(graph, mechanism, parts, root, executor)
    elif hasattr(mechanism, "fit") and hasattr(mechanism, "sample"):
        noisy, stats = _privatize_edges_hrg(graph, mechanism, parts, root, executor)
    else:  # central mechanisms over the pairs of V_pri (EdgeRand, LapGraph, LocalLap, NonPriv-Part)
        noisy = mechanism.privatize_edges(graph, noise_generator(stage_seed(root, "edges")))
        stats = {"private_nodes": int(graph.private_nodes().size)}
    if getattr(mechanism, "all_edges_private", False):
        released = noisy  # every edge was private (privHRG): nothing is released as it is
    else:
        released = merge_with_public(noisy, graph.edges_public)
    stats.setdefault("_release", {})["released_private_edges"] = int(released.shape[1])
    return released, stats


def _privatize_edges_aggregates(
    graph: GraphData, released: GraphData, mechanism: Any, root: np.random.SeedSequence, device: str
) -> tuple[np.ndarray, dict[str, Any]]:
    """GAP: encode the RELEASED features and labels (an MLP reading no edge: post-processing),
    then the mechanism's noisy hop-wise aggregates over all edges; the private edges themselves
    are not released. A mechanism whose ``encoding`` is ``"classes"`` (class counts) gets the
    public classes instead (:func:`~privgraph.evaluate.training.public_classes`: the released training
    labels, else the floor model's prediction)."""
    from privgraph.evaluate.training import encode_features, public_classes  # lazy: torch, only for GAP's encoder

    missing = [m for m in ("train_mask", "val_mask") if getattr(graph, m) is None]
    if missing or released.y is None or released.x is None:
        raise ConfigError(
            f"{mechanism.name}: its encoder trains on the released features and the labels of the "
            f"training nodes; the graph lacks {missing or ['x or y']}"
        )
    no_edges = np.zeros((2, 0), np.int64)
    view = released.replace(edges_public=no_edges, edges_private=no_edges)
    if getattr(mechanism, "encoding", "hidden") == "classes":
        encoded = public_classes(view, seed=stage_seed(root, "edges.encoder"), epochs=mechanism.encoder_epochs,
                                 device=device)
    else:
        encoded = encode_features(
            view, seed=stage_seed(root, "edges.encoder"), dim=mechanism.encoder_dim,
            epochs=mechanism.encoder_epochs, device=device,
        )
    candidates = graph.private_nodes()
    private_edge_mask = np.arange(graph.edges_public.shape[1] + graph.edges_private.shape[1]) >= graph.edges_public.shape[1]
    aggregates = mechanism.aggregate(
        encoded, graph.edges("all"), candidates, noise_generator(stage_seed(root, "edges")),
        labels=released.y, train_mask=graph.train_mask, private_edge_mask=private_edge_mask,
    )
    return aggregates.astype(np.float32), {"private_nodes": int(candidates.size)}


def _edge_scope(
    graph: GraphData, changes: dict[str, Any], edges: Any, parts: list[np.ndarray], root_seed: np.random.SeedSequence,
    executor: Executor | None, device: str,
) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any], dict[str, Any]]:
    """The edge mechanism's part of :func:`privatize_graph`: ``(changes to the graph, stats,
    release record, owner's record)``. ``changes``: the features and labels released so far (GAP's
    encoder reads them)."""
    if getattr(edges, "releases_aggregates", False):
        aggregates, estats = _privatize_edges_aggregates(graph, graph.replace(**changes), edges, root_seed, device)
        release: dict[str, Any] = {"aggregates": list(aggregates.shape)}
        if getattr(edges, "attention_record", None):  # learned weights: the DP training's noisy losses
            release["attention"] = edges.attention_record
        return {"aggregates": aggregates, "edges_private": np.zeros((2, 0), dtype=np.int64)}, estats, release, {}
    released, estats = _privatize_edges(graph, edges, parts, root_seed, executor)
    private_record = {"edges": estats.pop("_private")} if "_private" in estats else {}
    release = estats.pop("_release", {})
    out = {"edges_private": released}
    if getattr(edges, "all_edges_private", False):
        out["edges_public"] = np.zeros((2, 0), dtype=np.int64)
    return out, estats, release, private_record


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
    device: str = "auto",
) -> PrivatizationResult:
    """Apply the feature, edge and label mechanisms per partition and return the private graph.

    The returned graph keeps the public edges as they are and replaces ``edges_private`` by the
    privatized release of the private edges; ``x`` is replaced by the privatized features.
    Labels, splits and the public edges are released unchanged (they are public in this setting;
    the manifest says so). An aggregation-perturbation mechanism (GAP: ``releases_aggregates``)
    releases ``aggregates`` instead of private edges; its encoder trains on ``device`` over the
    released features and labels.

    Raises:
        ConfigError: the graph has private edges but no edge mechanism is given (they would be
            released as they are).
        GraphValidationError: the edge mechanism refuses the graph (``check_input``: node-level
            GAP's public degree bound), before anything is privatized.
    """
    if edges is not None and hasattr(edges, "check_input"):  # e.g. node-level GAP's public degree bound
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
        output_range = getattr(features, "output_range", None)
        stats["feature_range"] = None if output_range is None else list(output_range())
        ledger.record(ledger_entry(f"{stage}.features", features, part_ids))
    if edges is None and graph.edges_private.shape[1]:
        raise ConfigError(
            "the input marks some edges private but the pipeline sets no edge mechanism: they would "
            "be stored as they are; add an 'edges' mechanism (nonpriv_part drops them)"
        )
    release: dict[str, dict[str, Any]] = {}
    if labels is not None:
        if labels.scope is not Scope.LABELS:
            raise ValueError(f"{labels!r} does not protect labels")
        # before the edges, which may read the released labels (GAP's encoder); recorded last
        changes["y"] = _privatize_labels(graph, labels, parts, root_seed, executor)
    if edges is not None:
        if edges.scope is not Scope.EDGES:
            raise ValueError(f"{edges!r} does not protect edges")
        n_max = int(graph.private_nodes().size)
        edge_changes, stats["edges"], release["edges"], private_record = _edge_scope(
            graph, changes, edges, parts, root_seed, executor, device)
        changes.update(edge_changes)
        ledger.record(ledger_entry(f"{stage}.edges", edges, part_ids, n_max=n_max))
    if labels is not None:
        ledger.record(ledger_entry(f"{stage}.labels", labels, part_ids))
    meta = dict(graph.meta)
    meta["privatized"] = True
    changes["meta"] = meta
    return PrivatizationResult(
        graph=graph.replace(**changes), ledger=ledger, stats=stats, private_record=private_record, release=release
    )
