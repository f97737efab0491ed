"""The ``evaluate`` flow: load a version, train the GNN on it and on the clean graph, report both."""

from __future__ import annotations

from typing import Any

from prefect import flow

from flows.reporting import publish_metrics
from privgraph.accounting import PrivacyLedger
from privgraph.config import PipelineConfig, load_config
from privgraph.errors import ArtifactError, ArtifactIntegrityError
from privgraph.seeding import as_seed_sequence, stage_seed
from privgraph.storage import open_store
from tasks.evaluate import evaluate
from tasks.ingest import ingest


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
        if mechanism == "label_rr" and (mask is None or "val_mask" in mask):
            return {
                "label_epsilon": float(params["epsilon"]),
                "label_classes": params["num_classes"],
            }
    return {}


@flow(name="evaluate")
def evaluate_flow(
    pipeline: str,
    version: str,
    config_path: str = "pipelines.yaml",
    store: str | None = None,
    staged: bool = False,
    seed_entropy: int | None = None,
) -> dict[str, Any]:
    """Test accuracy of a GNN on the private version vs the clean graph (same split and seeds).

    ``staged=True`` reads a version whose manifest is not yet written (the privatize flow's
    measure-then-publish step). The clean graph is re-ingested from the pipeline's dataset and
    must have the input fingerprint the version records. LPGNN's denoising options of the
    ``evaluate`` section apply to the private graph only (see
    :func:`privgraph.training.evaluate_utility`).
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
    noise: dict[str, Any] = {}
    if cfg.evaluate.drop:
        try:
            manifest: dict[str, Any] | None = st.read_manifest(pipeline, version)
        except ArtifactIntegrityError:
            raise
        except ArtifactError:
            if not staged:
                raise
            manifest = None  # staged: made by this configuration, its manifest not yet written
        noise = label_noise(cfg, manifest)
    seed = stage_seed(as_seed_sequence(seed_entropy), "evaluate")
    metrics = evaluate(private, clean, cfg.evaluate, seed, **noise)
    publish_metrics(pipeline, version, metrics)
    return {"pipeline": pipeline, "version": version, "metrics": metrics}
