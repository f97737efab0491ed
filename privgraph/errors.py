"""The exceptions privgraph raises for user-facing problems.

Every error a user can cause (bad input data, bad configuration, an exceeded budget, a broken
artifact) is a subclass of :class:`PrivgraphError`, so that the CLI can turn it into a one-line
message and an exit code instead of a traceback.
"""

from __future__ import annotations

__all__ = [
    "PrivgraphError",
    "GraphValidationError",
    "DatasetNotFoundError",
    "ConfigError",
    "BudgetExceededError",
    "ArtifactError",
    "ArtifactExistsError",
    "ArtifactIntegrityError",
    "ValidationFailedError",
]


class PrivgraphError(Exception):
    """Base class of every error privgraph raises for a user-caused problem."""

    exit_code: int = 2


class GraphValidationError(PrivgraphError, ValueError):
    """A graph's arrays are inconsistent (ids out of range, self-loops, duplicates, NaN, ...)."""


class DatasetNotFoundError(PrivgraphError, FileNotFoundError):
    """A dataset's files are absent and cannot be downloaded."""


class ConfigError(PrivgraphError, ValueError):
    """``pipelines.yaml`` (or a CLI option) is invalid; the message names the YAML path."""


class BudgetExceededError(PrivgraphError):
    """A privacy-budget cap of the :class:`~privgraph.accounting.BudgetPolicy` is exceeded."""

    exit_code = 3


class ArtifactError(PrivgraphError):
    """An artifact version is missing or cannot be read."""


class ArtifactExistsError(ArtifactError):
    """Refusing to overwrite an existing, immutable artifact version."""


class ArtifactIntegrityError(ArtifactError):
    """An artifact object's checksum does not match its manifest."""


class ValidationFailedError(PrivgraphError):
    """A validation checkpoint failed; the artifact was not published."""

    exit_code = 3
