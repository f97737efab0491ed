"""Correct and Smooth over a version (issue 26): a base model's predictions corrected and smoothed
along the public and released edges from the version's training labels, a candidate of the chosen
model."""

from __future__ import annotations

import numpy as np
import pytest

from privgraph.evaluate.correct_and_smooth import correct_and_smooth, release_correct_and_smooth
from privgraph.evaluate.label_propagation import label_propagation, propagation_operator, propagation_scores
from tests.test_public_reference import _two_communities


def _noise_posteriors(n: int, classes: int, seed: int) -> np.ndarray:
    p = np.random.default_rng(seed).random((n, classes))
    return p / p.sum(axis=1, keepdims=True)


def test_without_edges_it_is_the_base_model():
    """No edge: the residuals stay on the training nodes, so every other node keeps the base
    model's class (Huang et al.'s correction and smoothing both move along edges only)."""
    g = _two_communities()
    base = _noise_posteriors(g.num_nodes, 2, 1)
    s = propagation_operator(g.num_nodes, np.zeros((2, 0), np.int64))
    seeds = g.train_mask
    out = correct_and_smooth(s, base, g.y, seeds, 2)
    np.testing.assert_array_equal(out[~seeds].argmax(1), base[~seeds].argmax(1))
    np.testing.assert_array_equal(out[seeds].argmax(1), g.y[seeds])  # the training rows: their labels


def test_models_side_by_side_are_each_their_own():
    g = _two_communities(seed=3)
    s = propagation_operator(g.num_nodes, g.edges("all"))
    a, b = _noise_posteriors(g.num_nodes, 2, 1), _noise_posteriors(g.num_nodes, 2, 2)
    both = correct_and_smooth(s, np.concatenate([a, b], axis=1), g.y, g.train_mask, 2)
    np.testing.assert_allclose(both[:, :2], correct_and_smooth(s, a, g.y, g.train_mask, 2))
    np.testing.assert_allclose(both[:, 2:], correct_and_smooth(s, b, g.y, g.train_mask, 2))
    with pytest.raises(ValueError, match="multiple of num_classes"):
        correct_and_smooth(s, np.ones((g.num_nodes, 3)), g.y, g.train_mask, 2)
    with pytest.raises(ValueError, match="seed labels"):
        correct_and_smooth(s, a, g.y + 5, g.train_mask, 2)


def test_a_blind_base_model_is_lifted_to_label_propagation():
    """Noise predictions over informative edges: Correct and Smooth recovers what the edges carry
    (within 2 points of label propagation) and is far above the base model."""
    g = _two_communities(seed=4)
    seeds = g.train_mask
    base = _noise_posteriors(g.num_nodes, 2, 7)
    s = propagation_operator(g.num_nodes, g.edges("all"))
    cs = propagation_scores(g, seeds, correct_and_smooth(s, base, g.y, seeds, 2), 2, None)["test_acc_own_labels"]
    lp = propagation_scores(g, seeds, label_propagation(g.num_nodes, g.edges("all"), g.y, seeds, 2), 2,
                            None)["test_acc_own_labels"]
    blind = float((base[g.test_mask].argmax(1) == g.y[g.test_mask]).mean())
    assert cs >= lp - 0.02 and cs > blind + 0.3, (cs, lp, blind)


def test_a_good_base_model_is_kept_where_the_edges_say_nothing():
    """Edges between random pairs and a base model right on 90% of the nodes: the corrected and
    smoothed predictions stay within 5 points of the base model (label propagation alone is near
    chance)."""
    g = _two_communities(seed=5)
    rng = np.random.default_rng(6)
    n = g.num_nodes
    noise = np.stack([rng.integers(0, n, 4 * n), rng.integers(0, n, 4 * n)])
    right = np.where(rng.random(n) < 0.9, g.y, 1 - g.y)
    base = np.full((n, 2), 0.2)
    base[np.arange(n), right] = 0.8
    s = propagation_operator(n, noise)
    acc = propagation_scores(g, g.train_mask, correct_and_smooth(s, base, g.y, g.train_mask, 2), 2, None)
    base_acc = float((right[g.test_mask] == g.y[g.test_mask]).mean())
    assert acc["test_acc_own_labels"] >= base_acc - 0.05, (acc, base_acc)


