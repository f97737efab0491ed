r"""The public node subset: the rows of an input graph that HeteroRR's scores may read.

alpha (Eq. 6) and beta (Eq. 5) set FeatureRR's per-feature budgets through theta, which is
published, so they read only the nodes chosen here (:func:`public_node_subset`, a view of them:
:func:`public_rows`):

- rule ``train_mask`` (the split's training nodes) and rule ``random`` (a random fraction of
  nodes, a simulation assumption like ``rho`` for edges) declare their nodes' features and labels
  public; nothing is guaranteed for them.
- private labels selected (rule ``all``, or a mask the pipeline declares private) are refused
  (:class:`PrivateLabelsError`) unless ``charge_epsilon`` is set; they are then replaced by k-ary
  randomized response (:func:`randomize_private_labels`) before the surrogate sees them, and the
  caller records the returned label-LDP :class:`Guarantee`. The charge covers labels only, so rule
  ``all`` also needs ``all_features_public=True``.

Reasoning: docs/configuration.md, "Scores: the public node subset".
"""

from __future__ import annotations

import dataclasses
import numbers
from collections.abc import Sequence
from typing import Any

import numpy as np

from privgraph.errors import ConfigError
from privgraph.graph import SPLIT_MASKS, GraphData
from privgraph.guarantee import Guarantee
from privgraph.guarantee.params import check_epsilon, check_int
from privgraph.mechanisms.features.label_rr import LabelRR
from privgraph.seeding import as_generator, stage_seed

__all__ = [
    "RULES",
    "PrivateLabelsError",
    "PublicSubset",
    "PublicRows",
    "public_rows",
    "restrict_rows",
    "public_node_subset",
    "randomize_private_labels",
]

#: rules choosing the public node subset
RULES = ("train_mask", "random", "all")


class PrivateLabelsError(ConfigError):
    """The score configuration would train the importance surrogate on private labels uncharged."""


@dataclasses.dataclass(frozen=True, repr=False)
class PublicSubset:
    """The nodes whose data scoring may read.

    Attributes:
        nodes: sorted int64 node ids ``[m]``. PRIVATE to the run (a random rule's ids reveal its
            seed): never write them into a manifest; :attr:`description` is the public record.
        private_labels: bool ``[m]``: the labels of these nodes are private (they must be
            randomized and charged before the surrogate sees them).
        description: public provenance: rule, fraction, size, selection, excluded masks.
    """

    nodes: np.ndarray
    private_labels: np.ndarray
    description: dict[str, Any]

    @property
    def size(self) -> int:
        return int(self.nodes.shape[0])

    def __repr__(self) -> str:  # no ids
        return f"PublicSubset(rule={self.description.get('rule')!r}, size={self.size})"


@dataclasses.dataclass(frozen=True, repr=False)
class PublicRows:
    """The declared-public rows of an input graph: the ONLY view of it that scoring reads.

    ``graph`` holds those rows and nothing else (:func:`restrict_rows`: ``k`` nodes and no edges;
    features, labels, split masks and the image paths of the rows), so a reader of the view cannot
    reach a row the pipeline's declaration does not make public. Labels flagged in
    ``subset.private_labels`` are private even here: they are read only through the charged LabelRR.

    Attributes:
        graph: the restricted graph (row ``i`` is input node ``subset.nodes[i]``).
        subset: which input nodes they are, which labels are private, and the public description.
    """

    graph: GraphData
    subset: PublicSubset

    @property
    def nodes(self) -> np.ndarray:
        return self.subset.nodes

    @property
    def size(self) -> int:
        return self.subset.size

    def __repr__(self) -> str:  # no ids
        return f"PublicRows(rule={self.subset.description.get('rule')!r}, size={self.size})"


#: per-node metadata a restricted view keeps (restricted to its rows), and public scalars it keeps
_ROW_META = ("image_paths",)
_PUBLIC_META = ("name", "num_classes")


