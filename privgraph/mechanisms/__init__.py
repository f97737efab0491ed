"""Privacy mechanisms, their guarantees, and the registry used by ``pipelines.yaml``.

``MECHANISMS`` maps a registry name (a mechanism's ``name``) to its class: each class registers
itself with :func:`~privgraph.mechanisms.registry.register_mechanism` in its own module;
:func:`build_mechanism` constructs one from a name and a dict of parameters.

>>> build_mechanism("warner_rr", {"epsilon": 1.0}).params()
{'epsilon': 1.0}
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from typing import Any

from privgraph.guarantee import Guarantee, GuaranteeKind, Scope, epsilon_upper
from privgraph.guarantee.params import check_epsilon, check_int, check_probability
from privgraph.mechanisms.base import FeatureMechanism, Mechanism, check_generator
from privgraph.mechanisms.edges import DPRR, EdgeMechanism
from privgraph.mechanisms.features import FeatureRR
from privgraph.mechanisms.registry import MECHANISMS, register_mechanism

# importing the two packages above registered every mechanism (each class carries
# @register_mechanism in its own module)

__all__ = [
    "MECHANISMS",
    "build_at_epsilon",
    "build_mechanism",
    "edge_mechanisms",
    "feature_mechanisms",
    "register_mechanism",
    "takes_epsilon",
    "DPRR",
    "EdgeMechanism",
    "FeatureRR",
    "Guarantee",
    "GuaranteeKind",
    "Mechanism",
    "Scope",
    "check_epsilon",
    "check_generator",
    "check_int",
    "check_probability",
    "epsilon_upper",
]


def edge_mechanisms(**declared: Any) -> list[str]:
    """The names of the registered edge mechanisms whose class declares every
    ``attribute=value`` of ``declared``, sorted (for the messages that list them).

    >>> edge_mechanisms(runs_partitioned=True)
    ['dprr', 'warner_rr']
    """
    return sorted(n for n, c in MECHANISMS.items() if issubclass(c, EdgeMechanism) and c.declares(**declared))


def feature_mechanisms(**declared: Any) -> list[str]:
    """The names of the registered feature mechanisms whose class declares every
    ``attribute=value`` of ``declared``, sorted (for the messages that list them).

    >>> feature_mechanisms(takes_scores=True)
    ['feature_rr']
    """
    return sorted(n for n, c in MECHANISMS.items() if issubclass(c, FeatureMechanism) and c.declares(**declared))


def build_mechanism(name: str, params: Mapping[str, Any]) -> Mechanism:
    """Construct the mechanism registered as ``name`` from keyword ``params``.

    Raises:
        ValueError: ``name`` is not registered, ``params`` names a parameter the mechanism does
            not take or misses a required one, or a parameter value is out of range.
        TypeError: a parameter value has the wrong type (from the mechanism's own validation).
    """
    if not isinstance(name, str) or name not in MECHANISMS:
        known = ", ".join(sorted(MECHANISMS))
        raise ValueError(f"unknown mechanism {name!r}; known: {known}")
    if not isinstance(params, Mapping):
        raise TypeError(f"params of mechanism {name!r} must be a mapping, got {type(params).__name__}")
    cls = MECHANISMS[name]
    sig = inspect.signature(cls)
    keyword = (inspect.Parameter.KEYWORD_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    accepted = {p.name for p in sig.parameters.values() if p.kind in keyword}
    unknown = sorted(str(k) for k in params if k not in accepted)
    if unknown:
        raise ValueError(
            f"mechanism {name!r} has no parameter {unknown[0]!r}"
            + (f" (nor {', '.join(map(repr, unknown[1:]))})" if len(unknown) > 1 else "")
            + f"; its parameters: {', '.join(sorted(accepted))}"
        )
    missing = [
        p.name
        for p in sig.parameters.values()
        if p.name in accepted and p.default is inspect.Parameter.empty and p.name not in params
    ]
    if missing:
        raise ValueError(f"mechanism {name!r} needs parameter {missing[0]!r}")
    return cls(**params)


def takes_epsilon(name: str) -> bool:
    """Does the mechanism registered as ``name`` spend a budget (take ``epsilon``)?"""
    return "epsilon" in inspect.signature(MECHANISMS[name]).parameters


def build_at_epsilon(name: str, params: Mapping[str, Any], epsilon: float) -> Mechanism:
    """The mechanism ``name`` at ``epsilon`` (a comparison cell); one without a budget
    (NonPriv-Part) ignores it."""
    return build_mechanism(name, {**params, "epsilon": epsilon} if takes_epsilon(name) else dict(params))
