"""The privatize flow in-process under a Prefect test harness: artifacts in the Prefect API,
nothing published when publishing fails, no version on a failed checkpoint."""

from __future__ import annotations

import asyncio
import json
import logging
from pathlib import Path

import pytest
import yaml
from privgraph.config.disclosure import disclosure_of

pytestmark = pytest.mark.flow


@pytest.fixture(scope="module")
def harness():
    from tests.prefect_server import owned_prefect_test_harness

    with owned_prefect_test_harness():
        yield


def _config(tmp_path: Path, **overrides) -> Path:
    p = {
        "dataset": {"name": "sbm", "rho": 0.2, "options": {"num_nodes": 600, "num_features": 8}},
        "features": {"mechanism": "feature_rr", "epsilon": 2.0, "bins": 4},
        "edges": {"mechanism": "dprr", "epsilon": 2.0},
        "budget": {"features": 2.0, "edges": 4.0},
        "partitions": {"num_parts": 3},
        "executor": "serial",
        "seed": 11,
        "storage": str(tmp_path / "store"),
        "private_records": str(tmp_path / "private"),
        "evaluate": {"runs": 2, "epochs": 20},
    }
    p.update(overrides)
    path = tmp_path / "pipelines.yaml"
    path.write_text(yaml.safe_dump({"pipelines": {"sbm-small": p}}))
    return path


async def _post(path: str, body: dict) -> list[dict]:
    """prefect 3.8.0's client sends explicit nulls its own server rejects: post the UI's filters."""
    from prefect.client.orchestration import get_client

    async with get_client() as client:
        r = await client._client.post(path, json=body)
        r.raise_for_status()
        return r.json()


def _runs_named(*names: str) -> list[dict]:
    return asyncio.run(_post("/flow_runs/filter", {"flow_runs": {"name": {"any_": list(names)}}, "limit": 10}))


def _artifacts_of(flow_run_id: str) -> list[dict]:
    """The keyed artifacts of a flow run (its Artifacts tab); Prefect's own result records have no key."""
    arts = asyncio.run(_post("/artifacts/filter", {"artifacts": {"flow_run_id": {"any_": [flow_run_id]}}, "limit": 50}))
    return [a for a in arts if a["key"]]


