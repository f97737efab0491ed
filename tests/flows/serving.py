"""What the server tests of `privgraph serve` share (tests/flows/test_schedule.py and
tests/flows/test_serve_signals.py): a fast pipelines file, `privgraph serve` as a subprocess, and
bounded waits on the Prefect API. Two modules, so that pytest-xdist runs their waits side by side."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import yaml

from tests.prefect_server import PrefectServer


BIN = Path(sys.executable).parent
WAIT_S = 240.0  # every wait on the server is bounded by this
TRIGGER_WAIT_S = 300.0  # `prefect deployment run --watch`: one run of a few seconds, plus start-up


def _fast_pipelines(tmp: Path) -> Path:
    """Two small SBM pipelines (seconds each): `nightly` passes, `overspent` fails its checkpoint."""
    common: dict[str, Any] = {
        "dataset": {"name": "sbm", "options": {"num_nodes": 400, "num_features": 8}, "rho": 0.3},
        "features": {"mechanism": "feature_rr", "epsilon": 1.0, "bins": 2, "lower": 0.0, "upper": 1.0},
        "edges": {"mechanism": "dprr", "epsilon": 1.0},
        "partitions": {"num_parts": 2, "method": "hash"},
        "executor": "serial",
        "storage": str(tmp / "store"),
        "private_records": str(tmp / "private"),
        "evaluate": {"runs": 1, "epochs": 5, "patience": None},
    }
    cfg = {"pipelines": {
        "nightly": {**common, "budget": {"features": 1.0, "edges": 2.0}},
        # spends features eps 1 against a cap of 0.5: its checkpoint fails (exit code 3 semantics).
        # Its own schedule (once a year) keeps the scheduler from starting it during the test.
        "overspent": {**common, "budget": {"features": 0.5, "edges": 2.0}, "schedule": {"cron": "0 0 1 1 *"}},
    }}
    path = tmp / "pipelines.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


async def _runs_of(deployment_name: str) -> list[Any]:
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import DeploymentFilter, DeploymentFilterName
    from prefect.client.schemas.sorting import FlowRunSort

    async with get_client() as client:  # limit and sort explicit: the 3.8 server refuses null
        return await client.read_flow_runs(
            deployment_filter=DeploymentFilter(name=DeploymentFilterName(any_=[deployment_name])),
            sort=FlowRunSort.EXPECTED_START_TIME_DESC, limit=200,
        )


async def _artifacts(*, key: str | None = None, flow_run_id: Any = None) -> list[Any]:
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import (
        ArtifactFilter,
        ArtifactFilterFlowRunId,
        ArtifactFilterKey,
    )
    from prefect.client.schemas.sorting import ArtifactSort

    flt = ArtifactFilter(
        key=ArtifactFilterKey(any_=[key]) if key else None,
        flow_run_id=ArtifactFilterFlowRunId(any_=[flow_run_id]) if flow_run_id else None,
    )
    async with get_client() as client:
        return await client.read_artifacts(artifact_filter=flt, sort=ArtifactSort.CREATED_DESC, limit=200)


async def _flow_run(run_id: Any) -> Any:
    from prefect.client.orchestration import get_client

    async with get_client() as client:
        return await client.read_flow_run(run_id)


async def _deployment_exists(name: str) -> bool:
    from prefect.client.orchestration import get_client
    from prefect.exceptions import ObjectNotFound

    async with get_client() as client:
        try:
            await client.read_deployment_by_name(name)
        except ObjectNotFound:
            return False
    return True


def _tail(path: Path, n: int = 60) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-n:])
    except OSError:
        return f"(no {path.name})"


@contextlib.contextmanager
def _client_of(server: PrefectServer) -> Iterator[None]:
    """This process's Prefect client talks to ``server`` for the duration."""
    from prefect.settings import PREFECT_API_URL, temporary_settings

    with temporary_settings(updates={PREFECT_API_URL: server.url}):
        yield


@contextlib.contextmanager
def _serving(server: PrefectServer, tmp: Path, name: str, *args: str) -> Iterator[Callable[[], str]]:
    """`.venv/bin/privgraph serve ARGS` against ``server``; yields a diagnostics callable."""
    log = tmp / f"serve-{name}.log"
    with log.open("w") as out:
        proc = subprocess.Popen([str(BIN / "privgraph"), "serve", *args], cwd=tmp, env=server.client_env(),
                                stdout=out, stderr=subprocess.STDOUT, start_new_session=True)

        def diag() -> str:
            state = "running" if proc.poll() is None else f"exited {proc.returncode}"
            return f"\n--- serve {name} ({state}) ---\n{_tail(log)}\n--- prefect server ---\n{server.tail()}"

        try:
            yield diag
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)  # the serving process and the runs it started
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=30)


