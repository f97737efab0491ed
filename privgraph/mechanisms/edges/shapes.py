"""The edge-mechanism contract: one base class per shape of release, each owning its release.

An edge mechanism is ONE class in a module of its own, decorated with
:func:`~privgraph.mechanisms.registry.register_mechanism`, that subclasses exactly one
shape below, sets ``name`` and ``epsilon_range``, gives ``guarantee`` and ``params()``, implements
its shape's hooks, and declares what it supports as class attributes (defaults on
:class:`EdgeMechanism`). Everything that runs or checks a mechanism reads these declarations:
nothing asks a mechanism which methods it has.

Shapes (each owns :meth:`EdgeMechanism.release_scope`, the release of the ``edges`` scope, as a
template over its hooks):

* :class:`LocalReports`: each node of ``V_pri`` randomizes its own neighbour list, partition by
  partition (``privatize_nodes``); the server combines the directed reports (``combine_reports``).
  DPRR, Warner RR. The partitioned layout runs them (``runs_partitioned``).
* :class:`NoisyDegrees`: each node sends a noisy degree per partition (``noisy_degrees``); the
  server releases edges from them (``privatize_edges(..., noisy_degrees=...)``). LocalLap.
* :class:`FittedModel`: one global fit whose noisy model is the DP output (``fit``), then edges
  sampled from it chunk by chunk (``split``, ``sample``, ``diagnostics``). EdgeRR, privHRG.
* :class:`Central`: one release over the pairs of ``V_pri`` (``privatize_edges``). EdgeRand,
  LapGraph, NonPriv-Part.
* :class:`Aggregates`: noisy aggregates over an encoding of the released features and labels in
  place of edges (``aggregate``). GAP, class counts.

Every partition ``i`` of stage ``s`` draws from ``partition_seeds(stage_seed(root, s), P)[i]``
(the stages ``edges``, ``edges.degrees``, ``edges.fit``, ``edges.sample``, ``edges.encoder``), so
a seeded release is the same with any executor.

Example (a registered mechanism declares its shape and what it supports):

>>> from privgraph.mechanisms import MECHANISMS
>>> cls = MECHANISMS["dprr"]
>>> issubclass(cls, LocalReports), cls.runs_partitioned, cls.releases_aggregates
(True, True, False)
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, ClassVar, NamedTuple

import numpy as np

from privgraph.errors import ConfigError
from privgraph.graph import GraphData, in_sorted, sorted_unique
from privgraph.guarantee import Guarantee, Scope
from privgraph.mechanisms.base import EpsilonRange
from privgraph.mechanisms.edges.edge_arrays import merge_with_public, private_csr
from privgraph.parts.executor import Executor, map_partitions
from privgraph.seeding import noise_generator, partition_seeds, stage_seed

__all__ = [
    "Aggregates",
    "Central",
    "EdgeMechanism",
    "EdgeRelease",
    "FittedModel",
    "LocalReports",
    "NoisyDegrees",
    "SHAPES",
]

_NO_EDGES_SHAPE = (2, 0)


#: What trains an aggregates release's encoder over the released view (features and labels, no
#: edge): ``encoder(view, *, encoding, dim, epochs, seed) -> [n, d]``, ``encoding`` the
#: mechanism's (``"hidden"``: GAP's MLP encoding, ``dim`` wide; ``"classes"``: the public classes).
#: The encoder is a model, so the evaluate stage supplies it
#: (:func:`~privgraph.evaluate.release_encoder.encoder_on`) and the mechanisms import none.
ReleaseEncoder = Callable[..., np.ndarray]


class EdgeRelease(NamedTuple):
    """What the release of the ``edges`` scope gives :func:`~privgraph.privatize.release.privatize_graph`.

    ``changes``: the graph's new fields (``edges_private``; ``edges_public`` emptied where every
    edge is private; ``aggregates``). ``stats``: public facts of the run (for the manifest).
    ``release``: summaries of the mechanism's output that the stored version does not hold
    (covered; the private record). ``private_record``: diagnostics no guarantee covers.
    """

    changes: dict[str, Any]
    stats: dict[str, Any]
    release: dict[str, Any]
    private_record: dict[str, Any]


class EdgeMechanism:
    """What every edge mechanism declares; subclass one of the shapes, not this class.

    Class attributes (the declaration; read by the release, the partitioned layout, the config
    checks and the comparisons):

    * ``releases_aggregates``: noisy aggregates in place of edges (set by :class:`Aggregates`).
    * ``all_edges_private``: every edge, public ones too, is released only through the mechanism
      (privHRG): the release replaces ``edges_public`` as well.
    * ``runs_partitioned``: ``partitions.layout: files`` runs it (set by :class:`LocalReports`).
    * ``takes_n_max``: its ``n_max`` parameter is a public, dataset-wide node count (paper 004's
      multi-graph setting); a graph comparison sets it to the largest graph's node count.
    """

    name: ClassVar[str]
    scope: ClassVar[Scope] = Scope.EDGES
    epsilon_range: ClassVar[EpsilonRange | None]
    releases_aggregates: ClassVar[bool] = False
    all_edges_private: ClassVar[bool] = False
    runs_partitioned: ClassVar[bool] = False
    takes_n_max: ClassVar[bool] = False

    @property
    def guarantee(self) -> Guarantee:
        raise NotImplementedError(f"{type(self).__name__} states no guarantee")

    def params(self) -> dict[str, Any]:
        """The public parameters for the manifest."""
        raise NotImplementedError(f"{type(self).__name__} gives no parameters")

    def params_for(self, n_max: int) -> dict[str, Any]:
        """The ledger's parameters once ``n_max = |V_pri|`` is known (default: :meth:`params`).

        Raises:
            ValueError: the mechanism cannot serve a graph of ``n_max`` private nodes.
        """
        return self.params()

    def check_input(self, edges_private: np.ndarray, num_nodes: int) -> None:
        """Refuse a graph before anything is privatized (default: every graph is served;
        node-level GAP refuses one over its public degree bound)."""

    @classmethod
    def declares(cls, **declared: Any) -> bool:
        """Whether the class declares every ``attribute=value`` of ``declared``.

        >>> Central.declares(releases_aggregates=False, runs_partitioned=False)
        True
        """
        return all(getattr(cls, key) == value for key, value in declared.items())

    def release_scope(
        self, graph: GraphData, released: Mapping[str, Any], parts: list[np.ndarray], root: np.random.SeedSequence,
        executor: Executor | None, encoder: ReleaseEncoder | None,
    ) -> EdgeRelease:
        """Release the ``edges`` scope of ``graph`` over the node partitions ``parts``.
        ``released``: the fields released so far (``x``, ``y``: an encoder reads them);
        ``encoder``: what trains an aggregates release's encoder (:data:`ReleaseEncoder`; the
        other shapes read none). Each shape implements it."""
        raise NotImplementedError(f"{type(self).__name__}: subclass one of the edge-mechanism shapes")


class _ReleasesEdges(EdgeMechanism):
    """The shapes that release edges: the noisy private edges merged with the public ones
    (post-processing: a noisy edge that is public is dropped), or alone where every edge is
    private."""

    def released_edges(
        self, graph: GraphData, parts: list[np.ndarray], root: np.random.SeedSequence, executor: Executor | None,
    ) -> tuple[np.ndarray, dict[str, Any], dict[str, Any], dict[str, Any]]:
        """``(noisy edges, stats, release, private record)`` of the shape's own steps over ``graph``,
        the released view: its features and labels are the released ones."""
        raise NotImplementedError

    def release_scope(
        self, graph: GraphData, released: Mapping[str, Any], parts: list[np.ndarray], root: np.random.SeedSequence,
        executor: Executor | None, encoder: ReleaseEncoder | None,
    ) -> EdgeRelease:
        # the shape hands its hooks the released view: the private edges, and the features and
        # labels as released (a prior that reads them reads the release, never the raw rows)
        view = graph.replace(**{k: released[k] for k in ("x", "y") if k in released}) if released else graph
        noisy, stats, release, private_record = self.released_edges(view, parts, root, executor)
        edges = noisy if self.all_edges_private else merge_with_public(noisy, graph.edges_public)
        release["released_private_edges"] = int(edges.shape[1])
        changes = {"edges_private": edges}
        if self.all_edges_private:  # nothing is released as it is (privHRG)
            changes["edges_public"] = np.zeros(_NO_EDGES_SHAPE, dtype=np.int64)
        return EdgeRelease(changes, stats, release, private_record)


def _reports_part(
    nodes: np.ndarray, seed: np.random.SeedSequence, *, mechanism: LocalReports, indptr: np.ndarray,
    indices: np.ndarray, candidates: np.ndarray,
) -> np.ndarray:
    return mechanism.privatize_nodes(nodes, indptr, indices, candidates, noise_generator(seed))


def _degrees_part(
    nodes: np.ndarray, seed: np.random.SeedSequence, *, mechanism: NoisyDegrees, indptr: np.ndarray,
    indices: np.ndarray, candidates: np.ndarray,
) -> np.ndarray:
    return mechanism.noisy_degrees(nodes, indptr, indices, candidates, noise_generator(seed))


def _per_node(
    graph: GraphData, mechanism: EdgeMechanism, fn: Any, parts: list[np.ndarray], seed: np.random.SeedSequence,
    executor: Executor | None,
) -> tuple[list[np.ndarray], list[Any], np.ndarray]:
    """Run ``fn`` per partition on the partition's nodes of ``V_pri`` (each node reports on its
    own private neighbour list): ``(the nodes per partition, their outputs, V_pri)``."""
    candidates = graph.private_nodes()
    indptr, indices = private_csr(graph.edges_private, graph.num_nodes)
    seeds = partition_seeds(seed, len(parts))
    payloads = [p[in_sorted(p, candidates)] for p in parts]
    out = map_partitions(fn, payloads, seeds, executor=executor, mechanism=mechanism, indptr=indptr,
                         indices=indices, candidates=candidates)
    return payloads, out, candidates


class LocalReports(_ReleasesEdges):
    """Edge LDP by local reports: each node of ``V_pri`` randomizes its own private neighbour
    list, partition by partition (stage ``edges``); the server combines the directed reports.
    Pair by pair, so the partitioned layout runs it too."""

    runs_partitioned: ClassVar[bool] = True

    def privatize_nodes(
        self, nodes: np.ndarray, indptr: np.ndarray, indices: np.ndarray, candidates: np.ndarray,
        rng: np.random.Generator,
    ) -> np.ndarray:
        """The directed reports ``[2, k]`` of ``nodes`` (each in ``candidates``, ``V_pri``) on
        their neighbour lists in the symmetric CSR ``indptr``/``indices``."""
        raise NotImplementedError

    def combine_reports(self, arcs: np.ndarray, num_nodes: int) -> np.ndarray:
        """The server's undirected edges ``[2, m]`` (``u < v``, sorted) from all reports."""
        raise NotImplementedError

    def node_reports(
        self, graph: GraphData, parts: list[np.ndarray], seed: np.random.SeedSequence, executor: Executor | None,
    ) -> tuple[list[np.ndarray], np.ndarray]:
        """The per-node step alone: the directed reports of each partition's nodes of ``V_pri``
        (partition ``i`` drawn from ``partition_seeds(seed, P)[i]``), and ``V_pri``."""
        _, reports, candidates = _per_node(graph, self, _reports_part, parts, seed, executor)
        return reports, candidates

    def released_edges(
        self, graph: GraphData, parts: list[np.ndarray], root: np.random.SeedSequence, executor: Executor | None,
    ) -> tuple[np.ndarray, dict[str, Any], dict[str, Any], dict[str, Any]]:
        reports, candidates = self.node_reports(graph, parts, stage_seed(root, "edges"), executor)
        arcs = np.concatenate(reports, axis=1) if reports else np.zeros(_NO_EDGES_SHAPE, np.int64)
        noisy = self.combine_reports(arcs, graph.num_nodes)
        return noisy, {"private_nodes": int(candidates.size)}, {"reports": int(arcs.shape[1])}, {}


