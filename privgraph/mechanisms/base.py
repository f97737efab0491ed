"""Mechanism protocol, the exact-epsilon ranges, and parameter validation.

A mechanism is built from its parameters, validated at once (``TypeError`` for a wrong type,
``ValueError`` naming the parameter, the allowed range and the value), declares what it promises
as a :class:`~privgraph.guarantee.Guarantee` (data, not prose: the ground-floor module that the
ledger reads too), and privatizes with randomness taken only from the ``numpy.random.Generator``
passed in.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, ClassVar, Protocol, runtime_checkable

import numpy as np

from privgraph.errors import ConfigError
from privgraph.guarantee import Guarantee
from privgraph.guarantee.params import check_epsilon

__all__ = [
    "EpsilonRange",
    "MIN_EXACT_EPSILON",
    "MAX_EXACT_EPSILON",
    "FeatureMechanism",
    "Mechanism",
    "check_generator",
]


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


def check_generator(rng: Any) -> np.random.Generator:
    """Mechanisms take randomness only from a ``numpy.random.Generator`` passed in."""
    if not isinstance(rng, np.random.Generator):
        raise TypeError(
            f"rng must be a numpy.random.Generator (e.g. np.random.default_rng(seed_sequence)), "
            f"got {type(rng).__name__}"
        )
    return rng


class FeatureMechanism:
    """What every feature mechanism declares beyond :class:`Mechanism` (FeatureRR and the
    bounded-feature baselines subclass it), with the defaults of a release in feature units:

    - :meth:`output_range`: the interval every released value lies in (the checkpoint's feature
      suite checks it), ``None`` where the release is not bounded;
    - :meth:`estimate`: the released rows in feature units; an encoding (multibit, three-output,
      PM-SUB) overrides it with its unbiased estimate, post-processing of the release;
    - ``takes_scores``: whether HeteroRR's scores set its per-feature budgets (``theta``).

    >>> FeatureMechanism().output_range() is None
    True
    """

    takes_scores: ClassVar[bool] = False

    @classmethod
    def declares(cls, **declared: Any) -> bool:
        """Whether the class declares every ``attribute=value`` of ``declared``."""
        return all(getattr(cls, key) == value for key, value in declared.items())

    def output_range(self) -> tuple[float, float] | None:
        return None

    def estimate(self, released: np.ndarray) -> np.ndarray:
        return released
