"""Where :func:`~privgraph.ingest.partitioned_writer.write_partitioned_graph` writes: a local
directory, claimed as ``.<name>.tmp`` beside it and renamed at the end (:func:`claim_local`; a
``file://`` URI is the local directory it names: :func:`resolve_destination`), or a URI under
which no object exists yet (:class:`RemoteDestination`: ``s3://bucket/prefix``, any file system
``pyarrow.fs`` opens), checked by writing and deleting a probe object before any input row is
read, then written one file at a time, ``graph.json`` last. Neither is ever overwritten
(docs/partitioned-input.md)."""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
from collections.abc import Iterator
from pathlib import Path

import pyarrow.fs as pafs

from privgraph.errors import ConfigError, DestinationUnavailableError, DiskFullError, PrivgraphError
from privgraph.guarantee.private_files import mkdir_private
from privgraph.guarantee.redaction import redact_uri
from privgraph.ingest.filesystems import filesystem_of

__all__ = ["RemoteDestination", "claim_local", "refuse_existing", "resolve_destination"]

#: the name of the probe object that checks a URI destination (``<prefix><8 hex digits>``)
PROBE_PREFIX = ".privgraph-ingest-probe-"
_PROBE_TEXT = b"privgraph ingest: a probe of write access, deleted at once\n"
#: the URI schemes of pyarrow's local file system
_LOCAL_SCHEMES = ("file", "local")


def resolve_destination(destination: Path | str) -> Path | str:
    """``destination`` as the writer takes it: a local path made absolute, a URI of the local file
    system (``file:///data/g``) as the local directory it names (claimed and renamed like one, so
    all or nothing), any other URI as it is. Raises ConfigError for a ``file://`` URI pyarrow
    refuses (one line, exit code 2)."""
    text = str(destination)
    if "://" not in text:
        return Path(text).expanduser().absolute()
    if text.split("://", 1)[0].lower() in _LOCAL_SCHEMES:
        return Path(filesystem_of(text)[1])
    return text


def refuse_existing(path: Path | str, why: str = "") -> None:
    """Raise the one-line ``ConfigError`` that an ingest never overwrites ``path``."""
    raise ConfigError(f"{path} exists{why}; an ingest never overwrites: choose a new destination")


def claim_local(destination: Path) -> Path:
    """Create ``.<name>.tmp`` beside ``destination`` (0700, exclusively) and return it; refuse an
    existing destination, or a temporary directory of another (or an interrupted) ingest."""
    tmp = destination.with_name(f".{destination.name}.tmp")
    if os.path.lexists(destination):
        refuse_existing(destination)
    mkdir_private(tmp.parent)
    try:
        tmp.mkdir(mode=0o700)
    except FileExistsError:
        refuse_existing(tmp, " (another ingest is writing it, or one was interrupted: remove it when none runs)")
    tmp.chmod(0o700)
    return tmp


class RemoteDestination:
    """A destination URI that holds no object yet and that this ingest can write and clean up:
    files uploaded one at a time, remembered so that a failure deletes them (``graph.json``,
    uploaded last, is what makes them a graph).

    Raises:
        ConfigError: a URI pyarrow refuses, a missing bucket, objects under the prefix, or objects
            that cannot be written or deleted there (exit code 2).
        DestinationUnavailableError: the endpoint does not answer (exit code 4).
    """

    def __init__(self, uri: str) -> None:
        self.uri, self.shown = uri, redact_uri(uri).rstrip("/")
        self.fs, self.root = filesystem_of(uri)  # a URI pyarrow refuses: a ConfigError naming it redacted
        self.written: list[str] = []
        self.deleted = False  # whether a deletion here may have left S3 directory markers behind
        try:
            bucket = None if self.root.startswith("/") else self.root.split("/", 1)[0]  # s3, gs: the bucket
            missing = bucket is not None and self.fs.get_file_info(bucket).type != pafs.FileType.Directory
            found = [] if missing else self.fs.get_file_info(pafs.FileSelector(self.root, allow_not_found=True))
        except (OSError, ValueError) as exc:  # no credentials, access denied (pyarrow names bucket and key only)
            raise self._refusal(exc, "cannot open the destination") from None
        if missing:
            raise ConfigError(f"{self.shown}: cannot open the destination: bucket {bucket!r} does not exist")
        if found:
            refuse_existing(self.shown, " (it holds objects: an interrupted ingest leaves some; remove them)")
        self._probe()

    def _refusal(self, exc: Exception, doing: str) -> PrivgraphError:
        """``exc`` of the file system as one line: the endpoint does not answer (exit code 4), or
        the destination refuses (exit code 2)."""
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        if isinstance(exc, (ConnectionError, TimeoutError)) or "NETWORK_CONNECTION" in first:
            return DestinationUnavailableError(f"{self.shown}: the endpoint does not answer ({doing}): {first}")
        return ConfigError(f"{self.shown}: {doing}: {first}")

    def _probe(self) -> None:
        """Write a probe object under the prefix and delete it, before any input row is read: a
        destination this ingest cannot write (nothing left), or whose objects it could not delete
        after a failure (the probe left is named), is refused. On S3, pyarrow's deletion leaves a
        zero-byte directory marker ``prefix/`` (no data; pyarrow's listings do not show it), which
        :meth:`abort` removes when the ingest fails."""
        name = f"{PROBE_PREFIX}{secrets.token_hex(4)}"
        try:
            try:
                self.put_bytes(name, _PROBE_TEXT)
            except OSError as exc:
                raise self._refusal(exc, "cannot write objects there") from None
            try:
                self.fs.delete_file(f"{self.root}/{name}")
                self.deleted = True
            except OSError as exc:
                raise self._refusal(exc, "cannot delete objects there, so a failed ingest could not remove what it "
                                    f"uploaded (the probe object {name} is left: remove it)") from None
        except BaseException:  # Ctrl-C too: nothing left
            self.abort()
            raise
        self.written.remove(name)

    def put(self, local: Path, name: str) -> None:
        """Upload ``local`` as ``name`` (streamed) and remove the local file."""
        self.written.append(name)
        with self._full(name):
            pafs.copy_files(str(local), f"{self.root}/{name}", destination_filesystem=self.fs)
        local.unlink()

    def put_bytes(self, name: str, data: bytes) -> None:
        self.written.append(name)
        with self._full(name), self.fs.open_output_stream(f"{self.root}/{name}") as f:
            f.write(data)

    @contextlib.contextmanager
    def _full(self, name: str) -> Iterator[None]:
        """A destination whose disk or quota is full (a file system that reports ENOSPC, EDQUOT):
        one line, exit code 4 (the caller deletes what was uploaded)."""
        try:
            yield
        except OSError as exc:
            if exc.errno not in (errno.ENOSPC, errno.EDQUOT):
                raise
            raise DiskFullError(f"{self.shown}: {exc.strerror or os.strerror(exc.errno)} at the destination writing "
                                f"{name}; nothing was left (the objects uploaded were deleted): free space there "
                                "and run again") from None

    def abort(self) -> None:
        """Delete every object this ingest uploaded, then the directory markers S3 leaves when
        nothing else is under the prefix (best effort: the failure is what is raised)."""
        try:
            for name in reversed(self.written):
                with contextlib.suppress(FileNotFoundError):  # its upload never finished
                    self.fs.delete_file(f"{self.root}/{name}")
                    self.deleted = True
            left = self.fs.get_file_info(pafs.FileSelector(self.root, allow_not_found=True, recursive=True))
            if self.deleted and not [i for i in left if i.type == pafs.FileType.File]:
                self.fs.delete_dir(self.root)
        except OSError:
            pass
