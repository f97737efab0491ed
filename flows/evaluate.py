"""The ``evaluate`` flow: load a version, train the GNN on it and on the clean graph, report both."""

from __future__ import annotations

from typing import Any

from prefect import flow

from flows.reporting import (
    label_flow_run,
    pipeline_tags,
    publish_metrics,
    publish_private_evaluation,
    publish_structure_plot,
)
from privgraph.config.disclosure import Disclosure, disclosure_of
from privgraph.guarantee.ledger import PrivacyLedger
from privgraph.config.pipeline import PipelineConfig
from privgraph.config.loader import load_config
from privgraph.evaluate.metrics import check_evaluable, label_noise
from privgraph.errors import ArtifactError, ArtifactIntegrityError
from privgraph.graph import GraphData
from privgraph.evaluate.graph_utility import structure_plot_png
from privgraph.mechanisms import build_mechanism
from privgraph.seeding import as_seed_sequence, stage_seed
from privgraph.storage import ArtifactStore, open_store
from privgraph.storage.private_record import input_identity, owner_signing_key, read_private_record
from privgraph.storage.seal import public_key_hex
from privgraph.evaluate.selection import OWNER_ONLY
from tasks.evaluate import attacks, evaluate, evaluate_at_scale, graph_report
from tasks.embed import ingest_with_features


