"""The ``compare`` flow: ingest -> partition -> compare -> store the table and plot.

The table (markdown), the per-run results (JSON) and the privacy-utility plot (PNG) are stored as
one version named after the comparison, and published as Prefect artifacts
(``<name>-table``, ``<name>-plot``; edge comparisons add the degree-preservation plot
``degrees.png`` / ``<name>-degrees``).
"""

from __future__ import annotations

from typing import Any

from prefect import flow

from flows.reporting import publish_comparison
from privgraph.comparison import comparison_manifest, comparison_objects, summarize
from privgraph.config import load_config
from privgraph.errors import ConfigError
from privgraph.seeding import as_seed_sequence, stage_seed
from privgraph.storage import open_store
from tasks.compare import compare
from tasks.ingest import ingest
from tasks.partition import partition
from tasks.scores import score


@flow(name="compare")
def compare_flow(name: str, config_path: str = "pipelines.yaml", store: str | None = None) -> dict[str, Any]:
    """Run the comparison ``name`` of ``pipelines.yaml``; returns the version and the summary."""
    cfg = load_config(config_path)
    ccfg = cfg.comparison(name)
    pcfg = cfg.get(ccfg.pipeline)
    store_uri = store or pcfg.storage
    root = as_seed_sequence(ccfg.seed)  # None: fresh OS entropy; never written anywhere

    graph = ingest(pcfg.dataset)
    parts = partition(graph, pcfg.partitions)
    scores_cfg = ccfg.scores or pcfg.scores
    scores = None if scores_cfg is None else score(graph, scores_cfg, stage_seed(root, "scores"))
    if scores is not None and scores.guarantee is not None:
        raise ConfigError(
            f"comparisons.{name}.scores: the scores charge private labels (charge_epsilon); a comparison "
            "keeps no ledger: use public labels (rule train_mask or random)"
        )
    result = compare(graph, parts, ccfg, pcfg, stage_seed(root, "compare"), None if scores is None else scores.theta)
    title = ccfg.description or f"{name}: {ccfg.scope} mechanisms on {pcfg.dataset.name}"
    objects = comparison_objects(title, result)
    manifest = comparison_manifest(
        name, config=ccfg, pipeline_config=pcfg, graph_in=graph, result=result,
        scores=None if scores is None else scores.provenance,
    )
    version = open_store(store_uri).put_version(name, objects, manifest)
    publish_comparison(
        name, version, objects["table.md"].decode(), objects["utility.png"], objects.get("degrees.png")
    )
    return {"comparison": name, "version": version, "store": str(store_uri), "summary": summarize(result)}
