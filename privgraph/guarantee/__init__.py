"""What a mechanism promises, as data: the ground floor that mechanisms and the ledger both read.

A :class:`Guarantee` names the neighbouring relation and measure (:class:`GuaranteeKind`), the
budget, the protected part of the graph (:class:`Scope`) and the assumptions it depends on, and
states itself in its scope's ledger unit (:data:`SCOPE_UNITS`). The budget arithmetic that must
never understate epsilon (:func:`epsilon_upper`, :func:`sum_upper`) lives here too. The pattern
of dp_accounting's ``dp_event``: the record imports nothing above the parameter checks
(:mod:`privgraph.guarantee.params`).
"""

from __future__ import annotations

import dataclasses
import enum
from fractions import Fraction
from typing import Any

import numpy as np

from privgraph.guarantee.params import check_epsilon

__all__ = [
    "GuaranteeKind",
    "Scope",
    "SCOPE_UNITS",
    "Guarantee",
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

    A per-node edge guarantee states the edge-level figure the ledger composes (an edge is
    reported by both its endpoints):

    >>> g = Guarantee(GuaranteeKind.EDGE_LDP, 1.0, Scope.EDGES, unit_epsilon=2.0)
    >>> g.ledger_epsilon
    2.0
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


def sum_upper(*terms: float) -> float:
    """``sum(terms)`` rounded toward +inf: the exact rational sum, or the next float above it
    (an epsilon computed as a sum is never understated by float rounding)."""
    exact = sum((Fraction(float(t)) for t in terms), Fraction(0))
    f = float(exact)
    return f if Fraction(f) >= exact else float(np.nextafter(f, np.inf))


def epsilon_upper(value: float) -> float:
    """Round ``value`` up to the next float, so a float error never understates epsilon."""
    return float(np.nextafter(float(value), np.inf))
