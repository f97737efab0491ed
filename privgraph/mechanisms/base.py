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

from privgraph.errors import ConfigError

__all__ = [
    "GuaranteeKind",
    "Scope",
    "SCOPE_UNITS",
    "Guarantee",
    "EpsilonRange",
    "MIN_EXACT_EPSILON",
    "MAX_EXACT_EPSILON",
    "Mechanism",
    "check_epsilon",
    "check_probability",
    "check_int",
    "check_generator",
    "epsilon_upper",
    "sum_upper",
]


class GuaranteeKind(str, enum.Enum):
    """The neighbouring relation and measure a guarantee is stated in."""

    FEATURE_LDP = "feature_ldp"  # pure eps-LDP on one node's feature vector
    LABEL_LDP = "label_ldp"  # pure eps-LDP on one node's label
    EDGE_DP = "edge_dp"  # pure eps-DP, neighbouring graphs differ in one (private) edge
    EDGE_LDP = "edge_ldp"  # pure eps-LDP on one node's neighbour list (one bit changes)
    NODE_DP = "node_dp"  # neighbouring graphs differ in ALL private edges of one node (added or removed)
    RDP = "rdp"  # Renyi DP (alpha, eps), e.g. DP-SGD training


class Scope(str, enum.Enum):
    """The part of the graph a guarantee protects; budgets are capped per scope."""

    FEATURES = "features"
    EDGES = "edges"
    LABELS = "labels"


#: The unit in which the ledger composes each scope: every guarantee of a scope is also stated
#: in its scope's unit, and budget caps are checked against that figure. Edges: edge-level DP
#: (neighbouring graphs differ in one private edge, i.e. relationship DP), which a per-node
#: (local) edge guarantee implies with a factor (DPRR and Warner RR: 2 eps, since both
#: endpoints report an edge; LocalLap: 2 eps1 + eps2).
SCOPE_UNITS: dict[Scope, GuaranteeKind] = {
    Scope.FEATURES: GuaranteeKind.FEATURE_LDP,
    Scope.LABELS: GuaranteeKind.LABEL_LDP,
    Scope.EDGES: GuaranteeKind.EDGE_DP,
}


@dataclasses.dataclass(frozen=True)
class Guarantee:
    """What a mechanism promises, as data.

    Attributes:
        kind: the neighbouring relation and measure (:class:`GuaranteeKind`).
        epsilon: the privacy loss bound in ``kind`` (rounded outward, never understated).
        scope: the protected part of the graph (:class:`Scope`).
        delta: for approximate DP (default: 0, pure DP).
        alpha: the Renyi order for RDP guarantees (default: ``None``).
        assumptions: the conditions the promise depends on, e.g. "feature bounds are public".
        unit_epsilon: the same promise in the scope's ledger unit (:data:`SCOPE_UNITS`), required
            when ``kind`` is not that unit (e.g. an ``edge_ldp`` guarantee states the ``edge_dp``
            figure it implies); ``None`` when ``kind`` is the unit (default: ``None``).
    """

    kind: GuaranteeKind
    epsilon: float
    scope: Scope
    delta: float = 0.0
    alpha: float | None = None
    assumptions: tuple[str, ...] = ()
    unit_epsilon: float | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "kind", GuaranteeKind(self.kind))
        object.__setattr__(self, "scope", Scope(self.scope))
        check_epsilon(self.epsilon, "epsilon", allow_zero=True)  # 0: reads no private data
        object.__setattr__(self, "epsilon", float(self.epsilon))
        object.__setattr__(self, "assumptions", tuple(self.assumptions))
        unit = SCOPE_UNITS[self.scope]
        if self.kind is GuaranteeKind.RDP or self.kind is unit:
            if self.unit_epsilon is not None and float(self.unit_epsilon) != self.epsilon:
                raise ValueError(
                    f"unit_epsilon applies to guarantees whose kind is not their scope's unit "
                    f"({unit.value} for {self.scope.value}); got kind {self.kind.value!r} with "
                    f"unit_epsilon {self.unit_epsilon!r} != epsilon {self.epsilon!r}"
                )
            object.__setattr__(self, "unit_epsilon", None)
            return
        if self.unit_epsilon is None:
            raise ValueError(
                f"a {self.kind.value!r} guarantee on {self.scope.value} must state the "
                f"{unit.value!r} epsilon it implies (unit_epsilon): the ledger composes "
                f"{self.scope.value} in {unit.value}"
            )
        u = check_epsilon(self.unit_epsilon, "unit_epsilon", allow_zero=True)
        object.__setattr__(self, "unit_epsilon", u)

    @property
    def unit_kind(self) -> GuaranteeKind:
        """The scope's ledger unit (:data:`SCOPE_UNITS`)."""
        return SCOPE_UNITS[self.scope]

    @property
    def ledger_epsilon(self) -> float:
        """The epsilon in the scope's unit: what the ledger composes and the caps are checked against."""
        return self.epsilon if self.unit_epsilon is None else self.unit_epsilon

    def check(self, epsilon: float, delta: float = 0.0) -> bool:
        """Is the mechanism private at ``(epsilon, delta)`` in its own ``kind``? (like OpenDP's
        ``Measurement.check``)."""
        return self.epsilon <= epsilon and self.delta <= delta

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind.value,
            "epsilon": self.epsilon,
            "scope": self.scope.value,
            "delta": self.delta,
            "alpha": self.alpha,
            "assumptions": list(self.assumptions),
            "unit_kind": self.unit_kind.value,
            "unit_epsilon": self.ledger_epsilon,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Guarantee:
        kind = GuaranteeKind(d["kind"])
        scope = Scope(d["scope"])
        eps = float(d["epsilon"])
        unit = d.get("unit_epsilon")
        if unit is None and kind is GuaranteeKind.EDGE_LDP and scope is Scope.EDGES:
            # ledgers written before the unit was recorded: every shipped per-node edge mechanism
            # implies at most 2 eps edge-level DP (DPRR, Warner RR: 2 eps; LocalLap: 2 eps1 + eps2)
            unit = 2.0 * eps  # exact in binary floating point
        return cls(
            kind=kind,
            epsilon=eps,
            scope=scope,
            delta=float(d.get("delta", 0.0)),
            alpha=d.get("alpha"),
            assumptions=tuple(d.get("assumptions", ())),
            unit_epsilon=None if (unit is None or kind is SCOPE_UNITS[scope] or kind is GuaranteeKind.RDP) else float(unit),
        )


