r"""Importance scores :math:`\alpha` (HeteroRR, papers 000/002, Sec. III-A, Eq. 6).

.. math::
    \alpha_i = \frac{|\mathrm{SHAP}(z_i)|}{\lVert \mathrm{SHAP}(z) \rVert_1}

computed, as the paper recommends ("a pretrained model that is trained on a publicly available
dataset to avoid any extra privacy risks"), from a linear surrogate classifier that sees PUBLIC
data only:

- ``source="public_subset"``: a multinomial logistic regression (scikit-learn, lbfgs,
  deterministic) trained on the features and labels of a PUBLIC node subset chosen by
  :func:`public_node_subset`; SHAP values by ``shap.LinearExplainer`` (exact for a linear model,
  interventional / independent masker); :math:`|\mathrm{SHAP}(z_i)|` is the mean of
  :math:`|\phi_{s,i,c}|` over explained samples :math:`s` and classes :math:`c`.
- ``source="model_file"``: a linear surrogate trained elsewhere on public data, stored as an
  ``.npz`` file (format :data:`MODEL_FILE_FORMAT`, see :func:`save_linear_surrogate`) together
  with its PUBLIC background (and optionally explained) rows; no graph data is read for alpha.

Privacy status. alpha sets FeatureRR's per-feature budgets and is published (theta is in the
manifest), so it must be a function of public data only:

- the public node subset's features AND labels are read raw: the subset's nodes are declared
  public (rule ``train_mask``: the split's training nodes; rule ``random``: a random fraction of
  nodes, a simulation assumption like ``rho`` for edges). Nothing is guaranteed for them.
- a rule that selects nodes whose labels are private (rule ``all``, or a mask the pipeline
  declares private) is REFUSED (:class:`PrivateLabelsError`) unless ``charge_epsilon`` is set;
  then each private label is replaced by k-ary randomized response (:class:`LabelRR`,
  ``epsilon = charge_epsilon``) BEFORE the surrogate is trained. The surrogate, its accuracy,
  alpha and theta are post-processing of those randomized labels, so the private labels get
  ``charge_epsilon``-label-LDP (a :class:`Guarantee` of scope LABELS that the caller must record
  in the ledger; it composes sequentially with any other label release). The charge covers the
  labels ONLY: the subset's raw features still enter alpha (and beta) uncharged, which is why
  rule ``all`` also needs ``all_features_public=True`` (a declaration that node features are
  public in this dataset).
"""

from __future__ import annotations

import dataclasses
import hashlib
import math
import numbers
import os
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from privgraph.errors import ConfigError
from privgraph.graph import SPLIT_MASKS, GraphData
from privgraph.guarantee import Guarantee
from privgraph.params import check_epsilon, check_int
from privgraph.mechanisms.features.label_rr import LabelRR
from privgraph.seeding import as_generator, stage_seed

__all__ = [
    "RULES",
    "MODEL_FILE_FORMAT",
    "PrivateLabelsError",
    "PublicSubset",
    "PublicRows",
    "public_rows",
    "restrict_rows",
    "ImportanceResult",
    "LinearSurrogate",
    "public_node_subset",
    "randomize_private_labels",
    "fit_surrogate",
    "sample_shap_rows",
    "linear_shap_values",
    "shap_importance",
    "save_linear_surrogate",
    "load_linear_surrogate",
    "model_file_importance",
]

#: rules choosing the public node subset
RULES = ("train_mask", "random", "all")
#: the one documented model-file format (an ``.npz`` read with ``allow_pickle=False``)
MODEL_FILE_FORMAT = "privgraph-linear-npz-v1"


class PrivateLabelsError(ConfigError):
    """The score configuration would train the importance surrogate on private labels uncharged."""


