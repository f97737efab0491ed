"""Scheduled runs: pipelines.yaml's schedule becomes a Prefect deployment of the privatize flow.

The server tests run the real thing: `prefect server start` (tests/prefect_server.py), then
`privgraph serve` as a subprocess; the server's scheduler creates the runs, the serving process
runs them, and the Prefect API is asked what happened.
"""

from __future__ import annotations

import asyncio
import copy
import subprocess
import sys
from pathlib import Path

import pytest

from privgraph.config.loader import parse_config
from privgraph.errors import ConfigError
from tests.flows.serving import (
    TRIGGER_WAIT_S,
    _client_of,
    _fast_pipelines,
    _runs_of,
    _scheduled_run_completes,
    _serving,
    _trigger,
    _wait_for_deployment,
)
from tests.prefect_server import postgres_available, postgres_database, prefect_server


BASE = {
    "pipelines": {
        "cora": {
            "dataset": {"name": "cora"},
            "features": {"mechanism": "feature_rr", "epsilon": 1.0},
            "budget": {"features": 1.0},
            "schedule": {"cron": "0 3 * * *", "timezone": "Europe/Paris"},
        }
    }
}


def test_schedule_becomes_a_cron_deployment():
    from flows.schedule import pipeline_deployments

    cfg = parse_config(BASE)
    (d,) = pipeline_deployments(cfg, ["cora"], "/etc/privgraph/pipelines.yaml")
    assert d.name == "cora-served"  # infra/prefect.yaml's are <pipeline>-scheduled
    sched = d.schedules[0].schedule
    assert sched.cron == "0 3 * * *" and sched.timezone == "Europe/Paris"
    assert d.parameters == {"pipeline": "cora", "config_path": "/etc/privgraph/pipelines.yaml", "evaluate": True}
    assert d.concurrency_limit == 1 and d.concurrency_options.collision_strategy.value == "CANCEL_NEW"
    (d2,) = pipeline_deployments(cfg, ["cora"], "p.yaml", cron="*/15 * * * *", evaluate=False)
    assert d2.schedules[0].schedule.cron == "*/15 * * * *" and d2.parameters["evaluate"] is False


def test_missing_or_bad_schedule():
    from flows.schedule import pipeline_deployments

    data = copy.deepcopy(BASE)
    del data["pipelines"]["cora"]["schedule"]
    with pytest.raises(ConfigError, match=r"pipelines\.cora\.schedule: not set"):
        pipeline_deployments(parse_config(data), ["cora"], "p.yaml")
    data["pipelines"]["cora"]["schedule"] = {"cron": "every day"}
    with pytest.raises(ConfigError, match=r"^pipelines\.cora\.schedule\.cron: "):
        parse_config(data)




@pytest.mark.server
@pytest.mark.flow
def test_served_deployment_gets_scheduled_runs_that_complete(tmp_path: Path) -> None:
    """`privgraph serve --cron "* * * * *"` against a real server: the server's scheduler creates
    runs, the serving process runs them to Completed, and the parent run carries the ledger and
    metrics artifacts. `prefect deployment run --watch` (the CI trigger) exits 0 for a run that
    completes and non-zero for one that fails its budget checkpoint (the run is Failed)."""
    cfg = _fast_pipelines(tmp_path)
    with prefect_server(tmp_path) as server, _client_of(server):
        with _serving(server, tmp_path, "nightly", "nightly", "--config", str(cfg), "--cron", "* * * * *") as diag:
            _scheduled_run_completes(diag)

            r = _trigger(server, "nightly-served")
            assert r.returncode == 0, f"{r.stdout[-3000:]}{r.stderr[-3000:]}{diag()}"

        # the failing pipeline, on its own (yearly) schedule from pipelines.yaml
        with _serving(server, tmp_path, "overspent", "overspent", "--config", str(cfg)) as diag:
            _wait_for_deployment("privatize/overspent-served", diag)
            r = _trigger(server, "overspent-served")
            assert r.returncode != 0, f"a run that failed its checkpoint exited 0:\n{r.stdout[-3000:]}{diag()}"
            states = [run.state_type.value for run in asyncio.run(_runs_of("overspent-served")) if run.state_type]
            # the triggered run Failed by the checkpoint (not Crashed); its yearly schedule also
            # holds future runs, still SCHEDULED
            assert [s for s in states if s != "SCHEDULED"] == ["FAILED"], f"{states}{diag()}"
            # the CI workflow's light trigger (infra/ci/trigger.py, REST API) exits 1 for a Failed run
            light = subprocess.run([sys.executable, str(Path(__file__).resolve().parents[2] / "infra" / "ci" / "trigger.py"),
                                    "privatize/overspent-served", "--timeout", "300", "--poll", "1"],
                                   check=False, env=server.client_env(), capture_output=True, text=True, timeout=TRIGGER_WAIT_S)
            assert light.returncode == 1 and "ended in state Failed" in light.stderr, light.stdout + light.stderr + diag()


@pytest.mark.server
@pytest.mark.flow
@pytest.mark.skipif(postgres_available() is not None, reason=str(postgres_available()))
def test_scheduled_runs_complete_on_a_postgres_backed_server(tmp_path: Path) -> None:
    """The same scheduled run with PostgreSQL 15 as Prefect's database (as in production)."""
    cfg = _fast_pipelines(tmp_path)
    with (
        postgres_database() as db,
        prefect_server(tmp_path, database_url=db) as server,
        _client_of(server),
        _serving(server, tmp_path, "nightly", "nightly", "--config", str(cfg), "--cron", "* * * * *") as diag,
    ):
        _scheduled_run_completes(diag)
