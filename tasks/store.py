"""Store: stage the private graph's objects, publish the manifest last."""

from __future__ import annotations

import datetime as dt
from typing import Any

from prefect import task
from prefect.cache_policies import NO_CACHE

from privgraph.errors import StoreFullError
from privgraph.graph import GraphData
from privgraph.publish.release_parts import commit_release_parts
from privgraph.storage import open_store
from privgraph.storage.parts import PartsArea
from privgraph.storage.staging import PendingVersion
from privgraph.storage.graph_io import graph_to_objects
from privgraph.storage.private_record import owner_signing_key
from privgraph.storage.staging import stage_version


def _transient(task: Any, task_run: Any, state: Any) -> bool:
    """Retry a store failure unless no retry can pass it (a full disk)."""
    return not isinstance(getattr(state, "data", None), StoreFullError)


@task(name="stage", cache_policy=NO_CACHE, persist_result=False, retries=3, retry_delay_seconds=[2, 5, 15],
      retry_condition_fn=_transient)
def stage(store_uri: str, pipeline: str, graph: GraphData | None, created: dt.datetime | None = None,
          parts_area: PartsArea | None = None, parts: dict[str, dict[str, Any]] | None = None,
          num_nodes: int | None = None) -> PendingVersion:
    """Write the data objects (invisible to readers until the manifest is published); or, where
    the partitions' tasks wrote them into ``parts_area`` (``parts``: their checksums), commit
    them as a partitioned version without reading them (``graph`` None, ``num_nodes`` given: a
    partitioned graph that was never in this process).

    The staging time is fixed once, before the first attempt, so a retry after a store outage
    resumes the same version id instead of leaving a half-staged one behind."""
    if parts_area is not None and parts is not None:
        return commit_release_parts(parts_area, parts, graph.num_nodes if graph is not None else int(num_nodes or 0))
    created = created or dt.datetime.now(dt.timezone.utc)
    return stage_version(open_store(store_uri), pipeline, graph_to_objects(graph), created=created)


@task(name="publish", cache_policy=NO_CACHE, persist_result=False, retries=3, retry_delay_seconds=[2, 5, 15],
      retry_condition_fn=_transient)
def publish(pending: PendingVersion, manifest: dict[str, Any], private_records: str) -> str:
    """Write manifest.json last, sealed under the owner's signing key (kept with the private
    records, never passed as a task parameter): from this moment the version exists."""
    return pending.publish(manifest, signing_key=owner_signing_key(private_records))
