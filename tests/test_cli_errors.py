"""Every failure of the ``privgraph`` command: one line, the documented exit code, nothing half done.

Table-driven: each case writes a small generic graph and a pipeline into tmp_path, breaks one
thing, runs the real CLI in a subprocess and checks the exit code (2 bad input or configuration,
3 failed checkpoint, 4 infrastructure), that stderr is ONE line naming the problem (no
traceback), and that the store holds no version (not even staged objects) and the private
records no record. Cases whose message must name the store also carry a broken dataset root: the
store is checked before any data is read, so its error must come first.
"""

from __future__ import annotations

import json
import os
import socket
import stat
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml

REPO = Path(__file__).resolve().parents[1]


def _graph(root: Path, *, n: int = 30, d: int = 4, edges: list[tuple[int, int]] | None = None,
           private: bool = True) -> None:
    """A small generic graph: a ring plus chords, features in [0, 1], 3 labels."""
    root.mkdir(parents=True, exist_ok=True)
    if edges is None:
        edges = [(i, (i + 1) % n) for i in range(n)] + [(i, (i + 7) % n) for i in range(0, n, 3)]
    rows = ["src,dst" + (",private" if private else "")]
    for k, (u, v) in enumerate(edges):
        rows.append(f"{u},{v}" + ((",true" if k % 3 == 0 else ",false") if private else ""))
    (root / "edges.csv").write_text("\n".join(rows) + "\n")
    rng = np.random.default_rng(0)
    np.save(root / "x.npy", rng.random((n, d)))
    np.save(root / "y.npy", np.arange(n) % 3)


def _pipeline(tmp: Path, **over: Any) -> dict[str, Any]:
    p: dict[str, Any] = {
        "dataset": {"name": "generic", "root": str(tmp / "data"),
                    "options": {"edges": "edges.csv", "features": "x.npy", "labels": "y.npy"}},
        "features": {"mechanism": "feature_rr", "epsilon": 1.0, "bins": 2, "lower": 0.0, "upper": 1.0},
        "edges": {"mechanism": "dprr", "epsilon": 1.0},
        "budget": {"features": 1.0, "edges": 2.0},
        "partitions": {"num_parts": 2, "method": "hash"},
        "executor": "serial",
        "storage": str(tmp / "store"),
        "private_records": str(tmp / "private"),
    }
    for key, value in over.items():  # "a.b": value sets a nested key; value None deletes it
        node = p
        *path, last = key.split(".")
        for k in path:
            node = node.setdefault(k, {})
        if value is None:
            node.pop(last, None)
        else:
            node[last] = value
    return p


def _write_config(tmp: Path, pipeline: dict[str, Any]) -> Path:
    cfg = tmp / "pipelines.yaml"
    cfg.write_text(yaml.safe_dump({"pipelines": {"p": pipeline}}))
    return cfg


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


#: the session's Prefect server (its API URL), set by :func:`prefect_api`
_API: dict[str, str] = {}


@pytest.fixture(scope="module", autouse=True)
def prefect_api(prefect_server_env: dict[str, str]) -> Any:
    """Every CLI run of the module reports to the session's Prefect server (``PREFECT_API_URL``
    in its environment): the temporary server a run would start (about 10 s here) is
    tests/flows/test_server.py's subject, not this module's; the failures under test are the same
    against either."""
    _API.update(prefect_server_env)
    try:
        yield prefect_server_env
    finally:
        _API.clear()


def _cli(args: list[str], cwd: Path, env: dict[str, str] | None = None, timeout: int = 600) -> subprocess.CompletedProcess:
    e = dict(os.environ)
    e.pop("PRIVGRAPH_DEBUG", None)
    e.update(_API)
    e.update(env or {})
    return subprocess.run([sys.executable, "-m", "privgraph.cli", *args], cwd=cwd, env=e,
                          capture_output=True, text=True, timeout=timeout)


def _stored_files(store: Path) -> list[str]:
    if not store.exists():
        return []
    return sorted(str(p.relative_to(store)) for p in store.rglob("*") if p.is_file() and "keys" not in p.parts)


