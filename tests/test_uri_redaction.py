"""No output channel of any command shows an S3 secret (issue 56).

:func:`~privgraph.guarantee.redaction.redact_uri` is property-tested with random secrets. Then
every command that takes a URI runs through the real CLI in a subprocess, against moto's S3 server
on 127.0.0.1, with a key and a secret holding ``/``, ``@``, ``:`` and ``%`` in the URI's userinfo
(raw, or percent-encoded where pyarrow must open it) and a ``secret_key=`` in its query string:
``privgraph ingest`` (a graph written to S3, the same destination again, a URI pyarrow cannot
parse, a missing bucket, a ``file://`` destination, an S3 URI as ``EDGES``), ``privgraph run --ci``
on a ``partitioned`` dataset whose ``path`` does not exist, cannot be parsed, or is a graph with a
range missing (refused inside the flow: its Prefect logs and run states are read back through the
API), a store URI with credentials in ``pipelines.yaml``, in ``--store``, a generic dataset's file
as a URI, ``privgraph artifacts list/show/verify/gc --store`` and ``privgraph evaluate --store``.
stdout, stderr, the ``--ci`` JSON, the ``$GITHUB_STEP_SUMMARY`` file and the Prefect API's rows
are searched for the key, the secret (raw and encoded) and each of its pieces longer than 3
characters.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import json
import os
import re
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import numpy as np
import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from privgraph.guarantee.redaction import REDACTED, redact_uri

REPO = Path(__file__).resolve().parents[1]

# -- the function ----------------------------------------------------------------------------------
#: every character a secret may hold, the URI's delimiters and percent signs first
_ANY = st.text(alphabet=st.sampled_from("/@:%?#&=+ ~.-_aZ09\u00e9") | st.characters(codec="utf-8"), min_size=1)
_NAME = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789-.", min_size=1, max_size=12)
_PATH = st.lists(st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789-._%:~=&+", min_size=1, max_size=8), max_size=3)


@settings(max_examples=400, deadline=None)
@given(scheme=st.sampled_from(["s3", "gs", "file", "hdfs", "abfs"]), key=_ANY, secret=_ANY, bucket=_NAME,
       path=_PATH, query=st.none() | _ANY, fragment=st.none() | _ANY, userinfo=st.booleans())
def test_no_piece_of_the_userinfo_or_the_query_survives(scheme: str, key: str, secret: str, bucket: str,
                                                        path: list[str], query: str | None, fragment: str | None,
                                                        userinfo: bool) -> None:
    """Whatever the secret holds, the result is ``scheme://host/path``, or ``scheme://(redacted)``
    where a ``?`` or ``#`` before the last ``@`` leaves the userinfo and the query apart unknown;
    the latter only then."""
    where = "/".join([bucket, *path])
    uri = (f"{scheme}://" + (f"{key}:{secret}@" if userinfo else "") + where
           + ("" if query is None else f"?{query}") + ("" if fragment is None else f"#{fragment}"))
    shown = redact_uri(uri)
    assert shown in (f"{scheme}://{where}", f"{scheme}://{REDACTED}"), (uri, shown)
    ambiguous = ((userinfo and any(c in f"{key}:{secret}" for c in "?#"))
                 or any("@" in (p or "") for p in (query, fragment)))
    assert (shown == f"{scheme}://{REDACTED}") == ambiguous, (uri, shown)
    assert redact_uri(shown) == shown  # idempotent


@given(path=st.text(min_size=0).filter(lambda p: "://" not in p))
def test_a_local_path_is_shown_as_it_is(path: str) -> None:
    assert redact_uri(path) == path
    assert redact_uri(Path("/data") / "g?x@y") == "/data/g?x@y"


def test_known_uris() -> None:
    assert redact_uri("s3://AKIA:se/cr@et%2Fx:y@bucket/g?secret_key=abc") == "s3://bucket/g"
    assert redact_uri("s3://bucket/prefix?endpoint_override=127.0.0.1:9000&scheme=http") == "s3://bucket/prefix"
    assert redact_uri("s3://bucket/path@v2") == "s3://v2"  # over-redaction: an @ in a path
    assert redact_uri("s3://bucket/g?secret_key=a@b") == f"s3://{REDACTED}"
    assert redact_uri("file:///tmp/x#frag") == "file:///tmp/x"
    assert redact_uri("s3://") == "s3://"


# -- every command, every channel ------------------------------------------------------------------
KEY = "AKIAQXREDACTME7"
SECRET = "wJalrXUt/nFEMI@K7MDENG%2Fbxp:RfiCY"
QUERY_SECRET = "Zq9vLmXpT/zw:8%41+Kd"  # no '@': with one the query and the userinfo are indistinct (all redacted)
#: what no channel may show: the key, the secrets raw and encoded, each piece longer than 3 characters
FORBIDDEN = sorted({KEY, SECRET, quote(SECRET, safe=""), QUERY_SECRET, quote(QUERY_SECRET, safe=""), "secret_key"}
                   | {p for s in (SECRET, QUERY_SECRET) for p in re.split(r"[/@:%]", s) if len(p) > 3})
N = 60


def _leaks(text: str) -> list[str]:
    return [f for f in FORBIDDEN if f in text]


def test_the_forbidden_pieces_are_the_secrets() -> None:
    assert {"wJalrXUt", "nFEMI", "K7MDENG", "2Fbxp", "RfiCY", "Zq9vLmXpT"} <= set(FORBIDDEN)
    assert _leaks(f"x {SECRET.split('@')[1][:7]} y") == ["K7MDENG"]  # the search can fail


@dataclasses.dataclass
class Run:
    args: list[str]
    code: int
    stdout: str
    stderr: str
    summary: str  # $GITHUB_STEP_SUMMARY after the command (run --ci), else ""

    def channels(self) -> str:
        return "\n".join((self.stdout, self.stderr, self.summary))


def _generic_files(root: Path) -> None:
    """A ring plus chords, a third of the edges private, features in [0, 1), 3 labels, a split."""
    root.mkdir(parents=True, exist_ok=True)
    edges = [(i, (i + 1) % N) for i in range(N)] + [(i, (i + 7) % N) for i in range(0, N, 3)]
    rows = ["src,dst,private"] + [f"{u},{v},{'true' if k % 3 == 0 else 'false'}" for k, (u, v) in enumerate(edges)]
    (root / "edges.csv").write_text("\n".join(rows) + "\n")
    np.save(root / "x.npy", np.random.default_rng(0).random((N, 4)))
    np.save(root / "y.npy", np.arange(N) % 3)
    parts = ["train"] * 20 + ["val"] * 15 + ["test"] * 25
    (root / "split.csv").write_text("id,split\n" + "".join(f"{i},{p}\n" for i, p in enumerate(parts)))


def _pipeline(tmp: Path, dataset: dict[str, Any], **over: Any) -> dict[str, Any]:
    return {
        "dataset": {"root": str(tmp / "data"), **dataset},
        "features": {"mechanism": "feature_rr", "epsilon": 1.0, "bins": 2, "lower": 0.0, "upper": 1.0},
        "edges": {"mechanism": "dprr", "epsilon": 1.0},
        "budget": {"features": 1.0, "edges": 2.0},
        "partitions": {"num_parts": 2, "method": "hash"},
        "executor": "serial",
        "storage": str(tmp / "store"),
        "private_records": str(tmp / "private"),
        **over,
    }


class _Commands:
    def __init__(self, tmp: Path, env: dict[str, str]) -> None:
        self.tmp, self.env = tmp, env

    def cli(self, name: str, *args: str, ci: bool = False, subprocess_: bool = False) -> Run:
        """The command in a subprocess (``subprocess_``: one whose flow runs, so that Prefect's
        handlers are the process's own), else in this process (a refusal before Prefect starts:
        the same code, without a second interpreter's start-up), in ``tmp``."""
        summary = self.tmp / f"summary-{name}.md"
        env = {**self.env, "GITHUB_STEP_SUMMARY": str(summary), "PRIVGRAPH_DEBUG": None}
        if subprocess_:
            full = {k: v for k, v in {**os.environ, **env}.items() if v is not None}
            r = subprocess.run([sys.executable, "-m", "privgraph.cli", *args], cwd=self.tmp, env=full,
                               capture_output=True, text=True, timeout=300)
            code, out, err = r.returncode, r.stdout, r.stderr
        else:
            from typer.testing import CliRunner

            from privgraph.cli import app

            here = os.getcwd()
            os.chdir(self.tmp)
            try:
                res = CliRunner().invoke(app, list(args), env=env)
            finally:
                os.chdir(here)
            code, out, err = res.exit_code, res.stdout, res.stderr
        return Run(list(args), code, out, err, summary.read_text() if summary.exists() else "")

    def run(self, name: str, pipeline: dict[str, Any], *more: str, subprocess_: bool = False) -> Run:
        cfg = self.tmp / f"{name}.yaml"
        cfg.write_text(yaml.safe_dump({"pipelines": {name: pipeline}}))
        return self.cli(name, "run", name, "--config", str(cfg), "--ci", "--no-evaluate", *more, ci=True,
                        subprocess_=subprocess_)


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory, moto_endpoint: str,
          prefect_server_env: dict[str, str]) -> dict[str, Any]:
    """Every command run once: ``{"runs": {name: Run}, "flow": Prefect's rows of the refused flow}``."""
    import boto3

    tmp = tmp_path_factory.mktemp("uri")
    _generic_files(tmp / "data")
    graphs, store = f"graphs-{uuid.uuid4().hex[:8]}", f"store-{uuid.uuid4().hex[:8]}"
    s3 = boto3.client("s3", endpoint_url=moto_endpoint, region_name="us-east-1",
                      aws_access_key_id="testing", aws_secret_access_key="testing")
    for b in (graphs, store):
        s3.create_bucket(Bucket=b)
    aws = {"AWS_ENDPOINT_URL": moto_endpoint, "AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
           "AWS_DEFAULT_REGION": "us-east-1", "AWS_EC2_METADATA_DISABLED": "true"}
    c = _Commands(tmp, {**aws, **prefect_server_env})
    endpoint = f"endpoint_override={moto_endpoint.removeprefix('http://')}&scheme=http"
    raw = f"{KEY}:{SECRET}@"  # pyarrow cannot parse it (an unencoded '/')
    encoded = f"{quote(KEY, safe='')}:{quote(SECRET, safe='')}@"  # pyarrow opens it, with these credentials
    good = lambda bucket, prefix: f"s3://{encoded}{bucket}/{prefix}?{endpoint}"  # noqa: E731
    unparsable = f"s3://{raw}{graphs}/g?{endpoint}&secret_key={QUERY_SECRET}"
    store_uri = f"s3://{raw}{store}/prod?secret_key={QUERY_SECRET}"
    data = str(tmp / "data")
    runs: dict[str, Run] = {}
    runs["ingest s3"] = c.cli("ingest-s3", "ingest", f"{data}/edges.csv", "--features", f"{data}/x.npy", "--labels",
                              f"{data}/y.npy", "--split", f"{data}/split.csv", good(graphs, "g"), "--range-size", "25")
    s3.delete_object(Bucket=graphs, Key="g/edges/range-00001.parquet")  # the flow's ingest task refuses the graph
    partitioned = lambda path: {"name": "partitioned", "options": {"path": path}}  # noqa: E731
    flow = concurrent.futures.ThreadPoolExecutor(1)  # the flow's run (a subprocess) beside the quick refusals
    flow_run = flow.submit(c.run, "uri-flow", _pipeline(tmp, partitioned(good(graphs, "g"))), subprocess_=True)
    jobs = {
        "ingest s3 again": lambda: c.cli("ingest-again", "ingest", f"{data}/edges.csv", good(graphs, "g")),
        "ingest unparsable": lambda: c.cli("ingest-bad", "ingest", f"{data}/edges.csv", unparsable),
        "ingest no bucket": lambda: c.cli("ingest-nob", "ingest", f"{data}/edges.csv", good(f"no-such-{graphs}", "g")),
        "ingest file uri": lambda: c.cli("ingest-file", "ingest", f"{data}/edges.csv",
                                         f"file://{encoded}localhost{tmp}/dest?secret_key={quote(QUERY_SECRET)}"),
        "ingest edges uri": lambda: c.cli("ingest-edges", "ingest", f"s3://{raw}{graphs}/edges.csv", str(tmp / "dest2")),
        "run graph not found": lambda: c.run("uri-none", _pipeline(tmp, partitioned(good(graphs, "nothing")))),
        "run unparsable path": lambda: c.run("uri-bad", _pipeline(tmp, partitioned(unparsable))),
        "run generic file uri": lambda: c.run("uri-generic", _pipeline(
            tmp, {"name": "generic", "options": {"edges": f"s3://{raw}{graphs}/edges.csv"}})),
        "run storage in yaml": lambda: c.run("uri-storage", _pipeline(tmp, {"name": "generic", "options": {
            "edges": "edges.csv"}}, storage=store_uri)),
        "run --store": lambda: c.run("uri-store", _pipeline(tmp, {"name": "generic", "options": {"edges": "edges.csv"}}),
                                     "--store", store_uri),
        **{f"artifacts {cmd}": (lambda cmd=cmd: c.cli(f"artifacts-{cmd}", "artifacts", cmd, *{"show": ["v1"], "verify": ["--all"]}.get(cmd, []),
                                                      "--store", store_uri))
           for cmd in ("list", "show", "verify", "gc")},
        "evaluate": lambda: c.cli("evaluate", "evaluate", "v1", "--store", store_uri),
    }
    runs.update({name: job() for name, job in jobs.items()})  # in this process, one at a time
    runs["run refused in the flow"] = flow_run.result()
    flow.shutdown()
    return {"runs": runs, "flow": _prefect_rows(prefect_server_env["PREFECT_API_URL"], "uri-flow"), "graphs": graphs,
            "uri": good(graphs, "g"), "aws": aws}


