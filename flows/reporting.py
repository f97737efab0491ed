"""Prefect artifacts of a run: shareable ones and the data owner's private evaluation.

Keys and kinds are :mod:`tasks.artifacts`' (``SHAREABLE``: the ledger and validation, the metrics
of the stored version, which depend on private data only through the ledger's mechanisms). Every
other artifact of a flow is titled and described as PRIVATE EVALUATION (computed from raw data,
covered by no guarantee) and keyed ``<name>-private-...``; the non-interference test compares
every shareable artifact byte for byte on neighbouring inputs.

The flow runs tell the story in the UI: named ``<pipeline>/<version>`` (``<pipeline>``
until the version is staged), ``<pipeline>/<version>/evaluate``, ``compare/<name>``, and tagged
``privgraph``, ``pipeline:<name>``, ``mechanism:<registry name>``, ``scope:<scope>``
(:func:`label_flow_run`).
"""

from __future__ import annotations

import base64
from collections.abc import Iterable
from typing import Any

from prefect import get_run_logger
from prefect.artifacts import create_markdown_artifact
from prefect.client.orchestration import get_client
from prefect.context import FlowRunContext

from privgraph.config.pipeline import ComparisonConfig, PipelineConfig, mechanism_entry
from privgraph.publish.run_report import ledger_markdown, metrics_markdown, private_evaluation_markdown
from tasks.artifacts import PRIVATE_PREFIX, artifact_key

_PRIVATE_TITLE = "PRIVATE EVALUATION (raw data, covered by no guarantee; do not share)"


# -- what the UI shows of a run: names and tags -------------------------------------------------------
def pipeline_tags(pipeline: str, config: PipelineConfig) -> list[str]:
    """``privgraph``, ``pipeline:<name>``, ``mechanism:<registry name>`` and ``scope:<scope>`` for
    each configured mechanism (configuration only)."""
    scopes = [s for s in ("features", "edges", "labels") if getattr(config, s) is not None]
    mechanisms = [getattr(config, s).mechanism for s in scopes]
    return _unique(["privgraph", f"pipeline:{pipeline}", *(f"mechanism:{m}" for m in mechanisms),
                    *(f"scope:{s}" for s in scopes)])


def comparison_tags(name: str, config: ComparisonConfig) -> list[str]:
    """``privgraph``, ``comparison:<name>``, ``pipeline:<its pipeline>``, ``mechanism:<registry
    name>`` per compared mechanism and ``scope:<scope>``."""
    mechanisms = [mechanism_entry(label, params)[0] for label, params in config.mechanisms.items()]
    return _unique(["privgraph", f"comparison:{name}", f"pipeline:{config.pipeline}",
                    *(f"mechanism:{m}" for m in mechanisms), f"scope:{config.scope}"])


def _unique(items: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(items))


def label_flow_run(name: str | None = None, tags: Iterable[str] = ()) -> None:
    """Rename the current flow run and add ``tags`` to it (kept with the tags it has, e.g. a
    deployment's). Cosmetic: a failed update is logged as a warning and the run goes on."""
    ctx = FlowRunContext.get()
    run = None if ctx is None else ctx.flow_run
    if run is None:
        return
    merged = _unique([*(run.tags or []), *tags])
    try:
        with get_client(sync_client=True) as client:
            client.update_flow_run(run.id, name=name, tags=merged if tags else None)
    except Exception as exc:  # noqa: BLE001 - the API's error types vary; a label never fails a run
        get_run_logger().warning("could not %s the flow run: %s: %s", "rename" if name else "tag",
                                 type(exc).__name__, exc)
        return
    if name is not None:
        run.name = name
    run.tags = merged


def publish_ledger(pipeline: str, version: str | None, ledger: dict[str, Any], validation: dict[str, Any] | None) -> None:
    """The privacy ledger and the validation (as in the manifest): shareable."""
    create_markdown_artifact(
        key=artifact_key(pipeline, "ledger"),
        markdown=ledger_markdown(pipeline, version, ledger, validation),
        description=f"privacy ledger of {pipeline} {version or '(not published)'}",
    )


def publish_metrics(pipeline: str, version: str, metrics: dict[str, Any]) -> None:
    """The shareable metrics: computed from the stored version only."""
    create_markdown_artifact(
        key=artifact_key(pipeline, "metrics"),
        markdown=metrics_markdown(pipeline, version, metrics),
        description=f"utility of {pipeline} {version} (from the stored version only)",
    )


def publish_private_evaluation(pipeline: str, version: str, owner_only: dict[str, Any]) -> None:
    """The owner's evaluation on raw data (the clean graph's accuracy, ...), titled as private."""
    create_markdown_artifact(
        key=artifact_key(pipeline, PRIVATE_PREFIX + "evaluation"),
        markdown=f"# {_PRIVATE_TITLE}\n\n" + private_evaluation_markdown(pipeline, version, owner_only),
        description=f"{_PRIVATE_TITLE}: {pipeline} {version}",
    )


def publish_structure_plot(pipeline: str, version: str, png: bytes) -> None:
    """The graph-utility report of a version as a plot (degree distributions, errors per
    statistic), inlined as a data URI: computed on raw data, titled as private."""
    create_markdown_artifact(
        key=artifact_key(pipeline, PRIVATE_PREFIX + "structure"),
        markdown=f"# {_PRIVATE_TITLE}\n\n![structure of {pipeline} {version} against the raw graph]"
                 f"(data:image/png;base64,{base64.b64encode(png).decode()})\n",
        description=f"{_PRIVATE_TITLE}: structure of {pipeline} {version}'s edges against the raw graph",
    )


def publish_comparison(
    name: str, report: str, table_md: str, plot_png: bytes, degrees_png: bytes | None = None
) -> None:
    """A comparison's table and plots (inlined as data URIs): a private report on raw data."""
    create_markdown_artifact(
        key=artifact_key(name, PRIVATE_PREFIX + "table"),
        markdown=f"# {_PRIVATE_TITLE}\n\n" + table_md + f"\nStored as the private report `{report}`.\n",
        description=f"{_PRIVATE_TITLE}: utility comparison {name}",
    )
    data = base64.b64encode(plot_png).decode()
    create_markdown_artifact(
        key=artifact_key(name, PRIVATE_PREFIX + "plot"),
        markdown=f"# {_PRIVATE_TITLE}\n\n![privacy-utility plot of {name}](data:image/png;base64,{data})\n",
        description=f"{_PRIVATE_TITLE}: privacy-utility plot of {name}",
    )
    if degrees_png is not None:
        create_markdown_artifact(
            key=artifact_key(name, PRIVATE_PREFIX + "degrees"),
            markdown=f"# {_PRIVATE_TITLE}\n\n![degree preservation of {name}](data:image/png;base64,"
                     f"{base64.b64encode(degrees_png).decode()})\n",
            description=f"{_PRIVATE_TITLE}: original vs released private degree, {name}",
        )
