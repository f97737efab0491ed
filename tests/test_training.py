import numpy as np
import pytest
import torch

from privgraph.graph import GraphData
from privgraph.evaluate.model_inputs import _model_input
from privgraph.evaluate.training import choose_device, train_node_classifier
from privgraph.evaluate.selection import OWNER_ONLY
from privgraph.evaluate.utility import evaluate_utility

pytestmark = pytest.mark.filterwarnings("ignore:Sparse CSR tensor support is in beta")

FAST = {"hidden": 16, "epochs": 60, "patience": None}
QUICK = {"hidden": 16, "epochs": 15, "patience": None}


def two_communities(n: int = 200, *, signal: float = 1.0, seed: int = 0) -> GraphData:
    """Two planted communities (p_in 0.08, p_out 0.005) with label-correlated features."""
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


# -- devices -----------------------------------------------------------------------------------
def test_choose_device():
    assert choose_device("cpu") == torch.device("cpu")
    assert choose_device("auto").type == ("cuda" if torch.cuda.is_available() else "cpu")
    assert choose_device().type == choose_device("auto").type
    with pytest.raises(ValueError, match="prefer must be"):
        choose_device("tpu")


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the refusal without CUDA")
def test_choose_device_refuses_cuda_without_cuda(graph):
    with pytest.raises(ValueError, match="CUDA is not available"):
        choose_device("cuda")
    with pytest.raises(ValueError, match="CUDA is not available"):
        train_node_classifier(graph, seed=0, device="cuda")


# -- training ----------------------------------------------------------------------------------
def test_learns_a_learnable_graph(graph):
    res = train_node_classifier(graph, seed=0, device="cpu")
    assert set(res) == {"test_acc", "test_acc_own_labels", "val_acc", "train_acc", "best_epoch", "epochs_run", "device"}
    assert res["test_acc_own_labels"] == res["test_acc"]  # no eval_y: the same labels
    assert res["test_acc"] > 0.9
    assert res["device"] == "cpu"
    assert 1 <= res["best_epoch"] <= res["epochs_run"] <= 200


@pytest.mark.parametrize("aggr", ["mean", "gcn"])
def test_same_seed_same_metrics(noisy_graph, aggr):
    a = train_node_classifier(noisy_graph, seed=11, aggr=aggr, device="cpu", **FAST)
    b = train_node_classifier(noisy_graph, seed=11, aggr=aggr, device="cpu", **FAST)
    assert a == b


def test_seed_sequence_is_accepted(noisy_graph):
    ss = np.random.SeedSequence(5)
    a = train_node_classifier(noisy_graph, seed=ss, device="cpu", **FAST)
    b = train_node_classifier(noisy_graph, seed=np.random.SeedSequence(5), device="cpu", **FAST)
    c = train_node_classifier(noisy_graph, seed=5, device="cpu", **FAST)
    assert a == b == c


def test_different_seeds_differ(noisy_graph):
    keys = ("test_acc", "val_acc", "train_acc", "best_epoch")
    results = {
        tuple(train_node_classifier(noisy_graph, seed=s, device="cpu", **FAST)[k] for k in keys)
        for s in range(4)
    }
    assert len(results) > 1


def test_global_random_state_untouched(noisy_graph):
    torch_state = torch.random.get_rng_state()
    np_state = np.random.get_state()[1].copy()
    train_node_classifier(noisy_graph, seed=3, device="cpu", **FAST)
    evaluate_utility(noisy_graph, noisy_graph, runs=2, seed_sequence=np.random.SeedSequence(1),
                     device="cpu", **FAST)
    assert torch.equal(torch.random.get_rng_state(), torch_state)
    assert np.array_equal(np.random.get_state()[1], np_state)


def test_early_stopping(noisy_graph):
    res = train_node_classifier(noisy_graph, seed=0, epochs=500, patience=5, hidden=8, device="cpu")
    assert res["epochs_run"] < 500
    assert res["epochs_run"] - res["best_epoch"] == 5


def test_sparse_features(graph):
    # bag-of-words-like binary features (about 5% non-zero) take the sparse CSR path
    rng = np.random.default_rng(2)
    x = (rng.random((graph.num_nodes, 40)) < 0.03).astype(np.float32)
    x[np.arange(graph.num_nodes), graph.y] = rng.random(graph.num_nodes) < 0.7
    assert _model_input(torch.from_numpy(x)).layout == torch.sparse_csr
    assert _model_input(torch.from_numpy(graph.x)).layout == torch.strided
    sparse = graph.replace(x=x)
    res = train_node_classifier(sparse, seed=0, device="cpu")
    assert res["test_acc"] > 0.9
    assert train_node_classifier(sparse, seed=0, device="cpu") == res


