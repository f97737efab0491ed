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
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

TERMINAL = {"COMPLETED", "FAILED", "CRASHED", "CANCELLED"}


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


def _call(api: str, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
    req = urllib.request.Request(api.rstrip("/") + path, method=method, headers=_headers(),
                                 data=None if body is None else json.dumps(body).encode())
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            return json.loads(resp.read() or b"null")
    except urllib.error.HTTPError as exc:
        if exc.code == 404:
            raise ApiError(f"{method} {path}: not found (404)", 2) from None
        if exc.code in (401, 403):
            raise ApiError(f"{method} {path}: the API refused the credentials ({exc.code})", 4) from None
        raise ApiError(f"{method} {path}: HTTP {exc.code}: {exc.read()[:300]!r}", 4) from None
    except (urllib.error.URLError, TimeoutError, ConnectionError) as exc:
        raise ApiError(f"{method} {api}{path}: the Prefect API did not answer ({exc})", 4) from None


def run(deployment: str, timeout: float, poll: float) -> int:
    api = os.environ.get("PREFECT_API_URL")
    if not api:
        print("error: PREFECT_API_URL is not set", file=sys.stderr)
        return 2
    if deployment.count("/") != 1:
        print(f"error: expected <flow>/<deployment>, got {deployment!r}", file=sys.stderr)
        return 2
    flow, name = (urllib.parse.quote(p, safe="") for p in deployment.split("/"))
    try:
        dep = _call(api, "GET", f"/deployments/name/{flow}/{name}")
    except ApiError as exc:
        if exc.code == 2:
            print(f"error: no deployment {deployment!r} on {api}", file=sys.stderr)
            return 2
        raise
    fr = _call(api, "POST", f"/deployments/{dep['id']}/create_flow_run", {})
    print(f"created flow run {fr['name']!r} ({fr['id']}) of {deployment}", flush=True)
    deadline = time.monotonic() + timeout
    last = None
    while True:
        fr = _call(api, "GET", f"/flow_runs/{fr['id']}")
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
    args = ap.parse_args(argv)
    try:
        return run(args.deployment, args.timeout, args.poll)
    except ApiError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.code


if __name__ == "__main__":
    sys.exit(main())
