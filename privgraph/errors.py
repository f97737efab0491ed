"""The exceptions privgraph raises for user-facing problems, and the exit codes they map to.

The exit codes are defined here, once; every command maps an exception to one of them:

====  ===================================================================================
0     success
2     bad input or configuration (a one-line message naming the problem and where it is)
3     a failed validation checkpoint (budget cap exceeded, invalid output): nothing published
4     the infrastructure failed after retries (artifact store, Prefect API, Dask cluster), or a
      disk filled (the store's, an ingest's temporary directory or destination): never retried
====  ===================================================================================

Every error a user can cause is a subclass of :class:`PrivgraphError`, so that the CLI turns it
into one line and its exit code instead of a traceback.
"""

from __future__ import annotations

__all__ = [
    "EXIT_OK",
    "EXIT_BAD_INPUT",
    "EXIT_CHECKPOINT",
    "EXIT_INFRASTRUCTURE",
    "EXIT_CODES",
    "PrivgraphError",
    "GraphValidationError",
    "DatasetNotFoundError",
    "ConfigError",
    "BudgetExceededError",
    "ArtifactError",
    "ArtifactExistsError",
    "ArtifactIntegrityError",
    "ArtifactTamperedError",
    "ValidationFailedError",
    "InfrastructureError",
    "StoreUnavailableError",
    "StoreFullError",
    "DiskFullError",
    "DestinationUnavailableError",
    "OrchestrationError",
    "ClusterError",
    "exit_code_for",
    "one_line",
    "data_refusal",
    "PRIVATE_VALUES_NOTE",
    "DETAIL_LIMIT",
]

EXIT_OK = 0
EXIT_BAD_INPUT = 2
EXIT_CHECKPOINT = 3
EXIT_INFRASTRUCTURE = 4

EXIT_CODES: dict[int, str] = {
    EXIT_OK: "success",
    EXIT_BAD_INPUT: "bad input or configuration",
    EXIT_CHECKPOINT: "a validation checkpoint failed; nothing was published",
    EXIT_INFRASTRUCTURE: "the infrastructure (artifact store, Prefect, Dask) failed after retries, or a disk filled",
}


class PrivgraphError(Exception):
    """Base class of every error privgraph raises for a user-caused problem.

    The message (``str(exc)``) reaches shareable channels (the CLI, ``run --ci``, the CI step
    summary, Prefect's logs and run states), so it holds no value computed from private data. A
    refusal that depends on private data puts what only the data owner may see (which node, its
    degree) in ``private_detail``: the flow writes it to the owner's private record
    (:func:`privgraph.storage.private_record.write_private_refusal`) and the message says so.
    """

    exit_code: int = EXIT_BAD_INPUT

    def __init__(self, *args: object, private_detail: dict[str, object] | None = None) -> None:
        super().__init__(*args)
        self.private_detail = private_detail


class GraphValidationError(PrivgraphError, ValueError):
    """A graph's arrays are inconsistent (ids out of range, self-loops, duplicates, NaN, ...)."""


class DatasetNotFoundError(PrivgraphError, FileNotFoundError):
    """A dataset's files are absent and cannot be downloaded."""


class ConfigError(PrivgraphError, ValueError):
    """``pipelines.yaml`` (or a CLI option) is invalid; the message names the YAML path."""


class BudgetExceededError(PrivgraphError):
    """A privacy-budget cap of the :class:`~privgraph.guarantee.budget.BudgetPolicy` is exceeded."""

    exit_code = EXIT_CHECKPOINT


class ArtifactError(PrivgraphError):
    """An artifact version is missing or cannot be read."""


class ArtifactExistsError(ArtifactError):
    """Refusing to overwrite an existing, immutable artifact version."""


class ArtifactIntegrityError(ArtifactError):
    """An artifact object's checksum does not match its manifest."""


class ArtifactTamperedError(ArtifactIntegrityError):
    """A stored manifest does not match its seal: it was edited after publishing."""


class ValidationFailedError(PrivgraphError):
    """A validation checkpoint failed; the artifact was not published."""

    exit_code = EXIT_CHECKPOINT


class InfrastructureError(PrivgraphError):
    """A service privgraph depends on failed after its retries; nothing half-done is visible."""

    exit_code = EXIT_INFRASTRUCTURE


class StoreUnavailableError(InfrastructureError):
    """The artifact store (a directory, S3/MinIO) could not be reached or written after retries."""


class StoreFullError(StoreUnavailableError):
    """The artifact store's disk or quota is full: not transient, so never retried; nothing is
    published and the staged objects are left for ``artifacts gc``."""


class DiskFullError(InfrastructureError):
    """A disk or quota outside the artifact store filled while privgraph wrote to it (``privgraph
    ingest``'s temporary directory or destination): not transient, so never retried; the message
    names the destination and which disk filled, and what was written is removed."""


class DestinationUnavailableError(InfrastructureError):
    """A destination URI's endpoint (``privgraph ingest``'s ``s3://...``) does not answer."""


class OrchestrationError(InfrastructureError):
    """The Prefect API could not be reached or failed after retries."""


class ClusterError(InfrastructureError):
    """The Dask cluster could not be reached or lost the work after retries."""