@dataclass
class Case:
    name: str
    code: int
    says: str  # a substring of the one-line message
    over: dict[str, Any] = field(default_factory=dict)  # pipeline overrides
    setup: Callable[[Path], dict[str, str] | None] | None = None  # may return extra env
    args: list[str] | None = None  # CLI args (default: run p --config CFG --no-evaluate)
    graph: dict[str, Any] = field(default_factory=dict)


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def _header_case(tmp: Path, edit: Callable[[Path], Any]) -> dict[str, str]:
    """Edit the written graph's files (after ``_graph``: the setup runs first, so write them here)
    and point the run at a Prefect API that does not answer."""
    _graph(tmp / "data")
    edit(tmp / "data")
    (tmp / "data" / ".written").touch()
    return {"PREFECT_API_URL": f"http://127.0.0.1:{_free_port()}/api"}


def _parquet_edges(root: Path, **columns: list[Any]) -> None:
    import pandas as pd

    pd.DataFrame(columns).to_parquet(root / "edges.parquet", index=False)


def _a_file(path: Path) -> None:
    path.write_text("not a directory\n")


def _dead_endpoint(_: Path) -> dict[str, str]:
    return {"AWS_ENDPOINT_URL": f"http://127.0.0.1:{_free_port()}", "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": "us-east-1",
            "AWS_MAX_ATTEMPTS": "2", "AWS_RETRY_MODE": "standard"}


