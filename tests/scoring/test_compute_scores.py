"""compute_scores end to end: Cora (real data) and the synthetic graph; provenance holds no secrets."""

from __future__ import annotations

import json

import numpy as np
import pytest

from privgraph.mechanisms.features.feature_rr import FeatureRR
from privgraph.ingest.scoring import compute_scores

SEED = 918273645
SENSITIVE = [3, 19, 200, 777, 1400]


def _walk(obj, path=""):
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield f"{path}.{k}", k, v
            yield from _walk(v, f"{path}.{k}")
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            yield from _walk(v, f"{path}[{i}]")


def assert_no_secrets(prov, node_ids):
    text = json.dumps(prov)
    assert str(SEED) not in text and str(SELECTION_SEED) not in text
    for _, k, v in _walk(prov):
        assert "seed" not in str(k).lower()
        if isinstance(v, list) and len(v) >= 10 and all(isinstance(i, int) for i in v):
            assert not set(v) & set(int(i) for i in node_ids), "node ids in provenance"


SELECTION_SEED = 424242
CORA_CFG = {
    "gamma": 0.5,
    "public_nodes": {"rule": "train_mask", "selection_seed": SELECTION_SEED},
    "importance": {"background_size": 100, "explain_size": 140},
    "sensitivity": {"sensitive_columns": SENSITIVE},
}


@pytest.fixture(scope="module")
def cora_cache(tmp_path_factory):
    return tmp_path_factory.mktemp("scores")


@pytest.fixture(scope="module")
def cora_scores(cora, cora_cache):
    return compute_scores(cora, CORA_CFG, seed=SEED, cache=cora_cache)


@pytest.mark.dataset
def test_cora_scores(cora, cora_scores):
    r = cora_scores
    d = cora.num_features
    for v in (r.theta, r.alpha, r.beta):
        assert v.shape == (d,) and v.dtype == np.float64 and np.all(v >= 0)
        assert v.sum() == pytest.approx(1.0, abs=1e-9)
    others = np.setdiff1d(np.arange(d), SENSITIVE)
    assert np.all(r.beta[others] == 0.0)
    # Eq. 7 with non-sensitive beta = 0: every non-sensitive feature gets at least the beta_max share
    assert r.theta[others].min() >= r.theta[SENSITIVE].min()
    assert r.guarantee is None
    p = r.provenance
    assert p["public_nodes"]["rule"] == "train_mask" and p["public_nodes"]["size"] == 140
    assert p["importance"]["surrogate"]["train_size"] == 140
    assert 0.0 <= p["importance"]["surrogate"]["accuracy"] <= 1.0
    assert p["sensitivity"]["rows"].startswith("the public node subset")
    mech = FeatureRR(epsilon=8.0, bins=2, theta=r.theta)
    np.testing.assert_allclose(mech.per_feature_epsilon(), 8.0 * r.theta, rtol=1e-12)


@pytest.mark.dataset
def test_cora_provenance_has_no_seed_or_node_ids(cora, cora_scores):
    assert_no_secrets(cora_scores.provenance, np.flatnonzero(cora.train_mask))


@pytest.mark.dataset
def test_cora_cache_hit(cora, cora_scores, cora_cache, monkeypatch):
    from privgraph.ingest.scoring import importance

    def no_training(*a, **k):
        raise AssertionError("a cache hit must not train the surrogate")

    monkeypatch.setattr(importance, "fit_surrogate", no_training)
    again = compute_scores(cora, CORA_CFG, seed=SEED, cache=cora_cache)
    assert again.cache_hit and not cora_scores.cache_hit
    np.testing.assert_array_equal(again.theta, cora_scores.theta)
    assert again.provenance == cora_scores.provenance


@pytest.mark.dataset
def test_cora_refuses_all_labels(cora):
    from privgraph.ingest.scoring import PrivateLabelsError

    with pytest.raises(PrivateLabelsError, match="charge_epsilon"):
        compute_scores(
            cora, {"gamma": 1, "public_nodes": {"rule": "all", "all_features_public": True}}, seed=0, cache=False
        )
    # charging needs the public number of classes, which Cora's loader does not declare
    with pytest.raises(ValueError, match="num_classes"):
        compute_scores(
            cora,
            {"gamma": 1, "public_nodes": {"rule": "all", "all_features_public": True, "charge_epsilon": 1.0}},
            seed=0,
            cache=False,
        )


