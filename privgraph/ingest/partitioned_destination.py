"""Where :func:`~privgraph.ingest.partitioned_writer.write_partitioned_graph` writes: a local
directory, claimed as ``.<name>.tmp`` beside it and renamed at the end (:func:`claim_local`), or a
URI under which no object exists yet (:class:`RemoteDestination`: ``s3://bucket/prefix``, any file
system ``pyarrow.fs`` opens), uploaded one file at a time, ``graph.json`` last. Neither is ever
overwritten (docs/partitioned-input.md)."""

from __future__ import annotations

import os
from pathlib import Path

import pyarrow.fs as pafs

from privgraph.errors import ConfigError
from privgraph.guarantee.private_files import mkdir_private
from privgraph.guarantee.redaction import redact_uri
from privgraph.ingest.partitioned_graph import _filesystem

__all__ = ["RemoteDestination", "claim_local", "refuse_existing"]


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
    """A destination URI that holds no object yet: files uploaded one at a time, remembered so
    that a failure deletes them (``graph.json``, uploaded last, is what makes them a graph)."""

    def __init__(self, uri: str) -> None:
        self.uri, self.shown = uri, redact_uri(uri).rstrip("/")
        self.fs, self.root = _filesystem(uri)  # a URI pyarrow refuses: a ConfigError naming it redacted
        try:
            bucket = None if self.root.startswith("/") else self.root.split("/", 1)[0]  # s3, gs: the bucket
            missing = bucket is not None and self.fs.get_file_info(bucket).type != pafs.FileType.Directory
            found = [] if missing else self.fs.get_file_info(pafs.FileSelector(self.root, allow_not_found=True))
        except (OSError, ValueError) as exc:  # no credentials, access denied (pyarrow names bucket and key only)
            raise ConfigError(f"{self.shown}: cannot open the destination: {str(exc).splitlines()[0]}") from None
        if missing:
            raise ConfigError(f"{self.shown}: cannot open the destination: bucket {bucket!r} does not exist")
        if found:
            refuse_existing(self.shown, " (it holds objects: an interrupted ingest leaves some; remove them)")
        self.written: list[str] = []

    def put(self, local: Path, name: str) -> None:
        """Upload ``local`` as ``name`` (streamed) and remove the local file."""
        self.written.append(name)
        pafs.copy_files(str(local), f"{self.root}/{name}", destination_filesystem=self.fs)
        local.unlink()

    def put_bytes(self, name: str, data: bytes) -> None:
        self.written.append(name)
        with self.fs.open_output_stream(f"{self.root}/{name}") as f:
            f.write(data)

    def abort(self) -> None:
        """Delete every object this ingest uploaded, then the directory markers S3 leaves when
        nothing else is under the prefix (best effort: the failure is what is raised)."""
        try:
            for name in reversed(self.written):
                self.fs.delete_file(f"{self.root}/{name}")
            left = self.fs.get_file_info(pafs.FileSelector(self.root, allow_not_found=True, recursive=True))
            if self.written and not [i for i in left if i.type == pafs.FileType.File]:
                self.fs.delete_dir(self.root)
        except OSError:
            pass
