"""A content-addressed cache of image embeddings: the data owner's private cache.

An entry is one float32 vector in a ``.npy`` file, named by a SHA-256 key over the image file's
bytes hash, the model id (:attr:`ResNetEmbedder.model_id`: architecture, layer, weights hash,
preprocessing version) and a ``variant`` (e.g. ``"masked:retinaface:0.9:0.1"`` for face-masked
embeddings). The image itself is never stored, but embeddings of private images are private data:
directories are created 0700 and files 0600, and the cache lives under the owner's cache root.

Directory: the ``directory`` argument, else ``$PRIVGRAPH_CACHE_DIR/embeddings``, else
``~/.cache/privgraph/embeddings`` (the root of :func:`privgraph.ingest.scoring.cache.default_cache_dir`).
Entries sit in a two-level layout, ``ab/abcdef....npy``. Writes are atomic (a temporary file in
the same directory, fsync, ``os.replace``); an unreadable or malformed entry is a miss and is
overwritten by the next put.
"""

from __future__ import annotations

import hashlib
import io
import os
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from privgraph.errors import DatasetNotFoundError
from privgraph.ingest.scoring.cache import DirectoryCache, default_cache_dir as _scores_cache_dir, fingerprint

__all__ = ["EmbeddingCache", "Embedder", "cached_embed", "default_cache_dir", "image_sha256"]

_KEY = re.compile(r"^[0-9a-f]{64}$")
_CHUNK = 1 << 20


def default_cache_dir() -> Path:
    """``$PRIVGRAPH_CACHE_DIR/embeddings`` if set, else ``~/.cache/privgraph/embeddings``."""
    return _scores_cache_dir().parent / "embeddings"


def image_sha256(path: str | os.PathLike[str]) -> str:
    """SHA-256 hex of the file's bytes (read in 1 MiB chunks)."""
    p = Path(path)
    h = hashlib.sha256()
    try:
        with open(p, "rb") as fh:
            for chunk in iter(lambda: fh.read(_CHUNK), b""):
                h.update(chunk)
    except (FileNotFoundError, IsADirectoryError) as exc:
        raise DatasetNotFoundError(f"embed: image file not found: {p}") from exc
    return h.hexdigest()


class Embedder(Protocol):
    """What :func:`cached_embed` needs of an embedder (:class:`ResNetEmbedder` has it)."""

    @property
    def model_id(self) -> str: ...

    def embed_paths(self, paths: Sequence[str | os.PathLike[str]]) -> np.ndarray: ...


class EmbeddingCache(DirectoryCache):
    """Embedding vectors on disk, one ``.npy`` per key (the owner's private cache: 0700 / 0600)."""

    @staticmethod
    def default_directory() -> Path:
        return default_cache_dir()

    @staticmethod
    def key(image_bytes_hash: str, model_id: str, variant: str = "") -> str:
        """The entry key: SHA-256 hex over the image bytes' hash, the model id and the variant."""
        for name, v in (("image_bytes_hash", image_bytes_hash), ("model_id", model_id), ("variant", variant)):
            if not isinstance(v, str):
                raise TypeError(f"EmbeddingCache.key: {name} must be a str, got {type(v).__name__}")
        if not image_bytes_hash or not model_id:
            raise ValueError("EmbeddingCache.key: image_bytes_hash and model_id must not be empty")
        return fingerprint(
            {"cache": "privgraph.embed.cache/1", "image": image_bytes_hash, "model": model_id, "variant": variant}
        )

    def path(self, key: str) -> Path:
        """The entry file of ``key``: ``<directory>/<key[:2]>/<key>.npy``."""
        if not isinstance(key, str) or not _KEY.match(key):
            raise ValueError(f"a cache key is 64 lowercase hex digits, got {key!r}")
        return self.directory / key[:2] / f"{key}.npy"

    def get(self, key: str) -> np.ndarray | None:
        """The stored float32 vector, or ``None`` (a miss) when absent or unreadable."""
        try:
            with open(self.path(key), "rb") as fh:
                vec = np.load(fh, allow_pickle=False)
        except (OSError, ValueError, EOFError):
            vec = None
        if vec is None or vec.dtype != np.float32 or vec.ndim != 1 or vec.size == 0 or not np.isfinite(vec).all():
            self.misses += 1
            return None
        self.hits += 1
        return vec

    def get_many(self, keys: Sequence[str]) -> tuple[dict[int, np.ndarray], list[int]]:
        """``(found, missing)``: vectors by position in ``keys``, and the positions not cached."""
        found: dict[int, np.ndarray] = {}
        missing: list[int] = []
        for i, k in enumerate(keys):
            v = self.get(k)
            if v is None:
                missing.append(i)
            else:
                found[i] = v
        return found, missing

    def put(self, key: str, vector: Any) -> Path:
        """Store ``vector`` (1-d, finite, saved as float32) under ``key`` atomically, mode 0600."""
        p = self.path(key)
        vec = np.ascontiguousarray(vector, dtype=np.float32)
        if vec.ndim != 1 or vec.size == 0 or not np.isfinite(vec).all():
            raise ValueError(f"EmbeddingCache.put: a vector must be 1-d, non-empty and finite, got shape {vec.shape}")
        buf = io.BytesIO()
        np.save(buf, vec, allow_pickle=False)
        return self._write(p, buf.getvalue())

def cached_embed(
    paths: Sequence[str | os.PathLike[str]],
    embedder: Embedder,
    cache: EmbeddingCache,
    *,
    variant: str = "",
) -> tuple[np.ndarray, dict[str, int]]:
    """Embeddings of ``paths`` (rows in input order), computing only the ones not in ``cache``.

    Each file's bytes are hashed; the misses are embedded in ONE ``embedder.embed_paths`` call and
    stored. Returns the ``[n, d]`` float32 array and ``{"hits": ..., "misses": ...}`` of this call.
    ``variant`` must name everything else that changes the embedding (e.g. face masking).
    """
    ps = [Path(p) for p in paths]
    if not ps:
        return np.asarray(embedder.embed_paths([]), dtype=np.float32), {"hits": 0, "misses": 0}
    model_id = embedder.model_id
    keys = [cache.key(image_sha256(p), model_id, variant) for p in ps]
    found, missing = cache.get_many(keys)
    if missing:
        fresh = np.asarray(embedder.embed_paths([ps[i] for i in missing]), dtype=np.float32)
        if fresh.ndim != 2 or fresh.shape[0] != len(missing):
            raise ValueError(
                f"cached_embed: the embedder returned shape {fresh.shape} for {len(missing)} images"
            )
        for row, i in enumerate(missing):
            cache.put(keys[i], fresh[row])
            found[i] = fresh[row]
    dims = {v.shape[0] for v in found.values()}
    if len(dims) != 1:
        raise ValueError(f"cached_embed: cached vectors of different lengths {sorted(dims)} under one model id")
    out = np.stack([found[i] for i in range(len(ps))]).astype(np.float32, copy=False)
    return out, {"hits": len(ps) - len(missing), "misses": len(missing)}
