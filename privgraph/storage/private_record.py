"""The data owner's private records: what is computed from private data and covered by no guarantee.

Some stages produce useful numbers that are NOT differentially private: EdgeRR's MCMC trace,
the accuracy of a model trained on the raw graph, the keyed identity of the raw input, a
comparison's per-mechanism accuracies and degree curves. They are for the data owner only and
live in a local directory (``private_records`` in pipelines.yaml), never in the artifact store, a
manifest or a shareable Prefect artifact:

* ``<dir>/<pipeline>/<version>.json``: the private record of one published version
  (:func:`write_private_record`), mode 0600;
* ``<dir>/reports/<name>/<report id>/``: a private report (:func:`write_private_report`, e.g. a
  utility comparison), every file mode 0600;
* the owner's HMAC key (:func:`owner_key`): ``$PRIVGRAPH_HOME/keys/input-hmac.key`` when
  ``PRIVGRAPH_HOME`` is set, else ``<dir>/keys/input-hmac.key``; 32 random bytes, mode 0600,
  created on first use, never logged, never stored with an artifact;
* the owner's manifest-signing key (:func:`owner_signing_key`): ``keys/manifest-ed25519.key`` in
  the same place, an Ed25519 seed made the same way; its public half is in every seal;
* ``<dir>/checkpoints/<name>/<key>.jsonl``: the finished cells of a comparison still running, or
  cut off (:class:`CellCheckpoint`), mode 0600; removed once its report is written.

Directories are created mode 0700.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import hashlib
import hmac
import json
import os
import secrets
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from privgraph.errors import ConfigError, PrivgraphError
from privgraph.guarantee.private_files import mkdir_private, write_private_file
from privgraph.storage.names import check_name, check_version_id
from privgraph.storage.seal import public_key_hex

__all__ = [
    "write_private_record",
    "read_private_record",
    "private_record_path",
    "write_private_report",
    "owner_key",
    "owner_key_path",
    "owner_signing_key",
    "owner_signing_key_path",
    "owner_public_key",
    "input_identity",
    "PRIVATE_NOTE",
    "CellCheckpoint",
]

PRIVATE_NOTE = (
    "PRIVATE: computed from raw data and covered by no privacy guarantee; for the data owner only, "
    "never publish or share"
)
_KEY_BYTES = 32


def private_record_path(directory: str | os.PathLike[str], pipeline: str, version: str) -> Path:
    return Path(directory) / check_name(pipeline, "pipeline") / f"{check_version_id(version)}.json"


def write_private_record(
    directory: str | os.PathLike[str], pipeline: str, version: str, record: Mapping[str, Any]
) -> Path | None:
    """Write ``record`` (JSON) for ``pipeline``/``version`` atomically, readable by the owner only
    (mode 0600); ``None`` (nothing written) for an empty record."""
    if not record:
        return None
    path = private_record_path(directory, pipeline, version)
    body = {"pipeline": pipeline, "version": version, "covered_by_guarantee": False, "note": PRIVATE_NOTE, **record}
    write_private_file(path, (json.dumps(body, sort_keys=True, indent=1) + "\n").encode())
    return path


def private_refusals_dir(directory: str | os.PathLike[str], pipeline: str) -> Path:
    """``<directory>/<pipeline>/refusals/``: where refused runs' private details go."""
    return Path(directory) / check_name(pipeline, "pipeline") / "refusals"


def write_private_refusal(directory: str | os.PathLike[str], pipeline: str, exc: BaseException) -> Path | None:
    """Keep a refusal's private detail (``exc.private_detail``: values computed from private data,
    which its shareable message leaves out) for the owner, as
    ``<directory>/<pipeline>/refusals/<UTC time>.json`` (mode 0600); ``None`` when it has none."""
    detail = getattr(exc, "private_detail", None)
    if not detail:
        return None
    stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y%m%dT%H%M%S%fZ")
    path = private_refusals_dir(directory, pipeline) / f"{stamp}.json"
    body = {"pipeline": pipeline, "refused": str(exc), "covered_by_guarantee": False, "note": PRIVATE_NOTE,
            "detail": detail}
    write_private_file(path, (json.dumps(body, sort_keys=True, indent=1, default=_plain) + "\n").encode())
    return path


