"""Ingests in progress, recorded where the owner's private data lives, so that what a killed
``privgraph ingest`` left behind (raw edges with their private flags) is found and removed.

:func:`open_destination` opens where an ingest writes and claims it:
``<private_records>/.ingests/<host>-<pid>-<random>.json`` (mode 0600, the directory 0700; no
pipeline is named with a leading dot), written by
:func:`~privgraph.ingest.partitioned_writer.write_partitioned_graph` once its local temporary
directory exists and before any row is read, and removed when the ingest ends, whether it
succeeded or failed. It names the process (host, pid and the kernel's start time of that pid,
which tells the ingest from a later process that reuses its pid), the local temporary directory
(``.<name>.tmp`` beside a local destination, or ``$TMPDIR/privgraph-ingest-*`` for a URI) and the
destination.

:func:`sweep_ingests` (``privgraph artifacts gc``, and an ingest to the same destination before it
starts) removes what the claims of ingests whose process is gone name: the temporary directory,
and, under a URI destination that holds no ``graph.json``, the range objects uploaded so far. A
destination that holds ``graph.json`` is a graph and is never touched. A claim written on another
host is left alone (its process cannot be checked from here).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import re
import secrets
import shutil
import socket
import tempfile
from pathlib import Path
from typing import Any

import pyarrow.fs as pafs

from privgraph.errors import ConfigError
from privgraph.guarantee.private_files import write_private_file
from privgraph.ingest.partitioned_destination import RemoteDestination, claim_local
from privgraph.guarantee.redaction import redact_uri
from privgraph.ingest.filesystems import filesystem_of
from privgraph.ingest.partitioned_graph import GRAPH_FILE

__all__ = ["CLAIMS_DIR", "StaleIngest", "claim_ingest", "open_destination", "release_claim", "sweep_ingests"]

#: the claims' directory under the private records
CLAIMS_DIR = ".ingests"
#: the only objects a sweep deletes under a URI destination: the format's range files
_RANGE_OBJECT = re.compile(r"^(?:nodes|edges)/range-\d{5,}\.parquet$")
#: the only local directories a sweep removes: an ingest's temporary directories
_TEMP_NAME = re.compile(r"^(?:\..+\.tmp|privgraph-ingest-.+)$")


@dataclasses.dataclass(frozen=True)
class StaleIngest:
    """What a killed ingest left, as a sweep found it (and, unless a dry run, removed it)."""

    claim: Path
    destination: str  #: for a message: a URI without its query string or credentials
    temp: str | None  #: the local temporary directory, None when none was left
    objects: int  #: range objects under a URI destination without ``graph.json``
    error: str | None = None  #: why the destination could not be swept (its claim is kept)


def _start_time(pid: int) -> str | None:
    """The kernel's start time of process ``pid`` (Linux: ``/proc/<pid>/stat``, field 22), which a
    later process with the same pid does not share; None where there is no ``/proc``."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat.rpartition(")")[2].split()
    return fields[19] if len(fields) > 19 else None


