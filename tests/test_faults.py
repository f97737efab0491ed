"""Faults survived, end to end through the real CLI: a Dask worker killed mid-privatize, the Prefect
server killed and restarted mid-run, the S3
endpoint going down between the data objects and the manifest (and in the middle of staging),
two concurrent runs into one store. Every wait is bounded; nothing here asserts a speed.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml

pytestmark = [pytest.mark.faults, pytest.mark.flow, pytest.mark.usefixtures("shared_prefect_server")]

REPO = Path(__file__).resolve().parents[1]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _config(tmp: Path, **over: Any) -> Path:
    p: dict[str, Any] = {
        "dataset": {"name": "sbm", "options": {"num_nodes": 3000, "num_features": 16}, "rho": 0.3},
        "features": {"mechanism": "feature_rr", "epsilon": 1.0, "bins": 2, "lower": -4.0, "upper": 4.0},
        "edges": {"mechanism": "dprr", "epsilon": 1.0},
        "budget": {"features": 1.0, "edges": 2.0},
        "partitions": {"num_parts": 4, "method": "hash"},
        "executor": "serial",
        "seed": 11,
        "storage": str(tmp / "store"),
        "private_records": str(tmp / "private"),
    }
    p.update(over)
    cfg = tmp / "pipelines.yaml"
    cfg.write_text(yaml.safe_dump({"pipelines": {"p": p}}))
    return cfg


def _run(cfg: Path, cwd: Path, env: dict[str, str] | None = None, store: str | None = None) -> subprocess.Popen:
    e = dict(os.environ, **(env or {}))
    args = [sys.executable, "-m", "privgraph.cli", "run", "p", "--config", str(cfg), "--no-evaluate", "--json"]
    if store:
        args += ["--store", store]
    return subprocess.Popen(args, cwd=cwd, env=e, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _finish(proc: subprocess.Popen, timeout: float = 600) -> dict[str, Any]:
    out, errout = proc.communicate(timeout=timeout)
    assert proc.returncode == 0, errout[-4000:]
    return json.loads(out.strip().splitlines()[-1])


def _cli(args: list[str], cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "privgraph.cli", *args], cwd=cwd, env=dict(os.environ, **(env or {})),
                          capture_output=True, text=True, timeout=300)


def _digests(vdir: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(vdir.iterdir())
            if p.name != "manifest.json"}


# -- two concurrent runs into one store -----------------------------------------------------------
def test_two_concurrent_runs_publish_two_whole_versions(tmp_path: Path) -> None:
    cfg = _config(tmp_path, seed=None)
    procs = [_run(cfg, tmp_path), _run(cfg, tmp_path)]
    results = [_finish(p) for p in procs]
    versions = {r["version"] for r in results}
    assert len(versions) == 2
    r = _cli(["artifacts", "list", "--store", str(tmp_path / "store"), "--json"], tmp_path)
    assert r.returncode == 0, r.stderr
    assert {v["version"] for v in json.loads(r.stdout)} == versions
    r = _cli(["artifacts", "verify", "--all", "--store", str(tmp_path / "store"),
              "--private-records", str(tmp_path / "private")], tmp_path,
             {"PRIVGRAPH_HOME": ""})
    assert r.returncode == 0, r.stdout + r.stderr
    # only the two versions' directories exist: no staged leftovers
    assert sorted(d.name for d in (tmp_path / "store" / "p").iterdir()) == sorted(versions)


# -- the S3 endpoint goes down, then comes back -----------------------------------------------------
class FlakyProxy:
    """A TCP proxy in front of moto's S3 server that goes down when a chosen request passes.

    ``trigger(request_line) -> bool`` arms the outage: that request's connection is cut and for
    ``outage_s`` seconds every new connection is closed at once (what a dead endpoint looks like
    to botocore), then traffic flows again.
    """

    def __init__(self, upstream_port: int, trigger, outage_s: float) -> None:
        self.upstream = upstream_port
        self.trigger = trigger
        self.outage_s = outage_s
        self.down_until = 0.0
        self.outages = 0
        self.requests: list[str] = []
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.port = self.sock.getsockname()[1]
        self._stop = False
        threading.Thread(target=self._accept, daemon=True).start()

    def close(self) -> None:
        self._stop = True
        self.sock.close()

    def _accept(self) -> None:
        while not self._stop:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            if time.monotonic() < self.down_until:
                conn.close()
                continue
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        up = socket.create_connection(("127.0.0.1", self.upstream))

        def pump_back() -> None:
            try:
                while data := up.recv(65536):
                    conn.sendall(data)
            except OSError:
                pass
            finally:
                conn.close()

        threading.Thread(target=pump_back, daemon=True).start()
        try:
            while data := conn.recv(65536):
                if time.monotonic() < self.down_until:
                    break
                for line in data.split(b"\r\n"):
                    if line[:4] in (b"PUT ", b"GET ", b"HEAD", b"POST", b"DELE"):
                        req = line.decode("latin-1")
                        self.requests.append(req)
                        if self.trigger(req):
                            self.outages += 1
                            self.down_until = time.monotonic() + self.outage_s
                            raise ConnectionAbortedError
                up.sendall(data)
        except OSError:
            pass
        finally:
            conn.close()
            up.close()


def _s3_env(port: int) -> dict[str, str]:
    return {"AWS_ENDPOINT_URL": f"http://127.0.0.1:{port}", "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": "us-east-1"}


@pytest.mark.parametrize("where", ["manifest", "staging"])
def test_s3_outage_between_objects_and_manifest(tmp_path: Path, moto_endpoint: str, where: str) -> None:
    """The endpoint dies when the manifest (or the second data object) is written and comes back
    8 s later: the run completes with ONE version, its staged objects under that one id, and the
    version verifies."""
    import boto3

    s3 = boto3.client("s3", endpoint_url=moto_endpoint, region_name="us-east-1",
                      aws_access_key_id="testing", aws_secret_access_key="testing")
    bucket = f"faults-{where}"
    s3.create_bucket(Bucket=bucket)
    seen: list[str] = []

    def trigger(req: str) -> bool:
        if not req.startswith("PUT ") or "/p/" not in req:
            return False
        seen.append(req)
        if where == "manifest":
            return "manifest.json" in req and not any("manifest.json" in s for s in seen[:-1])
        return len(seen) == 2

    proxy = FlakyProxy(int(moto_endpoint.rsplit(":", 1)[1]), trigger, outage_s=8.0)
    try:
        cfg = _config(tmp_path, storage=f"s3://{bucket}/prod")
        res = _finish(_run(cfg, tmp_path, _s3_env(proxy.port)))
    finally:
        proxy.close()
    assert proxy.outages == 1, proxy.requests
    keys = [o["Key"] for o in s3.list_objects_v2(Bucket=bucket).get("Contents", [])]
    prefixes = {k.split("/")[2] for k in keys if k.startswith("prod/p/")}
    assert prefixes == {res["version"]}, keys  # one version id; no orphan from a retried stage
    r = _cli(["artifacts", "verify", res["version"], "--store", f"s3://{bucket}/prod",
              "--private-records", str(tmp_path / "private")], tmp_path,
             _s3_env(int(moto_endpoint.rsplit(":", 1)[1])))
    assert r.returncode == 0, r.stdout + r.stderr


# -- a Dask worker killed mid-privatize ---------------------------------------------------------------
def _start(args: list[str], log: Path) -> subprocess.Popen:
    return subprocess.Popen(args, stdout=log.open("w"), stderr=subprocess.STDOUT, start_new_session=True)


def _kill_a_worker_mid_privatize(client: Any, proc: subprocess.Popen) -> tuple[str, int] | None:
    """SIGKILL the first worker seen running a partition task of the run ``proc``."""
    deadline = time.monotonic() + 300
    while proc.poll() is None and time.monotonic() < deadline:
        busy = {w: ts for w, ts in client.processing().items() if any("_part-" in str(t) for t in ts)}
        if busy:
            worker = next(iter(busy))
            pid = client.run(os.getpid, workers=[worker])[worker]
            os.kill(pid, signal.SIGKILL)
            return worker, pid
        time.sleep(0.02)
    return None


def _wait_for_replacement(client: Any, killed: tuple[str, int] | None) -> None:
    """Until the scheduler has dropped the killed worker and its nanny's new one has joined."""
    deadline = time.monotonic() + 120
    while killed is not None and time.monotonic() < deadline:
        workers = client.scheduler_info()["workers"]
        if killed[0] not in workers and len(workers) == 2:
            return
        time.sleep(0.1)


