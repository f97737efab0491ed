"""Graph-classification comparisons: configuration refused at load, the cells, pairing and reuse,
and `privgraph compare` end to end on a Dask cluster (a private report)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import yaml

from privgraph.config.pipeline import ConfigError
from privgraph.config.loader import parse_config
from privgraph.ingest.datasets import load_graph_set
from privgraph.evaluate.graph_comparison import graph_comparison_markdown, graph_mechanism, run_graph_comparison

_PIPE = {"x": {"dataset": {"name": "sbm", "options": {"num_nodes": 50}},
               "features": {"mechanism": "laplace", "epsilon": 1.0}, "budget": {"features": 1.0}}}


def _cfg(**over):
    c = {"dataset": {"name": "graph_families", "options": {"num_graphs": 40, "max_nodes": 60}},
         "target": "dprr", "mechanisms": {"dprr": {}, "nonpriv_part": {}}, "epsilons": [1.0], **over}
    return {"pipelines": _PIPE, "graph_comparisons": {"g": c}}


@pytest.mark.parametrize(
    "over, match",
    [
        ({"mechanisms": {"dprr": {}, "gap": {}}}, r"graph_comparisons\.g\.mechanisms\.gap: 'gap' is not a per-graph edge mechanism"),
        ({"mechanisms": {"dprr": {}, "priv_hrg": {}}}, "'priv_hrg' is not a per-graph edge mechanism"),
        ({"mechanisms": {"dprr": {}, "laplace": {}}}, "'laplace' is not a per-graph edge mechanism"),
        ({"mechanisms": {"dprr": {"epsilon": 2.0}}}, r"mechanisms\.dprr\.epsilon: set the budgets in epsilons"),
        ({"mechanisms": {"dprr": {"alpha": 2.0}}}, r"mechanisms\.dprr: .*alpha"),
        ({"target": "warner_rr"}, "target 'warner_rr' is not among mechanisms"),
        ({"dataset": {"name": "tu", "options": {}}}, r"graph_comparisons\.g\.dataset\.options\.name: required by 'tu'"),
        ({"dataset": {"name": "graph_families", "options": {"size": 3}}}, r"options\.size: unknown option"),
        ({"dataset": {"name": "graph_families", "private_fraction": 0}}, "private_fraction"),
        ({"epsilons": []}, "epsilons"),
    ],
)
def test_bad_graph_comparisons_are_refused_at_load(over, match):
    with pytest.raises(ConfigError, match=match):
        parse_config(_cfg(**over))


def test_a_graph_comparison_may_not_take_a_pipelines_name():
    cfg = _cfg()
    cfg["graph_comparisons"]["x"] = cfg["graph_comparisons"].pop("g")
    with pytest.raises(ConfigError, match="has the name of a pipeline or comparison"):
        parse_config(cfg)


def test_cells_are_paired_budgetless_ones_reused_and_seeded(one_torch_thread):
    gs = load_graph_set("graph_families", num_graphs=40, max_nodes=60, private_fraction=0.6)
    kw = dict(mechanisms={"dprr": {}, "warner_rr": {}, "nonpriv_part": {}}, epsilons=[1.0, 4.0], target="dprr",
              folds=3, epochs=3)
    r = run_graph_comparison(gs, root_seed=np.random.SeedSequence(1), **kw)
    assert set(r.cells) == {"dprr", "warner_rr", "nonpriv_part"}
    assert r.cells["nonpriv_part"]["1.0"] is r.cells["nonpriv_part"]["4.0"]  # no budget: one release
    assert len(r.ledgers) == 5
    assert r.ledgers["dprr/1.0"]["entries"][0]["params"]["n_max"] == max(g.num_nodes for g in gs.graphs)
    for c in (*[r.cells[m][k] for m in r.cells for k in r.cells[m]], r.full):
        assert len(c["fold_acc"]) == 3 and 0 <= c["acc_mean"] <= 1 and 0 <= c["auc_mean"] <= 1
    again = run_graph_comparison(gs, root_seed=np.random.SeedSequence(1), **kw)
    def timeless(c):
        return {k: v for k, v in c.items() if k != "seconds"}

    assert all(timeless(again.cells[m][k]) == timeless(r.cells[m][k]) for m in r.cells for k in r.cells[m])
    assert timeless(again.full) == timeless(r.full)
    md = graph_comparison_markdown("t", r)
    assert "| NonPriv-Full |" in md and "dprr (target)" in md and "ttest_rel" in md
    # DPRR takes the dataset-wide n_max (paper 004): the largest graph's node count
    assert graph_mechanism("dprr", {}, 1.0, gs).n_max == max(g.num_nodes for g in gs.graphs)
    assert graph_mechanism("dprr", {"n_max": 500}, 1.0, gs).n_max == 500


def test_a_cut_off_graph_comparison_resumes_from_its_checkpoint(tmp_path, monkeypatch, one_torch_thread):
    from privgraph.storage.private_record import CellCheckpoint

    monkeypatch.delenv("PRIVGRAPH_HOME", raising=False)
    gs = load_graph_set("graph_families", num_graphs=40, max_nodes=60, private_fraction=0.6)
    kw = dict(mechanisms={"dprr": {}, "nonpriv_part": {}}, epsilons=[1.0, 4.0], target="dprr", folds=3, epochs=3,
              root_seed=np.random.SeedSequence(1))
    whole = run_graph_comparison(gs, **kw)

    class Dying(CellCheckpoint):
        def put(self, cell, value):
            if len(self) == 2:  # NonPriv-Full and DPRR at eps 1 are on disk, then the process dies
                raise KeyboardInterrupt
            super().put(cell, value)

    with pytest.raises(KeyboardInterrupt):
        run_graph_comparison(gs, checkpoint=Dying(tmp_path, "g", {}, gs.graphs, gs.labels), **kw)
    ck = CellCheckpoint(tmp_path, "g", {}, gs.graphs, gs.labels)
    assert len(ck) == 2
    again = run_graph_comparison(gs, checkpoint=ck, **kw)

    def timeless(c):
        return {k: v for k, v in c.items() if k != "seconds"}

    assert timeless(again.full) == timeless(whole.full) and again.ledgers == whole.ledgers
    assert all(timeless(again.cells[m][k]) == timeless(whole.cells[m][k]) for m in whole.cells for k in whole.cells[m])
    assert len(ck) == 4  # + DPRR at eps 4 and NonPriv-Part (once: no budget)


@pytest.mark.flow
@pytest.mark.dask
@pytest.mark.usefixtures("shared_prefect_server")
def test_privgraph_compare_runs_a_graph_comparison_on_dask(tmp_path):
    cfg = _cfg(mechanisms={"dprr": {}, "warner_rr": {}}, epsilons=[1.0, 2.0], folds=3, epochs=3, executor="dask",
               dask={"n_workers": 2}, seed=4, private_records=str(tmp_path / "private"))
    path = tmp_path / "pipelines.yaml"
    path.write_text(yaml.safe_dump(cfg))
    env = {**os.environ, "PRIVGRAPH_HOME": str(tmp_path / "home")}
    cmd = [sys.executable, "-m", "privgraph.cli", "compare", "g", "--config", str(path), "--json"]
    # killed once its first cell is checkpointed (the whole process group: Prefect's server, Dask)
    first = subprocess.Popen(cmd, cwd=tmp_path, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                             start_new_session=True)
    checkpoints = tmp_path / "private" / "checkpoints" / "g"
    deadline = time.monotonic() + 600
    try:
        while first.poll() is None and time.monotonic() < deadline and not any(
            f.read_text().endswith("\n") for f in checkpoints.glob("*.jsonl")
        ):
            time.sleep(0.1)
    finally:
        os.killpg(first.pid, signal.SIGKILL)
        first.wait()
    assert first.returncode == -signal.SIGKILL, "the comparison ended before its first checkpointed cell"
    r = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "NonPriv-Full: from the checkpoint" in r.stderr  # resumed: the first run's cell read back
    assert not checkpoints.exists()  # the report holds the cells now
    res = json.loads(r.stdout.strip().splitlines()[-1])
    assert res["private"] is True and res["kind"] == "graph-classification"
    folder = Path(res["report"])
    assert sorted(p.name for p in folder.iterdir()) == ["report.json", "results.json", "table.md", "utility.png"]
    assert all(p.stat().st_mode & 0o777 == 0o600 for p in folder.iterdir())
    assert set(res["summary"]["cells"]) == {"dprr", "warner_rr"}
    assert "seed" not in (folder / "report.json").read_text().lower()