# -- refusing the user's data without quoting it ------------------------------------------------
#: what a refusal of the user's data says in place of the values it leaves out
PRIVATE_VALUES_NOTE = "the values: the owner's private record"
#: the most entries of one list that a refusal keeps in its private detail
DETAIL_LIMIT = 1000


def _detail_value(v: object) -> object:
    """``v`` as plain JSON-able data (numpy arrays and scalars through ``tolist``), a list capped at
    :data:`DETAIL_LIMIT` entries."""
    if hasattr(v, "tolist"):  # a numpy array (first rows only) or scalar
        v = (v[:DETAIL_LIMIT] if getattr(v, "ndim", 0) else v).tolist()  # type: ignore[index, union-attr]
    if isinstance(v, (list, tuple)):
        return [_detail_value(x) for x in v[:DETAIL_LIMIT]]
    return v


def data_refusal(message: str, **values: object) -> GraphValidationError:
    """The refusal of a value read from the user's input files (edge ends, ids, labels, features,
    cells), which may be private: nothing says at ingest time which rows are.

    ``message`` names the file, the row (line), the column and the rule broken, never a value
    (row numbers, column names and public sizes are fine); the refusal is ``message`` plus
    :data:`PRIVATE_VALUES_NOTE`, one line. ``values`` (the offending values, each list capped at
    :data:`DETAIL_LIMIT` entries) become the ``private_detail`` that the owner's refusal record keeps
    (:func:`privgraph.storage.private_record.private_refusals`).
    """
    detail = {k: _detail_value(v) for k, v in values.items()}
    return GraphValidationError(f"{message} ({PRIVATE_VALUES_NOTE})", private_detail=detail or None)


# -- mapping any exception to an exit code ------------------------------------------------------
# Third-party exceptions are recognised by module and class name so that this module imports
# neither boto3, httpx (Prefect's client) nor distributed.
_INFRA_NAMES = {
    ("botocore.exceptions", "EndpointConnectionError"),
    ("botocore.exceptions", "ConnectTimeoutError"),
    ("botocore.exceptions", "ReadTimeoutError"),
    ("botocore.exceptions", "ConnectionClosedError"),
    ("urllib3.exceptions", "ProtocolError"),
    ("httpx", "TransportError"),  # Prefect's API client: ConnectError, ReadTimeout, ...
    ("prefect.exceptions", "PrefectHTTPStatusError"),
    ("distributed.comm.core", "CommClosedError"),
    ("distributed.client", "FutureCancelledError"),
    ("distributed.scheduler", "KilledWorker"),
}
_BAD_INPUT_NAMES = {
    ("botocore.exceptions", "NoCredentialsError"),
    ("botocore.exceptions", "PartialCredentialsError"),
    ("botocore.exceptions", "ParamValidationError"),
}
_INFRA_ERRNOS = {28, 122, 5}  # ENOSPC, EDQUOT, EIO: the store's disk failed under the write


def exit_code_for(exc: BaseException) -> int | None:
    """The documented exit code of ``exc`` (2, 3 or 4), or None for an unexpected error (a bug).

    PrivgraphError subclasses carry theirs; a missing or unreadable input file is bad input (2);
    a full disk, a refused connection or a timeout of the store, the Prefect API or the Dask
    cluster is the infrastructure (4). The exception's cause chain is followed.
    """
    seen: set[int] = set()
    cur: BaseException | None = exc
    while cur is not None and id(cur) not in seen:
        seen.add(id(cur))
        code = _own_exit_code(cur)
        if code is not None:
            return code
        cur = cur.__cause__ or cur.__context__
    return None


def _own_exit_code(exc: BaseException) -> int | None:
    if isinstance(exc, PrivgraphError):
        return exc.exit_code
    names = {(c.__module__, c.__name__) for c in type(exc).__mro__}
    if names & _BAD_INPUT_NAMES:
        return EXIT_BAD_INPUT
    if names & _INFRA_NAMES or any(m.startswith("httpx") and n == "TransportError" for m, n in names):
        return EXIT_INFRASTRUCTURE
    if isinstance(exc, (ConnectionError, TimeoutError)):
        return EXIT_INFRASTRUCTURE
    if isinstance(exc, OSError) and exc.errno in _INFRA_ERRNOS:
        return EXIT_INFRASTRUCTURE
    if isinstance(exc, (FileNotFoundError, PermissionError, IsADirectoryError, NotADirectoryError)):
        return EXIT_BAD_INPUT
    if isinstance(exc, OSError) and exc.errno == 30:  # EROFS: a read-only store or records directory
        return EXIT_BAD_INPUT
    return None


def one_line(exc: BaseException) -> str:
    """``exc`` as one line of plain text (an OSError names its file)."""
    if isinstance(exc, OSError) and not isinstance(exc, PrivgraphError) and exc.strerror:
        where = f": {exc.filename}" if exc.filename else ""
        text = f"{exc.strerror}{where}"
    else:
        text = str(exc) or type(exc).__name__
    if exit_code_for(exc) == EXIT_INFRASTRUCTURE and not isinstance(exc, PrivgraphError):
        text = f"{type(exc).__name__}: {text}"
    return " ".join(text.split())