RUN_CASES = [
    # configuration, refused at load (exit 2)
    Case("epsilon above the sampler's range", 2, "features",  # d = 4 is public (per-feature bounds)
         over={"features": {"mechanism": "laplace", "epsilon": 300.0, "lower": [0.0] * 4, "upper": [1.0] * 4}}),
    Case("unknown dataset option", 2, "dataset.options.splits", over={"dataset.options.splits": "split.json"}),
    Case("missing dataset option", 2, "dataset.options.edges", over={"dataset.options.edges": None}),
    Case("boolean rho", 2, "dataset.rho", over={"dataset.rho": True}),
    Case("boolean budget", 2, "budget.features", over={"budget.features": True}),
    Case("boolean seed", 2, "seed", over={"seed": True}),
    Case("boolean num_parts", 2, "partitions.num_parts", over={"partitions.num_parts": True}),
    Case("boolean evaluate.runs", 2, "evaluate.runs", over={"evaluate.runs": True}),
    Case("bad cron", 2, "cron", over={"schedule": {"cron": "61 * * * *"}}),
    Case("config path with markup", 2, "[/x].yaml", args=["run", "p", "--config", "[/x].yaml"]),
    # the store, checked before any data is read (the dataset root is broken too)
    Case("ftp store", 2, "ftp://", over={"storage": "ftp://host/x", "dataset.root": "/nonexistent"}),
    Case("s3 store without bucket", 2, "s3://", over={"storage": "s3://", "dataset.root": "/nonexistent"}),
    Case("file URI naming a host", 2, "remotehost", over={"storage": "file://remotehost/x", "dataset.root": "/nonexistent"}),
    # (a file where the directory belongs: a read-only directory would not stop root, as in CI)
    Case("store path is a file", 2, "store", over={"dataset.root": "/nonexistent"},
         setup=lambda t: _a_file(t / "store")),
    Case("private records path is a file", 2, "private_records", over={"dataset.root": "/nonexistent"},
         setup=lambda t: _a_file(t / "private")),
    Case("S3 endpoint unreachable", 4, "", over={"storage": "s3://bucket/x", "dataset.root": "/nonexistent"},
         setup=_dead_endpoint),
    # the Dask scheduler (issue 45, item 1): its address when the configuration loads, its answer
    # before any data is read (both were found after reading the data, one as an internal error)
    Case("dask address not an address", 2, "expected tcp://host:port",
         over={"executor": "dask", "dask.address": "not a url", "dataset.root": "/nonexistent"}),
    Case("dask scheduler unreachable", 4, "dask.address tcp://127.0.0.1:1: no Dask scheduler answers there",
         over={"executor": "dask", "dask.address": "tcp://127.0.0.1:1", "dataset.root": "/nonexistent"}),
    # the input data (exit 2)
    Case("empty graph", 2, "edges.csv", graph={"n": 0, "edges": []}),
    Case("features with no columns", 2, "x.npy", graph={"d": 0}),
    Case("node id 2**40", 2, "edges.csv", graph={"edges": [(0, 1), (1, 2**40)]}),
    Case("private column missing", 2, "secret", over={"dataset.options.private_column": "secret"}),
    # the user's labels and split files (issue 14): before any data is read, or at ingest (exit 2)
    Case("split file missing", 2, "dataset.options.split: file not found", over={"dataset.options.split": "split.json"}),
    Case("split file and fractions", 2, "dataset.options.train: set either a split file",
         over={"dataset.options.split": "split.json", "dataset.options.train": 0.5}),
    Case("labels with three columns", 2, "labels.csv: cannot read labels from columns ['id', 'label', 'x']",
         over={"dataset.options.labels": "labels.csv"}, setup=lambda t: _write(t / "data" / "labels.csv", "id,label,x\n0,1,2\n")),
    Case("unlabelled node in the split file", 2, "split.csv: unlabelled nodes in the split at",
         over={"dataset.options.labels": "labels.csv", "dataset.options.split": "split.csv"},
         setup=lambda t: (_write(t / "data" / "labels.csv", "id,label\n0,0\n1,1\n2,2\n"),
                          _write(t / "data" / "split.csv", "id,split\n0,train\n1,val\n2,test\n5,test\n")) and None),
    # evaluation without a split: refused after ingest, before anything is privatized (exit 2)
    Case("no split to evaluate on", 2, "has no train_mask, val_mask, test_mask: evaluation needs labels and a "
         "train/val/test split", args=["run", "p", "--config", "pipelines.yaml"]),
    # ... and one the options made: they are named as the cause (issue 57, item 7)
    Case("options whose split leaves val empty", 2, "has an empty val_mask in the node split that "
         "dataset.options.train and dataset.options.val made", args=["run", "p", "--config", "pipelines.yaml"],
         over={"dataset.options.train": 0.9, "dataset.options.val": 0.01}),
    # what the files' headers show, refused before Prefect is contacted (its API URL is dead here:
    # a check after it would exit 4); these were found 10-25 s in, at ingest (issue 27)
    Case("edge list without dst", 2, "edges.csv: missing column(s) ['dst']", setup=lambda t: _header_case(
        t, lambda d: _write(d / "edges.csv", "src,target\n0,1\n"))),
    # a Parquet edge list's column types, from its schema (issue 45: they were refused in the flow)
    Case("Parquet float ids", 2, "edges.parquet: column 'src' has type double, expected integers",
         over={"dataset.options.edges": "edges.parquet"},
         setup=lambda t: _header_case(t, lambda d: _parquet_edges(d, src=[0.0, 1.0], dst=[1, 2], private=[True, False]))),
    Case("Parquet string ids", 2, "edges.parquet: column 'dst' has type large_string, expected integers",
         over={"dataset.options.edges": "edges.parquet"},
         setup=lambda t: _header_case(t, lambda d: _parquet_edges(d, src=[0, 1], dst=["1", "2"], private=[True, False]))),
    Case("Parquet string private flag", 2, "edges.parquet: column 'private' has type large_string, expected booleans",
         over={"dataset.options.edges": "edges.parquet"},
         setup=lambda t: _header_case(t, lambda d: _parquet_edges(d, src=[0, 1], dst=[1, 2], private=["yes", "no"]))),
    Case(".npz named x.npy", 2, "x.npy: cannot read as a .npy array: a .npz archive (zip)", setup=lambda t: _header_case(
        t, lambda d: (np.savez(d / "z.npz", a=np.zeros((30, 4))), (d / "x.npy").write_bytes((d / "z.npz").read_bytes())))),
    Case("0-byte y.npy", 2, "y.npy: cannot read as a .npy array: an empty file", setup=lambda t: _header_case(
        t, lambda d: (d / "y.npy").write_bytes(b""))),
    Case("features and labels disagree", 2, "have 30 rows but labels", setup=lambda t: _header_case(
        t, lambda d: np.save(d / "y.npy", np.zeros(31, np.int64)))),
    Case("labels of shape [n, 1, 1]", 2, "expected labels of shape [n] or [n, C]", setup=lambda t: _header_case(
        t, lambda d: np.save(d / "y.npy", np.zeros((30, 1, 1), np.int64)))),
    # a failed checkpoint (exit 3): the caps against the configured mechanisms, before any data is
    # read (the dataset root is broken too; it was checked 30-38 s in, after privatizing: issue 27)
    Case("budget cap exceeded", 3, "scope features (feature_ldp): spent epsilon 1 exceeds the cap 0.5",
         over={"budget.features": 0.5, "dataset.root": "/nonexistent"}),
    Case("budget cap exceeded, edge-level DP", 3, "failed before reading any data",
         over={"budget.edges": 1.5, "dataset.root": "/nonexistent"}),
    Case("a scope that spends without a cap", 3, "scope edges (edge_dp): spends epsilon 2 but pipelines.yaml sets no budget cap",
         over={"budget.edges": None, "dataset.root": "/nonexistent"}),
]


