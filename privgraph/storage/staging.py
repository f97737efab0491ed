"""The write side of an artifact store: staging, publishing and collecting versions.

Every backend (:class:`~privgraph.storage.base.ArtifactStore`) is written through this one
protocol, in two steps, which :func:`put_version` runs together:

1. :func:`stage_version`: validate the pipeline and object names, compute each object's sha256 and
   size, make the version id = UTC time ``YYYYMMDDTHHMMSSffffffZ`` + ``-`` + the first 12 hex
   digits of a sha256 over the pipeline name and the sorted object checksums, refuse if that
   version exists (:class:`~privgraph.errors.ArtifactExistsError`), and write the data objects,
   each with a put that refuses to overwrite. It returns a :class:`PendingVersion`: the version
   id is known, but the version does not exist for readers.
2. :meth:`PendingVersion.publish`: validate the manifest (no seeds, plain JSON, required keys),
   add ``format``, ``version``, ``created`` and ``objects`` (name -> sha256, size), and write
   ``manifest.json`` LAST. From that moment the version exists. :meth:`PendingVersion.abort`
   deletes the staged data objects of a version that was not published.

The id cannot cover the manifest, because a flow measures the staged version (e.g. trains on it)
before it writes the manifest that records the measurements; the owner's Ed25519 seal covers it
instead (``signing_key`` of :meth:`PendingVersion.publish`, :mod:`privgraph.storage.seal`): a
sealed manifest edited after it was written fails every read. :func:`put_version` validates the
manifest before it writes anything, so a manifest with a seed never leaves a trace.

:func:`gc_staged` deletes what killed runs left staged. The read side (listing, reading,
verifying) is :class:`~privgraph.storage.base.ArtifactStore`'s.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import hashlib
import json
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from privgraph.errors import ArtifactError, ArtifactExistsError
from privgraph.storage.base import MANIFEST_NAME, ArtifactStore
from privgraph.storage.manifest import MANIFEST_FORMAT, manifest_bytes, validate_manifest
from privgraph.storage.names import (ISO_FORMAT, VERSION_RE, VERSION_TIME_FORMAT, ArtifactNameError,
                                             canonical_json, check_name, check_version_id)
from privgraph.storage.seal import seal_manifest

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

__all__ = ["PendingVersion", "stage_version", "put_version", "gc_staged"]


@dataclasses.dataclass(frozen=True)
class PendingVersion:
    """A staged version: its data objects are written, its manifest is not (yet).

    Readers do not see it (except :meth:`ArtifactStore.load_graph` with ``staged=True``).
    :meth:`publish` writes the manifest and makes it a version; :meth:`abort` deletes the staged
    objects. Both consult the store, not in-memory state, so a copy (a retried task, a pickled
    argument) behaves the same as the original.
    """

    store: ArtifactStore
    pipeline: str
    version: str
    created: str  # ISO 8601, UTC: the staging time, also the time in the version id
    objects: Mapping[str, Mapping[str, Any]]  # name -> {"sha256": ..., "size": ...}

    def publish(self, manifest: Mapping[str, Any], *, signing_key: Ed25519PrivateKey | None = None) -> str:
        """Validate ``manifest``, write it last (sealed under ``signing_key`` when given), and
        return the version id.

        Idempotent: publishing the same manifest again (a retry after a lost reply) returns the
        version id; a different manifest for a published version raises ArtifactExistsError.
        """
        _check_manifest(self.pipeline, manifest)
        blob = _manifest_bytes(self, manifest, signing_key)
        key = self.store._key(self.pipeline, self.version, MANIFEST_NAME)
        try:
            self.store._put_new(key, blob)  # LAST: this makes the version visible
        except ArtifactExistsError:
            with contextlib.suppress(KeyError):
                if self.store._get(key) == blob:  # a retry of a publish whose reply was lost
                    return self.version
            raise ArtifactExistsError(
                f"version {self.version!r} of pipeline {self.pipeline!r} is published "
                f"already with another manifest; versions are immutable"
            ) from None
        return self.version

    def abort(self) -> None:
        """Delete the staged data objects; a no-op once the version is published (immutable)."""
        if self.published:
            return  # published versions are immutable: never delete their objects
        for name in sorted(self.objects, reverse=True):
            with contextlib.suppress(Exception):
                self.store._delete(self.store._key(self.pipeline, self.version, name))

    @property
    def published(self) -> bool:
        return self.store._exists(self.store._key(self.pipeline, self.version, MANIFEST_NAME))


def put_version(
    store: ArtifactStore, pipeline: str, objects: Mapping[str, bytes], manifest: Mapping[str, Any],
    *, signing_key: Ed25519PrivateKey | None = None,
) -> str:
    """Store a new, immutable version of ``pipeline`` in ``store``; return its version id.

    Args:
        store: the artifact store.
        pipeline: the pipeline name (also ``manifest["pipeline"]``).
        objects: data objects by name (e.g. from :func:`~privgraph.storage.graph_to_objects`).
        manifest: the caller's manifest (see :mod:`privgraph.storage.manifest`); the store adds
            ``format``, ``version``, ``created`` and ``objects``.
        signing_key: the owner's key; the manifest is sealed under it (tamper evidence).

    Raises:
        ArtifactNameError: a bad pipeline or object name; nothing is written.
        ArtifactError: a manifest with a seed, non-JSON content, missing keys, or another
            pipeline's name; nothing is written.
        ArtifactExistsError: the version exists already (it is never overwritten).
    """
    check_name(pipeline, "pipeline")
    _check_manifest(pipeline, manifest)
    pending = stage_version(store, pipeline, objects)
    try:
        return pending.publish(manifest, signing_key=signing_key)
    except BaseException:
        pending.abort()
        raise


def stage_version(
    store: ArtifactStore, pipeline: str, objects: Mapping[str, bytes], *, created: dt.datetime | None = None
) -> PendingVersion:
    """Write the data objects of a new version; it exists once its manifest is published.

    ``created`` (default: the store's now) fixes the staging time and so the version id (time +
    content hash): a retry of a failed staging passes the same time, gets the same id and resumes,
    keeping each object already written with exactly these bytes, so an interrupted staging never
    leaves a second, orphaned id behind.

    Raises:
        ArtifactNameError: a bad pipeline or object name; nothing is written.
        ArtifactExistsError: the version is published already, or one of its objects exists with
            other bytes.
    """
    check_name(pipeline, "pipeline")
    data = _check_objects(objects)
    checksums = {n: hashlib.sha256(b).hexdigest() for n, b in sorted(data.items())}
    if created is None:
        created = store._now()
    elif not isinstance(created, dt.datetime) or created.tzinfo is None:
        raise TypeError(f"created must be a timezone-aware datetime, got {created!r}")
    created = created.astimezone(dt.timezone.utc)
    version = check_version_id(store._make_version_id(created, pipeline, checksums))
    refuse_published(store, pipeline, version)
    written: list[str] = []
    try:
        for name in checksums:
            key = store._key(pipeline, version, name)
            put_resumable(store, key, data[name], checksums[name])
            written.append(key)
    except BaseException:
        for key in reversed(written):
            with contextlib.suppress(Exception):
                store._delete(key)
        raise
    return PendingVersion(
        store=store,
        pipeline=pipeline,
        version=version,
        created=created.strftime(ISO_FORMAT),
        objects={n: {"sha256": checksums[n], "size": len(data[n])} for n in checksums},
    )


#: the name of a parts area (:mod:`privgraph.storage.parts`) under its pipeline: never a version id
PARTS_AREA_RE = re.compile(r"^parts-(\d{8}T\d{12}Z)-[0-9a-f]{16}$")


def refuse_published(store: ArtifactStore, pipeline: str, version: str) -> None:
    """ArtifactExistsError if ``version`` is published already (versions are immutable)."""
    if store._exists(store._key(pipeline, version, MANIFEST_NAME)):
        raise ArtifactExistsError(
            f"version {version!r} of pipeline {pipeline!r} exists already; versions are immutable"
        )


def put_resumable(store: ArtifactStore, key: str, data: bytes, sha256: str) -> None:
    """Write ``data`` at ``key``; where an earlier attempt of the same write left it with these
    bytes (checksum ``sha256``), keep it: a retry resumes. Other bytes there: ArtifactExistsError."""
    try:
        store._put_new(key, data)
    except ArtifactExistsError:
        if hashlib.sha256(store._get(key)).hexdigest() != sha256:
            raise


def gc_staged(store: ArtifactStore, min_age: dt.timedelta, *, dry_run: bool = False) -> list[tuple[str, str]]:
    """Delete staged versions (data objects without a manifest: a killed run's leftovers) and the
    parts areas of releases never committed (:mod:`privgraph.storage.parts`), staged
    more than ``min_age`` ago, judged by the time in the version id. A run still staging is
    younger than any sensible ``min_age`` (e.g. a day); published versions are never touched.
    Returns the ``(pipeline, version)`` pairs removed (or, with ``dry_run``, that would be)."""
    if not isinstance(min_age, dt.timedelta) or min_age < dt.timedelta(0):
        raise ValueError(f"min_age must be a non-negative timedelta, got {min_age!r}")
    cutoff = store._now().astimezone(dt.timezone.utc) - min_age
    removed = []
    for p in store._pipelines():
        for v in store._list_prefixes(f"{p}/"):
            area = PARTS_AREA_RE.match(v)  # a parts area (privgraph.storage.parts) never committed
            if area is None and (not VERSION_RE.match(v) or store._exists(store._key(p, v, MANIFEST_NAME))):
                continue
            stamp = area.group(1) if area else v.split("-", 1)[0]
            staged = dt.datetime.strptime(stamp, VERSION_TIME_FORMAT).replace(tzinfo=dt.timezone.utc)
            if staged > cutoff:
                continue
            if not dry_run:
                store._remove_staged(p, v)
            removed.append((p, v))
    return removed


def _check_objects(objects: Mapping[str, bytes]) -> dict[str, bytes]:
    if not isinstance(objects, Mapping):
        raise TypeError(f"objects must be a mapping name -> bytes, got {type(objects).__name__}")
    data: dict[str, bytes] = {}
    for name, blob in objects.items():
        check_name(name, "object")
        if name == MANIFEST_NAME:
            raise ArtifactNameError(f"object name {MANIFEST_NAME!r} is reserved for the manifest")
        if not isinstance(blob, (bytes, bytearray, memoryview)):
            raise TypeError(f"object {name!r} must be bytes, got {type(blob).__name__}")
        data[name] = bytes(blob)
    return data


def _check_manifest(pipeline: str, manifest: Mapping[str, Any]) -> None:
    validate_manifest(manifest)
    if manifest["pipeline"] != pipeline:
        raise ArtifactError(
            f"manifest names pipeline {manifest['pipeline']!r} but the version is stored under {pipeline!r}"
        )


def _manifest_bytes(
    pending: PendingVersion, manifest: Mapping[str, Any], signing_key: Ed25519PrivateKey | None
) -> bytes:
    full = json.loads(canonical_json(manifest))  # a plain-JSON deep copy
    full.update(
        format=MANIFEST_FORMAT,
        version=pending.version,
        created=pending.created,
        objects={n: dict(o) for n, o in sorted(pending.objects.items())},
    )
    if signing_key is not None:
        full = seal_manifest(full, signing_key)  # Ed25519 is deterministic: a retry writes the same bytes
    return manifest_bytes(full)
