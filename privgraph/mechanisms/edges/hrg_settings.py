"""What EdgeRR and privHRG share: the budget's split (:data:`HRG_EPSILON_RANGE`,
:func:`split_budget`), their settings' checks, and the chain's steps per leaf from the PUBLIC
convergence check (:func:`chosen_steps`, :func:`fit_schedule`;
:mod:`privgraph.mechanisms.hrg.convergence`).
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable
from typing import Any

from privgraph.errors import ValidationFailedError
from privgraph.guarantee.params import check_epsilon
from privgraph.mechanisms.base import MIN_EXACT_EPSILON, EpsilonRange
from privgraph.mechanisms.hrg.blocks import LeafBlocks
from privgraph.mechanisms.hrg.mcmc import EXPONENT_RANGE, MAX_EXPONENT_EPSILON, Phase
from privgraph.mechanisms.sampling import DISCRETE_LAPLACE_RANGE

__all__ = ["HRG_EPSILON_RANGE", "split_budget", "check_steps", "check_threshold", "chosen_steps", "fit_schedule"]

#: The configured budget of EdgeRR and privHRG: eps = eps_e1 + eps_e2, each part checked with the
#: split (:func:`split_budget`): eps_e1 against the MCMC's range
#: (:data:`~privgraph.mechanisms.hrg.mcmc.EXPONENT_RANGE`, ``[2^-20, 13]``), eps_e2 against the
#: discrete Laplace noise's (:data:`~privgraph.mechanisms.sampling.DISCRETE_LAPLACE_RANGE`). The
#: bounds are those of the default split (``eps1_share = 0.5``): ``[2^-19, 26]``.
HRG_EPSILON_RANGE = EpsilonRange(
    low=2.0 * MIN_EXACT_EPSILON,
    high=2.0 * MAX_EXPONENT_EPSILON,
    note=(
        "epsilon = eps_e1 + eps_e2; eps_e1 = eps1_share * epsilon is the MCMC's exponent (one "
        "53-bit uniform per accept test: the neighbouring ratio e^eps_e1 is realised to a relative "
        "2^-53 e^eps_e1, so eps_e1 <= 13) and eps_e2 the discrete Laplace noise of the edge counts "
        "(in the range of sampling.DISCRETE_LAPLACE_RANGE); each part must be >= 2^-20 (both parts "
        "are checked with the split); [2^-19, 26] are the bounds at the default eps1_share 0.5"
    ),
)


def check_steps(value: Any, name: str) -> float:
    """Validate a steps-per-leaf count: a real number (not bool), finite, >= 0."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a real number, got {type(value).__name__} {value!r}")
    v = float(value)
    if not math.isfinite(v) or v < 0:
        raise ValueError(f"{name} must be finite and >= 0, got {v}")
    return v


def split_budget(epsilon: float, share: float, *, owner: str = "") -> tuple[float, float]:
    """``(eps1, eps2) = (share * epsilon, epsilon - eps1)`` with ``eps1 + eps2 <= epsilon`` in floats.

    ``eps1`` (the MCMC's exponent) is checked against
    :data:`~privgraph.mechanisms.hrg.mcmc.EXPONENT_RANGE`, ``eps2`` (the discrete Laplace noise of
    CalculateNoisyProb) against :data:`~privgraph.mechanisms.sampling.DISCRETE_LAPLACE_RANGE`; a
    ``ValueError`` names the part, prefixed by ``owner``.
    """
    epsilon = check_epsilon(epsilon, "epsilon")
    eps1 = epsilon * share
    eps2 = epsilon - eps1
    while eps2 > 0 and eps1 + eps2 > epsilon:  # never let float rounding overspend
        eps2 = math.nextafter(eps2, 0.0)
    if not (eps1 > 0 and eps2 > 0):
        raise ValueError(f"epsilon={epsilon} with eps1_share={share} leaves a budget of 0 for one part")
    EXPONENT_RANGE.check(eps1, "eps_e1 (eps1_share * epsilon: the MCMC's exponential-mechanism budget)", owner)
    DISCRETE_LAPLACE_RANGE.check(
        eps2, "eps_e2 (epsilon - eps_e1: the discrete Laplace noise of CalculateNoisyProb)", owner
    )
    return eps1, eps2


def check_threshold(value: Any, name: str) -> float:
    """A dendrogram probability threshold (``tau_b``, ``tau_c``): a finite real >= 0."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a real number, got {type(value).__name__} {value!r}")
    v = float(value)
    if not math.isfinite(v) or v < 0:
        raise ValueError(f"{name} must be finite and >= 0, got {v}")
    return v


def chosen_steps(configured: float | str, record: dict[str, Any], owner: str, what: str) -> float:
    """The chain's steps per leaf: the check's ``required_steps_per_leaf`` for ``"auto"``, else
    ``configured`` once it reaches it.

    Raises:
        ValidationFailedError: the public check did not pass within its cap, or ``configured`` is
            below what it requires (exit code 3; raised before the private chain runs).
    """
    if not record.get("passed"):
        raise ValidationFailedError(
            f"{owner}: the public convergence check did not pass within its cap of "
            f"{record.get('max_steps_per_leaf')} MCMC steps per leaf (R-hat < "
            f"{record.get('rhat_threshold')} on a public proxy of {record['proxy'].get('leaves')} "
            f"leaves): the chain cannot be charged as an exponential mechanism, refusing to release; "
            f"raise convergence_max_steps_per_leaf, set block_leaves (one chain per public block of at most "
            f"that many leaves; e.g. 256) or use another edge mechanism"
        )
    required = float(record["required_steps_per_leaf"])
    if configured == "auto":
        return required
    if float(configured) < required:
        raise ValidationFailedError(
            f"{owner}: the configured {what} = {float(configured):g} MCMC steps per leaf are below "
            f"what the public convergence check needs: {required:g} (= {record.get('safety_factor')} "
            f"x {record.get('passed_steps_per_leaf')}, the first budget whose {record.get('chains')} "
            f"chains on the public proxy reached R-hat < {record.get('rhat_threshold')}); set them to "
            f"'auto' or to at least {required:g}"
        )
    return float(configured)


def fit_schedule(
    make: Callable[[int, float, float | None], list[Phase]], steps: float | None, auto: bool,
    record: dict[str, Any], blocks: LeafBlocks | None,
) -> Callable[[int, float], list[Phase]] | list[Callable[[int, float], list[Phase]]]:
    """The ``schedule`` of :func:`~privgraph.mechanisms.hrg.fit.fit_hrg`: ``make(n, a_pri, steps)``,
    or with ``blocks`` one callable per block, each block at its own check's
    ``required_steps_per_leaf`` under ``auto`` (else every block at ``steps``)."""
    if blocks is None:
        return lambda n, a: make(n, a, steps)
    per_block = [float(b["required_steps_per_leaf"]) if auto else steps for b in record["per_block"]]
    return [lambda n, a, s=s: make(n, a, s) for s in per_block]