def restrict_rows(graph: GraphData, nodes: np.ndarray) -> GraphData:
    """``graph`` restricted to ``nodes`` (sorted ids): their features, labels, split masks and image
    paths, no edges, and of the other metadata only the public ``name`` and ``num_classes`` (a
    loader's other metadata may be counted from raw data)."""
    nodes = np.asarray(nodes, dtype=np.int64)
    meta: dict[str, Any] = {k: graph.meta[k] for k in _PUBLIC_META if k in graph.meta}
    for k in _ROW_META:
        if k in graph.meta:
            meta[k] = tuple(graph.meta[k][int(i)] for i in nodes)
    masks = {m: getattr(graph, m)[nodes] for m in SPLIT_MASKS if getattr(graph, m) is not None}
    empty = np.zeros((2, 0), dtype=np.int64)
    return GraphData(
        num_nodes=int(nodes.size), x=None if graph.x is None else graph.x[nodes],
        y=None if graph.y is None else graph.y[nodes], edges_public=empty, edges_private=empty, meta=meta, **masks,
    )


def public_rows(
    graph: GraphData, public_nodes: Any, *, use_labels: bool, private_labels: np.ndarray | None = None
) -> PublicRows:
    """THE selection of the scores' public nodes, as a view (:class:`PublicRows`).

    Every reader calls this one function: the pipeline's declaration
    (:meth:`privgraph.config.disclosure.Disclosure.public_rows`, which the scores stage receives, and the
    public fingerprint) and :func:`~privgraph.ingest.scoring.compute_scores` given a whole graph. The
    draw of rule ``random`` uses the PUBLIC ``public_nodes.selection_seed`` (child
    ``scores.subset``); ``use_labels``: whether the scores read labels (the surrogate is trained on
    the subset), which excludes unlabelled nodes from the draw.

    Args:
        graph: the input graph.
        public_nodes: a :class:`~privgraph.ingest.scoring.config.PublicNodesConfig`.
        use_labels: the scores train the importance surrogate on the subset's labels.
        private_labels: boolean ``[n]``, the nodes whose label the declaration makes private.
    """
    pn = public_nodes
    subset = public_node_subset(
        graph, rule=pn.rule, fraction=pn.fraction, size=pn.size,
        seed=stage_seed(np.random.SeedSequence(pn.selection_seed), "scores.subset"),
        private_labels=private_labels, charge_epsilon=pn.charge_epsilon, use_labels=use_labels,
        all_features_public=pn.all_features_public,
    )
    return PublicRows(restrict_rows(graph, subset.nodes), subset)


def _check_mask_names(names: Any, what: str) -> tuple[str, ...]:
    if names is None:
        return ()
    if isinstance(names, str):
        names = (names,)
    if not isinstance(names, Sequence):
        raise TypeError(f"{what} must be a list of mask names among {list(SPLIT_MASKS)}, got {names!r}")
    out: list[str] = []
    for n in names:
        if n not in SPLIT_MASKS:
            raise ValueError(f"{what}: unknown mask {n!r}; known: {list(SPLIT_MASKS)}")
        if n not in out:
            out.append(n)
    return tuple(out)


def _graph_mask(graph: GraphData, name: str, why: str) -> np.ndarray:
    m = getattr(graph, name)
    if m is None:
        raise ValueError(f"{why} names {name!r} but graph.{name} is None")
    return m


def _random_draw(
    graph: GraphData, fraction: Any, size: Any, seed: Any, private: np.ndarray, private_masks: tuple[str, ...],
    private_labels: np.ndarray | None, use_labels: bool, description: dict[str, Any],
) -> np.ndarray:
    """Rule ``random``: ``size`` nodes (or ``round(fraction * n)``) drawn uniformly without
    replacement from the nodes outside the test mask, the private labels and (when the labels are
    read) the unlabelled nodes, with ``seed`` only; records the choice in ``description``."""
    n = graph.num_nodes
    if (fraction is None) == (size is None):
        raise ValueError("rule 'random' needs exactly one of fraction or size")
    if fraction is not None:
        if isinstance(fraction, bool) or not isinstance(fraction, numbers.Real):
            raise TypeError(f"fraction must be a real number, got {fraction!r}")
        if not (0.0 < float(fraction) <= 1.0):
            raise ValueError(f"fraction must be in (0, 1], got {fraction}")
        k = int(round(float(fraction) * n))
        description["fraction"] = float(fraction)
    else:
        k = check_int(size, "size", minimum=1)
    excluded = private.copy()
    excluded_names = list(private_masks)
    if private_labels is not None and private_labels.any():
        excluded_names.append("private labels (labels.mask)")
    if graph.test_mask is not None:
        excluded |= graph.test_mask
        if "test_mask" not in excluded_names:
            excluded_names.append("test_mask")
    labelled = graph.labelled()
    if use_labels and labelled is not None and not labelled.all():
        excluded |= ~labelled  # the surrogate trains on labels: unlabelled nodes are no use
        excluded_names.append("unlabelled nodes")
    eligible = np.flatnonzero(~excluded)
    if k < 1:
        raise ValueError(f"fraction={fraction} of {n} nodes selects no node")
    if k > eligible.size:
        raise ValueError(
            f"rule 'random' asks for {k} public nodes but only {eligible.size} nodes lie outside "
            f"{excluded_names or 'no mask'}"
        )
    rng = as_generator(seed)
    nodes = np.sort(rng.choice(eligible, size=k, replace=False)).astype(np.int64)
    description["excluded_masks"] = sorted(excluded_names)
    description["selection"] = (
        "uniform without replacement among the nodes outside the excluded masks; the drawn "
        "nodes are declared public (simulation assumption)"
    )
    return nodes


