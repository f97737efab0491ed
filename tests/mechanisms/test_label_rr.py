"""LabelRR: the exact privacy loss of the kernel, the sampler against it, masks, the public class
count, validation.

Statistical tests use fixed seeds (they are deterministic as written); the stated false-failure
rates are what each test would have over random seeds.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from privgraph.graph import GraphData
from privgraph.guarantee import Guarantee, GuaranteeKind, Scope
from privgraph.mechanisms.features.feature_rr import worst_case_log_ratio
from privgraph.mechanisms.features.label_rr import LabelRR
from privgraph.mechanisms.randomized_response import (
    label_rr_flip_probability,
    label_rr_keep_probability,
    label_rr_transition_matrix,
)

EPSILONS = [1e-6, 0.1, 0.5, 1.0, math.log(9), 3.0, 8.0, 20.0, 50.0]
CLASSES = [2, 3, 4, 7, 10, 40]


# -- the exact privacy loss --------------------------------------------------------------------------
@pytest.mark.parametrize("c", CLASSES)
@pytest.mark.parametrize("eps", EPSILONS)
def test_column_ratio_is_exactly_e_eps(c: int, eps: float) -> None:
    P = label_rr_transition_matrix(eps, c)
    assert P.shape == (c, c)
    np.testing.assert_allclose(P.sum(axis=1), 1.0, rtol=1e-14)
    e = math.exp(eps)
    assert P[0, 0] == pytest.approx(e / (e + c - 1), rel=1e-14)
    assert P[0, 1] == pytest.approx(1 / (e + c - 1), rel=1e-14)
    # every column: max / min = e^eps
    ratios = P.max(axis=0) / P.min(axis=0)
    np.testing.assert_allclose(ratios, e, rtol=1e-14)
    w = worst_case_log_ratio(P)
    assert abs(w - eps) <= 1e-12 * max(1.0, eps)
    assert LabelRR(epsilon=eps).keep_probability(c) == pytest.approx(P[0, 0], rel=1e-15)
    assert label_rr_keep_probability(eps, c) + label_rr_flip_probability(eps, c) == pytest.approx(1.0, abs=1e-15)
    assert label_rr_flip_probability(eps, c) == pytest.approx((c - 1) / (e + c - 1), rel=1e-14)


@pytest.mark.parametrize("eps", [0.1, 1.0, math.log(9), 5.0])
def test_guarantee_boundary(eps: float) -> None:
    m = LabelRR(epsilon=eps, num_classes=4)
    g = m.guarantee
    assert isinstance(g, Guarantee)
    assert g.kind is GuaranteeKind.LABEL_LDP and g.scope is Scope.LABELS
    assert g.epsilon == eps
    assert g.check(eps) and not g.check(eps * (1 - 1e-9))
    assert "the number of classes is public" in g.assumptions
    assert worst_case_log_ratio(m.transition_matrix()) <= g.epsilon * (1 + 1e-12)


def test_guarantee_names_the_unperturbed_labels() -> None:
    g = LabelRR(epsilon=1.0, mask=["train_mask", "val_mask"]).guarantee
    assert any("train_mask | val_mask" in a and "public or withheld" in a for a in g.assumptions)
    assert not any("withheld" in a for a in LabelRR(epsilon=1.0).guarantee.assumptions)


# -- the sampler against the kernel --------------------------------------------------------------------
@pytest.mark.parametrize("c", [2, 3, 7])
@pytest.mark.parametrize("eps", [0.05, 1.0, 3.0])
def test_sampler_matches_transition_matrix(c: int, eps: float) -> None:
    """Chi-square of the outputs for every true class (alpha = 1e-3, false-failure rate 1e-3 each)."""
    n = 20_000
    m = LabelRR(epsilon=eps)
    P = m.transition_matrix(c)
    rng = np.random.default_rng(100 * c + int(eps * 10))
    for y in range(c):
        out = m.privatize_labels(np.full(n, y), c, rng)
        assert out.dtype == np.int64 and out.shape == (n,)
        counts = np.bincount(out, minlength=c)
        assert counts.size == c
        assert stats.chisquare(counts, n * P[y]).pvalue > 1e-3, (c, eps, y, counts)


def test_large_budget_keeps_labels() -> None:
    y = np.arange(1000) % 5
    out = LabelRR(epsilon=50.0).privatize_labels(y, 5, np.random.default_rng(0))
    np.testing.assert_array_equal(out, y)  # flip probability 8e-22


# -- graph interface ----------------------------------------------------------------------------------
def _graph(n: int = 300, c: int = 4, meta: dict | None = None) -> GraphData:
    rng = np.random.default_rng(0)
    idx = rng.permutation(n)
    train = np.zeros(n, bool)
    val = np.zeros(n, bool)
    test = np.zeros(n, bool)
    train[idx[:100]], val[idx[100:150]], test[idx[150:]] = True, True, True
    return GraphData(
        num_nodes=n, x=rng.random((n, 2)).astype(np.float32), y=rng.integers(0, c, n),
        edges_public=np.array([[0, 1], [1, 2]]), train_mask=train, val_mask=val, test_mask=test,
        meta=dict(meta or {}),
    )


def test_privatize_perturbs_only_masked_nodes() -> None:
    g = _graph()
    m = LabelRR(epsilon=0.01, num_classes=4, mask=["train_mask", "val_mask"])
    out = m.privatize(g, np.random.default_rng(1))
    inside = g.train_mask | g.val_mask
    np.testing.assert_array_equal(out.y[~inside], g.y[~inside])
    assert np.mean(out.y[inside] != g.y[inside]) > 0.5  # eps = 0.01: about 3/4 change
    np.testing.assert_array_equal(out.x, g.x)
    assert out is not g and np.array_equal(g.y, _graph().y)  # the input is not mutated
    # the same stream as privatize_labels on the masked labels
    direct = m.privatize_labels(g.y[np.flatnonzero(inside)], 4, np.random.default_rng(1))
    np.testing.assert_array_equal(out.y[inside], direct)


def test_privatize_all_nodes_and_a_single_mask_name() -> None:
    g = _graph()
    out = LabelRR(epsilon=0.01, num_classes=4).privatize(g, np.random.default_rng(2))
    assert np.mean(out.y != g.y) > 0.6
    out2 = LabelRR(epsilon=0.01, num_classes=4, mask="test_mask").privatize(g, np.random.default_rng(2))
    np.testing.assert_array_equal(out2.y[~g.test_mask], g.y[~g.test_mask])


def test_number_of_classes_must_be_public() -> None:
    g = _graph()
    with pytest.raises(ValueError, match="number of classes must be public"):
        LabelRR(epsilon=1.0).privatize(g, np.random.default_rng(0))
    out = LabelRR(epsilon=1.0).privatize(_graph(meta={"num_classes": 4}), np.random.default_rng(0))
    assert out.y.max() < 4
    with pytest.raises(ValueError, match="num_classes"):
        LabelRR(epsilon=1.0).privatize(_graph(meta={"num_classes": 1}), np.random.default_rng(0))
    # the public count may exceed the observed labels; labels beyond it are an error
    assert LabelRR(epsilon=1.0, num_classes=9).privatize(g, np.random.default_rng(0)).y.max() < 9
    with pytest.raises(ValueError, match=r"y: labels out of range \[0, 3\)"):
        LabelRR(epsilon=1.0, num_classes=3).privatize(g, np.random.default_rng(0))


def test_privatize_refusals() -> None:
    rng = np.random.default_rng(0)
    with pytest.raises(ValueError, match="y is None"):
        LabelRR(epsilon=1.0, num_classes=2).privatize(GraphData(num_nodes=3), rng)
    multi = GraphData(num_nodes=3, y=np.array([[0, 1], [1, 0], [1, 1]]))
    with pytest.raises(ValueError, match="single labels"):
        LabelRR(epsilon=1.0, num_classes=2).privatize(multi, rng)
    no_masks = GraphData(num_nodes=3, y=np.array([0, 1, 1]))
    with pytest.raises(ValueError, match="val_mask is None"):
        LabelRR(epsilon=1.0, num_classes=2, mask="val_mask").privatize(no_masks, rng)
    with pytest.raises(TypeError, match="GraphData"):
        LabelRR(epsilon=1.0, num_classes=2).privatize(np.zeros(3), rng)  # type: ignore[arg-type]


# -- labels, reproducibility, validation ---------------------------------------------------------------
@pytest.mark.parametrize(
    "y, exc, match",
    [
        (np.array([0, 1, 3]), ValueError, r"y: labels out of range \[0, 3\) \(num_classes, a public setting\)"),
        (np.array([0, -1, 2]), ValueError, r"y: labels out of range \[0, 3\)"),
        (np.array([0.0, 1.0]), TypeError, "y must hold integer labels"),
        (np.array([True, False]), TypeError, "y must hold integer labels"),
        (np.zeros((2, 2), dtype=int), ValueError, "y must be a 1-D"),
    ],
)
def test_bad_labels(y: np.ndarray, exc: type, match: str) -> None:
    with pytest.raises(exc, match=match) as err:
        LabelRR(epsilon=1.0).privatize_labels(y, 3, np.random.default_rng(0))
    if "out of range" in match:  # the rows and values are private: in the detail, not the message
        bad = [int(i) for i in np.flatnonzero((y < 0) | (y >= 3))]
        assert err.value.private_detail == {"rows": bad, "labels": y[bad].tolist(), "num_classes": 3}
        assert str(bad[0]) not in str(err.value).replace("[0, 3)", "")


def test_num_classes_resolution() -> None:
    m = LabelRR(epsilon=1.0, num_classes=3)
    assert m.privatize_labels([0, 1, 2], None, np.random.default_rng(0)).shape == (3,)
    with pytest.raises(ValueError, match="configured for 3"):
        m.privatize_labels([0, 1], 4, np.random.default_rng(0))
    with pytest.raises(ValueError, match="num_classes is needed"):
        LabelRR(epsilon=1.0).privatize_labels([0, 1], None, np.random.default_rng(0))
    with pytest.raises(ValueError, match="num_classes"):
        LabelRR(epsilon=1.0).transition_matrix(1)


@pytest.mark.parametrize(
    "eps, exc",
    [
        (float("nan"), ValueError), (float("inf"), ValueError), (-float("inf"), ValueError),
        (0.0, ValueError), (0, ValueError), (-1.0, ValueError), (50.5, ValueError),
        (True, TypeError), ("1", TypeError), (None, TypeError), ([1.0], TypeError),
    ],
)
def test_bad_epsilon(eps: object, exc: type) -> None:
    with pytest.raises(exc, match="epsilon"):
        LabelRR(epsilon=eps)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "kwargs, exc, name",
    [
        ({"num_classes": 1}, ValueError, "num_classes"),
        ({"num_classes": 0}, ValueError, "num_classes"),
        ({"num_classes": 2.0}, TypeError, "num_classes"),
        ({"num_classes": True}, TypeError, "num_classes"),
        ({"num_classes": "3"}, TypeError, "num_classes"),
        ({"mask": "train"}, ValueError, "mask"),
        ({"mask": ["train_mask", "nodes"]}, ValueError, "mask"),
        ({"mask": []}, ValueError, "mask"),
        ({"mask": 3}, TypeError, "mask"),
        ({"mask": [1]}, TypeError, "mask"),
    ],
)
def test_bad_parameters(kwargs: dict, exc: type, name: str) -> None:
    with pytest.raises(exc, match=name):
        LabelRR(epsilon=1.0, **kwargs)


def test_constructor_repr_params() -> None:
    with pytest.raises(TypeError):
        LabelRR(1.0)  # type: ignore[misc]
    m = LabelRR(epsilon=1.0)
    assert repr(m) == "LabelRR(epsilon=1.0, num_classes=None)"
    assert m.params() == {"epsilon": 1.0, "num_classes": None, "mask": None}
    m2 = LabelRR(epsilon=2, num_classes=7, mask="train_mask")
    assert m2.params() == {"epsilon": 2.0, "num_classes": 7, "mask": ["train_mask"]}
    assert LabelRR(**m2.params()).params() == m2.params()
    assert LabelRR(epsilon=1.0, mask=["val_mask", "train_mask", "val_mask"]).mask == ("val_mask", "train_mask")
    assert LabelRR.name == "label_rr" and LabelRR.scope is Scope.LABELS
