"""The epsilon ranges of the feature and label mechanisms, at their boundaries.

Each mechanism states ``epsilon_range`` (base.EpsilonRange): the configured budget must reach
``low``; ``high`` bounds the budget of ONE coordinate (per_coordinate) or the configured budget
itself. The bounds pass and ``np.nextafter`` past them is refused: at construction when the
public parameters fix the split (theta, per-feature bounds, a given m), else at privatize time.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from privgraph.mechanisms import MECHANISMS, build_mechanism
from privgraph.mechanisms.base import MAX_EXACT_EPSILON, MIN_EXACT_EPSILON, EpsilonRange
from privgraph.mechanisms.features.scaled import MAX_COORDINATE_EPSILON

PER_COORDINATE = ["feature_rr", "laplace", "piecewise", "hybrid", "three_output", "pm_sub", "multibit"]
WHOLE = ["duchi", "label_rr"]
EXTRA: dict[str, dict[str, Any]] = {"label_rr": {"num_classes": 3}, "feature_rr": {"bins": 2}}
HIGH = MAX_EXACT_EPSILON
ABOVE = float(np.nextafter(HIGH, np.inf))
LOW = MIN_EXACT_EPSILON
BELOW = float(np.nextafter(LOW, 0.0))


def _build(name: str, **params: Any) -> Any:
    return build_mechanism(name, {**EXTRA.get(name, {}), **params})


def _run(m: Any, d: int) -> np.ndarray:
    if m.name == "label_rr":
        return m.privatize_labels(np.array([0, 1, 2, 1]), 3, np.random.default_rng(0))
    return m.privatize_rows(np.full((4, d), 0.3), np.random.default_rng(0))


@pytest.mark.parametrize("name", PER_COORDINATE + WHOLE)
def test_every_range_is_stated(name: str) -> None:
    r = MECHANISMS[name].epsilon_range
    assert isinstance(r, EpsilonRange)
    assert r.low == LOW and r.high == HIGH == MAX_COORDINATE_EPSILON
    assert r.per_coordinate is (name in PER_COORDINATE)
    assert len(r.note) > 40 and r.note != EpsilonRange().note  # a reason, not the default text
    assert r.to_dict()["per_coordinate"] is r.per_coordinate


@pytest.mark.parametrize("name", PER_COORDINATE + WHOLE)
def test_low_bound(name: str) -> None:
    """low passes (and the sampler runs there on one feature / label); the next float below is
    refused at construction."""
    _run(_build(name, epsilon=LOW), 1)
    with pytest.raises(ValueError, match=rf"{name}: epsilon = .* is outside"):
        _build(name, epsilon=BELOW)


@pytest.mark.parametrize("name", WHOLE)
def test_whole_budget_high_bound(name: str) -> None:
    """Duchi and label RR spend the configured epsilon on one vector / one label: 50 passes and
    runs, the next float is refused at construction."""
    _run(_build(name, epsilon=HIGH), 3)
    with pytest.raises(ValueError, match=rf"{name}: epsilon = .* is outside \[.*, 50\]"):
        _build(name, epsilon=ABOVE)


# Parameters that fix the number of coordinates at construction, and the budget that gives each
# coordinate exactly ``HIGH`` (eps / d = 50 for Laplace and FeatureRR's uniform split, eps / k with
# k = min(d, floor(eps / c)) for the sampled ones).
AT_LOAD: dict[str, tuple[dict[str, Any], float]] = {
    "feature_rr": ({"theta": [1.0, 0.0]}, HIGH),  # eps_i = eps * 1
    "laplace": ({"lower": [0.0, 0.0], "upper": [1.0, 1.0]}, 2 * HIGH),
    "piecewise": ({"lower": [0.0], "upper": [1.0]}, HIGH),
    "hybrid": ({"lower": [0.0], "upper": [1.0]}, HIGH),
    "three_output": ({"lower": [0.0], "upper": [1.0]}, HIGH),
    "pm_sub": ({"lower": [0.0], "upper": [1.0]}, HIGH),
    "multibit": ({"m": 1}, HIGH),
}
# Without those parameters d is known at privatize time: the d and budget giving HIGH per coordinate.
AT_RUN: dict[str, tuple[int, float]] = {
    "feature_rr": (2, 2 * HIGH),
    "laplace": (2, 2 * HIGH),
    "piecewise": (2, 2 * HIGH),  # k = min(2, 40) = 2
    "hybrid": (2, 2 * HIGH),
    "three_output": (2, 2 * HIGH),
    "pm_sub": (2, 2 * HIGH),
    "multibit": (2, 2 * HIGH),  # m* = min(2, floor(100 / 2.18)) = 2
}


@pytest.mark.parametrize("name", PER_COORDINATE)
def test_coordinate_high_bound_at_construction(name: str) -> None:
    """When the split is fixed by the parameters, a coordinate budget of exactly 50 passes (and
    runs) and the next float above is refused when the mechanism is built (a config is refused
    at load time, before any data is read)."""
    params, eps = AT_LOAD[name]
    m = _build(name, epsilon=eps, **params)
    d = 2 if name in ("feature_rr", "laplace") else (3 if name == "multibit" else 1)
    _run(m, d)
    with pytest.raises(ValueError, match=rf"{name}: .* per coordinate exceeds 50"):
        _build(name, epsilon=float(np.nextafter(eps, np.inf)), **params)


@pytest.mark.parametrize("name", PER_COORDINATE)
def test_coordinate_high_bound_at_privatize_time(name: str) -> None:
    """When d is known only from the data (public feature count), the configured budget is
    accepted at construction and the per-coordinate budget is checked when privatizing."""
    d, eps = AT_RUN[name]
    _run(_build(name, epsilon=eps), d)
    m = _build(name, epsilon=float(np.nextafter(eps, np.inf)))
    with pytest.raises(ValueError, match=rf"{name}: .* per coordinate exceeds 50"):
        _run(m, d)
    _run(m, d + 1)  # spread over one more coordinate: fine


def test_label_rr_range_replaces_its_own_check() -> None:
    """LabelRR's single budget is checked by its range alone (one message for every mechanism)."""
    with pytest.raises(ValueError, match="label_rr: epsilon = 50.5 is outside .* bernoulli_exact"):
        _build("label_rr", epsilon=50.5)


def test_feature_rr_per_feature_bounds_fix_d_at_load() -> None:
    """FeatureRR without theta but with per-feature bounds knows d (uniform split eps / d) at
    construction: 2 features at 100 pass, the next float is refused before any data is read."""
    _build("feature_rr", epsilon=2 * HIGH, lower=[0.0, 0.0], upper=[1.0, 1.0])
    with pytest.raises(ValueError, match="feature_rr: .* per coordinate exceeds 50"):
        _build("feature_rr", epsilon=float(np.nextafter(2 * HIGH, np.inf)), lower=[0.0, 0.0], upper=[1.0, 1.0])
