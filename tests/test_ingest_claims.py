"""An interrupted ``privgraph ingest`` leaves no raw graph behind: SIGTERM removes everything it
wrote (exit 143, ``interrupted``), locally and under ``s3://`` (moto's server); kill -9 leaves its
temporary directory (and the ranges uploaded so far) claimed under ``--private-records``, which
``privgraph artifacts gc`` and the next ingest to the same destination remove. A sweep never
touches a destination that holds ``graph.json``, a live ingest, or a directory its claim did not
create."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from privgraph.ingest.ingest_claims import CLAIMS_DIR, claim_ingest, sweep_ingests
from privgraph.ingest.partitioned_graph import open_partitioned_graph

REPO = Path(__file__).resolve().parents[1]
N, D = 1_500_000, 3  # 1.5 x 10^6 nodes, 4.5 x 10^6 edges: an ingest of a few seconds (15 ranges)
AWS = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": "us-east-1"}


@pytest.fixture(scope="module")
def big_edges(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An edge list of N nodes, each joined to the next D (distinct pairs), 20% of them private."""
    path = tmp_path_factory.mktemp("big") / "edges.parquet"
    src = np.repeat(np.arange(N, dtype=np.int64), D)
    dst = (src + np.tile(np.arange(1, D + 1), N)) % N
    private = np.random.default_rng(0).random(src.size) < 0.2
    pq.write_table(pa.table({"src": src, "dst": dst, "private": private}), path)
    return path


def _ingest(edges: Path, destination: str, tmp: Path, env: dict[str, str] | None = None) -> subprocess.Popen:
    """``privgraph ingest EDGES DESTINATION --private-records tmp/private``, its TMPDIR ``tmp/tmp``."""
    (tmp / "tmp").mkdir(exist_ok=True)
    cmd = [sys.executable, "-m", "privgraph.cli", "ingest", str(edges), destination, "--range-size", "100000",
           "--private-records", str(tmp / "private")]
    # SIGINT at its default, as in a terminal: a process that starts with it ignored (a pytest-xdist
    # worker's children, a background job of a script) keeps it ignored, and Ctrl-C never reaches it
    return subprocess.Popen(cmd, cwd=tmp, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, **(env or {}), "TMPDIR": str(tmp / "tmp"), "COLUMNS": "200"},
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))


def _when(check: Callable[[], Any], proc: subprocess.Popen, what: str, timeout: float = 120) -> None:
    """Wait (bounded) until ``check()`` holds while ``proc`` runs."""
    deadline = time.monotonic() + timeout
    while not check():
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            out, err = proc.communicate()
            pytest.fail(f"{what}: not seen while the ingest ran (exit {proc.returncode}): {out}{err}")
        time.sleep(0.02)


def _claims(tmp: Path) -> list[Path]:
    return sorted((tmp / "private" / CLAIMS_DIR).glob("*.json"))


def _temps(tmp: Path) -> list[str]:
    return sorted(p.name for p in (tmp / "tmp").iterdir())


def _cli(args: list[str], cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "privgraph.cli", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=300, env={**os.environ, **(env or {}), "COLUMNS": "200"})


def _terminated(proc: subprocess.Popen, sig: int = signal.SIGTERM) -> str:
    """Signal ``proc``; its stderr, once it exited 143 (SIGTERM) or 130 (SIGINT, Ctrl-C) with
    ``interrupted`` as its last line."""
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == (143 if sig == signal.SIGTERM else 130), (proc.returncode, out, err)
    assert err.splitlines()[-1] == "interrupted" and "Traceback" not in err, err
    return err


@pytest.fixture
def s3(moto_endpoint: str, monkeypatch: pytest.MonkeyPatch) -> tuple[Any, str, str]:
    """A fresh bucket on moto's server: the client, the bucket, the URI query that reaches it."""
    import boto3

    for k, v in AWS.items():
        monkeypatch.setenv(k, v)
    bucket = f"ingest-claims-{uuid.uuid4().hex[:8]}"
    client = boto3.client("s3", endpoint_url=moto_endpoint)
    client.create_bucket(Bucket=bucket)
    return client, bucket, f"?endpoint_override={moto_endpoint.removeprefix('http://')}&scheme=http"


