"""LPGNN's denoising in training: model choice, KProp on features and labels, Drop; the
EvaluateConfig fields and the evaluate flow's source of the label budget."""

from __future__ import annotations

import copy
import math

import numpy as np
import pytest
import torch

from privgraph.guarantee.ledger import LedgerEntry, PrivacyLedger
from privgraph.config.pipeline import EvaluateConfig
from privgraph.config.loader import parse_config
from privgraph.errors import ConfigError
from privgraph.graph import GraphData
from privgraph.mechanisms.features.label_rr import LabelRR
from privgraph.evaluate.models import KProp
from privgraph.evaluate.label_denoising import _denoised_labels, drop_bound
from privgraph.evaluate.training import DENOISING_OPTIONS, train_node_classifier
from privgraph.evaluate.selection import OWNER_ONLY
from privgraph.evaluate.utility import evaluate_utility

pytestmark = pytest.mark.filterwarnings("ignore:Sparse CSR tensor support is in beta")

FAST = {"hidden": 16, "epochs": 60, "patience": None, "device": "cpu"}
DROP = {"kprop_labels": 2, "drop": True, "label_epsilon": 1.0, "label_classes": 2}


def two_communities(n: int = 200, *, signal: float = 1.0, seed: int = 0) -> GraphData:
    """Two planted communities with label-correlated features (as in test_training.py)."""
    rng = np.random.default_rng(seed)
    y = np.repeat([0, 1], n // 2)
    same = y[:, None] == y[None, :]
    upper = np.triu(rng.random((n, n)) < np.where(same, 0.08, 0.005), k=1)
    edges = np.stack(np.nonzero(upper))
    x = rng.normal(size=(n, 8)).astype(np.float32)
    x[:, 0] += signal * (2 * y - 1)
    order = rng.permutation(n)
    masks = {name: np.zeros(n, bool) for name in ("train_mask", "val_mask", "test_mask")}
    masks["train_mask"][order[:40]] = True
    masks["val_mask"][order[40:100]] = True
    masks["test_mask"][order[100:]] = True
    return GraphData.from_edges(n, edges, x=x, y=y, **masks)


@pytest.fixture(scope="module")
def graph() -> GraphData:
    return two_communities()


@pytest.fixture(scope="module")
def noisy_graph() -> GraphData:
    return two_communities(signal=0.2, seed=1)


@pytest.fixture(scope="module")
def rr_graph(noisy_graph) -> GraphData:
    """``noisy_graph`` with its training and validation labels through RR at eps_y = 1 (21 of the
    100 flipped); score it with ``eval_y=noisy_graph.y``."""
    rr = LabelRR(epsilon=1.0, num_classes=2, mask=["train_mask", "val_mask"])
    return rr.privatize(noisy_graph, np.random.default_rng(0))


# -- options off: nothing changes -------------------------------------------------------------
def test_defaults_are_the_plain_gcn(noisy_graph):
    plain = train_node_classifier(noisy_graph, seed=4, **FAST)
    explicit = train_node_classifier(
        noisy_graph, seed=4, model="gcn", kprop_features=0, kprop_labels=0, drop=False,
        label_epsilon=None, label_classes=None, **FAST,
    )
    assert explicit == plain


@pytest.mark.parametrize(
    "options",
    [{"model": "sage"}, {"kprop_features": 2}, {"kprop_labels": 2}, DROP,
     {"model": "sage", "kprop_features": 3, **DROP}],
    ids=["sage", "kprop_features", "kprop_labels", "drop", "all"],
)
def test_options_are_deterministic_and_change_the_run(noisy_graph, rr_graph, options):
    kw = {"eval_y": noisy_graph.y, **FAST}
    a = train_node_classifier(rr_graph, seed=11, **kw, **options)
    b = train_node_classifier(rr_graph, seed=11, **kw, **options)
    assert a == b
    plain = train_node_classifier(rr_graph, seed=11, **kw)
    keys = ("test_acc", "val_acc", "train_acc", "best_epoch")
    assert tuple(a[k] for k in keys) != tuple(plain[k] for k in keys)


def test_global_random_state_untouched(noisy_graph):
    torch_state = torch.random.get_rng_state()
    np_state = np.random.get_state()[1].copy()
    train_node_classifier(noisy_graph, seed=3, model="sage", kprop_features=2, **DROP, **FAST)
    assert torch.equal(torch.random.get_rng_state(), torch_state)
    assert np.array_equal(np.random.get_state()[1], np_state)


def test_sage_learns_a_learnable_graph(graph):
    res = train_node_classifier(graph, seed=0, model="sage", device="cpu")
    assert res["test_acc"] > 0.9


# -- KProp on the features --------------------------------------------------------------------
def test_kprop_features_is_training_on_propagated_features(noisy_graph):
    """K_x steps of LPGNN's operator (symmetric, node excluded) once, then ordinary training."""
    data = noisy_graph.to_pyg("all")
    x_prop = KProp(3, aggr="gcn", self_loops=False)(data.x, data.edge_index)
    by_hand = train_node_classifier(noisy_graph.replace(x=x_prop.numpy()), seed=2, **FAST)
    assert train_node_classifier(noisy_graph, seed=2, kprop_features=3, **FAST) == by_hand


# -- KProp on the labels and Drop -------------------------------------------------------------
def test_denoised_labels_by_hand():
    # 4 nodes, edges 0-1, 1-2, 1-3: node 1's neighbours say 0, 0, 0; nodes 0, 2, 3 hear node 1
    ei = torch.tensor([[0, 1, 1, 2, 1, 3], [1, 0, 2, 1, 3, 1]])
    prop = KProp(1, aggr="gcn")
    y = torch.tensor([0, 1, 0, 0])
    every = torch.arange(4)
    assert _denoised_labels(y, every, 2, prop, ei).tolist() == [1, 0, 1, 1]
    # only nodes 0 and 1 known: 2 and 3 hear node 1 (label 1), node 1 hears node 0 (label 0),
    # node 0 hears node 1
    assert _denoised_labels(y, torch.tensor([0, 1]), 2, prop, ei).tolist() == [1, 0, 1, 1]
    # only node 1 known: node 1 hears nobody (a zero row) and keeps its own label
    assert _denoised_labels(y, torch.tensor([1]), 2, prop, ei).tolist() == [1, 1, 1, 1]
    # a tie keeps the node's own label: on the path 0-1-2, node 1 hears one 0 and one 1 (equal
    # weights 1/sqrt(1 * 2))
    path = torch.tensor([[0, 1, 2, 1], [1, 0, 1, 2]])
    assert _denoised_labels(torch.tensor([0, 1, 1]), every[:3], 2, prop, path)[1].item() == 1
    assert _denoised_labels(torch.tensor([0, 0, 1]), every[:3], 2, prop, path)[1].item() == 0


def test_label_options_never_read_test_labels(noisy_graph, rr_graph):
    y = rr_graph.y.copy()
    y[rr_graph.test_mask] = 1 - y[rr_graph.test_mask]
    changed = rr_graph.replace(y=y)
    for options in ({"kprop_labels": 2}, DROP):
        a = train_node_classifier(rr_graph, seed=1, eval_y=noisy_graph.y, **options, **FAST)
        b = train_node_classifier(changed, seed=1, eval_y=noisy_graph.y, **options, **FAST)
        # everything but the score against the graph's own (here: changed) test labels
        a.pop("test_acc_own_labels"), b.pop("test_acc_own_labels")
        assert a == b


def test_drop_bound():
    assert drop_bound(1.0, 7) == pytest.approx(math.e / (math.e + 6))
    assert drop_bound(1.0, 7) == LabelRR(epsilon=1.0, num_classes=7).keep_probability()
    assert drop_bound(math.log(9), 4) == pytest.approx(0.75)
    assert drop_bound(None, 7) == 1.0


def test_drop_without_a_bound_or_propagation_is_plain_training(noisy_graph):
    plain = train_node_classifier(noisy_graph, seed=5, **FAST)
    drop = train_node_classifier(noisy_graph, seed=5, drop=True, **FAST)
    assert drop.pop("drop_bound") == 1.0 and drop.pop("drop_stopped") is False
    assert drop == plain


def test_drop_stops_above_the_bound(graph):
    """Clean, learnable labels with a bound of 0.8 (eps_y = log 4, two classes): the validation
    accuracy (0.62 after epoch 1, 0.95 after epoch 2) crosses it at once; the crossing epoch is
    not selected."""
    eps = math.log(4.0)
    res = train_node_classifier(
        graph, seed=0, drop=True, label_epsilon=eps, label_classes=2, epochs=200, patience=None,
        device="cpu",
    )
    bound = 0.8
    assert res["drop_bound"] == pytest.approx(bound)
    assert res["drop_stopped"] is True
    assert res["epochs_run"] < 10
    assert res["best_epoch"] < res["epochs_run"]
    assert res["val_acc"] <= bound  # every eligible epoch stayed at or below it
    unbounded = train_node_classifier(graph, seed=0, drop=True, epochs=200, patience=None,
                                      device="cpu")
    assert unbounded["drop_stopped"] is False and unbounded["epochs_run"] == 200


def test_num_classes_for_the_bound(noisy_graph):
    meta = dict(noisy_graph.meta, num_classes=5)
    a = train_node_classifier(noisy_graph.replace(meta=meta), seed=0, drop=True, label_epsilon=1.0,
                              **FAST)
    b = train_node_classifier(noisy_graph, seed=0, drop=True, label_epsilon=1.0, **FAST)
    assert a["drop_bound"] == pytest.approx(drop_bound(1.0, 5))
    assert b["drop_bound"] == pytest.approx(drop_bound(1.0, 2))  # the output layer's 2 classes


def test_refuses_bad_options(graph):
    bad = [
        ({"model": "transformer"}, "model must be one of"),
        ({"kprop_features": -1}, "kprop_features"),
        ({"kprop_features": 1.5}, "kprop_features"),
        ({"kprop_labels": True}, "kprop_labels"),
        ({"drop": 1}, "drop must be a bool"),
        ({"label_epsilon": 0.0}, "label_epsilon"),
        ({"label_epsilon": float("nan")}, "label_epsilon"),
        ({"label_classes": 1}, "label_classes"),
        ({"model": "sage", "aggr": "gcn"}, "GraphSAGE: aggregation must be 'mean'"),
    ]
    for options, match in bad:
        with pytest.raises(ValueError, match=match):
            train_node_classifier(graph, seed=0, **options)


# -- evaluate_utility ---------------------------------------------------------------------------
def test_evaluate_utility_denoises_the_private_graph_only(noisy_graph):
    assert set(DENOISING_OPTIONS) == {
        "kprop_features", "kprop_labels", "drop", "label_epsilon", "label_classes", "kprop_search",
        "kprop_search_labels",
    }
    base = evaluate_utility(noisy_graph, noisy_graph, runs=2, seed_sequence=9, **FAST)
    den = evaluate_utility(noisy_graph, noisy_graph, runs=2, seed_sequence=9, kprop_features=2,
                           **DROP, **FAST)
    assert den[OWNER_ONLY]["clean"] == base[OWNER_ONLY]["clean"]
    assert den["private"] != den[OWNER_ONLY]["clean"]
    sage = evaluate_utility(noisy_graph, noisy_graph, runs=2, seed_sequence=9, model="sage", **FAST)
    assert sage[OWNER_ONLY]["clean"] == sage["private"] != base[OWNER_ONLY]["clean"]  # the model applies to both


# -- configuration and the evaluate flow ------------------------------------------------------
BASE = {
    "pipelines": {
        "cora": {
            "dataset": {"name": "cora"},
            "labels": {"mechanism": "label_rr", "epsilon": 1.0, "num_classes": 7},
        }
    }
}


def _parse(evaluate: dict, labels: dict | None = None):
    data = copy.deepcopy(BASE)
    data["pipelines"]["cora"]["evaluate"] = evaluate
    if labels is not None:
        data["pipelines"]["cora"]["labels"] = labels
    return parse_config(data).get("cora")


def test_config_fields():
    cfg = EvaluateConfig()
    assert (cfg.model, cfg.kprop_features, cfg.kprop_labels, cfg.drop) == ("gcn", 0, 0, False)
    ev = _parse({"model": "sage", "kprop_features": 8, "kprop_labels": 8, "drop": True}).evaluate
    assert (ev.model, ev.kprop_features, ev.kprop_labels, ev.drop) == ("sage", 8, 8, True)


@pytest.mark.parametrize(
    ("evaluate", "message"),
    [
        ({"kprop_features": -1}, "pipelines.cora.evaluate.kprop_features: .*greater than or equal"),
        ({"kprop_labels": 2.5}, "pipelines.cora.evaluate.kprop_labels: .*integer"),
        ({"kprop_labels": True}, "pipelines.cora.evaluate.kprop_labels: .*integer"),
        ({"drop": "sometimes"}, "pipelines.cora.evaluate.drop: .*boolean"),
        ({"model": "transformer"}, "pipelines.cora.evaluate.model: .*'gcn', 'gat', 'gin' or 'sage'"),
        ({"model": "sage", "aggr": "gcn"}, "pipelines.cora.evaluate: model 'sage' aggregates by"),
    ],
)
def test_config_refuses(evaluate, message):
    with pytest.raises(ConfigError, match=message):
        _parse(evaluate)


def _manifest(mechanism: LabelRR) -> dict:
    ledger = PrivacyLedger()
    ledger.record(LedgerEntry(stage="privatize.labels", mechanism=mechanism.name,
                              guarantee=mechanism.guarantee, partitions=(0,),
                              params=mechanism.params()))
    return {"ledger": ledger.to_dict()}


def test_flow_reads_the_label_budget_from_the_ledger_or_the_config():
    from privgraph.evaluate.metrics import label_noise

    cfg = _parse({"drop": True})
    want = {"label_epsilon": 1.0, "label_classes": 7}
    assert label_noise(cfg, None) == want  # staged: the configuration that is making it
    published = _manifest(LabelRR(epsilon=2.0, num_classes=7, mask=["train_mask", "val_mask"]))
    assert label_noise(cfg, published) == {"label_epsilon": 2.0, "label_classes": 7}
    # validation labels released unperturbed: clean, no bound
    only_train = _manifest(LabelRR(epsilon=2.0, num_classes=7, mask="train_mask"))
    assert label_noise(cfg, only_train) == {}
    assert label_noise(cfg, {"ledger": PrivacyLedger().to_dict()}) == {}
    masked = _parse({"drop": True}, {"mechanism": "label_rr", "epsilon": 0.5, "num_classes": 7,
                                     "mask": ["val_mask"]})
    assert label_noise(masked, None) == {"label_epsilon": 0.5, "label_classes": 7}


# -- Cora: the measured effects -----------------------------------------------------------------
@pytest.mark.dataset
def test_kprop_features_denoise_multibit_features(cora):
    """Multi-bit features at eps_x = 1 (LPGNN's mechanism; noise draw rng 0), GCN, 2 seeds.

    Measured test accuracy without / with K_x = 4: seeds 0, 1: 0.575 / 0.700 and 0.540 / 0.708
    (mean +0.146); with the noise draw rng 1: 0.575 / 0.691, 0.559 / 0.699 (+0.128). Asserted: a
    mean gain above 0.08.
    """
    from privgraph.mechanisms import build_mechanism

    multibit = build_mechanism("multibit", {"epsilon": 1.0})
    private = multibit.privatize(cora, np.random.default_rng(0))
    kw = {"hidden": 16, "epochs": 60, "patience": None, "device": "cpu"}
    gain = [
        train_node_classifier(private, seed=s, kprop_features=4, **kw)["test_acc"]
        - train_node_classifier(private, seed=s, **kw)["test_acc"]
        for s in range(2)
    ]
    assert np.mean(gain) > 0.08 and min(gain) > 0.0


@pytest.mark.dataset
def test_drop_denoises_rr_labels(cora):
    """Label RR at eps_y = 1 (c = 7) on LPGNN's 50/25/25 split (train and validation labels
    perturbed), GraphSAGE, 100 epochs; plain cross-entropy vs Drop with K_y = 8.

    Measured mean test accuracy over seeds 0, 1, for the noise draws rng 0..5: plain 0.609,
    0.632, 0.524, 0.646, 0.640, 0.631 (mean 0.614); Drop 0.733, 0.645, 0.778, 0.793, 0.787,
    0.699 (mean 0.739): a gain on every draw, +0.013 at the least (draw 1), and above +0.12 for
    every window of three consecutive draws. Asserted on draws 0-2: a mean gain above 0.05.
    Drop stopped on its bound after 13-32 epochs in most runs.
    """
    from privgraph.ingest.datasets.split import random_node_split

    train, val, test = random_node_split(cora.num_nodes, seed=0)
    split = cora.replace(train_mask=train, val_mask=val, test_mask=test)
    rr = LabelRR(epsilon=1.0, num_classes=7, mask=["train_mask", "val_mask"])
    kw = {"model": "sage", "epochs": 100, "patience": None, "device": "cpu", "eval_y": split.y}
    drop = {"kprop_labels": 8, "drop": True, "label_epsilon": 1.0, "label_classes": 7}
    plain_acc, drop_acc = [], []
    for draw in range(3):
        private = rr.privatize(split, np.random.default_rng(draw))
        for s in range(2):
            plain_acc.append(train_node_classifier(private, seed=s, **kw)["test_acc"])
            drop_acc.append(train_node_classifier(private, seed=s, **drop, **kw)["test_acc"])
    assert np.mean(drop_acc) - np.mean(plain_acc) > 0.05


def test_drop_forward_corrects_through_the_label_channel(rr_graph, noisy_graph, monkeypatch):
    """Drop's loss propagates softmax(f) T (T: label RR's transition matrix at label_epsilon), not
    softmax(f): a run with the identity in place of T (monkeypatched) trains differently, and
    without label_epsilon there is no correction (T = I) at all."""
    import privgraph.evaluate.label_denoising as label_denoising
    from privgraph.mechanisms.randomized_response import label_rr_transition_matrix

    kw = {**FAST, "model": "sage", "eval_y": noisy_graph.y, "seed": 2, **DROP}
    corrected = train_node_classifier(rr_graph, **kw)
    t = label_rr_transition_matrix(1.0, 2)
    assert t[0, 0] == pytest.approx(math.e / (math.e + 1)) and np.allclose(t.sum(axis=1), 1.0)
    monkeypatch.setattr(label_denoising, "label_rr_transition_matrix", lambda eps, c: np.eye(c))
    identity = train_node_classifier(rr_graph, **kw)
    assert (corrected["train_acc"], corrected["val_acc"], corrected["best_epoch"]) != (
        identity["train_acc"], identity["val_acc"], identity["best_epoch"])
    monkeypatch.undo()
    no_eps = {k: v for k, v in kw.items() if k != "label_epsilon"}
    monkeypatch.setattr(label_denoising, "label_rr_transition_matrix", lambda eps, c: pytest.fail("T without label_epsilon"))
    train_node_classifier(rr_graph, **no_eps)


@pytest.mark.flow
def test_flows_pass_the_options_and_the_label_budget(tmp_path):
    """privatize (evaluating the staged version: budget from the configuration), then evaluate
    the published version (budget from its ledger), with every new option on."""
    import yaml
    from tests.prefect_server import owned_prefect_test_harness

    pipeline = {
        "dataset": {"name": "sbm", "options": {"num_nodes": 300, "num_features": 8}},
        "labels": {"mechanism": "label_rr", "epsilon": 1.0, "num_classes": 4,
                   "mask": ["train_mask", "val_mask"]},
        "budget": {"labels": 1.0},
        "partitions": {"num_parts": 2},
        "executor": "serial",
        "seed": 3,
        "storage": str(tmp_path / "store"),
        "evaluate": {"runs": 2, "epochs": 15, "hidden": 8, "device": "cpu", "model": "sage",
                     "kprop_features": 2, "kprop_labels": 2, "drop": True},
    }
    path = tmp_path / "pipelines.yaml"
    path.write_text(yaml.safe_dump({"pipelines": {"sbm-small": pipeline}}))
    with owned_prefect_test_harness():
        from flows.evaluate import evaluate_flow
        from flows.privatize import privatize_flow
        from privgraph.evaluate.metrics import evaluation_entropy

        res = privatize_flow(pipeline="sbm-small", config_path=str(path))
        # the privatize run's evaluation seed: a one-way function of its seed (never the seed)
        out = evaluate_flow(pipeline="sbm-small", version=res["version"], config_path=str(path),
                            store=str(tmp_path / "store"), seed_entropy=evaluation_entropy(3))
    for metrics in (res["metrics"], out["metrics"]):
        assert metrics["runs"] == 2 and len(metrics["private"]["test_acc"]) == 2
    assert out["metrics"] == res["metrics"]  # same seed, same version: same numbers


# -- LPGNN's search of the KProp steps ----------------------------------------------------------
def test_kprop_search_scores_cells_without_the_validation_labels_in_the_propagation(rr_graph, noisy_graph):
    """Each (K_x, K_y) is scored by the validation accuracy (the version's own labels) of a model
    whose label propagation reads the TRAINING labels only (a model that propagates the
    validation labels agrees with them by construction); the chosen cell is then trained as
    usual, validation labels propagated."""
    from privgraph.evaluate.training import fit_node_classifier

    kw = {**FAST, "model": "sage", "eval_y": noisy_graph.y, "seed": 3}
    searched = fit_node_classifier(rr_graph, kprop_search=[0, 2], **kw).result
    scored = {(kx, ky): fit_node_classifier(rr_graph, kprop_features=kx, kprop_labels=ky, propagate_val_labels=False,
                                            **kw).result for kx in (0, 2) for ky in (0, 2)}
    best = max(r["val_acc"] for r in scored.values())
    kx, ky = searched["kprop"]
    assert searched["kprop_searched"] == 4 and scored[(kx, ky)]["val_acc"] == best
    final = fit_node_classifier(rr_graph, kprop_features=kx, kprop_labels=ky, **kw).result
    assert searched["test_acc"] == final["test_acc"] and searched["val_acc"] == final["val_acc"]
    # ties go to the fewest steps
    assert all(r["val_acc"] < best or sum(k) >= kx + ky for k, r in scored.items())
    # the scoring model really leaves the validation labels out: with K_y > 0 its targets differ
    a = fit_node_classifier(rr_graph, kprop_labels=2, propagate_val_labels=False, **kw).result
    b = fit_node_classifier(rr_graph, kprop_labels=2, **kw).result
    assert (a["train_acc"], a["val_acc"]) != (b["train_acc"], b["val_acc"])
    with pytest.raises(ValueError, match="propagate_val_labels must be a bool"):
        fit_node_classifier(rr_graph, propagate_val_labels=1, **kw)
    events = []
    ev = evaluate_utility(rr_graph, noisy_graph, runs=2, seed_sequence=1, kprop_search=[0, 2], **{
        k: v for k, v in FAST.items()}, model="sage", progress=events.append)
    assert len(ev["private"]["kprop"]) == 2 and all(len(k) == 2 for k in ev["private"]["kprop"])
    # the search reports each cell (a 20-min search showed no progress: issue 27), labelled by its
    # K values only; one search per run of the GNN over the version
    searches = [e for e in events if e.task == "kprop search"]
    assert [(e.done, e.total) for e in searches] == [(k, 5) for k in range(6)] * 2
    assert {e.detail for e in searches} == {"", "K_x=0, K_y=0", "K_x=0, K_y=2", "K_x=2, K_y=0", "K_x=2, K_y=2",
                                            "the chosen cell"}
    assert [e.done for e in events if e.task == "training"] == list(range(len(events) - len(searches)))
    with pytest.raises(ValueError, match="kprop_search chooses kprop_features"):
        fit_node_classifier(rr_graph, kprop_search=[0, 2], kprop_labels=2, **kw)
    with pytest.raises(ValueError, match="non-empty list of steps"):
        fit_node_classifier(rr_graph, kprop_search=[], **kw)
    with pytest.raises(ValueError, match="kprop_search chooses kprop_features and kprop_labels per run"):
        EvaluateConfig(kprop_search=[0, 4], kprop_features=2)
    assert EvaluateConfig(kprop_search=[0, 4]).train_kwargs()["kprop_search"] == [0, 4]
    assert "kprop_search" not in EvaluateConfig().train_kwargs()


def test_kprop_search_over_the_feature_steps_only(rr_graph, noisy_graph):
    """``kprop_search_labels: false``: the grid is (K_x, 0) only (labels that were not randomized),
    the same cells' scores as the full search's and the best of them chosen."""
    from privgraph.evaluate.training import fit_node_classifier

    kw = {**FAST, "model": "sage", "eval_y": noisy_graph.y, "seed": 3}
    searched = fit_node_classifier(rr_graph, kprop_search=[0, 2, 4], kprop_search_labels=False, **kw).result
    scored = {kx: fit_node_classifier(rr_graph, kprop_features=kx, propagate_val_labels=False, **kw).result["val_acc"]
              for kx in (0, 2, 4)}
    assert searched["kprop_searched"] == 3 and searched["kprop"][1] == 0
    assert scored[searched["kprop"][0]] == max(scored.values())
    cfg = EvaluateConfig(kprop_search=[8, 16], kprop_search_labels=False)
    assert cfg.train_kwargs()["kprop_search_labels"] is False
    with pytest.raises(ValueError, match="kprop_search_labels applies to kprop_search"):
        EvaluateConfig(kprop_search_labels=False)
    with pytest.raises(ValueError, match="kprop_search_labels must be a bool"):
        fit_node_classifier(rr_graph, kprop_search=[0, 2], kprop_search_labels=0, **kw)
