"""The names a store accepts and how a version is named: pipeline and object names (one safe path
component and one safe S3 key component, :func:`check_name`), the version id
``YYYYMMDDTHHMMSSffffffZ-<12 hex>`` (:func:`version_id`: the UTC staging time and the first 12 hex
digits of :func:`content_digest`, checked by :func:`check_version_id`) and the ``created`` time of a
manifest (:data:`ISO_FORMAT`). The store's read side (:mod:`privgraph.storage.base`) and its
write protocols (:mod:`~privgraph.storage.staging`, :mod:`~privgraph.storage.parts`)
share them.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import re
from collections.abc import Mapping
from typing import Any

from privgraph.errors import ArtifactError

__all__ = [
    "ISO_FORMAT", "NAME_RE", "VERSION_RE", "VERSION_TIME_FORMAT", "ArtifactNameError", "canonical_json",
    "check_name", "check_version_id", "content_digest", "content_hash", "version_id",
]

#: a pipeline or object name (and at most :data:`_NAME_MAX` characters, no ``..``: :func:`check_name`)
NAME_RE = re.compile(r"^[a-z0-9][a-z0-9._-]*$")
_NAME_MAX = 128
#: a version id: the staging time in :data:`VERSION_TIME_FORMAT`, ``-``, 12 hex digits of the content digest
VERSION_RE = re.compile(r"^\d{8}T\d{12}Z-[0-9a-f]{12}$")
VERSION_TIME_FORMAT = "%Y%m%dT%H%M%S%fZ"
#: a manifest's ``created`` (UTC)
ISO_FORMAT = "%Y-%m-%dT%H:%M:%S.%fZ"
_HASH_LEN = 12


class ArtifactNameError(ArtifactError, ValueError):
    """A pipeline, object or version name that a store does not accept."""


def check_name(name: Any, what: str) -> str:
    """Validate a pipeline or object name: lowercase letters, digits, ``-``, ``_``, ``.``.

    It must start with a letter or digit, be at most 128 characters, and hold no ``/`` and no
    ``..``, so that it is one safe path component and one safe S3 key component.
    """
    if not isinstance(name, str):
        raise ArtifactNameError(f"{what} name must be a str, got {type(name).__name__} {name!r}")
    if not NAME_RE.match(name) or ".." in name or len(name) > _NAME_MAX:
        raise ArtifactNameError(
            f"invalid {what} name {name!r}: use lowercase letters, digits, '-', '_' and '.', "
            f"starting with a letter or digit, no '/' and no '..', at most {_NAME_MAX} characters"
        )
    return name


def check_version_id(version: Any) -> str:
    """Validate a version id (``YYYYMMDDTHHMMSSffffffZ-<12 hex>``)."""
    if not isinstance(version, str) or not VERSION_RE.match(version):
        raise ArtifactNameError(
            f"{version!r} is not a privgraph version id (expected YYYYMMDDTHHMMSSffffffZ-<12 hex>, "
            f"e.g. 20240131T120000123456Z-0123456789ab)"
        )
    return version


def canonical_json(obj: Any) -> bytes:
    """``obj`` as compact, key-sorted UTF-8 JSON (no NaN): the bytes that digests are taken over."""
    return json.dumps(
        obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    ).encode("utf-8")


def content_digest(pipeline: str, checksums: Mapping[str, str]) -> str:
    """sha256 (hex) over the pipeline name and the sorted ``name -> sha256`` of the objects."""
    payload = {"pipeline": pipeline, "objects": dict(sorted(checksums.items()))}
    return hashlib.sha256(canonical_json(payload)).hexdigest()


def content_hash(pipeline: str, checksums: Mapping[str, str]) -> str:
    """The version id's last part: the first 12 hex digits of :func:`content_digest`."""
    return content_digest(pipeline, checksums)[:_HASH_LEN]


def version_id(created: dt.datetime, pipeline: str, checksums: Mapping[str, str]) -> str:
    """The id of a version of ``pipeline`` staged at ``created`` (UTC) holding objects of ``checksums``."""
    return created.strftime(VERSION_TIME_FORMAT) + "-" + content_hash(pipeline, checksums)
