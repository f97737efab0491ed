"""Scheduled production runs: one Prefect deployment of the ``privatize`` flow per pipeline.

``privgraph serve`` names them ``<pipeline>-served`` (``infra/prefect.yaml``'s deployments, run by
a worker, are ``<pipeline>-scheduled``: the two routes never re-register each other's). Each has a
concurrency limit of one run (:data:`ONE_RUN_AT_A_TIME`): a scheduled run that would start while
the pipeline's previous run is still going is cancelled, not stacked. One ``serve`` per pipeline:
a second one is refused while the first polls (:func:`check_not_served`). Stopped by SIGTERM or
Ctrl-C, ``serve`` cancels the runs it was executing (any left Running, their process gone, end
Crashed: :func:`end_interrupted_runs`, with a message that says what the store holds of the run:
the version it published, or nothing; either frees their concurrency slot), hands the runs it had
claimed but not started back to the schedule (:func:`release_claimed_runs`) instead of leaving
them Pending, and pauses the schedules.
"""

from __future__ import annotations

import asyncio
import datetime as dt
from typing import Any

from prefect.client.orchestration import get_client
from prefect.client.schemas.filters import (
    DeploymentFilter,
    DeploymentFilterName,
    FlowRunFilter,
    FlowRunFilterStartTime,
    FlowRunFilterState,
    FlowRunFilterStateType,
)
from prefect.client.schemas.objects import ConcurrencyLimitConfig, ConcurrencyLimitStrategy, StateType
from prefect.client.schemas.sorting import FlowRunSort
from prefect.exceptions import ObjectNotFound
from prefect.schedules import Cron
from prefect.states import Crashed, Scheduled

from flows.privatize import privatize_flow
from privgraph.config.loader import load_config
from privgraph.config.pipeline import PipelinesConfig
from privgraph.errors import ConfigError
from privgraph.storage import open_store
from privgraph.validate.preflight import resolve_store

#: one run of a pipeline at a time; a run that collides with a running one is cancelled
ONE_RUN_AT_A_TIME = ConcurrencyLimitConfig(limit=1, collision_strategy=ConcurrencyLimitStrategy.CANCEL_NEW)


def pipeline_deployments(
    cfg: PipelinesConfig, pipelines: list[str], config_path: str, cron: str | None = None, evaluate: bool = True
) -> list[Any]:
    """A ``RunnerDeployment`` per pipeline, on its ``schedule.cron`` (or ``cron`` for all), one run
    at a time; ``evaluate=False`` publishes without the evaluation (``privgraph evaluate`` later)."""
    deployments = []
    for name in pipelines:
        p = cfg.get(name)
        if cron is None and p.schedule is None:
            raise ConfigError(f"pipelines.{name}.schedule: not set; add one or pass --cron")
        expr = cron if cron is not None else p.schedule.cron  # type: ignore[union-attr]
        tz = p.schedule.timezone if p.schedule is not None else "UTC"
        deployments.append(
            privatize_flow.to_deployment(
                name=f"{name}-served",  # infra/prefect.yaml's are <pipeline>-scheduled
                schedule=Cron(expr, timezone=tz),
                parameters={"pipeline": name, "config_path": config_path, "evaluate": evaluate},
                tags=["privgraph", name],
                description=p.description or f"privgraph pipeline {name}",
                concurrency_limit=ONE_RUN_AT_A_TIME,
            )
        )
    return deployments


def check_not_served(deployments: list[Any]) -> None:
    """Refuse to serve a deployment that another process serves now (the server saw it poll within
    the last minute, status READY, and it is not paused: a ``serve`` that stopped cleanly paused
    it); two would re-register it, and the first to stop pauses it."""
    with get_client(sync_client=True) as client:
        for d in deployments:
            try:
                found = client.read_deployment_by_name(f"{privatize_flow.name}/{d.name}")
            except ObjectNotFound:
                continue
            status = getattr(found.status, "value", found.status)
            if status == "READY" and not found.paused:
                polled = found.last_polled.isoformat(timespec="seconds") if found.last_polled else "recently"
                raise ConfigError(
                    f"deployment {privatize_flow.name}/{d.name} is served by another process (it polled the "
                    f"server at {polled}); stop that `privgraph serve` first (one that was killed is let go "
                    "about a minute after its last poll), or serve other pipelines"
                )


def _runs(client: Any, deployments: list[Any], states: list[str], since: dt.datetime | None = None) -> list[Any]:
    """The runs of ``deployments`` whose state type is one of ``states`` (started at or after
    ``since`` when given), newest first."""
    return client.read_flow_runs(
        deployment_filter=DeploymentFilter(name=DeploymentFilterName(any_=[d.name for d in deployments])),
        flow_run_filter=FlowRunFilter(
            state=FlowRunFilterState(type=FlowRunFilterStateType(any_=[StateType(s) for s in states])),
            start_time=None if since is None else FlowRunFilterStartTime(after_=since)),
        sort=FlowRunSort.EXPECTED_START_TIME_DESC, limit=200,
    )


def _set_runs(deployments: list[Any], states: list[str], new_state: Any, *, force: bool) -> list[str]:
    """Set every run of ``deployments`` whose state type is one of ``states`` to ``new_state(run)``;
    returns their names."""
    names = []
    with get_client(sync_client=True) as client:
        for run in _runs(client, deployments, states):
            client.set_flow_run_state(run.id, new_state(run), force=force)
            names.append(run.name)
    return names


def release_claimed_runs(deployments: list[Any]) -> list[str]:
    """Hand the runs of ``deployments`` that were claimed but not started (Pending) back to the
    schedule (Scheduled, now), so that the next ``serve`` runs them; returns their names."""
    return _set_runs(deployments, ["PENDING"], lambda run: Scheduled(scheduled_time=dt.datetime.now(dt.timezone.utc)),
                     force=True)


