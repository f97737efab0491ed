"""End to end: the real CLI and Prefect flows on real Cora, a real Dask cluster, a LocalStore."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

pytestmark = [pytest.mark.flow, pytest.mark.dataset, pytest.mark.usefixtures("shared_prefect_server")]

REPO = Path(__file__).resolve().parents[2]


def _config(tmp_path: Path, data_root: Path, file: str = "pipelines.yaml", **overrides) -> Path:
    cora = {
        "dataset": {"name": "cora", "rho": 0.2, "root": str(data_root)},
        "features": {"mechanism": "feature_rr", "epsilon": 1.0, "bins": 2, "lower": 0.0, "upper": 1.0},
        "edges": {"mechanism": "dprr", "epsilon": 1.0},
        "budget": {"features": 1.0, "edges": 2.0},
        "partitions": {"num_parts": 4},
        "executor": "dask",
        "dask": {"n_workers": 2},
        "seed": 7,
        "storage": str(tmp_path / "store"),
        "private_records": str(tmp_path / "private"),
        "evaluate": {"runs": 2, "epochs": 30, "patience": 10},
    }
    cora.update(overrides)
    p = tmp_path / file
    p.write_text(yaml.safe_dump({"pipelines": {"cora": cora}}))
    return p


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    return subprocess.run(
        [sys.executable, "-m", "privgraph.cli", *args], cwd=cwd, env=env,
        capture_output=True, text=True, timeout=900,
    )


def test_cli_run_publishes_a_private_cora_version(tmp_path, data_root):
    cfg = _config(tmp_path, data_root)
    r = _cli("run", "cora", "--config", str(cfg), "--json", cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    # quiet by default: Prefect's run logs, none of the Dask cluster's INFO chatter (--verbose)
    assert "Task run 'privatize" in r.stderr and "distributed." not in r.stderr + r.stdout, r.stderr[-3000:]
    res = json.loads(r.stdout.strip().splitlines()[-1])
    version = res["version"]
    entries = sorted(
        (e["guarantee"]["scope"], e["guarantee"]["kind"], e["guarantee"]["epsilon"]) for e in res["ledger"]["entries"]
    )
    assert entries == [("edges", "edge_ldp", 1.0), ("features", "feature_ldp", 1.0)]
    units = {e["guarantee"]["scope"]: e["guarantee"]["unit_epsilon"] for e in res["ledger"]["entries"]}
    assert units["edges"] == pytest.approx(2.0)  # DPRR at 1 per node: 2 edge-level
    m = res["metrics"]
    assert m["runs"] == 2 and 0.0 <= m["private"]["test_acc_mean"] <= 1.0
    assert "clean" not in m  # computed from raw data: the owner's private record only
    record = json.loads(Path(res["private_record"]).read_text())
    assert Path(res["private_record"]).stat().st_mode & 0o777 == 0o600
    assert record["private_evaluation"]["clean"]["test_acc_mean"] > 0.6
    assert record["input_identity"].startswith("hmac-sha256:")

    store = str(tmp_path / "store")
    r = _cli("artifacts", "list", "--store", store, "--json", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert [v["version"] for v in json.loads(r.stdout)] == [version]

    r = _cli("artifacts", "show", version, "--store", store, "--json", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    manifest = json.loads(r.stdout)
    assert manifest["metrics"] == m and "clean" not in json.dumps(manifest["metrics"])
    assert manifest["validation"]["success"] is True
    assert record["input_identity"].split(":")[1] not in json.dumps(manifest)
    text = json.dumps(manifest).lower()
    assert "seed" not in text  # no seed anywhere in a published manifest
    # the raw graph never reaches the store: the stored features are the privatized ones
    vdir = next((tmp_path / "store" / "cora").iterdir())
    import numpy as np

    from privgraph.ingest.datasets import load_dataset

    x_priv = np.load(vdir / "features.npy")
    raw = load_dataset("cora", root=data_root, rho=0.2)
    assert x_priv.shape == raw.x.shape and not np.array_equal(x_priv, raw.x)
    assert set(np.unique(x_priv)) <= {0.5, 1.0}

    # the owner re-evaluates the published version: the structure report's table and its plot
    # (the same pipeline with shorter trainings: what is checked here is what is printed)
    quick = _config(tmp_path, data_root, file="quick.yaml", evaluate={"runs": 2, "epochs": 3, "patience": 3})
    r = _cli("evaluate", version, "--config", str(quick), "--store", store, "--structure-plot",
             str(tmp_path / "nope" / "s.png"), cwd=tmp_path)
    assert r.returncode == 2 and "--structure-plot: directory" in r.stderr  # refused before any data is read
    r = _cli("evaluate", version, "--config", str(quick), "--store", store, "--structure-plot",
             str(tmp_path / "structure.png"), cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    # CLI output is a published channel: the owner's evaluation only when asked for
    assert "structure of the released edges" not in r.stdout and "--show-private" in r.stdout
    r = _cli("evaluate", version, "--config", str(quick), "--store", store, "--show-private", cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "structure of the released edges" in r.stdout and "triangles" in r.stdout
    assert (tmp_path / "structure.png").read_bytes()[:4] == b"\x89PNG"


def test_cli_bad_config_exits_2_without_traceback(tmp_path, data_root):
    cfg = _config(tmp_path, data_root, features={"mechanism": "feature_rr", "epsilon": -1})
    r = _cli("run", "cora", "--config", str(cfg), cwd=tmp_path)
    assert r.returncode == 2
    assert "Traceback" not in r.stderr and "pipelines.cora.features.epsilon" in r.stderr
    r = _cli("run", "nope", "--config", str(cfg.parent / "absent.yaml"), cwd=tmp_path)
    assert r.returncode == 2 and "Traceback" not in r.stderr


def test_cli_exceeded_budget_exits_3_and_publishes_nothing(tmp_path, data_root):
    cfg = _config(tmp_path, data_root, budget={"features": 0.5, "edges": 2.0}, executor="serial")
    r = _cli("run", "cora", "--config", str(cfg), "--no-evaluate", cwd=tmp_path)
    assert r.returncode == 3, r.stderr[-2000:]
    assert "Traceback" not in r.stderr and "features" in r.stderr
    # refused before the store was touched: not even its directory exists (a reading command says so)
    r = _cli("artifacts", "list", "--store", str(tmp_path / "store"), "--json", cwd=tmp_path)
    assert r.returncode == 2 and "nothing was published there" in r.stderr and not (tmp_path / "store").exists()


def test_cli_run_against_s3(tmp_path, data_root, moto_endpoint):
    """The same pipeline against a real S3 endpoint (moto's server on 127.0.0.1)."""
    import boto3

    env = {
        "AWS_ENDPOINT_URL": moto_endpoint,
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
    }
    boto3.client("s3", endpoint_url=moto_endpoint, region_name="us-east-1",
                 aws_access_key_id="testing", aws_secret_access_key="testing").create_bucket(Bucket="private-graphs")
    cfg = _config(tmp_path, data_root, executor="serial", storage="s3://private-graphs/prod")
    old = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        r = _cli("run", "cora", "--config", str(cfg), "--no-evaluate", "--json", cwd=tmp_path)
        assert r.returncode == 0, r.stderr[-3000:]
        version = json.loads(r.stdout.strip().splitlines()[-1])["version"]
        r = _cli("artifacts", "list", "--store", "s3://private-graphs/prod", "--json", cwd=tmp_path)
        assert r.returncode == 0, r.stderr[-2000:]
        assert [v["version"] for v in json.loads(r.stdout)] == [version]
        r = _cli("artifacts", "show", version, "--store", "s3://private-graphs/prod", "--json", cwd=tmp_path)
        assert r.returncode == 0 and json.loads(r.stdout)["ledger"]["entries"]
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    keys = [o["Key"] for o in boto3.client(
        "s3", endpoint_url=moto_endpoint, region_name="us-east-1",
        aws_access_key_id="testing", aws_secret_access_key="testing",
    ).list_objects_v2(Bucket="private-graphs")["Contents"]]
    assert any(k.endswith(f"{version}/manifest.json") for k in keys)
    assert any(k.endswith(f"{version}/features.npy") for k in keys)
