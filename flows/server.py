"""A temporary local Prefect API server that dies with the process that started it.

Without ``PREFECT_API_URL`` Prefect starts its own ephemeral API server subprocess for a run; when
the process running the flow is killed with SIGKILL that server is never stopped and stays behind,
orphaned. :func:`prefect_api` starts the same server itself (uvicorn on ``prefect.server.api``'s
app factory, ephemeral mode, no UI) with Linux's ``PR_SET_PDEATHSIG`` set to SIGTERM in the child,
so the kernel stops it when its parent dies however it dies, and stops it on a normal exit too.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from typing import IO

import httpx
import psutil

from privgraph.errors import ConfigError, OrchestrationError

__all__ = ["free_port", "prefect_api", "require_prefect_api"]

PR_SET_PDEATHSIG = 1  # <linux/prctl.h>
_STOP_GRACE_S = 10.0


def free_port() -> int:
    """A TCP port on 127.0.0.1 that is free now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _die_with_parent() -> Callable[[], None] | None:
    """A ``preexec_fn`` asking the kernel for SIGTERM when the parent dies (Linux only)."""
    if not sys.platform.startswith("linux"):
        return None
    libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)  # loaded before fork
    parent = os.getpid()

    def preexec() -> None:
        if libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0) != 0:
            os._exit(127)
        if os.getppid() != parent:  # the parent died between fork and prctl
            os.kill(os.getpid(), signal.SIGTERM)

    return preexec


def _tail(log: IO[bytes]) -> str:
    """The last non-empty line the server wrote, for a one-line error."""
    with contextlib.suppress(OSError):
        log.seek(0)
        lines = [ln.strip() for ln in log.read().decode(errors="replace").splitlines() if ln.strip()]
        if lines:
            return lines[-1][:300]
    return "no output"