def _keys(s3: tuple[Any, str, str], prefix: str) -> list[str]:
    client, bucket, _ = s3
    return sorted(o["Key"] for o in client.list_objects_v2(Bucket=bucket, Prefix=prefix).get("Contents", []))


# -- SIGTERM: everything removed --------------------------------------------------------------------
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_sigterm_or_ctrl_c_mid_ingest_removes_everything(tmp_path: Path, big_edges: Path, sig: int) -> None:
    proc = _ingest(big_edges, str(tmp_path / "g"), tmp_path)
    _when(lambda: (tmp_path / ".g.tmp" / "nodes" / "range-00000.parquet").exists(), proc, "a range written")
    assert len(_claims(tmp_path)) == 1  # the ingest in progress is claimed
    _terminated(proc, sig)
    assert not (tmp_path / ".g.tmp").exists() and not (tmp_path / "g").exists()
    assert _claims(tmp_path) == [] and _temps(tmp_path) == []


def test_sigterm_mid_ingest_into_s3_deletes_the_uploaded_ranges(tmp_path: Path, big_edges: Path, s3: Any) -> None:
    _, bucket, query = s3
    proc = _ingest(big_edges, f"s3://{bucket}/g{query}", tmp_path)
    _when(lambda: [k for k in _keys(s3, "g/") if "/range-" in k], proc, "a range uploaded")  # not the probe
    _terminated(proc)
    assert _keys(s3, "g/") == [] and _temps(tmp_path) == [] and _claims(tmp_path) == []


# -- kill -9: claimed, then swept ------------------------------------------------------------------
def _killed(proc: subprocess.Popen) -> None:
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=60)
    assert proc.returncode == -signal.SIGKILL


@pytest.mark.faults
def test_kill_9_mid_ingest_is_swept_by_gc_and_by_the_next_ingest(tmp_path: Path, big_edges: Path) -> None:
    proc = _ingest(big_edges, str(tmp_path / "g"), tmp_path)
    _when(lambda: (tmp_path / ".g.tmp" / "nodes" / "range-00000.parquet").exists(), proc, "a range written")
    _killed(proc)
    (claim,) = _claims(tmp_path)
    assert claim.stat().st_mode & 0o777 == 0o600 and (claim.parent.stat().st_mode & 0o777) == 0o700
    assert json.loads(claim.read_text())["temp"] == str(tmp_path / ".g.tmp")
    assert (tmp_path / ".g.tmp").is_dir()  # the raw edges, left by the kill

    # the next ingest into the same destination sweeps what the dead one left, then runs
    proc = _ingest(big_edges, str(tmp_path / "g"), tmp_path)
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err
    assert open_partitioned_graph(tmp_path / "g").num_nodes == N
    assert not (tmp_path / ".g.tmp").exists() and _claims(tmp_path) == []

    # another one killed: `artifacts gc` (--dry-run first) removes its directory; graph g stays
    proc = _ingest(big_edges, str(tmp_path / "h"), tmp_path)
    _when(lambda: (tmp_path / ".h.tmp" / "nodes" / "range-00000.parquet").exists(), proc, "a range written")
    _killed(proc)
    (tmp_path / "store").mkdir()
    gc = ["artifacts", "gc", "--store", str(tmp_path / "store"), "--private-records", str(tmp_path / "private")]
    r = _cli([*gc, "--dry-run"], tmp_path)
    assert r.returncode == 0, r.stderr
    assert f"would remove a killed ingest's leftovers in {tmp_path / 'h'}: its temporary directory " \
           f"{tmp_path / '.h.tmp'}" in r.stdout, r.stdout
    assert (tmp_path / ".h.tmp").is_dir() and len(_claims(tmp_path)) == 1
    r = _cli(gc, tmp_path)
    assert r.returncode == 0, r.stderr
    assert "0 staged version(s) removed, 1 killed ingest(s)" in r.stdout, r.stdout
    assert not (tmp_path / ".h.tmp").exists() and _claims(tmp_path) == []
    assert open_partitioned_graph(tmp_path / "g").num_nodes == N


