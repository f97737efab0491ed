"""What a privatize run publishes: the manifest of its version, built from the run.

Above the store (which keeps the manifest FORMAT, :mod:`privgraph.storage.manifest`) and beside
the pipeline's configuration and declaration of what is public, which the manifest records.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from privgraph.config.pipeline import PipelineConfig
from privgraph.ingest.datasets import PATH_OPTIONS
from privgraph.config.disclosure import Disclosure
from privgraph.graph import GraphData
from privgraph.guarantee.redaction import redact_uri
from privgraph.privatize.release import PrivatizationResult
from privgraph.storage.manifest import code_version, validate_manifest

__all__ = ["build_manifest"]


def _plain(value: Any) -> Any:
    """A JSON-safe copy: numpy scalars and arrays to Python, tuples to lists, keys to str."""
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def _portable_options(options: dict[str, Any]) -> dict[str, Any]:
    """Dataset options with file paths reduced to their names (a local path, a URI's credentials,
    bucket and query string are not published) and
    without options that name a seed (a synthetic graph's ``seed`` fixes its private edges, as
    ``split_seed`` does: configuration, kept out of the manifest)."""
    return {k: (Path(redact_uri(str(v))).name if k in PATH_OPTIONS and v is not None else v)
            for k, v in options.items() if "seed" not in k.lower()}


def _mechanism_rows(ledger: Any) -> list[dict[str, Any]]:
    """The manifest's ``mechanisms``: one row per ledger entry, its public parameters only."""
    return [
        {
            "stage": e.stage, "mechanism": e.mechanism, "scope": e.scope.value, "kind": e.kind.value,
            "epsilon": e.epsilon, "unit_kind": e.guarantee.unit_kind.value,
            "unit_epsilon": e.guarantee.ledger_epsilon, "params": e.params,
            "assumptions": list(e.guarantee.assumptions),
        }
        for e in ledger.entries
    ]


def _check_manifest_inputs(graph_in: GraphData | None, input_fingerprint: str | None,
                           metrics: Mapping[str, Any] | None) -> None:
    """The input graph or its fingerprint (exactly one), and no metric computed from raw data."""
    if metrics is not None and any(k in metrics for k in ("clean", "owner_only")):
        raise ValueError("build_manifest: metrics computed from raw data belong to the private record")
    if (graph_in is None) == (input_fingerprint is None):
        raise ValueError("build_manifest: give the input graph or its public fingerprint, not both")


def build_manifest(
    *,
    pipeline: str,
    config: PipelineConfig,
    disclosure: Disclosure,
    graph_in: GraphData | None,
    result: PrivatizationResult | Any,
    validation: Mapping[str, Any],
    metrics: Mapping[str, Any] | None = None,
    scores: Mapping[str, Any] | None = None,
    embed: Mapping[str, Any] | None = None,
    input_fingerprint: str | None = None,
) -> dict[str, Any]:
    """The manifest of a privatize run (validated; the store adds version, time, checksums).

    Only public quantities go in: the fingerprint of the PUBLIC inputs (never of private data),
    what the pipeline declares public, the mechanisms and their public parameters, the ledger, the
    caps, the validation results, the shareable metrics (computed from the stored version only),
    the public run facts (``stats``) and the stored graph's counts (``graph``). Left out on purpose: the noise seed, the dataset's ``split_seed`` (with the
    public dataset it tells exactly which edges are private), the data ``root`` and the directories
    of file options (local paths: only file names are kept),
    everything computed from raw data (the clean graph's accuracy, the MCMC trace, the keyed
    identity of the input) and the mechanisms' output summaries that the stored objects do not
    hold (``result.release``): those go to the owner's private record.

    Args:
        pipeline: the pipeline name.
        config: the pipeline's configuration.
        disclosure: the pipeline's declaration of what is public (:func:`~privgraph.config.disclosure.declare_public`).
        graph_in: the input graph (only its PUBLIC part is fingerprinted), or None with
            ``input_fingerprint`` (a graph that was never in this process: computed by a task).
        result: the privatization result (the released graph, the ledger, stats and release), or
            a :class:`~privgraph.privatize.partitioned_release.PartitionedGraphRelease` (its
            ``graph_summary`` holds the released graph's counts).
        input_fingerprint: :meth:`~privgraph.config.disclosure.Disclosure.fingerprint`'s value,
            when ``graph_in`` is None.
        validation: the validation report (``ValidationReport.to_dict()``).
        metrics: the shareable evaluation metrics, if any (default: ``None``).
        scores: the provenance of FeatureRR's theta (public subset size and rule, surrogate,
            SHAP explainer, sensitivity settings; no seed, no node ids), if scores were used.
        embed: what produced an image graph's features (model, layer, the weights' SHA-256 or
            ``random_weights: true``, preprocessing): configuration and public weights only.
    """
    _check_manifest_inputs(graph_in, input_fingerprint, metrics)
    counts = dict(result.graph_summary) if hasattr(result, "graph_summary") else dict(result.graph.summary())
    dataset = config.dataset
    manifest: dict[str, Any] = {
        "pipeline": pipeline,
        "description": config.description,
        "dataset": _plain({"name": dataset.name, "rho": dataset.rho, "options": _portable_options(dataset.options)}),
        "public_input_fingerprint": input_fingerprint if graph_in is None else disclosure.fingerprint(graph_in),
        "public": disclosure.manifest_section(),
        "num_nodes": counts["num_nodes"],
        "graph": _plain(counts),
        "mechanisms": _plain(_mechanism_rows(result.ledger)),
        "ledger": result.ledger.to_dict(),
        "budget": _plain(dict(config.budget)),
        "privatized": sorted({e.scope.value for e in result.ledger.entries}),
        "stats": _plain(result.stats),
        "validation": _plain(dict(validation)),
        "metrics": None if metrics is None else _plain(dict(metrics)),
        "scores": None if scores is None else _plain(dict(scores)),
        "code_version": code_version(),
    }
    if embed is not None:
        manifest["embed"] = _plain(dict(embed))
    validate_manifest(manifest)
    return manifest
