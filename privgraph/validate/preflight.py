"""What a run checks before it reads any data: the budget, the store, the private records, the input files.

A run that would fail on its last step (the store refuses the version, the owner's private record
cannot be written) must fail before it reads the graph, so that nothing is spent, staged or half
written. :func:`check_before_reading` is called by the CLI before it starts Prefect, or by
the privatize flow when it starts without it (a served deployment; the CLI hands the flow its
loaded, checked configuration: :func:`preflight`, :func:`take_checked`), in this order: the budget caps against the
guarantees of the configured mechanisms (exit code 3), the artifact store (its URI,
then that a version could be written: a probe file created and removed, or S3 ``HeadBucket``),
the private records directory (created mode 0700, a probe file, the owner's key), then the files
the dataset options name. Each failure is one error naming what is wrong and where, with the
documented exit code (2 misconfiguration, 4 the store does not answer).
"""

from __future__ import annotations

import dataclasses
import os
import socket
import tempfile
from pathlib import Path

from privgraph.guarantee.budget import BudgetPolicy
from privgraph.guarantee.ledger import LedgerEntry, PrivacyLedger
from privgraph.config.loader import load_config
from privgraph.config.pipeline import PipelineConfig, PipelinesConfig
from privgraph.errors import ClusterError, ConfigError, DatasetNotFoundError, ValidationFailedError
from privgraph.ingest.datasets import SPLIT_FILE_OPTION, data_root, partitioned_path
from privgraph.ingest.datasets.generic import check_generic_files
from privgraph.ingest.partitioned_graph import open_partitioned_graph
from privgraph.mechanisms import build_mechanism
from privgraph.storage import ArtifactStore, open_store
from privgraph.guarantee.private_files import mkdir_private
from privgraph.guarantee.redaction import redact_uri
from privgraph.storage.private_record import owner_key, owner_signing_key
from privgraph.validate import budget_failures

__all__ = ["STORE_ENV", "CheckedRun", "check_before_reading", "check_budget", "check_private_records", "planned_ledger",
           "preflight", "resolve_store", "take_checked"]

#: the environment variable naming the artifact store of every run of this process
STORE_ENV = "PRIVGRAPH_STORE"


def resolve_store(cfg: PipelineConfig, store: str | None = None) -> str:
    """The store URI of a run: ``store`` (``--store``), else ``$PRIVGRAPH_STORE``, else the
    pipeline's ``storage``."""
    return store or os.environ.get(STORE_ENV) or cfg.storage


def check_private_records(directory: str | os.PathLike[str]) -> None:
    """The owner's private records can be written in ``directory`` (created mode 0700), and the
    owner's HMAC key and manifest-signing key exist (created if absent) and are readable. Nothing
    else is left behind.

    Raises:
        ConfigError: naming ``private_records`` and the directory (exit code 2).
    """
    d = Path(directory).expanduser()
    try:
        mkdir_private(d)
        fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=d)
        try:  # one byte, synced: an empty file needs no free block, a full disk shows only on data
            os.write(fd, b"\0")
            os.fsync(fd)
        finally:
            os.close(fd)
            os.unlink(tmp)
        owner_key(d)
        owner_signing_key(d)
    except (OSError, ValueError) as exc:
        why = (exc.strerror if isinstance(exc, OSError) else None) or str(exc)
        raise ConfigError(f"private_records {d}: cannot write the owner's private records here ({why})") from None


def _check_dataset_files(cfg: PipelineConfig) -> None:
    """The files a ``generic`` dataset names exist and their headers fit (column names, ``.npy``
    shape and dtype, row counts: :func:`~privgraph.ingest.datasets.generic.check_generic_files`, no data
    read), an ``images`` dataset's directory with its ``nodes.csv`` and ``edges.csv``, a
    ``partitioned`` dataset's ``graph.json`` and any dataset's split file exist; other loaders
    check their own."""
    ds = cfg.dataset
    root = Path(ds.root).expanduser() if ds.root else data_root()
    split = ds.options.get(SPLIT_FILE_OPTION)
    if split is not None and not (root / Path(str(split)).expanduser()).is_file():
        raise DatasetNotFoundError(f"dataset.options.split: file not found: {root / Path(str(split)).expanduser()}")
    if ds.name == "partitioned" and ds.options.get("path") is not None:
        open_partitioned_graph(partitioned_path(root, ds.options["path"]))  # graph.json only
    if ds.name not in ("generic", "images"):
        return
    if ds.name == "images":
        value = ds.options.get("path")
        if value is not None:
            for name in ("nodes.csv", "edges.csv"):
                path = root / Path(str(value)).expanduser() / name
                if not path.is_file():
                    raise DatasetNotFoundError(f"dataset.options.path: file not found: {path}")
        return
    paths: dict[str, Path] = {}
    for opt in ("edges", "features", "labels"):
        value = ds.options.get(opt)
        if value is None:
            continue
        path = root / Path(str(value)).expanduser()
        if not path.is_file():
            raise DatasetNotFoundError(f"dataset.options.{opt}: file not found: {path}")
        paths[opt] = path
    if "edges" in paths:  # what the files' headers show, before Prefect starts (the data is read later)
        num_nodes = ds.options.get("num_nodes")
        check_generic_files(paths["edges"], features=paths.get("features"), labels=paths.get("labels"),
                            num_nodes=num_nodes if isinstance(num_nodes, int) and not isinstance(num_nodes, bool) else None,
                            private_column=ds.options.get("private_column"))