def test_edges_public_only():
    g = two_communities()
    half = np.arange(g.num_edges) % 2 == 0
    split = GraphData.from_edges(
        g.num_nodes, g.edges(), private=half, x=g.x, y=g.y,
        train_mask=g.train_mask, val_mask=g.val_mask, test_mask=g.test_mask,
    )
    a = train_node_classifier(split, seed=0, edges="all", device="cpu", **FAST)
    b = train_node_classifier(split, seed=0, edges="public", device="cpu", **FAST)
    c = train_node_classifier(g, seed=0, device="cpu", **FAST)
    assert a == c  # which edges are private does not matter with edges="all"
    assert a != b
    with pytest.raises(ValueError, match="edges must be one of 'all', 'public', 'private', 'none', got 'some'"):
        train_node_classifier(split, seed=0, edges="some", device="cpu")


@pytest.mark.parametrize("missing", ["x", "y", "train_mask", "val_mask", "test_mask"])
def test_refuses_incomplete_graphs(graph, missing):
    with pytest.raises(ValueError, match=f"no {missing}"):
        train_node_classifier(graph.replace(**{missing: None}), seed=0)


def test_refuses_bad_inputs(graph):
    with pytest.raises(ValueError, match="selects no node"):
        train_node_classifier(graph.replace(val_mask=np.zeros(graph.num_nodes, bool)), seed=0)
    with pytest.raises(ValueError, match="multi-label"):
        train_node_classifier(graph.replace(y=np.eye(2, dtype=np.int64)[graph.y]), seed=0)
    for bad in ({"epochs": 0}, {"lr": 0.0}, {"lr": float("nan")}, {"hidden": 2.5}, {"patience": 0}):
        with pytest.raises(ValueError):
            train_node_classifier(graph, seed=0, **bad)
    with pytest.raises(ValueError, match="GCN"):
        train_node_classifier(graph, seed=0, aggr="max")
    with pytest.raises(TypeError, match="seed"):
        train_node_classifier(graph, seed=-1)


# -- evaluate_utility --------------------------------------------------------------------------
def test_evaluate_utility_pairs_runs(noisy_graph):
    ss = np.random.SeedSequence(7)
    res = evaluate_utility(noisy_graph, noisy_graph, runs=3, seed_sequence=ss, device="cpu", **FAST)
    assert res["runs"] == 3 and res["device"] == "cpu"
    # same graph and the same per-run seeds: the two sides are identical
    owner = res[OWNER_ONLY]
    assert res["private"] == owner["clean"] == owner["private_on_raw_labels"]
    accs = owner["clean"]["test_acc"]
    assert len(accs) == 3
    assert owner["clean"]["test_acc_mean"] == pytest.approx(np.mean(accs))
    assert owner["clean"]["test_acc_std"] == pytest.approx(np.std(accs, ddof=1))
    # raw-data figures only under owner_only
    assert set(res) == {"runs", "device", "private", "feature_only", "selected", "gnn_vs_feature_only", "correct_and_smooth",
                        OWNER_ONLY}
    again = evaluate_utility(noisy_graph, noisy_graph, runs=3, seed_sequence=7, device="cpu",
                             **FAST)
    assert again == res


def test_evaluate_utility_scores_the_shareable_figure_on_the_versions_own_labels(noisy_graph):
    """The shareable accuracy is a function of the stored version only (its own, released labels);
    the accuracy against the raw test labels is the owner's. Flipping the version's TEST labels
    moves the first and leaves the second equal to the clean model's (same data otherwise)."""
    y = noisy_graph.y.copy()
    y[noisy_graph.test_mask] = 1 - y[noisy_graph.test_mask]
    private = noisy_graph.replace(y=y)
    res = evaluate_utility(private, noisy_graph, runs=2, seed_sequence=3, device="cpu", **FAST)
    owner = res[OWNER_ONLY]
    assert owner["private_on_raw_labels"] == owner["clean"]
    flipped = [1 - a for a in owner["clean"]["test_acc"]]
    assert res["private"]["test_acc"] == pytest.approx(flipped)


