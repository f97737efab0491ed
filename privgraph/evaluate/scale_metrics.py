r"""A partitioned version's shareable metrics in bounded memory: the evaluation at scale.

What :func:`~privgraph.evaluate.metrics.version_metrics` computes for a version loaded whole, here
for a version that no process holds whole, from its stored parts
(:class:`~privgraph.evaluate.minibatch_parts.VersionPartsSource`), on the executor's workers:

- per run ``i`` (the seed child ``i`` of the evaluation's seed, as in memory), the candidates
  that train at scale (:data:`~privgraph.evaluate.candidates.CANDIDATES`'s ``scale_source``): the GNN over the
  release (``gnn``: :func:`~privgraph.evaluate.minibatch.fit_cluster_gcn`, the pipeline's GCN
  trained by Cluster-GCN over the version's public partitioning, with ``kprop_features`` over the
  features propagated out of core: :class:`~privgraph.evaluate.minibatch_kprop.PropagatedSource`)
  and the feature-only floor (the same training over the same parts, raw features, no edge); one
  task per run;
- the public-only reference, once: label propagation of the public training labels over the
  public edges (:func:`~privgraph.evaluate.public_reference.public_only_reference`, the same
  function as in memory), in one task holding the public adjacency and ``[n]`` labels;
- per run, the candidate of highest validation accuracy, and the value of the release over the
  public-only reference (a paired test), by the in-memory summary
  (:func:`~privgraph.evaluate.selection.utility_summary`), so the two paths report the same keys.

Every figure is computed from the stored version and the public configuration alone: no raw
graph, so nothing for the owner's private evaluation (no clean model, attacks or structure
report). The options of the in-memory evaluation that Cluster-GCN does not implement are refused
before any data is read (:meth:`~privgraph.config.evaluate.EvaluateConfig.check_at_scale`). Reasoning and figures:
docs/evaluation-cost.md, "The evaluation at scale".
"""

from __future__ import annotations

import contextlib
from typing import Any

import numpy as np

from privgraph.config.disclosure import Disclosure
from privgraph.config.evaluate import EvaluateConfig
from privgraph.evaluate.minibatch_parts import VersionPartsSource, version_public_graph
from privgraph.evaluate.candidates import CANDIDATES
from privgraph.evaluate.minibatch_source import SampledSource, sampled_parts
from privgraph.evaluate.public_reference import per_run_reference, public_only_reference
from privgraph.evaluate.selection import utility_summary
from privgraph.parts.executor import Executor
from privgraph.seeding import as_seed_sequence, partition_seeds, stage_seed

__all__ = ["METHOD_NAME", "scale_evaluation_task", "version_metrics_at_scale"]

#: the evaluation at scale's name in one word, for a log line
METHOD_NAME = "Cluster-GCN"
#: what the evaluation at scale reports it did: ``evaluation`` in its metrics
METHOD = ("Cluster-GCN (Chiang et al. 2019) over the version's parts, the public partitioning; "
          "the floor without edges; the public-only reference by label propagation over the public edges")


def training_kwargs(cfg: EvaluateConfig) -> dict[str, Any]:
    """:func:`~privgraph.evaluate.minibatch.fit_cluster_gcn`'s arguments that ``evaluate`` sets."""
    return {"clusters_per_batch": cfg.clusters_per_batch, "hidden": cfg.hidden, "epochs": cfg.epochs, "lr": cfg.lr,
            "weight_decay": cfg.weight_decay, "dropout": cfg.dropout, "patience": cfg.patience, "aggr": cfg.aggr,
            "inference": cfg.inference, "device": cfg.device}


def _scored(result: dict[str, Any]) -> dict[str, Any]:
    """A Cluster-GCN result as the in-memory summary reads it: scored on the version's own labels."""
    return {**result, "test_acc_own_labels": result["test_acc"]}