@pytest.mark.parametrize("case", RUN_CASES, ids=[c.name for c in RUN_CASES])
def test_run_failure_is_one_line_with_its_exit_code(case: Case, tmp_path: Path) -> None:
    _check_failure(case, tmp_path, case.setup(tmp_path) if case.setup else None)


def _s3_env(endpoint: str, **over: str) -> dict[str, str]:
    env = {"AWS_ENDPOINT_URL": endpoint, "AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
           "AWS_DEFAULT_REGION": "us-east-1", "AWS_EC2_METADATA_DISABLED": "true"}
    env.update(over)
    return env


S3_CASES = [
    # a real S3 endpoint (moto's server): the bucket is not there
    Case("S3 bucket missing", 2, "does not exist", over={"storage": "s3://no-such-bucket/x", "dataset.root": "/nonexistent"}),
    # no credentials anywhere (env, files, instance metadata): refused before any data is read
    Case("S3 without credentials", 2, "credentials", over={"storage": "s3://no-such-bucket/x", "dataset.root": "/nonexistent"}),
]


@pytest.mark.parametrize("case", S3_CASES, ids=[c.name for c in S3_CASES])
def test_s3_store_failure_is_one_line_before_any_data_is_read(case: Case, tmp_path: Path, moto_endpoint: str) -> None:
    env = _s3_env(moto_endpoint)
    if "credentials" in case.name:
        env.update(AWS_ACCESS_KEY_ID="", AWS_SECRET_ACCESS_KEY="", AWS_SHARED_CREDENTIALS_FILE=str(tmp_path / "none"),
                   AWS_CONFIG_FILE=str(tmp_path / "none"))
    _check_failure(case, tmp_path, env)


def test_a_disk_that_fills_while_storing_is_not_retried(tmp_path: Path, small_disk: Path) -> None:
    """Issue 45: a store whose disk fills while the version is staged: exit 4 at once, one line
    naming the store's path, no retry (it took 46 s of retries and did not name the path)."""
    case = Case("disk fills while staging", 4, f"artifact store {small_disk / 'x'}: No space left on device",
                over={"storage": str(small_disk / "x")}, graph={"n": 3000, "d": 128})
    r = _check_failure(case, tmp_path, None)
    assert "Retry 1/3" not in r.stderr and "retries" not in r.stderr.lower(), r.stderr[-3000:]
    assert not list((small_disk / "x").rglob("manifest.json"))  # nothing published


@pytest.fixture
def full_disk(small_disk: Path):
    """A 1 MiB tmpfs filled to the last byte (needs root and mount rights; skipped without them)."""
    mnt = small_disk
    if True:
        fd = os.open(mnt / "filler", os.O_WRONLY | os.O_CREAT)
        try:  # fill it: every block taken
            with pytest.raises(OSError, match="No space left"):
                while True:
                    os.write(fd, b"\0" * 4096)
        finally:
            os.close(fd)
        yield mnt


@pytest.mark.parametrize("where", ["storage", "private_records"])
def test_a_full_disk_is_found_before_any_data_is_read(where: str, tmp_path: Path, full_disk: Path) -> None:
    code, says = (4, "No space left") if where == "storage" else (2, "private_records")
    case = Case(f"full {where}", code, says, over={where: str(full_disk / "x"), "dataset.root": "/nonexistent"})
    _check_failure(case, tmp_path, None)
    assert sorted(p.name for p in full_disk.rglob("*") if p.is_file()) == ["filler"]  # nothing left there