def _private_label_rows(
    graph: GraphData, private_masks: tuple[str, ...], private_labels: np.ndarray | None
) -> np.ndarray:
    """Boolean ``[n]``: the nodes in a private-label mask or flagged in ``private_labels``."""
    n = graph.num_nodes
    private = np.zeros(n, dtype=bool)
    for name in private_masks:
        private |= _graph_mask(graph, name, "private_label_masks")
    if private_labels is not None:
        pl = np.asarray(private_labels)
        if pl.dtype != np.bool_ or pl.shape != (n,):
            raise ValueError(f"private_labels must be a boolean array of shape [{n}], got {pl.dtype} {list(pl.shape)}")
        private |= pl
    return private


def _rule_all(n: int, all_features_public: bool, description: dict[str, Any]) -> tuple[np.ndarray, np.ndarray]:
    """Rule ``all``: every node, every label private; refused unless the features are declared public."""
    if not all_features_public:
        raise PrivateLabelsError(
            "public_node_subset: rule 'all' reads the raw features of EVERY node, and alpha and "
            "beta (published through theta) would leak them; charge_epsilon covers labels only. "
            "Set all_features_public=True only if node features are public in this dataset, or "
            "use rule 'train_mask' or 'random'."
        )
    description["selection"] = "every node (labels treated as private; features declared public)"
    return np.arange(n, dtype=np.int64), np.ones(n, dtype=bool)


def _refuse_uncharged(rule: str, n_private: int, private_masks: tuple[str, ...]) -> None:
    """Raise :class:`PrivateLabelsError`: ``n_private`` private labels selected with no charge."""
    raise PrivateLabelsError(
        f"public_node_subset: rule {rule!r} selects {n_private} nodes whose labels are private "
        f"(rule 'all', or private_label_masks={list(private_masks)}). SHAP on private labels "
        "leaks them through alpha (and theta, which sets FeatureRR's per-feature budgets and is "
        "published in the manifest). Use rule 'train_mask' or 'random' (labels declared public), "
        "or set `charge_epsilon` to train the surrogate on labels randomized by LabelRR and "
        "charge that epsilon to the ledger's labels scope."
    )


def _describe_labels(description: dict[str, Any], size: int, n_private: int, use_labels: bool) -> None:
    """Record the subset's size and how its features and labels are read (public provenance)."""
    description["size"] = size
    description["features"] = "declared public (read raw by alpha and beta)"
    if not use_labels:
        description["labels"] = "not used"
    elif n_private:
        description["labels"] = (
            f"{n_private} private labels randomized by LabelRR (charged), "
            f"{size - n_private} public labels as they are"
        )
    else:
        description["labels"] = "declared public (read raw)"


