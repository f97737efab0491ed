"""``privgraph ingest`` at the edges of what it can write (issue 57, items 3, 4 and 6): a number out
of the format's bounds is refused, naming the flag, before anything is read or written; a disk
that fills while ingesting (a real tmpfs) is one line, exit code 4, naming the destination and the
disk, with nothing left; a ``file://`` destination is the local directory it names; a URI
destination that cannot be written or cleaned up, or whose endpoint does not answer, is refused
before any input row is read (moto's S3 server, bucket policies)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import uuid
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from privgraph.errors import ConfigError, DestinationUnavailableError, exit_code_for
from privgraph.ingest import partitioned_writer
from privgraph.ingest.partitioned_graph import load_partitioned_graph
from privgraph.ingest.partitioned_writer import MAX_RANGES, write_partitioned_graph

REPO = Path(__file__).resolve().parents[1]
AWS = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": "us-east-1"}


def _one_edge(tmp: Path) -> Path:
    path = tmp / "edges.csv"
    path.write_text("src,dst\n0,1\n")
    return path


@pytest.fixture
def no_row_read(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The edge list's rows are never read: any read fails the test (and stops an ingest that
    would otherwise write gigabytes)."""
    reads: list[str] = []

    def refuse(*args, **kw):
        reads.append("edges")
        raise AssertionError("the edge list's rows were read")

    monkeypatch.setattr(partitioned_writer, "edge_batches", refuse)
    return reads


def _cli(args: list[str], cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "privgraph.cli", "ingest", *args], cwd=cwd, capture_output=True,
                          text=True, timeout=120, env={**os.environ, "COLUMNS": "300", **(env or {})})


def _one_error_line(stderr: str) -> str:
    lines = [ln for ln in stderr.splitlines() if ln.startswith("error:")]
    assert len(lines) == 1 and "Traceback" not in stderr, stderr[-3000:]
    return lines[0]


# -- item 3: every number typed within the format's bounds, before anything is read or written -----
BOUNDS = [
    (["--num-nodes", "2147483648"], "--num-nodes: expected an integer in 1..2147483647 (the format's bound, "
                                    "2^31 - 1), got 2147483648"),
    (["--num-nodes", str(2**40)], f"--num-nodes: expected an integer in 1..2147483647 (the format's bound, "
                                  f"2^31 - 1), got {2**40}"),
    (["--num-nodes", "0"], "--num-nodes: expected an integer in 1..2147483647"),
    (["--range-size", "0"], "--range-size: expected an integer in 1..2147483647"),
    (["--range-size", "2147483648"], "--range-size: expected an integer in 1..2147483647"),
    (["--num-nodes", "2147483647", "--range-size", "1000"],
     "--range-size 1000: 2147483647 nodes (--num-nodes) make 2147484 ranges; an ingest writes at most 100000 "
     "(two files each): give --range-size 21475 or more"),
    (["--rho", "nan"], "--rho: expected a fraction in [0, 1], got nan"),
    (["--train", "1"], "--train: expected a fraction in (0, 1), got 1.0"),
    (["--val", "-0.5"], "--val: expected a fraction in (0, 1), got -0.5"),
    (["--split-seed", "-1"], "--split-seed: a seed is a non-negative integer, got -1"),
    (["--node-split-seed", "-2"], "--node-split-seed: a seed is a non-negative integer, got -2"),
]


@pytest.mark.parametrize("args, says", BOUNDS, ids=[" ".join(a) for a, _ in BOUNDS])
def test_a_number_out_of_the_formats_bounds_is_refused_before_anything_is_read(args, says, tmp_path, no_row_read):
    """Issue 57 item 3: ``--num-nodes 2147483648`` on a one-edge file wrote 13 GB in 21,475 ranges
    that the reader then refused; 2^40 stopped only on a full disk."""
    from typer.testing import CliRunner

    from privgraph.cli import app

    edges = _one_edge(tmp_path)
    res = CliRunner().invoke(app, ["ingest", str(edges), str(tmp_path / "g"), *args,
                                   "--private-records", str(tmp_path / "private")])
    assert res.exit_code == 2, res.stderr
    assert _one_error_line(res.stderr).startswith(f"error: {says}"), res.stderr
    assert no_row_read == [] and sorted(p.name for p in tmp_path.iterdir()) == ["edges.csv"]  # nothing written


