"""What a version is worth: its models against the clean graph and the public data alone.

:func:`evaluate_utility` computes, per seeded run on one split, every candidate of
:data:`~privgraph.evaluate.candidates.CANDIDATES` (the GNN over the version, the feature-only
floor, the GNN over the public edges alone, label propagation and Correct and Smooth over the
release, the public-only reference) and the owner's clean graph, and chooses one candidate per run
by validation accuracy (:func:`~privgraph.evaluate.selection.select_by_validation`). Every candidate reads
the version and the declared public data only (post-processing: the version's guarantee); the
clean graph's results are the owner's (:data:`~privgraph.evaluate.selection.OWNER_ONLY`).
"""

from __future__ import annotations

import numbers
from typing import Any

import numpy as np

from privgraph.evaluate.candidates import CANDIDATES, EvaluationContext
from privgraph.graph import SPLIT_MASKS, GraphData
from privgraph.evaluate.model_inputs import InputCache
from privgraph.guarantee.params import check_int
from privgraph.evaluate.progress import ProgressCallback, ProgressTracker
from privgraph.seeding import as_seed_sequence, partition_seeds
from privgraph.evaluate.selection import utility_summary
from privgraph.evaluate.training import DENOISING_OPTIONS, choose_device, fit_ensemble, output_classes
from privgraph.evaluate.training_args import check_graph

__all__ = ["evaluate_utility"]


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
        dict: :func:`~privgraph.evaluate.selection.utility_summary` of the candidates: ``runs``,
        ``device``, each candidate's summary under its key where it is one (``private``: the GNN),
        ``selected`` (with ``models``), the paired tests and ``ensemble`` (when > 1), on the
        version's own test labels; with ``clean``, under :data:`OWNER_ONLY` ``clean`` and each
        again on the raw labels. Each summary has ``test_acc_mean``, ``test_acc_std``
        (``ddof=1``; ``0.0`` for one run) and the per-run ``test_acc``.

    Raises:
        ValueError: different node counts or splits, or ``runs`` < 1.
        TypeError: ``seed`` or ``eval_y`` among ``train_kwargs``.
    """
    _check_evaluation_inputs(private, clean, runs, train_kwargs)
    ensemble, raw_y = check_int(ensemble, "ensemble", minimum=1), None if clean is None else clean.y
    seeds = partition_seeds(as_seed_sequence(seed_sequence), int(runs))
    clean_kwargs = {k: v for k, v in train_kwargs.items() if k not in DENOISING_OPTIONS}
    ctx = EvaluationContext(private, output_classes(private, train_kwargs.get("label_classes")), int(runs), raw_y,
                            choose_device(train_kwargs.get("device", "auto")), public_train, public_features)
    trained = [(c, kw) for c in CANDIDATES if (kw := c.training(private, train_kwargs)) is not None]
    results: dict[str, list[dict[str, Any]]] = {c.name: [] for c in CANDIDATES}
    clean_res: list[dict[str, Any]] = []
    inputs = (InputCache(), InputCache())
    tracker = ProgressTracker("training", (len(trained) + (clean is not None)) * int(runs), progress)
    for i, s in enumerate(seeds):
        if clean is not None:
            clean_res.append(fit_ensemble(clean, seed=s, members=ensemble, input_cache=inputs[1], **clean_kwargs)[0])
            tracker.advance(detail=f"clean graph, run {i + 1}/{runs}")
        bases: dict[str, np.ndarray] = {}
        for c, kwargs in trained:  # in tie order, simpler first: Correct and Smooth's ties
            result, bases[c.name] = fit_ensemble(private, seed=s, members=ensemble, eval_y=raw_y, progress=progress,
                                                 input_cache=inputs[0], **kwargs)
            results[c.name].append(result)
            tracker.advance(detail=f"{c.detail}, run {i + 1}/{runs}")
        for c in CANDIDATES:  # post-processing of the run's trained models
            results[c.name] += [r for r in (c.per_run(ctx, bases),) if r is not None]
    for c in CANDIDATES:  # once, after the runs
        results[c.name] = c.after_runs(ctx, results) or results[c.name]
    summary = utility_summary(int(runs), results, clean_res)
    return {**summary, "ensemble": ensemble} if ensemble > 1 else summary