# -- the public node subset ----------------------------------------------------------------------


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
    (:meth:`privgraph.disclosure.Disclosure.public_rows`, which the scores stage receives, and the
    public fingerprint) and :func:`~privgraph.scoring.compute_scores` given a whole graph. The
    draw of rule ``random`` uses the PUBLIC ``public_nodes.selection_seed`` (child
    ``scores.subset``); ``use_labels``: whether the scores read labels (the surrogate is trained on
    the subset), which excludes unlabelled nodes from the draw.

    Args:
        graph: the input graph.
        public_nodes: a :class:`~privgraph.scoring.config.PublicNodesConfig`.
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

    Rules:
        - ``"train_mask"``: the nodes of ``graph.train_mask``; their features and labels are
          declared public (the split's published training labels). If ``"train_mask"`` is in
          ``private_label_masks`` their labels are private instead.
        - ``"random"``: ``size`` nodes (or ``round(fraction * num_nodes)``) drawn uniformly without
          replacement from the nodes outside ``test_mask`` (so scores never see evaluation labels)
          and outside every mask in ``private_label_masks``; the drawn nodes are declared public,
          a simulation assumption (like ``rho`` for edges). The draw uses ``seed`` only.
        - ``"all"``: every node; every label is treated as private (charge needed) and every
          node's raw features are read (``all_features_public=True`` needed).

    Args:
        graph: the input graph (features ``x``; labels ``y`` when ``use_labels``).
        rule: one of :data:`RULES`.
        fraction: for ``"random"``: the fraction of ALL nodes declared public, in ``(0, 1]``.
        size: for ``"random"``: the number of nodes instead of ``fraction`` (exactly one of them).
        seed: int, SeedSequence or Generator for the ``"random"`` draw (never recorded). Not the
            run's secret noise seed: theta depends on the draw and is published
            (:func:`~privgraph.scoring.compute_scores` passes ``selection_seed``).
        private_label_masks: masks whose labels the pipeline declares private (e.g. the masks
            its LabelRR perturbs).
        private_labels: boolean ``[n]``, the nodes whose label is private, as the pipeline's one
            declaration materializes it (:meth:`privgraph.disclosure.Disclosure.private_label_rows`);
            combined (OR) with ``private_label_masks``.
        charge_epsilon: when set, private labels may be selected: the caller randomizes them
            (:func:`randomize_private_labels`) and charges this epsilon to the labels scope.
        use_labels: ``False`` when only features are read (importance from a model file, or
            ``gamma = 0``): private labels are then no reason to refuse.
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
    n = graph.num_nodes
    private = np.zeros(n, dtype=bool)
    for name in private_masks:
        private |= _graph_mask(graph, name, "private_label_masks")
    if private_labels is not None:
        pl = np.asarray(private_labels)
        if pl.dtype != np.bool_ or pl.shape != (n,):
            raise ValueError(f"private_labels must be a boolean array of shape [{n}], got {pl.dtype} {list(pl.shape)}")
        private |= pl
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
        if not all_features_public:
            raise PrivateLabelsError(
                "public_node_subset: rule 'all' reads the raw features of EVERY node, and alpha and "
                "beta (published through theta) would leak them; charge_epsilon covers labels only. "
                "Set all_features_public=True only if node features are public in this dataset, or "
                "use rule 'train_mask' or 'random'."
            )
        nodes = np.arange(n, dtype=np.int64)
        label_private = np.ones(n, dtype=bool)
        description["selection"] = "every node (labels treated as private; features declared public)"

    if nodes.size == 0:
        raise ValueError(f"rule {rule!r} selects no node")
    n_private = int(label_private.sum())
    if use_labels and n_private and charge_epsilon is None:
        raise PrivateLabelsError(
            f"public_node_subset: rule {rule!r} selects {n_private} nodes whose labels are private "
            f"(rule 'all', or private_label_masks={list(private_masks)}). SHAP on private labels "
            "leaks them through alpha (and theta, which sets FeatureRR's per-feature budgets and is "
            "published in the manifest). Use rule 'train_mask' or 'random' (labels declared public), "
            "or set `charge_epsilon` to train the surrogate on labels randomized by LabelRR and "
            "charge that epsilon to the ledger's labels scope."
        )
    description["size"] = int(nodes.size)
    description["features"] = "declared public (read raw by alpha and beta)"
    if not use_labels:
        description["labels"] = "not used"
    elif n_private:
        description["labels"] = (
            f"{n_private} private labels randomized by LabelRR (charged), "
            f"{int(nodes.size) - n_private} public labels as they are"
        )
    else:
        description["labels"] = "declared public (read raw)"
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


# -- the surrogate and SHAP -------------------------------------------------------------------------


class ImportanceResult(NamedTuple):
    """``alpha`` float64 ``[d]`` (non-negative, sums to 1) and its public ``provenance``."""

    alpha: np.ndarray
    provenance: dict[str, Any]


def _check_x(x: Any, name: str) -> np.ndarray:
    arr = np.asarray(x)
    if arr.dtype == np.bool_ or not np.issubdtype(arr.dtype, np.number) or np.iscomplexobj(arr):
        raise TypeError(f"{name} must hold real numbers, got dtype {arr.dtype}")
    if arr.ndim != 2 or arr.shape[0] == 0 or arr.shape[1] == 0:
        raise ValueError(f"{name} must be a non-empty 2-D array [n, d], got shape {list(arr.shape)}")
    arr = arr.astype(np.float64)
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} must be finite (NaN or inf found)")
    return arr


