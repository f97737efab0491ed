"""The CI trigger (infra/ci/trigger.py) against a local HTTP server that answers like a busy
Prefect API: a 503 (Prefect's answer when its SQLite database is locked) is asked again with the
same idempotency key, so one run is created; a 500 is not retried; a deployment that does not
exist is exit 2 at once."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Iterator

import pytest

TRIGGER = Path(__file__).resolve().parents[1] / "infra" / "ci" / "trigger.py"


class FakeApi:
    """Answers the three endpoints the trigger calls; `busy` lists the status codes the next calls
    to create_flow_run get before it succeeds."""

    def __init__(self, busy: list[int]) -> None:
        self.busy = list(busy)
        self.creations: list[dict[str, Any]] = []
        self.runs: dict[str, dict[str, Any]] = {}


@pytest.fixture
def api_factory() -> Iterator[Any]:
    servers: list[ThreadingHTTPServer] = []

    def start(busy: list[int]) -> tuple[str, FakeApi]:
        state = FakeApi(busy)

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def _send(self, code: int, body: Any) -> None:
                data = json.dumps(body).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                if self.path == "/api/deployments/name/privatize/cora-scheduled":
                    self._send(200, {"id": "dep-1"})
                elif self.path.startswith("/api/flow_runs/"):
                    run = state.runs[self.path.rsplit("/", 1)[1]]
                    self._send(200, run)
                else:
                    self._send(404, {"detail": "Not Found"})

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])) or b"{}")
                if self.path != "/api/deployments/dep-1/create_flow_run":
                    self._send(404, {"detail": "Not Found"})
                    return
                state.creations.append(body)
                if state.busy:
                    self._send(state.busy.pop(0), {"exception_message": "Service Unavailable"})
                    return
                key = body.get("idempotency_key")
                run = next((r for r in state.runs.values() if r["key"] == key), None)
                if run is None:  # Prefect returns the existing run for a known key
                    rid = f"run-{len(state.runs) + 1}"
                    run = {"id": rid, "name": f"brave-{rid}", "key": key,
                           "state": {"type": "COMPLETED", "name": "Completed"}}
                    state.runs[rid] = run
                self._send(201, run)

        server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return f"http://127.0.0.1:{server.server_address[1]}/api", state

    yield start
    for s in servers:
        s.shutdown()
        s.server_close()


def _trigger(api: str, deployment: str, *extra: str) -> subprocess.CompletedProcess[str]:
    env = {"PREFECT_API_URL": api, "PATH": "/usr/bin:/bin"}
    return subprocess.run([sys.executable, str(TRIGGER), deployment, "--poll", "0.1", *extra],
                          capture_output=True, text=True, timeout=60, env=env)


def test_a_busy_server_is_asked_again_and_one_run_is_created(api_factory: Any) -> None:
    api, state = api_factory([503, 502])
    r = _trigger(api, "privatize/cora-scheduled")
    assert r.returncode == 0, r.stderr
    assert len(state.creations) == 3, state.creations
    keys = {c["idempotency_key"] for c in state.creations}
    assert len(keys) == 1 and next(iter(keys)).startswith("ci-trigger-"), keys
    assert len(state.runs) == 1
    assert r.stderr.count("asking again") == 2, r.stderr
    assert "finished in state Completed" in r.stdout


def test_a_server_busy_past_the_retry_window_is_exit_4(api_factory: Any) -> None:
    api, state = api_factory([503] * 50)
    r = _trigger(api, "privatize/cora-scheduled", "--api-retry-seconds", "2")
    assert r.returncode == 4, r.stderr
    assert "HTTP 503" in r.stderr.splitlines()[-1]
    assert not state.runs


def test_a_server_error_is_not_retried(api_factory: Any) -> None:
    api, state = api_factory([500])
    r = _trigger(api, "privatize/cora-scheduled")
    assert r.returncode == 4, r.stderr
    assert len(state.creations) == 1 and "asking again" not in r.stderr


def test_an_unknown_deployment_is_exit_2_at_once(api_factory: Any) -> None:
    api, _ = api_factory([])
    r = _trigger(api, "privatize/no-such")
    assert r.returncode == 2, r.stderr
    assert "no deployment 'privatize/no-such'" in r.stderr