@flow(name="evaluate", flow_run_name="{pipeline}/{version}/evaluate")
def evaluate_flow(
    pipeline: str,
    version: str,
    config_path: str = "pipelines.yaml",
    store: str | None = None,
    staged: bool = False,
    seed_entropy: int | None = None,
    feature_release: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Test accuracy of a GNN trained on the private version; the owner's comparison with the clean graph.

    ``staged=True`` reads a version whose manifest is not yet written (the privatize flow's
    measure-then-publish step). A published version of a pipeline on the path at scale
    (``PipelineConfig.runs_at_scale``) is evaluated from its parts on the executor's workers, as
    the privatize flow evaluated it (the shareable metrics only: nothing is trained on the raw graph). The clean graph is re-ingested from the pipeline's dataset; for a
    published version it must have the version's PUBLIC input fingerprint and, when the owner's
    private record of the version is on this machine, its keyed identity (HMAC under the owner's
    key). LPGNN's denoising options of the ``evaluate`` section apply to the private graph only
    (see :func:`privgraph.evaluate.utility.evaluate_utility`).

    Returns ``metrics`` (shareable: computed from the stored version only, published as
    ``<pipeline>-metrics``: by this run for a published version, by the privatize run once it has
    published a staged one) and ``private_evaluation`` (computed from the raw graph, published as
    the artifact ``<pipeline>-private-evaluation`` titled as private, never in a manifest).
    The run is named ``<pipeline>/<version>/evaluate`` and tagged as the pipeline's runs.
    ``feature_release`` (a staged version: no manifest yet) names the feature mechanism and its
    public parameters for the ``attribute`` attack; a published version's ledger says it.
    ``seed_entropy``: the evaluation's seed; a flow parameter is stored and shown by Prefect, so
    the privatize flow passes a one-way function of its secret seed
    (:func:`privgraph.evaluate.metrics.evaluation_entropy`), never the seed.
    """
    cfgs = load_config(config_path)
    cfg = cfgs.get(pipeline)
    label_flow_run(tags=[*pipeline_tags(pipeline, cfg), "evaluate"])
    disclosure = disclosure_of(cfgs, pipeline)
    st = open_store(store or cfg.storage)
    if not staged:  # a published version must carry the owner's seal: an edited ledger stops here
        st.read_manifest(pipeline, version, trusted=[public_key_hex(owner_signing_key(cfg.private_records))], sealed=True)
    if cfg.runs_at_scale and not staged:  # a partitioned version: evaluated from its parts, never loaded whole
        cfg.evaluate.check_at_scale()
        metrics = evaluate_at_scale(store or cfg.storage, (pipeline, version), cfg, disclosure, seed_entropy, pipeline)
        publish_metrics(pipeline, version, metrics)
        return {"pipeline": pipeline, "version": version, "metrics": metrics, "private_evaluation": None,
                "input_check": "not needed: evaluated at scale from the version and the public configuration alone"}
    private, fingerprint = st.load_graph(pipeline, version, staged=staged)
    clean, _ = ingest_with_features(cfg, pipeline)
    check_evaluable(clean, cfg.dataset.name, cfg.dataset.options)  # labels and a split, or one line (exit 2)
    identity = "staged by this run" if staged else _check_input(pipeline, version, cfg, disclosure, clean, fingerprint)
    manifest = _drop_manifest(st, pipeline, version, staged) if cfg.evaluate.drop else None
    noise = label_noise(cfg, manifest) if cfg.evaluate.drop else {}
    root = as_seed_sequence(seed_entropy)
    metrics = dict(evaluate(private, clean, cfg, manifest, seed_entropy))
    owner_only = metrics.pop(OWNER_ONLY)
    if cfg.evaluate.graph_report and (clean.edges_private.size or private.edges_private.size):
        owner_only["graph_utility"] = graph_report(private, clean, stage_seed(root, "graph-report"))
        publish_structure_plot(pipeline, version, structure_plot_png(
            f"{pipeline} {version}: released edges against the raw graph (PRIVATE EVALUATION)", owner_only["graph_utility"]))
    if cfg.evaluate.attacks:  # scored against the raw graph: private evaluation only
        if not staged:
            feature_release = feature_release_of(st.read_manifest(pipeline, version)["ledger"])
        mechanism = None if feature_release is None else build_mechanism(feature_release["mechanism"], feature_release["params"])
        owner_only["attacks"] = attacks(private, clean, cfg.evaluate, stage_seed(root, "attacks"),
                                       feature_mechanism=mechanism, public_feature_rows=disclosure.public_feature_rows(clean),
                                       **noise)
    if not staged:  # a staged version's metrics are published with it, on the privatize run
        publish_metrics(pipeline, version, metrics)
    publish_private_evaluation(pipeline, version, owner_only)
    return {"pipeline": pipeline, "version": version, "metrics": metrics,
            "private_evaluation": owner_only, "input_check": identity}


def _drop_manifest(st: ArtifactStore, pipeline: str, version: str, staged: bool) -> dict[str, Any] | None:
    """The version's manifest, whose ledger states the label noise Drop corrects for; ``None`` for a
    staged version whose manifest is not yet written (made by this configuration)."""
    try:
        return st.read_manifest(pipeline, version)
    except ArtifactIntegrityError:
        raise
    except ArtifactError:
        if not staged:
            raise
        return None


def feature_release_of(ledger: dict[str, Any]) -> dict[str, Any] | None:
    """``{"mechanism", "params"}`` of the feature mechanism a ledger records (public parameters,
    theta included), or None: what the attribute attack rebuilds to simulate the release."""
    for e in PrivacyLedger.from_dict(ledger):
        if e.scope.value == "features" and e.stage.endswith(".features"):
            return {"mechanism": e.mechanism, "params": dict(e.params)}
    return None


def _check_input(
    pipeline: str, version: str, cfg: PipelineConfig, disclosure: Disclosure, clean: GraphData,
    fingerprint: str | None,
) -> str:
    """Refuse a configured dataset that is not the version's input; say how far that was checked."""
    if fingerprint is None:
        return "not checked: the manifest records no public input fingerprint (a version written before manifest format 2)"
    if disclosure.fingerprint(clean) != fingerprint:
        raise ArtifactError(
            f"{pipeline}/{version}: the configured dataset is not the input this version was made "
            f"from (its public input fingerprint differs); evaluate it with the configuration that made it"
        )
    try:
        recorded = read_private_record(cfg.private_records, pipeline, version).get("input_identity")
    except FileNotFoundError:
        recorded = None
    if recorded is None:
        return "public inputs checked; the private input is not (no private record of this version here)"
    if input_identity(clean, cfg.private_records) != recorded:
        raise ArtifactError(
            f"{pipeline}/{version}: the configured dataset is not the input this version was made "
            f"from (its keyed identity in the owner's private record differs)"
        )
    return "public inputs and the owner's keyed identity of the private input checked"
