"""ArtifactStore: immutable, versioned artifacts; the backends' primitives and the read side.

A version lives under ``<pipeline>/<version>/`` and holds named data objects plus
``manifest.json``; its id is the UTC staging time ``YYYYMMDDTHHMMSSffffffZ`` + ``-`` + the first 12
hex digits of a sha256 over the pipeline name and the sorted object checksums. Versions are
written by one protocol for every backend, :mod:`privgraph.storage.staging` (stage the data
objects, then publish the manifest LAST); this module reads them.

A version without ``manifest.json`` does not exist for readers: listing and reading ignore it.
Reading an object verifies its sha256 against the manifest; reading a manifest verifies that its
bytes are those the store writes for its content (:func:`~privgraph.storage.manifest.manifest_bytes`;
manifests of the current format), that its object checksums hash to its version id, its seal
(:mod:`privgraph.storage.seal`) when it has one, and that the version holds nothing but
the manifest and the objects it lists (a file dropped into a version's folder would travel with
every copy of it). Loading or verifying a version also checks that
every object is the canonical encoding of what loads from it and that the version holds exactly
the objects its ``graph.json`` lists (:mod:`privgraph.storage.graph_io`).

Backends implement seven primitives over ``/``-separated keys: :meth:`~ArtifactStore._put_new`
(refuses to overwrite), :meth:`~ArtifactStore._get`, :meth:`~ArtifactStore._exists`,
:meth:`~ArtifactStore._list_prefixes`, :meth:`~ArtifactStore._list_names`,
:meth:`~ArtifactStore._list_everything` and :meth:`~ArtifactStore._delete`, and :meth:`~ArtifactStore.check_writable`; and override
:meth:`~ArtifactStore._copy_new` (commit of objects that workers staged, see
:mod:`privgraph.storage.parts`) with a copy that does not pass the bytes through the caller.
"""

from __future__ import annotations

import abc
import dataclasses
import datetime as dt
import hashlib
import json
from collections.abc import Collection, Iterator, Mapping
from typing import TYPE_CHECKING, Any

from privgraph.errors import ArtifactError, ArtifactIntegrityError, one_line
from privgraph.guarantee.ledger import PrivacyLedger
from privgraph.guarantee.redaction import redact_uri
from privgraph.storage.graph_io import (
    GRAPH_INFO,
    GraphPart,
    check_object_names,
    check_objects,
    objects_to_graph,
    part_from_objects,
    part_prefix,
    read_graph_info,
)
from privgraph.storage.manifest import MANIFEST_FORMAT, READABLE_MANIFEST_FORMATS, manifest_bytes
from privgraph.storage.names import NAME_RE, VERSION_RE, check_name, check_version_id, content_hash, version_id
from privgraph.storage.seal import SEAL_FIELD, check_seal

if TYPE_CHECKING:
    from privgraph.graph import GraphData

__all__ = ["ArtifactStore", "VersionInfo", "MANIFEST_NAME"]

MANIFEST_NAME = "manifest.json"


def _is_manifest_bytes(manifest: Mapping[str, Any], raw: bytes) -> bool:
    """Whether ``raw`` is exactly what the store writes for ``manifest`` (parsed from it)."""
    try:
        return manifest_bytes(manifest) == raw
    except (TypeError, ValueError):  # a NaN or infinity: never written
        return False


def _epsilon_summary(ledger: Any) -> str:
    """``"features 1.0 / edges 1.0"`` from a stored ledger (``""`` when it cannot be read)."""
    try:
        rows = PrivacyLedger.from_dict(ledger).summary()
    except (TypeError, ValueError, KeyError):
        return ""
    parts = []
    for row in rows:
        eps = "n/a" if row["epsilon"] is None else f"{row['epsilon']:g}"
        parts.append(f"{row['scope']} {eps}")
    return " / ".join(parts)


