"""Prefect artifact keys, which kinds may be shared, and the one artifact a task publishes itself.

Keys are ``<name>-<kind>`` (a pipeline's or comparison's name): ``SHAREABLE`` kinds depend on
private data only through the ledger's mechanisms; every ``<name>-private-...`` kind is the owner's
private evaluation; ``OPERATIONAL`` kinds hold nothing of the data (the Dask dashboard's link,
which :func:`publish_dask_dashboard` publishes from the executor a task opens). The flows'
artifacts are :mod:`flows.reporting`'s.
"""

from __future__ import annotations

from prefect.artifacts import create_link_artifact

__all__ = ["SHAREABLE", "PRIVATE_PREFIX", "OPERATIONAL", "artifact_key", "is_shareable", "is_operational",
           "publish_dask_dashboard"]

#: the artifact kinds that may be shared (keys ``<pipeline>-<kind>``)
SHAREABLE = ("ledger", "metrics")
#: the prefix of every private artifact's kind (keys ``<name>-private-<what>``)
PRIVATE_PREFIX = "private-"
#: the artifact kinds that hold nothing computed from data (a link to the Dask dashboard)
OPERATIONAL = ("dask-dashboard",)


def artifact_key(name: str, kind: str) -> str:
    """``<name>-<kind>``: lowercase letters, digits and dashes; the same key across runs is a lineage."""
    return f"{name}-{kind}".lower().replace("_", "-")


def is_shareable(key: str, name: str) -> bool:
    """Whether the artifact ``key`` of pipeline (or comparison) ``name`` is a shareable one."""
    return any(key == artifact_key(name, k) for k in SHAREABLE)


def is_operational(key: str, name: str) -> bool:
    """Whether ``key`` is an artifact of ``name`` that holds nothing of the data (a dashboard link)."""
    return any(key == artifact_key(name, k) for k in OPERATIONAL)


def publish_dask_dashboard(name: str, link: str, ready: bool = True) -> None:
    """The Dask dashboard of the run's cluster as a link artifact (``<name>-dask-dashboard``)."""
    create_link_artifact(
        key=artifact_key(name, "dask-dashboard"),
        link=link,
        link_text="Dask dashboard",
        description=f"Dask dashboard of the cluster running {name}"
                    + ("" if ready else " (its pages need bokeh installed where the scheduler runs)"),
    )
