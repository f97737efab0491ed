"""Publish the ledger and metrics as Prefect artifacts (markdown tables in the Prefect UI)."""

from __future__ import annotations

from typing import Any

from prefect.artifacts import create_markdown_artifact

from privgraph.report import ledger_markdown, metrics_markdown


def _key(pipeline: str, what: str) -> str:
    # artifact keys: lowercase letters, digits and dashes; same key across runs = a lineage
    return f"{pipeline}-{what}".lower().replace("_", "-")


def publish_ledger(pipeline: str, version: str | None, ledger: dict[str, Any], validation: dict[str, Any]) -> None:
    create_markdown_artifact(
        key=_key(pipeline, "ledger"),
        markdown=ledger_markdown(pipeline, version, ledger, validation),
        description=f"privacy ledger of {pipeline} {version or '(not published)'}",
    )


def publish_metrics(pipeline: str, version: str, metrics: dict[str, Any]) -> None:
    create_markdown_artifact(
        key=_key(pipeline, "metrics"),
        markdown=metrics_markdown(pipeline, version, metrics),
        description=f"utility of {pipeline} {version}",
    )
