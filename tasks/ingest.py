"""Ingest: load the input graph and split its edges into public and private."""

from __future__ import annotations

from pathlib import Path

from prefect import task
from prefect.cache_policies import NO_CACHE

from privgraph.config.pipeline import DatasetConfig, GraphSetConfig
from privgraph.ingest.datasets import data_root, load_dataset, load_graph_set, partitioned_path
from privgraph.ingest.datasets.graph_set import GraphSet
from privgraph.graph import GraphData
from privgraph.ingest.option_support import SCALE, check_options_on_path
from privgraph.ingest.partitioned_graph import PartitionedGraph, open_partitioned_graph
from privgraph.storage.private_record import private_refusals


@task(name="ingest", cache_policy=NO_CACHE, persist_result=False)
def ingest(dataset: DatasetConfig, private_records: str, name: str) -> GraphData:
    """Load the configured dataset (raw graph: never cached, never persisted). A refusal's values
    (a bad row's edge, label, id) go to the owner's record under ``private_records`` for pipeline
    ``name``, before Prefect records the failed task: its state holds the one-line message only."""
    with private_refusals(private_records, name):
        return load_dataset(dataset.name, **dataset.load_kwargs())


@task(name="ingest", cache_policy=NO_CACHE, persist_result=False)
def ingest_partitioned(dataset: DatasetConfig) -> PartitionedGraph:
    """A partitioned dataset's metadata (``graph.json``): its ranges are read by the executor's
    tasks, never here."""
    check_options_on_path(SCALE, dataset.model_fields_set, dataset.options)  # refused at load; never ignored here
    root = Path(dataset.root).expanduser() if dataset.root else data_root()
    return open_partitioned_graph(partitioned_path(root, dataset.options["path"]))


@task(name="ingest-graph-set", cache_policy=NO_CACHE, persist_result=False)
def ingest_graph_set(dataset: GraphSetConfig, private_records: str, name: str) -> GraphSet:
    """Load the configured multi-graph dataset (raw graphs: never cached, never persisted); a
    refusal's values go to the owner's record, as :func:`ingest`'s."""
    root = None if dataset.root is None else Path(dataset.root)
    with private_refusals(private_records, name):
        return load_graph_set(dataset.name, root=root, private_fraction=dataset.private_fraction,
                              split_seed=dataset.split_seed, **dataset.options)