def _scheduled_run_completes(diag: Callable[[], str]) -> Any:
    """Wait (bounded) for a run the scheduler created to reach Completed; check its artifacts."""
    deadline = time.monotonic() + WAIT_S
    done = None
    while done is None:
        assert time.monotonic() < deadline, f"no scheduled run Completed within {WAIT_S} s{diag()}"
        runs = asyncio.run(_runs_of("nightly-served"))
        bad = [(r.name, r.state_type.value) for r in runs if r.state_type and r.state_type.value in ("FAILED", "CRASHED")]
        assert not bad, f"scheduled runs failed: {bad}{diag()}"
        done = next((r for r in runs if r.state_type and r.state_type.value == "COMPLETED"), None)
        if done is None:
            time.sleep(2)
    assert done.auto_scheduled, "the run was created by the server's scheduler, not by hand"
    keys = {a.key for a in asyncio.run(_artifacts(flow_run_id=done.id)) if a.key}
    if not {"nightly-ledger", "nightly-metrics"} <= keys:
        where = {}
        for k in ("nightly-ledger", "nightly-metrics"):
            where[k] = [asyncio.run(_flow_run(a.flow_run_id)).name for a in asyncio.run(_artifacts(key=k)) if a.flow_run_id]
        raise AssertionError(
            f"the scheduled (parent) run {done.name!r} carries artifacts {sorted(keys)}; "
            f"flow runs that carry each key: {where}{diag()}"
        )
    return done


def _trigger(server: PrefectServer, deployment: str) -> subprocess.CompletedProcess[str]:
    """The CI trigger, verbatim: exits 0 only when the run it starts Completed."""
    cmd = [str(BIN / "prefect"), "deployment", "run", f"privatize/{deployment}", "--watch", "--watch-timeout", "600"]
    return subprocess.run(cmd, check=False, env=server.client_env(), capture_output=True, text=True, timeout=TRIGGER_WAIT_S)


def _wait_for_deployment(name: str, diag: Callable[[], str]) -> None:
    deadline = time.monotonic() + WAIT_S
    while not asyncio.run(_deployment_exists(name)):
        assert time.monotonic() < deadline, f"deployment {name} not served within {WAIT_S} s{diag()}"
        time.sleep(1)

async def _deployment(name: str) -> Any:
    from prefect.client.orchestration import get_client

    async with get_client() as client:
        return await client.read_deployment_by_name(name)


async def _create_run(deployment_id: Any, pending: bool = False) -> Any:
    from prefect.client.orchestration import get_client
    from prefect.states import Pending

    async with get_client() as client:
        return await client.create_flow_run_from_deployment(deployment_id, state=Pending() if pending else None)


def _serve_nightly(server: PrefectServer, tmp: Path, cfg: Path, log: Path) -> tuple[subprocess.Popen, Callable[[], str]]:
    """`privgraph serve nightly` on a yearly cron (the scheduler starts nothing by itself during a
    test), its output in ``log``; the process and a diagnostics callable."""
    with log.open("w") as out:
        proc = subprocess.Popen([str(BIN / "privgraph"), "serve", "nightly", "--config", str(cfg), "--cron", "0 0 1 1 *"],
                                cwd=tmp, env=server.client_env(), stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    return proc, lambda: f"\n--- serve ---\n{_tail(log)}\n--- prefect server ---\n{server.tail()}"


def _until_served(name: str, diag: Callable[[], str]) -> None:
    """Wait (bounded) until the served deployment ``name`` is READY: its serve polls the server."""
    _wait("the serve polls the server", lambda: (asyncio.run(_deployment_exists(name))
          and getattr(asyncio.run(_deployment(name)).status, "value", None) == "READY"), diag)


def _wait(what: str, check: Callable[[], Any], diag: Callable[[], str]) -> Any:
    deadline = time.monotonic() + WAIT_S
    while not (found := check()):
        assert time.monotonic() < deadline, f"{what}: not within {WAIT_S} s{diag()}"
        time.sleep(1)
    return found
