"""Scheduled runs: pipelines.yaml's schedule becomes a Prefect deployment of the privatize flow.

The server tests run the real thing: `prefect server start` (tests/prefect_server.py), then
`privgraph serve` as a subprocess; the server's scheduler creates the runs, the serving process
runs them, and the Prefect API is asked what happened.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from privgraph.config.loader import parse_config
from privgraph.errors import ConfigError
from tests.prefect_server import (
    PrefectServer,
    postgres_available,
    postgres_database,
    prefect_server,
)

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


# -- a real server: its scheduler creates runs, a served deployment runs them ------------------------

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


@pytest.mark.server
@pytest.mark.flow
def test_one_serve_per_pipeline_one_run_at_a_time_and_claimed_runs_released_on_sigterm(tmp_path: Path) -> None:
    """Issue 27 against a real server: a second `serve` of a served pipeline exits 2 and does not
    pause the first one's deployment; two runs due at once: one Completed, the other Cancelled
    (concurrency limit 1, CANCEL_NEW); SIGTERM to `serve` hands a run it had claimed (Pending)
    back to the schedule instead of leaving it Pending."""
    cfg = _fast_pipelines(tmp_path)
    name = "privatize/nightly-served"
    with prefect_server(tmp_path) as server, _client_of(server):
        log = tmp_path / "serve-a.log"
        first, diag = _serve_nightly(server, tmp_path, cfg, log)
        try:
            _until_served(name, diag)
            second = subprocess.run([str(BIN / "privgraph"), "serve", "nightly", "--config", str(cfg), "--cron", "0 0 1 1 *"],
                                    cwd=tmp_path, env=server.client_env(), capture_output=True, text=True, timeout=120)
            assert second.returncode == 2, second.stdout + second.stderr + diag()
            assert f"deployment {name} is served by another process" in second.stderr, second.stderr
            dep = asyncio.run(_deployment(name))
            assert not dep.paused and first.poll() is None, diag()

            # two runs due at once: one runs, the other is cancelled rather than stacked
            runs = [asyncio.run(_create_run(dep.id)) for _ in range(2)]
            final = {"COMPLETED", "CANCELLED", "FAILED", "CRASHED"}
            states = _wait("both runs end", lambda: (lambda s: s if all(x in final for x in s) else None)(
                [asyncio.run(_flow_run(r.id)).state_type.value for r in runs]), diag)
            assert sorted(states) == ["CANCELLED", "COMPLETED"], f"{states}{diag()}"

            # a run the serve process had claimed (Pending) when it is stopped
            claimed = asyncio.run(_create_run(dep.id, pending=True))
            os.kill(first.pid, signal.SIGTERM)
            assert first.wait(timeout=120) == 0, diag()
            assert asyncio.run(_flow_run(claimed.id)).state_type.value == "SCHEDULED", diag()
            assert "1 claimed run(s) handed back to the schedule" in log.read_text(), diag()
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(first.pid, signal.SIGKILL)
            first.wait(timeout=30)

        # the next serve (publishing without the evaluation) runs the released run, as it was
        # created (evaluated), and a new run of its own without metrics
        with _serving(server, tmp_path, "again", "nightly", "--config", str(cfg), "--cron", "0 0 1 1 *",
                      "--no-evaluate") as diag:
            _wait("the released run completes", lambda: asyncio.run(_flow_run(claimed.id)).state_type.value == "COMPLETED",
                  diag)
            dep = asyncio.run(_deployment(name))
            assert dep.parameters["evaluate"] is False and not dep.paused, diag()
            fresh = asyncio.run(_create_run(dep.id))
            _wait("the new run completes", lambda: asyncio.run(_flow_run(fresh.id)).state_type.value == "COMPLETED", diag)
        manifests = {json.loads(m.read_text())["version"]: json.loads(m.read_text())
                     for m in (tmp_path / "store" / "nightly").glob("*/manifest.json")}
        assert sorted(m.get("metrics") is None for m in manifests.values()) == [False, False, True], manifests.keys()


@pytest.mark.server
@pytest.mark.flow
@pytest.mark.parametrize("to", ["serve", "its process group"])
def test_sigterm_while_a_run_executes_ends_it_frees_the_slot_and_pauses_the_schedule(tmp_path: Path, to: str) -> None:
    """Issue 45 (4, 5): SIGTERM to `serve` while one of its runs executes: `serve` exits 0 with no
    traceback, the run ends (it stayed Running for good, and the concurrency slot it held cancelled
    every new run for minutes), the deployment's schedule is paused as docs/production.md says, and the
    next `serve` runs a new run at once."""
    cfg = _fast_pipelines(tmp_path)
    raw = yaml.safe_load(cfg.read_text())
    raw["pipelines"]["nightly"]["evaluate"] = {"runs": 3, "epochs": 200, "patience": None, "ensemble": 3}  # tens of s
    cfg.write_text(yaml.safe_dump(raw))
    name = "privatize/nightly-served"
    with prefect_server(tmp_path) as server, _client_of(server):
        log = tmp_path / "serve-a.log"
        first, diag = _serve_nightly(server, tmp_path, cfg, log)
        try:
            _until_served(name, diag)
            run = asyncio.run(_create_run(asyncio.run(_deployment(name)).id))
            _wait("the run executes", lambda: asyncio.run(_flow_run(run.id)).state_type.value == "RUNNING", diag)
            time.sleep(2)
            # `kill PID`, or a service manager's stop (systemd signals the whole group: the run too)
            (os.kill if to == "serve" else os.killpg)(first.pid, signal.SIGTERM)
            assert first.wait(timeout=120) == 0, diag()
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(first.pid, signal.SIGKILL)
            first.wait(timeout=30)
        text = log.read_text()
        assert "Traceback" not in text and "ProcessLookupError" not in text, diag()
        state = asyncio.run(_flow_run(run.id)).state_type.value
        assert state in ("CRASHED", "CANCELLED"), f"{state}{diag()}"
        assert asyncio.run(_deployment(name)).paused, diag()
        assert not list((tmp_path / "store").glob("nightly/*/manifest.json"))  # nothing of it published
        if to != "serve":
            return  # the next serve's run: once is enough
        with _serving(server, tmp_path, "again", "nightly", "--config", str(cfg), "--cron", "0 0 1 1 *",
                      "--no-evaluate") as diag:
            _wait("the next serve unpauses the schedule", lambda: not asyncio.run(_deployment(name)).paused, diag)
            fresh = asyncio.run(_create_run(asyncio.run(_deployment(name)).id))
            final = {"COMPLETED", "CANCELLED", "FAILED", "CRASHED"}
            end = _wait("the new run ends", lambda: (lambda s: s if s in final else None)(
                asyncio.run(_flow_run(fresh.id)).state_type.value), diag)
            assert end == "COMPLETED", f"{end}: the slot of the stopped run was not released{diag()}"


class _HoldingProxy:
    """A TCP proxy in front of the Prefect API that holds the first request ``hold(request_line)``
    picks (its bytes wait here, its client waits for an answer) until :meth:`release`: a Prefect
    API that is slow at one chosen moment of a run."""

    def __init__(self, upstream_port: int, hold: Callable[[str], bool]) -> None:
        import socket
        import threading

        self.upstream, self.hold = upstream_port, hold
        self.held = threading.Event()
        self._released = threading.Event()
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}/api"
        threading.Thread(target=self._accept, daemon=True).start()

    def release(self) -> None:
        self._released.set()

    def close(self) -> None:
        self._released.set()
        self.sock.close()

    def _accept(self) -> None:
        import threading

        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: Any) -> None:
        import socket
        import threading

        up = socket.create_connection(("127.0.0.1", self.upstream))

        def pump(src: Any, dst: Any, inspect: bool) -> None:
            try:
                while data := src.recv(65536):
                    if inspect and not self.held.is_set() and any(
                            self.hold(line.decode("latin-1")) for line in data.split(b"\r\n") if line[:5] == b"POST "):
                        self.held.set()
                        self._released.wait()
                    dst.sendall(data)
            except OSError:
                pass
            finally:
                with contextlib.suppress(OSError):
                    dst.shutdown(socket.SHUT_WR)

        threading.Thread(target=pump, args=(up, conn, False), daemon=True).start()
        pump(conn, up, True)


@pytest.mark.server
@pytest.mark.flow
@pytest.mark.parametrize("to", ["serve", "its process group"])
def test_sigterm_after_the_manifest_says_the_version_was_published(tmp_path: Path, to: str) -> None:
    """Issue 56 (6): SIGTERM to `serve` (or to its process group) while its run, which has written
    its version's manifest, waits for the Prefect API to take its ledger artifact: `serve` says on
    stderr that the version was published (the store holds its manifest), and the run's final
    state never says that nothing was (Crashed by `serve`: its message names the version)."""
    cfg = _fast_pipelines(tmp_path)
    name = "privatize/nightly-served"
    manifests = lambda: list((tmp_path / "store").glob("nightly/*/manifest.json"))  # noqa: E731
    with prefect_server(tmp_path) as server, _client_of(server):
        proxy = _HoldingProxy(server.port, lambda line: "/api/artifacts/" in line and bool(manifests()))
        log = tmp_path / "serve.log"
        with log.open("w") as out:
            first = subprocess.Popen(
                [str(BIN / "privgraph"), "serve", "nightly", "--config", str(cfg), "--cron", "0 0 1 1 *"],
                cwd=tmp_path, env={**server.client_env(), "PREFECT_API_URL": proxy.url}, stdout=out,
                stderr=subprocess.STDOUT, start_new_session=True)
        diag = lambda: f"\n--- serve ---\n{_tail(log)}\n--- prefect server ---\n{server.tail()}"  # noqa: E731
        try:
            _until_served(name, diag)
            run = asyncio.run(_create_run(asyncio.run(_deployment(name)).id))
            _wait("the manifest written and the ledger artifact held", proxy.held.is_set, diag)
            (version,) = [m.parent.name for m in manifests()]
            (os.kill if to == "serve" else os.killpg)(first.pid, signal.SIGTERM)
            time.sleep(1)
            proxy.release()
            _wait("serve exits", lambda: first.poll() is not None, diag)
            assert first.returncode == 0, diag()
        finally:
            proxy.close()
            with contextlib.suppress(ProcessLookupError):
                os.killpg(first.pid, signal.SIGKILL)
            first.wait(timeout=30)
        ended = asyncio.run(_flow_run(run.id))
        message = ended.state.message or ""
        text = log.read_text()
        state = ended.state_type.value
        assert state in ("CRASHED", "CANCELLED") and "nothing was published" not in message, f"{state}: {message}{diag()}"
        assert f"nightly/{version} was published" in text, diag()
        if state == "CRASHED":
            assert f"nightly/{version} was published (its manifest is in the store" in message, f"{message}{diag()}"


@pytest.mark.server
@pytest.mark.flow
def test_runs_left_running_end_crashed_saying_what_the_store_holds(tmp_path: Path) -> None:
    """Issue 56 (6), the runs `serve` ends itself (left Running or Cancelling when it stopped): one
    named after a version whose manifest is in the store ends Crashed saying that version was
    published; one named after a version that was only staged, and one never named after a
    version (which started after every stored version was created), say that nothing was."""
    import datetime as dt

    from prefect.client.orchestration import get_client
    from prefect.states import Running

    from flows.schedule import end_interrupted_runs, pipeline_deployments, published_by_stopped_runs
    from privgraph.config.loader import load_config

    cfg = _fast_pipelines(tmp_path)
    with prefect_server(tmp_path, scheduling=False) as server, _client_of(server):
        r = subprocess.run([str(BIN / "privgraph"), "run", "nightly", "--config", str(cfg), "--no-evaluate", "--json"],
                           cwd=tmp_path, env=server.client_env(), capture_output=True, text=True, timeout=600)
        assert r.returncode == 0, r.stderr[-3000:]
        version = json.loads(r.stdout.strip().splitlines()[-1])["version"]
        since = dt.datetime.now(dt.timezone.utc)
        (d,) = pipeline_deployments(load_config(cfg), ["nightly"], str(cfg), cron="0 0 1 1 *")
        dep = d.apply()
        names = {"published": f"nightly/{version}", "staged": "nightly/20260101T000000000000Z-0123456789ab",
                 "unnamed": "nightly"}
        runs = {}
        with get_client(sync_client=True) as client:
            for what, name in names.items():
                runs[what] = client.create_flow_run_from_deployment(dep)
                client.update_flow_run(runs[what].id, name=name)
                client.set_flow_run_state(runs[what].id, Running(), force=True)
        said = end_interrupted_runs([d])
        ended = {what: asyncio.run(_flow_run(run.id)).state for what, run in runs.items()}
        # what `serve` says of the runs stopped otherwise (the runner cancels them): the same store reading
        stopped = published_by_stopped_runs([d], since, skip=[]), published_by_stopped_runs([d], since, skip=[names["published"]])
    assert {s.type.value for s in ended.values()} == {"CRASHED"}
    head = "privgraph serve was stopped while this run executed; "
    assert ended["published"].message == head + (
        f"nightly/{version} was published (its manifest is in the store; this run's ledger and metrics artifacts "
        "may be missing: `privgraph artifacts show VERSION` shows them)")
    for what in ("staged", "unnamed"):
        assert ended[what].message == head + "nothing was published (the store holds no manifest of this run's version)"
    assert sorted(said) == sorted(f"{name}: {ended[what].message.partition('; ')[2]}" for what, name in names.items())
    assert stopped == ([f"nightly/{version}: nightly/{version} was published"], [])
