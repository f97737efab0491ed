"""The contract every registered mechanism keeps (one base test class, run per registry entry).

A new mechanism gets these checks by registering (``@register_mechanism``) and being added to ``VALID_PARAMS``.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

import numpy as np
import pytest

from privgraph.mechanisms import MECHANISMS, Guarantee, Mechanism, Scope, build_mechanism

# Minimal valid parameters per registry name (beyond ``epsilon``).
VALID_PARAMS: dict[str, dict[str, Any]] = {
    "feature_rr": {"bins": 4},
    "laplace": {},
    "duchi": {},
    "piecewise": {},
    "hybrid": {},
    "three_output": {},
    "pm_sub": {},
    "multibit": {"m": 2},
    "label_rr": {"num_classes": 3},
    "dprr": {"alpha": 0.8},
    "warner_rr": {},
    "local_lap": {"degree_share": 0.2},
    "edge_rand": {},
    "lapgraph": {"count_share": 0.05},
    "edge_rr": {"rounds": 2},
    "priv_hrg": {},
    "gap": {"encoder_dim": 4},
    "class_counts": {},
    "blink": {"degree_share": 0.2},
}

# Mechanisms that read no private data and take no budget (their guarantee is epsilon 0).
BUDGETLESS: dict[str, dict[str, Any]] = {"nonpriv_part": {}}

BAD_EPSILONS = [
    (float("nan"), ValueError),
    (float("inf"), ValueError),
    (0.0, ValueError),
    (-0.5, ValueError),
    (True, TypeError),
    ("1", TypeError),
    (None, TypeError),
]


def test_every_mechanism_has_contract_params() -> None:
    assert set(VALID_PARAMS) | set(BUDGETLESS) == set(MECHANISMS)
    assert not set(VALID_PARAMS) & set(BUDGETLESS)


@pytest.mark.parametrize("name", sorted(BUDGETLESS))
def test_budgetless_mechanisms(name: str) -> None:
    m = build_mechanism(name, BUDGETLESS[name])
    assert m.guarantee.epsilon == 0.0 and m.guarantee.check(0.0)
    assert _plain(m.params()) and build_mechanism(name, m.params()).params() == m.params()
    with pytest.raises(ValueError, match="no parameter 'epsilon'"):
        build_mechanism(name, {"epsilon": 1.0})


def _plain(value: Any) -> bool:
    """Only JSON-able plain Python values (no numpy arrays or scalars)."""
    if isinstance(value, dict):
        return all(isinstance(k, str) and _plain(v) for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return all(_plain(v) for v in value)
    return value is None or type(value) in (bool, int, float, str)


@pytest.mark.parametrize("name", sorted(VALID_PARAMS))
class TestMechanismContract:
    def build(self, name: str, **over: Any) -> Any:
        return build_mechanism(name, {"epsilon": 1.0, **VALID_PARAMS[name], **over})

    def test_name_and_scope(self, name: str) -> None:
        cls = MECHANISMS[name]
        assert cls.name == name
        assert isinstance(cls.scope, Scope)

    @pytest.mark.parametrize("eps, exc", BAD_EPSILONS)
    def test_bad_epsilon_raises(self, name: str, eps: Any, exc: type) -> None:
        with pytest.raises(exc, match="epsilon"):
            MECHANISMS[name](epsilon=eps, **VALID_PARAMS[name])
        with pytest.raises(exc, match="epsilon"):
            self.build(name, epsilon=eps)

    def test_guarantee(self, name: str) -> None:
        m = self.build(name, epsilon=0.7)
        assert isinstance(m, Mechanism)
        g = m.guarantee
        assert isinstance(g, Guarantee)
        assert math.isfinite(g.epsilon) and g.epsilon >= 0.7
        assert g.scope is type(m).scope
        assert g.check(g.epsilon, g.delta) and not g.check(0.7 * (1 - 1e-9), g.delta)
        assert Guarantee.from_dict(json.loads(json.dumps(g.to_dict()))) == g

    def test_repr(self, name: str) -> None:
        m = self.build(name)
        r = repr(m)
        assert r.startswith(type(m).__name__ + "(") and "epsilon=1.0" in r

    def test_params_are_plain(self, name: str) -> None:
        p = self.build(name).params()
        assert p["epsilon"] == 1.0
        assert _plain(p), p
        assert not any(isinstance(v, np.ndarray) for v in p.values())
        json.dumps(p)
        # the params rebuild an equal mechanism
        assert build_mechanism(name, p).params() == p

    def test_unknown_parameter_is_a_value_error(self, name: str) -> None:
        with pytest.raises(ValueError, match=rf"{name}.*'nonsense'"):
            self.build(name, nonsense=3)

    def test_missing_epsilon_is_a_value_error(self, name: str) -> None:
        with pytest.raises(ValueError, match="epsilon"):
            build_mechanism(name, dict(VALID_PARAMS[name]))


def test_unknown_mechanism() -> None:
    with pytest.raises(ValueError, match=re.escape(f"unknown mechanism 'x'; known: {', '.join(sorted(MECHANISMS))}")):
        build_mechanism("x", {"epsilon": 1.0})


# -- one epsilon policy (issue 9, leak 5) -----------------------------------------------------------
@pytest.mark.parametrize("name", sorted(VALID_PARAMS))
def test_every_mechanism_states_the_range_in_which_it_is_exact(name: str) -> None:
    """Each mechanism declares ``epsilon_range``; the bounds themselves are accepted, the next
    floats outside are refused at construction (so a pipeline is refused when it is loaded)."""
    from privgraph.mechanisms.base import EpsilonRange

    cls = MECHANISMS[name]
    r = cls.epsilon_range
    assert isinstance(r, EpsilonRange) and r.note and 0 < r.low <= r.high < math.inf
    build = lambda eps: build_mechanism(name, {**VALID_PARAMS[name], "epsilon": eps})  # noqa: E731
    build(r.low)
    with pytest.raises(ValueError, match="epsilon"):
        build(float(np.nextafter(r.low, 0.0)))
    if not r.per_coordinate:
        build(r.high)
        with pytest.raises(ValueError, match="epsilon"):
            build(float(np.nextafter(r.high, np.inf)))
    for absurd in (1e-40, 1e308):
        with pytest.raises(ValueError):
            m = build(absurd)
            if r.per_coordinate:  # the split is known once the (public) feature count is
                m.privatize_rows(np.zeros((1, 4)), np.random.default_rng(0))


@pytest.mark.parametrize("eps", [1e308, 1e-40])
def test_absurd_budgets_are_refused_when_the_pipeline_is_loaded(eps: float) -> None:
    """``dprr`` at 1e308 released the exact graph; at 1e-40 it failed late with a NaN error."""
    from privgraph.config.loader import parse_config
    from privgraph.errors import ConfigError

    data = {"pipelines": {"p": {"dataset": {"name": "cora", "rho": 0.2},
                                "edges": {"mechanism": "dprr", "epsilon": eps}, "budget": {"edges": 1e308}}}}
    with pytest.raises(ConfigError, match=r"^pipelines\.p\.edges: .*epsilon") as info:
        parse_config(data)
    assert "\n" not in str(info.value) and "exact" in str(info.value)


# -- randomness: only from the Generator passed in ---------------------------------------------------
@pytest.fixture(scope="module")
def small_graph() -> Any:
    """120 nodes, 3 classes, 8 features in [0, 1], half the edges private, a train/val/test split."""
    from privgraph.ingest.datasets.split import random_node_split, split_public_private
    from privgraph.ingest.datasets.synthetic import sbm_graph

    g = sbm_graph(120, num_classes=3, avg_degree=6.0, num_features=8, seed=4)
    x = (g.x - g.x.min(0)) / (g.x.max(0) - g.x.min(0))
    masks = random_node_split(120, train=0.5, val=0.25, seed=1)
    g = g.replace(x=x.astype(np.float32), train_mask=masks[0], val_mask=masks[1], test_mask=masks[2])
    return split_public_private(g, 0.5, seed=3)


def _released(graph: Any) -> list[np.ndarray]:
    return [np.asarray(a) for a in (graph.x, graph.y, graph.edges_public, graph.edges_private)]


@pytest.mark.parametrize("name", sorted(n for n in MECHANISMS if hasattr(MECHANISMS[n], "privatize")))
def test_same_seed_same_release_and_no_global_rng(name: str, small_graph: Any) -> None:
    """Every mechanism that releases a graph: the same Generator seed gives the same release,
    another seed another one, numpy's global state is untouched, and anything but a
    ``numpy.random.Generator`` is refused."""
    m = build_mechanism(name, {**({"epsilon": 1.0} if name in VALID_PARAMS else {}), **VALID_PARAMS.get(name, BUDGETLESS.get(name, {}))})
    state = np.random.get_state()
    a, b, c = (_released(m.privatize(small_graph, np.random.default_rng(s))) for s in (42, 42, 43))
    after = np.random.get_state()
    assert after[0] == state[0] and np.array_equal(after[1], state[1]) and after[2:] == state[2:]
    for u, v in zip(a, b):
        np.testing.assert_array_equal(u, v)
    if m.guarantee.epsilon > 0:  # NonPriv-Part draws nothing
        assert any(u.shape != v.shape or not np.array_equal(u, v) for u, v in zip(a, c))
    for bad in (42, np.random.RandomState(0), None):
        with pytest.raises(TypeError, match="Generator"):
            m.privatize(small_graph, bad)
        if hasattr(m, "privatize_rows"):  # feature mechanisms: the row-level entry point too
            with pytest.raises(TypeError, match="Generator"):
                m.privatize_rows(small_graph.x, bad)
