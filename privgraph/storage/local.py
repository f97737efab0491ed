"""LocalStore: artifacts in a directory, ``<root>/<pipeline>/<version>/<name>``.

Every object is written atomically and never overwritten: the bytes go to a hidden temporary
file in the target directory, are fsync'ed, and are then hard-linked to the final name with
``os.link``, which fails if that name exists; the temporary name is then removed. A reader sees
either no file or the whole file. The file system must support hard links (local disks, NFS and
most network file systems do).
"""

from __future__ import annotations

import contextlib
import errno
import os
import tempfile
from pathlib import Path

from privgraph.errors import (
    ArtifactError,
    ArtifactExistsError,
    ArtifactIntegrityError,
    StoreFullError,
    StoreUnavailableError,
)
from privgraph.storage.base import ArtifactStore
from privgraph.storage.names import ArtifactNameError

__all__ = ["LocalStore"]

_TMP_PREFIX = ".tmp-"


def _current_umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


# mkstemp creates 0600 files; artifacts get the permissions an ordinary file would get
_FILE_MODE = 0o666 & ~_current_umask()


def _fsync_dir(path: Path) -> None:
    """Make a new directory entry durable (best effort: not every platform allows it)."""
    with contextlib.suppress(OSError):
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


class LocalStore(ArtifactStore):
    """A directory artifact store (the embedded default).

    Args:
        root (str | Path): the store's directory; created on the first write.
    """

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root).expanduser().absolute()

    def __repr__(self) -> str:
        return f"LocalStore({str(self.root)!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, LocalStore) and other.root == self.root

    def __hash__(self) -> int:
        return hash((LocalStore, self.root))

    def _path(self, key: str) -> Path:
        parts = key.split("/")
        for part in parts:
            # pipeline / version / object: each one safe path component (defence in depth; the
            # base class validates names before they reach a backend)
            if not part or part.startswith(".") or "\\" in part or os.sep in part:
                raise ArtifactNameError(f"unsafe key {key!r} for {self!r}")
        path = self.root
        for part in parts:  # a link planted inside the store is never followed (read or write)
            path = path / part
            if path.is_symlink():
                raise ArtifactIntegrityError(f"{path} is a symbolic link; the store never follows links")
        return path

    def check_writable(self) -> None:
        """Create the directory if needed, and write, sync and remove one hidden one-byte file in it
        (an empty file needs no free block: a full disk is found only by writing data)."""
        try:
            self.root.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(prefix=_TMP_PREFIX, dir=self.root)
            try:
                os.write(fd, b"\0")
                os.fsync(fd)
            finally:
                os.close(fd)
                os.unlink(tmp)
        except OSError as exc:
            why = exc.strerror or type(exc).__name__
            if exc.errno in (errno.ENOSPC, errno.EDQUOT, errno.EIO):
                raise StoreUnavailableError(f"artifact store {self.root}: {why}") from exc
            raise ArtifactError(f"artifact store {self.root}: cannot write a version here ({why})") from None

    # -- primitives -------------------------------------------------------------------------------
    def _put_new(self, key: str, data: bytes) -> None:
        try:
            self._write_new(key, data)
        except OSError as exc:
            if exc.errno in (errno.ENOSPC, errno.EDQUOT):  # not transient: no retry can pass it
                raise StoreFullError(f"artifact store {self.root}: {exc.strerror} writing {key}; free space there "
                                     "and run again (`privgraph artifacts gc` removes the staged objects)") from None
            raise

    def _write_new(self, key: str, data: bytes) -> None:
        final = self._path(key)
        final.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp_name = tempfile.mkstemp(prefix=_TMP_PREFIX, dir=final.parent)
        tmp = Path(tmp_name)
        try:
            with os.fdopen(fd, "wb") as fh:
                with contextlib.suppress(OSError, AttributeError):  # no fchmod on Windows
                    os.fchmod(fh.fileno(), _FILE_MODE)
                fh.write(data)
                fh.flush()
                os.fsync(fh.fileno())
            try:
                os.link(tmp, final)  # atomic; fails if final exists: never overwrite
            except FileExistsError:
                raise ArtifactExistsError(f"{final} exists already; artifacts are never overwritten") from None
        finally:  # at once: a reader that lists a published version refuses a name its manifest lacks
            with contextlib.suppress(FileNotFoundError):
                tmp.unlink()
        _fsync_dir(final.parent)

    def _get(self, key: str) -> bytes:
        try:
            return self._path(key).read_bytes()
        except (FileNotFoundError, NotADirectoryError):
            raise KeyError(key) from None

    def _exists(self, key: str) -> bool:
        return self._path(key).is_file()

    def _list_prefixes(self, prefix: str) -> list[str]:
        base = self._path(prefix.rstrip("/")) if prefix else self.root
        try:
            children = list(base.iterdir())
        except (FileNotFoundError, NotADirectoryError):
            return []
        return sorted(
            c.name for c in children if c.is_dir() and not c.is_symlink() and not c.name.startswith(".")
        )

    def _list_names(self, prefix: str) -> list[str]:
        base = self._path(prefix.rstrip("/"))
        try:
            children = list(base.iterdir())
        except (FileNotFoundError, NotADirectoryError):
            return []
        return sorted(c.name for c in children if c.is_file() and not c.is_symlink() and not c.name.startswith("."))

    def _list_everything(self, prefix: str) -> list[str]:
        """Every entry of the directory, hidden ones and links included; a directory (whatever it
        holds) as ``name/``."""
        base = self._path(prefix.rstrip("/"))
        try:
            with os.scandir(base) as entries:
                return sorted(e.name + ("/" if e.is_dir(follow_symlinks=False) else "") for e in entries)
        except (FileNotFoundError, NotADirectoryError):
            return []

    def _remove_staged(self, pipeline: str, version: str) -> None:
        super()._remove_staged(pipeline, version)
        folder = self._path(f"{pipeline}/{version}")
        with contextlib.suppress(FileNotFoundError, NotADirectoryError):
            for leftover in folder.glob(f"{_TMP_PREFIX}*"):  # a write killed before its rename
                with contextlib.suppress(FileNotFoundError):
                    leftover.unlink()
        with contextlib.suppress(OSError):
            folder.rmdir()

    def _copy_new(self, src: str, dst: str) -> None:
        """A hard link at ``dst`` (atomic; fails if it exists): no byte is read or copied."""
        source, final = self._path(src), self._path(dst)
        if not source.is_file():
            raise KeyError(src)
        final.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.link(source, final)
        except FileExistsError:
            raise ArtifactExistsError(f"{final} exists already; artifacts are never overwritten") from None
        _fsync_dir(final.parent)

    def _delete(self, key: str) -> None:
        path = self._path(key)
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
        # remove the version directory once a failed write left it empty
        with contextlib.suppress(OSError):
            path.parent.rmdir()