def _check_failure(case: Case, tmp_path: Path, env: dict[str, str] | None) -> subprocess.CompletedProcess:
    g = dict(case.graph)
    if (tmp_path / "data" / ".written").is_file():  # the case's setup wrote (and edited) the graph itself
        pass
    elif g.get("n") == 0:
        (tmp_path / "data").mkdir()
        (tmp_path / "data" / "edges.csv").write_text("src,dst,private\n")
        np.save(tmp_path / "data" / "x.npy", np.zeros((0, 4)))
        np.save(tmp_path / "data" / "y.npy", np.zeros(0, dtype=np.int64))
    else:
        _graph(tmp_path / "data", **g)
    cfg = _write_config(tmp_path, _pipeline(tmp_path, **case.over))
    args = case.args or ["run", "p", "--config", str(cfg), "--no-evaluate"]
    r = _cli(args, tmp_path, env)
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert r.returncode == case.code, r.stderr[-3000:]
    assert "Traceback" not in r.stderr, r.stderr[-3000:]
    error_lines = [ln for ln in lines if ln.startswith("error:")]
    assert len(error_lines) == 1, r.stderr[-3000:]
    assert case.says in error_lines[0], error_lines[0]
    store = tmp_path / "store"
    assert store.is_file() or _stored_files(store) == []  # nothing published, nothing staged left behind
    records = tmp_path / "private"  # no private record, but a refusal's values (the owner's refusal record)
    assert not records.is_dir() or not [p for p in records.rglob("*.json") if p.parent.name != "refusals"]
    if case.name == "node id 2**40":  # the id is the user's data: in the owner's record, not on stderr
        assert str(2**40) not in r.stderr
        [refusal] = (records / "p" / "refusals").glob("*.json")
        assert json.loads(refusal.read_text())["detail"]["edges"] == [[1, 2**40]]
    return r


def test_message_with_brackets_survives_rich(tmp_path: Path) -> None:
    """A message holding ``[n, d]`` reaches the user intact (Rich markup is escaped)."""
    _graph(tmp_path / "data")
    np.save(tmp_path / "data" / "x.npy", np.zeros((30,)))  # 1-D: the message names [n, d]
    cfg = _write_config(tmp_path, _pipeline(tmp_path))
    r = _cli(["run", "p", "--config", str(cfg), "--no-evaluate"], tmp_path)
    assert r.returncode == 2, r.stderr[-2000:]
    assert "[n, d]" in r.stderr, r.stderr


def test_ci_summary_on_failure_and_success(tmp_path: Path) -> None:
    """``run --ci``: one JSON object on stdout with the exit code, markdown in $GITHUB_STEP_SUMMARY."""
    _graph(tmp_path / "data")
    summary = tmp_path / "summary.md"
    cfg = _write_config(tmp_path, _pipeline(tmp_path, **{"budget.features": 0.5}))
    r = _cli(["run", "p", "--config", str(cfg), "--no-evaluate", "--ci"], tmp_path,
             {"GITHUB_STEP_SUMMARY": str(summary)})
    assert r.returncode == 3, r.stderr[-2000:]
    res = json.loads(r.stdout.strip().splitlines()[-1])
    assert res["status"] == "failed" and res["exit_code"] == 3 and "features" in res["error"]
    assert "exit 3" in summary.read_text()

    cfg = _write_config(tmp_path, _pipeline(tmp_path, seed=3))
    r = _cli(["run", "p", "--config", str(cfg), "--no-evaluate", "--ci"], tmp_path,
             {"GITHUB_STEP_SUMMARY": str(summary)})
    assert r.returncode == 0, r.stderr[-3000:]
    res = json.loads(r.stdout.strip().splitlines()[-1])
    assert res["status"] == "published" and res["exit_code"] == 0
    assert {row["scope"] for row in res["ledger"]} == {"features", "edges"}
    assert "private_record" not in res and str(tmp_path / "private") not in r.stdout
    text = summary.read_text()
    assert res["version"] in text and "| edges | edge_dp | 2 |" in text
    assert not (stat.S_IMODE(summary.stat().st_mode) & 0o002)


