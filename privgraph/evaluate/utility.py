"""What a version is worth: its models against the clean graph and the public data alone.

:func:`evaluate_utility` trains, per seeded run on one split, the GNN over the version, the
feature-only floor, the GNN over the public edges alone and the owner's clean graph, adds label
propagation and Correct and Smooth over the release and the public-only reference, and chooses
one model per run by validation accuracy (:func:`~privgraph.evaluate.selection.select_by_validation`). Every candidate reads
the version and the declared public data only (post-processing: the version's guarantee); the
clean graph's results are the owner's (:data:`~privgraph.evaluate.selection.OWNER_ONLY`).
"""

from __future__ import annotations

import numbers
from collections.abc import Sequence
from typing import Any

import numpy as np

from privgraph.evaluate.correct_and_smooth import release_correct_and_smooth
from privgraph.graph import SPLIT_MASKS, GraphData
from privgraph.evaluate.label_propagation import release_propagation
from privgraph.evaluate.model_inputs import InputCache
from privgraph.guarantee.params import check_int
from privgraph.evaluate.progress import ProgressCallback, ProgressTracker
from privgraph.evaluate.public_reference import per_run_reference, public_only_reference
from privgraph.seeding import as_seed_sequence, partition_seeds
from privgraph.evaluate.selection import utility_summary
from privgraph.evaluate.training import DENOISING_OPTIONS, choose_device, fit_ensemble, output_classes
from privgraph.evaluate.training_args import check_graph

__all__ = [
    "evaluate_utility",
    "feature_only_kwargs",
    "public_edges_kwargs",
    "version_kwargs",
]


def _check_evaluation_inputs(private: GraphData, clean: GraphData | None, runs: Any, train_kwargs: dict[str, Any]) -> None:
    if isinstance(runs, bool) or not isinstance(runs, numbers.Integral) or runs < 1:
        raise ValueError(f"evaluate_utility: runs must be an int >= 1, got {runs!r}")
    for reserved in ("seed", "eval_y"):
        if reserved in train_kwargs:
            raise TypeError(
                f"evaluate_utility: {reserved!r} is set per run by evaluate_utility; "
                "pass seed_sequence instead"
            )
    if clean is None:
        check_graph(private)
    elif private.num_nodes != clean.num_nodes:
        raise ValueError(
            f"evaluate_utility: private graph has {private.num_nodes} nodes, clean graph "
            f"{clean.num_nodes}; they must be the same nodes"
        )
    for name in SPLIT_MASKS if clean is not None else ():
        a, b = getattr(private, name), getattr(clean, name)
        if a is None or b is None:
            if a is not b:
                which = "private" if a is None else "clean"
                raise ValueError(f"evaluate_utility: {name} is missing from the {which} graph")
            continue
        if not np.array_equal(a, b):
            raise ValueError(
                f"evaluate_utility: {name} of the private graph differs from the clean graph's at "
                f"{int(np.count_nonzero(a != b))} nodes; both must use the same split"
            )
    if clean is not None:
        check_graph(clean)
        check_graph(private)


