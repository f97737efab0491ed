"""GAP in the pipeline: the classification module, the privatize stage (released aggregates, no
private edge released, the encoder on released data only), evaluation, storage, the inductive
split option, and the CLI run with its delta cap."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml

from privgraph.ingest.datasets import check_dataset_options, drop_cut_edges, load_dataset
from privgraph.errors import GraphValidationError
from privgraph.graph import GraphData
from privgraph.evaluate.release_encoder import encoder_on
from privgraph.mechanisms import build_mechanism
from privgraph.evaluate.models import GAPClassifier
from privgraph.parts.partition import partition_graph
from privgraph.privatize.release import privatize_graph
from privgraph.storage.graph_io import graph_to_objects, objects_to_graph
from privgraph.evaluate.training import fit_node_classifier
from privgraph.evaluate.candidates import version_kwargs
from privgraph.evaluate.utility import evaluate_utility


def _sbm(rho: float = 0.5, n: int = 400) -> GraphData:
    return load_dataset("sbm", rho=rho, num_nodes=n, num_classes=3, num_features=8)


def _gap_version(graph: GraphData, seed: int = 1, **params) -> tuple[GraphData, object]:
    mech = build_mechanism("gap", {"epsilon": 2.0, "encoder_epochs": 20, **params})
    res = privatize_graph(graph, features=None, edges=mech, partitioning=partition_graph(graph, 2, method="hash"),
                          root_seed=np.random.SeedSequence(seed), encoder=encoder_on("cpu"))
    return res.graph, res


def test_gap_classifier_reads_hops_in_blocks_and_draws_from_its_generator():
    a = GAPClassifier(12, 5, 3, hops=3, generator=torch.Generator().manual_seed(4))
    b = GAPClassifier(12, 5, 3, hops=3, generator=torch.Generator().manual_seed(4))
    assert all(torch.equal(p, q) for p, q in zip(a.parameters(), b.parameters()))
    a.eval()
    x = torch.randn(7, 12)
    out = a(x, torch.zeros((2, 0), dtype=torch.long))
    assert out.shape == (7, 3)
    assert torch.equal(out, a(x, None))  # edges are ignored
    # hop k's block reaches the head only through its own MLP
    x2 = x.clone()
    x2[:, 4:8] = 0
    expected = a.head(torch.cat([a.mlps[0](x[:, :4]).relu(), a.mlps[1](x2[:, 4:8]).relu(),
                                 a.mlps[2](x[:, 8:]).relu()], dim=1))
    assert torch.allclose(a(x2), expected)
    with pytest.raises(ValueError, match="not a multiple of hops"):
        GAPClassifier(10, 5, 3, hops=3)
    with pytest.raises(ValueError, match="aggr must be 'none'"):
        GAPClassifier(12, 5, 3, hops=3, aggr="mean")


def test_privatize_releases_aggregates_not_private_edges():
    g = _sbm()
    v, res = _gap_version(g, hops=2)
    assert v.edges_private.shape[1] == 0
    np.testing.assert_array_equal(v.edges_public, g.edges_public)
    assert v.aggregates.shape == (3, g.num_nodes, 16) and v.aggregates.dtype == np.float32
    np.testing.assert_array_equal(v.x, g.x)  # no features mechanism: public, released as they are
    [entry] = res.ledger.entries
    assert entry.guarantee.delta == 1e-5 and entry.mechanism == "gap"
    assert res.ledger.spent("edges") == 2.0 and res.ledger.spent_delta("edges") == 1e-5
    assert res.release["edges"] == {"aggregates": [3, g.num_nodes, 16]}
    # same seed, same release; the private edges move only the rows of V_pri
    v2, _ = _gap_version(g, hops=2)
    np.testing.assert_array_equal(v.aggregates, v2.aggregates)
    g_less = g.replace(edges_private=g.edges_private[:, 1:])
    v3, _ = _gap_version(g_less, hops=1)
    v1, _ = _gap_version(g, hops=1)
    outside = np.setdiff1d(np.arange(g.num_nodes), g.private_nodes())
    np.testing.assert_array_equal(v1.aggregates[0], v3.aggregates[0])  # the encoder reads no edge
    np.testing.assert_array_equal(v1.aggregates[1][outside], v3.aggregates[1][outside])


def test_learned_weights_train_on_the_private_edges_and_record_the_training():
    """weights: learned (paper 001's Algorithm 1): one noisy hop; the ledger's entry carries the
    attention's parameters and the composed accountant event; the stats its noisy losses; the
    release is reproducible from the seed and moves with the private edges even outside V_pri
    (through the DP-trained attention model only)."""
    g = _sbm(rho=0.2)
    params = {"epsilon": 4.0, "weights": "learned", "attention_steps": 3}
    v, res = _gap_version(g, **params)
    assert v.aggregates.shape == (2, g.num_nodes, 16)
    [entry] = res.ledger.entries
    assert entry.params["attention_steps"] == 3 and "SelfComposedDpEvent(GaussianDpEvent(16.0), 6)" in entry.params["accountant"]["event"]
    assert res.release["edges"]["attention"]["steps"] == 3
    assert len(res.release["edges"]["attention"]["noisy_train_loss"]) == 3
    v2, _ = _gap_version(g, **params)
    np.testing.assert_array_equal(v.aggregates, v2.aggregates)
    v3, _ = _gap_version(g.replace(edges_private=g.edges_private[:, 1:]), **params)
    outside = np.setdiff1d(np.arange(g.num_nodes), g.private_nodes())
    assert not np.array_equal(v.aggregates[1][outside], v3.aggregates[1][outside])


def test_the_encoder_reads_the_released_labels():
    """With a labels mechanism, GAP's encoder trains on the randomized labels: the aggregates'
    hop 0 changes with the label noise's seed even where the edges' noise is the same."""
    g = _sbm()
    labels = build_mechanism("label_rr", {"epsilon": 0.5, "num_classes": 3})
    mech = build_mechanism("gap", {"epsilon": 2.0, "encoder_epochs": 20})
    parts = partition_graph(g, 2, method="hash")
    a = privatize_graph(g, features=None, edges=mech, labels=labels, partitioning=parts,
                        root_seed=np.random.SeedSequence(1), encoder=encoder_on("cpu"))
    b = privatize_graph(g, features=None, edges=mech, partitioning=parts, root_seed=np.random.SeedSequence(1),
                        encoder=encoder_on("cpu"))
    assert not np.array_equal(a.graph.aggregates[0], b.graph.aggregates[0])
    assert [e.scope.value for e in a.ledger.entries] == ["edges", "labels"]


def test_gap_needs_a_split_for_its_encoder():
    g = _sbm().replace(train_mask=None, val_mask=None, test_mask=None)
    with pytest.raises(Exception, match="encoder trains on the released features"):
        _gap_version(g)


def test_training_and_evaluating_a_gap_version():
    g = _sbm()
    v, _ = _gap_version(g)
    r = fit_node_classifier(v, seed=3, **version_kwargs(v, {"epochs": 30, "aggr": "mean"}))
    assert r.result["test_acc"] > 0.6
    assert version_kwargs(v, {"epochs": 30, "aggr": "mean", "kprop_features": 2}) == {"epochs": 30, "edges": "none",
                                                                                      "model": "gap"}
    with pytest.raises(ValueError, match="model 'gap' trains on a GAP version's aggregates"):
        fit_node_classifier(g, seed=3, model="gap", edges="none")
    with pytest.raises(ValueError, match="reads no edges"):
        fit_node_classifier(v, seed=3, model="gap", edges="all")
    ev = evaluate_utility(v, g, runs=2, seed_sequence=5, epochs=30, aggr="mean")
    assert {"private", "feature_only", "public_edges", "selected"} <= set(ev)
    assert set(ev["selected"]["models"]) <= {"gnn", "feature_only", "public_edges", "public_only", "correct_and_smooth"}
    assert ev["correct_and_smooth"]["release_weight"] == [0.0, 0.0]  # a GAP version releases no edge: the public ones


def test_storage_round_trip_and_validation_of_aggregates():
    g = _sbm(n=120)
    v, _ = _gap_version(g)
    objects = graph_to_objects(v)
    assert "aggregates.npy" in objects and "aggregates.npy" in json.loads(objects["graph.json"])["objects"]
    back = objects_to_graph(objects)
    np.testing.assert_array_equal(back.aggregates, v.aggregates)
    assert "aggregates.npy" not in graph_to_objects(g)
    assert objects_to_graph(graph_to_objects(g)).aggregates is None
    with pytest.raises(GraphValidationError, match="aggregates must have shape"):
        g.replace(aggregates=np.zeros((1, g.num_nodes, 4)))
    bad = np.zeros((2, g.num_nodes, 4))
    bad[1, 5, 0] = np.nan
    with pytest.raises(GraphValidationError, match=r"non-finite values at nodes \[5\]"):
        g.replace(aggregates=bad)
    assert v.summary()["aggregate_hops"] == 1


def test_drop_cut_edges_keeps_only_edges_within_a_part():
    g = load_dataset("sbm", rho=0.3, num_nodes=300, num_features=4, train=0.7, val=0.1, drop_cut_edges=True)
    full = load_dataset("sbm", rho=None, num_nodes=300, num_features=4, train=0.7, val=0.1)
    part = np.select([g.train_mask, g.val_mask, g.test_mask], [0, 1, 2], 3)
    e = g.edges("all")
    assert np.all(part[e[0]] == part[e[1]])
    fe = full.edges("all")
    assert e.shape[1] == int((part[fe[0]] == part[fe[1]]).sum()) < fe.shape[1]
    assert g.edges_private.shape[1] == round(0.3 * e.shape[1])  # rho applies after the cut
    np.testing.assert_array_equal(drop_cut_edges(full).edges("all"), fe[:, part[fe[0]] == part[fe[1]]])
    with pytest.raises(ValueError, match="options.drop_cut_edges: expected true or false"):
        check_dataset_options("sbm", {"num_nodes": 10, "drop_cut_edges": "yes"})
    with pytest.raises(ValueError, match="no node split to cut along"):
        drop_cut_edges(full.replace(train_mask=None, val_mask=None, test_mask=None))


def _pipeline(tmp_path: Path, **extra) -> Path:
    p = {"dataset": {"name": "sbm", "rho": 0.5, "options": {"num_nodes": 300, "num_classes": 3, "num_features": 8}},
         "edges": {"mechanism": "gap", "epsilon": 2.0, "hops": 2, "encoder_epochs": 20},
         "budget": {"edges": 2.0}, "executor": "serial", "seed": 3,
         "storage": str(tmp_path / "store"), "private_records": str(tmp_path / "private"),
         "evaluate": {"runs": 2, "epochs": 20}, **extra}
    path = tmp_path / "pipelines.yaml"
    path.write_text(yaml.safe_dump({"pipelines": {"g": p}}))
    return path


def _run(tmp_path: Path, cfg: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PRIVGRAPH_HOME": str(tmp_path / "home")}
    env.pop("PRIVGRAPH_DEBUG", None)
    return subprocess.run([sys.executable, "-m", "privgraph.cli", "run", "g", "--config", str(cfg), "--json"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)


@pytest.mark.flow
@pytest.mark.usefixtures("shared_prefect_server")
def test_cli_runs_a_gap_pipeline_under_its_delta_cap_and_refuses_it_without(tmp_path):
    r = _run(tmp_path, _pipeline(tmp_path))
    assert r.returncode == 3, r.stderr[-2000:]
    assert "spent delta 1e-05 exceeds no delta cap (budget_delta): pure DP only" in r.stderr
    assert "before reading any data" in r.stderr  # the caps against the configuration (issue 27)
    assert not list((tmp_path / "store").rglob("manifest.json"))  # nothing published

    r = _run(tmp_path, _pipeline(tmp_path, budget_delta={"edges": 1e-5}))
    assert r.returncode == 0, r.stderr[-2000:]
    (manifest_path,) = (tmp_path / "store").rglob("manifest.json")
    manifest = json.loads(manifest_path.read_text())
    [row] = manifest["validation"]["budget"]
    assert row["delta_spent"] == 1e-5 and row["delta_cap"] == 1e-5
    assert "release" not in manifest  # the aggregates' shape is the graph section's, from the stored objects
    assert (manifest["graph"]["aggregate_hops"], manifest["graph"]["aggregate_dim"]) == (2, 16)
    assert manifest["graph"]["num_edges_private"] == 0
    assert "seed" not in manifest_path.read_text().lower()
    stored = np.load(manifest_path.parent / "aggregates.npy")
    assert stored.shape == (3, 300, 16)
    assert manifest["metrics"]["runs"] == 2