def published_versions(run: Any) -> list[str]:
    """What a privatize run published, as its store says (a version exists once its manifest
    does): ``["<pipeline>/<version>"]`` for the version its name carries (runs are named
    ``<pipeline>/<version>`` once the version is staged) if that version's manifest is in the
    store, else ``[]``; for a run never so named (the rename failed), the pipeline's versions
    created since the run started. Raises what loading its configuration or reading its store
    raises."""
    params = run.parameters or {}
    pipeline = params["pipeline"]
    cfg = load_config(params.get("config_path", "pipelines.yaml")).get(pipeline)
    stored = open_store(resolve_store(cfg, params.get("store"))).list_versions(pipeline)
    name = run.name or ""
    if name.startswith(f"{pipeline}/"):
        return [f"{pipeline}/{i.version}" for i in stored if i.version == name.partition("/")[2]]
    since = run.start_time
    return [f"{pipeline}/{i.version}" for i in stored
            if since is not None and dt.datetime.fromisoformat(i.created.replace("Z", "+00:00")) >= since]


def _interrupted(run: Any) -> str:
    """The Crashed message of a run ``serve`` stopped: what its store holds of it."""
    stopped = "privgraph serve was stopped while this run executed"
    try:
        published = published_versions(run)
    except Exception as exc:  # noqa: BLE001 - a message, never a second failure
        return (f"{stopped}; whether it published a version is unknown: its store could not be read "
                f"({type(exc).__name__}); `privgraph artifacts list` says")
    if published:
        return (f"{stopped}; {', '.join(published)} was published (its manifest is in the store; this run's ledger "
                "and metrics artifacts may be missing: `privgraph artifacts show VERSION` shows them)")
    return f"{stopped}; nothing was published (the store holds no manifest of this run's version)"


def end_interrupted_runs(deployments: list[Any]) -> list[str]:
    """The runs of ``deployments`` still Running or Cancelling after ``serve`` stopped (their
    process went with it) set to Crashed, so that they release the deployment's concurrency slot
    (a run left Running held it: every new run was cancelled until its lease expired), with a
    message that says what the store holds of each (:func:`published_versions`: a run stopped
    after its manifest was written HAS published its version). Returns ``"<run name>: <message
    after the first '; '>"`` for each."""
    said: list[str] = []

    def crashed(run: Any) -> Any:
        message = _interrupted(run)
        said.append(f"{run.name}: {message.partition('; ')[2]}")
        return Crashed(message=message)

    _set_runs(deployments, ["RUNNING", "CANCELLING"], crashed, force=False)
    return said


def published_by_stopped_runs(deployments: list[Any], since: dt.datetime, skip: list[str]) -> list[str]:
    """``"<run name>: <pipeline>/<version> was published"`` for each run of ``deployments`` started
    since ``since`` that ended Cancelled or Crashed (the runner cancels the runs it executes when
    ``serve`` stops) after its version's manifest was written, as the store says
    (:func:`published_versions`); runs named in ``skip`` (ended by :func:`end_interrupted_runs`,
    whose message says it) and runs whose store cannot be read are left out."""
    said = []
    with get_client(sync_client=True) as client:
        runs = _runs(client, deployments, ["CANCELLED", "CRASHED"], since)
    for run in runs:
        if run.name in skip:
            continue
        try:
            published = published_versions(run)
        except Exception:  # noqa: BLE001 - a report, never a failure
            continue
        if published:
            said.append(f"{run.name}: {', '.join(published)} was published")
    return said


def serve(deployments: list[Any]) -> tuple[list[str], list[str], list[str]]:  # pragma: no cover - blocks until interrupted
    """Serve the deployments from this process (a Prefect server must be reachable) until SIGTERM
    or Ctrl-C; the runner cancels the runs it started (those still Running then end Crashed:
    :func:`end_interrupted_runs`), then hand back the runs it had claimed
    (:func:`release_claimed_runs`) and pause the deployments' schedules. Returns what was said of
    the runs ended, the names of those handed back, and what the store says the runs stopped in
    another way had published (:func:`published_by_stopped_runs`)."""
    started = dt.datetime.now(dt.timezone.utc)
    runner = _quiet_runner_class()(pause_on_shutdown=True)
    for d in deployments:
        runner.add_deployment(d)
    try:
        asyncio.run(runner.start())
    except KeyboardInterrupt:  # Ctrl-C: the runner's context has stopped it
        pass
    ended = end_interrupted_runs(deployments)
    published = published_by_stopped_runs(deployments, started, [e.partition(": ")[0] for e in ended])
    return ended, release_claimed_runs(deployments), published


def _quiet_runner_class() -> type:
    """Built on first use: ``prefect.runner`` is heavy to import."""
    from prefect.runner import Runner  # lazy: prefect.runner, heavy to import, only for serve

    class QuietRunner(Runner):  # type: ignore[misc]
        """Prefect's runner, whose SIGTERM stops it from inside its own event loop: the polling
        ends, the runs it started are cancelled, and ``start`` returns (Prefect's own handler
        calls ``sys.exit`` there: five tracebacks, and a run left Running)."""

        def handle_sigterm(self, *args: Any, **kwargs: Any) -> None:
            loop = getattr(self, "_loop", None)
            if loop is None or not loop.is_running():
                raise KeyboardInterrupt
            self._logger.info("SIGTERM received: stopping; the runs this process executes are cancelled")
            loop.call_soon_threadsafe(lambda: loop.create_task(self.astop()))

    return QuietRunner

