"""Scheduled runs: pipelines.yaml's schedule becomes a Prefect deployment of the privatize flow."""

from __future__ import annotations

import copy

import pytest

from privgraph.config import parse_config
from privgraph.errors import ConfigError

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
    assert d.name == "cora-scheduled"
    sched = d.schedules[0].schedule
    assert sched.cron == "0 3 * * *" and sched.timezone == "Europe/Paris"
    assert d.parameters == {"pipeline": "cora", "config_path": "/etc/privgraph/pipelines.yaml"}
    (d2,) = pipeline_deployments(cfg, ["cora"], "p.yaml", cron="*/15 * * * *")
    assert d2.schedules[0].schedule.cron == "*/15 * * * *"


def test_missing_or_bad_schedule():
    from flows.schedule import pipeline_deployments

    data = copy.deepcopy(BASE)
    del data["pipelines"]["cora"]["schedule"]
    with pytest.raises(ConfigError, match=r"pipelines\.cora\.schedule: not set"):
        pipeline_deployments(parse_config(data), ["cora"], "p.yaml")
    data["pipelines"]["cora"]["schedule"] = {"cron": "every day"}
    with pytest.raises(ConfigError, match=r"^pipelines\.cora\.schedule\.cron: "):
        parse_config(data)
