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


def publish_comparison(
    name: str, version: str, table_md: str, plot_png: bytes, degrees_png: bytes | None = None
) -> None:
    """The comparison table, and the plots inlined as data URIs, as markdown artifacts."""
    import base64

    create_markdown_artifact(
        key=_key(name, "table"), markdown=table_md + f"\nStored as version `{version}`.\n",
        description=f"utility comparison {name} {version}",
    )
    data = base64.b64encode(plot_png).decode()
    create_markdown_artifact(
        key=_key(name, "plot"), markdown=f"![privacy-utility plot of {name}](data:image/png;base64,{data})\n",
        description=f"privacy-utility plot of {name} {version}",
    )
    if degrees_png is not None:
        create_markdown_artifact(
            key=_key(name, "degrees"),
            markdown=f"![degree preservation of {name}](data:image/png;base64,{base64.b64encode(degrees_png).decode()})\n",
            description=f"original vs released private degree, {name} {version}",
        )
