"""Scores in the privatize flow: theta from SHAP on public rows feeds FeatureRR; the manifest
records the provenance (no seed, no node ids); private labels are refused unless charged, and a
charge is in the ledger and under the labels cap."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import yaml


pytestmark = pytest.mark.flow


@pytest.fixture(scope="module")
def harness():
    from tests.prefect_server import owned_prefect_test_harness

    with owned_prefect_test_harness():
        yield


def _config(tmp_path: Path, scores: dict, budget: dict | None = None, labels: dict | None = None) -> Path:
    p = {
        "dataset": {"name": "sbm", "rho": 0.0, "options": {"num_nodes": 600, "num_features": 8}},
        "features": {"mechanism": "feature_rr", "epsilon": 2.0, "bins": 2},
        "budget": budget or {"features": 2.0},
        "partitions": {"num_parts": 2, "method": "hash"},
        "executor": "serial",
        "seed": 11,
        "storage": str(tmp_path / "store"),
        "private_records": str(tmp_path / "private"),
        "scores": scores,
    }
    if labels is not None:
        p["labels"] = labels
    path = tmp_path / "pipelines.yaml"
    path.write_text(yaml.safe_dump({"pipelines": {"sbm-scores": p}}))
    return path


def test_theta_from_public_scores_feeds_feature_rr(harness, tmp_path, monkeypatch):
    from flows.privatize import privatize_flow
    from privgraph.storage import open_store

    monkeypatch.setenv("PRIVGRAPH_CACHE_DIR", str(tmp_path / "cache"))
    scores = {"gamma": 0.5, "sensitivity": {"sensitive_columns": [0, 1]}}
    res = privatize_flow(pipeline="sbm-scores", config_path=str(_config(tmp_path, scores)), evaluate=False)
    manifest = open_store(str(tmp_path / "store")).read_manifest("sbm-scores", res["version"])
    (entry,) = manifest["ledger"]["entries"]
    theta = np.array(entry["params"]["theta"])
    assert theta.shape == (8,) and abs(theta.sum() - 1) < 1e-12
    assert not np.allclose(theta, 1 / 8)  # the scores, not the uniform default
    assert theta[0] < theta[2:].min() and theta[1] < theta[2:].min()  # sensitive columns get less
    prov = manifest["scores"]
    assert prov["public_nodes"]["rule"] == "train_mask" and prov["labels_charge"] is None
    assert "seed" not in json.dumps(manifest).lower()


def test_private_labels_for_shap_are_refused_unless_charged(harness, tmp_path, monkeypatch):
    from flows.privatize import privatize_flow
    from privgraph.errors import ConfigError

    monkeypatch.setenv("PRIVGRAPH_CACHE_DIR", str(tmp_path / "cache"))
    train_private = {"mechanism": "label_rr", "epsilon": 1.0, "num_classes": 4, "mask": ["train_mask"]}
    uncharged = {"gamma": 1.0, "public_nodes": {"rule": "train_mask"}}
    with pytest.raises(ConfigError, match="pipelines.sbm-scores.labels.mask privatizes"):
        privatize_flow(pipeline="sbm-scores", evaluate=False,
                       config_path=str(_config(tmp_path, uncharged, {"features": 2.0, "labels": 2.0}, train_private)))
    assert not (tmp_path / "store" / "sbm-scores").exists()

    charged = {"gamma": 1.0, "public_nodes": {"rule": "train_mask", "charge_epsilon": 1.0, "num_classes": 4}}
    res = privatize_flow(
        pipeline="sbm-scores", evaluate=False,
        config_path=str(_config(tmp_path, charged, {"features": 2.0, "labels": 2.0}, train_private)),
    )
    labels = [e for e in res["ledger"]["entries"] if e["stage"] == "scores.labels"]
    assert len(labels) == 1 and labels[0]["guarantee"]["scope"] == "labels"
    assert labels[0]["guarantee"]["epsilon"] == 1.0
    # the same charge over a labels cap of 1.5 (LabelRR 1 + scores 1 = 2) fails the checkpoint
    from privgraph.errors import ValidationFailedError

    with pytest.raises(ValidationFailedError):
        privatize_flow(
            pipeline="sbm-scores", evaluate=False,
            config_path=str(_config(_mk(tmp_path / "b"), charged, {"features": 2.0, "labels": 1.5}, train_private)),
        )
    assert not (tmp_path / "b" / "store" / "sbm-scores").exists()


def test_scores_config_errors(tmp_path):
    from privgraph.config.loader import load_config
    from privgraph.errors import ConfigError

    p = _config(tmp_path, {"gamma": 0.5})
    with pytest.raises(ConfigError, match="sensitivity"):
        load_config(p)
    raw = yaml.safe_load(p.read_text())
    raw["pipelines"]["sbm-scores"]["features"] = {"mechanism": "laplace", "epsilon": 1.0}
    raw["pipelines"]["sbm-scores"]["scores"] = {"gamma": 1.0}
    p.write_text(yaml.safe_dump(raw))
    with pytest.raises(ConfigError, match="feature_rr"):
        load_config(p)


def _mk(p: Path) -> Path:
    p.mkdir(parents=True, exist_ok=True)
    return p
