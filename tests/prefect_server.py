"""Real servers for tests: ``prefect server start`` on 127.0.0.1 at a free port, and a throwaway
PostgreSQL cluster to use as its database.

Used by the scheduled-run, UI and fault tests. The Prefect server gets its own PREFECT_HOME (its
SQLite database lives there unless ``database_url`` is given), analytics off, and short service
loops (scheduler every second, late runs and foreman every 5 s), so that a deployment on
``* * * * *`` gets its runs within the minute.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import httpx

from flows.server import _drain_workers, _listening

BIN = Path(sys.executable).parent
PG_BIN = Path(os.environ.get("PRIVGRAPH_PG_BIN", "/usr/lib/postgresql/15/bin"))


def free_port() -> int:
    """A TCP port on 127.0.0.1 that is free now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _tail_of(path: Path, n: int) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-n:])
    except OSError:
        return f"(no log at {path})"


@dataclass
class PrefectServer:
    """A ``prefect server start`` subprocess and how to reach it."""

    url: str  # the API URL, http://127.0.0.1:PORT/api
    home: Path
    port: int
    log: Path
    env: dict[str, str]
    proc: subprocess.Popen[bytes] | None = None
    _log_file: IO[str] | None = field(default=None, repr=False)

    @property
    def ui(self) -> str:
        """The UI's base URL."""
        return self.url.removesuffix("/api")

    def client_env(self) -> dict[str, str]:
        """The environment of a process that talks to this server."""
        return {**os.environ, "PREFECT_API_URL": self.url, "PREFECT_HOME": str(self.home),
                "PREFECT_SERVER_ANALYTICS_ENABLED": "false"}

    def start(self, timeout: float = 180.0) -> None:
        """Start the server and wait (at most ``timeout`` s) until /health answers 200."""
        self._log_file = self.log.open("a")
        self.proc = subprocess.Popen(
            [str(BIN / "prefect"), "server", "start", "--host", "127.0.0.1", "--port", str(self.port)],
            env=self.env, stdout=self._log_file, stderr=subprocess.STDOUT, start_new_session=True,
        )
        try:
            self._wait_healthy(timeout)
        except BaseException:  # Ctrl-C included: never leave the server behind
            self.stop()
            raise

    def _wait_healthy(self, timeout: float) -> None:
        assert self.proc is not None
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"prefect server exited {self.proc.returncode}:\n{self.tail()}")
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(self.url + "/health", timeout=2).status_code == 200:
                    return
            time.sleep(0.5)
        raise RuntimeError(f"prefect server did not answer within {timeout} s:\n{self.tail()}")

    def stop(self) -> None:
        """SIGTERM the server's process group, SIGKILL after 30 s; idempotent."""
        if self.proc is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=30)
            self.proc = None
        if self._log_file is not None:
            self._log_file.close()
            self._log_file = None

    def tail(self, n: int = 60) -> str:
        """The last ``n`` lines of the server's log."""
        return _tail_of(self.log, n)


#: Prefect's server services that act on runs by themselves (scheduled, late, paused or cancelling
#: runs, stale workers and leases, automations); the event persister and the task-run recorder stay
SCHEDULING_SERVICES = ("SCHEDULER", "LATE_RUNS", "FOREMAN", "PAUSE_EXPIRATIONS", "REPOSSESSOR", "CLEANUP_RECONCILER",
                       "CANCELLATION_CLEANUP", "TRIGGERS")


@contextlib.contextmanager
def prefect_server(tmp: Path, database_url: str | None = None, *, scheduling: bool = True) -> Iterator[PrefectServer]:
    """A running Prefect server (stopped on exit); ``database_url`` e.g. postgresql+asyncpg://...

    ``scheduling=False``: without the services that schedule, time out, cancel and trigger runs
    (:data:`SCHEDULING_SERVICES`), for a server that only records the runs CLI processes execute:
    idle, it uses 10.7 % of a core instead of 22 % (docs/development.md)."""
    home = tmp / "prefect-home"
    home.mkdir(parents=True, exist_ok=True)
    port = free_port()
    env = {
        **os.environ,
        "PREFECT_HOME": str(home),
        "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
        "PREFECT_UI_ENABLED": "true",
        "PREFECT_UI_API_URL": f"http://127.0.0.1:{port}/api",  # the UI's own calls, same origin
        "PREFECT_SERVER_SERVICES_SCHEDULER_LOOP_SECONDS": "1",
        "PREFECT_SERVER_SERVICES_LATE_RUNS_LOOP_SECONDS": "5",
        "PREFECT_SERVER_SERVICES_FOREMAN_LOOP_SECONDS": "5",
    }
    env.pop("PREFECT_API_URL", None)
    if not scheduling:
        env.update({f"PREFECT_SERVER_SERVICES_{name}_ENABLED": "false" for name in SCHEDULING_SERVICES})
    if database_url:
        env["PREFECT_SERVER_DATABASE_CONNECTION_URL"] = database_url
    server = PrefectServer(f"http://127.0.0.1:{port}/api", home, port, tmp / "prefect-server.log", env)
    server.start()
    try:
        yield server
    finally:
        # flows run in THIS process hold logs and events for this server: send them now. Left
        # behind, Prefect's next drain (a later test harness's teardown) waits on a dead server.
        _drain_workers()
        server.stop()


