"""The score cache: fingerprints, atomic entries, hits without recomputation, misses on change."""

from __future__ import annotations

import json

import numpy as np
import pytest

from privgraph.ingest.scoring import ScoreCache, compute_scores, default_cache_dir, fingerprint, importance, sensitivity

CFG = {
    "gamma": 0.5,
    "importance": {"background_size": 20, "explain_size": 30},
    "sensitivity": {"sensitive_columns": [3]},
}


def test_fingerprint():
    a = np.arange(6, dtype=np.float32)
    k = fingerprint({"x": a, "cfg": {"g": 0.5}})
    assert len(k) == 64 and k == fingerprint({"cfg": {"g": 0.5}, "x": a.copy()})
    assert k != fingerprint({"x": a.astype(np.float64), "cfg": {"g": 0.5}})  # dtype counts
    b = a.copy()
    b[3] += 1
    assert k != fingerprint({"x": b, "cfg": {"g": 0.5}})
    assert k != fingerprint({"x": a, "cfg": {"g": 0.25}})
    assert fingerprint({"x": None}) != fingerprint({"x": np.zeros(0)})


def test_store_roundtrip_atomic_and_corrupt(tmp_path):
    c = ScoreCache(tmp_path / "c")
    key = "a" * 64
    assert c.get(key) is None and c.misses == 1
    p = c.put(key, {"theta": [0.5, 0.5]})
    assert p.name == f"{key}.json" and [f.name for f in p.parent.iterdir()] == [p.name]  # no temp left
    assert c.get(key)["theta"] == [0.5, 0.5] and c.hits == 1
    p.write_text("{not json")
    assert c.get(key) is None
    with pytest.raises(ValueError, match="hex"):
        c.get("../etc/passwd")


def test_default_dir_from_env(monkeypatch, tmp_path):
    monkeypatch.setenv("PRIVGRAPH_CACHE_DIR", str(tmp_path))
    assert default_cache_dir() == tmp_path / "scores"
    assert ScoreCache().directory == tmp_path / "scores"
    monkeypatch.delenv("PRIVGRAPH_CACHE_DIR")
    assert default_cache_dir().parts[-3:] == (".cache", "privgraph", "scores")


def _count_calls(monkeypatch):
    calls = {"fit": 0, "beta": 0}
    real_fit, real_beta = importance.fit_surrogate, sensitivity.masking_sensitivity

    def fit(*a, **k):
        calls["fit"] += 1
        return real_fit(*a, **k)

    def beta(*a, **k):
        calls["beta"] += 1
        return real_beta(*a, **k)

    monkeypatch.setattr(importance, "fit_surrogate", fit)
    monkeypatch.setattr(sensitivity, "masking_sensitivity", beta)
    return calls


def test_hit_without_recompute_and_misses(synth, tmp_path, monkeypatch):
    calls = _count_calls(monkeypatch)
    cache = ScoreCache(tmp_path)
    r1 = compute_scores(synth, CFG, seed=1, cache=cache)
    assert not r1.cache_hit and calls == {"fit": 1, "beta": 1} and cache.puts == 1
    r2 = compute_scores(synth, CFG, seed=1, cache=cache)
    assert r2.cache_hit and calls == {"fit": 1, "beta": 1}  # nothing recomputed
    np.testing.assert_array_equal(r1.theta, r2.theta)
    np.testing.assert_array_equal(r1.alpha, r2.alpha)
    np.testing.assert_array_equal(r1.beta, r2.beta)
    assert r1.provenance == r2.provenance and r1.cache_key == r2.cache_key
    # a path argument reaches the same entries
    assert compute_scores(synth, CFG, seed=1, cache=str(tmp_path)).cache_hit
    # a changed config misses
    r3 = compute_scores(synth, {**CFG, "gamma": 0.75}, seed=1, cache=cache)
    assert not r3.cache_hit and calls["fit"] == 2
    # a changed input misses
    x = synth.x.copy()
    x[np.flatnonzero(synth.train_mask)[0], 0] += 0.01
    r4 = compute_scores(synth.replace(x=x), CFG, seed=1, cache=cache)
    assert not r4.cache_hit and calls["fit"] == 3
    # another SHAP sample (selection_seed) misses; another noise seed does not change an
    # uncharged result, nor does a change outside the public subset
    sel = {**CFG, "public_nodes": {"selection_seed": 5}}
    assert not compute_scores(synth, sel, seed=1, cache=cache).cache_hit
    assert compute_scores(synth, CFG, seed=2, cache=cache).cache_hit
    x = synth.x.copy()
    x[np.flatnonzero(synth.test_mask)[0]] += 0.5
    assert compute_scores(synth.replace(x=x), CFG, seed=1, cache=cache).cache_hit
    # the entry holds no rows: only scores and the public record
    entry = json.loads(cache.path(r1.cache_key).read_text())
    assert set(entry) == {"schema", "theta", "alpha", "beta", "provenance", "guarantee", "key"}


def test_charged_hit_returns_the_guarantee(synth, tmp_path):
    cfg = {**CFG, "public_nodes": {"rule": "train_mask", "charge_epsilon": 0.5}}
    private = synth.train_mask
    r1 = compute_scores(synth, cfg, seed=3, cache=tmp_path, private_labels=private)
    r2 = compute_scores(synth, cfg, seed=3, cache=tmp_path, private_labels=private)
    assert r2.cache_hit and r2.guarantee == r1.guarantee and r2.guarantee.epsilon == 0.5
    # other label noise (another secret seed) is another input: a miss
    assert not compute_scores(synth, cfg, seed=4, cache=tmp_path, private_labels=private).cache_hit


def test_cache_off_and_unfingerprintable_embed(synth, tmp_path, monkeypatch):
    calls = _count_calls(monkeypatch)
    r = compute_scores(synth, CFG, seed=1, cache=False)
    assert r.cache_key is None
    ident = lambda a: np.asarray(a, dtype=np.float64)  # noqa: E731
    cache = ScoreCache(tmp_path)
    compute_scores(synth, CFG, seed=1, cache=cache, embed=ident)
    compute_scores(synth, CFG, seed=1, cache=cache, embed=ident)
    assert cache.puts == 0 and calls["fit"] == 3  # a callable cannot be fingerprinted: no cache
    compute_scores(synth, CFG, seed=1, cache=cache, embed=ident, embed_id="identity-v1")
    assert compute_scores(synth, CFG, seed=1, cache=cache, embed=ident, embed_id="identity-v1").cache_hit
    with pytest.raises(TypeError, match="cache must be"):
        compute_scores(synth, CFG, seed=1, cache=123)