def _prefect_rows(api: str, name: str) -> dict[str, list[dict[str, Any]]]:
    """The flow runs named ``name`` and their task runs and logs, once the task runs' final states
    and the flow's failure are recorded (Prefect 3 records them asynchronously)."""
    post = lambda path, body: httpx.post(f"{api}{path}", json={**body, "limit": 200}, timeout=30).json()  # noqa: E731
    deadline = time.monotonic() + 60
    while True:
        flows = post("/flow_runs/filter", {"flow_runs": {"name": {"any_": [name]}}})
        ids = [f["id"] for f in flows]
        tasks = post("/task_runs/filter", {"flow_runs": {"id": {"any_": ids}}}) if ids else []
        logs = post("/logs/filter", {"logs": {"flow_run_id": {"any_": ids}}, "sort": "TIMESTAMP_ASC"}) if ids else []
        done = (flows and all(f["state_type"] == "FAILED" for f in flows) and tasks
                and all(t["state_type"] in ("COMPLETED", "FAILED") for t in tasks)
                and any(t["state_type"] == "FAILED" for t in tasks))
        if done or time.monotonic() > deadline:
            return {"flows": flows, "tasks": tasks, "logs": logs}
        time.sleep(0.5)


#: each command: its exit code and the words its one line holds (the URI redacted, never dropped)
EXPECTED = {
    "ingest s3": (0, "into s3://{graphs}/g ("),
    "ingest s3 again": (2, "s3://{graphs}/g exists"),
    "ingest unparsable": (2, "s3://{graphs}/g: not a valid URI"),
    "ingest no bucket": (2, "s3://no-such-{graphs}/g: cannot open the destination: bucket"),
    "ingest file uri": (2, "file://localhost"),
    "ingest edges uri": (2, "edges file: a URI (s3://...) where a local file is expected"),
    "run refused in the flow": (2, "s3://{graphs}/g/edges/range-00001.parquet: no such file"),
    "run graph not found": (2, "partitioned graph not found: s3://{graphs}/nothing"),
    "run unparsable path": (2, "s3://{graphs}/g: not a valid URI"),
    "run generic file uri": (2, "options.edges: s3://{graphs}/edges.csv is a URI"),
    "run storage in yaml": (2, "storage: s3://store-"),
    "run --store": (2, "store URI s3://store-"),
    "artifacts list": (2, "store URI s3://store-"),
    "artifacts show": (2, "store URI s3://store-"),
    "artifacts verify": (2, "store URI s3://store-"),
    "artifacts gc": (2, "store URI s3://store-"),
    "evaluate": (2, "store URI s3://store-"),
}