def public_node_subset(
    graph: GraphData,
    *,
    rule: str,
    fraction: float | None = None,
    size: int | None = None,
    seed: Any = None,
    private_label_masks: Sequence[str] = (),
    charge_epsilon: float | None = None,
    use_labels: bool = True,
    all_features_public: bool = False,
    private_labels: np.ndarray | None = None,
) -> PublicSubset:
    """Choose the nodes whose features (and labels) scoring may read.

    Rules: ``"train_mask"``: the nodes of ``graph.train_mask`` (features and labels declared
    public; labels private if ``"train_mask"`` is in ``private_label_masks``). ``"random"``:
    ``size`` nodes (or ``round(fraction * num_nodes)``) drawn uniformly without replacement, with
    ``seed`` only, outside ``test_mask`` and every private-label mask, declared public. ``"all"``:
    every node, every label private (charge needed), raw features read (``all_features_public``).

    Args:
        graph: the input graph (features ``x``; labels ``y`` when ``use_labels``).
        rule: one of :data:`RULES`.
        fraction, size: for ``"random"`` only, exactly one: the fraction of ALL nodes, in
            ``(0, 1]``, or the number of nodes.
        seed: int, SeedSequence or Generator for the ``"random"`` draw (never recorded); the
            PUBLIC ``selection_seed``, not the run's noise seed (theta depends on the draw).
        private_label_masks: masks whose labels the pipeline declares private.
        private_labels: boolean ``[n]``, the nodes whose label is private
            (:meth:`privgraph.config.disclosure.Disclosure.private_label_rows`); ORed with the masks.
        charge_epsilon: when set, private labels may be selected: the caller randomizes them
            (:func:`randomize_private_labels`) and charges this epsilon to the labels scope.
        use_labels: ``False`` when only features are read (a model file, or ``gamma = 0``).
        all_features_public: required for rule ``"all"``: declares every node's features public.

    Raises:
        PrivateLabelsError: private labels selected while ``charge_epsilon`` is None, or rule
            ``"all"`` without ``all_features_public``.
    """
    if not isinstance(graph, GraphData):
        raise TypeError(f"graph must be a GraphData, got {type(graph).__name__}")
    if rule not in RULES:
        raise ValueError(f"rule must be one of {list(RULES)}, got {rule!r}")
    private_masks = _check_mask_names(private_label_masks, "private_label_masks")
    if charge_epsilon is not None:
        charge_epsilon = check_epsilon(charge_epsilon, "charge_epsilon")
    private = _private_label_rows(graph, private_masks, private_labels)
    if rule != "random" and (fraction is not None or size is not None):
        raise ValueError(f"fraction and size apply to rule 'random' only, got rule {rule!r}")

    description: dict[str, Any] = {"rule": rule, "fraction": None, "excluded_masks": []}
    if rule == "train_mask":
        nodes = np.flatnonzero(_graph_mask(graph, "train_mask", "rule 'train_mask'")).astype(np.int64)
        label_private = private[nodes]
        description["selection"] = "the nodes of train_mask (the split's training nodes, declared public)"
    elif rule == "random":
        nodes = _random_draw(graph, fraction, size, seed, private, private_masks, private_labels, use_labels, description)
        label_private = np.zeros(nodes.size, dtype=bool)
    else:  # all
        nodes, label_private = _rule_all(graph.num_nodes, all_features_public, description)

    if nodes.size == 0:
        raise ValueError(f"rule {rule!r} selects no node")
    n_private = int(label_private.sum())
    if use_labels and n_private and charge_epsilon is None:
        _refuse_uncharged(rule, n_private, private_masks)
    _describe_labels(description, int(nodes.size), n_private, use_labels)
    return PublicSubset(nodes=nodes, private_labels=label_private, description=description)


def randomize_private_labels(
    y: np.ndarray,
    private: np.ndarray,
    *,
    epsilon: float,
    num_classes: int,
    rng: Any,
) -> tuple[np.ndarray, Guarantee]:
    """Replace the private labels ``y[private]`` by k-ary randomized response (LabelRR).

    Returns the labels to train the surrogate on (public ones unchanged) and the Guarantee to
    charge: ``epsilon``-label-LDP for each private label (scope LABELS), with the assumptions
    that the number of classes and the subset's features are public.
    """
    y = np.asarray(y)
    private = np.asarray(private, dtype=bool)
    if y.ndim != 1 or private.shape != y.shape:
        raise ValueError(f"y [m] and private [m] must be 1-D of one length, got {list(y.shape)}, {list(private.shape)}")
    mech = LabelRR(epsilon=epsilon, num_classes=num_classes)
    out = y.astype(np.int64, copy=True)
    if private.any():
        out[private] = mech.privatize_labels(y[private], num_classes, as_generator(rng))
    base = mech.guarantee
    guarantee = dataclasses.replace(
        base,
        assumptions=base.assumptions
        + (
            "the randomized labels are used only to train the importance surrogate; alpha and "
            "theta are post-processing of them",
            "the raw features of the scoring subset are public: this charge covers labels only",
        ),
    )
    return out, guarantee