def test_ledger_and_metrics_are_prefect_artifacts(harness, tmp_path):
    from prefect.client.orchestration import get_client

    from flows.privatize import privatize_flow

    records: list[logging.LogRecord] = []
    handler = logging.Handler()
    handler.emit = records.append  # type: ignore[method-assign]
    logging.getLogger("prefect.flow_runs").addHandler(handler)  # prefect's loggers do not propagate
    try:
        res = privatize_flow(pipeline="sbm-small", config_path=str(_config(tmp_path)))
    finally:
        logging.getLogger("prefect.flow_runs").removeHandler(handler)
    names = [r.flow_run_name for r in records if getattr(r, "flow_run_name", None)]
    assert names and not [n for n in names if "staging" in n]  # the closing line said 'sbm-small/staging'
    assert names[-1] in ("sbm-small", f"sbm-small/{res['version']}")
    assert res["metrics"]["runs"] == 2
    async def read():
        # prefect 3.8.0's client sends explicit nulls (flow_runs, task_runs, offset) that its own
        # server rejects with 422, and empty filters exclude flow-level artifacts: post the
        # filter the UI sends instead
        async with get_client() as client:
            r = await client._client.post(
                "/artifacts/filter",
                json={"artifacts": {"key": {"any_": ["sbm-small-ledger", "sbm-small-metrics",
                                                     "sbm-small-private-evaluation"]}}, "limit": 100},
            )
            return r.json()

    arts = asyncio.run(read())
    by_key = {}
    for a in arts:
        by_key.setdefault(a["key"], []).append(a)
    assert set(by_key) == {"sbm-small-ledger", "sbm-small-metrics", "sbm-small-private-evaluation"}
    assert {a["type"] for a in arts} == {"markdown"}
    ledger_md = max(by_key["sbm-small-ledger"], key=lambda a: a["created"])["data"]
    assert "| privatize.features | feature_rr | features | feature_ldp | 2 | feature_ldp 2 | 3 disjoint |" in ledger_md
    assert "| privatize.edges | dprr | edges | edge_ldp | 2 | edge_dp 4 | 3 disjoint |" in ledger_md
    assert res["version"] in ledger_md
    metrics_md = by_key["sbm-small-metrics"][0]["data"]
    assert "| private (GNN) |" in metrics_md and "| private, no edges (feature-only floor) |" in metrics_md and "clean" not in metrics_md  # raw-data figures are not shareable
    private_md = by_key["sbm-small-private-evaluation"][0]["data"]
    assert private_md.startswith("# PRIVATE EVALUATION") and "trained on the raw graph" in private_md
    assert "PRIVATE EVALUATION" in by_key["sbm-small-private-evaluation"][0]["description"]
    assert "seed" not in ledger_md.lower() + metrics_md.lower()

    # the parent run, named <pipeline>/<version> and tagged, carries the ledger AND the metrics;
    # the private evaluation stays on the evaluate subflow, named <pipeline>/<version>/evaluate
    (parent,) = _runs_named(f"sbm-small/{res['version']}")
    assert set(parent["tags"]) == {"privgraph", "pipeline:sbm-small", "mechanism:feature_rr", "mechanism:dprr",
                                   "scope:features", "scope:edges"}
    on_parent = sorted(a["key"] for a in _artifacts_of(parent["id"]))
    assert on_parent == ["sbm-small-ledger", "sbm-small-metrics"]  # one ledger (two until issue 27)
    (sub,) = _runs_named(f"sbm-small/{res['version']}/evaluate")
    assert sub["parent_task_run_id"] is not None and "evaluate" in sub["tags"]
    assert {a["key"] for a in _artifacts_of(sub["id"])} == {"sbm-small-private-evaluation", "sbm-small-private-structure"}


def test_a_refused_run_keeps_its_first_name_and_its_tags(harness, tmp_path):
    from flows.privatize import privatize_flow
    from privgraph.errors import ValidationFailedError

    cfg = _config(tmp_path, budget={"features": 1.0, "edges": 4.0})  # FeatureRR at 2 over a cap of 1
    before = {r["id"] for r in _runs_named("sbm-small")}
    with pytest.raises(ValidationFailedError):
        privatize_flow(pipeline="sbm-small", config_path=str(cfg))
    (run,) = [r for r in _runs_named("sbm-small") if r["id"] not in before]
    assert run["state_type"] == "FAILED" and {"privgraph", "pipeline:sbm-small", "scope:edges"} <= set(run["tags"])
    assert {a["key"] for a in _artifacts_of(run["id"])} == {"sbm-small-ledger"}  # the refused ledger, no metrics


@pytest.mark.dask
def test_a_dask_run_logs_its_workers_and_publishes_the_dashboard_link(harness, tmp_path):
    """Partitions and workers in the logs; the Dask dashboard (on 127.0.0.1) as a link artifact on
    the run, an operational artifact that holds nothing of the data."""
    from prefect.logging.handlers import APILogHandler

    from flows.privatize import privatize_flow
    from tasks.artifacts import is_operational, is_shareable

    cfg = _config(tmp_path, executor="dask", dask={"n_workers": 1}, evaluate={"runs": 1, "epochs": 5})
    res = privatize_flow(pipeline="sbm-small", config_path=str(cfg))
    (parent,) = _runs_named(f"sbm-small/{res['version']}")
    arts = {a["key"]: a for a in _artifacts_of(parent["id"])}
    assert set(arts) == {"sbm-small-ledger", "sbm-small-metrics", "sbm-small-dask-dashboard"}
    link = arts["sbm-small-dask-dashboard"]
    assert link["data"].startswith("[Dask dashboard](http://127.0.0.1:") and link["task_run_id"] is not None
    assert is_operational(link["key"], "sbm-small") and not is_shareable(link["key"], "sbm-small")
    APILogHandler().flush()
    logs = asyncio.run(_post("/logs/filter", {"logs": {"flow_run_id": {"any_": [parent["id"]]}}, "limit": 200}))
    messages = [m["message"] for m in logs]
    assert any(m.startswith("3 partitions (metis, from public edges only), nodes per partition: ") for m in messages)
    assert "executor: dask (LocalCluster), 1 workers, 1 threads" in messages
    assert any(m.startswith("Dask dashboard: http://127.0.0.1:") for m in messages)


