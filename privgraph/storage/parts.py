"""Versions whose data objects workers write themselves: a parts area, committed by copying.

The write protocol of :mod:`privgraph.storage.staging` needs every object's checksum before it
writes the first one (the version id is the staging time and a hash over the checksums). A
partitioned release is written by its workers, each its own partition's objects, so the
checksums are known only at the end. Its objects therefore go first to a PARTS AREA,
``<pipeline>/parts-<time>-<16 hex>/<name>``, which no reader lists (it is not a version id):

1. :func:`open_parts_area` names the area (the time fixes the version id's time);
2. each worker calls :meth:`PartsArea.put` (the area pickles: an :class:`~privgraph.storage.s3.S3Store`
   makes its own client in the worker) and returns ``{"sha256", "size"}``, a few bytes;
3. :meth:`PartsArea.commit` computes the version id from those checksums and the client's own
   small objects, refuses an existing version, copies each part to its key in the version
   (:meth:`~privgraph.storage.base.ArtifactStore._copy_new`: a hard link on a local store, a
   server-side copy on S3; no part passes through the client), writes the small objects and
   empties the area. It returns a :class:`~privgraph.storage.staging.PendingVersion`, published
   like any other. A commit that fails removes what it copied and keeps the area: a retry (the
   stage task's) starts over.

:meth:`PartsArea.abort` deletes what the area holds;
:func:`~privgraph.storage.staging.gc_staged` removes areas that killed runs left. Readers verify
every object against the manifest as for any version, so a part changed between its worker's
checksum and the commit fails every read.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import hashlib
import secrets
from collections.abc import Mapping
from typing import Any

from privgraph.errors import ArtifactError
from privgraph.storage.base import MANIFEST_NAME, ArtifactStore
from privgraph.storage.names import (ISO_FORMAT, VERSION_TIME_FORMAT, ArtifactNameError, check_name,
                                             check_version_id)
from privgraph.storage.staging import PARTS_AREA_RE, PendingVersion, put_resumable, refuse_published

__all__ = ["PartsArea", "open_parts_area", "PARTS_AREA_RE"]


@dataclasses.dataclass(frozen=True)
class PartsArea:
    """Where the workers of one release write their objects before the commit (see the module)."""

    store: ArtifactStore
    pipeline: str
    area: str
    created: dt.datetime  # UTC: the staging time, and the time in the version id

    def _key(self, name: str) -> str:
        return f"{self.pipeline}/{self.area}/{name}"

    def put(self, name: str, data: bytes) -> dict[str, Any]:
        """Write one object of the release; returns its ``{"sha256", "size"}``. A retried task
        that finds its object written with the same bytes keeps it."""
        check_name(name, "object")
        if name == MANIFEST_NAME:
            raise ArtifactNameError(f"object name {MANIFEST_NAME!r} is reserved for the manifest")
        digest = hashlib.sha256(data).hexdigest()
        put_resumable(self.store, self._key(name), data, digest)
        return {"sha256": digest, "size": len(data)}

    def commit(self, parts: Mapping[str, Mapping[str, Any]], objects: Mapping[str, bytes]) -> PendingVersion:
        """The staged version of the area's ``parts`` (name -> the ``{"sha256", "size"}`` their
        :meth:`put` returned) and the client's small ``objects`` (name -> bytes).

        Raises:
            ArtifactError: a name in both, or a part the area lacks; nothing is copied.
            ArtifactExistsError: the version exists already.
        """
        data = {check_name(n, "object"): bytes(b) for n, b in objects.items()}
        both = sorted(set(parts) & set(data))
        if both:
            raise ArtifactError(f"objects {both} are both parts and client objects")
        checksums = {n: str(parts[n]["sha256"]) for n in parts}
        checksums.update({n: hashlib.sha256(b).hexdigest() for n, b in data.items()})
        sizes = {n: int(parts[n]["size"]) for n in parts} | {n: len(b) for n, b in data.items()}
        version = check_version_id(self.store._make_version_id(self.created, self.pipeline, checksums))
        refuse_published(self.store, self.pipeline, version)
        missing = [n for n in sorted(parts) if not self.store._exists(self._key(n))]
        if missing:
            raise ArtifactError(f"the parts area {self.pipeline}/{self.area} lacks {missing[:3]} "
                                f"({len(missing)} of {len(parts)} parts)")
        written: list[str] = []
        try:
            for name in sorted(parts):
                key = f"{self.pipeline}/{version}/{name}"
                self.store._copy_new(self._key(name), key)
                written.append(key)
            for name, blob in sorted(data.items()):
                key = f"{self.pipeline}/{version}/{name}"
                self.store._put_new(key, blob)
                written.append(key)
        except BaseException:  # nothing half-committed; the area is kept, so a retry starts over
            for key in reversed(written):
                with contextlib.suppress(Exception):
                    self.store._delete(key)
            raise
        self.abort()  # the area's objects are in the version now
        return PendingVersion(
            store=self.store, pipeline=self.pipeline, version=version,
            created=self.created.strftime(ISO_FORMAT),
            objects={n: {"sha256": checksums[n], "size": sizes[n]} for n in sorted(checksums)},
        )

    def abort(self) -> None:
        """Delete what the area holds (a release that is not committed leaves nothing)."""
        with contextlib.suppress(Exception):
            self.store._remove_staged(self.pipeline, self.area)


def open_parts_area(store: ArtifactStore, pipeline: str, created: dt.datetime | None = None) -> PartsArea:
    """A fresh parts area for one release of ``pipeline`` (nothing is written until a put).
    ``created`` (default: the store's now) becomes the time of the version id."""
    check_name(pipeline, "pipeline")
    if created is None:
        created = store._now()
    elif not isinstance(created, dt.datetime) or created.tzinfo is None:
        raise TypeError(f"created must be a timezone-aware datetime, got {created!r}")
    created = created.astimezone(dt.timezone.utc)
    area = f"parts-{created.strftime(VERSION_TIME_FORMAT)}-{secrets.token_hex(8)}"
    return PartsArea(store=store, pipeline=pipeline, area=area, created=created)
