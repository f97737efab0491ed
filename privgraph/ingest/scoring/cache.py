"""A directory cache of score results, keyed by an input fingerprint.

The key is a SHA-256 over the exact inputs a score computation reads (the public rows' feature
and label bytes, the SHAP sample positions, the score configuration, the model file's hash, the
code and library versions); it is a hash, never data. An entry holds only public outputs
(theta, alpha, beta, provenance, the Guarantee): no rows, no seed.

Directory: the ``directory`` argument, else ``$PRIVGRAPH_CACHE_DIR/scores``, else
``~/.cache/privgraph/scores`` (the same root as the Planetoid download cache). Writes are
atomic: a temporary file in the same directory, fsync, then ``os.replace``. An unreadable or
malformed entry is a miss (and is overwritten by the next put).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any


from privgraph.guarantee.private_files import write_private_file

import numpy as np

__all__ = ["DirectoryCache", "ScoreCache", "default_cache_dir", "fingerprint"]

_KEY = re.compile(r"^[0-9a-f]{64}$")


def default_cache_dir() -> Path:
    """``$PRIVGRAPH_CACHE_DIR/scores`` if set, else ``~/.cache/privgraph/scores``."""
    base = os.environ.get("PRIVGRAPH_CACHE_DIR")
    root = Path(base).expanduser() if base else Path.home() / ".cache" / "privgraph"
    return root / "scores"


def _feed(h: Any, value: Any) -> None:
    """Feed ``value`` to the hash unambiguously (type tag, length prefix; arrays with dtype/shape)."""
    if value is None:
        h.update(b"N")
    elif isinstance(value, np.ndarray):
        a = np.ascontiguousarray(value)
        header = json.dumps([a.dtype.str, list(a.shape)]).encode()
        h.update(b"A" + len(header).to_bytes(8, "little") + header)
        b = a.tobytes()
        h.update(len(b).to_bytes(8, "little") + b)
    elif isinstance(value, (bytes, bytearray)):
        h.update(b"B" + len(value).to_bytes(8, "little") + bytes(value))
    elif isinstance(value, Mapping):
        h.update(b"M" + len(value).to_bytes(8, "little"))
        for k in sorted(value, key=str):
            _feed(h, str(k))
            _feed(h, value[k])
    elif isinstance(value, (list, tuple)):
        h.update(b"L" + len(value).to_bytes(8, "little"))
        for v in value:
            _feed(h, v)
    else:
        s = json.dumps(value, sort_keys=True, allow_nan=False).encode()
        h.update(b"J" + len(s).to_bytes(8, "little") + s)


def fingerprint(parts: Mapping[str, Any]) -> str:
    """SHA-256 hex of named parts (arrays, bytes, JSON-able values, nested mappings/lists)."""
    h = hashlib.sha256(b"privgraph.scoring.cache/1")
    _feed(h, dict(parts))
    return h.hexdigest()


class DirectoryCache:
    """A directory of cache entries, one file per key, written atomically with mode 0600 (the
    base of :class:`ScoreCache` and :class:`privgraph.ingest.embed.cache.EmbeddingCache`).

    Attributes:
        directory: where entries live (created on the first put, mode 0700).
        hits, misses, puts: counters (instrumentation for callers and tests).
    """

    def __init__(self, directory: str | os.PathLike[str] | None = None) -> None:
        self.directory = Path(directory).expanduser() if directory is not None else self.default_directory()
        self.hits = 0
        self.misses = 0
        self.puts = 0

    @staticmethod
    def default_directory() -> Path:
        return default_cache_dir()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({str(self.directory)!r})"

    def _write(self, p: Path, body: bytes) -> Path:
        """``body`` to ``p`` atomically, mode 0600 (directories 0700)."""
        write_private_file(p, body)
        self.puts += 1
        return p


class ScoreCache(DirectoryCache):
    """Score results on disk, one JSON file per key."""

    def path(self, key: str) -> Path:
        if not isinstance(key, str) or not _KEY.match(key):
            raise ValueError(f"a cache key is 64 lowercase hex digits, got {key!r}")
        return self.directory / f"{key}.json"

    def get(self, key: str) -> dict[str, Any] | None:
        """The stored payload, or ``None`` (a miss) when absent or unreadable."""
        p = self.path(key)
        try:
            with open(p, encoding="utf-8") as fh:
                payload = json.load(fh)
        except (OSError, ValueError):
            self.misses += 1
            return None
        if not isinstance(payload, dict) or payload.get("key") != key:
            self.misses += 1
            return None
        self.hits += 1
        return payload

    def put(self, key: str, payload: Mapping[str, Any]) -> Path:
        """Store ``payload`` (JSON-able) under ``key`` atomically; returns the entry's path."""
        body = json.dumps({**payload, "key": key}, sort_keys=True, allow_nan=False)
        return self._write(self.path(key), body.encode("utf-8"))