@pytest.mark.dask
def test_the_dask_dashboard_link_serves_the_dashboard():
    """The link the run publishes opens the dashboard's pages: bokeh is in the lock (without it the
    page only said that the dashboard needs bokeh: issue 27)."""
    import httpx

    from tasks.dask_executor import DaskExecutor

    with DaskExecutor(n_workers=1, threads_per_worker=1) as ex:
        assert ex.dashboard_ready
        link = ex.dashboard_link
        assert link is not None and link.startswith("http://127.0.0.1:")
        page = httpx.get(link, follow_redirects=True, timeout=30)
    assert page.status_code == 200 and "bokeh" in page.text.lower() and "requires bokeh" not in page.text.lower()


def test_failure_between_data_and_manifest_leaves_no_version(harness, tmp_path, monkeypatch):
    from flows.privatize import privatize_flow
    from privgraph.storage import open_store
    from privgraph.storage.staging import PendingVersion

    def boom(self, manifest, **kwargs):
        raise OSError("disk full while writing manifest.json")

    monkeypatch.setattr(PendingVersion, "publish", boom)
    with pytest.raises(OSError, match="disk full"):
        privatize_flow(pipeline="sbm-small", config_path=str(_config(tmp_path)), evaluate=False)
    store = open_store(tmp_path / "store")
    assert store.list_versions() == []
    leftovers = [p for p in (tmp_path / "store").rglob("*") if p.is_file()] if (tmp_path / "store").exists() else []
    assert leftovers == []  # the staged data objects were removed too
    assert not list((tmp_path / "private").rglob("*.json"))  # and the private record of the version


def test_failed_checkpoint_writes_nothing(harness, tmp_path):
    from flows.privatize import privatize_flow
    from privgraph.errors import ValidationFailedError

    cfg = _config(tmp_path, budget={"features": 2.0})  # edges spend without a cap
    with pytest.raises(ValidationFailedError, match="scope edges .*no budget cap"):
        privatize_flow(pipeline="sbm-small", config_path=str(cfg))
    assert not (tmp_path / "store").exists() or not any((tmp_path / "store").rglob("*.json"))


def test_evaluate_flow_on_a_published_version(harness, tmp_path):
    from flows.evaluate import evaluate_flow
    from flows.privatize import privatize_flow

    cfg = _config(tmp_path)
    res = privatize_flow(pipeline="sbm-small", config_path=str(cfg), evaluate=False)
    out = evaluate_flow(pipeline="sbm-small", version=res["version"], config_path=str(cfg), store=str(tmp_path / "store"))
    assert out["metrics"]["runs"] == 2 and out["private_evaluation"]["clean"]["test_acc_mean"] > 0.5
    assert "clean" not in out["metrics"]
    assert out["input_check"].startswith("public inputs and the owner's keyed identity")
    # a configuration whose dataset is not this version's input is refused
    other = _config(tmp_path, dataset={"name": "sbm", "rho": 0.1, "options": {"num_nodes": 600, "num_features": 8}})
    from privgraph.errors import ArtifactError

    with pytest.raises(ArtifactError, match="input fingerprint differs"):
        evaluate_flow(pipeline="sbm-small", version=res["version"], config_path=str(other), store=str(tmp_path / "store"))