@dataclasses.dataclass(frozen=True)
class VersionInfo:
    """One stored version, with a few fields of its manifest for listings."""

    pipeline: str
    version: str
    created: str  # ISO 8601, UTC
    code_version: str | None = None
    public_input_fingerprint: str | None = None
    num_objects: int = 0
    total_bytes: int = 0
    validation_success: bool | None = None
    epsilon_summary: str = ""  # spent epsilon per scope, e.g. "features 1 / edges 1"

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_manifest(cls, manifest: Mapping[str, Any]) -> VersionInfo:
        objects = manifest.get("objects") or {}
        validation = manifest.get("validation")
        success = validation.get("success") if isinstance(validation, Mapping) else None
        return cls(
            pipeline=manifest["pipeline"],
            version=manifest["version"],
            created=manifest["created"],
            code_version=manifest.get("code_version"),
            public_input_fingerprint=manifest.get("public_input_fingerprint"),
            num_objects=len(objects),
            total_bytes=sum(int(o.get("size", 0)) for o in objects.values()),
            validation_success=success if isinstance(success, bool) else None,
            epsilon_summary=_epsilon_summary(manifest.get("ledger")),
        )


class ArtifactStore(abc.ABC):
    """Immutable, versioned artifact storage; see the module docstring for the protocol."""

    # -- backend primitives ---------------------------------------------------------------------
    @abc.abstractmethod
    def _put_new(self, key: str, data: bytes) -> None:
        """Write ``data`` at ``key`` atomically; raise ArtifactExistsError if ``key`` exists."""

    @abc.abstractmethod
    def _get(self, key: str) -> bytes:
        """The bytes at ``key``; raise ``KeyError(key)`` if absent."""

    @abc.abstractmethod
    def _exists(self, key: str) -> bool:
        """Whether an object is stored at ``key``."""

    @abc.abstractmethod
    def _list_prefixes(self, prefix: str) -> list[str]:
        """Names of the immediate children "directories" under ``prefix`` (``""`` or ``"a/"``)."""

    @abc.abstractmethod
    def _delete(self, key: str) -> None:
        """Delete ``key`` if present (cleanup of a failed write's data objects)."""

    def _copy_new(self, src: str, dst: str) -> None:
        """Copy the object at ``src`` to ``dst``, which must not exist (ArtifactExistsError). This
        default reads and writes the bytes; the backends override it with a copy that never
        passes them through the caller (a hard link, a server-side copy)."""
        self._put_new(dst, self._get(src))

    def _remove_staged(self, pipeline: str, version: str) -> None:
        """Delete everything a staged (unpublished) version left: its data objects and, where the
        backend has them, partial writes of a killed run (the local store's ``.tmp-*`` files)."""
        for name in self._list_names(f"{pipeline}/{version}/"):
            if name != MANIFEST_NAME:
                self._delete(self._key(pipeline, version, name))

    @abc.abstractmethod
    def _list_names(self, prefix: str) -> list[str]:
        """Names of the objects directly under ``prefix`` (``"pipeline/version/"``)."""

    @abc.abstractmethod
    def _list_everything(self, prefix: str) -> list[str]:
        """Whatever is stored under ``prefix`` (``"pipeline/version/"``), relative to it, hidden
        names, links and nested keys included: what a copy of that folder or prefix would hold
        (a local directory as ``name/``). One listing (one paginated LIST on S3)."""

    @abc.abstractmethod
    def check_writable(self) -> None:
        """Check, before any data is read, that a version could be written here; write nothing.

        Raises:
            ArtifactError: the store is misconfigured (not a directory, no write permission, no
                such bucket, no credentials): exit code 2.
            StoreUnavailableError: the store does not answer or its disk is full: exit code 4.
        """

    # -- hooks (tests monkeypatch these) --------------------------------------------------------
    def _now(self) -> dt.datetime:
        return dt.datetime.now(dt.timezone.utc)

    def _make_version_id(
        self, created: dt.datetime, pipeline: str, checksums: Mapping[str, str]
    ) -> str:
        return version_id(created, pipeline, checksums)

    @staticmethod
    def _key(pipeline: str, version: str, name: str) -> str:
        return f"{pipeline}/{version}/{name}"

    # -- reading --------------------------------------------------------------------------------
    def _load_manifest(self, pipeline: str, version: str) -> dict[str, Any]:
        """The parsed ``manifest.json`` of a version, which names it. One of the current format
        must be exactly :func:`~privgraph.storage.manifest.manifest_bytes` of its parsed content;
        one of an older readable format (written before that rule) is read without that check."""
        try:
            raw = self._get(self._key(pipeline, version, MANIFEST_NAME))
        except KeyError:
            raise ArtifactError(
                f"no version {version!r} of pipeline {pipeline!r} in {self!r}; "
                f"list the stored versions with list_versions()"
            ) from None
        try:
            manifest = json.loads(raw)
        except (UnicodeDecodeError, ValueError) as err:
            raise ArtifactIntegrityError(
                f"manifest of {pipeline}/{version} is not valid JSON: {err}"
            ) from None
        if not isinstance(manifest, dict) or manifest.get("format") not in READABLE_MANIFEST_FORMATS:
            raise ArtifactIntegrityError(
                f"manifest of {pipeline}/{version} is not a {MANIFEST_FORMAT!r} manifest"
            )
        if manifest["format"] == MANIFEST_FORMAT and not _is_manifest_bytes(manifest, raw):
            raise ArtifactIntegrityError(
                f"manifest of {pipeline}/{version} is not the bytes privgraph writes for its content "
                f"(reformatted, re-serialized or edited after it was written)"
            )
        if manifest.get("version") != version or manifest.get("pipeline") != pipeline:
            raise ArtifactIntegrityError(
                f"manifest of {pipeline}/{version} names {manifest.get('pipeline')!r}/"
                f"{manifest.get('version')!r}"
            )
        return manifest

    def read_manifest(
        self, pipeline: str, version: str, *, trusted: Collection[str] | None = None, sealed: bool = False
    ) -> dict[str, Any]:
        """The stored manifest, its object checksums checked against the hash in its version id,
        its seal (when it has one, or ``sealed``) checked by :func:`~privgraph.storage.seal.check_seal`
        (signed by one of the ``trusted`` public keys when given), and the version holding
        nothing but the manifest and the objects it lists (one listing of the version).

        Raises:
            ArtifactError: no such version (a version without a manifest does not exist).
            ArtifactIntegrityError: the manifest is unreadable, its checksums were changed, it
                does not match its seal, or the version holds something it does not list.
        """
        manifest = self._checked_manifest(pipeline, version, trusted=trusted, sealed=sealed)
        self._refuse_unlisted(pipeline, version, manifest)
        return manifest

    def _checked_manifest(
        self, pipeline: str, version: str, *, trusted: Collection[str] | None = None, sealed: bool = False
    ) -> dict[str, Any]:
        """:meth:`read_manifest` but for the version's listing (a reader of one object)."""
        check_name(pipeline, "pipeline")
        check_version_id(version)
        manifest = self._load_manifest(pipeline, version)
        check_seal(manifest, f"{pipeline}/{version}", trusted=trusted, required=sealed)
        objects = manifest.get("objects")
        if not isinstance(objects, dict) or not all(
            isinstance(o, dict) and isinstance(o.get("sha256"), str) for o in objects.values()
        ):
            raise ArtifactIntegrityError(f"manifest of {pipeline}/{version} has a broken 'objects'")
        if content_hash(pipeline, {n: o["sha256"] for n, o in objects.items()}) != version.rsplit("-", 1)[1]:
            raise ArtifactIntegrityError(
                f"the object checksums in the manifest of {pipeline}/{version} do not match the "
                f"content hash in its version id (the manifest was changed after it was written)"
            )
        return manifest

    def _refuse_unlisted(self, pipeline: str, version: str, manifest: Mapping[str, Any]) -> None:
        """ArtifactIntegrityError naming the first thing stored under the version that is neither
        its manifest nor an object the manifest lists: what a copy of the version would carry
        beside the release (a file dropped there, a folder, a partial write's leftover)."""
        listed = {*manifest["objects"], MANIFEST_NAME}
        extra = sorted(n for n in self._list_everything(f"{pipeline}/{version}/") if n not in listed)
        if extra:
            # a name is not private, but one shaped as a URI is shown without userinfo or query
            shown = repr(redact_uri(extra[0])[:100]) if extra[0] else "an object named as the version's prefix itself"
            more = f" (and {len(extra) - 1} more)" if len(extra) > 1 else ""
            raise ArtifactIntegrityError(
                f"{pipeline}/{version} holds {shown}{more}, which its manifest does not list (a version holds "
                f"nothing else: find what wrote it there, and delete it)"
            )

    def read_object(self, pipeline: str, version: str, name: str) -> bytes:
        """The bytes of one object, verified against the sha256 and size in the manifest. The
        version's listing is not checked (it would cost a listing per object): a reader of a
        version reads it through :meth:`read_manifest` (or :meth:`read_objects`) first.

        Raises:
            ArtifactError: no such version or no such object in it.
            ArtifactIntegrityError: the object is missing or its checksum does not match.
        """
        check_name(name, "object")
        manifest = self._checked_manifest(pipeline, version)
        return self._read_verified(pipeline, version, name, manifest)

    def read_staged_object(self, pipeline: str, version: str, name: str, objects: Mapping[str, Any]) -> bytes:
        """The bytes of one object of a STAGED version (no manifest yet), verified against
        ``objects``, the staging's own checksums (``PendingVersion.objects``: name -> ``sha256``,
        ``size``), as :meth:`read_object` verifies against a manifest.

        Raises:
            ArtifactError: ``name`` is not among ``objects``.
            ArtifactIntegrityError: the object is missing or its checksum does not match.
        """
        check_name(name, "object")
        return self._read_verified(pipeline, version, name, {"objects": objects})

    def read_objects(
        self, pipeline: str, version: str, *, trusted: Collection[str] | None = None, sealed: bool = False
    ) -> dict[str, bytes]:
        """Every object of a version, each verified (see :meth:`read_object`), after
        :meth:`read_manifest` (the version holds nothing else)."""
        manifest = self.read_manifest(pipeline, version, trusted=trusted, sealed=sealed)
        return self._read_all(pipeline, version, manifest)

    def _read_all(self, pipeline: str, version: str, manifest: Mapping[str, Any]) -> dict[str, bytes]:
        return {n: self._read_verified(pipeline, version, n, manifest) for n in sorted(manifest["objects"])}

    def verify_version(
        self, pipeline: str, version: str, *, trusted: Collection[str] | None = None, sealed: bool = False
    ) -> dict[str, Any]:
        """Check a published version end to end: its manifest parses, names this version, matches
        its seal (required when ``sealed``; by one of the ``trusted`` keys when given), its object
        checksums match the content hash in the version id, it holds nothing the manifest does not
        list, every object is present with that checksum and size, and the objects are exactly
        those its ``graph.json`` lists, each the
        canonical encoding of its content (:func:`~privgraph.storage.graph_io.check_objects`).
        Returns ``{"pipeline", "version", "objects", "bytes", "signer"}``
        (``signer``: the sealing public key, ``None`` for an unsealed manifest).

        Raises:
            ArtifactError: no such version.
            ArtifactIntegrityError: anything above does not hold (names what and where).
        """
        blobs = self.read_objects(pipeline, version, trusted=trusted, sealed=sealed)
        try:
            check_objects(blobs)
        except ArtifactError as exc:
            raise ArtifactIntegrityError(f"{pipeline}/{version}: {one_line(exc)}") from None
        seal = self._load_manifest(pipeline, version).get(SEAL_FIELD)
        return {"pipeline": pipeline, "version": version, "objects": len(blobs),
                "bytes": sum(len(b) for b in blobs.values()),
                "signer": seal["public_key"] if isinstance(seal, Mapping) else None}

    def _read_verified(self, pipeline: str, version: str, name: str, manifest: Mapping[str, Any]) -> bytes:
        entry = manifest["objects"].get(name)
        if entry is None:
            raise ArtifactError(
                f"{pipeline}/{version} has no object {name!r}; it has {sorted(manifest['objects'])}"
            )
        try:
            blob = self._get(self._key(pipeline, version, name))
        except KeyError:
            raise ArtifactIntegrityError(
                f"object {name!r} of {pipeline}/{version} is listed in the manifest but missing"
            ) from None
        actual = hashlib.sha256(blob).hexdigest()
        if actual != entry["sha256"] or len(blob) != entry.get("size", len(blob)):
            raise ArtifactIntegrityError(
                f"object {name!r} of {pipeline}/{version} is corrupt: sha256 {actual} "
                f"({len(blob)} bytes), manifest says {entry['sha256']} ({entry.get('size')} bytes)"
            )
        return blob

    def load_graph(
        self, pipeline: str, version: str, *, staged: bool = False
    ) -> tuple[GraphData, str | None]:
        """The graph stored in a version, and the input fingerprint its manifest records.

        Args:
            pipeline, version: the version (see :meth:`find_version`).
            staged: also read a version whose manifest is not written yet (a
                :class:`~privgraph.storage.staging.PendingVersion`, e.g. to measure it before publishing); its objects cannot
                be verified against a manifest and its fingerprint is ``None`` (default: ``False``).

        Raises:
            ArtifactError: no such version (or, with ``staged``, no staged objects either); a
                staged object that is not the canonical encoding of its content.
            ArtifactIntegrityError: a published object fails its checksum, the version holds
                something its manifest does not list, or the published objects are not exactly
                those ``graph.json`` lists, each the canonical encoding of its content
                (:mod:`privgraph.storage.graph_io`).
        """
        check_name(pipeline, "pipeline")
        check_version_id(version)
        if not staged or self._exists(self._key(pipeline, version, MANIFEST_NAME)):
            manifest = self.read_manifest(pipeline, version)
            objects = self._read_all(pipeline, version, manifest)
            num_nodes = manifest.get("num_nodes")
            try:
                graph = objects_to_graph(objects, num_nodes if isinstance(num_nodes, int) else None)
            except ArtifactError as exc:
                raise ArtifactIntegrityError(f"{pipeline}/{version}: {one_line(exc)}") from None
            return graph, manifest.get("public_input_fingerprint")
        try:
            info_blob = self._get(self._key(pipeline, version, GRAPH_INFO))
        except KeyError:
            raise ArtifactError(
                f"no version {version!r} of pipeline {pipeline!r} in {self!r}, staged or published"
            ) from None
        try:
            names = read_graph_info(info_blob)["objects"]
        except ArtifactError as exc:
            raise ArtifactError(f"staged {pipeline}/{version}: {one_line(exc)}") from None
        objects = {GRAPH_INFO: info_blob}
        for name in names:
            check_name(name, "object")
            try:
                objects[name] = self._get(self._key(pipeline, version, name))
            except KeyError:
                raise ArtifactError(f"staged {pipeline}/{version} lacks its object {name!r}") from None
        try:
            return objects_to_graph(objects), None
        except ArtifactError as exc:
            raise ArtifactError(f"staged {pipeline}/{version}: {one_line(exc)}") from None

    def iter_parts(self, pipeline: str, version: str) -> Iterator[GraphPart]:
        """A partitioned version (:func:`~privgraph.publish.release_parts.store_partitioned_release`) one
        partition at a time: each :class:`~privgraph.storage.graph_io.GraphPart` read and
        verified against the manifest when it is reached, so a reader holds one partition's
        rows and edges at once. The version's whole graph is :meth:`load_graph`.

        Raises:
            ArtifactError: no such version, or it is not partitioned.
            ArtifactIntegrityError: an object fails its checksum, the version holds something
                its manifest does not list, the version's objects are not exactly those its
                ``graph.json`` lists, or a part's object is not the canonical
                encoding of its content (raised when that part is reached).
        """
        manifest = self.read_manifest(pipeline, version)
        info_blob = self._read_verified(pipeline, version, GRAPH_INFO, manifest)
        try:
            info = read_graph_info(info_blob)
            partitioned = bool(info.get("parts"))
            if partitioned:
                check_object_names(manifest["objects"], info)
        except ArtifactError as exc:
            raise ArtifactIntegrityError(f"{pipeline}/{version}: {one_line(exc)}") from None
        if not partitioned:
            raise ArtifactError(f"{pipeline}/{version} is not a partitioned version; read it with load_graph")
        for i in range(info["parts"]):
            pre = part_prefix(i)
            names = [n for n in manifest["objects"] if n.startswith(pre)]
            objects = {n: self._read_verified(pipeline, version, n, manifest) for n in names}
            try:
                part = part_from_objects(i, objects)
            except ArtifactError as exc:
                raise ArtifactIntegrityError(f"{pipeline}/{version}: {one_line(exc)}") from None
            yield part

    # -- listing --------------------------------------------------------------------------------
    def _pipelines(self) -> list[str]:
        return sorted(p for p in self._list_prefixes("") if NAME_RE.match(p) and ".." not in p)

    def _versions(self, pipeline: str) -> list[str]:
        """Version ids of ``pipeline`` that have a manifest (complete versions only)."""
        return sorted(
            v for v in self._list_prefixes(f"{pipeline}/")
            if VERSION_RE.match(v) and self._exists(self._key(pipeline, v, MANIFEST_NAME))
        )

    def list_versions(self, pipeline: str | None = None, *, broken: list[str] | None = None) -> list[VersionInfo]:
        """Complete versions (those with a manifest), sorted by pipeline, then oldest first.

        A version whose manifest cannot be read (not JSON, another format, naming another
        version) is left out, and described in ``broken`` when a list is passed: one bad manifest
        does not hide the rest of the store.
        """
        pipelines = self._pipelines() if pipeline is None else [check_name(pipeline, "pipeline")]
        out = []
        for p in pipelines:
            for v in self._versions(p):
                try:
                    out.append(VersionInfo.from_manifest(self._load_manifest(p, v)))
                except (ArtifactIntegrityError, KeyError, TypeError, ValueError) as exc:
                    if broken is not None:
                        broken.append(f"{p}/{v}: {exc}")
        return out

    def latest_version(self, pipeline: str) -> VersionInfo:
        """The newest complete version of ``pipeline``."""
        versions = self.list_versions(pipeline)
        if not versions:
            raise ArtifactError(f"pipeline {pipeline!r} has no stored versions in {self!r}")
        return versions[-1]

    def find_version(self, version: str) -> tuple[str, str]:
        """``(pipeline, version)`` of a complete version, searched over all pipelines.

        Raises:
            ArtifactError: no pipeline holds a complete version with that id.
        """
        check_version_id(version)
        hits = [
            p for p in self._pipelines() if self._exists(self._key(p, version, MANIFEST_NAME))
        ]
        if not hits:
            raise ArtifactError(
                f"no version {version!r} in {self!r}; list the stored versions with "
                f"list_versions() (or list_versions(pipeline) for one pipeline)"
            )
        if len(hits) > 1:
            raise ArtifactError(f"version {version!r} exists in several pipelines: {hits}")
        return hits[0], version