def _dir_id(path: str | os.PathLike[str]) -> str | None:
    """``device:inode`` of a directory: a directory made later at the same path is another one."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return f"{st.st_dev}:{st.st_ino}"


def _host() -> str:
    return socket.gethostname()


def _same_destination(destination: Path | str) -> str:
    """The key two claims of the same destination share: a local absolute path, or the URI
    without its query string or credentials."""
    return redact_uri(str(destination)).rstrip("/") if "://" in str(destination) else os.path.abspath(destination)


def claim_ingest(private_records: str | os.PathLike[str], destination: Path | str, temp: Path) -> Path:
    """Record this process's ingest into ``destination``, writing into ``temp``; returns the claim.
    Raises ConfigError (one line, exit 2) when ``private_records`` cannot hold it."""
    pid = os.getpid()
    body = {"host": _host(), "pid": pid, "started": _start_time(pid), "temp": str(Path(temp).absolute()),
            "temp_id": _dir_id(temp), "destination": str(destination)}
    path = Path(private_records) / CLAIMS_DIR / f"{_host()}-{pid}-{secrets.token_hex(4)}.json"
    try:
        write_private_file(path, (json.dumps(body, indent=1) + "\n").encode())
    except OSError as exc:
        raise ConfigError(f"--private-records {private_records}: cannot record the ingest there "
                          f"({exc.strerror or type(exc).__name__})") from None
    return path


def open_destination(destination: Path | str, private_records: str | os.PathLike[str] | None,
                     ) -> tuple[RemoteDestination | None, Path, Path | None]:
    """Where an ingest writes: ``(remote, temp, claim)``. First what a killed ingest to the same
    ``destination`` left is swept (:func:`sweep_ingests`); then a URI is opened
    (:class:`RemoteDestination`, ``temp`` a fresh ``$TMPDIR/privgraph-ingest-*``) or a local
    ``.<name>.tmp`` claimed (:func:`claim_local`), and the ingest claimed under
    ``private_records`` (``claim`` None without them). Raises what those raise; leaves nothing."""
    if private_records is not None:
        sweep_ingests(private_records, destination=destination)
    remote = RemoteDestination(destination) if isinstance(destination, str) else None
    temp = Path(tempfile.mkdtemp(prefix="privgraph-ingest-")) if remote else claim_local(Path(destination))
    try:
        claim = None if private_records is None else claim_ingest(private_records, destination, temp)
    except BaseException:
        shutil.rmtree(temp, ignore_errors=True)
        raise
    return remote, temp, claim


def release_claim(claim: Path | None) -> None:
    """Remove a claim (the ingest ended); None: nothing was claimed."""
    if claim is not None:
        with contextlib.suppress(FileNotFoundError):
            claim.unlink()


def _read(claim: Path) -> dict[str, Any] | None:
    try:
        body = json.loads(claim.read_text())
    except (OSError, UnicodeDecodeError, ValueError):
        return None
    ok = isinstance(body, dict) and isinstance(body.get("pid"), int) and isinstance(body.get("destination"), str)
    return body if ok else None


def _gone(body: dict[str, Any]) -> bool:
    """Whether the claim's process has ended: on this host, its pid is dead or now names a process
    that started at another time. A claim of another host is never gone from here."""
    if body.get("host") != _host():
        return False
    pid = body["pid"]
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:  # another user's process: not an ingest of this owner
        return True
    started = body.get("started")
    return started is not None and _start_time(pid) not in (None, started)


def _range_objects(destination: str) -> tuple[pafs.FileSystem, str, list[str]] | None:
    """The file system, root and range objects under a URI destination; None when it holds
    ``graph.json`` (a graph: never touched)."""
    fs, root = filesystem_of(destination)
    if fs.get_file_info(f"{root}/{GRAPH_FILE}").type != pafs.FileType.NotFound:
        return None
    found = fs.get_file_info(pafs.FileSelector(root, allow_not_found=True, recursive=True))
    names = [i.path[len(root) + 1:] for i in found if i.type == pafs.FileType.File]
    return fs, root, [n for n in names if _RANGE_OBJECT.match(n)]


def _sweep_one(claim: Path, body: dict[str, Any], dry_run: bool) -> StaleIngest:
    destination = body["destination"]
    temp = body.get("temp")
    ours = (isinstance(temp, str) and _TEMP_NAME.match(Path(temp).name) is not None and os.path.isdir(temp)
            and _dir_id(temp) == body.get("temp_id"))
    temp = temp if ours else None  # gone, or not the directory the claim was written for
    objects, error = 0, None
    if "://" in destination:
        try:
            found = _range_objects(destination)
            if found is not None:
                fs, root, names = found
                objects = len(names)
                if not dry_run:
                    for name in names:
                        fs.delete_file(f"{root}/{name}")
                    left = fs.get_file_info(pafs.FileSelector(root, allow_not_found=True, recursive=True))
                    if not [i for i in left if i.type == pafs.FileType.File]:
                        fs.delete_dir(root)  # the directory markers S3 leaves
        except (OSError, ValueError) as exc:  # the endpoint is down, no credentials: kept for a later sweep
            error = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    if not dry_run:
        if temp is not None:
            shutil.rmtree(temp, ignore_errors=True)
        if error is None:
            release_claim(claim)
    return StaleIngest(claim, _same_destination(destination), temp, objects, error)


def sweep_ingests(private_records: str | os.PathLike[str], *, destination: Path | str | None = None,
                  dry_run: bool = False) -> list[StaleIngest]:
    """Remove what the claims under ``private_records`` name whose ingest's process is gone (only
    those of ``destination`` when given): the local temporary directory, and the range objects
    under a URI destination that holds no ``graph.json``; then the claim. Claims of live
    processes, of other hosts, and unreadable ones are left. With ``dry_run`` nothing is removed."""
    root = Path(private_records) / CLAIMS_DIR
    if not root.is_dir():
        return []
    key = None if destination is None else _same_destination(destination)
    out = []
    for claim in sorted(root.glob("*.json")):
        body = _read(claim)
        if body is None or (key is not None and _same_destination(body["destination"]) != key) or not _gone(body):
            continue
        out.append(_sweep_one(claim, body, dry_run))
    return out
