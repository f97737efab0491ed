"""The ``ingest`` command: the generic loader's files written as a partitioned graph (registered on
the app in :mod:`privgraph.cli`). Its output is a published channel: it prints the stages, the
node count, the range layout and the destination (public metadata of the format), never a
statistic of private data (no private edge count, no label counts). Ctrl-C and SIGTERM remove
everything it wrote (``interrupted``, exit 130 and 143); what a kill -9 leaves is claimed under
``--private-records`` for ``privgraph artifacts gc`` (:mod:`privgraph.ingest.ingest_claims`)."""

from __future__ import annotations

import time
from pathlib import Path

import typer
from rich.markup import escape

from privgraph.cli.console import err, out
from privgraph.cli.failures import _errors, sigterm_interrupts


def ingest(
    edges: Path = typer.Argument(..., help="edge list: .csv or .parquet with columns src, dst (and a private flag)"),
    destination: str = typer.Argument(..., help="a new directory for the partitioned graph (never overwritten), "
                                      "or a URI such as s3://bucket/prefix under which no object exists yet"),
    features: Path | None = typer.Option(None, "--features", help="features: .npy (one row per node) or .parquet"),
    labels: Path | None = typer.Option(None, "--labels", help="labels: .npy, or .csv / .parquet (one column, or id,label)"),
    split: Path | None = typer.Option(None, "--split", help="node split: .json or .csv (train / val / test)"),
    num_nodes: int | None = typer.Option(None, "--num-nodes", help="node count (default: from the features, labels or ids)"),
    private_column: str | None = typer.Option(None, "--private-column", help="the edge list's private flag column (default: private, if present)"),
    range_size: int | None = typer.Option(None, "--range-size", help="nodes per range (default: 100000)"),
    private_records: str = typer.Option("./private-records", "--private-records",
                                        help="the owner's private-records directory: the ingest is claimed there while "
                                             "it runs, so that `privgraph artifacts gc` finds what a kill -9 leaves"),
) -> None:
    """Write a graph larger than memory as a partitioned graph (privgraph-partitioned-graph/1):
    EDGES (and the features, labels and split) read in batches, checked as the generic loader
    checks them, written range by range into DESTINATION (docs/partitioned-input.md). Ctrl-C or
    SIGTERM removes what it wrote (exit 130 or 143)."""
    t0 = time.perf_counter()
    with _errors(), sigterm_interrupts():
        from privgraph.ingest.partitioned_graph import DEFAULT_RANGE_SIZE, _named  # lazy: CLI start-up (pyarrow)
        from privgraph.ingest.partitioned_writer import write_partitioned_graph  # lazy: CLI start-up

        graph = write_partitioned_graph(
            edges, features=features, labels=labels, split=split, num_nodes=num_nodes,
            private_column=private_column, destination=destination,
            range_size=DEFAULT_RANGE_SIZE if range_size is None else range_size,
            progress=lambda line: err.print(escape(line), highlight=False), private_records=private_records,
        )
    out.print(f"[bold green]ingested[/] {graph.num_nodes} nodes in {graph.num_ranges} range(s) of up to "
              f"{graph.range_size} into {escape(_named(graph.path, '').rstrip('/'))} ({time.perf_counter() - t0:.1f} s)", highlight=False)