def scale_evaluation_task(what: tuple[str, int], seed: np.random.SeedSequence, *, store: str, pipeline: str,
                          version: str, staged: dict[str, Any] | None, options: dict[str, Any],
                          disclosure: Disclosure, kprop_features: int = 0,
                          sample_parts: int | None = None) -> dict[str, Any]:
    """One task of the evaluation at scale, on a worker: ``("run", i)`` trains run ``i``'s
    candidates that train at scale (:meth:`~privgraph.evaluate.candidates.Candidate.scale_source`:
    the floor, the GNN over the features propagated by ``kprop_features`` KProp steps) with ``seed``;
    ``("reference", 0)`` computes the public-only reference. Reads the version
    ``store``/``pipeline``/``version`` (``staged``: its staging's checksums) one part at a time;
    ``sample_parts``: every figure over the induced subgraph of that evaluation sample of the parts
    (:func:`~privgraph.evaluate.minibatch_source.sampled_parts`)."""
    # lazy: torch and PyG on the workers only; the flow process that maps these tasks and
    # summarises their results loads neither
    from privgraph.evaluate.minibatch import fit_cluster_gcn
    from privgraph.evaluate.minibatch_kprop import PropagatedSource
    from privgraph.evaluate.training import output_classes

    if what[0] == "reference":  # labels, split and public edges: no features read, nothing spilled
        public, num_parts = version_public_graph(store, pipeline, version, staged=staged, sample=sample_parts)
        public_train = ~disclosure.private_label_rows(public)
        reference = public_only_reference(public, public_train, output_classes(public))
        return {"reference": reference, "all_train_public": bool(public_train[public.train_mask].all()),
                "num_parts": num_parts, "nodes": public.num_nodes}
    with VersionPartsSource(store, pipeline, version, staged=staged) as whole:
        chosen = sampled_parts(whole.num_clusters, sample_parts)
        source = whole if chosen.size == whole.num_clusters else SampledSource(whole, chosen)
        with contextlib.ExitStack() as stack:
            propagated: list[Any] = []

            def features() -> Any:  # LPGNN's KProp on the features, once per task, where a candidate reads them
                if kprop_features and not propagated:
                    propagated.append(stack.enter_context(PropagatedSource(source, kprop_features)))
                return propagated[0] if propagated else source

            return {c.name: _scored(fit_cluster_gcn(view, seed=seed, **options)) for c in CANDIDATES
                    if (view := c.scale_source(source, features)) is not None}


def version_metrics_at_scale(store: str, pipeline: str, version: str, cfg: EvaluateConfig, entropy: int | None,
                             disclosure: Disclosure, executor: Executor, *,
                             staged: dict[str, Any] | None = None) -> dict[str, Any]:
    """The shareable metrics of the partitioned version ``pipeline``/``version`` of ``store``
    (``staged``: a staged version's checksums), trained on ``executor``'s workers (the module
    docstring); the seed child ``evaluate`` of ``entropy``, as
    :func:`~privgraph.evaluate.metrics.version_metrics`. Returns that function's shareable keys
    (``runs``, ``private``, ``feature_only``, ``public_only``, ``value_of_release``, ``selected``,
    ``gnn_vs_feature_only``, ``device``) and ``evaluation`` (the method, parts, batch, inference).

    Raises:
        ConfigError: ``cfg`` sets an option the evaluation at scale does not implement.
    """
    cfg.check_at_scale()
    seeds = partition_seeds(stage_seed(as_seed_sequence(entropy), "evaluate"), int(cfg.runs))
    tasks = [("reference", 0)] + [("run", i) for i in range(int(cfg.runs))]
    shared = {"store": str(store), "pipeline": pipeline, "version": version, "staged": staged,
              "options": training_kwargs(cfg), "disclosure": disclosure, "kprop_features": cfg.kprop_features,
              "sample_parts": cfg.sample_parts}
    out = executor.map(scale_evaluation_task, tasks, [seeds[0], *seeds], shared)
    public, runs = out[0], out[1:]
    results = {name: [r[name] for r in runs] for name in runs[0]}
    results["public_only"] = per_run_reference(public["reference"], results["feature_only"],
                                               public_features=not disclosure.feature_mechanism,
                                               all_train_public=public["all_train_public"]) or []
    summary = utility_summary(int(cfg.runs), results)
    chosen = sampled_parts(public["num_parts"], cfg.sample_parts)  # every part: no sample
    sample = None if chosen.size == public["num_parts"] else {"parts": chosen.tolist(), "nodes": public["nodes"]}
    return {**summary, "evaluation": {"method": METHOD, "parts": public["num_parts"], "sample": sample,
                                      "clusters_per_batch": cfg.clusters_per_batch, "inference": cfg.inference,
                                      "epochs_run": [r["gnn"]["epochs_run"] for r in runs]}}