def _stop(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM, then SIGKILL after a grace period; always reaps the process."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=_STOP_GRACE_S)
        except subprocess.TimeoutExpired:
            proc.kill()
    proc.wait()


def _drain_workers(timeout: float = 10.0) -> None:
    """Send the logs and events Prefect still holds to the server before it stops."""
    from prefect.events.worker import EventsWorker  # lazy: prefect, only when a server stops
    from prefect.logging.handlers import APILogWorker  # lazy: prefect, as above

    for worker in (APILogWorker, EventsWorker):
        with contextlib.suppress(Exception):  # best effort: the run's outcome is already known
            worker.drain_all(timeout=timeout, at_exit=False)


#: the least time a temporary server is given to answer: Prefect's default (20 s) is too short on a
#: loaded 2-core runner (load ~9: 28 s measured); waiting costs nothing once the server answers
MIN_START_TIMEOUT_S = 120.0


def _start_timeout() -> float:
    """How long to wait for the server: Prefect's ephemeral-startup setting
    (``PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS``), at least :data:`MIN_START_TIMEOUT_S`."""
    from prefect.settings import PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS  # lazy: prefect

    return max(float(PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS.value()), MIN_START_TIMEOUT_S)


@contextlib.contextmanager
def prefect_api(timeout: float | None = None) -> Iterator[str]:
    """Yield the Prefect API URL to use, starting a temporary local server when none is set.

    With ``PREFECT_API_URL`` set (environment or profile) it is yielded unchanged and nothing is
    started. Otherwise a server subprocess is started on 127.0.0.1 at a free port, waited for
    (``/api/health``, at most ``timeout`` seconds, default :func:`_start_timeout`: 120 s or
    ``PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS`` if longer), and ``PREFECT_API_URL`` points at it
    (settings and environment, so child processes see it too) until the block exits, when the
    server is stopped. On Linux the server also dies with this process's *thread* that started it
    (``PR_SET_PDEATHSIG``), so enter this from the main thread. Raises
    :class:`~privgraph.errors.OrchestrationError` (exit code 4) if the server does not come up.
    """
    import prefect  # lazy: prefect, only when a server starts
    from prefect.settings import (  # lazy: prefect, as above
        PREFECT_API_URL,
        get_current_settings,
        temporary_settings,
    )

    existing = PREFECT_API_URL.value()
    if existing:
        yield existing
        return

    wait_s = _start_timeout() if timeout is None else timeout
    env = {
        **os.environ,
        **get_current_settings().to_environment_variables(exclude_unset=True),
        "PREFECT_UI_ENABLED": "0",
        "PREFECT__SERVER_EPHEMERAL": "1",  # the ephemeral set of services, as Prefect's own
        "PREFECT__SERVER_FINAL": "1",
    }
    env.pop("PREFECT_API_URL", None)
    with tempfile.TemporaryFile() as log:
        proc, url = _start_server(env, wait_s, log, str(prefect.__module_path__.parent))
        try:
            old_env = os.environ.get("PREFECT_API_URL")
            os.environ["PREFECT_API_URL"] = url
            try:
                with temporary_settings(updates={PREFECT_API_URL: url}):
                    yield url
            finally:
                if old_env is None:
                    os.environ.pop("PREFECT_API_URL", None)
                else:
                    os.environ["PREFECT_API_URL"] = old_env
        finally:
            _drain_workers()
            _stop(proc)


#: how many ports a temporary server tries when another process takes the port it was given
START_ATTEMPTS = 3


class _PortTaken(Exception):
    """The server could not bind its port: another process took it after :func:`free_port`."""


def _start_server(env: dict[str, str], wait_s: float, log: IO[bytes], app_dir: str) -> tuple[subprocess.Popen[bytes], str]:
    """Start uvicorn on a free port and wait until it is healthy and certainly this server: its
    process listens on the port. A port taken by another process between :func:`free_port` and
    uvicorn's bind (seen in CI: the other server then answered this one's health check) is
    retried on a new port, :data:`START_ATTEMPTS` times in all."""
    for attempt in range(START_ATTEMPTS):
        port = free_port()
        url = f"http://127.0.0.1:{port}/api"
        cmd = [
            sys.executable, "-m", "uvicorn", "--app-dir", app_dir,
            "--factory", "prefect.server.api.server:create_app",
            "--host", "127.0.0.1", "--port", str(port),
            "--log-level", "error", "--lifespan", "on",
        ]
        log.seek(0)
        log.truncate()
        proc = subprocess.Popen(
            cmd, env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
            preexec_fn=_die_with_parent(),  # noqa: PLW1509 - prctl must run in the child
        )
        try:
            _wait_healthy(proc, url, port, wait_s, log)
            return proc, url
        except _PortTaken:
            _stop(proc)
            if attempt == START_ATTEMPTS - 1:
                raise OrchestrationError(
                    f"temporary Prefect API server: another process took its port {START_ATTEMPTS} times "
                    "(set PREFECT_API_URL to a running server)"
                ) from None
        except BaseException:
            _stop(proc)
            raise
    raise AssertionError("unreachable")


def _listening(pid: int, port: int) -> bool:
    """Whether process ``pid`` listens on TCP ``port``, so that what answers there is its own."""
    with contextlib.suppress(psutil.Error):
        return any(c.status == psutil.CONN_LISTEN and c.laddr.port == port
                   for c in psutil.Process(pid).net_connections(kind="tcp"))
    return False


def _wait_healthy(proc: subprocess.Popen[bytes], url: str, port: int, wait_s: float, log: IO[bytes]) -> None:
    """Return once ``url``/health answers 200 and ``proc`` listens on ``port``; raise
    :class:`_PortTaken` if ``proc`` exits unable to bind, OrchestrationError if it exits otherwise
    or after ``wait_s``."""
    deadline = time.monotonic() + wait_s
    with httpx.Client(timeout=2.0) as client:
        while True:
            code = proc.poll()
            if code is not None:
                tail = _tail(log)
                with contextlib.suppress(OSError):
                    log.seek(0)
                    if b"address already in use" in log.read().lower():
                        raise _PortTaken(tail)
                raise OrchestrationError(
                    f"temporary Prefect API server on {url} exited with code {code} before it "
                    f"answered: {tail}"
                )
            with contextlib.suppress(httpx.HTTPError):
                if client.get(f"{url}/health").status_code == 200 and _listening(proc.pid, port):
                    return
            if time.monotonic() >= deadline:
                raise OrchestrationError(
                    f"temporary Prefect API server on {url} did not answer within {wait_s:g} s "
                    "(set PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS, or PREFECT_API_URL "
                    "to a running server)"
                )
            time.sleep(0.1)


def require_prefect_api() -> None:
    """``privgraph serve`` needs a Prefect server that outlives it: PREFECT_API_URL set and answering.

    Raises:
        ConfigError: PREFECT_API_URL is not set (exit 2).
        OrchestrationError: the server does not answer its health check.
    """
    from prefect.settings import PREFECT_API_URL  # lazy: prefect, only where the API is checked

    url = PREFECT_API_URL.value()
    if not url:
        raise ConfigError(
            "PREFECT_API_URL: not set; `privgraph serve` needs a running Prefect server "
            "(start one with `prefect server start` and export PREFECT_API_URL=http://127.0.0.1:4200/api)"
        )
    try:
        httpx.get(url.rstrip("/") + "/health", timeout=10.0).raise_for_status()
    except httpx.HTTPError as exc:
        raise OrchestrationError(f"PREFECT_API_URL {url}: the Prefect server does not answer ({type(exc).__name__})") from None