def evaluate_utility(
    private: GraphData,
    clean: GraphData | None,
    *,
    runs: int = 5,
    seed_sequence: np.random.SeedSequence | int,
    progress: ProgressCallback | None = None,
    public_train: np.ndarray | None = None,
    ensemble: int = 1,
    public_features: bool = False,
    **train_kwargs: Any,
) -> dict[str, Any]:
    """Train on a private graph and on its clean original, ``runs`` times each, and compare.

    Both graphs must carry the same split. Run ``i`` trains every model with child ``i`` of
    ``seed_sequence`` (paired runs) and chooses one candidate by validation accuracy on the
    version's own labels (:func:`select_by_validation`). With ``clean=None`` only the shareable
    part is computed (nothing under :data:`OWNER_ONLY`), equal to that of a run with the raw graph
    and the same seeds. Reasoning: docs/evaluation-cost.md, The evaluation's design.

    Args:
        private (GraphData): the privatized graph.
        clean (GraphData or None): the original graph (``None``: the shareable part only).
        runs (int): number of seeded runs per graph (default: ``5``).
        seed_sequence (SeedSequence or int): root of the per-run seeds.
        progress (ProgressCallback, optional): a ``training`` event at the start and per training.
        public_train (ndarray, optional): boolean ``[n]``, the nodes whose training label is public:
            ``public_only`` and ``release_propagation`` become candidates, ``value_of_release`` reported.
        ensemble (int): each model of a run (the clean one too) is the mean prediction of this
            many trainings (:func:`fit_ensemble`) (default: ``1``).
        public_features (bool): the features are public: the floor may be the public-only reference
            (:func:`~privgraph.evaluate.public_reference.per_run_reference`) (default: ``False``).
        **train_kwargs: passed to :func:`train_node_classifier` (not ``seed`` or ``eval_y``;
            :data:`DENOISING_OPTIONS` to the private graph's models only).

    Returns:
        dict: ``runs``, ``device``, ``private`` (the GNN), ``feature_only`` (the floor),
        ``public_edges``, ``public_only``, ``value_of_release``, ``release_propagation``,
        ``correct_and_smooth`` (each where a candidate), ``selected`` (with ``models``: which
        candidate each run chose), ``gnn_vs_feature_only`` (:func:`paired_test`), ``ensemble``
        (when > 1), all on the version's own test labels; with ``clean``, under :data:`OWNER_ONLY`
        ``clean`` and each again on the raw labels. Each summary has ``test_acc_mean``,
        ``test_acc_std`` (``ddof=1``; ``0.0`` for one run) and the per-run ``test_acc``.

    Raises:
        ValueError: different node counts or splits, or ``runs`` < 1.
        TypeError: ``seed`` or ``eval_y`` among ``train_kwargs``.
    """
    _check_evaluation_inputs(private, clean, runs, train_kwargs)
    ensemble, raw_y = check_int(ensemble, "ensemble", minimum=1), None if clean is None else clean.y
    seeds = partition_seeds(as_seed_sequence(seed_sequence), int(runs))
    clean_kwargs = {k: v for k, v in train_kwargs.items() if k not in DENOISING_OPTIONS}
    public_kwargs = public_edges_kwargs(private, train_kwargs)

    classes, device = output_classes(private, train_kwargs.get("label_classes")), choose_device(train_kwargs.get("device", "auto"))
    clean_res, private_res, floor_res, public_res, smoothed, inputs = [], [], [], [], [], (InputCache(), InputCache())
    candidates = (("gnn", version_kwargs(private, train_kwargs), private_res, "private graph"),
                  ("feature_only", feature_only_kwargs(train_kwargs), floor_res, "private graph without edges (feature-only floor)"),
                  ("public_edges", public_kwargs, public_res, "private graph, public edges only"))
    per_run = 2 + (clean is not None) + (public_kwargs is not None)
    tracker = ProgressTracker("training", per_run * int(runs), progress)
    for i, s in enumerate(seeds):
        if clean is not None:
            clean_res.append(fit_ensemble(clean, seed=s, members=ensemble, input_cache=inputs[1], **clean_kwargs)[0])
            tracker.advance(detail=f"clean graph, run {i + 1}/{runs}")
        bases = _version_models(private, s, candidates, members=ensemble, raw_y=raw_y, progress=progress,
                                input_cache=inputs[0], tracker=tracker, run=f"run {i + 1}/{runs}")
        smoothed.append(release_correct_and_smooth(private, bases, classes, raw_y=raw_y, device=device))
    reference = propagation = None
    if public_train is not None:
        reference = per_run_reference(public_only_reference(private, public_train, classes, raw_y=raw_y), floor_res,
                                      public_features=public_features, all_train_public=bool(public_train[private.train_mask].all()))
        propagation = release_propagation(private, classes, raw_y=raw_y, device=device)
    summary = utility_summary(int(runs), clean_res, private_res, floor_res, public_res, reference, propagation,
                               [r for r in smoothed if r is not None])
    return {**summary, "ensemble": ensemble} if ensemble > 1 else summary


def _version_models(
    private: GraphData, seed: np.random.SeedSequence,
    candidates: Sequence[tuple[str, dict[str, Any] | None, list[dict[str, Any]], str]], *, members: int,
    raw_y: np.ndarray | None, progress: ProgressCallback | None, input_cache: InputCache, tracker: ProgressTracker,
    run: str,
) -> dict[str, np.ndarray]:
    """One run's models over the version: each candidate ``(name, arguments, results, label)``
    with arguments is trained (:func:`fit_ensemble`) and its result appended to ``results``; returns
    their class probabilities by name, the simpler models first (Correct and Smooth's ties)."""
    bases: dict[str, np.ndarray] = {}
    for name, kwargs, out, what in candidates:
        if kwargs is None:
            continue
        result, bases[name] = fit_ensemble(private, seed=seed, members=members, eval_y=raw_y, progress=progress,
                                           input_cache=input_cache, **kwargs)
        out.append(result)
        tracker.advance(detail=f"{what}, {run}")
    return {k: bases[k] for k in ("feature_only", "public_edges", "gnn") if k in bases}  # simpler first: ties


def version_kwargs(version: GraphData, train_kwargs: dict[str, Any]) -> dict[str, Any]:
    """The training arguments of a version's GNN: ``train_kwargs`` as they are, except for a GAP
    version (``version.aggregates``), whose GNN is GAP's classification module (model ``"gap"``)
    over the aggregates with the floor's other settings (no edges, KProp, ``aggr`` or
    ``feature_dim``)."""
    if version.aggregates is None:
        return dict(train_kwargs)
    out = {k: v for k, v in feature_only_kwargs(train_kwargs).items() if k not in ("aggr", "feature_dim")}
    return {**out, "model": "gap"}


def public_edges_kwargs(version: GraphData, train_kwargs: dict[str, Any]) -> dict[str, Any] | None:
    """The training arguments of the public-edges candidate (the same model over the version's
    public edges only: what its released private edges add), or None where it is no candidate:
    the version has no public edges, or nothing released from the private ones (edges or GAP's
    aggregates), or the training does not read all edges anyway."""
    released_private = version.edges_private.shape[1] or version.aggregates is not None
    if train_kwargs.get("edges", "all") == "all" and version.edges_public.shape[1] and released_private:
        return {**train_kwargs, "edges": "public"}
    return None


def feature_only_kwargs(train_kwargs: dict[str, Any]) -> dict[str, Any]:
    """The training arguments of the feature-only floor: the same model, epochs and seeds over
    no edges (``edges="none"``), without KProp (which propagates over edges); Drop's stopping
    rule, which reads no edge, is kept."""
    out = {k: v for k, v in train_kwargs.items()
           if k not in ("kprop_features", "kprop_labels", "kprop_search", "kprop_search_labels", "edges")}
    return {**out, "edges": "none"}
