"""The attacks on graphs where the answer is known (issue 11).

A model that has the edges must give them away (AUC near 1 for LinkTeller, well above chance for
link stealing); a model that never saw them must score chance (0.5 within sampling error).
Deterministic under a seed; bad inputs refused with one line naming the problem.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from sklearn.metrics import roc_auc_score

from privgraph.evaluate.attacks import (
    bootstrap_auc_ci,
    link_stealing_supervised,
    link_stealing_unsupervised,
    linkteller,
    membership_inference,
    membership_shadow,
    precision_at_k,
    private_edge_pairs,
    roc_auc,
)
from privgraph.evaluate.attacks.pairs import pair_keys
from privgraph.errors import GraphValidationError
from privgraph.graph import GraphData
from privgraph.evaluate.training import fit_node_classifier


def planted(seed: int, n: int = 1000, m: int = 1500, d: int = 16, homophily: bool = False) -> GraphData:
    """Random private edges; features and labels independent of them unless ``homophily``
    (then edges join nodes of one class, whose features share a mean)."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 3, n)
    x = rng.normal(size=(n, d)) + (np.eye(3, d)[y] * 2.0 if homophily else 0.0)
    keys: set[tuple[int, int]] = set()
    while len(keys) < m:
        u, v = rng.integers(0, n, 2)
        if u != v and (not homophily or y[u] == y[v]):
            keys.add((min(u, v), max(u, v)))
    e = np.array(sorted(keys)).T
    split = rng.permutation(n)
    masks = {name: np.isin(np.arange(n), split[a:b]) for name, a, b in
             (("train_mask", 0, n // 2), ("val_mask", n // 2, 3 * n // 4), ("test_mask", 3 * n // 4, n))}
    return GraphData(num_nodes=n, x=x.astype(np.float32), y=y, edges_public=np.zeros((2, 0), np.int64),
                     edges_private=e, **masks)


@pytest.fixture(scope="module")
def graph() -> GraphData:
    return planted(0, homophily=True)


@pytest.fixture(scope="module")
def with_edges(graph):
    return fit_node_classifier(graph, seed=1, epochs=100, patience=None)


@pytest.fixture(scope="module")
def without_edges(graph):
    return fit_node_classifier(graph, seed=1, epochs=100, patience=None, edges="public")  # never saw them


# -- scoring ---------------------------------------------------------------------------------------
def test_roc_auc_is_the_mann_whitney_statistic_with_ties_one_half():
    rng = np.random.default_rng(3)
    s = rng.integers(0, 5, 300).astype(float)  # many ties
    y = rng.random(300) < 0.4
    assert roc_auc(s, y) == pytest.approx(roc_auc_score(y, s), abs=1e-12)
    assert roc_auc(np.ones(10), np.arange(10) < 5) == 0.5
    lo, hi = bootstrap_auc_ci(s, y, np.random.default_rng(0))
    assert lo <= roc_auc(s, y) <= hi and (lo, hi) == bootstrap_auc_ci(s, y, np.random.default_rng(0))
    assert precision_at_k(np.array([3.0, 2, 1, 0]), np.array([1, 0, 1, 0], bool)) == 0.5


def test_the_bootstrap_interval_is_the_roc_auc_of_each_resample():
    """The one-sort bootstrap gives exactly the percentiles of roc_auc over the resamples that
    draw the positives and then the negatives with replacement, from the same Generator."""
    rng = np.random.default_rng(4)
    s = np.round(rng.normal(size=400), 1)  # ties across the classes
    y = rng.random(400) < 0.3
    draws, pos, neg = np.random.default_rng(9), np.flatnonzero(y), np.flatnonzero(~y)
    aucs = []
    for _ in range(50):
        i = np.concatenate([draws.choice(pos, pos.size), draws.choice(neg, neg.size)])
        aucs.append(roc_auc(s[i], y[i]))
    lo, hi = bootstrap_auc_ci(s, y, np.random.default_rng(9), replicates=50, level=0.9)
    assert (lo, hi) == pytest.approx(tuple(np.quantile(aucs, [0.05, 0.95])), abs=1e-12)


def test_the_ridge_penalty_search_equals_one_solve_per_penalty():
    """Held-out errors from one eigendecomposition, and the weights solved on the smaller side,
    = those of the textbook (d + 1) x (d + 1) normal equations at each penalty, with fewer rows
    than columns and with more."""
    from privgraph.evaluate.attacks.attribute import RIDGE_GRID, _fold_errors, _predict, _ridge

    rng = np.random.default_rng(5)
    for n, d in ((40, 90), (120, 15)):
        f, f_out = (rng.random((n, d)) < 0.2).astype(float), (rng.random((20, d)) < 0.2).astype(float)
        w_true = rng.normal(size=(d, 3))
        y, y_out = f @ w_true + rng.normal(size=(n, 3)), f_out @ w_true + rng.normal(size=(20, 3))
        f1 = np.hstack([f, np.ones((n, 1))])
        direct = []
        for lam in RIDGE_GRID:
            reg = lam * np.eye(d + 1)
            reg[-1, -1] = 0.0  # the intercept unpenalized
            w = np.linalg.solve(f1.T @ f1 + reg, f1.T @ y)  # the textbook normal equations
            assert _ridge(f, y, lam) == pytest.approx(w, rel=1e-7, abs=1e-9)
            direct.append(((_predict(f_out, w) - y_out) ** 2).sum())
        assert _fold_errors(f, y, f_out, y_out, RIDGE_GRID) == pytest.approx(direct, rel=1e-9)


@pytest.mark.parametrize("labels", [np.ones(5, bool), np.zeros(5, bool)])
def test_one_class_is_refused(labels):
    with pytest.raises(GraphValidationError, match="positive and negative"):
        roc_auc(np.arange(5.0), labels)


# -- the pairs -------------------------------------------------------------------------------------
def test_pairs_are_private_edges_against_as_many_non_edges_of_v_pri(graph):
    s = private_edge_pairs(graph, np.random.default_rng(0), max_positive=300)
    n = graph.num_nodes
    keys = pair_keys(s.pairs, n)
    edges = set(pair_keys(graph.edges("all"), n).tolist())
    assert s.num_positive == 300 and s.labels.size == 600 and np.unique(keys).size == 600
    assert all(k in edges for k in keys[s.labels]) and not any(k in edges for k in keys[~s.labels])
    assert np.isin(s.pairs, graph.private_nodes()).all() and (s.pairs[0] < s.pairs[1]).all()
    again = private_edge_pairs(graph, np.random.default_rng(0), max_positive=300)
    assert np.array_equal(again.pairs, s.pairs)


def test_bad_pair_inputs_are_refused(graph):
    rng = np.random.default_rng(0)
    with pytest.raises(GraphValidationError, match="no private edges"):
        private_edge_pairs(graph.replace(edges_private=np.zeros((2, 0), np.int64)), rng)
    with pytest.raises(GraphValidationError, match="at least 10"):
        private_edge_pairs(graph.replace(edges_private=graph.edges_private[:, :5]), rng)
    clique = np.array([(u, v) for u in range(6) for v in range(u + 1, 6)]).T  # 15 edges, V_pri has no free pair
    with pytest.raises(GraphValidationError, match="non-adjacent pairs"):
        private_edge_pairs(graph.replace(edges_private=clique), rng)


# -- LinkTeller ------------------------------------------------------------------------------------
def test_linkteller_catches_the_edges_a_model_uses_and_nothing_else(graph, with_edges, without_edges):
    s = private_edge_pairs(graph, np.random.default_rng(0), max_positive=200)
    hit = linkteller(with_edges, s, np.random.default_rng(1))
    assert hit.auc > 0.95 and hit.auc_ci[0] > 0.9 and hit.metrics["precision_at_k"] > 0.9, hit
    blind = linkteller(without_edges, s, np.random.default_rng(1))
    assert abs(blind.auc - 0.5) < 0.05, blind  # nothing to find: every influence is zero
    again = linkteller(with_edges, s, np.random.default_rng(1))
    assert again == hit  # deterministic under a seed


def test_linkteller_inductive_queries_another_graph(graph, with_edges):
    other = planted(5, homophily=True)  # the API serves a graph the model was not trained on
    s = private_edge_pairs(other, np.random.default_rng(0), max_positive=150)
    ei = other.to_pyg("all").edge_index
    r = linkteller(with_edges, s, np.random.default_rng(1), setting="inductive", x=other.x, edge_index=ei)
    assert r.auc > 0.95 and r.params["setting"] == "inductive"
    with pytest.raises(ValueError, match="inductive setting needs"):
        linkteller(with_edges, s, np.random.default_rng(1), setting="inductive")


# -- link stealing ---------------------------------------------------------------------------------
def test_link_stealing_finds_the_edges_and_invents_none(graph, with_edges):
    s = private_edge_pairs(graph, np.random.default_rng(0), max_positive=400)
    used = link_stealing_unsupervised(with_edges.query(), s, np.random.default_rng(1))
    assert used.auc > 0.8, used
    g = planted(1)  # features, labels and edges independent of each other: nothing to find without the edges
    s = private_edge_pairs(g, np.random.default_rng(0), max_positive=400)
    blind = link_stealing_unsupervised(
        fit_node_classifier(g, seed=1, epochs=100, patience=None, edges="public").query(), s, np.random.default_rng(1))
    assert abs(blind.auc - 0.5) < 0.07, blind
    assert blind.auc_ci[0] < 0.5 + 0.07 and set(used.metrics) >= {"auc_cosine", "auc_euclidean", "precision_at_k"}


def test_supervised_link_stealing_learns_from_a_shadow_graph(graph, with_edges):
    s = private_edge_pairs(graph, np.random.default_rng(0), max_positive=300)
    shadow_graph = planted(7, homophily=True)
    shadow_model = fit_node_classifier(shadow_graph, seed=2, epochs=100, patience=None)
    shadow = private_edge_pairs(shadow_graph, np.random.default_rng(2), max_positive=300)
    r = link_stealing_supervised(with_edges.query(), s, shadow_model.query(), shadow, np.random.default_rng(3))
    assert r.auc > 0.8 and r.params["shadow_pairs"] == 600, r
    assert r == link_stealing_supervised(with_edges.query(), s, shadow_model.query(), shadow, np.random.default_rng(3))


def test_unknown_distance_is_refused(graph, with_edges):
    s = private_edge_pairs(graph, np.random.default_rng(0), max_positive=50)
    with pytest.raises(ValueError, match="unknown distance 'jaccard'"):
        link_stealing_unsupervised(with_edges.query(), s, np.random.default_rng(0), metric="jaccard")


# -- membership ------------------------------------------------------------------------------------
def test_membership_finds_the_training_nodes_of_a_memorising_model():
    g = planted(2)  # random labels: only memorisation fits the training nodes
    model = fit_node_classifier(g, seed=1, epochs=300, patience=None, dropout=0.0, weight_decay=0.0, edges="public")
    assert model.result["train_acc"] > 0.95
    r = membership_inference(model.query(), g.train_mask, g.test_mask, np.random.default_rng(0),
                             signal="true_label", labels=g.y)
    assert r.auc > 0.8 and set(r.metrics) == {"precision_at_k", "auc_confidence", "auc_entropy"}, r
    flat = np.full((g.num_nodes, 3), 1 / 3)  # a model that reveals nothing
    assert membership_inference(flat, g.train_mask, g.test_mask, np.random.default_rng(0)).auc == 0.5
    with pytest.raises(GraphValidationError, match="no split"):
        membership_inference(flat, np.zeros(g.num_nodes, bool), g.test_mask, np.random.default_rng(0))


def _small_split(g: GraphData, seed: int) -> GraphData:
    """200 training, 100 validation, 200 test nodes: 500 left for the adversary's shadow model."""
    order = np.random.default_rng(seed).permutation(g.num_nodes)
    masks = {name: np.isin(np.arange(g.num_nodes), order[a:b]) for name, a, b in
             (("train_mask", 0, 200), ("val_mask", 200, 300), ("test_mask", 300, 500))}
    return g.replace(**masks)


def test_shadow_membership_learns_overfitting_from_its_own_model_and_finds_nothing_in_a_flat_one():
    from privgraph.evaluate.attacks.membership import shadow_split

    g = _small_split(planted(2), 0)  # random labels: only memorisation fits the training nodes
    fit = dict(epochs=300, patience=None, dropout=0.0, weight_decay=0.0, edges="public")
    # both models are selected on their own training nodes, i.e. at their most memorised epoch:
    # on random labels, selection by validation accuracy is a coin toss that the CPU's float
    # rounding decides (an AVX-512 machine picked epoch 36 and the attack scored 0.63)
    target = fit_node_classifier(g.replace(val_mask=g.train_mask), seed=1, **fit)
    s_tr, s_val, s_out = shadow_split(g.train_mask, g.test_mask, np.ones(g.num_nodes, bool), np.random.default_rng(3))
    assert (s_tr.sum(), s_val.sum(), s_out.sum()) == (200, 200, 200)
    assert not np.any((s_tr | s_val | s_out) & (g.train_mask | g.test_mask))
    shadow = fit_node_classifier(g.replace(train_mask=s_tr, val_mask=s_tr, test_mask=s_out), seed=2, **fit)
    args = (target.query(), g.train_mask, g.test_mask, shadow.query(), s_tr, s_out)
    r = membership_shadow(*args, np.random.default_rng(0), labels=g.y, shadow_labels=g.y)
    assert r.auc > 0.8, r  # the true label's posterior, learnt from the shadow: members are fitted, others not
    blind = membership_shadow(*args, np.random.default_rng(0))  # posteriors only: weaker, still above chance
    assert 0.55 < blind.auc < r.auc, blind
    again = membership_shadow(*args, np.random.default_rng(0), labels=g.y, shadow_labels=g.y)
    assert again.to_dict() == r.to_dict()  # deterministic under the Generator
    with pytest.raises(GraphValidationError, match="labels are needed for both"):
        membership_shadow(*args, np.random.default_rng(0), labels=g.y)
    flat = np.full((g.num_nodes, 3), 1 / 3)  # a target that reveals nothing
    assert membership_shadow(flat, g.train_mask, g.test_mask, shadow.query(), s_tr, s_out, np.random.default_rng(0)).auc == 0.5
    with pytest.raises(GraphValidationError, match="overlap the target's split"):
        membership_shadow(flat, g.train_mask, g.test_mask, flat, g.train_mask, s_out, np.random.default_rng(0))
    with pytest.raises(GraphValidationError, match="needs at least 20"):
        shadow_split(g.train_mask, ~g.train_mask, np.ones(g.num_nodes, bool), np.random.default_rng(0))


def test_the_suite_runs_the_shadow_attack_on_every_row():
    from privgraph.evaluate.attacks import run_attacks
    from privgraph.config.pipeline import EvaluateConfig

    g = _small_split(planted(0, homophily=True), 1)
    attacks = EvaluateConfig(attacks=["membership"]).attacks
    out = run_attacks(g, g, attacks, seed_sequence=3, epochs=30, patience=None)
    for row in ("clean", "without_private_edges", "private"):
        r = out[row]["membership_shadow"]
        assert 0.0 <= r["auc"] <= 1.0 and r["params"]["shadow_members"] == 200 and "test_acc" in r["shadow_model"]
    off = run_attacks(g, g, EvaluateConfig(attacks=[{"name": "membership", "shadow": False}]).attacks,
                      seed_sequence=3, epochs=30, patience=None)
    assert "membership_shadow" not in off["private"]
    assert off["private"]["membership"] == out["private"]["membership"]  # the shadow draws from its own seeds


@pytest.mark.parametrize("sparse", [False, True])
def test_linkteller_in_place_queries_equal_full_queries(graph, sparse):
    """The fast path (row u of the prepared input scaled in place) answers exactly what a full
    re-query with the perturbed features answers, dense (centred) and sparse (CSR) inputs alike."""
    g = graph
    if sparse:  # mostly zeros: the model takes CSR input
        x = np.where(np.random.default_rng(0).random(graph.x.shape) < 0.05, 1.0, 0.0).astype(np.float32)
        g = graph.replace(x=x)
    model = fit_node_classifier(g, seed=1, epochs=20, patience=None)
    assert (model.prepare().layout == torch.sparse_csr) == sparse
    s = private_edge_pairs(g, np.random.default_rng(0), max_positive=40)
    from privgraph.evaluate.attacks import linkteller_scores

    fast = linkteller_scores(model, s.pairs)
    slow = linkteller_scores(model, s.pairs, reuse_input=False)
    np.testing.assert_allclose(fast, slow, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("sparse, aggr", [(False, "mean"), (True, "mean"), (False, "gcn")])
def test_linkteller_local_queries_equal_full_forward_queries(graph, sparse, aggr):
    """A GCN's queries answered from the rows a perturbation reaches (_LocalGCN) give the scores
    of a full forward pass per query, pairs out of reach included (exactly 0)."""
    from privgraph.evaluate.attacks import linkteller_scores

    g = graph
    if sparse:
        x = np.where(np.random.default_rng(0).random(graph.x.shape) < 0.05, 1.0, 0.0).astype(np.float32)
        g = graph.replace(x=x)
    model = fit_node_classifier(g, seed=2, epochs=20, patience=None, aggr=aggr)
    s = private_edge_pairs(g, np.random.default_rng(1), max_positive=40)
    far = np.array([[0, 1], [g.num_nodes - 1, g.num_nodes - 2]])
    pairs = np.concatenate([s.pairs, far], axis=1)
    local = linkteller_scores(model, pairs)
    full = linkteller_scores(model, pairs, local=False)
    np.testing.assert_allclose(local, full, rtol=1e-7, atol=1e-10)
    assert np.all((local == 0) == (full == 0)) and local.max() > 0


# -- attribute inference ---------------------------------------------------------------------------
def test_attribute_inference_reads_weak_noise_and_is_held_to_the_public_guess_by_strong_noise(graph):
    from privgraph.evaluate.attacks.attribute import attribute_inference
    from privgraph.mechanisms import build_mechanism

    rng = np.random.default_rng(0)
    x = (rng.random(graph.x.shape) < 0.3).astype(np.float32)  # 0/1 features, one common rate
    g = graph.replace(x=x, edges_public=graph.edges_private, edges_private=np.zeros((2, 0), np.int64))
    public = rng.random(g.num_nodes) < 0.5
    res = {}
    for eps in (0.5, 64.0):
        mech = build_mechanism("feature_rr", {"epsilon": eps, "bins": 2, "lower": 0.0, "upper": 1.0})
        released = x.copy()
        released[~public] = mech.privatize_rows(x[~public], np.random.default_rng(1))
        res[eps] = attribute_inference(g, released, public, mech.privatize_rows, np.random.default_rng(2))
    strong, weak = res[0.5], res[64.0]
    assert weak.auc > 0.95 and weak.metrics["nmse_attack"] < 0.2, weak
    assert abs(strong.auc - 0.5) < 0.1 and strong.metrics["nmse_attack"] > 0.8, strong
    assert strong.metrics["nmse_public_only"] > 0.95  # the features are independent of the graph here
    with pytest.raises(GraphValidationError, match="every feature row is public"):
        attribute_inference(g, x, np.ones(g.num_nodes, bool), mech.privatize_rows, np.random.default_rng(0))


def test_the_suite_scores_attribute_inference_once_on_the_release(graph):
    from privgraph.evaluate.attacks import run_attacks
    from privgraph.config.pipeline import EvaluateConfig
    from privgraph.mechanisms import build_mechanism

    mech = build_mechanism("feature_rr", {"epsilon": 64.0, "bins": 2, "lower": 0.0, "upper": 1.0})
    x = (np.random.default_rng(0).random(graph.x.shape) < 0.3).astype(np.float32)
    clean = graph.replace(x=x)
    public = np.arange(graph.num_nodes) % 2 == 0
    released = x.copy()
    released[~public] = mech.privatize_rows(x[~public], np.random.default_rng(1))
    attacks = EvaluateConfig(attacks=["attribute"]).attacks
    out = run_attacks(clean.replace(x=released), clean, attacks, seed_sequence=3, feature_mechanism=mech,
                      public_feature_rows=public, epochs=5, patience=None)
    assert out["private"]["attribute"]["auc"] > 0.95 and "attribute" not in out["clean"]
    none = run_attacks(clean.replace(x=released), clean, attacks, seed_sequence=3, epochs=5, patience=None)
    assert none["private"]["attribute"] == {"skipped": "no feature mechanism made this version's features"}


def test_the_suites_progress_counts_public_units_only():
    """Issue 24, leak 2: the attacks' progress total was the number of LinkTeller's query nodes,
    drawn from the raw private edges (``attacks 0/396`` against ``0/405`` after one more private
    edge), and progress lines reach Prefect's logs. Now the events (task, done, total, detail) are
    the same for graphs with different private edges; only timings differ."""
    from privgraph.evaluate.attacks import run_attacks
    from privgraph.config.pipeline import EvaluateConfig

    def events(g: GraphData) -> list[tuple]:
        seen = []
        attacks = EvaluateConfig(attacks=["linkteller", {"name": "membership", "shadow": False}]).attacks
        run_attacks(g, g, attacks, seed_sequence=3, epochs=3, patience=None,
                    progress=lambda e: seen.append((e.task, e.done, e.total, e.detail)))
        return seen

    g = planted(0, n=300, m=450)
    fewer = g.replace(edges_private=g.edges_private[:, : g.edges_private.shape[1] // 3])
    a, b = events(g), events(fewer)
    assert a == b and a[-1][1] == a[-1][2] == 3 * (2 + 20)  # 3 models x (2 attacks + LinkTeller's 20 steps)