@pytest.mark.dask
def test_dask_worker_killed_mid_privatize_gives_the_same_private_graph(tmp_path: Path) -> None:
    """A worker is killed mid-privatize in each layout; its tasks rerun elsewhere with the same
    seeds. With ``partitions.layout: files`` a rerun task rewrites its partition's files with the
    same bytes (each file replaced atomically) and its part of the version in the store's parts
    area. The faulted memory run stores the fault-free run's objects; the faulted files run a
    partitioned version of the same graph; the files layout leaves the owner's staging area and
    the store's parts areas empty."""
    from distributed import Client

    port = _free_port()
    addr = f"tcp://127.0.0.1:{port}"
    bindir = Path(sys.executable).parent
    procs = [_start([str(bindir / "dask"), "scheduler", "--host", "127.0.0.1", "--port", str(port),
                     "--dashboard-address", ":0"], tmp_path / "scheduler.log")]
    versions: dict[str, str] = {}
    killed: dict[str, tuple[str, int] | None] = {}
    try:
        procs.append(_start([str(bindir / "dask"), "worker", addr, "--nworkers", "2", "--nthreads", "1",
                             "--no-dashboard"], tmp_path / "workers.log"))
        with Client(addr, timeout=60) as client:
            client.wait_for_workers(2, timeout=120)
            for case in ("ref", "memory", "files"):
                over = dict(executor="dask", dask={"address": addr},
                            dataset={"name": "sbm", "options": {"num_nodes": 60000, "num_features": 64}, "rho": 0.3},
                            partitions={"num_parts": 24, "method": "hash", "layout": "memory" if case == "ref" else case})
                (tmp_path / case).mkdir()
                proc = _run(_config(tmp_path / case, **over), tmp_path / case)
                if case != "ref":
                    killed[case] = _kill_a_worker_mid_privatize(client, proc)
                versions[case] = _finish(proc)["version"]
                _wait_for_replacement(client, killed.get(case))
    finally:
        for p in reversed(procs):
            with _suppress():
                os.killpg(p.pid, signal.SIGTERM)
        for p in procs:  # a nanny whose scheduler went first may not stop on SIGTERM: no orphan left
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                with _suppress():
                    os.killpg(p.pid, signal.SIGKILL)
                p.wait(timeout=30)
    assert all(killed.values()), f"the privatize tasks finished before a worker could be killed: {killed}"
    ref = _digests(tmp_path / "ref" / "store" / "p" / versions["ref"])
    assert _digests(tmp_path / "memory" / "store" / "p" / versions["memory"]) == ref  # object for object
    from privgraph.storage import LocalStore

    whole = LocalStore(tmp_path / "ref" / "store").load_graph("p", versions["ref"])[0]
    parted = LocalStore(tmp_path / "files" / "store").load_graph("p", versions["files"])[0]
    for field in ("x", "y", "edges_public", "edges_private", "train_mask", "val_mask", "test_mask"):
        assert np.array_equal(getattr(whole, field), getattr(parted, field)), field
    assert list((tmp_path / "files" / "private" / "staging").iterdir()) == []
    assert sorted(p.name for p in (tmp_path / "files" / "store" / "p").iterdir()) == [versions["files"]]