def postgres_available() -> str | None:
    """None when a throwaway PostgreSQL cluster can be started here, else why not."""
    if not (PG_BIN / "initdb").exists() or not (PG_BIN / "pg_ctl").exists():
        return f"PostgreSQL binaries absent ({PG_BIN}; set PRIVGRAPH_PG_BIN)"
    if os.geteuid() == 0:
        try:
            pwd.getpwnam("postgres")
        except KeyError:
            return "running as root (initdb refuses root) and there is no 'postgres' user to run it as"
        if shutil.which("runuser") is None:
            return "running as root (initdb refuses root) and runuser is absent"
    return None


@contextlib.contextmanager
def postgres_database(timeout: float = 60.0) -> Iterator[str]:
    """A throwaway PostgreSQL cluster on 127.0.0.1 at a free port; yields an asyncpg URL.

    The cluster lives in a fresh directory under the system temp dir (as root it is owned by,
    and the server runs as, the ``postgres`` user: initdb refuses root) with trust auth on
    loopback only, no fsync; it is stopped and removed on exit. Check :func:`postgres_available`
    first.
    """
    as_user: list[str] = []
    owner: pwd.struct_passwd | None = None
    if os.geteuid() == 0:
        owner = pwd.getpwnam("postgres")
        as_user = ["runuser", "-u", "postgres", "--"]
    root = Path(tempfile.mkdtemp(prefix="privgraph-pg-"))
    data, log = root / "data", root / "postgres.log"
    if owner is not None:
        os.chown(root, owner.pw_uid, owner.pw_gid)
    port = free_port()

    def run(*cmd: str) -> None:
        r = subprocess.run([*as_user, *cmd], check=False, capture_output=True, text=True, timeout=timeout)
        if r.returncode != 0:
            raise RuntimeError(f"{' '.join(cmd)} exited {r.returncode}: {r.stderr[-2000:]}\n{_tail_of(log, 40)}")

    started = False
    try:
        run(str(PG_BIN / "initdb"), "-D", str(data), "-U", "prefect", "--auth=trust", "-E", "UTF8",
            "--no-sync")
        run(str(PG_BIN / "pg_ctl"), "-D", str(data), "-l", str(log), "-w", "-t", str(int(timeout)),
            "-o", f"-p {port} -k {root} -c listen_addresses=127.0.0.1 -c fsync=off", "start")
        started = True
        run(str(PG_BIN / "createdb"), "-h", "127.0.0.1", "-p", str(port), "-U", "prefect", "prefect")
        yield f"postgresql+asyncpg://prefect@127.0.0.1:{port}/prefect"
    finally:
        if started:
            with contextlib.suppress(Exception):
                run(str(PG_BIN / "pg_ctl"), "-D", str(data), "-m", "immediate", "-w", "stop")
        shutil.rmtree(root, ignore_errors=True)


@contextlib.contextmanager
def owned_prefect_test_harness(attempts: int = 3, wait_s: float = 120.0) -> Iterator[None]:
    """``prefect_test_harness`` whose API server is certainly its own.

    The harness picks a free port, closes it and starts uvicorn there, then waits for ``/health``
    on that port. Under load uvicorn takes seconds to bind; if another process (a CLI run's own
    server, a Dask cluster) binds the port meanwhile, the harness's uvicorn fails ("address
    already in use") and the harness talks to the other process's server: a CI run saw the
    non-interference test read back another module's artifacts. Here the harness is entered,
    then its uvicorn process must be seen listening on the port; if it exits instead, the
    harness is left and entered again on a new port. So is a harness whose own health check
    met the other process on that port (a connection reset: Prefect retries only refusals).
    """
    import httpx
    from prefect.server.api.server import SubprocessASGIServer
    from prefect.testing.utilities import prefect_test_harness

    for _ in range(attempts):
        stack = contextlib.ExitStack()
        try:
            stack.enter_context(prefect_test_harness(server_startup_timeout=None))
        except httpx.TransportError:
            with contextlib.suppress(Exception):
                SubprocessASGIServer._instances[None].stop()
            stack.close()
            continue
        with stack:
            server = SubprocessASGIServer._instances[None]
            proc, port = server.server_process, server.port
            deadline = time.monotonic() + wait_s
            while proc.poll() is None and not _listening(proc.pid, port) and time.monotonic() < deadline:
                time.sleep(0.1)
            if proc.poll() is None and _listening(proc.pid, port):
                yield
                return
    raise RuntimeError(f"the Prefect test harness could not start its own server in {attempts} attempts")


def api_rows(path: str, body: dict[str, Any]) -> list[dict[str, Any]]:
    """Every row of a Prefect ``/.../filter`` endpoint of the current API (pages of 200), as the
    UI reads them."""
    from prefect.client.orchestration import get_client

    rows: list[dict[str, Any]] = []
    with get_client(sync_client=True) as client:
        while True:
            r = client._client.post(path, json={**body, "limit": 200, "offset": len(rows)})
            r.raise_for_status()
            page = r.json()
            rows += page
            if len(page) < 200:
                return rows


_FINAL = {"COMPLETED", "FAILED", "CRASHED", "CANCELLED"}


def final_task_runs(flow_run_ids: list[str]) -> list[dict[str, Any]]:
    """The task runs of these flow runs once the API has recorded their final states (Prefect 3
    sends task-run states as events that the server records asynchronously)."""
    deadline = time.monotonic() + 60
    while True:
        runs = api_rows("/task_runs/filter", {"flow_runs": {"id": {"any_": flow_run_ids}}}) if flow_run_ids else []
        if all(t["state_type"] in _FINAL for t in runs) or time.monotonic() > deadline:
            return runs
        time.sleep(0.5)
