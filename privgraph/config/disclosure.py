"""What a pipeline declares public: the ONE declaration that every stage reads.

privgraph publishes versions whose bytes depend on private data only through mechanisms whose
guarantee is in the ledger. Whatever else a stage reads raw and turns into something published
(theta, a fingerprint, a count, the convergence check of an MCMC) must be public, and this module
is the one place where a pipeline says what is public. :func:`declare_public` derives the
declaration from the pipeline's configuration, refuses a configuration in which one stage treats
as public what another declares private (a :class:`~privgraph.errors.ConfigError`, exit code 2,
one line naming both YAML paths), and the stages read the result:

=================  =====================================  =====================================
part               public (released as it is)             private (only through a mechanism)
=================  =====================================  =====================================
edges              the public edges                       the private edges (``dataset.rho``, or
                                                          a generic edge list's private column),
                                                          through ``edges.mechanism``
V_pri              the SET of nodes with a private edge   (every edge mechanism assumes it public)
features           every row when no ``features`` is set; the other rows, through
                   the rows of ``scores.public_nodes``    ``features.mechanism`` (which is applied
                   (read raw by the scores)               to every row: noise on a public row
                                                          protects nothing and leaks nothing)
labels             the labels outside ``labels.mask``     the labels in ``labels.mask`` (every
                   (all of them without ``labels``)       label when the mask is unset)
always             node count, feature count, the node
                   split, the public feature bounds
=================  =====================================  =====================================

Refused at load time:

* private edges with no ``edges`` mechanism (they would be stored as they are);
* ``scores.public_nodes`` reading labels that ``labels.mask`` privatizes, without
  ``charge_epsilon`` (SHAP on them would publish them through theta);
* ``scores.public_nodes.all_features_public`` next to a ``features`` mechanism (every row public:
  the features guarantee would cover nothing).

The declaration is also what the manifest's ``public`` section lists (:meth:`Disclosure.manifest_section`),
what the public input fingerprint hashes (:meth:`Disclosure.fingerprint`) and what the
non-interference test may and may not toggle.
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import numpy as np

from privgraph.errors import ConfigError
from privgraph.graph import SPLIT_MASKS, GraphData
from privgraph.ingest.scoring.public_subset import PublicRows, public_rows

if TYPE_CHECKING:
    from privgraph.config.pipeline import DatasetConfig, PipelineConfig, PipelinesConfig
    from privgraph.ingest.scoring.config import PublicNodesConfig, ScoresConfig

__all__ = ["Disclosure", "declare_public", "disclosure_of", "FINGERPRINT_FORMAT", "public_input_header"]

#: The tag hashed first by :meth:`Disclosure.fingerprint` (bump when its input changes).
FINGERPRINT_FORMAT = "privgraph.public-inputs/1"


def public_input_header(name: str, dtype: Any, shape: tuple[int, ...]) -> bytes:
    """What :meth:`Disclosure.fingerprint` hashes before the bytes of public input ``name``
    (``|name|dtype|shape|``); shared with the streamed fingerprint of a partitioned graph."""
    return f"|{name}|{np.dtype(dtype).str}|{[int(s) for s in shape]}|".encode()


@dataclasses.dataclass(frozen=True)
class Disclosure:
    """What pipeline ``pipeline`` declares public (see the module docstring).

    Built by :func:`declare_public`; every field is configuration, never data.

    Attributes:
        pipeline: the pipeline name (for YAML paths in messages).
        private_edges_by: the YAML path that makes edges private (``dataset.rho``,
            ``dataset.options.edges`` for a generic edge list, ``dataset.options.path`` for an image
            graph's edges.csv, ``dataset.options.private_fraction`` for the bundled photo graph), or
            ``None`` (every edge public).
        edge_mechanism: whether ``edges`` privatizes the private edges.
        feature_mechanism: whether ``features`` privatizes the features.
        public_nodes: ``scores.public_nodes`` when scores are computed (their rows' features are
            public; their labels too, unless ``charge_epsilon`` randomizes the private ones).
        scores_read_labels: whether the scores read labels (importance fitted on the subset).
        label_mechanism: whether ``labels`` privatizes labels.
        label_mask: the masks whose labels ``labels`` privatizes; ``None`` with a labels
            mechanism means every label.
    """

    pipeline: str
    private_edges_by: str | None
    edge_mechanism: bool
    feature_mechanism: bool
    public_nodes: PublicNodesConfig | None
    scores_read_labels: bool
    label_mechanism: bool
    label_mask: tuple[str, ...] | None

    # -- YAML paths ------------------------------------------------------------------------------
    def path(self, *keys: str) -> str:
        return ".".join(("pipelines", self.pipeline, *keys))

    # -- the declaration, materialized on a graph ------------------------------------------------
    def private_label_rows(self, graph: GraphData) -> np.ndarray:
        """Boolean ``[n]``: the nodes whose label is private (privatized by ``labels``)."""
        n = graph.num_nodes
        if not self.label_mechanism:
            return np.zeros(n, dtype=bool)
        if self.label_mask is None:
            return np.ones(n, dtype=bool)
        out = np.zeros(n, dtype=bool)
        for name in self.label_mask:
            m = getattr(graph, name)
            if m is None:
                raise ConfigError(f"{self.path('labels', 'mask')}: the graph has no {name}")
            out |= m
        return out

    def public_feature_rows(self, graph: GraphData) -> np.ndarray:
        """Boolean ``[n]``: the nodes whose raw feature vector is public."""
        n = graph.num_nodes
        if not self.feature_mechanism:
            return np.ones(n, dtype=bool)
        out = np.zeros(n, dtype=bool)
        if self.public_nodes is not None:
            out[self.public_rows(graph).nodes] = True
        return out

    def public_rows(self, graph: GraphData) -> PublicRows:
        """The scores' declared-public rows as the view the scores stage reads (a graph of those
        rows only: :class:`~privgraph.ingest.scoring.public_subset.PublicRows`).

        Made by THE one selection, :func:`~privgraph.ingest.scoring.public_subset.public_rows` (public
        selection seed; unlabelled nodes excluded exactly when the scores read labels), which
        :func:`~privgraph.ingest.scoring.compute_scores` also calls when given a whole graph.

        Raises:
            ValueError: the pipeline computes no scores.
        """
        if self.public_nodes is None:
            raise ValueError(f"{self.path('scores')} is not set: the pipeline declares no public rows")
        return public_rows(graph, self.public_nodes, use_labels=self.scores_read_labels,
                           private_labels=self.private_label_rows(graph))

    def public_inputs(self, graph: GraphData) -> Iterator[tuple[str, np.ndarray]]:
        """The public parts of an input graph, in a fixed order (what :meth:`fingerprint` hashes)."""
        yield "num_nodes", np.array([graph.num_nodes], dtype=np.int64)
        yield "num_features", np.array([graph.num_features], dtype=np.int64)
        yield "edges_public", np.ascontiguousarray(graph.edges_public, dtype=np.int64)
        if self.private_edges_by is not None:
            yield "private_nodes", graph.private_nodes()
        for name in SPLIT_MASKS:
            m = getattr(graph, name)
            if m is not None:
                yield name, np.ascontiguousarray(m)
        if graph.x is not None:
            rows = np.flatnonzero(self.public_feature_rows(graph)).astype(np.int64)
            yield "public_feature_rows", rows
            yield "public_features", np.ascontiguousarray(graph.x[rows])
        if graph.y is not None:
            labelled = graph.labelled()
            if not labelled.all():  # which nodes carry a label is public, like the split
                yield "unlabelled_nodes", np.flatnonzero(~labelled).astype(np.int64)
            rows = np.flatnonzero(~self.private_label_rows(graph)).astype(np.int64)
            yield "public_label_rows", rows
            yield "public_labels", np.ascontiguousarray(graph.y[rows])

    def fingerprint(self, graph: GraphData) -> str:
        """SHA-256 over the PUBLIC inputs only (:meth:`public_inputs`): identifies the public part
        of the input; it does not move when a private edge, a private feature row or a private
        label changes, so it reveals nothing about them. (An unsalted hash of private data would
        be a release of it: low-entropy inputs are recovered by trying candidates.)"""
        h = hashlib.sha256(FINGERPRINT_FORMAT.encode())
        for name, a in self.public_inputs(graph):
            h.update(public_input_header(name, a.dtype, a.shape))
            h.update(a.tobytes())
        return h.hexdigest()

    # -- the manifest's ``public`` section -------------------------------------------------------
    def manifest_section(self) -> dict[str, dict[str, str]]:
        """What the pipeline releases as public, each with the YAML path that declares it."""
        out: dict[str, dict[str, str]] = {
            "edges_public": {
                "what": "the public edges, released as they are (kind 'public' in edges.parquet)",
                "declared_by": self.private_edges_by or self.path("dataset"),
            },
            "num_nodes_and_features": {
                "what": "the number of nodes and of features (graph.json, the arrays' shapes)",
                "declared_by": "always public",
            },
            "splits": {
                "what": "the node split (splits.npz), released as it is",
                "declared_by": "always public",
            },
        }
        if self.private_edges_by is not None:
            out["private_nodes"] = {
                "what": "the set of nodes incident to a private edge (V_pri), assumed public by "
                        "every edge mechanism (its size is recorded)",
                "declared_by": self.private_edges_by,
            }
        if not self.feature_mechanism:
            out["features"] = {
                "what": "every node's features, released as they are (features.npy)",
                "declared_by": f"{self.path('features')} is not set",
            }
        elif self.public_nodes is not None:
            rule = self.public_nodes.rule
            out["public_feature_rows"] = {
                "what": f"the feature rows of the scores' public nodes (rule {rule!r}), read raw by "
                        "the scores; the features mechanism is applied to every row and its "
                        "guarantee covers the other rows",
                "declared_by": self.path("scores", "public_nodes", "rule"),
            }
        if not self.label_mechanism:
            out["labels"] = {
                "what": "every label, released as it is (labels.npy)",
                "declared_by": f"{self.path('labels')} is not set",
            }
        elif self.label_mask is not None:
            out["labels_outside_mask"] = {
                "what": f"the labels of nodes outside {' | '.join(self.label_mask)}, released as "
                        "they are",
                "declared_by": self.path("labels", "mask"),
            }
        if self.public_nodes is not None and self.scores_read_labels:
            charged = self.public_nodes.charge_epsilon is not None
            out["public_node_labels"] = {
                "what": (
                    "the labels of the scores' public nodes that are not privatized are read raw "
                    "by the scores" + ("; privatized ones are randomized by LabelRR (charged)" if charged else "")
                ),
                "declared_by": self.path("scores", "public_nodes", "rule"),
            }
        return out

    def private_scopes(self) -> tuple[str, ...]:
        """The scopes whose private part a mechanism protects (what non-interference toggles)."""
        out = []
        if self.private_edges_by is not None and self.edge_mechanism:
            out.append("edges")
        if self.feature_mechanism:
            out.append("features")
        if self.label_mechanism:
            out.append("labels")
        return tuple(out)


def _label_masks(labels: Any) -> tuple[str, ...] | None:
    mask = (labels.model_extra or {}).get("mask")
    if mask is None:
        return None
    return (mask,) if isinstance(mask, str) else tuple(mask)


def declare_public(name: str, cfg: PipelineConfig) -> Disclosure:
    """The declaration of pipeline ``name`` (see the module docstring), after refusing conflicts.

    Raises:
        ConfigError: a stage treats as public what another declares private; the one-line
            message names both YAML paths.
    """
    private_edges_by = _private_edges_by(name, cfg.dataset)
    scores = cfg.scores
    pn = None if scores is None else scores.public_nodes
    reads_labels = bool(scores is not None and scores.reads_labels)
    d = Disclosure(
        pipeline=name,
        private_edges_by=private_edges_by,
        edge_mechanism=cfg.edges is not None,
        feature_mechanism=cfg.features is not None,
        public_nodes=pn,
        scores_read_labels=reads_labels,
        label_mechanism=cfg.labels is not None,
        label_mask=None if cfg.labels is None else _label_masks(cfg.labels),
    )
    _refuse_conflicts(d, cfg)
    return d


def _private_edges_by(name: str, ds: DatasetConfig) -> str | None:
    """The YAML path that makes some of pipeline ``name``'s edges private, or ``None`` (none are)."""
    if ds.rho is not None and ds.rho > 0:
        return f"pipelines.{name}.dataset.rho"
    if ds.rho is None and ds.name == "generic":
        return f"pipelines.{name}.dataset.options.edges"  # a private column may mark some
    if ds.rho is None and ds.name == "partitioned":
        return f"pipelines.{name}.dataset.options.path"  # its edges' private flags
    if ds.rho is None and ds.name == "images":
        return f"pipelines.{name}.dataset.options.path"  # edges.csv's private column
    if ds.rho is None and ds.name == "photos" and ds.options.get("private_fraction", 0.3) > 0:
        return f"pipelines.{name}.dataset.options.private_fraction"  # the bundled graph's (default 0.3)
    return None