def _check_y(y: Any, n: int, name: str) -> np.ndarray:
    arr = np.asarray(y)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be 1-D single labels [n], got shape {list(arr.shape)}")
    if arr.dtype == np.bool_ or not np.issubdtype(arr.dtype, np.integer):
        raise TypeError(f"{name} must hold integer labels, got dtype {arr.dtype}")
    if arr.shape[0] != n:
        raise ValueError(f"{name} has {arr.shape[0]} labels but the features have {n} rows")
    return arr.astype(np.int64)


def fit_surrogate(x: np.ndarray, y: np.ndarray, *, C: float = 1.0, max_iter: int = 1000) -> Any:
    """A multinomial logistic regression (lbfgs: deterministic for given data) on ``(x, y)``."""
    from sklearn.exceptions import ConvergenceWarning
    from sklearn.linear_model import LogisticRegression

    model = LogisticRegression(C=C, max_iter=max_iter, solver="lbfgs")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)  # reported as provenance["converged"]
        model.fit(x, y)
    return model


def sample_shap_rows(
    n: int, background_size: int, explain_size: int, rng: Any
) -> tuple[np.ndarray, np.ndarray]:
    """Row positions (into the ``n`` public rows) of the SHAP background and explained samples.

    Each is all rows, in order, when its size is >= ``n`` (no draw), else a sorted uniform draw
    without replacement; the background is drawn first.
    """
    n = check_int(n, "n", minimum=1)
    background_size = check_int(background_size, "background_size", minimum=1)
    explain_size = check_int(explain_size, "explain_size", minimum=1)
    gen = as_generator(rng)

    def draw(k: int) -> np.ndarray:
        if k >= n:
            return np.arange(n, dtype=np.int64)
        return np.sort(gen.choice(n, size=k, replace=False)).astype(np.int64)

    bg = draw(background_size)
    ex = draw(explain_size)
    return bg, ex


def _as_coef(coef: Any, intercept: Any) -> tuple[np.ndarray, np.ndarray]:
    c = np.asarray(coef, dtype=np.float64)
    if c.ndim == 1:
        c = c[None, :]
    if c.ndim != 2 or c.size == 0:
        raise ValueError(f"coef must be [d] or [outputs, d], got shape {list(np.shape(coef))}")
    b = np.zeros(c.shape[0]) if intercept is None else np.asarray(intercept, dtype=np.float64).reshape(-1)
    if b.shape[0] != c.shape[0]:
        raise ValueError(f"intercept has {b.shape[0]} entries but coef has {c.shape[0]} outputs")
    if not (np.all(np.isfinite(c)) and np.all(np.isfinite(b))):
        raise ValueError("coef and intercept must be finite")
    return c, b


