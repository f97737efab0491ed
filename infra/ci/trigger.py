#!/usr/bin/env python3
"""Run a Prefect deployment and wait for it, through Prefect's REST API: the CI trigger.

Python's standard library only (no privgraph, no Prefect, no torch to install): a CI runner that
only triggers the run on the Prefect worker next to the data needs nothing else. It does what
``prefect deployment run "<flow>/<deployment>" --watch --watch-timeout S`` does:

    python3 infra/ci/trigger.py privatize/cora-scheduled --timeout 3600

Environment: ``PREFECT_API_URL`` (required, e.g. ``https://prefect.example.internal/api``),
``PREFECT_API_KEY`` (Prefect Cloud: a bearer token) or ``PREFECT_API_AUTH_STRING`` (a
self-hosted server with basic auth, ``user:password``).

Exit codes: 0 the run Completed; 1 it ended in another state (Failed, Crashed, Cancelled) or did
not end within the timeout (the run goes on: cancel it in the UI); 2 bad usage or configuration
(no API URL, no such deployment); 4 the API did not answer or refused the credentials.

A busy server (HTTP 429, 502, 503, 504, or no answer) is asked again with a growing pause, for
up to ``--api-retry-seconds`` (default 120) per call. The run is created with an idempotency key,
so a retried creation never starts a second run.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import sys
import time
import urllib.error
import uuid
import urllib.parse
import urllib.request
from typing import Any

TERMINAL = {"COMPLETED", "FAILED", "CRASHED", "CANCELLED"}
BUSY = {429, 502, 503, 504}


class ApiError(Exception):
    def __init__(self, message: str, code: int) -> None:
        super().__init__(message)
        self.code = code


def _headers() -> dict[str, str]:
    h = {"Content-Type": "application/json", "Accept": "application/json"}
    key = os.environ.get("PREFECT_API_KEY")
    auth = os.environ.get("PREFECT_API_AUTH_STRING")
    if key:
        h["Authorization"] = f"Bearer {key}"
    elif auth:
        h["Authorization"] = "Basic " + base64.b64encode(auth.encode()).decode()
    return h


def _call_once(api: str, method: str, path: str, body: dict[str, Any] | None) -> Any:
    req = urllib.request.Request(api.rstrip("/") + path, method=method, headers=_headers(),
                                 data=None if body is None else json.dumps(body).encode())
    with urllib.request.urlopen(req, timeout=30) as resp:
        return json.loads(resp.read() or b"null")


def _call(api: str, method: str, path: str, body: dict[str, Any] | None = None,
          retry_seconds: float = 120.0) -> Any:
    """One API call; a busy or silent server is asked again until ``retry_seconds`` have passed.

    The caller makes a repeated call safe (a POST carries an idempotency key)."""
    deadline = time.monotonic() + retry_seconds
    pause = 1.0
    while True:
        try:
            return _call_once(api, method, path, body)
        except urllib.error.HTTPError as exc:
            if exc.code == 404:
                raise ApiError(f"{method} {path}: not found (404)", 2) from None
            if exc.code in (401, 403):
                raise ApiError(f"{method} {path}: the API refused the credentials ({exc.code})", 4) from None
            failure = ApiError(f"{method} {path}: HTTP {exc.code}: {exc.read()[:300]!r}", 4)
            if exc.code not in BUSY:
                raise failure from None
        except (urllib.error.URLError, TimeoutError, ConnectionError) as exc:
            failure = ApiError(f"{method} {api}{path}: the Prefect API did not answer ({exc})", 4)
        if time.monotonic() + pause > deadline:
            raise failure from None
        print(f"note: {failure}; asking again in {pause:g} s", file=sys.stderr, flush=True)
        time.sleep(pause)
        pause = min(pause * 2, 15.0)


def run(deployment: str, timeout: float, poll: float, retry_seconds: float = 120.0) -> int:
    api = os.environ.get("PREFECT_API_URL")
    if not api:
        print("error: PREFECT_API_URL is not set", file=sys.stderr)
        return 2
    if deployment.count("/") != 1:
        print(f"error: expected <flow>/<deployment>, got {deployment!r}", file=sys.stderr)
        return 2
    flow, name = (urllib.parse.quote(p, safe="") for p in deployment.split("/"))
    try:
        dep = _call(api, "GET", f"/deployments/name/{flow}/{name}", retry_seconds=retry_seconds)
    except ApiError as exc:
        if exc.code == 2:
            print(f"error: no deployment {deployment!r} on {api}", file=sys.stderr)
            return 2
        raise
    # the key makes a retried POST return the run the first one created, not a second run
    fr = _call(api, "POST", f"/deployments/{dep['id']}/create_flow_run",
               {"idempotency_key": f"ci-trigger-{uuid.uuid4()}"}, retry_seconds=retry_seconds)
    print(f"created flow run {fr['name']!r} ({fr['id']}) of {deployment}", flush=True)
    deadline = time.monotonic() + timeout
    last = None
    while True:
        fr = _call(api, "GET", f"/flow_runs/{fr['id']}", retry_seconds=retry_seconds)
        state = (fr.get("state") or {}).get("type")
        name_ = (fr.get("state") or {}).get("name")
        if name_ != last:
            print(f"flow run {fr['name']!r}: {name_}", flush=True)
            last = name_
        if state in TERMINAL:
            if state == "COMPLETED":
                print(f"flow run {fr['name']!r} finished in state {name_}", flush=True)
                return 0
            message = (fr.get("state") or {}).get("message") or ""
            print(f"error: flow run {fr['name']!r} ended in state {name_}: {message}", file=sys.stderr)
            return 1
        if time.monotonic() >= deadline:
            print(f"error: flow run {fr['name']!r} did not end within {timeout:g} s (state {name_}; it goes on)",
                  file=sys.stderr)
            return 1
        time.sleep(poll)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("deployment", help="<flow>/<deployment>, e.g. privatize/cora-scheduled")
    ap.add_argument("--timeout", type=float, default=3600.0, help="seconds to wait for the run to end")
    ap.add_argument("--poll", type=float, default=5.0, help="seconds between two reads of the run's state")
    ap.add_argument("--api-retry-seconds", type=float, default=120.0,
                    help="how long one API call is retried while the server is busy (429, 502-504) or silent")
    args = ap.parse_args(argv)
    try:
        return run(args.deployment, args.timeout, args.poll, args.api_retry_seconds)
    except ApiError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.code


if __name__ == "__main__":
    sys.exit(main())