def _refuse_conflicts(d: Disclosure, cfg: PipelineConfig) -> None:
    """Refuse a declaration ``d`` in which one stage treats as public what another keeps private.

    Raises:
        ConfigError: one line naming both YAML paths.
    """
    ds, pn, reads_labels, private_edges_by = cfg.dataset, d.public_nodes, d.scores_read_labels, d.private_edges_by
    p = d.path
    # a file's flags may mark no edge (known only once read: refused then, if they mark one); rho
    # marks round(rho * m) edges on every dataset, so it is refused here, on every path
    by_rho = ds.rho is not None and ds.rho > 0
    if private_edges_by is not None and cfg.edges is None and (by_rho or ds.name not in ("generic", "partitioned", "images")):
        from privgraph.mechanisms import edge_mechanisms  # lazy: the registry, for the message

        share = ds.rho if ds.rho is not None else ds.options.get("private_fraction", 0.3)
        raise ConfigError(
            f"{private_edges_by}: makes {share:g} of the edges private, but {p('edges')} is not set: "
            f"they would be stored as they are; add an edge mechanism (e.g. {', '.join(edge_mechanisms(epsilon_range=None))} drops them) "
            "or set rho: 0 to declare every edge public"
        )
    if pn is not None and pn.all_features_public and cfg.features is not None:
        raise ConfigError(
            f"{p('scores', 'public_nodes', 'all_features_public')}: declares every node's features "
            f"public, but {p('features', 'mechanism')} privatizes them (its guarantee would cover "
            "nothing); remove one of the two"
        )
    if pn is not None and reads_labels and pn.rule == "all" and pn.charge_epsilon is None:
        raise ConfigError(
            f"{p('scores', 'public_nodes', 'rule')}: 'all' treats every label as private (the test "
            f"labels included) and reads them; set {p('scores', 'public_nodes', 'charge_epsilon')} "
            "to randomize and charge them, or use rule 'train_mask' or 'random'"
        )
    if pn is not None and reads_labels and cfg.labels is not None and pn.charge_epsilon is None:
        mask = d.label_mask
        where = p("labels", "mask") if mask is not None else p("labels")
        privatized = "every label" if mask is None else f"the labels of {' | '.join(mask)}"
        if pn.rule == "train_mask" and (mask is None or "train_mask" in mask):
            raise ConfigError(
                f"{p('scores', 'public_nodes', 'rule')}: 'train_mask' treats the training labels as "
                f"public (SHAP reads them raw and theta is published), but {where} privatizes "
                f"{privatized}; set {p('scores', 'public_nodes', 'charge_epsilon')} to randomize and "
                "charge them, or use rule 'random'"
            )
        if pn.rule == "random" and mask is None:
            raise ConfigError(
                f"{p('scores', 'public_nodes', 'rule')}: 'random' draws public labels, but {where} "
                "privatizes every label (no mask): there is no public label to draw; set "
                f"{p('scores', 'public_nodes', 'charge_epsilon')} or a labels mask"
            )


def disclosure_of(config: PipelinesConfig, name: str, scores: ScoresConfig | None = None) -> Disclosure:
    """What pipeline ``name`` of a loaded ``pipelines.yaml`` declares public: the one declaration
    every stage reads. ``scores``: a comparison's own scores section in place of the pipeline's."""
    cfg = config.get(name)
    return declare_public(name, cfg if scores is None else cfg.model_copy(update={"scores": scores}))