def test_label_scope_in_the_flow(harness, tmp_path):
    from flows.privatize import privatize_flow
    from privgraph.storage import open_store

    cfg = _config(
        tmp_path,
        labels={"mechanism": "label_rr", "epsilon": 1.0, "num_classes": 4, "mask": ["train_mask"]},
        budget={"features": 2.0, "edges": 4.0, "labels": 1.0},
    )
    res = privatize_flow(pipeline="sbm-small", config_path=str(cfg), evaluate=False)
    manifest = open_store(tmp_path / "store").read_manifest("sbm-small", res["version"])
    scopes = {e["guarantee"]["scope"]: e["guarantee"]["epsilon"] for e in manifest["ledger"]["entries"]}
    assert scopes == {"features": 2.0, "edges": 2.0, "labels": 1.0}
    assert "train_mask" in manifest["public"]["labels_outside_mask"]["what"]
    assert manifest["public"]["labels_outside_mask"]["declared_by"] == "pipelines.sbm-small.labels.mask"


def test_evaluate_checks_the_private_input_with_the_owners_keyed_identity(harness, tmp_path, monkeypatch):
    """The same public inputs with one private feature row changed: the public fingerprint cannot
    tell (by design: it does not depend on private data), the owner's HMAC in the private record can."""
    import numpy as np

    import tasks.ingest
    from flows.evaluate import evaluate_flow
    from flows.privatize import privatize_flow
    from privgraph.config.loader import load_config
    from privgraph.ingest.datasets import load_dataset
    from privgraph.errors import ArtifactError
    from privgraph.storage import open_store

    cfg = _config(tmp_path)
    res = privatize_flow(pipeline="sbm-small", config_path=str(cfg), evaluate=False)
    d = load_config(cfg).get("sbm-small").dataset
    graph = load_dataset(d.name, rho=d.rho, split_seed=d.split_seed, **d.options)
    x = graph.x.copy()
    x[0] = x[1] + 1.0
    changed = graph.replace(x=x)
    disclosure = disclosure_of(load_config(cfg), "sbm-small")
    manifest = open_store(tmp_path / "store").read_manifest("sbm-small", res["version"])
    assert disclosure.fingerprint(changed) == manifest["public_input_fingerprint"]
    monkeypatch.setattr(tasks.ingest, "load_dataset", lambda *a, **k: changed)
    with pytest.raises(ArtifactError, match="keyed identity"):
        evaluate_flow(pipeline="sbm-small", version=res["version"], config_path=str(cfg), store=str(tmp_path / "store"))
    # without the owner's record (another machine) the public inputs are all that can be checked
    for p in (tmp_path / "private" / "sbm-small").glob("*.json"):
        p.unlink()
    out = evaluate_flow(pipeline="sbm-small", version=res["version"], config_path=str(cfg), store=str(tmp_path / "store"))
    assert out["input_check"].startswith("public inputs checked; the private input is not")
    assert np.isfinite(out["metrics"]["private"]["test_acc_mean"])


def test_a_published_manifest_is_sealed_and_an_edited_one_is_refused(harness, tmp_path, monkeypatch):
    """Tamper evidence end to end: the flow seals under the owner's key; an edited ledger (epsilon
    2 -> 0.02) makes evaluate refuse the version before it reads any data."""
    import json

    from flows.evaluate import evaluate_flow
    from flows.privatize import privatize_flow
    from privgraph.errors import ArtifactTamperedError
    from privgraph.storage import open_store
    from privgraph.storage.manifest import manifest_bytes
    from privgraph.storage.private_record import owner_public_key

    monkeypatch.delenv("PRIVGRAPH_HOME", raising=False)
    cfg = _config(tmp_path)
    res = privatize_flow(pipeline="sbm-small", config_path=str(cfg), evaluate=False)
    owner = owner_public_key(tmp_path / "private")
    st = open_store(tmp_path / "store")
    assert st.verify_version("sbm-small", res["version"], trusted=[owner], sealed=True)["signer"] == owner
    path = tmp_path / "store" / "sbm-small" / res["version"] / "manifest.json"
    m = json.loads(path.read_text())
    for e in m["ledger"]["entries"]:
        e["guarantee"]["epsilon"] /= 100
    path.chmod(0o644)
    path.write_bytes(manifest_bytes(m))  # as the store writes it: only the seal can tell
    with pytest.raises(ArtifactTamperedError, match="changed after the owner signed it"):
        evaluate_flow(pipeline="sbm-small", version=res["version"], config_path=str(cfg), store=str(tmp_path / "store"))