@contextlib.contextmanager
def private_refusals(directory: str | os.PathLike[str], pipeline: str) -> Iterator[None]:
    """Inside the block, a :class:`~privgraph.errors.PrivgraphError` with a ``private_detail``
    leaves that detail in the owner's private record (:func:`write_private_refusal`) and goes on
    with its shareable message only (the detail is removed from the exception)."""
    try:
        yield
    except PrivgraphError as exc:
        write_private_refusal(directory, pipeline, exc)
        exc.private_detail = None  # kept once, in the owner's record; not carried on (pickled run states)
        raise


def read_private_record(directory: str | os.PathLike[str], pipeline: str, version: str) -> dict[str, Any]:
    """The private record of ``pipeline``/``version`` (``FileNotFoundError`` when none was written)."""
    return json.loads(private_record_path(directory, pipeline, version).read_text())


def write_private_report(
    directory: str | os.PathLike[str], name: str, objects: Mapping[str, bytes], info: Mapping[str, Any]
) -> Path:
    """Store a private report (e.g. a utility comparison computed on raw data) as its own folder
    ``<directory>/reports/<name>/<UTC time>-<content hash>/`` with ``objects`` and ``report.json``
    (``info`` plus the private note and each object's sha256). Files are mode 0600; an existing
    report is never overwritten. Returns the folder."""
    check_name(name, "report")
    for obj in objects:
        check_name(obj, "object")
    digest = hashlib.sha256()
    for obj in sorted(objects):
        digest.update(obj.encode() + b"\0" + hashlib.sha256(objects[obj]).digest())
    stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y%m%dT%H%M%S%fZ")
    folder = Path(directory) / "reports" / name / f"{stamp}-{digest.hexdigest()[:12]}"
    if folder.exists():
        raise FileExistsError(f"private report {folder} exists already")
    mkdir_private(folder)
    for obj, blob in objects.items():
        write_private_file(folder / obj, bytes(blob))
    meta = {
        "report": name, "private": True, "covered_by_guarantee": False, "note": PRIVATE_NOTE,
        "objects": {o: hashlib.sha256(b).hexdigest() for o, b in sorted(objects.items())}, **info,
    }
    write_private_file(folder / "report.json", (json.dumps(meta, sort_keys=True, indent=1) + "\n").encode())
    return folder


def owner_key_path(directory: str | os.PathLike[str]) -> Path:
    """Where the owner's HMAC key lives (see the module docstring)."""
    home = os.environ.get("PRIVGRAPH_HOME")
    base = Path(home).expanduser() if home else Path(directory)
    return base / "keys" / "input-hmac.key"


def _read_or_create_secret(path: Path, what: str) -> bytes:
    """The 32-byte secret at ``path``: read, or created (OS CSPRNG, mode 0600). Created whole or
    not at all: written to a temporary file, then hard-linked into place, which fails if another
    run got there first (then both use its secret); a full disk leaves no empty key behind."""
    try:
        key = path.read_bytes()
    except FileNotFoundError:
        mkdir_private(path.parent)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
        try:
            os.fchmod(fd, 0o600)
            with os.fdopen(fd, "wb") as f:
                f.write(secrets.token_bytes(_KEY_BYTES))
                f.flush()
                os.fsync(f.fileno())
            with contextlib.suppress(FileExistsError):
                os.link(tmp, path)
        finally:
            Path(tmp).unlink(missing_ok=True)
        key = path.read_bytes()
    if len(key) != _KEY_BYTES:
        raise ValueError(f"{path}: the owner's {what} must hold {_KEY_BYTES} bytes, found {len(key)}")
    return key


def owner_key(directory: str | os.PathLike[str]) -> bytes:
    """The data owner's secret HMAC key: read, or created (32 bytes from the OS CSPRNG, mode
    0600, exclusive create so two concurrent runs agree on one key)."""
    return _read_or_create_secret(owner_key_path(directory), "HMAC key")


def owner_signing_key_path(directory: str | os.PathLike[str]) -> Path:
    """Where the owner's manifest-signing key lives: beside the HMAC key."""
    return owner_key_path(directory).with_name("manifest-ed25519.key")


def owner_signing_key(directory: str | os.PathLike[str]) -> Ed25519PrivateKey:
    """The data owner's Ed25519 key that seals every published manifest
    (:mod:`privgraph.storage.seal`): read, or created like :func:`owner_key` (its 32-byte seed)."""
    seed = _read_or_create_secret(owner_signing_key_path(directory), "signing key")
    return Ed25519PrivateKey.from_private_bytes(seed)