#: The largest per-coordinate budget any sampler of privgraph realises exactly: the exact
#: Bernoulli (:func:`privgraph.mechanisms.sampling.bernoulli_exact`) realises every float64
#: probability >= 2^-54 exactly and smaller ones to 2^-106 absolute, i.e. the smallest output
#: probability e^-eps of a randomized response to a relative 2^-106 e^eps (6e-11 at eps = 50).
MAX_EXACT_EPSILON = 50.0
#: The smallest budget privgraph accepts: below it the float64 rounding of an output
#: probability (relative 2^-53) is no longer negligible against the privacy loss itself
#: (e^eps - 1 ~ eps), and noise scales 1/eps overflow the integer samplers' useful range.
MIN_EXACT_EPSILON = 2.0**-20


@dataclasses.dataclass(frozen=True)
class EpsilonRange:
    """The budgets for which a mechanism's sampler realises its stated output law exactly.

    Every mechanism declares one (``epsilon_range``, a class attribute) and its constructor
    refuses a budget outside it, so a configuration is refused when it is loaded, before any
    data is read (a budget of 1e308 would release the input; 1e-40 would fail late).

    Attributes:
        low, high: the inclusive bounds (default: :data:`MIN_EXACT_EPSILON`,
            :data:`MAX_EXACT_EPSILON`).
        note: why these bounds (which sampler, what it realises).
        per_coordinate: ``True`` when the configured epsilon is split over coordinates (features,
            sampled dimensions, bits): ``high`` then bounds the budget of ONE coordinate, which
            :meth:`check_coordinate` checks once the split is known (the public number of
            features), and the configured epsilon itself only has to reach ``low``
            (default: ``False``: ``[low, high]`` bounds the configured epsilon).
    """

    low: float = MIN_EXACT_EPSILON
    high: float = MAX_EXACT_EPSILON
    note: str = (
        "probabilities are realised exactly (or to a stated relative error far below epsilon) "
        "only in this range"
    )
    per_coordinate: bool = False

    def __post_init__(self) -> None:
        check_epsilon(self.low, "low")
        check_epsilon(self.high, "high")
        if self.low > self.high:
            raise ValueError(f"EpsilonRange: low {self.low} > high {self.high}")

    def check(self, value: Any, name: str = "epsilon", owner: str = "") -> float:
        """Validate a configured budget: a real, finite number > 0, at least ``low`` and (unless
        ``per_coordinate``) at most ``high``."""
        v = check_epsilon(value, name)
        hi = math.inf if self.per_coordinate else self.high
        if not self.low <= v <= hi:
            who = f"{owner}: " if owner else ""
            where = f"[{self.low:g}, {self.high:g}]" if not self.per_coordinate else f"[{self.low:g}, inf)"
            raise ValueError(
                f"{who}{name} = {v:g} is outside {where}, the range in which its sampler is exact "
                f"({self.note})"
            )
        return v

    def check_coordinate(self, value: float, what: str, owner: str = "") -> float:
        """Refuse a per-coordinate budget above ``high`` (see :data:`MAX_EXACT_EPSILON`)."""
        if value > self.high:
            who = f"{owner}: " if owner else ""
            raise ConfigError(  # a ValueError; exit code 2 from the CLI
                f"{who}{what} = {value:g} per coordinate exceeds {self.high:g}: float64 sampling "
                f"cannot realise output probabilities near e^-{value:g}, so the pure-DP guarantee "
                f"would not hold; use a smaller epsilon (or spread it over more coordinates)"
            )
        return value

    def to_dict(self) -> dict[str, Any]:
        return {"low": self.low, "high": self.high, "per_coordinate": self.per_coordinate, "note": self.note}


@runtime_checkable
class Mechanism(Protocol):
    """The protocol every privgraph mechanism follows.

    ``name`` is the registry name used in ``pipelines.yaml``; ``guarantee`` is available right
    after construction; ``params()`` returns the public parameters for the manifest;
    ``epsilon_range`` states the budgets its sampler realises exactly (the constructor refuses
    others). A mechanism that takes no budget (NonPriv-Part) has ``epsilon_range = None``.
    """

    name: ClassVar[str]
    epsilon_range: ClassVar[EpsilonRange | None]

    @property
    def guarantee(self) -> Guarantee: ...

    def params(self) -> dict[str, Any]: ...


def sum_upper(*terms: float) -> float:
    """``sum(terms)`` rounded toward +inf: the exact rational sum, or the next float above it
    (an epsilon computed as a sum is never understated by float rounding)."""
    from fractions import Fraction

    exact = sum((Fraction(float(t)) for t in terms), Fraction(0))
    f = float(exact)
    return f if Fraction(f) >= exact else float(np.nextafter(f, np.inf))


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
