"""The ``ingest`` command: the generic loader's files written as a partitioned graph (registered on
the app in :mod:`privgraph.cli`). Its output is a published channel: it prints the stages, the
node count, the range layout and the destination (public metadata of the format), never a
statistic of private data (no private edge count, no label counts). A refusal names the file,
row and column; the values it leaves out (a bad row's edge, label, id) go to the owner's record
``<--private-records>/ingest/refusals/<UTC time>.json`` (mode 0600), whose path the line gives.
Ctrl-C and SIGTERM remove everything it wrote (``interrupted``, exit 130 and 143); what a kill -9
leaves is claimed under ``--private-records`` for ``privgraph artifacts gc``
(:mod:`privgraph.ingest.ingest_claims`)."""

from __future__ import annotations

import time
from pathlib import Path

import typer
from rich.markup import escape

from privgraph.cli.console import err, out
from privgraph.cli.failures import exit_on_failure, sigterm_interrupts
from privgraph.cli.options import PRIVATE_RECORDS_HELP
from privgraph.errors import PrivgraphError, one_line
from privgraph.guarantee.redaction import redact_uri

#: the owner's refusal records of ``privgraph ingest``: ``<private records>/ingest/refusals/``
RECORD_NAME = "ingest"


def ingest(
    edges: Path = typer.Argument(..., help="edge list: .csv or .parquet with columns src, dst (and a private flag)"),
    destination: str = typer.Argument(..., help="a new directory for the partitioned graph (never overwritten; "
                                      "file:///path names one), or a URI such as s3://bucket/prefix under which no "
                                      "object exists yet (a probe object is written and deleted there first)"),
    features: Path | None = typer.Option(None, "--features", help="features: .npy (one row per node) or .parquet"),
    labels: Path | None = typer.Option(None, "--labels", help="labels: .npy, or .csv / .parquet (one column, or id,label)"),
    split: Path | None = typer.Option(None, "--split", help="node split: .json or .csv (train / val / test)"),
    num_nodes: int | None = typer.Option(None, "--num-nodes", help="node count, 1..2^31-1 (default: from the features, labels or ids)"),
    private_column: str | None = typer.Option(None, "--private-column", help="the edge list's private flag column (default: private, if present)"),
    range_size: int | None = typer.Option(None, "--range-size", help="nodes per range (default: 100000; at most 100000 ranges)"),
    rho: float | None = typer.Option(None, "--rho", help="mark round(rho * m) of the m edges private (dataset.rho's "
                                     "rule; for an edge list without a private column)"),
    split_seed: int = typer.Option(0, "--split-seed", help="seed of --rho (dataset.split_seed; never written)"),
    train: float | None = typer.Option(None, "--train", help="a seeded random node split: the training fraction "
                                       "of the labelled nodes (options.train)"),
    val: float | None = typer.Option(None, "--val", help="the validation fraction (options.val)"),
    node_split_seed: int = typer.Option(0, "--node-split-seed", help="seed of --train/--val "
                                        "(dataset.node_split_seed; never written)"),
    drop_cut_edges: bool = typer.Option(False, "--drop-cut-edges", help="drop the edges between split parts "
                                        "(options.drop_cut_edges)"),
    private_records: str = typer.Option("./private-records", "--private-records", help=PRIVATE_RECORDS_HELP
                                        + "; a refusal's values go to its ingest/refusals/, and the ingest is "
                                        "claimed there while it runs, so that `privgraph artifacts gc` finds what "
                                        "a kill -9 leaves"),
) -> None:
    """Write a graph larger than memory as a partitioned graph (privgraph-partitioned-graph/1):
    EDGES (and the features, labels and split) read in batches, checked as the generic loader
    checks them, written range by range into DESTINATION (docs/partitioned-input.md). The dataset
    options that the path at scale refuses in pipelines.yaml (rho, train/val, drop_cut_edges and
    their seeds) are applied here, by the in-memory loader's rules. A number outside the format's
    bounds is refused before anything is read (exit 2); a disk that fills is exit 4. Ctrl-C or
    SIGTERM removes what it wrote (exit 130 or 143)."""
    t0 = time.perf_counter()
    with exit_on_failure(), sigterm_interrupts():
        from privgraph.ingest.partitioned_graph import DEFAULT_RANGE_SIZE  # lazy: CLI start-up (pyarrow)
        from privgraph.ingest.partitioned_options import IngestOptions  # lazy: CLI start-up
        from privgraph.ingest.partitioned_writer import write_partitioned_graph  # lazy: CLI start-up

        try:
            graph = write_partitioned_graph(
                edges, features=features, labels=labels, split=split, num_nodes=num_nodes,
                private_column=private_column, destination=destination,
                range_size=DEFAULT_RANGE_SIZE if range_size is None else range_size,
                options=IngestOptions(rho=rho, split_seed=split_seed, train=train, val=val,
                                      node_split_seed=node_split_seed, drop_cut_edges=drop_cut_edges),
                progress=lambda line: err.print(escape(line), highlight=False), private_records=private_records,
            )
        except PrivgraphError as exc:
            raise _kept_for_the_owner(exc, private_records) from None
    out.print(f"[bold green]ingested[/] {graph.num_nodes} nodes in {graph.num_ranges} range(s) of up to "
              f"{graph.range_size} into {escape(redact_uri(graph.path).rstrip('/'))} ({time.perf_counter() - t0:.1f} s)", highlight=False)


def _kept_for_the_owner(exc: PrivgraphError, directory: str) -> PrivgraphError:
    """``exc`` once its private detail (the values its message leaves out) is in the owner's
    refusal record (:func:`~privgraph.storage.private_record.write_private_refusal`), as
    the same refusal whose one line also says where that record is (a path, not private)."""
    from privgraph.storage.private_record import write_private_refusal  # lazy: CLI start-up

    try:
        path = write_private_refusal(directory, RECORD_NAME, exc)
    except OSError as failed:
        path, note = None, f"; the owner's record of the values could not be written: {one_line(failed)}"
    else:
        note = "" if path is None else f"; the owner's private record: {path}"
    exc.private_detail = None
    return type(exc)(f"{exc}{note}") if note else exc