def owner_public_key(directory: str | os.PathLike[str]) -> str | None:
    """The owner's public signing key (hex) when the key exists; ``None`` (nothing created) if not."""
    path = owner_signing_key_path(directory)
    if not path.exists():
        return None
    return public_key_hex(owner_signing_key(directory))


def input_identity(graph: Any, directory: str | os.PathLike[str]) -> str:
    """``hmac-sha256:<hex>``: the keyed identity of a raw input graph under the owner's key
    (:meth:`privgraph.graph.GraphData.keyed_digest`). Private-record material only."""
    return "hmac-sha256:" + graph.keyed_digest(owner_key(directory))


def _plain(v: Any) -> Any:
    """JSON for numpy scalars and arrays inside a cell's record."""
    if hasattr(v, "tolist"):
        return v.tolist()
    raise TypeError(f"a checkpointed cell holds a {type(v).__name__}, which is not JSON")


class CellCheckpoint:
    """The finished cells of one comparison, kept so that a run cut off (killed, out of time or
    memory) resumes where it stopped instead of starting over.

    Each cell is appended as one JSON line, flushed and fsynced, to
    ``<directory>/checkpoints/<name>/<key>.jsonl`` (mode 0600, directories 0700). ``key`` is an
    HMAC under the owner's key (:func:`owner_key`) of ``settings`` (the comparison's and its
    pipeline's configuration, seed included, and the code version) and of the keyed digests of
    the input graphs: a run with other settings, other data or other code gets another file and
    recomputes every cell, and the file name reveals neither the seed nor the data. The cells are
    accuracies on raw labels: private-record material, covered by no guarantee, never logged or
    published. A torn last line (the process died while writing it) is dropped on open; any other
    line that is not a cell is a :class:`~privgraph.errors.ConfigError` (one line, exit 2).
    :meth:`discard` removes the file once the comparison's report is written.
    """

    def __init__(
        self,
        directory: str | os.PathLike[str],
        name: str,
        settings: Mapping[str, Any],
        graphs: Sequence[Any],
        labels: Any = None,
    ) -> None:
        check_name(name, "report")
        key = owner_key(directory)
        h = hmac.new(key, digestmod=hashlib.sha256)
        h.update(json.dumps(settings, sort_keys=True, default=str).encode())
        for g in graphs:
            h.update(g.keyed_digest(key).encode())
        if labels is not None:
            h.update(json.dumps(_plain(labels)).encode())
        self.path = Path(directory) / "checkpoints" / name / f"{h.hexdigest()[:32]}.jsonl"
        self._cells: dict[str, Any] = self._read()

    def _read(self) -> dict[str, Any]:
        try:
            text = self.path.read_text()
        except FileNotFoundError:
            return {}
        lines = text.split("\n")
        cells: dict[str, Any] = {}
        for i, line in enumerate(lines[:-1], 1):  # every complete line ends with a newline
            try:
                rec = json.loads(line)
                cells[str(rec["cell"])] = rec["value"]
            except (ValueError, KeyError, TypeError) as e:
                raise ConfigError(f"{self.path}:{i}: not a checkpointed cell ({e}); delete the file to start over") from e
        if lines[-1]:  # torn last line: keep the complete ones only
            write_private_file(self.path, "".join(f"{ln}\n" for ln in lines[:-1]).encode())
        return cells

    def __len__(self) -> int:
        return len(self._cells)

    def get(self, cell: str) -> Any | None:
        """The value checkpointed for ``cell``, or ``None``."""
        return self._cells.get(cell)

    def put(self, cell: str, value: Any) -> None:
        """Append ``cell``'s value (JSON) durably; it is what :meth:`get` returns from now on."""
        line = json.dumps({"cell": cell, "value": value}, sort_keys=True, default=_plain) + "\n"
        mkdir_private(self.path.parent)
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            data = memoryview(line.encode())
            while data:
                data = data[os.write(fd, data):]
            os.fsync(fd)
        finally:
            os.close(fd)
        self._cells[cell] = json.loads(line)["value"]

    def discard(self) -> None:
        """Remove the file (and its folder when empty): the comparison's report holds the cells now."""
        self.path.unlink(missing_ok=True)
        with contextlib.suppress(OSError):
            self.path.parent.rmdir()
