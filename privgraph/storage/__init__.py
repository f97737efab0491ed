"""Artifact storage: immutable, versioned, checksummed artifacts of privatized graphs.

``open_store(uri)`` picks the backend: a path or ``file://`` URI gives a :class:`LocalStore`,
``s3://bucket/prefix`` an :class:`~privgraph.storage.s3.S3Store` (boto3; any S3-compatible
endpoint). Every backend is written by the one protocol of :mod:`privgraph.storage.staging`
(:func:`stage_version`, :func:`put_version`) and read by :class:`ArtifactStore`.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

from privgraph.errors import ConfigError
from privgraph.guarantee.redaction import redact_uri
from privgraph.storage.base import MANIFEST_NAME, ArtifactStore, VersionInfo
from privgraph.storage.graph_io import graph_to_objects, objects_to_graph
from privgraph.storage.local import LocalStore
from privgraph.storage.manifest import REQUIRED_KEYS, code_version, validate_manifest
from privgraph.storage.names import ArtifactNameError, check_name, check_version_id
from privgraph.storage.staging import PendingVersion, gc_staged, put_version, stage_version

__all__ = [
    "ArtifactStore",
    "ArtifactNameError",
    "LocalStore",
    "PendingVersion",
    "VersionInfo",
    "MANIFEST_NAME",
    "REQUIRED_KEYS",
    "check_name",
    "check_version_id",
    "code_version",
    "validate_manifest",
    "graph_to_objects",
    "objects_to_graph",
    "open_store",
    "stage_version",
    "put_version",
    "gc_staged",
]


def open_store(uri: str | os.PathLike[str], **options: Any) -> ArtifactStore:
    """The artifact store at ``uri``.

    Args:
        uri: a directory path, ``file:///abs/dir``, or ``s3://bucket[/prefix]``.
        **options: backend options, e.g. ``endpoint_url=`` for an S3-compatible server
            (MinIO) (default: none).

    Raises:
        ConfigError: an unsupported scheme or a malformed URI (a ``ValueError``; exit code 2), or
            credentials or a query string in the URI: the S3 store takes its credentials and
            endpoint from boto3's environment, never from the URI. Messages name the URI redacted
            (:func:`~privgraph.guarantee.redaction.redact_uri`).
    """
    if isinstance(uri, os.PathLike):
        if options:
            raise TypeError(f"LocalStore takes no options, got {sorted(options)}")
        return LocalStore(Path(uri))
    if not isinstance(uri, str) or not uri:
        raise TypeError(f"uri must be a non-empty str or a path, got {uri!r}")
    shown = redact_uri(uri)
    if shown != uri:
        raise ConfigError(
            f"store URI {shown}: holds credentials (user:secret@) or a query string, which the store never reads; "
            "remove them (boto3 takes credentials and endpoint from its environment: AWS_ACCESS_KEY_ID, "
            "AWS_SECRET_ACCESS_KEY, AWS_ENDPOINT_URL, AWS_PROFILE)"
        )
    parsed = urlparse(uri)
    scheme = parsed.scheme.lower()
    if scheme in ("", "file") or (len(scheme) == 1 and os.name == "nt"):  # C:\ on Windows
        if options:
            raise TypeError(f"LocalStore takes no options, got {sorted(options)}")
        if scheme == "file":
            if parsed.netloc not in ("", "localhost"):
                raise ConfigError(
                    f"file URI {shown!r} names host {parsed.netloc!r}; use file:///absolute/path"
                )
            return LocalStore(Path(unquote(parsed.path)))
        return LocalStore(Path(uri))
    if scheme == "s3":
        if not parsed.netloc:
            raise ConfigError(f"S3 URI {shown!r} lacks a bucket; use s3://bucket/prefix")
        try:
            from privgraph.storage.s3 import S3Store  # lazy: s3:// only; ImportError -> ConfigError
        except ImportError as err:
            raise ConfigError(f"{shown!r}: the S3 store needs boto3 ({err})") from None
        return S3Store(parsed.netloc, parsed.path.strip("/"), **options)
    raise ConfigError(
        f"unsupported artifact store URI {shown!r}: use a directory path, file:///path or "
        f"s3://bucket/prefix"
    )
