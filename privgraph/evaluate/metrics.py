"""What a version's shareable metrics are made of: the seeds, the label noise and the training;
and whether a graph can be evaluated at all (:func:`check_evaluable`, torch-free: checked before
anything is privatized, and with ``--no-evaluate`` no model library is imported).

The evaluate flow computes a version's metrics on the staged objects; :func:`version_metrics`
recomputes them from the STORED version and public configuration alone (no raw data is read), as a
reader of the version holding the run's seed would, and as the non-interference test does in a
fresh process. One function each, used by both.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from privgraph.mechanisms.features.label_rr import LabelRR
from privgraph.guarantee.ledger import PrivacyLedger
from privgraph.config.pipeline import PipelineConfig
from privgraph.config.disclosure import declare_public
from privgraph.errors import GraphValidationError
from privgraph.graph import SPLIT_MASKS, GraphData
from privgraph.ingest.datasets import SPLIT_FILE_OPTION, SPLIT_OPTIONS
from privgraph.evaluate.progress import ProgressCallback
from privgraph.seeding import as_seed_sequence, one_way_entropy, stage_seed

__all__ = ["check_evaluable", "evaluation_entropy", "evaluation_problem", "label_noise", "version_metrics"]



def evaluation_entropy(seed: int | None) -> int | None:
    """The evaluate subflow's seed for a run seeded by ``seed``: a Prefect flow parameter (stored
    and shown in the UI), so a one-way function of the secret seed
    (:func:`~privgraph.seeding.one_way_entropy`), never the seed itself."""
    return one_way_entropy(seed, "evaluate")


def label_noise(cfg: PipelineConfig, manifest: dict[str, Any] | None) -> dict[str, Any]:
    """``label_epsilon`` and ``label_classes`` of the label randomized response behind a version.

    Drop (``evaluate.drop``) stops training when the model beats, on the noisy validation labels,
    the accuracy bound of that randomized response; its budget and (public) number of classes are
    read from the version's ledger (a published version) or, for a version the privatize flow
    has only staged, from the pipeline's ``labels`` section that is making it. Empty when no
    ``label_rr`` perturbed the validation labels: they are then clean and the bound is 1.
    """
    if manifest is not None:
        found = [
            (e.mechanism, e.params) for e in PrivacyLedger.from_dict(manifest["ledger"])
            if e.scope.value == "labels"
        ]
    elif cfg.labels is not None:
        found = [(cfg.labels.mechanism, cfg.labels.params())]
    else:
        found = []
    for mechanism, params in found:
        mask = params.get("mask")
        if mechanism == LabelRR.name and (mask is None or "val_mask" in mask):  # Drop inverts its channel
            return {
                "label_epsilon": float(params["epsilon"]),
                "label_classes": params["num_classes"],
            }
    return {}


def version_metrics(
    version: GraphData, cfg: PipelineConfig, manifest: dict[str, Any] | None, entropy: int | None,
    clean: GraphData | None = None, progress: ProgressCallback | None = None,
) -> dict[str, Any]:
    """A version's metrics: :func:`~privgraph.evaluate.utility.evaluate_utility` with the pipeline's
    ``evaluate`` settings, the label noise of its ledger (with Drop) and the seed child
    ``evaluate`` of ``entropy`` (the evaluate flow's, :func:`evaluation_entropy`).

    The public-only reference reads the training labels that the pipeline's declaration
    (:func:`~privgraph.config.disclosure.declare_public`) leaves public, and the public edges; where it
    privatizes no feature, also the features (the floor is then public-only too).

    Without ``clean`` only the shareable metrics, from the stored version and public configuration
    alone; with it, also the owner's figures (under :data:`~privgraph.evaluate.selection.OWNER_ONLY`), the
    shareable ones unchanged.
    """
    noise = label_noise(cfg, manifest) if cfg.evaluate.drop else {}
    seed = stage_seed(as_seed_sequence(entropy), "evaluate")
    disclosure = declare_public(manifest["pipeline"] if manifest else "<staged>", cfg)
    from privgraph.evaluate.utility import evaluate_utility  # torch: only where a model trains

    return evaluate_utility(version, clean, runs=cfg.evaluate.runs, seed_sequence=seed, progress=progress,
                            public_train=~disclosure.private_label_rows(version), ensemble=cfg.evaluate.ensemble,
                            public_features=not disclosure.feature_mechanism,
                            **noise, **cfg.evaluate.train_kwargs())


def _split_options(options: Mapping[str, Any] | None) -> list[str]:
    """The configured dataset options that made the graph's node split (``train``, ``val``, ``split``)."""
    return [f"dataset.options.{k}" for k in (*SPLIT_OPTIONS, SPLIT_FILE_OPTION) if k in (options or {})]


def evaluation_problem(graph: GraphData, dataset: str, options: Mapping[str, Any] | None = None) -> str | None:
    """Why evaluation cannot train on ``graph`` (no labels, no train/val/test split, an empty or
    unlabelled part), as one line; ``None`` when it can. Reads only public structure: whether
    labels exist, the split masks and which nodes are labelled. With the dataset's ``options``,
    a split that its ``train``/``val`` or ``split`` made is named as the cause."""
    missing = [name for name in ("y", *SPLIT_MASKS) if getattr(graph, name) is None]
    empty = [name for name in SPLIT_MASKS if getattr(graph, name) is not None and not getattr(graph, name).any()]
    labelled = graph.labelled()
    unlabelled = [name for name in SPLIT_MASKS if labelled is not None and getattr(graph, name) is not None
                  and (getattr(graph, name) & ~labelled).any()]
    if not (missing or empty or unlabelled):
        return None
    what = (f"has no {', '.join('labels (y)' if m == 'y' else m for m in missing)}" if missing
            else f"has an empty {', '.join(empty)}" if empty
            else f"has unlabelled nodes in {', '.join(unlabelled)}")
    given = _split_options(options)
    if given and graph.y is not None:  # the split is the options': they are the cause
        what += f" in the node split that {' and '.join(given)} made"
    elif given:
        what += f" ({' and '.join(given)} split the nodes; there is nothing to train on)"
    return f"dataset {dataset!r} {what}: evaluation needs labels and a train/val/test split"


def check_evaluable(graph: GraphData, dataset: str, options: Mapping[str, Any] | None = None) -> None:
    """Refuse, before anything is privatized, a graph that evaluation cannot train on
    (:func:`evaluation_problem`), in one line naming what is missing, what caused it (the
    dataset ``options`` that made the split, when they did) and the two ways out.

    Raises:
        GraphValidationError: labels or a split mask are missing, or a mask selects no node.
    """
    problem = evaluation_problem(graph, dataset, options)
    if problem is None:
        return
    given = _split_options(options)
    if given and graph.y is not None:
        way = (f"change {' and '.join(given)} (a part of the split needs at least one labelled node)"
               if SPLIT_FILE_OPTION not in (options or {}) else "give every part of the split file a labelled node")
    elif given:
        way = "give the dataset labels"
    else:
        way = "add a split (e.g. dataset.options: {train: 0.5, val: 0.25} or {split: split.json})"
    raise GraphValidationError(f"{problem}; {way} or run with --no-evaluate")