@pytest.mark.faults
def test_kill_9_mid_ingest_into_s3_is_swept_by_gc(tmp_path: Path, big_edges: Path, s3: Any) -> None:
    _, bucket, query = s3
    uri = f"s3://{bucket}/g{query}"
    proc = _ingest(big_edges, uri, tmp_path)
    _when(lambda: [k for k in _keys(s3, "g/") if "/range-" in k], proc, "a range uploaded")  # not the probe
    _killed(proc)
    assert _keys(s3, "g/") and len(_claims(tmp_path)) == 1
    (temp,) = _temps(tmp_path)
    assert temp.startswith("privgraph-ingest-")  # the spill and the ranges not yet uploaded

    (tmp_path / "store").mkdir()
    r = _cli(["artifacts", "gc", "--store", str(tmp_path / "store"), "--private-records", str(tmp_path / "private")],
             tmp_path)
    assert r.returncode == 0, r.stderr
    assert f"removed a killed ingest's leftovers in s3://{bucket}/g: its temporary directory " in r.stdout, r.stdout
    assert "range object(s) under it (no graph.json there)" in r.stdout and "testing" not in r.stdout
    assert _keys(s3, "g/") == [] and _temps(tmp_path) == [] and _claims(tmp_path) == []

    proc = _ingest(big_edges, uri, tmp_path)  # the destination is free again
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err
    assert open_partitioned_graph(uri).num_nodes == N


# -- what a sweep leaves alone -------------------------------------------------------------------
def _dead_pid() -> int:
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid


def _edit(claim: Path, **changes: Any) -> None:
    body = json.loads(claim.read_text())
    claim.write_text(json.dumps({**body, **changes}))


def test_a_sweep_removes_only_what_a_dead_ingest_created(tmp_path: Path, s3: Any) -> None:
    """A live claim is left; a dead one whose destination holds graph.json loses its temporary
    directory but not one object; a pid now naming another process counts as dead; a claim of
    another host, a directory made anew at the claimed path, or one an ingest never names is left."""
    client, bucket, query = s3
    records = tmp_path / "private"

    def temp(name: str) -> Path:
        (tmp_path / name).mkdir()
        return tmp_path / name

    live = claim_ingest(records, tmp_path / "live", temp(".live.tmp"))
    for key in ("g/graph.json", "g/nodes/range-00000.parquet"):
        client.put_object(Bucket=bucket, Key=key, Body=b"x")
    graph = claim_ingest(records, f"s3://{bucket}/g{query}", temp("privgraph-ingest-a"))
    _edit(graph, pid=_dead_pid())
    reused = claim_ingest(records, tmp_path / "reused", temp(".reused.tmp"))
    _edit(reused, started="0")  # this process's pid, another start time: the claimed process is gone
    other_host = claim_ingest(records, tmp_path / "far", temp(".far.tmp"))
    _edit(other_host, host="another-host", pid=_dead_pid())
    remade = claim_ingest(records, tmp_path / "remade", temp(".remade.tmp"))
    _edit(remade, pid=_dead_pid(), temp_id="0:0")  # the claimed directory was removed and another made there
    stray = claim_ingest(records, tmp_path / "stray", temp("precious"))
    _edit(stray, pid=_dead_pid())

    assert sweep_ingests(records, dry_run=True) and (tmp_path / "privgraph-ingest-a").is_dir()  # dry run: nothing
    swept = {s.claim: s for s in sweep_ingests(records)}
    assert set(swept) == {graph, reused, remade, stray}
    assert swept[graph].temp == str(tmp_path / "privgraph-ingest-a") and swept[graph].objects == 0
    assert _keys(s3, "g/") == ["g/graph.json", "g/nodes/range-00000.parquet"]  # a graph: untouched
    assert swept[reused].temp == str(tmp_path / ".reused.tmp") and not (tmp_path / ".reused.tmp").exists()
    assert swept[remade].temp is None and (tmp_path / ".remade.tmp").is_dir()
    assert swept[stray].temp is None and (tmp_path / "precious").is_dir()
    assert (tmp_path / ".live.tmp").is_dir() and (tmp_path / ".far.tmp").is_dir()
    assert sorted(p.name for p in (records / CLAIMS_DIR).iterdir()) == sorted([live.name, other_host.name])