def test_attacks_and_the_graph_report_run_and_stay_private(harness, tmp_path):
    """evaluate.attacks: the same pairs attacked on a model of the raw graph (the attack's
    strength) and one of the version; the scores go to the owner's record and the private
    artifact only, never into the manifest or a shareable artifact."""
    import json

    from flows.privatize import privatize_flow
    from privgraph.storage import open_store

    attacks = [{"name": "linkteller", "max_pairs": 100}, {"name": "link_stealing", "max_pairs": 100}, "membership", "attribute"]
    cfg = _config(tmp_path, evaluate={"runs": 1, "epochs": 30, "attacks": attacks})
    res = privatize_flow(pipeline="sbm-small", config_path=str(cfg))
    owner = json.loads(Path(res["private_record"]).read_text())["private_evaluation"]
    att = owner["attacks"]
    gu = owner["graph_utility"]  # evaluate.graph_report (default on): the released edges' structure
    assert gu["edges"]["original"] > 0 and 0 <= gu["degree_ks"] <= 1 and gu["triangles"]["relative_error"] >= 0
    names = {"linkteller", "link_stealing", "link_stealing_supervised", "membership", "membership_shadow"}
    assert set(att["clean"]) == set(att["without_private_edges"]) == names and set(att["private"]) == names | {"attribute"}
    # the release's own mechanism was rebuilt from the ledger; this pipeline declares no public rows to learn from
    assert "0 public rows" in att["private"]["attribute"]["skipped"], att["private"]["attribute"]
    lt_clean, lt_private = att["clean"]["linkteller"], att["private"]["linkteller"]
    assert lt_clean["n_positive"] == lt_private["n_positive"] == 100  # the same pairs for both models
    assert lt_clean["auc"] > 0.85, lt_clean  # the raw graph's model gives its edges away
    assert lt_private["auc"] < lt_clean["auc"] - 0.1, lt_private  # DPRR at eps 2 hides most of them
    assert abs(att["without_private_edges"]["linkteller"]["auc"] - 0.5) < 0.1  # no edge, no influence
    manifest = open_store(tmp_path / "store").read_manifest("sbm-small", res["version"])
    from flows.evaluate import feature_release_of
    from privgraph.mechanisms import build_mechanism

    fr = feature_release_of(manifest["ledger"])  # what evaluate rebuilds for a published version
    assert fr["mechanism"] == "feature_rr" and build_mechanism(fr["mechanism"], fr["params"]).params() == fr["params"]
    assert "linkteller" not in json.dumps(manifest) and "attacks" not in json.dumps(manifest)
    assert "graph_utility" not in json.dumps(manifest) and "community_nmi" not in json.dumps(manifest)
    run = _runs_named(f"sbm-small/{res['version']}/evaluate")[0]
    arts = {a["key"]: a["data"] for a in _artifacts_of(run["id"])}
    private_art = arts["sbm-small-private-evaluation"]
    assert private_art.startswith("# PRIVATE EVALUATION") and "| linkteller |" in private_art
    assert "Structure of the released edges" in private_art
    structure = arts["sbm-small-private-structure"]  # the report as a plot, titled as private
    assert structure.startswith("# PRIVATE EVALUATION") and "(data:image/png;base64," in structure
    assert sum(gu["degree_histogram"]["original"]) == sum(gu["degree_histogram"]["released"]) == gu["nodes"]
    assert all("linkteller" not in d for k, d in arts.items() if k != "sbm-small-private-evaluation")