class NoisyDegrees(_ReleasesEdges):
    """Each node of ``V_pri`` sends its noisy degree, per partition (stage ``edges.degrees``);
    the server's release from them is global (stage ``edges``)."""

    def noisy_degrees(
        self, nodes: np.ndarray, indptr: np.ndarray, indices: np.ndarray, candidates: np.ndarray,
        rng: np.random.Generator,
    ) -> np.ndarray:
        """The noisy degrees ``[b]`` of ``nodes``."""
        raise NotImplementedError

    def privatize_edges(
        self, graph: GraphData, rng: np.random.Generator, *, noisy_degrees: np.ndarray | None = None
    ) -> np.ndarray:
        """The noisy private edges ``[2, m']`` from the noisy degrees of ``V_pri`` (in its order)."""
        raise NotImplementedError

    def released_edges(
        self, graph: GraphData, parts: list[np.ndarray], root: np.random.SeedSequence, executor: Executor | None,
    ) -> tuple[np.ndarray, dict[str, Any], dict[str, Any], dict[str, Any]]:
        nodes, degs, candidates = _per_node(graph, self, _degrees_part, parts, stage_seed(root, "edges.degrees"),
                                            executor)
        d_star = np.zeros(candidates.size, dtype=np.int64)
        for p, d in zip(nodes, degs, strict=True):
            d_star[np.searchsorted(candidates, p)] = d
        noisy = self.privatize_edges(graph, noise_generator(stage_seed(root, "edges")), noisy_degrees=d_star)
        return noisy, {"private_nodes": int(candidates.size)}, {}, {}


