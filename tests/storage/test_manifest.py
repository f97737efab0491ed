"""Manifest validation (seeds, JSON, required keys) and code_version."""

from __future__ import annotations

import json
import os
import shutil
import subprocess

import numpy as np
import pytest

from privgraph.errors import ArtifactError
from privgraph.storage.manifest import (
    REQUIRED_KEYS,
    _code_version_at,
    code_version,
    seed_key_paths,
    validate_manifest,
)
from privgraph.storage.staging import put_version


def test_valid_manifest_passes(manifest):
    validate_manifest(manifest)


@pytest.mark.parametrize("key", REQUIRED_KEYS)
def test_missing_required_key(manifest, key):
    del manifest[key]
    with pytest.raises(ArtifactError, match=f"lacks required keys \\['{key}'\\]"):
        validate_manifest(manifest)


@pytest.mark.parametrize(
    "extra, match",
    [
        ({"seed": 0}, "never hold seeds.*'seed'"),
        ({"SEED": 0}, "never hold seeds.*'SEED'"),
        ({"a": [{"b": {"numpy_seed_sequence": 1}}]}, r"a\[0\]\.b\.numpy_seed_sequence"),
        ({"x": np.zeros(2)}, "JSON"),
        ({"x": float("nan")}, "JSON"),
        ({"x": {1, 2}}, "JSON"),
        ({"x": {1: "a"}}, "keys must be strings"),
        ({"version": "v"}, "set by the store"),
        ({"objects": {}}, "set by the store"),
        ({"pipeline": 3}, "'pipeline' must be a str"),
        ({"ledger": {"entries": []}}, "ledger"),
        ({"ledger": []}, "ledger"),
    ],
)
def test_invalid_manifests(manifest, extra, match):
    manifest.update(extra)
    with pytest.raises(ArtifactError, match=match):
        validate_manifest(manifest)


def test_not_a_dict():
    with pytest.raises(ArtifactError, match="dict"):
        validate_manifest([("pipeline", "x")])


def test_seed_key_paths():
    assert seed_key_paths({"a": 1, "b": [{"Seed": 1}, {"c": {"seeds": []}}]}) == [
        "b[0].Seed",
        "b[1].c.seeds",
    ]
    assert seed_key_paths({"note": "the seed is secret"}) == []  # values are not keys


def test_code_version_is_a_string():
    v = code_version()
    assert isinstance(v, str) and v


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_code_version_from_git(tmp_path, monkeypatch):
    for var in [v for v in os.environ if v.startswith("GIT_")]:
        monkeypatch.delenv(var)
    pkg = tmp_path / "repo" / "pkg"
    pkg.mkdir(parents=True)
    (pkg / "mod.py").write_text("x = 1\n")

    def git(*args):
        subprocess.run(
            ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgsign=false",
             *args], cwd=pkg.parent, check=True, capture_output=True,
        )

    git("init", "-q")
    assert _code_version_at(pkg) != ""  # no commit yet: the package version
    git("add", ".")
    git("commit", "-q", "-m", "init")
    sha = subprocess.run(["git", "rev-parse", "HEAD"], cwd=pkg, capture_output=True,
                         text=True, check=True).stdout.strip()
    assert _code_version_at(pkg) == sha
    (pkg / "mod.py").write_text("x = 2\n")
    assert _code_version_at(pkg) == sha + "-dirty"
    (pkg.parent / ".gitignore").write_text("venv/\n")
    installed = pkg.parent / "venv" / "pkg"
    installed.mkdir(parents=True)
    assert not _code_version_at(installed).startswith(sha)  # an ignored installed copy


# -- build_manifest ------------------------------------------------------------------------------
def _run_result(graph):
    from privgraph.guarantee.ledger import LedgerEntry, PrivacyLedger
    from privgraph.guarantee import Guarantee, GuaranteeKind, Scope
    from privgraph.privatize.release import PrivatizationResult

    ledger = PrivacyLedger([
        LedgerEntry("privatize.features", "feature_rr",
                    Guarantee(GuaranteeKind.FEATURE_LDP, 1.0, Scope.FEATURES),
                    partitions=(0, 1), params={"epsilon": 1.0, "bins": 2}),
        LedgerEntry("privatize.edges", "dprr",
                    Guarantee(GuaranteeKind.EDGE_LDP, 1.0, Scope.EDGES,
                              assumptions=("V_pri is public",), unit_epsilon=2.0),
                    partitions=(0, 1), params={"epsilon": 1.0, "eps1": np.float64(0.1)}),
    ])
    stats = {"partitions": [np.int64(3), np.int64(3)], "partition_method": "metis",
             "edges": {"private_nodes": np.int64(4)}}
    return PrivatizationResult(graph=graph, ledger=ledger, stats=stats)


def _config():
    from privgraph.config.pipeline import PipelineConfig

    return PipelineConfig.model_validate({
        "description": "test pipeline",
        "dataset": {"name": "cora", "rho": 0.2, "split_seed": 5, "root": "/home/someone/data"},
        "features": {"mechanism": "feature_rr", "epsilon": 1.0, "bins": 2},
        "edges": {"mechanism": "dprr", "epsilon": 1.0},
        "budget": {"features": 1.0, "edges": 2.0},
        "seed": 1234,
    })


def test_build_manifest_holds_public_facts_only(graph, tmp_path):
    from privgraph.publish.publication import build_manifest
    from privgraph.storage import LocalStore, graph_to_objects

    from privgraph.config.disclosure import declare_public

    result = _run_result(graph)
    disclosure = declare_public("cora", _config())
    m = build_manifest(pipeline="cora", config=_config(), disclosure=disclosure, graph_in=graph, result=result,
                       validation={"success": True, "results": [], "budget": []},
                       metrics={"runs": 2})
    validate_manifest(m)
    text = json.dumps(m)
    assert "seed" not in text.lower()  # neither the noise seed nor the dataset's split_seed
    assert "1234" not in text and "/home/someone" not in text
    assert m["public_input_fingerprint"] == disclosure.fingerprint(graph)
    assert "input_fingerprint" not in m  # the old unsalted hash of the raw input (leak 1 of issue 9)
    assert m["num_nodes"] == 6
    assert m["dataset"] == {"name": "cora", "rho": 0.2, "options": {}}
    assert [x["mechanism"] for x in m["mechanisms"]] == ["feature_rr", "dprr"]
    assert m["mechanisms"][1]["params"]["eps1"] == 0.1
    assert m["privatized"] == ["edges", "features"]
    assert {"edges_public", "private_nodes", "labels", "splits"} <= set(m["public"])
    assert m["public"]["private_nodes"]["declared_by"] == "pipelines.cora.dataset.rho"
    assert "features" not in m["public"]
    assert m["mechanisms"][1]["unit_kind"] == "edge_dp" and m["mechanisms"][1]["unit_epsilon"] == 2.0
    assert m["stats"]["partitions"] == [3, 3]
    assert m["metrics"] == {"runs": 2}
    assert m["budget"] == {"features": 1.0, "edges": 2.0}
    with pytest.raises(ValueError, match="private record"):
        build_manifest(pipeline="cora", config=_config(), disclosure=disclosure, graph_in=graph, result=result,
                       validation={"success": True}, metrics={"runs": 2, "clean": {"test_acc_mean": 0.8}})
    store = LocalStore(tmp_path)
    version = put_version(store, "cora", graph_to_objects(graph), m)
    assert store.list_versions()[0].epsilon_summary == "features 1 / edges 2"
    assert store.read_manifest("cora", version)["ledger"] == result.ledger.to_dict()
