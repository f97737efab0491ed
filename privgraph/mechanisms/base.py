"""Mechanism protocol, the Guarantee record, and parameter validation.

A mechanism is built from its parameters, validated at once (``TypeError`` for a wrong type,
``ValueError`` naming the parameter, the allowed range and the value), declares what it promises
as a :class:`Guarantee` (data, not prose), and privatizes with randomness taken only from the
``numpy.random.Generator`` passed in.
"""

from __future__ import annotations

import dataclasses
import enum
import math
import numbers
from typing import Any, ClassVar, Protocol, runtime_checkable

import numpy as np

__all__ = [
    "GuaranteeKind",
    "Scope",
    "Guarantee",
    "Mechanism",
    "check_epsilon",
    "check_probability",
    "check_int",
    "check_generator",
    "epsilon_upper",
]


class GuaranteeKind(str, enum.Enum):
    """The neighbouring relation and measure a guarantee is stated in."""

    FEATURE_LDP = "feature_ldp"  # pure eps-LDP on one node's feature vector
    LABEL_LDP = "label_ldp"  # pure eps-LDP on one node's label
    EDGE_DP = "edge_dp"  # pure eps-DP, neighbouring graphs differ in one (private) edge
    EDGE_LDP = "edge_ldp"  # pure eps-LDP on one node's neighbour list (one bit changes)
    RDP = "rdp"  # Renyi DP (alpha, eps), e.g. DP-SGD training


class Scope(str, enum.Enum):
    """The part of the graph a guarantee protects; budgets are capped per scope."""

    FEATURES = "features"
    EDGES = "edges"
    LABELS = "labels"


@dataclasses.dataclass(frozen=True)
class Guarantee:
    """What a mechanism promises, as data.

    Attributes:
        kind: the neighbouring relation and measure (:class:`GuaranteeKind`).
        epsilon: the privacy loss bound (rounded outward, never understated).
        scope: the protected part of the graph (:class:`Scope`).
        delta: for approximate DP (default: 0, pure DP).
        alpha: the Renyi order for RDP guarantees (default: ``None``).
        assumptions: the conditions the promise depends on, e.g. "feature bounds are public".
    """

    kind: GuaranteeKind
    epsilon: float
    scope: Scope
    delta: float = 0.0
    alpha: float | None = None
    assumptions: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "kind", GuaranteeKind(self.kind))
        object.__setattr__(self, "scope", Scope(self.scope))
        check_epsilon(self.epsilon, "epsilon", allow_zero=True)  # 0: reads no private data
        object.__setattr__(self, "epsilon", float(self.epsilon))
        object.__setattr__(self, "assumptions", tuple(self.assumptions))

    def check(self, epsilon: float, delta: float = 0.0) -> bool:
        """Is the mechanism private at ``(epsilon, delta)``? (like OpenDP's ``Measurement.check``)."""
        return self.epsilon <= epsilon and self.delta <= delta

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind.value,
            "epsilon": self.epsilon,
            "scope": self.scope.value,
            "delta": self.delta,
            "alpha": self.alpha,
            "assumptions": list(self.assumptions),
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Guarantee:
        return cls(
            kind=GuaranteeKind(d["kind"]),
            epsilon=float(d["epsilon"]),
            scope=Scope(d["scope"]),
            delta=float(d.get("delta", 0.0)),
            alpha=d.get("alpha"),
            assumptions=tuple(d.get("assumptions", ())),
        )


@runtime_checkable
class Mechanism(Protocol):
    """The protocol every privgraph mechanism follows.

    ``name`` is the registry name used in ``pipelines.yaml``; ``guarantee`` is available right
    after construction; ``params()`` returns the public parameters for the manifest.
    """

    name: ClassVar[str]

    @property
    def guarantee(self) -> Guarantee: ...

    def params(self) -> dict[str, Any]: ...


def epsilon_upper(value: float) -> float:
    """Round ``value`` up to the next float, so a float error never understates epsilon."""
    return float(np.nextafter(float(value), np.inf))


def check_epsilon(value: Any, name: str = "epsilon", *, allow_zero: bool = False) -> float:
    """Validate a privacy budget: a real number, not bool, finite and > 0 (or >= 0)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a real number, got {type(value).__name__} {value!r}")
    v = float(value)
    if math.isnan(v) or math.isinf(v):
        raise ValueError(f"{name} must be finite, got {v}")
    if v < 0 or (v == 0 and not allow_zero):
        op = ">= 0" if allow_zero else "> 0"
        raise ValueError(f"{name} must be {op}, got {v}")
    return v


def check_probability(value: Any, name: str, *, open_low: bool = False, open_high: bool = False) -> float:
    """Validate a probability in [0, 1] (optionally open at either end)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a real number, got {type(value).__name__} {value!r}")
    v = float(value)
    lo_ok = v > 0 if open_low else v >= 0
    hi_ok = v < 1 if open_high else v <= 1
    if math.isnan(v) or not (lo_ok and hi_ok):
        lo = "(0" if open_low else "[0"
        hi = "1)" if open_high else "1]"
        raise ValueError(f"{name} must be in {lo}, {hi}, got {v}")
    return v


def check_int(value: Any, name: str, *, minimum: int) -> int:
    """Validate an integer parameter >= ``minimum`` (bools rejected)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be an int, got {type(value).__name__} {value!r}")
    if int(value) < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {int(value)}")
    return int(value)


def check_generator(rng: Any) -> np.random.Generator:
    """Mechanisms take randomness only from a ``numpy.random.Generator`` passed in."""
    if not isinstance(rng, np.random.Generator):
        raise TypeError(
            f"rng must be a numpy.random.Generator (e.g. np.random.default_rng(seed_sequence)), "
            f"got {type(rng).__name__}"
        )
    return rng