def _sample_part(internal: np.ndarray, seed: np.random.SeedSequence, *, mechanism: FittedModel, release: Any) -> np.ndarray:
    return mechanism.sample(release, internal, noise_generator(seed))


class FittedModel(_ReleasesEdges):
    """One global fit (stage ``edges.fit``) whose noisy model is the DP output; the edges are
    sampled from it per chunk (stage ``edges.sample``): post-processing."""

    def fit(self, graph: GraphData, rng: np.random.Generator) -> Any:
        """The fitted model; its ``release`` attribute is the DP output."""
        raise NotImplementedError

    def split(self, release: Any, parts: int) -> list[np.ndarray]:
        """The release's sampling work in at most ``parts`` chunks."""
        raise NotImplementedError

    def sample(self, release: Any, chunk: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """The edges ``[2, k]`` of one chunk."""
        raise NotImplementedError

    def diagnostics(self, fitted: Any) -> dict[str, Any]:
        """``{"info": public schedule facts, "release": a summary of the release, ...}`` (the
        whole goes to the private record)."""
        raise NotImplementedError

    def released_edges(
        self, graph: GraphData, parts: list[np.ndarray], root: np.random.SeedSequence, executor: Executor | None,
    ) -> tuple[np.ndarray, dict[str, Any], dict[str, Any], dict[str, Any]]:
        fitted = self.fit(graph, noise_generator(stage_seed(root, "edges.fit")))
        release = fitted.release  # the noisy model: the DP output; sampling is post-processing
        chunks = self.split(release, max(1, len(parts)))
        seeds = partition_seeds(stage_seed(root, "edges.sample"), len(chunks))
        sampled = map_partitions(_sample_part, chunks, seeds, executor=executor, mechanism=self, release=release)
        noisy = np.concatenate(sampled, axis=1) if sampled else np.zeros(_NO_EDGES_SHAPE, np.int64)
        keys = sorted_unique(noisy[0] * np.int64(graph.num_nodes) + noisy[1])
        noisy = np.stack([keys // graph.num_nodes, keys % graph.num_nodes]).astype(np.int64)
        diag = self.diagnostics(fitted)
        public = {  # fixed in advance, or chosen by the check on public data: public
            "steps": diag["info"]["steps"], "phases": diag["info"]["phases"],
            "sample_chunks": len(chunks),
            "convergence_check": diag["info"].get("convergence_check"),
            "note": "the MCMC log-likelihood trace and its convergence statistics are computed from the "
                    "private edges and are not covered by the guarantee: kept in the run's private record",
        }
        stats = {"private_nodes": int(graph.private_nodes().size), "hrg": public}
        # the release's summary is a function of the noisy model: covered
        return noisy, stats, {"dendrogram": diag["release"]}, {"edges": diag}


class Central(_ReleasesEdges):
    """One central release over the pairs of ``V_pri`` (stage ``edges``)."""

    def privatize_edges(self, graph: GraphData, rng: np.random.Generator) -> np.ndarray:
        """The noisy private edges ``[2, m']`` (``u < v``)."""
        raise NotImplementedError

    def released_edges(
        self, graph: GraphData, parts: list[np.ndarray], root: np.random.SeedSequence, executor: Executor | None,
    ) -> tuple[np.ndarray, dict[str, Any], dict[str, Any], dict[str, Any]]:
        noisy = self.privatize_edges(graph, noise_generator(stage_seed(root, "edges")))
        return noisy, {"private_nodes": int(graph.private_nodes().size)}, {}, {}


class Aggregates(EdgeMechanism):
    """Noisy aggregates in place of edges: an encoder over the RELEASED features and labels (an
    MLP reading no edge: post-processing; stage ``edges.encoder``), then the mechanism's noisy
    aggregates over all edges (stage ``edges``); the private edges themselves are not released.

    ``encoding``: ``"hidden"`` (the encoder's hidden layer, ``encoder_dim`` wide) or
    ``"classes"`` (the public classes, :func:`~privgraph.evaluate.training.public_classes`: the
    released training labels, else the floor model's prediction). ``attention_record``: what a
    mechanism that learns its weights records of that DP training (covered; the private record).
    """

    releases_aggregates: ClassVar[bool] = True
    encoding: ClassVar[str] = "hidden"
    encoder_epochs: int
    encoder_dim: int | None = None  # None: the encoding sets its width (the classes)
    attention_record: dict[str, Any] | None = None

    def aggregate(
        self, encoded: np.ndarray, edges: np.ndarray, candidates: np.ndarray, rng: np.random.Generator, *,
        labels: np.ndarray, train_mask: np.ndarray, private_edge_mask: np.ndarray,
    ) -> np.ndarray:
        """The noisy aggregates ``[n, ...]`` over ``edges`` (all of them; ``private_edge_mask``
        marks the private ones) of the ``encoded`` rows."""
        raise NotImplementedError

    def _encode(self, view: GraphData, root: np.random.SeedSequence, encoder: ReleaseEncoder | None) -> np.ndarray:
        if encoder is None:
            raise ValueError(
                f"{self.name}: its encoder is a model the evaluate stage trains; pass "
                f"privatize_graph(encoder=privgraph.evaluate.release_encoder.encoder_on(device))"
            )
        return encoder(view, encoding=self.encoding, dim=self.encoder_dim, epochs=self.encoder_epochs,
                       seed=stage_seed(root, "edges.encoder"))

    def release_scope(
        self, graph: GraphData, released: Mapping[str, Any], parts: list[np.ndarray], root: np.random.SeedSequence,
        executor: Executor | None, encoder: ReleaseEncoder | None,
    ) -> EdgeRelease:
        view = graph.replace(**released)
        missing = [m for m in ("train_mask", "val_mask") if getattr(graph, m) is None]
        if missing or view.y is None or view.x is None:
            raise ConfigError(
                f"{self.name}: its encoder trains on the released features and the labels of the "
                f"training nodes; the graph lacks {missing or ['x or y']}"
            )
        no_edges = np.zeros(_NO_EDGES_SHAPE, np.int64)
        encoded = self._encode(view.replace(edges_public=no_edges, edges_private=no_edges), root, encoder)
        candidates = graph.private_nodes()
        m_pub = graph.edges_public.shape[1]
        private_edge_mask = np.arange(m_pub + graph.edges_private.shape[1]) >= m_pub
        aggregates = self.aggregate(
            encoded, graph.edges("all"), candidates, noise_generator(stage_seed(root, "edges")),
            labels=view.y, train_mask=graph.train_mask, private_edge_mask=private_edge_mask,
        ).astype(np.float32)
        release: dict[str, Any] = {"aggregates": list(aggregates.shape)}
        if self.attention_record:  # learned weights: the DP training's noisy losses
            release["attention"] = self.attention_record
        changes = {"aggregates": aggregates, "edges_private": np.zeros(_NO_EDGES_SHAPE, dtype=np.int64)}
        return EdgeRelease(changes, {"private_nodes": int(candidates.size)}, release, {})


#: the shapes: every registered edge mechanism subclasses exactly one
SHAPES: tuple[type[EdgeMechanism], ...] = (LocalReports, NoisyDegrees, FittedModel, Central, Aggregates)