def test_the_shareable_metrics_do_not_move_with_a_raw_label(noisy_graph):
    """Issue 24, leak 4: the output layer was sized by the raw labels' largest class, so with the
    version fixed, one raw training label set to a new class moved every shareable accuracy. The
    layer now comes from the version and public configuration only; the owner's figures may move."""
    rng = np.random.default_rng(0)
    x = noisy_graph.x + rng.normal(size=noisy_graph.x.shape).astype(np.float32)
    version = noisy_graph.replace(x=x, edges_private=noisy_graph.edges_public[:, ::3],
                                  edges_public=np.delete(noisy_graph.edges_public, np.s_[::3], axis=1))
    raw_y = noisy_graph.y.copy()
    raw_y[int(np.flatnonzero(noisy_graph.train_mask)[0])] = 2  # a class the version does not have
    base = evaluate_utility(version, noisy_graph, runs=1, seed_sequence=5, device="cpu", **QUICK)
    other = evaluate_utility(version, noisy_graph.replace(y=raw_y), runs=1, seed_sequence=5, device="cpu", **QUICK)
    assert set(base) >= {"private", "feature_only", "public_edges", "selected"}
    shareable = {k: v for k, v in base.items() if k != OWNER_ONLY}
    assert shareable == {k: v for k, v in other.items() if k != OWNER_ONLY}
    # a declared class count (the labels mechanism's num_classes) sizes the layer: also public
    declared = evaluate_utility(version, noisy_graph, runs=1, seed_sequence=5, device="cpu", label_classes=3, **QUICK)
    again = evaluate_utility(version, noisy_graph.replace(y=raw_y), runs=1, seed_sequence=5, device="cpu",
                             label_classes=3, **QUICK)
    assert {k: v for k, v in declared.items() if k != OWNER_ONLY} == {k: v for k, v in again.items() if k != OWNER_ONLY}


def test_evaluate_utility_detects_feature_noise(graph):
    rng = np.random.default_rng(0)
    private = graph.replace(x=rng.normal(size=graph.x.shape).astype(np.float32))
    res = evaluate_utility(private, graph, runs=2, seed_sequence=0, device="cpu")
    assert res[OWNER_ONLY]["clean"]["test_acc_mean"] > res["private"]["test_acc_mean"]


def test_the_feature_only_floor_is_the_same_model_without_edges(graph):
    """``edges="none"``: the GCN over no edge is an MLP (each node's closed neighbourhood is
    itself); on a graph whose private edges are all its edges it equals ``edges="public"``
    exactly. evaluate_utility reports it beside the GNN, the per-run choice by validation
    accuracy, and the paired t-test between the two."""
    from privgraph.evaluate.training import fit_node_classifier
    from privgraph.evaluate.selection import paired_test

    g = graph.replace(edges_public=np.zeros((2, 0), np.int64), edges_private=graph.edges("all"))
    none = fit_node_classifier(g, seed=3, edges="none", **FAST).result
    assert none == fit_node_classifier(g, seed=3, edges="public", **FAST).result
    noise = np.random.default_rng(0).integers(0, g.num_nodes, (2, 3000))  # structure that hides the classes
    noise = np.unique(np.sort(noise[:, noise[0] != noise[1]], axis=0), axis=1)
    private = g.replace(edges_private=noise)
    res = evaluate_utility(private, g, runs=3, seed_sequence=1, device="cpu", **FAST)
    floor, gnn, sel = res["feature_only"], res["private"], res["selected"]
    assert floor["test_acc_mean"] > gnn["test_acc_mean"] + 0.1, (floor, gnn)  # random edges drown the features
    assert sel["models"] == ["feature_only"] * 3 and sel["test_acc"] == floor["test_acc"]
    t = res["gnn_vs_feature_only"]
    assert t["runs"] == 3 and t["mean_difference"] < 0 and t["pvalue"] < 0.05, t
    assert t == paired_test(gnn["test_acc"], floor["test_acc"])
    assert paired_test([0.5], [0.4])["pvalue"] is None
    with pytest.raises(ValueError, match="edges='none'.*KProp"):
        fit_node_classifier(g, seed=3, edges="none", kprop_features=2, **FAST)


def test_evaluate_utility_refuses_different_splits(graph):
    moved = graph.test_mask.copy()
    moved[np.flatnonzero(moved)[0]] = False
    with pytest.raises(ValueError, match="test_mask .* differs"):
        evaluate_utility(graph.replace(test_mask=moved), graph, runs=1, seed_sequence=0)
    with pytest.raises(ValueError, match="test_mask is missing from the private"):
        evaluate_utility(graph.replace(test_mask=None), graph, runs=1, seed_sequence=0)
    with pytest.raises(ValueError, match="nodes"):
        evaluate_utility(two_communities(100), graph, runs=1, seed_sequence=0)
    with pytest.raises(ValueError, match="runs"):
        evaluate_utility(graph, graph, runs=0, seed_sequence=0)
    with pytest.raises(TypeError, match="seed"):
        evaluate_utility(graph, graph, runs=1, seed_sequence=0, seed=1)


# -- CUDA and real data --------------------------------------------------------------------------
@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_trains_on_cuda(graph):
    state = torch.cuda.get_rng_state()
    res = train_node_classifier(graph, seed=0, device="cuda")
    assert res["device"].startswith("cuda")
    assert res["test_acc"] > 0.9
    assert torch.equal(torch.cuda.get_rng_state(), state)
    assert train_node_classifier(graph, seed=0, device="auto")["device"].startswith("cuda")


