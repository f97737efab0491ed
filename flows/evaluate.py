"""The ``evaluate`` flow: load a version, train the GNN on it and on the clean graph, report both."""

from __future__ import annotations

from typing import Any

from prefect import flow

from flows.reporting import publish_metrics
from privgraph.config import load_config
from privgraph.errors import ArtifactError
from privgraph.seeding import as_seed_sequence, stage_seed
from privgraph.storage import open_store
from tasks.evaluate import evaluate
from tasks.ingest import ingest


@flow(name="evaluate")
def evaluate_flow(
    pipeline: str,
    version: str,
    config_path: str = "pipelines.yaml",
    store: str | None = None,
    staged: bool = False,
    seed_entropy: int | None = None,
) -> dict[str, Any]:
    """Test accuracy of a GCN on the private version vs the clean graph (same split and seeds).

    ``staged=True`` reads a version whose manifest is not yet written (the privatize flow's
    measure-then-publish step). The clean graph is re-ingested from the pipeline's dataset and
    must have the input fingerprint the version records.
    """
    cfg = load_config(config_path).get(pipeline)
    st = open_store(store or cfg.storage)
    private, fingerprint = st.load_graph(pipeline, version, staged=staged)
    clean = ingest(cfg.dataset)
    if fingerprint is not None and clean.fingerprint() != fingerprint:
        raise ArtifactError(
            f"{pipeline}/{version}: the configured dataset is not the input this version was made "
            f"from (input fingerprint differs); evaluate it with the configuration that made it"
        )
    seed = stage_seed(as_seed_sequence(seed_entropy), "evaluate")
    metrics = evaluate(private, clean, cfg.evaluate, seed)
    publish_metrics(pipeline, version, metrics)
    return {"pipeline": pipeline, "version": version, "metrics": metrics}