class _suppress:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: Any) -> bool:
        return True



# -- the Prefect server restarts during a run ---------------------------------------------------------
def _flow_runs(url: str, **flt: Any) -> list[dict[str, Any]]:
    import httpx

    r = httpx.post(url + "/flow_runs/filter", json={"flow_runs": flt, "limit": 20}, timeout=10)
    r.raise_for_status()
    return r.json()


@pytest.mark.server
def test_a_prefect_server_restart_mid_run_is_survived(tmp_path: Path) -> None:
    """The server is killed while the run privatizes and started again on the same port and
    database: the run completes, publishes one whole version, and the API shows it Completed."""
    import tests.prefect_server as ps

    with ps.prefect_server(tmp_path / "srv") as server:
        cfg = _config(tmp_path, dataset={"name": "sbm", "options": {"num_nodes": 40000, "num_features": 32}, "rho": 0.3},
                      partitions={"num_parts": 8, "method": "hash"})
        env = {k: server.client_env()[k] for k in ("PREFECT_API_URL", "PREFECT_HOME", "PREFECT_SERVER_ANALYTICS_ENABLED")}
        proc = _run(cfg, tmp_path, env)
        running: list[dict[str, Any]] = []
        deadline = time.monotonic() + 240
        while not running and proc.poll() is None and time.monotonic() < deadline:
            running = _flow_runs(server.url, state={"type": {"any_": ["RUNNING"]}})
            time.sleep(0.2)
        assert running, "the run never reached RUNNING: " + (proc.stderr.read()[-3000:] if proc.poll() is not None else "")
        time.sleep(1.0)  # into the flow's tasks
        assert proc.poll() is None, "the run finished before the server could be restarted"
        os.killpg(server.proc.pid, signal.SIGKILL)  # a crash, not a polite shutdown
        server.stop()
        time.sleep(2.0)
        server.start()
        res = _finish(proc)
        run = _flow_runs(server.url, id={"any_": [running[0]["id"]]})[0]
        assert run["state_type"] == "COMPLETED", run["state"]
        assert run["name"] == f"p/{res['version']}"
    r = _cli(["artifacts", "verify", res["version"], "--store", str(tmp_path / "store"),
              "--private-records", str(tmp_path / "private")], tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    assert sorted(d.name for d in (tmp_path / "store" / "p").iterdir()) == [res["version"]]
