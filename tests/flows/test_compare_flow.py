"""The compare flow in-process under a Prefect test harness: table, results and plot stored as a
PRIVATE report (owner-only files under private_records, never a shareable version), published as
Prefect artifacts titled as private evaluation, no seed anywhere."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
import yaml

pytestmark = pytest.mark.flow


@pytest.fixture(scope="module")
def harness():
    from tests.prefect_server import owned_prefect_test_harness

    with owned_prefect_test_harness():
        yield


def _config(tmp_path: Path, **overrides) -> Path:
    pipe = {
        "dataset": {"name": "sbm", "rho": 0.2, "options": {"num_nodes": 300, "num_features": 8}},
        "features": {"mechanism": "feature_rr", "epsilon": 2.0},
        "edges": {"mechanism": "dprr", "epsilon": 2.0},
        "partitions": {"num_parts": 2, "method": "hash"},
        "executor": "serial",
        "storage": str(tmp_path / "store"),
        "private_records": str(tmp_path / "private"),
        "evaluate": {"epochs": 10, "hidden": 16, "device": "cpu"},
    }
    comp = {
        "pipeline": "sbm-small", "scope": "features", "target": "feature_rr",
        "mechanisms": {"feature_rr": {"bins": 2, "use_scores": True}, "duchi": {}}, "epsilons": [1.0, 2.0],
        "runs": 2, "seed": 3, "scores": {"gamma": 1.0},
    }
    comp.update(overrides)
    path = tmp_path / "pipelines.yaml"
    path.write_text(yaml.safe_dump({"pipelines": {"sbm-small": pipe}, "comparisons": {"sbm-cmp": comp}}))
    return path


def test_compare_flow_stores_a_private_report_and_private_artifacts(harness, tmp_path):
    """Leak 4 of issue 9: a comparison's outputs (accuracies on raw labels, the exact private degree
    histogram of edge comparisons) were stored as a shareable version; now a private report."""
    from prefect.client.orchestration import get_client

    from flows.compare import compare_flow
    from privgraph.storage import open_store

    res = compare_flow(name="sbm-cmp", config_path=str(_config(tmp_path)))
    assert res["private"] is True
    assert open_store(str(tmp_path / "store")).list_versions() == []  # never a shareable version
    assert not (tmp_path / "private" / "checkpoints" / "sbm-cmp").exists()  # seeded: checkpointed, then removed
    folder = Path(res["report"])
    assert folder.is_relative_to(tmp_path / "private" / "reports" / "sbm-cmp")
    info = json.loads((folder / "report.json").read_text())
    assert info["private"] is True and info["covered_by_guarantee"] is False and "PRIVATE" in info["note"]
    assert info["kind"] == "comparison" and info["scores"]["public_nodes"]["rule"] == "train_mask"
    by_label = {m["label"]: m for m in info["mechanisms"]}
    assert by_label["feature_rr"]["theta"] == "HeteroRR scores (see scores)" and by_label["duchi"]["theta"] is None
    assert "seed" not in json.dumps(info).lower()
    files = {p.name for p in folder.iterdir()}
    assert files == {"results.json", "table.md", "utility.png", "report.json"}
    assert all((folder / f).stat().st_mode & 0o777 == 0o600 for f in files)
    results = json.loads((folder / "results.json").read_text())
    assert len(results["records"]) == 2 + 2 * 2 * 2
    assert "| feature_rr (target) |" in (folder / "table.md").read_text()
    assert (folder / "utility.png").read_bytes()[:4] == b"\x89PNG"
    assert res["summary"] == results["summary"]

    async def read():
        async with get_client() as client:
            r = await client._client.post(
                "/artifacts/filter",
                json={"artifacts": {"key": {"any_": ["sbm-cmp-table", "sbm-cmp-plot", "sbm-cmp-private-table",
                                                     "sbm-cmp-private-plot"]}}, "limit": 10},
            )
            return r.json()

    arts = {a["key"]: a for a in asyncio.run(read())}
    assert set(arts) == {"sbm-cmp-private-table", "sbm-cmp-private-plot"}
    for a in arts.values():
        assert a["data"].startswith("# PRIVATE EVALUATION") and "PRIVATE EVALUATION" in a["description"]
    assert str(folder) in arts["sbm-cmp-private-table"]["data"]
    assert "data:image/png;base64," in arts["sbm-cmp-private-plot"]["data"]

    # the run in the UI: compare/<name>, tagged; its progress (clean baseline, then the
    # mechanism x epsilon x run cells) in the log, k/N with an ETA and no accuracy
    from prefect.logging.handlers import APILogHandler

    async def run_and_logs():
        async with get_client() as client:
            runs = (await client._client.post("/flow_runs/filter", json={
                "flow_runs": {"name": {"any_": ["compare/sbm-cmp"]}}, "limit": 5})).json()
            logs = (await client._client.post("/logs/filter", json={
                "logs": {"flow_run_id": {"any_": [runs[0]["id"]]}}, "sort": "TIMESTAMP_ASC", "limit": 200})).json()
            return runs, [m["message"] for m in logs]

    APILogHandler().flush()
    runs, messages = asyncio.run(run_and_logs())
    assert len(runs) == 1
    assert set(runs[0]["tags"]) == {"privgraph", "comparison:sbm-cmp", "pipeline:sbm-small", "mechanism:feature_rr",
                                    "mechanism:duchi", "scope:features"}
    cells = [m for m in messages if m.startswith("comparison cells ")]
    assert cells[0] == "comparison cells 0/8: started" and len(cells) == 9
    assert cells[1].startswith("comparison cells 1/8, ETA ") and cells[-1].startswith("comparison cells 8/8, done in ")
    assert [m for m in messages if m.startswith("clean baseline ")][-1].startswith("clean baseline 2/2, done in ")
    assert "executor: serial (this process, one partition after another)" in messages
    assert not any("accuracy" in m for m in messages)


def test_comparison_config_errors_name_their_path(tmp_path):
    from privgraph.config.loader import load_config
    from privgraph.errors import ConfigError

    with pytest.raises(ConfigError, match=r"comparisons.sbm-cmp.mechanisms.dprr: 'dprr' protects edges"):
        load_config(_config(tmp_path, mechanisms={"feature_rr": {}, "dprr": {}}))
    with pytest.raises(ConfigError, match="no such pipeline 'nope'"):
        load_config(_config(tmp_path, pipeline="nope"))
    with pytest.raises(ConfigError, match="target 'laplace' is not among"):
        load_config(_config(tmp_path, target="laplace"))
    with pytest.raises(ConfigError, match=r"comparisons.sbm-cmp.mechanisms.duchi.epsilon"):
        load_config(_config(tmp_path, mechanisms={"feature_rr": {}, "duchi": {"epsilon": 1.0}}))
    with pytest.raises(ConfigError, match="use_scores: only feature_rr"):
        load_config(_config(tmp_path, mechanisms={"feature_rr": {}, "duchi": {"use_scores": True}}))
    with pytest.raises(ConfigError, match="unknown mechanism 'nope'"):
        load_config(_config(tmp_path, mechanisms={"feature_rr": {}, "x": {"mechanism": "nope"}}))
    with pytest.raises(ConfigError, match="no such comparison"):
        load_config(_config(tmp_path)).comparison("other")