@pytest.mark.dataset
@pytest.mark.parametrize("aggr", ["mean", "gcn"])
def test_gcn_on_clean_cora(aggr, cora):
    assert (cora.num_nodes, cora.num_features, cora.num_edges) == (2708, 1433, 5278)
    accs = [train_node_classifier(cora, seed=s, aggr=aggr)["test_acc"] for s in range(2)]
    assert np.mean(accs) >= 0.75


@pytest.mark.dataset
def test_dense_offset_features_still_train(cora):
    """Privatized features are dense with a common offset (FeatureRR maps 0 to 1/k): training
    centres them; without that, input dropout over 1,433 offset columns stopped Cora training
    (train accuracy 0.14)."""
    shifted = cora.replace(x=(0.5 + 0.5 * cora.x).astype(np.float32))
    r = train_node_classifier(shifted, seed=1, epochs=80, patience=None)
    assert r["train_acc"] > 0.95 and r["test_acc"] > 0.7


# -- progress ----------------------------------------------------------------------------------
def test_evaluate_utility_reports_each_training_with_k_of_n(noisy_graph):
    """Both models of every run count: a start event, then 1..2 runs, each with an ETA (the last
    one 0) and a label; the results are those of a run without a callback."""
    from privgraph.evaluate.progress import ProgressEvent

    events: list[ProgressEvent] = []
    res = evaluate_utility(noisy_graph, noisy_graph, runs=2, seed_sequence=4, device="cpu",
                           progress=events.append, **FAST)
    assert [(e.task, e.done, e.total) for e in events] == [("training", k, 6) for k in range(7)]
    assert events[0].eta is None and events[-1].eta == 0.0
    assert all(e.eta is not None and e.eta >= 0 for e in events[1:])
    floor = "private graph without edges (feature-only floor)"
    assert [e.detail for e in events[1:]] == [
        "clean graph, run 1/2", f"{floor}, run 1/2", "private graph, run 1/2",
        "clean graph, run 2/2", f"{floor}, run 2/2", "private graph, run 2/2",
    ]
    assert len({e.key for e in events}) == 1
    assert events[-1].line().startswith("training 6/6, done in ")
    assert res == evaluate_utility(noisy_graph, noisy_graph, runs=2, seed_sequence=4, device="cpu", **FAST)


def test_the_public_edges_alone_are_a_candidate_when_the_released_private_edges_are_noise(graph):
    """A version with public edges and (released) private edges: evaluate_utility also trains the
    same model over the public edges alone (``public_edges``) and chooses per run among floor,
    public edges and all edges by validation accuracy. Private edges that are pure noise make the
    GNN over all edges worse than the public edges alone; the choice follows validation."""
    noise = np.random.default_rng(5).integers(0, graph.num_nodes, (2, 4000))
    noise = np.unique(np.sort(noise[:, noise[0] != noise[1]], axis=0), axis=1)
    pub = {tuple(e) for e in graph.edges_public.T}
    noise = noise[:, [tuple(e) not in pub for e in noise.T]]
    version = graph.replace(edges_private=noise)
    events: list = []
    res = evaluate_utility(version, graph, runs=3, seed_sequence=2, device="cpu", progress=events.append, **FAST)
    assert events[-1].total == 12  # clean, all edges, floor, public edges: 4 per run
    gnn, pub_only, floor, sel = res["private"], res["public_edges"], res["feature_only"], res["selected"]
    assert pub_only["test_acc_mean"] > gnn["test_acc_mean"] + 0.1, (pub_only, gnn)
    assert pub_only["test_acc_mean"] > floor["test_acc_mean"], (pub_only, floor)
    assert set(sel["models"]) <= {"feature_only", "public_edges", "gnn"} and "public_edges" in sel["models"]
    by_name = {"feature_only": floor, "public_edges": pub_only, "gnn": gnn}
    assert sel["test_acc"] == [by_name[m]["test_acc"][i] for i, m in enumerate(sel["models"])]
    assert "public_edges_on_raw_labels" in res[OWNER_ONLY]
    # the same model over the public edges is fit_node_classifier(edges="public") with the run's seed
    from privgraph.seeding import as_seed_sequence, partition_seeds
    from privgraph.evaluate.training import fit_node_classifier

    s0 = partition_seeds(as_seed_sequence(2), 3)[0]
    assert fit_node_classifier(version, seed=s0, edges="public", device="cpu", **FAST).result["test_acc_own_labels"] \
        == pub_only["test_acc"][0]
    # a version without private edges has no such candidate
    assert "public_edges" not in evaluate_utility(graph, graph, runs=1, seed_sequence=0, device="cpu", **FAST)
