"""Store: stage the private graph's objects, publish the manifest last."""

from __future__ import annotations

from typing import Any

from prefect import task
from prefect.cache_policies import NO_CACHE

from privgraph.graph import GraphData
from privgraph.storage import open_store
from privgraph.storage.base import PendingVersion
from privgraph.storage.graph_io import graph_to_objects


@task(name="stage", cache_policy=NO_CACHE, persist_result=False, retries=3, retry_delay_seconds=[2, 5, 15])
def stage(store_uri: str, pipeline: str, graph: GraphData) -> PendingVersion:
    """Write the data objects (invisible to readers until the manifest is published)."""
    return open_store(store_uri).stage_version(pipeline, graph_to_objects(graph))


@task(name="publish", cache_policy=NO_CACHE, persist_result=False, retries=3, retry_delay_seconds=[2, 5, 15])
def publish(pending: PendingVersion, manifest: dict[str, Any]) -> str:
    """Write manifest.json last: from this moment the version exists."""
    return pending.publish(manifest)