@pytest.mark.parametrize("where", ["a directory", "under a missing directory"])
def test_a_ci_summary_that_cannot_be_written_changes_no_exit_code(tmp_path: Path, where: str) -> None:
    """Issue 45 (2, 3): ``$GITHUB_STEP_SUMMARY`` unwritable: the run's exit code and JSON stand,
    one warning line names the path, no traceback (it was exit 1 after a published run)."""
    _graph(tmp_path / "data")
    summary = tmp_path / "summary.md" if where == "a directory" else tmp_path / "missing" / "summary.md"
    if where == "a directory":
        summary.mkdir()
    env = {"GITHUB_STEP_SUMMARY": str(summary)}
    for over, code in (({"budget.features": 0.5}, 3), ({"seed": 3}, 0)):  # a refusal, then a published run
        cfg = _write_config(tmp_path, _pipeline(tmp_path, **over))
        r = _cli(["run", "p", "--config", str(cfg), "--no-evaluate", "--ci"], tmp_path, env)
        assert r.returncode == code, r.stderr[-3000:]
        assert json.loads(r.stdout.strip().splitlines()[-1])["exit_code"] == code
        assert "Traceback" not in r.stderr, r.stderr[-3000:]
        warnings = [line for line in r.stderr.splitlines() if "CI step summary was not written" in line]
        assert len(warnings) == 1 and str(summary) in warnings[0], r.stderr[-2000:]