def test_the_ranges_the_input_files_make_are_bounded(tmp_path, no_row_read, monkeypatch):
    """Without ``--num-nodes`` the node count is the features' rows: too many ranges of
    ``range_size`` is refused before any edge row is read. From the edges' largest id (a value of
    the data, left out of the message), once they are read. Nothing is left either way."""
    edges = _one_edge(tmp_path)
    np.save(tmp_path / "x.npy", np.zeros((MAX_RANGES + 1, 1), np.float32))
    with pytest.raises(ConfigError) as info:
        write_partitioned_graph(edges, features=tmp_path / "x.npy", destination=tmp_path / "g", range_size=1)
    assert str(info.value) == (f"--range-size 1: {MAX_RANGES + 1} nodes (the rows of {tmp_path / 'x.npy'}) make "
                               f"{MAX_RANGES + 1} ranges; an ingest writes at most {MAX_RANGES} (two files each): "
                               "give --range-size 2 or more")
    assert no_row_read == [] and sorted(p.name for p in tmp_path.iterdir()) == ["edges.csv", "x.npy"]
    monkeypatch.undo()
    edges.write_text(f"src,dst\n0,1\n1,{MAX_RANGES + 7}\n")
    with pytest.raises(ConfigError) as info:
        write_partitioned_graph(edges, destination=tmp_path / "g", range_size=1)
    assert str(info.value) == (f"--range-size 1: the node count the edges give makes more than {MAX_RANGES} ranges; "
                               f"an ingest writes at most {MAX_RANGES} (two files each): give a larger --range-size "
                               "(21475 or more takes any graph)")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["edges.csv", "x.npy"]


# -- item 4: a full disk is exit 4, naming the destination and the disk, with nothing left --------
def _graph_files(tmp: Path, n: int, m: int, d: int) -> dict[str, Path]:
    rng = np.random.default_rng(0)
    u, v = rng.integers(0, n, 2 * m), rng.integers(0, n, 2 * m)
    lo, hi = np.minimum(u, v), np.maximum(u, v)
    _, first = np.unique(lo * n + hi, return_index=True)
    keep = np.sort(first[lo[first] != hi[first]])[:m]
    files = {"edges": tmp / "edges.csv"}
    pd.DataFrame({"src": u[keep], "dst": v[keep]}).to_csv(files["edges"], index=False)
    if d:
        files["features"] = tmp / "x.npy"
        np.save(files["features"], rng.normal(size=(n, d)).astype(np.float32))
    return files


@pytest.mark.parametrize("where", ["spill", "ranges", "temp of a URI"])
def test_a_disk_that_fills_while_ingesting_is_exit_4_naming_the_destination(where, tmp_path, small_disk,
                                                                            moto_endpoint):
    """Issue 57 item 4: a full disk was exit 1, "internal error: OSError: 23616 requested and 12404
    written", naming no path. A real 1 MiB tmpfs fills: under the spill (60,000 edges: 1.5 MB), under
    the range files (the spill's 0.5 MB fits, the 1 MB of features does not), or under the spill in
    the local temporary directory of an ``s3://`` destination (TMPDIR)."""
    data = tmp_path / "data"
    data.mkdir()
    files = _graph_files(data, 2000, 20_000, 128) if where == "ranges" else _graph_files(data, 2000, 60_000, 0)
    args = [str(files["edges"]), "--range-size", "500", "--private-records", str(tmp_path / "private")]
    args += ["--features", str(files["features"])] if "features" in files else []
    env, keys = None, None
    if where == "temp of a URI":
        import boto3

        bucket = f"privgraph-full-{uuid.uuid4().hex[:8]}"
        s3 = boto3.client("s3", endpoint_url=moto_endpoint, **_boto(AWS))
        s3.create_bucket(Bucket=bucket)
        keys = lambda: [o["Key"] for o in s3.list_objects_v2(Bucket=bucket).get("Contents", [])]  # noqa: E731
        query = f"?endpoint_override={moto_endpoint.removeprefix('http://')}&scheme=http"
        destination, env = f"s3://testing:testing@{bucket}/g{query}", {**AWS, "TMPDIR": str(small_disk)}
        says = (f"error: s3://{bucket}/g: No space left on device in the local temporary directory {small_disk} "
                "(the spill and each range before its upload); nothing was left, the objects uploaded were deleted")
    else:
        destination = str(small_disk / "g")
        says = (f"error: {small_disk / 'g'}: No space left on device on the destination's disk (the ingest writes "
                f"into {small_disk / '.g.tmp'}, beside it); nothing was left")
    r = _cli([args[0], destination, *args[1:]], tmp_path, env)
    assert r.returncode == 4, r.stderr[-3000:]
    assert _one_error_line(r.stderr).startswith(says), r.stderr
    assert ("edges read and routed" in r.stderr) == (where == "ranges")  # the disk filled where it was meant to
    assert "testing" not in r.stderr + r.stdout
    assert list(small_disk.iterdir()) == []  # nothing left on the full disk
    assert keys is None or keys() == []  # nor at the destination
    assert not list((tmp_path / "private" / ".ingests").glob("*.json"))  # the claim released


