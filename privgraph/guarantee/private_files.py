"""Files only the data owner may read: directories 0700, files 0600, written atomically.

The ground floor of every private store of privgraph (the owner's private records, the score and
embedding caches, comparison checkpoints): one way to create them, importing nothing of privgraph.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Sequence
from pathlib import Path

__all__ = ["mkdir_private", "write_private_file"]


def mkdir_private(path: Path) -> None:
    """Create ``path`` and every missing parent with mode 0700 (owner only), whatever the umask."""
    missing = []
    p = Path(path)
    while not p.exists() and p != p.parent:
        missing.append(p)
        p = p.parent
    for d in reversed(missing):
        with contextlib.suppress(FileExistsError):  # a concurrent run created it
            d.mkdir(mode=0o700)
            d.chmod(0o700)


def write_private_file(path: Path, data: bytes | Sequence[bytes | memoryview], *, durable: bool = True) -> None:
    """Write ``data`` (bytes, or buffers written one after the other) at ``path`` atomically (a
    temporary file beside it, fsync, ``os.replace``), mode 0600 from creation on; missing
    directories are created 0700. ``durable=False`` skips the fsync (a staging file that a crash
    discards anyway: still atomic, never half-written)."""
    mkdir_private(path.parent)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
    try:
        os.fchmod(fd, 0o600)
        with os.fdopen(fd, "wb") as f:
            for chunk in [data] if isinstance(data, bytes) else data:
                f.write(chunk)
            f.flush()
            if durable:
                os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
