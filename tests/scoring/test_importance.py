"""alpha (Eq. 6): SHAP on a surrogate trained on public data; the public node subset; refusals."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.linear_model import LogisticRegression

from privgraph.guarantee import GuaranteeKind, Scope
from privgraph.mechanisms.features.label_rr import LabelRR
from privgraph.ingest.scoring import (
    PrivateLabelsError,
    compute_scores,
    importance,
    linear_shap_values,
    load_linear_surrogate,
    model_file_importance,
    public_node_subset,
    save_linear_surrogate,
    shap_importance,
)


def test_alpha_normalised_and_label_column_dominates(synth):
    x, y = synth.x[synth.train_mask], synth.y[synth.train_mask]
    alpha, prov = shap_importance(x, y, seed=3, background_size=50, explain_size=80)
    assert alpha.shape == (6,) and alpha.dtype == np.float64
    assert np.all(alpha >= 0)
    assert alpha.sum() == pytest.approx(1.0, abs=1e-12)
    assert alpha[0] > 3 * alpha[1:].max()  # column 0 determines the label, the others are noise
    assert prov["source"] == "public_subset"
    assert prov["surrogate"]["type"] == "sklearn.linear_model.LogisticRegression"
    assert prov["surrogate"]["accuracy"] > 0.8
    assert prov["explainer"]["type"] == "shap.LinearExplainer"
    assert (prov["explainer"]["background_size"], prov["explainer"]["explain_size"]) == (50, 80)


def test_alpha_deterministic_given_seed(synth):
    x, y = synth.x[synth.train_mask], synth.y[synth.train_mask]
    a1, p1 = shap_importance(x, y, seed=11, background_size=30, explain_size=40)
    a2, p2 = shap_importance(x, y, seed=11, background_size=30, explain_size=40)
    a3, _ = shap_importance(x, y, seed=np.random.default_rng(11), background_size=30, explain_size=40)
    np.testing.assert_array_equal(a1, a2)
    np.testing.assert_array_equal(a1, a3)
    assert p1 == p2


@pytest.mark.parametrize("classes", [2, 4])
def test_linear_explainer_additivity(make_synth, classes):
    g = make_synth(classes=classes, seed=5)
    x, y = g.x.astype(np.float64), g.y
    model = LogisticRegression(max_iter=500).fit(x, y)
    phi, base = linear_shap_values(model.coef_, model.intercept_, x[:40], x[100:130])
    outputs = 1 if classes == 2 else classes
    assert phi.shape == (30, x.shape[1], outputs) and base.shape == (outputs,)
    margin = model.decision_function(x[100:130]).reshape(30, outputs)
    np.testing.assert_allclose(phi.sum(axis=1) + base, margin, rtol=1e-10, atol=1e-10)
    # exact for a linear model: phi = coef (x - mean_background)
    c = model.coef_.reshape(outputs, -1)
    np.testing.assert_allclose(phi[3, :, 0], c[0] * (x[103] - x[:40].mean(0)), rtol=1e-10, atol=1e-12)


def test_shap_importance_validation(synth):
    x, y = synth.x, synth.y
    with pytest.raises(ValueError, match="single class"):
        shap_importance(x, np.zeros_like(y), seed=0)
    with pytest.raises(ValueError, match="C must be"):
        shap_importance(x, y, seed=0, C=0.0)
    with pytest.raises(ValueError, match="finite"):
        shap_importance(np.where(x > 0.5, np.nan, x), y, seed=0)
    with pytest.raises(ValueError, match="labels but the features have"):
        shap_importance(x, y[:-1], seed=0)
    with pytest.raises(TypeError, match="integer labels"):
        shap_importance(x, y.astype(float), seed=0)


# -- the public node subset -------------------------------------------------------------------------


def test_subset_train_mask(synth):
    s = public_node_subset(synth, rule="train_mask")
    np.testing.assert_array_equal(s.nodes, np.flatnonzero(synth.train_mask))
    assert not s.private_labels.any()
    assert s.description["size"] == synth.train_mask.sum()
    assert "train_mask" in s.description["selection"]
    assert str(s.nodes[5]) not in repr(s)


def test_subset_random(synth):
    a = public_node_subset(synth, rule="random", fraction=0.25, seed=7)
    b = public_node_subset(synth, rule="random", fraction=0.25, seed=7)
    c = public_node_subset(synth, rule="random", fraction=0.25, seed=8)
    np.testing.assert_array_equal(a.nodes, b.nodes)
    assert not np.array_equal(a.nodes, c.nodes)
    assert a.size == round(0.25 * synth.num_nodes)
    assert not synth.test_mask[a.nodes].any()  # evaluation labels never feed the scores
    assert a.description["fraction"] == 0.25 and a.description["excluded_masks"] == ["test_mask"]
    # nodes whose labels the pipeline declares private are not drawn
    d = public_node_subset(synth, rule="random", size=30, seed=1, private_label_masks=["train_mask"])
    assert not (synth.train_mask | synth.test_mask)[d.nodes].any()
    assert d.description["excluded_masks"] == ["test_mask", "train_mask"]
    with pytest.raises(ValueError, match="only"):
        public_node_subset(synth, rule="random", size=200, seed=1, private_label_masks=["train_mask"])
    with pytest.raises(ValueError, match="exactly one"):
        public_node_subset(synth, rule="random", seed=1)
    with pytest.raises(ValueError, match="fraction must be in"):
        public_node_subset(synth, rule="random", fraction=1.5, seed=1)
    with pytest.raises(ValueError, match="apply to rule 'random' only"):
        public_node_subset(synth, rule="train_mask", fraction=0.5)
    with pytest.raises(ValueError, match="rule must be one of"):
        public_node_subset(synth, rule="everything")
    with pytest.raises(ValueError, match="unknown mask"):
        public_node_subset(synth, rule="train_mask", private_label_masks=["secret_mask"])


def test_refuses_private_labels(synth):
    with pytest.raises(PrivateLabelsError) as e:
        public_node_subset(synth, rule="all", all_features_public=True)
    msg = str(e.value)
    assert "SHAP on private labels" in msg and "leaks them through alpha" in msg and "charge_epsilon" in msg
    with pytest.raises(PrivateLabelsError, match="charge_epsilon"):
        public_node_subset(synth, rule="train_mask", private_label_masks=["train_mask"])
    # rule all reads every node's raw features: a label charge does not cover them
    with pytest.raises(PrivateLabelsError, match="features of EVERY node"):
        public_node_subset(synth, rule="all", charge_epsilon=1.0)
    # allowed when charged, or when labels are not read at all
    s = public_node_subset(synth, rule="train_mask", private_label_masks=["train_mask"], charge_epsilon=1.0)
    assert s.private_labels.all()
    s = public_node_subset(synth, rule="train_mask", private_label_masks=["train_mask"], use_labels=False)
    assert s.description["labels"] == "not used"
    # through compute_scores, too
    with pytest.raises(PrivateLabelsError, match="charge_epsilon"):
        compute_scores(
            synth,
            {"gamma": 1.0, "public_nodes": {"rule": "all", "all_features_public": True}},
            seed=0,
            cache=False,
        )


def test_charged_surrogate_never_sees_true_private_labels(synth, monkeypatch):
    seen = []
    real_fit = importance.fit_surrogate

    def spy_fit(x, y, **kw):
        seen.append(np.array(y, copy=True))
        return real_fit(x, y, **kw)

    def shift(self, y, num_classes, rng):  # a deterministic stand-in for the randomized labels
        return (np.asarray(y) + 1) % num_classes

    monkeypatch.setattr(importance, "fit_surrogate", spy_fit)
    monkeypatch.setattr(LabelRR, "privatize_labels", shift)
    cfg = {
        "gamma": 0.5,
        "public_nodes": {"rule": "train_mask", "charge_epsilon": 1.5},
        "importance": {"background_size": 20, "explain_size": 20},
        "sensitivity": {"sensitive_columns": [2]},
    }
    r = compute_scores(synth, cfg, seed=4, cache=False, private_labels=synth.train_mask)
    assert len(seen) == 1
    y_true = synth.y[synth.train_mask]
    np.testing.assert_array_equal(seen[0], (y_true + 1) % 3)
    assert not np.any(seen[0] == y_true)
    g = r.guarantee
    assert g is not None and g.epsilon == 1.5 and g.scope is Scope.LABELS and g.kind is GuaranteeKind.LABEL_LDP
    assert any("covers labels only" in a for a in g.assumptions)
    assert r.provenance["labels_charge"]["epsilon"] == 1.5
    assert "randomized" in r.provenance["importance"]["surrogate"]["accuracy_on"]


def test_charged_path_real_label_rr(synth):
    cfg = {
        "gamma": 1.0,
        "public_nodes": {"rule": "all", "all_features_public": True, "charge_epsilon": 2.0},
        "importance": {"background_size": 20, "explain_size": 30},
    }
    r = compute_scores(synth, cfg, seed=9, cache=False)
    assert r.guarantee is not None and r.guarantee.epsilon == 2.0
    assert r.beta is None and np.allclose(r.theta, r.alpha)
    assert r.alpha.sum() == pytest.approx(1.0)
    # num_classes must be public: never counted from the private labels
    no_meta = synth.replace(meta={})
    with pytest.raises(ValueError, match="PUBLIC number of classes"):
        compute_scores(no_meta, cfg, seed=9, cache=False)


def test_public_labels_need_no_charge(synth):
    cfg = {"gamma": 0.5, "public_nodes": {"rule": "train_mask", "charge_epsilon": 1.0}, "sensitivity": {"sensitive_columns": [1]}}
    r = compute_scores(synth, cfg, seed=0, cache=False)
    assert r.guarantee is None and r.provenance["labels_charge"] is None


# -- a surrogate from a model file ------------------------------------------------------------------


def test_model_file_importance_by_hand(tmp_path):
    rng = np.random.default_rng(0)
    coef = np.array([[1.0, -2.0, 0.0, 0.5], [0.0, 1.0, 0.0, -0.5]])
    bg = rng.random((20, 4))
    ex = rng.random((15, 4))
    p = save_linear_surrogate(tmp_path / "m.npz", coef=coef, intercept=[0.1, -0.1], background=bg, explain=ex)
    alpha, prov = model_file_importance(p)
    raw = np.abs(coef).mean(0) * np.abs(ex - bg.mean(0)).mean(0)
    np.testing.assert_allclose(alpha, raw / raw.sum(), rtol=1e-12)
    assert alpha[2] == 0.0
    assert prov["source"] == "model_file" and len(prov["model_file"]["sha256"]) == 64
    assert prov["surrogate"]["accuracy"] is None
    s = load_linear_surrogate(p)
    np.testing.assert_array_equal(s.classes, [0, 1])
    # accuracy on public rows when given
    xe = rng.random((10, 4))
    _, prov2 = model_file_importance(p, x_eval=xe, y_eval=s.predict(xe))
    assert prov2["surrogate"]["accuracy"] == 1.0


def test_model_file_validation(tmp_path):
    bad = tmp_path / "bad.npz"
    np.savez(bad, coef=np.ones((2, 3)), background=np.ones((4, 3)))
    with pytest.raises(ValueError, match="format must be"):
        load_linear_surrogate(bad)
    with pytest.raises(FileNotFoundError, match="model_path"):
        load_linear_surrogate(tmp_path / "absent.npz")
    with pytest.raises(ValueError, match="features"):
        save_linear_surrogate(tmp_path / "m.npz", coef=np.ones((2, 3)), background=np.ones((4, 5)))


def test_compute_scores_from_model_file(synth, tmp_path):
    sk = LogisticRegression(max_iter=500).fit(synth.x[synth.val_mask], synth.y[synth.val_mask])
    p = save_linear_surrogate(
        tmp_path / "pub.npz", coef=sk.coef_, intercept=sk.intercept_, classes=sk.classes_,
        background=synth.x[synth.val_mask][:30],
    )
    cfg = {
        "gamma": 0.5,
        "importance": {"source": "model_file", "model_path": str(p)},
        "sensitivity": {"sensitive_columns": [4, 5]},
    }
    r = compute_scores(synth, cfg, seed=0, cache=False)
    assert r.alpha[0] == r.alpha.max()
    assert r.provenance["importance"]["source"] == "model_file"
    assert r.provenance["importance"]["surrogate"]["accuracy"] > 0.5  # on the public subset's labels (chance: 1/3)
    assert r.provenance["importance"]["surrogate"]["eval_size"] == synth.train_mask.sum()


def test_compute_scores_missing_model_file(synth, tmp_path):
    cfg = {"gamma": 1, "importance": {"source": "model_file", "model_path": str(tmp_path / "none.npz")}}
    with pytest.raises(FileNotFoundError, match="importance.model_path"):
        compute_scores(synth, cfg, seed=0, cache=False)
