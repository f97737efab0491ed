"""Prefect artifacts of a run: shareable ones and the data owner's private evaluation.

``SHAREABLE`` lists the artifact kinds whose content depends on private data only through the
ledger's mechanisms (the ledger and validation; the metrics of the stored version). Every other
artifact is titled and described as PRIVATE EVALUATION (computed from raw data, covered by no
guarantee) and keyed ``<name>-private-...``; the non-interference test compares every shareable
artifact byte for byte on neighbouring inputs.
"""

from __future__ import annotations

import base64
from typing import Any

from prefect.artifacts import create_markdown_artifact

from privgraph.report import ledger_markdown, metrics_markdown, private_evaluation_markdown

#: the artifact kinds that may be shared (keys ``<pipeline>-<kind>``)
SHAREABLE = ("ledger", "metrics")
#: the prefix of every private artifact's kind (keys ``<name>-private-<what>``)
PRIVATE_PREFIX = "private-"
_PRIVATE_TITLE = "PRIVATE EVALUATION (raw data, covered by no guarantee; do not share)"


def artifact_key(name: str, kind: str) -> str:
    """``<name>-<kind>``: lowercase letters, digits and dashes; the same key across runs is a lineage."""
    return f"{name}-{kind}".lower().replace("_", "-")


def is_shareable(key: str, name: str) -> bool:
    """Whether the artifact ``key`` of pipeline (or comparison) ``name`` is a shareable one."""
    return any(key == artifact_key(name, k) for k in SHAREABLE)


def publish_ledger(pipeline: str, version: str | None, ledger: dict[str, Any], validation: dict[str, Any]) -> None:
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