@pytest.mark.flow
@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_no_channel_of_the_command_shows_the_secret(world: dict[str, Any], name: str) -> None:
    r = world["runs"][name]
    code, words = EXPECTED[name]
    out = r.channels()
    assert r.code == code, out[-3000:]
    assert words.format(graphs=world["graphs"]) in (r.stdout if code == 0 else r.stderr), out[-3000:]
    assert not _leaks(out), (_leaks(out), out[-3000:])
    if code:
        errors = [ln for ln in r.stderr.splitlines() if ln.startswith("error:")]
        assert len(errors) == 1 and "internal error" not in errors[0] and "Traceback" not in r.stderr, r.stderr
    if "--ci" in r.args:  # the JSON on stdout and the step summary name the failure, redacted
        ci = json.loads(r.stdout.strip().splitlines()[-1])
        assert ci["exit_code"] == code and words.format(graphs=world["graphs"]) in ci["error"], ci
        assert f"(exit {code})" in r.summary and words.format(graphs=world["graphs"]) in r.summary, r.summary


@pytest.mark.flow
def test_the_refused_flows_logs_and_states_show_no_secret(world: dict[str, Any]) -> None:
    """The graph's ``graph.json`` passes the check before Prefect starts; its missing edge range is
    refused by the flow's ingest task: the flow run, its task runs (names, parameters, states and
    their messages) and every log line, as the API serves them to the UI."""
    rows = world["flow"]
    assert rows["flows"] and all(f["state_type"] == "FAILED" for f in rows["flows"]), rows["flows"]
    assert any(t["state_type"] == "FAILED" for t in rows["tasks"]), rows["tasks"]
    text = json.dumps(rows)
    assert f"s3://{world['graphs']}/g/edges/range-00001.parquet: no such file" in text  # the refusal is there
    assert any("range-00001" in (f["state"] or {}).get("message", "") for f in rows["flows"]), rows["flows"]
    assert len(rows["logs"]) > 3, rows["logs"]
    assert not _leaks(text), _leaks(text)


@pytest.mark.flow
def test_the_library_names_the_graph_redacted(world: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    """What may reach a log or the manifest without a message of the CLI: the graph's ``repr`` (a
    worker's log prints a failed task's arguments), its ``meta``, the readers' refusals, the
    manifest's dataset options."""
    from privgraph.errors import GraphValidationError
    from privgraph.ingest.partitioned_graph import graph_meta, open_partitioned_graph, read_edge_range, read_node_range
    from privgraph.publish.publication import _portable_options

    for k, v in world["aws"].items():
        monkeypatch.setenv(k, v)
    g = open_partitioned_graph(world["uri"])
    texts = [repr(g), graph_meta(g)["source"], json.dumps(_portable_options({"path": world["uri"], "edges": world["uri"]}))]
    for call, exc in ((lambda: g.node_range(99), IndexError), (lambda: read_node_range(g, 0, ["nope"]), ValueError),
                      (lambda: read_edge_range(g, 1), GraphValidationError)):
        with pytest.raises(exc) as info:
            call()
        texts.append(str(info.value))
    assert all(f"s3://{world['graphs']}/g" in t for t in texts[:2] + texts[3:]), texts
    assert not _leaks("\n".join(texts)), texts
