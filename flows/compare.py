"""The ``compare`` flow: ingest -> partition -> compare -> store the table and plots as a PRIVATE report.

A comparison with a ``seed`` keeps its finished cells in a private checkpoint as they finish
(:class:`~privgraph.storage.private_record.CellCheckpoint`): run the same command again after a
cut-off run and it resumes from them; the checkpoint is removed once the report is written.

A comparison privatizes one scope with each mechanism and scores models against the raw graph
(the clean graph's accuracy, accuracies on raw labels, the exact private degree histogram of the
degree curves): it is an evaluation for the data owner, computed from raw data and covered by no
guarantee. Its table (markdown), per-run results (JSON) and plots (PNG) are stored as a private
report under the pipeline's ``private_records`` directory (mode 0600 files, never the artifact
store) and published as Prefect artifacts titled PRIVATE EVALUATION
(``<name>-private-table``, ``<name>-private-plot``, ``<name>-private-degrees``).
"""

from __future__ import annotations

from typing import Any

from prefect import flow

from flows.reporting import comparison_tags, label_flow_run, publish_comparison
from privgraph.config.disclosure import disclosure_of
from privgraph.evaluate.comparison_report import comparison_info, comparison_objects, summarize
from privgraph.evaluate.graph_comparison import graph_comparison_objects, summarize_graph_comparison
from privgraph.config.loader import load_config
from privgraph.errors import ConfigError
from privgraph.seeding import as_seed_sequence, stage_seed
from privgraph.storage.manifest import code_version
from privgraph.storage.private_record import CellCheckpoint, write_private_report
from tasks.compare import compare, graph_compare
from tasks.embed import ingest_with_features
from tasks.ingest import ingest_graph_set
from tasks.partition import partition
from tasks.scores import scores


@flow(name="compare", flow_run_name="compare/{name}")
def compare_flow(name: str, config_path: str = "pipelines.yaml", store: str | None = None) -> dict[str, Any]:
    """Run the comparison ``name`` of ``pipelines.yaml``; returns the private report's folder and the
    summary. ``store`` is accepted for symmetry with the other flows and not used: a comparison
    is never stored with the shareable versions. The run is named ``compare/<name>`` and tagged
    (``privgraph``, ``comparison:<name>``, ``pipeline:``, ``mechanism:``, ``scope:``)."""
    cfg = load_config(config_path)
    ccfg = cfg.comparison(name)
    label_flow_run(tags=comparison_tags(name, ccfg))
    pcfg = cfg.get(ccfg.pipeline)
    scores_cfg = ccfg.scores or pcfg.scores
    disclosure = disclosure_of(cfg, ccfg.pipeline, scores=ccfg.scores)  # the comparison's scores, if it has its own
    root = as_seed_sequence(ccfg.seed)  # None: fresh OS entropy; never written anywhere

    graph, _ = ingest_with_features(pcfg, ccfg.pipeline)
    parts = partition(graph, pcfg.partitions)
    theta_scores = None
    if scores_cfg is not None:
        theta_scores = scores(disclosure.public_rows(graph), scores_cfg, stage_seed(root, "scores"), pcfg.embed,
                       pcfg.dataset.root)
    if theta_scores is not None and theta_scores.guarantee is not None:
        raise ConfigError(
            f"comparisons.{name}.scores: the scores charge private labels (charge_epsilon); a comparison "
            "keeps no ledger: use public labels (rule train_mask or random)"
        )
    checkpoint = None if ccfg.seed is None else CellCheckpoint(  # fresh entropy: nothing to resume
        pcfg.private_records, name,
        {"comparison": ccfg.model_dump(mode="json"), "pipeline": pcfg.model_dump(mode="json"), "code": code_version()},
        [graph],
    )
    result = compare(graph, parts, ccfg, pcfg, stage_seed(root, "compare"), None if theta_scores is None else theta_scores.theta,
                     name=name, checkpoint=checkpoint)
    title = ccfg.description or f"{name}: {ccfg.scope} mechanisms on {pcfg.dataset.name}"
    objects = comparison_objects(title, result)
    info = comparison_info(name, config=ccfg, pipeline_config=pcfg, result=result,
                           scores=None if theta_scores is None else theta_scores.provenance)
    folder = write_private_report(pcfg.private_records, name, objects, info)
    publish_comparison(
        name, str(folder), objects["table.md"].decode(), objects["utility.png"], objects.get("degrees.png")
    )
    if checkpoint is not None:
        checkpoint.discard()
    return {"comparison": name, "report": str(folder), "private": True, "summary": summarize(result)}


@flow(name="graph-compare", flow_run_name="graph-compare/{name}")
def graph_compare_flow(name: str, config_path: str = "pipelines.yaml") -> dict[str, Any]:
    """Run the graph-classification comparison ``name`` (``graph_comparisons:``): ingest the graph
    set, privatize every graph with each mechanism at each epsilon and cross-validate GIN-0; the
    table, results and plot are a PRIVATE report (scored on raw labels), like every comparison."""
    cfg = load_config(config_path)
    gcfg = cfg.graph_comparison(name)
    if gcfg is None:
        raise ConfigError(f"graph_comparisons.{name}: no such graph comparison")
    label_flow_run(tags=["privgraph", f"comparison:{name}", "task:graph-classification",
                         *(f"mechanism:{m}" for m in gcfg.mechanisms)])
    root = as_seed_sequence(gcfg.seed)  # None: fresh OS entropy; never written anywhere
    graph_set = ingest_graph_set(gcfg.dataset, gcfg.private_records, name)
    checkpoint = None if gcfg.seed is None else CellCheckpoint(
        gcfg.private_records, name, {"graph_comparison": gcfg.model_dump(mode="json"), "code": code_version()},
        graph_set.graphs, graph_set.labels,
    )
    result = graph_compare(graph_set, gcfg, stage_seed(root, "graph-compare"), name=name, checkpoint=checkpoint)
    title = gcfg.description or f"{name}: edge mechanisms per graph on {graph_set.name}, GIN-0"
    objects = graph_comparison_objects(title, result)
    info = {
        "kind": "graph-comparison", "description": gcfg.description, "code_version": code_version(),
        "dataset": {"name": gcfg.dataset.name, "options": gcfg.dataset.options,
                    "private_fraction": gcfg.dataset.private_fraction, **graph_set.summary()},
        "mechanisms": dict(gcfg.mechanisms), "epsilons": list(gcfg.epsilons), "folds": gcfg.folds,
        "epochs": gcfg.epochs, "summary": summarize_graph_comparison(result),
    }
    folder = write_private_report(gcfg.private_records, name, objects, info)
    publish_comparison(name, str(folder), objects["table.md"].decode(), objects["utility.png"])
    if checkpoint is not None:
        checkpoint.discard()
    return {"comparison": name, "report": str(folder), "private": True, "kind": "graph-classification",
            "summary": summarize_graph_comparison(result)}