def test_synthetic_random_rule_deterministic_and_private(synth):
    cfg = {
        "gamma": 0.6,
        "public_nodes": {"rule": "random", "fraction": 0.3, "selection_seed": SELECTION_SEED},
        "importance": {"background_size": 25, "explain_size": 25},
        "sensitivity": {"sensitive_columns": [0, 5], "mask_value": "mean"},
    }
    a = compute_scores(synth, cfg, seed=SEED, cache=False)
    b = compute_scores(synth, cfg, seed=SEED, cache=False)
    np.testing.assert_array_equal(a.theta, b.theta)
    np.testing.assert_array_equal(a.alpha, b.alpha)
    assert a.provenance == b.provenance
    assert a.provenance["public_nodes"]["fraction"] == 0.3 and a.provenance["public_nodes"]["size"] == 72
    assert np.all(a.beta[1:5] == 0.0)
    # Eq. 7: the label column is both important and sensitive; pure-noise non-sensitive columns
    # get (1 - gamma) beta_max + gamma alpha_i
    raw = 0.6 * a.alpha + 0.4 * (a.beta.min() + a.beta.max() - a.beta)
    np.testing.assert_allclose(a.theta, raw / raw.sum(), rtol=1e-12)
    from privgraph.ingest.scoring import public_node_subset
    from privgraph.seeding import stage_seed

    nodes = public_node_subset(
        synth, rule="random", fraction=0.3, seed=stage_seed(np.random.SeedSequence(SELECTION_SEED), "scores.subset")
    ).nodes
    assert_no_secrets(a.provenance, nodes)


def test_published_theta_does_not_depend_on_the_noise_seed(synth):
    """theta is published: were it a function of the secret seed, anyone holding the public rows
    could test candidate seeds against it (and a known seed de-randomizes the release)."""
    cfg = {
        "gamma": 0.5,
        "public_nodes": {"rule": "random", "size": 60},
        "importance": {"background_size": 10, "explain_size": 10},
        "sensitivity": {"sensitive_columns": [1]},
    }
    a = compute_scores(synth, cfg, seed=1, cache=False)
    b = compute_scores(synth, cfg, seed=2, cache=False)
    c = compute_scores(synth, cfg, seed=None, cache=False)
    np.testing.assert_array_equal(a.theta, b.theta)
    np.testing.assert_array_equal(a.theta, c.theta)
    other = {**cfg, "public_nodes": {"rule": "random", "size": 60, "selection_seed": 1}}
    assert not np.array_equal(a.theta, compute_scores(synth, other, seed=1, cache=False).theta)


def test_gamma_endpoints_skip_unneeded_work(synth):
    r0 = compute_scores(
        synth,
        {"gamma": 0, "public_nodes": {"rule": "train_mask"},
         "sensitivity": {"sensitive_columns": [2]}},
        seed=0,
        cache=False,
        private_labels=synth.train_mask,
    )
    # gamma = 0 reads no label, so private labels are no reason to refuse
    assert r0.alpha is None and r0.guarantee is None
    assert r0.theta[2] == 0.0 and np.allclose(r0.theta[[0, 1, 3, 4, 5]], 0.2)
    assert r0.provenance["importance"]["source"] is None


def test_input_validation(synth):
    with pytest.raises(TypeError, match="GraphData"):
        compute_scores(synth.x, {"gamma": 1}, seed=0, cache=False)
    with pytest.raises(ValueError, match="graph.x is None"):
        compute_scores(synth.replace(x=None), {"gamma": 1}, seed=0, cache=False)
    with pytest.raises(ValueError, match="out of range"):
        compute_scores(synth, {"gamma": 0.5, "sensitivity": {"sensitive_columns": [6]}}, seed=0, cache=False)
    with pytest.raises(ValueError, match="single labels"):
        compute_scores(synth.replace(y=None), {"gamma": 1}, seed=0, cache=False)
    with pytest.raises(TypeError, match="config"):
        compute_scores(synth, [0.5], seed=0, cache=False)