def _check_embed_weights(cfg: PipelineConfig) -> None:
    """An image pipeline's ResNet-50 weights file exists (``weights: random`` needs none)."""
    if cfg.embed is None:
        return
    from privgraph.ingest.embed.backbone import weights_file  # lazy: torch, only for an image pipeline
    from privgraph.ingest.embed.stage import resolve_weights  # lazy: torch, as above

    weights_file(resolve_weights(cfg.embed.weights, Path(cfg.dataset.root).expanduser() if cfg.dataset.root else data_root()))


def planned_ledger(cfg: PipelineConfig) -> PrivacyLedger:
    """The ledger entries the configured mechanisms will record, read from the configuration alone
    (each guarantee is a function of the mechanism's parameters, not of the data): what
    :func:`privgraph.privatize.release.privatize_graph` records, less the scores' label charge, which
    depends on which labels the scoring subset holds."""
    ledger = PrivacyLedger()
    for scope in ("features", "edges", "labels"):
        section = getattr(cfg, scope)
        if section is None:
            continue
        mech = build_mechanism(section.mechanism, section.params())
        ledger.record(LedgerEntry(stage=f"privatize.{scope}", mechanism=mech.name, guarantee=mech.guarantee,
                                  partitions=(0,), params=mech.params()))
    return ledger


def check_budget(cfg: PipelineConfig) -> None:
    """The configured mechanisms pass the checkpoint's budget suite (every spending scope capped,
    spent <= cap, delta under its delta cap), checked before any data is read; the checkpoint
    checks the ledger the run really records again, the scores' charge included.

    Raises:
        ValidationFailedError: in the checkpoint's words (exit code 3); nothing is read, spent or written.
    """
    failures = budget_failures(planned_ledger(cfg), BudgetPolicy(cfg.budget, cfg.budget_delta))
    if failures:
        raise ValidationFailedError(
            "validation checkpoint failed before reading any data (the configured mechanisms): " + "; ".join(failures)
        )


def check_before_reading(cfg: PipelineConfig, store: str | None = None, *, evaluate: bool = False) -> ArtifactStore:
    """Check the budget caps, the store, the private records, the dataset's files and, with
    ``evaluate`` on the path at scale, the evaluation's options; return the opened store.

    Raises:
        ValidationFailedError: the configured mechanisms exceed the budget caps (exit code 3).
        ConfigError, ArtifactError, DatasetNotFoundError: misconfiguration (exit code 2).
        StoreUnavailableError: the store does not answer or its disk is full (exit code 4).
        ClusterError: ``dask.address`` names a scheduler that does not answer (exit code 4).
    """
    check_budget(cfg)
    if evaluate and cfg.runs_at_scale:
        cfg.evaluate.check_at_scale()
    uri = resolve_store(cfg, store)
    try:
        opened = open_store(uri)
    except TypeError as exc:
        raise ConfigError(f"storage {redact_uri(uri)!r}: {exc}") from None
    opened.check_writable()
    check_private_records(cfg.private_records)
    _check_dask_scheduler(cfg)
    _check_dataset_files(cfg)
    _check_embed_weights(cfg)
    return opened


def _check_dask_scheduler(cfg: PipelineConfig, timeout: float = 5.0) -> None:
    """``dask.address`` (with the Dask executor) accepts a TCP connection: an unreachable
    scheduler is refused here, before any data is read, not after it (exit code 4)."""
    if cfg.executor != "dask" or cfg.dask.address is None:
        return
    hostport = cfg.dask.address.strip().split("://", 1)[-1]
    host, _, port = hostport.rpartition(":")
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=timeout).close()
    except OSError as exc:
        raise ClusterError(f"dask.address {cfg.dask.address}: no Dask scheduler answers there "
                           f"({exc.strerror or type(exc).__name__})") from None


@dataclasses.dataclass(frozen=True)
class CheckedRun:
    """A ``pipelines.yaml`` loaded and checked before any data is read (:func:`preflight`), and the
    resolved store URI: what the CLI hands to the flow so that both run on ONE load and ONE check."""

    config: PipelinesConfig
    store: str


_CHECKED: dict[tuple[str, str, str, bool], CheckedRun] = {}


def preflight(config_path: str | os.PathLike[str], pipeline: str, store: str | None = None, *,
              evaluate: bool) -> CheckedRun:
    """Load ``config_path``, resolve the store and :func:`check_before_reading` pipeline ``pipeline``;
    the result is kept for the privatize flow of this process started with the same arguments
    (``config_path``, ``pipeline``, the RESOLVED store, ``evaluate``), which takes it once
    (:func:`take_checked`) instead of loading and checking again. Kept in this process only, never a
    flow parameter (the configuration holds the seed).

    Raises:
        what :func:`~privgraph.config.loader.load_config` and :func:`check_before_reading` raise.
    """
    cfgs = load_config(config_path)
    cfg = cfgs.get(pipeline)
    uri = resolve_store(cfg, store)
    check_before_reading(cfg, uri, evaluate=evaluate)
    checked = CheckedRun(cfgs, uri)
    _CHECKED[(os.fspath(config_path), pipeline, uri, bool(evaluate))] = checked
    return checked


def take_checked(config_path: str | os.PathLike[str], pipeline: str, store: str | None, evaluate: bool) -> CheckedRun | None:
    """The :func:`preflight` of these arguments, once (None: none was made in this process, e.g.
    a served deployment's run: the flow loads and checks itself)."""
    if store is None:
        return None
    return _CHECKED.pop((os.fspath(config_path), pipeline, store, bool(evaluate)), None)