def linear_shap_values(
    coef: Any, intercept: Any, background: np.ndarray, x: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Exact SHAP values of a linear model's margins via ``shap.LinearExplainer``.

    Independent (interventional) masker over ``background``, which shap does NOT subsample
    (``max_samples = len(background)``): ``phi[s, i, c] = coef[c, i] (x[s, i] - mean_bg[i])``.

    Returns:
        ``phi`` float64 ``[n, d, outputs]`` and ``base`` float64 ``[outputs]`` with
        ``phi.sum(1) + base == x @ coef.T + intercept`` (additivity).
    """
    shap = _shap()
    c, b = _as_coef(coef, intercept)
    bg = _check_x(background, "background")
    xx = _check_x(x, "x")
    if bg.shape[1] != c.shape[1] or xx.shape[1] != c.shape[1]:
        raise ValueError(
            f"coef has {c.shape[1]} features, background {bg.shape[1]}, x {xx.shape[1]}: they must agree"
        )
    masker = shap.maskers.Independent(bg, max_samples=bg.shape[0])
    model = (c[0], b[0]) if c.shape[0] == 1 else (c, b)
    explainer = shap.LinearExplainer(model, masker)
    phi = np.asarray(explainer.shap_values(xx), dtype=np.float64)
    if phi.ndim == 2:
        phi = phi[:, :, None]
    base = np.atleast_1d(np.asarray(explainer.expected_value, dtype=np.float64)).reshape(-1)
    return phi, base


def _normalise_importance(phi: np.ndarray) -> np.ndarray:
    raw = np.abs(phi).mean(axis=(0, 2))
    total = math.fsum(raw.tolist())
    if not total > 0:
        raise ValueError(
            "alpha: every SHAP value is 0 (the surrogate is constant on the explained rows, or "
            "the explained rows equal the background mean); Eq. 6 is undefined"
        )
    return raw / total


def _shap() -> Any:
    """``import shap`` (lazily: ~2 s), without its import-time plotting deprecation warnings."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PendingDeprecationWarning)
        warnings.simplefilter("ignore", DeprecationWarning)
        import shap
    return shap


def _shap_version() -> str:
    return str(_shap().__version__)


def shap_importance(
    x_public: Any,
    y_public: Any,
    *,
    seed: Any = None,
    background_size: int = 100,
    explain_size: int = 200,
    background_rows: np.ndarray | None = None,
    explain_rows: np.ndarray | None = None,
    C: float = 1.0,
    max_iter: int = 1000,
) -> ImportanceResult:
    r"""alpha (Eq. 6) from a logistic-regression surrogate trained on PUBLIC rows.

    ``x_public`` ``[m, d]`` and ``y_public`` ``[m]`` must be public (or labels randomized and
    charged): this function trusts its caller. The background and explained rows are drawn
    from the same public rows with ``seed`` (:func:`sample_shap_rows`) unless given as row
    positions. ``alpha_i = mean_{s, c} |phi_{s,i,c}| / sum_j mean_{s, c} |phi_{s,j,c}|``.

    Provenance: surrogate type and parameters, whether lbfgs converged, its accuracy on the
    rows it was trained on, the explainer and the sample sizes. No seed, no row ids.
    """
    x = _check_x(x_public, "x_public")
    y = _check_y(y_public, x.shape[0], "y_public")
    if np.unique(y).size < 2:
        raise ValueError("y_public holds a single class: the surrogate cannot learn any importance")
    if isinstance(C, bool) or not isinstance(C, numbers.Real) or not (math.isfinite(C) and C > 0):
        raise ValueError(f"C must be a finite number > 0, got {C!r}")
    max_iter = check_int(max_iter, "max_iter", minimum=1)
    if background_rows is None or explain_rows is None:
        bg, ex = sample_shap_rows(x.shape[0], background_size, explain_size, seed)
        bg = bg if background_rows is None else background_rows
        ex = ex if explain_rows is None else explain_rows
    else:
        bg, ex = background_rows, explain_rows
    bg = np.asarray(bg, dtype=np.int64)
    ex = np.asarray(ex, dtype=np.int64)
    for name, r in (("background_rows", bg), ("explain_rows", ex)):
        if r.ndim != 1 or r.size == 0 or r.min() < 0 or r.max() >= x.shape[0]:
            raise ValueError(f"{name} must be non-empty row positions in [0, {x.shape[0]})")

    model = fit_surrogate(x, y, C=float(C), max_iter=max_iter)
    phi, _ = linear_shap_values(model.coef_, model.intercept_, x[bg], x[ex])
    alpha = _normalise_importance(phi)
    n_iter = int(np.max(np.atleast_1d(model.n_iter_)))
    provenance = {
        "source": "public_subset",
        "surrogate": {
            "type": "sklearn.linear_model.LogisticRegression",
            "params": {"C": float(C), "max_iter": max_iter, "solver": "lbfgs", "loss": "multinomial (binomial for 2 classes)"},
            "num_classes": int(model.classes_.shape[0]),
            "converged": n_iter < max_iter,
            "accuracy": float(model.score(x, y)),
            "accuracy_on": "the labels it was trained on (public subset)",
            "train_size": int(x.shape[0]),
        },
        "explainer": {
            "type": "shap.LinearExplainer",
            "masker": "Independent (interventional)",
            "shap_version": _shap_version(),
            "background_size": int(bg.size),
            "explain_size": int(ex.size),
            "aggregate": "mean |SHAP| over explained rows and classes, normalised to sum 1",
        },
    }
    return ImportanceResult(alpha, provenance)


# -- a surrogate from a model file ------------------------------------------------------------------


@dataclasses.dataclass(frozen=True, repr=False)
class LinearSurrogate:
    """A linear surrogate trained elsewhere on public data (format :data:`MODEL_FILE_FORMAT`).

    Attributes:
        coef: float64 ``[outputs, d]`` (one output: the margin of ``classes[1]`` vs ``classes[0]``).
        intercept: float64 ``[outputs]``.
        background: float64 ``[m, d]`` PUBLIC rows (the SHAP baseline).
        explain: float64 ``[k, d]`` PUBLIC rows to explain (default: the background).
        classes: int64 labels of the outputs (``[outputs]``, or ``[2]`` for one output).
        sha256: the file's SHA-256 (public: identifies the model).
    """

    coef: np.ndarray
    intercept: np.ndarray
    background: np.ndarray
    explain: np.ndarray
    classes: np.ndarray
    sha256: str

    def decision_function(self, x: Any) -> np.ndarray:
        return _check_x(x, "x") @ self.coef.T + self.intercept

    def predict(self, x: Any) -> np.ndarray:
        m = self.decision_function(x)
        if self.coef.shape[0] == 1:
            return self.classes[(m[:, 0] > 0).astype(np.int64)]
        return self.classes[np.argmax(m, axis=1)]

    def __repr__(self) -> str:
        return f"LinearSurrogate(outputs={self.coef.shape[0]}, d={self.coef.shape[1]}, sha256={self.sha256[:12]}...)"


def save_linear_surrogate(
    path: str | os.PathLike[str],
    *,
    coef: Any,
    background: Any,
    intercept: Any = None,
    explain: Any = None,
    classes: Any = None,
) -> Path:
    """Write a linear surrogate as ``.npz`` (format :data:`MODEL_FILE_FORMAT`).

    Keys: ``format`` (the format string), ``coef`` ``[outputs, d]`` (or ``[d]``), ``intercept``
    ``[outputs]`` (default 0), ``background`` ``[m, d]`` (PUBLIC rows, required: the SHAP
    baseline), optional ``explain`` ``[k, d]`` (PUBLIC rows to explain; default the background),
    optional ``classes`` (the labels of the outputs; default ``0..outputs-1``, or ``[0, 1]`` for
    one output). A scikit-learn linear classifier saves as
    ``coef=m.coef_, intercept=m.intercept_, classes=m.classes_``. Plain arrays only: the file is
    read with ``allow_pickle=False``.
    """
    c, b = _as_coef(coef, intercept)
    arrays: dict[str, np.ndarray] = {
        "format": np.array(MODEL_FILE_FORMAT),
        "coef": c,
        "intercept": b,
        "background": _check_x(background, "background"),
    }
    if explain is not None:
        arrays["explain"] = _check_x(explain, "explain")
    if classes is not None:
        arrays["classes"] = np.asarray(classes, dtype=np.int64)
    p = Path(path)
    with open(p, "wb") as fh:
        np.savez(fh, **arrays)
    load_linear_surrogate(p)  # validates what was written
    return p


def load_linear_surrogate(path: str | os.PathLike[str]) -> LinearSurrogate:
    """Read and validate a model file written by :func:`save_linear_surrogate`."""
    p = Path(path)
    if not p.is_file():
        raise FileNotFoundError(f"model_path: no such file {str(p)!r}")
    raw = p.read_bytes()
    sha = hashlib.sha256(raw).hexdigest()
    try:
        with np.load(p, allow_pickle=False) as f:
            data = {k: f[k] for k in f.files}
    except Exception as exc:  # not an npz, or object arrays
        raise ValueError(f"model_path {p.name!r}: not a {MODEL_FILE_FORMAT} .npz file: {exc}") from exc
    fmt = str(data.get("format", ""))
    if fmt != MODEL_FILE_FORMAT:
        raise ValueError(f"model_path {p.name!r}: format must be {MODEL_FILE_FORMAT!r}, got {fmt!r}")
    for key in ("coef", "background"):
        if key not in data:
            raise ValueError(f"model_path {p.name!r}: missing array {key!r}")
    c, b = _as_coef(data["coef"], data.get("intercept"))
    bg = _check_x(data["background"], "background")
    ex = _check_x(data["explain"], "explain") if "explain" in data else bg
    if bg.shape[1] != c.shape[1] or ex.shape[1] != c.shape[1]:
        raise ValueError(f"model_path {p.name!r}: coef has {c.shape[1]} features, background {bg.shape[1]}, explain {ex.shape[1]}")
    n_cls = 2 if c.shape[0] == 1 else c.shape[0]
    classes = np.asarray(data["classes"], dtype=np.int64) if "classes" in data else np.arange(n_cls, dtype=np.int64)
    if classes.shape != (n_cls,):
        raise ValueError(f"model_path {p.name!r}: classes must have {n_cls} entries, got {list(classes.shape)}")
    return LinearSurrogate(coef=c, intercept=b, background=bg, explain=ex, classes=classes, sha256=sha)


def model_file_importance(
    path: str | os.PathLike[str],
    *,
    x_eval: Any = None,
    y_eval: Any = None,
) -> ImportanceResult:
    """alpha (Eq. 6) from a linear surrogate file: SHAP of its own public explained rows against
    its own public background; reads no graph data.

    ``x_eval``/``y_eval`` (optional, PUBLIC rows and labels, e.g. the public subset) only give
    the surrogate's accuracy for the provenance.
    """
    s = load_linear_surrogate(path)
    phi, _ = linear_shap_values(s.coef, s.intercept, s.background, s.explain)
    alpha = _normalise_importance(phi)
    accuracy = None
    if x_eval is not None and y_eval is not None:
        xe = _check_x(x_eval, "x_eval")
        if xe.shape[1] != s.coef.shape[1]:
            raise ValueError(f"x_eval has {xe.shape[1]} features, the model file {s.coef.shape[1]}")
        ye = _check_y(y_eval, xe.shape[0], "y_eval")
        accuracy = float(np.mean(s.predict(xe) == ye))
    provenance = {
        "source": "model_file",
        "model_file": {"format": MODEL_FILE_FORMAT, "name": Path(path).name, "sha256": s.sha256},
        "surrogate": {
            "type": "linear (coef, intercept) from a model file trained on public data",
            "num_outputs": int(s.coef.shape[0]),
            "accuracy": accuracy,
            "accuracy_on": None if accuracy is None else "public subset labels",
            "eval_size": None if accuracy is None else int(np.asarray(x_eval).shape[0]),
        },
        "explainer": {
            "type": "shap.LinearExplainer",
            "masker": "Independent (interventional)",
            "shap_version": _shap_version(),
            "background_size": int(s.background.shape[0]),
            "explain_size": int(s.explain.shape[0]),
            "aggregate": "mean |SHAP| over explained rows and classes, normalised to sum 1",
        },
    }
    return ImportanceResult(alpha, provenance)
