"""theta (Eq. 7 + Alg. 1 line 5), its validation, its use by FeatureRR, and ScoresConfig."""

from __future__ import annotations

import math

import numpy as np
import pytest
from pydantic import ValidationError

from privgraph.mechanisms.features.feature_rr import FeatureRR
from privgraph.ingest.scoring import ScoresConfig, theta_from_scores

ALPHA = np.array([0.5, 0.3, 0.2])
BETA = np.array([0.6, 0.4, 0.0])


def test_eq7_hand_computed():
    # beta_min = 0, beta_max = 0.6: bracket = beta_min + beta_max - beta = [0, 0.2, 0.6]
    # gamma = 0.5: 0.5 * [0.5, 0.3, 0.2] + 0.5 * [0, 0.2, 0.6] = [0.25, 0.25, 0.4], sum 0.9
    np.testing.assert_allclose(theta_from_scores(ALPHA, BETA, 0.5), [5 / 18, 5 / 18, 8 / 18], rtol=1e-14)
    # gamma = 0.25: 0.25 * alpha + 0.75 * bracket = [0.125, 0.225, 0.5], sum 0.85
    np.testing.assert_allclose(theta_from_scores(ALPHA, BETA, 0.25), np.array([0.125, 0.225, 0.5]) / 0.85, rtol=1e-14)
    np.testing.assert_allclose(theta_from_scores(ALPHA, BETA, 1.0), ALPHA, rtol=1e-14)
    np.testing.assert_allclose(theta_from_scores(ALPHA, BETA, 0.0), [0.0, 0.25, 0.75], rtol=1e-14)
    # a weight-0 term may be omitted
    np.testing.assert_allclose(theta_from_scores(ALPHA, None, 1.0), ALPHA)
    np.testing.assert_allclose(theta_from_scores(None, BETA, 0.0), [0.0, 0.25, 0.75])


def test_theta_sets_feature_rr_budgets():
    theta = theta_from_scores(ALPHA, BETA, 0.5)
    assert math.fsum(theta) == pytest.approx(1.0, abs=1e-15)
    mech = FeatureRR(epsilon=3.0, bins=4, theta=theta)
    eps = mech.per_feature_epsilon()
    np.testing.assert_allclose(eps, 3.0 * theta, rtol=1e-12)
    assert math.fsum(eps) <= 3.0


@pytest.mark.parametrize("gamma", [-0.1, 1.1, float("nan"), float("inf"), True, "0.5"])
def test_gamma_validation(gamma):
    with pytest.raises(ValueError, match="gamma"):
        theta_from_scores(ALPHA, BETA, gamma)


def test_score_validation():
    with pytest.raises(ValueError, match="alpha must be >= 0"):
        theta_from_scores([1.2, -0.2, 0.0], BETA, 0.5)
    with pytest.raises(ValueError, match="beta must be finite"):
        theta_from_scores(ALPHA, [np.nan, 0.5, 0.5], 0.5)
    with pytest.raises(ValueError, match="3 entries but beta has 2"):
        theta_from_scores(ALPHA, [0.5, 0.5], 0.5)
    with pytest.raises(ValueError, match="alpha is all zero"):
        theta_from_scores([0.0, 0.0, 0.0], BETA, 0.5)
    with pytest.raises(ValueError, match="normalised to sum 1"):
        theta_from_scores([1.0, 1.0, 1.0], BETA, 0.5)
    with pytest.raises(ValueError, match="1-D"):
        theta_from_scores(ALPHA.reshape(3, 1), BETA, 0.5)
    with pytest.raises(TypeError, match="alpha"):
        theta_from_scores(0.5, BETA, 0.5)
    with pytest.raises(TypeError, match="beta"):
        theta_from_scores(ALPHA, None, 0.5)  # beta has weight 0.5: required


def test_scores_config():
    cfg = ScoresConfig.model_validate({"gamma": 0.3, "sensitivity": {"sensitive_columns": [2, 0]}})
    assert cfg.public_nodes.rule == "train_mask" and cfg.importance.source == "public_subset"
    assert cfg.sensitivity.sensitive_columns == (2, 0) and cfg.sensitivity.mask_value == "zero"
    assert ScoresConfig(gamma=1).sensitivity is None
    bad = [
        ({"gamma": 0.5}, "sensitive_columns"),
        ({"gamma": 1, "extra": 1}, "extra"),
        ({"gamma": float("nan")}, "finite"),
        ({"gamma": True}, "number"),
        ({"gamma": 1, "public_nodes": {"rule": "random"}}, "exactly one"),
        ({"gamma": 1, "public_nodes": {"rule": "train_mask", "size": 3}}, "random' only"),
        ({"gamma": 1, "public_nodes": {"rule": "random", "size": True}}, "size"),
        ({"gamma": 1, "public_nodes": {"charge_epsilon": float("inf")}}, "charge_epsilon"),
        ({"gamma": 1, "public_nodes": {"charge_epsilon": 0}}, "charge_epsilon"),
        ({"gamma": 1, "public_nodes": {"private_label_masks": ["x_mask"]}}, "private_label_masks"),
        ({"gamma": 1, "importance": {"source": "model_file"}}, "model_path"),
        ({"gamma": 1, "importance": {"C": -1}}, "C must be"),
        ({"gamma": 0, "sensitivity": {"sensitive_columns": []}}, "sensitive_columns"),
        ({"gamma": 0, "sensitivity": {"sensitive_columns": [1, -1]}}, "column indices"),
        ({"gamma": 0, "sensitivity": {"sensitive_columns": [1], "mask_value": "median"}}, "mask_value"),
    ]
    for d, match in bad:
        with pytest.raises(ValidationError, match=match):
            ScoresConfig.model_validate(d)