def test_reading_commands_refuse_a_missing_store_and_an_unchecked_signer(tmp_path: Path) -> None:
    """Issue 45 (7, 8, 9): ``list``, ``verify --all`` and ``gc`` on a mistyped ``--store`` fail
    (exit 2) instead of reporting an empty store; without a trusted key ``verify`` does not say
    "ok" about a ledger edited and re-signed with another key unless told to accept an unchecked
    signer, and ``show --json`` says whether the signer was checked."""
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    from privgraph.storage.manifest import manifest_bytes
    from privgraph.storage.seal import seal_manifest

    _graph(tmp_path / "data")
    cfg = _write_config(tmp_path, _pipeline(tmp_path, seed=3))
    r = _cli(["run", "p", "--config", str(cfg), "--no-evaluate", "--json"], tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    version = json.loads(r.stdout.strip().splitlines()[-1])["version"]
    typo = str(tmp_path / "stroe")
    for args in (["artifacts", "list"], ["artifacts", "verify", "--all"], ["artifacts", "gc"]):
        r = _cli([*args, "--store", typo], tmp_path)
        assert r.returncode == 2 and "no such directory" in r.stderr and typo in r.stderr, (args, r.stdout, r.stderr)
    store, owner = ["--store", str(tmp_path / "store")], ["--private-records", str(tmp_path / "private")]
    nobody = ["--private-records", str(tmp_path / "no-keys")]
    r = _cli(["artifacts", "verify", version, *store, *owner], tmp_path)
    assert r.returncode == 0 and f"ok p/{version}" in r.stdout and "a trusted key" in r.stdout, r.stdout + r.stderr
    mpath = tmp_path / "store" / "p" / version / "manifest.json"
    m = json.loads(mpath.read_text())
    m["ledger"]["entries"][0]["guarantee"]["epsilon"] = 0.01  # the ledger claims more privacy
    mpath.write_bytes(manifest_bytes(seal_manifest(m, Ed25519PrivateKey.generate())))  # re-signed by another key
    r = _cli(["artifacts", "verify", version, *store, *nobody], tmp_path)
    assert r.returncode == 2 and "ok " not in r.stdout and f"unchecked p/{version}" in r.stdout, r.stdout + r.stderr
    assert "--accept-unchecked-signer" in r.stderr, r.stderr
    r = _cli(["artifacts", "verify", version, *store, *nobody, "--accept-unchecked-signer"], tmp_path)
    assert r.returncode == 0 and "signer not checked: accepted" in r.stdout, r.stdout + r.stderr
    r = _cli(["artifacts", "verify", version, *store, *owner], tmp_path)  # the owner's key catches it
    assert r.returncode == 2 and "not by a trusted key" in r.stderr, r.stdout + r.stderr
    r = _cli(["artifacts", "show", version, *store, *nobody, "--json"], tmp_path)
    assert r.returncode == 0, r.stderr
    shown = json.loads(r.stdout)
    assert shown["checked"]["signer_trusted"] is False and shown["checked"]["signer"] == shown["seal"]["public_key"]


def test_a_killed_runs_staged_input_is_swept_by_the_next_run_and_by_gc(tmp_path: Path) -> None:
    """Issue 45 (6): kill -9 during a ``partitions.layout: files`` run leaves the raw partitioned
    input in ``<private_records>/staging/.partitioned-*``; the next run removes those of this
    host whose process is gone, ``artifacts gc`` any older than ``--min-age-hours``."""
    import socket as _socket

    _graph(tmp_path / "data")
    staging = tmp_path / "private" / "staging"
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    host = _socket.gethostname().replace("-", "_")
    killed = staging / f".partitioned-{host}-{int(dead.stdout)}-abc" / "input"
    elsewhere = staging / ".partitioned-otherhost-1-def" / "input"  # another host's: not this run's to judge
    for d in (killed, elsewhere):
        d.mkdir(parents=True)
        (d / "x.npy").write_bytes(b"raw private rows")
    cfg = _write_config(tmp_path, _pipeline(tmp_path, seed=3, **{"partitions.layout": "files"}))
    r = _cli(["run", "p", "--config", str(cfg), "--no-evaluate"], tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    assert not killed.parent.exists() and elsewhere.exists()
    args = ["artifacts", "gc", "--store", str(tmp_path / "store"), "--private-records", str(tmp_path / "private")]
    r = _cli([*args, "--min-age-hours", "1"], tmp_path)
    assert r.returncode == 0 and elsewhere.exists(), r.stdout + r.stderr  # younger than an hour
    two_hours_ago = elsewhere.parent.stat().st_mtime - 7200
    os.utime(elsewhere.parent, (two_hours_ago, two_hours_ago))
    r = _cli([*args, "--min-age-hours", "1"], tmp_path)
    assert r.returncode == 0 and not elsewhere.parent.exists(), r.stdout + r.stderr
    assert "1 staged input(s)" in r.stdout, r.stdout
    assert sorted(p.name for p in staging.iterdir()) == []


def test_other_libraries_info_logs_are_quiet_unless_verbose() -> None:
    """Issue 46: the CLI's Prefect log handlers drop Dask's (and other libraries') INFO records;
    ``--verbose`` brings them back; Prefect's run logs and every WARNING pass either way, but for Dask's two
    warnings of a loaded machine (a slow event loop, a worker slow to stop as the run's cluster closes)."""
    import io
    import logging

    from privgraph import cli

    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    root = logging.getLogger()
    root.addHandler(handler)
    old_level = root.level
    root.setLevel(logging.INFO)

    def emitted() -> list[str]:
        stream.seek(0)
        stream.truncate()
        logging.getLogger("distributed.scheduler").info("Lost all workers")
        logging.getLogger("great_expectations.data_context").info("Created temporary directory")
        logging.getLogger("distributed.worker").warning("memory use is high")
        # a loaded machine's noise: the run's own LocalCluster was slow, not wrong
        logging.getLogger("distributed.core").warning("Event loop was unresponsive in Nanny for %.2fs.", 3.27)
        logging.getLogger("distributed.nanny").warning("Worker process still alive after %.1f seconds, killing", 4.0)
        logging.getLogger("prefect.task_runs").info("Finished in state Completed()")
        return stream.getvalue().splitlines()

    try:
        cli.quiet_prefect()
        assert emitted() == ["memory use is high", "Finished in state Completed()"]
        cli.quiet_prefect()  # twice (compare runs several flows): still one filter of each kind
        assert len(handler.filters) == 2
        cli.quiet_prefect(verbose=True)
        assert emitted() == ["Lost all workers", "Created temporary directory", "memory use is high",
                             "Event loop was unresponsive in Nanny for 3.27s.",
                             "Worker process still alive after 4.0 seconds, killing", "Finished in state Completed()"]
    finally:
        root.removeHandler(handler)
        root.setLevel(old_level)


def test_help_texts_are_reflowed_to_the_terminal() -> None:
    """Issue 46: a command's docstring reaches ``--help`` as paragraphs, not as its source lines
    (which broke sentences mid-line in the command list)."""
    import os

    env = {**os.environ, "COLUMNS": "200"}
    r = subprocess.run([sys.executable, "-m", "privgraph.cli", "--help"], capture_output=True, text=True, env=env)
    assert r.returncode == 0, r.stderr
    line = next(ln for ln in r.stdout.splitlines() if " compare " in ln)
    assert "and store the table" in line, r.stdout  # one line at 200 columns, not three
    r = subprocess.run([sys.executable, "-m", "privgraph.cli", "serve", "--help"], capture_output=True, text=True, env=env)
    assert "schedules are paused until the next" in " ".join(r.stdout.split()), r.stdout
