"""Scheduled production runs: one Prefect deployment of the ``privatize`` flow per pipeline."""

from __future__ import annotations

from typing import Any

from prefect.schedules import Cron

from flows.privatize import privatize_flow
from privgraph.config import PipelinesConfig
from privgraph.errors import ConfigError


def pipeline_deployments(
    cfg: PipelinesConfig, pipelines: list[str], config_path: str, cron: str | None = None
) -> list[Any]:
    """A ``RunnerDeployment`` per pipeline, on its ``schedule.cron`` (or ``cron`` for all)."""
    deployments = []
    for name in pipelines:
        p = cfg.get(name)
        if cron is None and p.schedule is None:
            raise ConfigError(f"pipelines.{name}.schedule: not set; add one or pass --cron")
        expr = cron if cron is not None else p.schedule.cron  # type: ignore[union-attr]
        tz = p.schedule.timezone if p.schedule is not None else "UTC"
        deployments.append(
            privatize_flow.to_deployment(
                name=f"{name}-scheduled",
                schedule=Cron(expr, timezone=tz),
                parameters={"pipeline": name, "config_path": config_path},
                tags=["privgraph", name],
                description=p.description or f"privgraph pipeline {name}",
            )
        )
    return deployments


def serve(deployments: list[Any]) -> None:  # pragma: no cover - blocks until interrupted
    """Serve the deployments from this process (a Prefect server must be reachable)."""
    from prefect import serve as prefect_serve

    prefect_serve(*deployments)
