"""The exceptions privgraph raises for user-facing problems, and the exit codes they map to.

The exit codes are defined here, once; every command maps an exception to one of them:

====  ===================================================================================
0     success
2     bad input or configuration (a one-line message naming the problem and where it is)
3     a failed validation checkpoint (budget cap exceeded, invalid output): nothing published
4     the infrastructure failed after retries (artifact store, Prefect API, Dask cluster)
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
    "OrchestrationError",
    "ClusterError",
]

EXIT_OK = 0
EXIT_BAD_INPUT = 2
EXIT_CHECKPOINT = 3
EXIT_INFRASTRUCTURE = 4

EXIT_CODES: dict[int, str] = {
    EXIT_OK: "success",
    EXIT_BAD_INPUT: "bad input or configuration",
    EXIT_CHECKPOINT: "a validation checkpoint failed; nothing was published",
    EXIT_INFRASTRUCTURE: "the infrastructure (artifact store, Prefect, Dask) failed after retries",
}


class PrivgraphError(Exception):
    """Base class of every error privgraph raises for a user-caused problem."""

    exit_code: int = EXIT_BAD_INPUT


class GraphValidationError(PrivgraphError, ValueError):
    """A graph's arrays are inconsistent (ids out of range, self-loops, duplicates, NaN, ...)."""


class DatasetNotFoundError(PrivgraphError, FileNotFoundError):
    """A dataset's files are absent and cannot be downloaded."""


class ConfigError(PrivgraphError, ValueError):
    """``pipelines.yaml`` (or a CLI option) is invalid; the message names the YAML path."""


class BudgetExceededError(PrivgraphError):
    """A privacy-budget cap of the :class:`~privgraph.accounting.BudgetPolicy` is exceeded."""

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


class OrchestrationError(InfrastructureError):
    """The Prefect API could not be reached or failed after retries."""


class ClusterError(InfrastructureError):
    """The Dask cluster could not be reached or lost the work after retries."""
