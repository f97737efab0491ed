"""EmbeddingCache and cached_embed: hits, misses on changed bytes / weights / corrupt entries,
private file modes, and that only vectors (never images) are stored."""

from __future__ import annotations

import hashlib
import os
import stat
from pathlib import Path

import numpy as np
import pytest
import skimage.data
from PIL import Image

from privgraph.ingest.embed.backbone import ResNetEmbedder
from privgraph.ingest.embed.cache import EmbeddingCache, cached_embed, default_cache_dir, image_sha256


class FakeEmbedder:
    """Deterministic 8-d vectors from the file bytes; records every embed_paths call."""

    def __init__(self, model_id: str = "fake/v1") -> None:
        self.model_id = model_id
        self.calls: list[list[Path]] = []

    def embed_paths(self, paths):
        self.calls.append([Path(p) for p in paths])
        rows = [np.frombuffer(hashlib.sha256(Path(p).read_bytes()).digest()[:8], np.uint8) for p in paths]
        return np.asarray(rows, np.float32).reshape(len(rows), 8) / 255.0


@pytest.fixture
def files(tmp_path) -> list[Path]:
    astro = skimage.data.astronaut()
    out = []
    for i in range(3):
        p = tmp_path / "img" / f"{i}.png"
        p.parent.mkdir(exist_ok=True)
        Image.fromarray(astro[i * 20 : i * 20 + 32, 100:132]).save(p)
        out.append(p)
    return out


def test_second_call_is_all_hits_and_equal(tmp_path, files):
    cache, emb = EmbeddingCache(tmp_path / "cache"), FakeEmbedder()
    first, s1 = cached_embed(files, emb, cache)
    assert s1 == {"hits": 0, "misses": 3} and len(emb.calls) == 1 and emb.calls[0] == files
    second, s2 = cached_embed(files, emb, cache)
    assert s2 == {"hits": 3, "misses": 0} and len(emb.calls) == 1
    np.testing.assert_array_equal(first, second)
    assert second.dtype == np.float32 and second.shape == (3, 8)
    assert (cache.hits, cache.misses, cache.puts) == (3, 3, 3)


def test_only_misses_are_embedded_in_one_call_rows_in_input_order(tmp_path, files):
    cache, emb = EmbeddingCache(tmp_path / "cache"), FakeEmbedder()
    cached_embed(files[1:2], emb, cache)
    out, stats = cached_embed(files, emb, cache)
    assert stats == {"hits": 1, "misses": 2}
    assert emb.calls[-1] == [files[0], files[2]]
    np.testing.assert_array_equal(out, emb.embed_paths(files))


def test_changed_image_and_variant_are_misses(tmp_path, files):
    cache, emb = EmbeddingCache(tmp_path / "cache"), FakeEmbedder()
    before, _ = cached_embed(files, emb, cache)
    Image.fromarray(skimage.data.coffee()[:32, :32]).save(files[1])  # different bytes, same name
    after, stats = cached_embed(files, emb, cache)
    assert stats == {"hits": 2, "misses": 1} and emb.calls[-1] == [files[1]]
    assert not np.array_equal(before[1], after[1])
    _, masked = cached_embed(files, emb, cache, variant="masked:retinaface:0.9:0.1")
    assert masked == {"hits": 0, "misses": 3}


def test_other_weights_are_a_miss(tmp_path, files):
    cache = EmbeddingCache(tmp_path / "cache")
    e0 = ResNetEmbedder("random", seed=0, device="cpu")
    a, s = cached_embed(files[:1], e0, cache)
    assert s == {"hits": 0, "misses": 1} and a.shape == (1, 2048)
    b, s = cached_embed(files[:1], e0, cache)
    assert s == {"hits": 1, "misses": 0}
    np.testing.assert_array_equal(a, b)
    e1 = ResNetEmbedder("random", seed=1, device="cpu")
    c, s = cached_embed(files[:1], e1, cache)
    assert s == {"hits": 0, "misses": 1} and not np.allclose(a, c)


def test_private_modes_and_two_level_layout(tmp_path, files):
    old = os.umask(0o022)
    try:
        cache = EmbeddingCache(tmp_path / "owner" / "embeddings")
        cached_embed(files[:1], FakeEmbedder(), cache)
    finally:
        os.umask(old)
    key = cache.key(image_sha256(files[0]), "fake/v1")
    entry = cache.path(key)
    assert entry.is_file() and entry.parent.name == key[:2] and entry.name == f"{key}.npy"
    assert stat.S_IMODE(entry.stat().st_mode) == 0o600
    for d in (tmp_path / "owner", cache.directory, entry.parent):
        assert stat.S_IMODE(d.stat().st_mode) == 0o700, d


def test_corrupt_entry_is_a_miss_and_is_overwritten(tmp_path, files):
    cache, emb = EmbeddingCache(tmp_path / "cache"), FakeEmbedder()
    good, _ = cached_embed(files[:1], emb, cache)
    entry = cache.path(cache.key(image_sha256(files[0]), emb.model_id))
    entry.write_bytes(b"\x93NUMPY garbage \x00\xff" * 3)
    found, missing = cache.get_many([cache.key(image_sha256(files[0]), emb.model_id)])
    assert found == {} and missing == [0]
    again, stats = cached_embed(files[:1], emb, cache)
    assert stats == {"hits": 0, "misses": 1}
    np.testing.assert_array_equal(again, good)
    np.testing.assert_array_equal(np.load(entry, allow_pickle=False), good[0])


def test_the_cache_stores_only_vectors(tmp_path, files):
    cache = EmbeddingCache(tmp_path / "cache")
    cached_embed(files, FakeEmbedder(), cache)
    stored = [p for p in cache.directory.rglob("*") if p.is_file()]
    assert len(stored) == 3 and all(p.suffix == ".npy" for p in stored)
    images = [f.read_bytes() for f in files]
    for p in stored:
        v = np.load(p, allow_pickle=False)
        assert v.dtype == np.float32 and v.shape == (8,)
        assert not any(img[:64] in p.read_bytes() for img in images)


def test_default_directory_and_key(tmp_path, monkeypatch):
    monkeypatch.setenv("PRIVGRAPH_CACHE_DIR", str(tmp_path / "root"))
    assert EmbeddingCache().directory == tmp_path / "root" / "embeddings"
    monkeypatch.delenv("PRIVGRAPH_CACHE_DIR")
    assert default_cache_dir() == Path.home() / ".cache" / "privgraph" / "embeddings"
    k = EmbeddingCache.key("a" * 64, "m")
    assert len(k) == 64 and k != EmbeddingCache.key("a" * 64, "m", "masked") != EmbeddingCache.key("b" * 64, "m")
    assert k != EmbeddingCache.key("a" * 64, "m2")
    with pytest.raises(ValueError, match="64 lowercase hex"):
        EmbeddingCache(tmp_path).path("../x")
    with pytest.raises(ValueError, match="finite"):
        EmbeddingCache(tmp_path).put(k, np.array([1.0, np.nan]))