def test_files_layout_publishes_a_partitioned_version_and_a_refusal_leaves_nothing(harness, tmp_path, monkeypatch):
    """``partitions.layout: files``: the partitions' tasks write the version's objects into the
    store's parts area, the stage step commits them; the staged partitioned version is evaluated
    and published, streams part by part, and the parts area is gone. A checkpoint that refuses
    after the tasks wrote their parts leaves no object in the store."""
    from flows.privatize import privatize_flow
    from privgraph.errors import ValidationFailedError
    from privgraph.storage import open_store

    cfg = _config(tmp_path, partitions={"num_parts": 3, "layout": "files"})
    res = privatize_flow(pipeline="sbm-small", config_path=str(cfg))
    store = open_store(tmp_path / "store")
    objects = store.read_manifest("sbm-small", res["version"])["objects"]
    assert sorted(n for n in objects if n.startswith("part-00000.")) == [
        "part-00000.edges.parquet", "part-00000.features.npy", "part-00000.labels.npy", "part-00000.nodes.npy",
        "part-00000.splits.npz"]
    assert [p.index for p in store.iter_parts("sbm-small", res["version"])] == [0, 1, 2]
    assert res["metrics"]["runs"] == 2  # the evaluation read the staged partitioned version
    assert [p.name for p in (tmp_path / "store" / "sbm-small").iterdir()] == [res["version"]]

    def refuse(report):
        areas = list((tmp_path / "refused" / "store" / "sbm-small").glob("parts-*"))
        assert len(areas) == 1 and len(list(areas[0].iterdir())) == 3 * 5  # the tasks wrote their parts
        raise ValidationFailedError("refused by the test after the parts were written")

    monkeypatch.setattr("flows.publication.enforce", refuse)
    (tmp_path / "refused").mkdir()
    other = _config(tmp_path / "refused", partitions={"num_parts": 3, "layout": "files"})
    with pytest.raises(ValidationFailedError, match="refused by the test"):
        privatize_flow(pipeline="sbm-small", config_path=str(other))
    assert not [p for p in (tmp_path / "refused" / "store").rglob("*") if p.is_file()]


def test_the_preflight_runs_once_per_privgraph_run(harness, tmp_path, monkeypatch):
    """``privgraph run`` loads and checks the configuration before Prefect starts and hands both to
    the flow (never as a flow parameter: the configuration holds the seed), which does not repeat
    them; the flow started without the CLI (a served deployment) checks once itself."""
    import flows.privatize
    import privgraph.validate.preflight as preflight
    from typer.testing import CliRunner

    from flows.privatize import privatize_flow
    from privgraph.cli import app

    calls: list[str] = []
    real_check, real_load = preflight.check_before_reading, flows.privatize.load_config

    def counted_check(cfg, store=None, **kw):
        calls.append("check")
        return real_check(cfg, store, **kw)

    def counted_load(path):
        calls.append("load")
        return real_load(path)

    monkeypatch.setattr(preflight, "check_before_reading", counted_check)
    monkeypatch.setattr(flows.privatize, "check_before_reading", counted_check)
    monkeypatch.setattr(flows.privatize, "load_config", counted_load)
    cfg = _config(tmp_path, seed=424242)
    res = CliRunner().invoke(app, ["run", "sbm-small", "--config", str(cfg), "--no-evaluate", "--json"])
    assert res.exit_code == 0, res.output
    assert calls == ["check"]  # the CLI's load is preflight's own (load_config of the loader module)
    run = _runs_named(f"sbm-small/{json.loads(res.stdout.splitlines()[-1])['version']}")[0]
    assert "424242" not in json.dumps(run["parameters"]) and set(run["parameters"]) == {
        "pipeline", "config_path", "store", "evaluate"}
    calls.clear()
    privatize_flow(pipeline="sbm-small", config_path=str(cfg), evaluate=False)
    assert calls == ["load", "check"]