def test_the_release_is_weighted_on_validation():
    """An oracle release (the private edges as they are) over sparse public edges is used; a
    release of random pairs is left out or weighted down, and then the result is no worse on
    validation than over the public edges alone."""
    g = _two_communities(seed=4)
    rng = np.random.default_rng(5)
    sparse = g.replace(edges_public=g.edges_public[:, rng.random(g.edges_public.shape[1]) < 0.15])
    bases = {"feature_only": _noise_posteriors(g.num_nodes, 2, 1)}
    good = release_correct_and_smooth(sparse, bases, 2)
    alone = release_correct_and_smooth(sparse.replace(edges_private=np.zeros((2, 0), np.int64)), bases, 2)
    assert alone["release_weight"] == 0.0 and good["release_weight"] in (0.25, 0.5, 1.0)
    assert good["test_acc_own_labels"] > alone["test_acc_own_labels"] + 0.05, (good, alone)
    m = g.edges_private.shape[1]
    pairs = np.unique(np.sort(rng.integers(0, g.num_nodes, (2, m)), axis=0), axis=1)
    public = set(map(tuple, sparse.edges_public.T.tolist()))
    keep = [i for i, (u, v) in enumerate(pairs.T.tolist()) if u != v and (u, v) not in public and (v, u) not in public]
    junk = sparse.replace(edges_private=pairs[:, keep])
    r = release_correct_and_smooth(junk, bases, 2, raw_y=g.y)
    assert r["val_acc"] >= alone["val_acc"] and r["base"] == "feature_only" and "test_acc" in r
    assert release_correct_and_smooth(g, {}, 2) is None
    assert release_correct_and_smooth(g.replace(train_mask=np.zeros(g.num_nodes, bool)), bases, 2) is None


def test_every_evaluation_offers_it_as_a_candidate():
    """It runs in every evaluation over the models trained there (the floor, the public edges
    alone, the GNN), per run; the owner's record has it on the raw labels; recomputed from the
    version alone (no clean graph) it is the same."""
    from privgraph.evaluate.utility import evaluate_utility

    g = _two_communities(seed=4)
    kw = dict(runs=2, seed_sequence=5, public_train=np.ones(g.num_nodes, bool), hidden=8, epochs=5,
              patience=None, device="cpu")
    m = evaluate_utility(g, g, **kw)
    cs = m["correct_and_smooth"]
    assert len(cs["test_acc"]) == 2 and set(cs["base"]) <= {"feature_only", "public_edges", "gnn"}
    assert all(w in (0.0, 0.25, 0.5, 1.0) for w in cs["release_weight"])
    assert "correct_and_smooth_on_raw_labels" in m["owner_only"]
    again = evaluate_utility(g, None, **kw)
    assert again["correct_and_smooth"] == cs and again["selected"] == m["selected"]
    # the chosen model is never below any candidate on validation: it is a candidate like the others
    assert set(m["selected"]["models"]) <= {"public_only", "feature_only", "public_edges", "release_propagation",
                                            "gnn", "correct_and_smooth"}


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=pytest.mark.skipif(
    not __import__("torch").cuda.is_available(), reason="needs CUDA"))])
def test_propagation_is_eq_4_iterated_on_any_device(device):
    """:func:`propagate` (torch CSR products on a device) is Zhou et al.'s eq. 4 iterated, as the
    plain scipy loop computes it, to rounding; on an operator with unsorted columns too."""
    from privgraph.evaluate.label_propagation import propagate

    rng = np.random.default_rng(4)
    n = 500
    s = propagation_operator(n, rng.integers(0, n, (2, 4000)))
    f0 = rng.random((n, 6))
    ref = f0.copy()
    for _ in range(50):
        ref = 0.9 * (s @ ref) + 0.1 * f0
    np.testing.assert_allclose(propagate(s, f0, device=device), ref, rtol=0, atol=1e-12)
    shuffled = s.copy()
    for i in range(n):  # the same matrix, each row's columns stored in reverse
        a, b = shuffled.indptr[i], shuffled.indptr[i + 1]
        shuffled.indices[a:b] = shuffled.indices[a:b][::-1].copy()
        shuffled.data[a:b] = shuffled.data[a:b][::-1].copy()
    shuffled.has_sorted_indices = False
    np.testing.assert_allclose(propagate(shuffled, f0, alpha=0.5, iterations=7, device=device),
                               propagate(s, f0, alpha=0.5, iterations=7), rtol=0, atol=1e-12)


@pytest.mark.parametrize("weighted", [False, True])
def test_the_operator_is_zhou_s_normalised_adjacency(weighted):
    """:func:`propagation_operator` against a dense construction: each undirected pair once (listed
    twice, in either direction: its largest weight), no self-loop, ``D^-1/2 W D^-1/2``, an isolated
    node's row zero; its columns sorted (torch's CSR invariants)."""
    rng = np.random.default_rng(9)
    n = 60
    e = rng.integers(0, n - 1, (2, 700))  # node n - 1 stays isolated
    w = rng.choice([0.25, 0.5, 1.0, 2.0], e.shape[1]) if weighted else np.ones(e.shape[1])
    dense = np.zeros((n, n))
    for (u, v), x in zip(e.T, w):
        if u != v:
            dense[u, v] = dense[v, u] = max(dense[u, v], x)
    deg = dense.sum(1)
    inv = np.where(deg > 0, deg, 1.0) ** -0.5 * (deg > 0)
    s = propagation_operator(n, e, w if weighted else None)
    np.testing.assert_allclose(s.toarray(), inv[:, None] * dense * inv[None, :], rtol=0, atol=1e-15)
    assert s.has_sorted_indices and s.nnz == int((dense > 0).sum())
    assert not s.toarray()[n - 1].any()
