"""`privgraph serve` against a real Prefect server, one serve per pipeline and SIGTERM: a second
serve of a served pipeline is refused, two runs due at once give one Completed and one Cancelled,
a claimed run is handed back, and a run executing at SIGTERM ends and frees its slot
(tests/flows/serving.py holds what these tests share with tests/flows/test_schedule.py)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
import yaml

from tests.flows.serving import (
    BIN,
    _client_of,
    _create_run,
    _deployment,
    _fast_pipelines,
    _flow_run,
    _serve_nightly,
    _serving,
    _until_served,
    _wait,
)
from tests.prefect_server import prefect_server


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