def _boto(env: dict[str, str]) -> dict[str, str]:
    return {"aws_access_key_id": env["AWS_ACCESS_KEY_ID"], "aws_secret_access_key": env["AWS_SECRET_ACCESS_KEY"],
            "region_name": env["AWS_DEFAULT_REGION"]}


# -- item 6: destinations ---------------------------------------------------------------------------
def test_a_file_uri_destination_is_the_local_directory_it_names(tmp_path):
    """Issue 57 item 6: ``file://`` (pyarrow's local file system, which the docs allow) failed with
    "Failed to open local file .../nodes/range-00000.parquet" after reading the input. It is the
    local directory it names: written all or nothing, never overwritten."""
    files = _graph_files(tmp_path, 60, 90, 3)
    r = _cli([str(files["edges"]), f"file://{tmp_path / 'g'}", "--features", str(files["features"]),
              "--range-size", "25", "--private-records", str(tmp_path / "private")], tmp_path)
    assert r.returncode == 0, r.stderr
    assert f"ingested 60 nodes in 3 range(s) of up to 25 into {tmp_path / 'g'} (" in r.stdout
    local = write_partitioned_graph(files["edges"], features=files["features"], destination=tmp_path / "h",
                                    range_size=25)
    assert json.loads((tmp_path / "g" / "graph.json").read_text()) == local.metadata()
    a, b = load_partitioned_graph(f"file://{tmp_path / 'g'}"), load_partitioned_graph(tmp_path / "h")
    assert np.array_equal(a.x, b.x) and np.array_equal(a.edges_public, b.edges_public)
    with pytest.raises(ConfigError, match="never overwrites"):
        write_partitioned_graph(files["edges"], destination=f"file://{tmp_path / 'g'}")
    assert not (tmp_path / ".g.tmp").exists()


def _deny(s3, bucket: str, action: str) -> None:
    s3.put_bucket_policy(Bucket=bucket, Policy=json.dumps({"Version": "2012-10-17", "Statement": [
        {"Effect": "Deny", "Principal": "*", "Action": action, "Resource": f"arn:aws:s3:::{bucket}/*"}]}))


@pytest.mark.parametrize("case", ["write denied", "delete denied", "no answer"])
def test_a_uri_destination_is_written_and_cleaned_up_before_the_input_is_read(case, tmp_path, moto_endpoint,
                                                                             monkeypatch, no_row_read):
    """A URI destination gets a probe object written and deleted before any input row is read: a
    bucket whose policy denies writing (exit 2) or deleting (an aborted ingest could not clean up:
    exit 2), or an endpoint that does not answer (exit 4, as the store), is refused first. Before,
    a bucket that denied writes was found at the first range's upload, after reading the input."""
    import boto3

    for k, v in AWS.items():
        monkeypatch.setenv(k, v)
    bucket = f"privgraph-probe-{uuid.uuid4().hex[:8]}"
    s3 = boto3.client("s3", endpoint_url=moto_endpoint)
    s3.create_bucket(Bucket=bucket)
    endpoint = moto_endpoint.removeprefix("http://")
    if case == "no answer":
        with socket.socket() as sock:  # a port nobody listens on
            sock.bind(("127.0.0.1", 0))
            endpoint = f"127.0.0.1:{sock.getsockname()[1]}"
    else:
        _deny(s3, bucket, "s3:PutObject" if case == "write denied" else "s3:DeleteObject")
    uri = f"s3://{bucket}/graphs/g?endpoint_override={endpoint}&scheme=http"
    with pytest.raises((ConfigError, DestinationUnavailableError)) as info:
        write_partitioned_graph(_one_edge(tmp_path), destination=uri, private_records=tmp_path / "private")
    msg = str(info.value)
    assert msg.startswith(f"s3://{bucket}/graphs/g: ") and "\n" not in msg and "endpoint_override" not in msg
    assert no_row_read == []
    left = [o["Key"] for o in s3.list_objects_v2(Bucket=bucket).get("Contents", [])]
    if case == "write denied":
        assert exit_code_for(info.value) == 2 and ": cannot write objects there: " in msg and left == []
    elif case == "delete denied":  # the probes it could not delete are named, for the owner to remove
        assert exit_code_for(info.value) == 2 and ": cannot delete objects there" in msg
        assert sorted(left) and all(k.split("/")[-1] in msg for k in left), (left, msg)
    else:
        assert exit_code_for(info.value) == 4 and ": the endpoint does not answer (cannot open the destination)" in msg
    assert not list((tmp_path / "private" / ".ingests").glob("*.json"))
